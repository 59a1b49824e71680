"""A data-parallel training script for auto mode's torchrun tests (tests/device/test_auto_dist_gpu.py):
run by `torchrun --nproc_per_node 2 ... sm-profiler run --steps 2-4 -- auto_dist_train.py MODE
COMPILE OUT`. MODE is ddp or fsdp2, COMPILE a torch.compile mode (default, reduce-overhead).
torch.profiler records the same steps 2-4 on every rank (OUT/cupti.rankN.json): the test
compares each rank's launches with CUPTI's. OUT `none`: no torch.profiler of the script's own
(`sm-profiler run --torch` runs one); STEPS (default 6): the optimizer steps run."""

import os
import sys

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from auto_models import Block  # noqa: E402

mode, compile_mode, out = sys.argv[1], sys.argv[2], sys.argv[3]
steps = int(sys.argv[4]) if len(sys.argv) > 4 else 6
own_profiler = out != "none"
dist.init_process_group("nccl")
rank, local = dist.get_rank(), int(os.environ["LOCAL_RANK"])
torch.cuda.set_device(local)
torch.manual_seed(0)
model = Block(256).cuda()
if mode == "ddp":
    model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[local])
else:
    from torch.distributed.fsdp import fully_shard

    fully_shard(model)
step = torch.compile(model, mode=None if compile_mode == "default" else compile_mode)
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
x = torch.randn(64, 256, device="cuda")
prof = None
for i in range(steps):
    if i == 2 and own_profiler:
        torch.cuda.synchronize()
        prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA])
        prof.start()
    loss = step(x + rank).float().pow(2).mean()
    loss.backward()
    opt.step()  # sm-profiler run counts this as the end of step i
    opt.zero_grad(set_to_none=True)
    if i == 4 and own_profiler:
        torch.cuda.synchronize()
        prof.stop()
        prof.export_chrome_trace(os.path.join(out, f"cupti.rank{rank}.json"))
dist.barrier()
dist.destroy_process_group()
