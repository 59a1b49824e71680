"""A one-GPU training script for `sm-profiler run --torch` (tests/device/test_auto_torch_gpu.py):
Block(512) torch.compile'd (its Triton kernels instrumented, its matmuls cuBLAS's), SGD, STEPS
optimizer steps (default 9): `sm-profiler run --torch --steps 5-7 -- auto_torch_train.py`."""

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from auto_models import Block  # noqa: E402

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 9
torch.manual_seed(0)
model = Block(512).cuda()
step = torch.compile(model)
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
x = torch.randn(256, 512, device="cuda")
for _ in range(steps):
    loss = step(x).float().pow(2).mean()
    loss.backward()
    opt.step()  # sm-profiler run counts this as the end of a step
    opt.zero_grad(set_to_none=True)
torch.cuda.synchronize()
