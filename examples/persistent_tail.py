"""
Persistent kernels and the tail effect
======================================

In this example you will learn:

* how to profile a *persistent* kernel (grid = number of SMs, each program loops over tiles)
  and a one-program-per-tile kernel with a partial last wave;
* how to read SM occupancy: which SM ran which programs, when each SM went idle;
* what the load-imbalance line of the stats means, and why the last SMs finish late;
* how to put several launches in one trace (``snapshot`` + ``sm_profiler.trace.decode``).

Runs on a GPU, or without one in Triton's CPU interpreter. Under the interpreter programs run
one after another and the SM id is emulated (program id modulo 8), so the per-SM *assignment*
is what to look at there, not the times.
"""

# %%
# Motivation
# ----------
#
# A GPU runs a grid in waves: as many programs at once as fit on the SMs. With 165 tiles on 132
# SMs (one program per SM at a time), the first wave runs 132 tiles and the second only 33: for
# the whole second wave 99 SMs sit idle. That is the *tail*; Nsight reports it only as lower
# achieved occupancy. A persistent kernel (one program per SM looping over tiles) saves launch
# and scheduling overhead but not this: 165 tiles over 132 programs still gives 33 programs a
# second tile. With an in-kernel timeline the tail is visible directly: each SM's last end.
# Smaller tiles (here four times as many) make the work divide evenly over the SMs, but each
# tile does less work per byte loaded: even is not the same as fast. Measured on an H200 (132
# SMs; 165 tiles of 128 x 128, K = 4096): one program per tile 49 us (two programs fit on an SM,
# so the "second wave" runs beside the first and slows it), persistent 70 us (33 SMs compute a
# second tile while 99 wait: load imbalance 35% of the span), persistent with 660 tiles of
# 64 x 64 124 us with an imbalance of 1%. Your numbers will differ; the shape should not.

import os
import sys

import numpy as np
import torch

# Without a GPU, use Triton's CPU interpreter (must be set before triton is imported).
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
INTERPRET = os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")
DEVICE = "cpu" if INTERPRET else "cuda"

import triton  # noqa: E402
import triton.language as tl  # noqa: E402

import sm_profiler  # noqa: E402
from sm_profiler.report.stats import compute_stats, format_time, print_stats  # noqa: E402
from sm_profiler.triton_ops import (  # noqa: E402
    profiler_event_end,
    profiler_event_start,
    profiler_init,
)

TILE = tl.constexpr(0)

# %%
# Compute kernel
# --------------
#
# One kernel serves both launch styles: program p computes tiles p, p + P, p + 2P, ... where P
# is the grid size. With P = number of tiles that is one tile per program; with P = number of
# SMs it is a persistent kernel. One ``tile`` range per tile: cheap, and it does not disturb the
# K loop.


@triton.jit
def matmul_tiles(
    a_ptr,
    b_ptr,
    c_ptr,
    M,
    N,
    K,
    prof,
    BM: tl.constexpr,
    BN: tl.constexpr,
    BK: tl.constexpr,
    PROFILE: tl.constexpr,
):
    pid = tl.program_id(0)
    ctx = profiler_init(prof, pid, 0, ENABLED=PROFILE)
    tiles_n = tl.cdiv(N, BN)
    num_tiles = tl.cdiv(M, BM) * tiles_n
    for tile in range(pid, num_tiles, tl.num_programs(0)):
        ctx = profiler_event_start(ctx, TILE)
        rm = (tile // tiles_n) * BM + tl.arange(0, BM)
        rn = (tile % tiles_n) * BN + tl.arange(0, BN)
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k in range(0, K, BK):
            rk = k + tl.arange(0, BK)
            a = tl.load(a_ptr + rm[:, None] * K + rk[None, :])
            b = tl.load(b_ptr + rk[:, None] * N + rn[None, :])
            acc = tl.dot(a, b, acc)
        tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc.to(c_ptr.dtype.element_ty))
        # The end waits for the stored value: a store is fire-and-forget, acc is not.
        ctx = profiler_event_end(ctx, TILE, after=acc)


# %%
# Launcher
# --------
#
# One profiler per grid shape (a profiler's buffer has a fixed number of lanes); each launch is
# kept with ``snapshot(name)``, and ``sm_profiler.trace.decode`` puts all captures on one time axis.


def sm_count():
    if INTERPRET:
        return sm_profiler.wire.format.EMULATED_SM_COUNT
    return torch.cuda.get_device_properties(0).multi_processor_count


def problem(small, n_sms):
    """5 x ceil(SMs / 4) big tiles: about 1.25 tiles per SM; with half-size tiles, about 5."""
    tile = 16 if small else 128
    return dict(
        M=5 * tile,
        N=-(-n_sms // 4) * tile,
        K=32 if small else 4096,
        tile=tile,
        dtype=torch.float32 if small else torch.float16,
    )


def launch(a, b, grid, BM, BN, BK, name):
    M, K = a.shape
    N = b.shape[1]
    tiles = (M // BM) * (N // BN)
    prof = sm_profiler.SmProfiler(
        num_blocks=grid,
        max_events_per_group=2 * -(-tiles // grid),  # a begin and an end per tile
        device=DEVICE,
        kernel_name=name,
    )
    prof.register_event(0, "tile")
    c = torch.empty((M, N), device=a.device, dtype=a.dtype)
    matmul_tiles[(grid,)](
        a, b, c, M, N, K, prof.get_buffer(), BM=BM, BN=BN, BK=BK, PROFILE=True, num_warps=4
    )
    prof.snapshot(name)
    return c, prof


def tiles_per_sm(trace, capture):
    """How many tiles each SM computed in one capture: {sm: count}."""
    ev = trace.events
    sms = ev["sm"][(ev["capture"] == capture) & (ev["event"] == 0)]
    ids, counts = np.unique(sms, return_counts=True)
    return {int(s): int(n) for s, n in zip(ids, counts, strict=True)}


def tail_report(stats, tiles):
    """When each SM went idle, relative to the kernel's start: the last few and the spread."""
    last = stats.sms.last_end_ns - stats.span.start_ns
    order = np.argsort(last)
    late = ", ".join(f"SM {stats.sms.sm[i]} {format_time(last[i])}" for i in order[::-1][:3])
    imb = stats.imbalance
    return (
        f"{stats.label}: span {format_time(stats.span.duration_ns)}; tiles per SM "
        f"{min(tiles.values())}..{max(tiles.values())}; SMs go idle from "
        f"{format_time(last[order[0]])} to {format_time(last[order[-1]])} (latest: {late}); "
        f"load imbalance {imb.pct_of_span:.1f}% of the span"
    )


# %%
# Correctness and profiling output
# --------------------------------


def main(out_dir="sm_profiler_examples_out/persistent_tail", small=None):
    small = INTERPRET if small is None else small
    n_sms = sm_count()
    p = problem(small, n_sms)
    torch.manual_seed(0)
    a = torch.randn(p["M"], p["K"], device=DEVICE, dtype=p["dtype"])
    b = torch.randn(p["K"], p["N"], device=DEVICE, dtype=p["dtype"])
    ref = a.float() @ b.float()
    big, bk = p["tile"], 16 if small else 64
    tiles = (p["M"] // big) * (p["N"] // big)
    runs = [
        ("one_per_tile", tiles, big),  # a full wave, then a partial one
        ("persistent", min(n_sms, tiles), big),  # same tiles, one program per SM
        ("persistent_small_tiles", n_sms, big // 2),  # 4x the tiles: an even split
    ]
    profs = []
    for name, grid, t in runs:
        c, prof = launch(a, b, grid, t, t, bk, name)
        torch.testing.assert_close(c.float(), ref, atol=0.5, rtol=0.02)
        profs.append(prof)
    print(f"{tiles} tiles of {big}x{big} ({4 * tiles} of {big // 2}x{big // 2}) on {n_sms} SMs")

    trace = sm_profiler.decode([cap for prof in profs for cap in prof.captures()])
    print_stats(trace)
    stats = compute_stats(trace)
    print()
    for c, s in enumerate(stats.captures):
        print(tail_report(s, tiles_per_sm(trace, c)))

    os.makedirs(out_dir, exist_ok=True)
    paths = {"perfetto": os.path.join(out_dir, "persistent_tail.perfetto-trace")}
    from sm_profiler.export import export

    export(trace, paths["perfetto"])
    print(
        f"wrote {paths['perfetto']} (one track per SM, in SM order; look for the idle SMs at the end)"
    )
    try:
        from sm_profiler.export.plot import plot

        # One picture per launch: launches are microseconds long but milliseconds apart.

        for c, (name, _, _) in enumerate(runs):
            paths[f"png_{name}"] = os.path.join(out_dir, f"persistent_tail_{name}.png")
            plot(trace.select_capture(c), paths[f"png_{name}"], title=f"SM occupancy: {name}")
            print(f"wrote {paths[f'png_{name}']}")
    except sm_profiler.MissingDependencyError as e:
        print(f"no plot: {e}")
    return {"trace": trace, "stats": stats, "runs": runs, "n_sms": n_sms, "tiles": tiles, **paths}


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "sm_profiler_examples_out/persistent_tail")
