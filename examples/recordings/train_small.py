"""The training script behind the recordings in this folder (README.md beside it says which
command made each): a transformer-shaped MLP block, torch.compile'd (its Triton kernels are
what auto mode records; its matmuls are cuBLAS's, which only `--torch` sees), trained with SGD.

Under torchrun every rank trains its own copy and all-reduces its loss each step (gloo, so that
two ranks can share one GPU); rank r's batch is (4 + r) / 4 times rank 0's, so rank 1 is the
job's slowest rank by construction.

    python -m sm_profiler run --torch --steps 3-5 --out one_gpu -- train_small.py 8
    torchrun --nproc_per_node 2 -m sm_profiler run --steps 3-5 --out two_ranks -- train_small.py 8
"""

import os
import sys

import torch

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 8
rank, world = int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))
if world > 1:
    import torch.distributed as dist

    dist.init_process_group("gloo")


class Block(torch.nn.Module):
    def __init__(self, d: int):
        super().__init__()
        self.ln = torch.nn.LayerNorm(d)
        self.up = torch.nn.Linear(d, 4 * d)
        self.down = torch.nn.Linear(4 * d, d)

    def forward(self, x):
        return x + self.down(torch.nn.functional.gelu(self.up(self.ln(x))))


torch.manual_seed(0)
d = 512
model = torch.nn.Sequential(Block(d), Block(d)).cuda()
step = torch.compile(model)
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
x = torch.randn(64 * (4 + rank), d, device="cuda")
for _ in range(steps):
    loss = step(x).float().pow(2).mean()
    loss.backward()
    if world > 1:
        dist.all_reduce(loss.detach().cpu())
    opt.step()  # sm-profiler run counts each optimizer step as the end of a step
    opt.zero_grad(set_to_none=True)
torch.cuda.synchronize()
if world > 1:
    dist.destroy_process_group()
