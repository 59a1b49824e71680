"""
A training-like step on every GPU: many launches, no sync, one trace for all ranks
=================================================================================

In this example you will learn:

* how ``SmProfiler(..., slots=N)`` records N launches of several kernels without a host sync
  between them, each launch labelled with its kernel name, grid and call site by Triton's
  launch hook;
* how each rank (one process per GPU, as torchrun starts them) puts its clock on the host's
  time axis (``calibrate_clock``) and takes a stamp right after a barrier, and saves its
  captures;
* how rank 0 merges every rank's captures into one trace, GPU by GPU and SM by SM
  (``GPU r · SM s``; ``sm_profiler.merge_ranks``, the same as ``sm-profiler merge rank*.npz -o
  all.perfetto-trace``).

    torchrun --nproc_per_node=2 examples/multi_gpu_workload.py out/
    python examples/multi_gpu_workload.py out/     # one GPU, or the CPU interpreter

Without a GPU it runs one rank in Triton's CPU interpreter (host clock, emulated SMs).
"""

# %%
# Setup: the interpreter switch must be set before triton is imported.

import argparse
import os
import sys

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
INTERPRET = os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")

import triton  # noqa: E402
import triton.language as tl  # noqa: E402

import sm_profiler  # noqa: E402
from sm_profiler.triton_ops import (  # noqa: E402
    profiler_event_end,
    profiler_event_start,
    profiler_init,
)

SCALE, SHIFT = tl.constexpr(0), tl.constexpr(1)
BLOCK = 1024


# %%
# Two kernels of a "step": a longer one and a short one, each with one range per program.


@triton.jit
def scale_kernel(x, prof, ITERS: tl.constexpr, BLOCK: tl.constexpr):
    ctx = profiler_init(prof)
    ctx = profiler_event_start(ctx, SCALE)
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(x + offs)
    for _ in range(ITERS):
        v = v * 1.0001 + 1e-4
    tl.store(x + offs, v)
    ctx = profiler_event_end(ctx, SCALE, after=v)


@triton.jit
def shift_kernel(x, prof, BLOCK: tl.constexpr):
    ctx = profiler_init(prof)
    ctx = profiler_event_start(ctx, SHIFT)
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(x + offs) - 1e-4
    tl.store(x + offs, v)
    ctx = profiler_event_end(ctx, SHIFT, after=v)


# How merge_ranks put the ranks on one time axis (its info["method"]).
ALIGNED = {
    "clock": "aligned by each rank's clock samples (calibrate_clock: %globaltimer vs host)",
    "barrier": "aligned by the stamps each rank took right after a barrier",
    "none": "not aligned, times as recorded (the interpreter's are the host clock's)",
}


def step(x, buf, programs, iters):
    scale_kernel[(programs,)](x, buf, ITERS=iters, BLOCK=BLOCK)
    shift_kernel[(programs // 2,)](x, buf, BLOCK=BLOCK)


# %%
# One rank: record `steps` steps into slots, calibrate, save.


def run_rank(out_dir, steps=5):
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    dist = None
    if world > 1:
        import torch.distributed as dist

        dist.init_process_group("nccl" if not INTERPRET else "gloo")
    device = "cpu" if INTERPRET else f"cuda:{int(os.environ.get('LOCAL_RANK', rank))}"
    if not INTERPRET:
        torch.cuda.set_device(device)
    programs, iters = (4, 8) if INTERPRET else (132, 2000)
    prof = sm_profiler.SmProfiler(programs, 1, 2, device=device, slots=2 * steps)
    prof.register_event(0, "scale")
    prof.register_event(1, "shift")
    prof.metadata["rank"] = rank
    x = torch.rand(programs * BLOCK, device=device)
    step(x, prof.get_buffer(), programs, iters)  # compile outside the recorded steps
    if not INTERPRET:
        torch.cuda.synchronize()
        prof.calibrate_clock()
        if dist is not None:
            from sm_profiler.record.clock import barrier_stamp

            prof.metadata["barrier_ns"] = barrier_stamp()
    prof.init_buffer()
    for _ in range(steps):  # no sync inside: every launch takes the next slot
        step(x, prof.get_buffer(), programs, iters)
    if not INTERPRET:
        torch.cuda.synchronize()
        prof.calibrate_clock()  # a second sample: the drift
    path = os.path.join(out_dir, f"rank{rank}.npz")
    prof.save(path)
    prof.close()
    if dist is not None:
        dist.barrier()
    merged = None
    if rank == 0:
        files = [os.path.join(out_dir, f"rank{r}.npz") for r in range(world)]
        merged = os.path.join(out_dir, "workload.perfetto-trace")
        info = sm_profiler.merge_ranks(files, merged)
        ranks = f"{world} rank{'s' if world != 1 else ''}"
        print(f"{ranks} merged into {merged}:\n  {ALIGNED[info['method']]}")
        # shift_kernel runs half as many programs as the profiler has blocks (one buffer serves
        # both kernels): its launches leave half the lanes unused, and the stats say so once.
        print(
            f"shift_kernel runs {programs // 2} programs in a profiler sized for {programs}: "
            "the warning\nbelow about lanes never initialised is expected.\n"
        )
        sm_profiler.report.stats.print_stats(sm_profiler.decode(sm_profiler.load(files[0])))
    if dist is not None:
        dist.destroy_process_group()
    return merged


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="sm_profiler_examples_out/multi_gpu_workload")
    # Like every example: python examples/multi_gpu_workload.py [OUT_DIR]
    ap.add_argument("out_dir", nargs="?", metavar="OUT_DIR", help="the same as --out OUT_DIR")
    ap.add_argument("--steps", type=int, default=5)
    args = ap.parse_args(argv)
    if args.out_dir is not None:
        args.out = args.out_dir
    os.makedirs(args.out, exist_ok=True)
    return run_rank(args.out, args.steps)


if __name__ == "__main__":
    sys.exit(0 if main() is not None or int(os.environ.get("RANK", "0")) else 1)
