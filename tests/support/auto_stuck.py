"""A training loop whose GPU gets stuck (tests/device/test_auto_rescue_gpu.py), run by
`sm-profiler run --steps 2-3 -- auto_stuck.py KIND`: at step 6 it queues a kernel that never
ends and waits for it in torch.cuda.synchronize(), the state of a rank whose peer died inside
an all-reduce; a stop signal then finds the main thread blocked in a GPU wait. KIND "sleep":
torch.cuda._sleep(2**40), not instrumented; "spin": a Triton kernel, instrumented, spinning on a
flag nobody sets. It prints "stuck" once the kernel is queued."""

import os
import sys

import torch
import triton
import triton.language as tl

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from auto_models import Block  # noqa: E402

HANG_STEP = 6


@triton.jit
def spin_kernel(flag):
    while tl.load(flag, volatile=True) == 0:
        pass


torch.manual_seed(0)
model = Block(256).cuda()
step = torch.compile(model)
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
x = torch.randn(64, 256, device="cuda")
flag = torch.zeros(1, dtype=torch.int32, device="cuda")
for i in range(20):
    if i == HANG_STEP:
        if sys.argv[1] == "spin":
            spin_kernel[(1,)](flag)
        else:
            torch.cuda._sleep(2**40)
        print("stuck", flush=True)
        torch.cuda.synchronize()  # never returns
    loss = step(x).float().pow(2).mean()
    loss.backward()
    opt.step()  # sm-profiler run counts this as the end of step i
    opt.zero_grad(set_to_none=True)
    print(f"step {i} loss {loss.item():.4f}", flush=True)
