"""A DDP training step in which rank 1 fails (tests/device/test_auto_dist_gpu.py): run by
`torchrun --nproc_per_node 2 ... sm-profiler run --steps 2-3 -- auto_dist_kill.py`. Rank 1
raises at step 6; rank 0 then blocks in step 6's all-reduce (its `loss.item()` waits for it
forever) until torchrun stops it with SIGTERM: what it recorded in steps 2-3 must be written."""

import os
import sys

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from auto_models import Block  # noqa: E402

dist.init_process_group("nccl")
rank, local = dist.get_rank(), int(os.environ["LOCAL_RANK"])
torch.cuda.set_device(local)
torch.manual_seed(0)
model = torch.nn.parallel.DistributedDataParallel(Block(256).cuda(), device_ids=[local])
step = torch.compile(model)
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
x = torch.randn(64, 256, device="cuda")
for i in range(1000):
    if rank == 1 and i == 6:
        raise RuntimeError("rank 1 fails at step 6")
    loss = step(x + rank).float().pow(2).mean()
    loss.backward()
    opt.step()  # sm-profiler run counts this as the end of step i
    opt.zero_grad(set_to_none=True)
    print(f"rank {rank} step {i} loss {loss.item():.4f}", flush=True)  # blocks at step 6
