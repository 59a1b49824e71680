"""DDP-style steps under the flight recorder on two GPUs (tests/device/test_auto_flight_gpu.py),
run by `torchrun --nproc_per_node 2 -m sm_profiler run --flight-recorder ... -- auto_flight_dist.py
MODE`: each step runs the example's work_kernel and add_kernel on each rank, all-reduces their
output, reads one value back and calls prof.step().

MODE behind: rank 1 sleeps at the start of step 40 (a rank its peer waits for); rank 0 runs
step 40's kernels and blocks in its all-reduce. raise: rank 1 raises at the start of step 40;
rank 0 blocks in the all-reduce until torchrun stops it (SIGTERM). Prints "rank R stuck" when
it is about to be. Two GPUs and NCCL; or, with AUTO_FLIGHT_DIST_ONE_GPU=1, both ranks on one GPU
and gloo (the all-reduce then waits on the host, not in a GPU kernel)."""

import os
import sys
import time

import torch
import torch.distributed as dist

import sm_profiler.auto_mode

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from example_scripts import load_example  # noqa: E402

example = load_example("flight_recorder")
MODE = sys.argv[1]
BLOCK, PROGRAMS, N_ITER = 1024, 528, 5_000
# AUTO_FLIGHT_DIST_ONE_GPU=1: both ranks on GPU 0, all-reducing through gloo (the host): what one
# GPU can show of the same path where two are not lent.
one_gpu = os.environ.get("AUTO_FLIGHT_DIST_ONE_GPU") == "1"
dist.init_process_group("gloo" if one_gpu else "nccl")
rank, local = dist.get_rank(), int(os.environ["LOCAL_RANK"])
torch.cuda.set_device(0 if one_gpu else local)
prof = sm_profiler.auto_mode.current()
x = torch.rand(PROGRAMS * BLOCK, device="cuda")
y = torch.empty_like(x)
for i in range(200):
    if rank == 1 and i == 40:
        print(f"rank {rank} stuck", flush=True)
        if MODE == "behind":
            time.sleep(600)
        raise RuntimeError("rank 1 fails at step 40")
    example.work_kernel[(PROGRAMS,)](x, N_ITER, BLOCK=BLOCK)
    example.add_kernel[(PROGRAMS,)](x, y, BLOCK=BLOCK)
    if rank == 0 and i == 40:
        print(f"rank {rank} stuck", flush=True)
    dist.all_reduce(y)
    y[:1].item()  # rank 0, step 40: waits for rank 1 forever
    prof.step()
print(f"rank {rank} done", flush=True)
