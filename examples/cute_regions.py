"""
Profiling regions inside a CuteDSL kernel
=========================================

An elementwise SiLU over a large vector, written in CuteDSL, with its load / compute / store
phases recorded per warp group by ``cute_ops`` into an ``sm_profiler`` buffer.

You will learn about:

* creating a profiler handle inside a ``@cute.kernel`` with ``cute_ops.init`` and choosing who
  writes a lane (a leader thread per warp group),
* marking regions with ``with prof.region(E):`` and ``prof.start/end`` inside a run-time
  ``cutlass.range`` loop (the handle's cursor is carried like any loop variable),
* making a timestamp wait for a value with ``after=``,
* compiling the profiling away with a ``cutlass.Constexpr[bool]``,
* reading the result: ``print_stats`` and a Perfetto trace.

This needs a CUDA GPU and nvidia-cutlass-dsl (CuteDSL has no CPU interpreter); without them it
says so and exits.

    python examples/cute_regions.py [OUT_DIR] [--trace cute_regions.perfetto-trace]
"""

# %%
# Setup
# -----
# Without a GPU or CuteDSL there is nothing to run: say why and stop before importing them.

from __future__ import annotations

import argparse
import importlib.util
import os
import sys


def _missing() -> str | None:
    if importlib.util.find_spec("cutlass") is None:
        return "needs CuteDSL: pip install nvidia-cutlass-dsl==4.8.1"
    import torch

    if not torch.cuda.is_available():
        return "needs a CUDA GPU (CuteDSL kernels cannot run on the CPU)"
    return None


if __name__ == "__main__" and (_why := _missing()):
    print(f"examples/cute_regions.py: skipped, {_why}")
    sys.exit(0)

import cutlass  # noqa: E402
import cutlass.cute as cute  # noqa: E402
import torch  # noqa: E402
from cutlass import Float32, Int32  # noqa: E402
from cutlass.cute.runtime import from_dlpack  # noqa: E402

import cute_ops  # noqa: E402
from sm_profiler import SmProfiler  # noqa: E402

# Event ids are compile-time ints; SmProfiler.register_event gives them names on the host.
LOAD, COMPUTE, STORE = 0, 1, 2
WARP_GROUP = 128  # threads
THREADS = 2 * WARP_GROUP  # two warp groups per block, each with its own lane
ELEMS = 8  # elements per thread per tile
TILE = THREADS * ELEMS

# %%
# Kernel
# ------
# A persistent grid-stride loop over tiles. Each warp group records its own lane: group = warp
# group index, leader = its first thread. Every thread calls the ops (no `if leader:` needed);
# only the leader stores, with one 8-byte store per event.


@cute.kernel
def silu_kernel(
    x: cute.Tensor,
    y: cute.Tensor,
    num_tiles: Int32,
    prof_buf: cute.Tensor,
    PROFILE: cutlass.Constexpr[bool],
):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    grid, _, _ = cute.arch.grid_dim()
    prof = cute_ops.init(
        prof_buf, bidx, tidx // WARP_GROUP, leader=(tidx % WARP_GROUP) == 0, enabled=PROFILE
    )
    vals = cute.make_rmem_tensor(cute.make_layout(ELEMS), Float32)
    for tile in cutlass.range(bidx, num_tiles, grid, unroll=1):
        base = tile * TILE + tidx  # consecutive threads read consecutive elements: coalesced
        prof.start(LOAD)
        for j in cutlass.range_constexpr(ELEMS):
            vals[j] = x[base + j * THREADS]
        # A load's value is only waited for where it is used: `after=` makes the stamp wait for
        # the last element, so the load range covers the memory latency.
        prof.end(LOAD, after=vals[ELEMS - 1])
        with prof.region(COMPUTE, after=vals[ELEMS - 1]):
            for j in cutlass.range_constexpr(ELEMS):
                v = vals[j]
                vals[j] = v / (Float32(1.0) + cute.math.exp(-v))
        with prof.region(STORE):
            for j in cutlass.range_constexpr(ELEMS):
                y[base + j * THREADS] = vals[j]


# %%
# Launcher
# --------
# `cute.compile` once per shape and PROFILE value; the compiled function launches on the default
# stream, the one torch uses here.


@cute.jit
def silu_launch(
    x: cute.Tensor,
    y: cute.Tensor,
    num_tiles: Int32,
    grid: Int32,
    prof_buf: cute.Tensor,
    PROFILE: cutlass.Constexpr[bool],
):
    silu_kernel(x, y, num_tiles, prof_buf, PROFILE).launch(grid=(grid, 1, 1), block=(THREADS, 1, 1))


def silu(x: torch.Tensor, prof: SmProfiler | None = None, grid: int | None = None) -> torch.Tensor:
    if x.numel() % TILE:
        raise ValueError(f"x.numel()={x.numel()} must be a multiple of the tile, {TILE}")
    num_tiles = x.numel() // TILE
    grid = grid or min(num_tiles, torch.cuda.get_device_properties(0).multi_processor_count)
    y = torch.empty_like(x)
    buf = (
        prof.get_buffer() if prof is not None else torch.zeros(8, dtype=torch.int64, device="cuda")
    )
    args = (from_dlpack(x), from_dlpack(y), Int32(num_tiles), Int32(grid), from_dlpack(buf))
    silu_launch(*args, prof is not None and prof.enabled)
    return y


# %%
# Correctness
# -----------
# The profiled kernel computes what torch computes.


def test_silu_matches_torch(n: int = 1 << 22) -> None:
    x = torch.randn(n, device="cuda")
    torch.testing.assert_close(silu(x), torch.nn.functional.silu(x), rtol=1e-5, atol=1e-5)
    prof = SmProfiler(132, 2, 3 * 2 * 64)
    torch.testing.assert_close(silu(x, prof), torch.nn.functional.silu(x), rtol=1e-5, atol=1e-5)


# %%
# Profiling
# ---------
# One lane per (block, warp group); each lane holds 6 records per tile (3 ranges). Size the
# buffer for the tiles each block takes; overflowing lanes keep their first records and the
# decoder reports the dropped ones.


def main() -> None:
    ap = argparse.ArgumentParser()
    # Like every example: python examples/cute_regions.py [OUT_DIR]
    ap.add_argument("out_dir", nargs="?", default="sm_profiler_examples_out/cute_regions")
    ap.add_argument(
        "--trace", help="the trace's path (default: OUT_DIR/cute_regions.perfetto-trace)"
    )
    ap.add_argument("--n", type=int, default=1 << 24)
    args = ap.parse_args()
    if args.trace is None:
        os.makedirs(args.out_dir, exist_ok=True)
        args.trace = os.path.join(args.out_dir, "cute_regions.perfetto-trace")
    test_silu_matches_torch()
    print("silu matches torch")

    grid = torch.cuda.get_device_properties(0).multi_processor_count
    tiles_per_block = -(-(args.n // TILE) // grid)
    prof = SmProfiler(grid, 2, 6 * tiles_per_block, group_names=["wg0", "wg1"], kernel_name="silu")
    for eid, name in ((LOAD, "load"), (COMPUTE, "compute"), (STORE, "store")):
        prof.register_event(eid, name)
    x = torch.randn(args.n, device="cuda")
    silu(x, prof, grid)
    torch.cuda.synchronize()
    prof.print_stats()
    prof.export(args.trace)
    print(f"wrote {args.trace}: open it at https://ui.perfetto.dev")


if __name__ == "__main__":
    main()
