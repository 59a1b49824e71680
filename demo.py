"""sm_profiler demo: profile Triton matmuls inside the kernel and look at every SM.

    python demo.py                 # writes ./sm_profiler_demo_out/
    python demo.py --out DIR       # or: python demo.py DIR

With a CUDA GPU it runs real kernels; without one it switches on Triton's CPU interpreter
(TRITON_INTERPRET=1, before triton is imported) and runs the same kernels on small sizes. Under
the interpreter times come from the host clock, programs run one after another and SM ids are
emulated (program id modulo 8), so the pictures show the structure, not GPU timing.

What it records, in one trace:
  1. a persistent matmul (grid = number of SMs, each program loops over output tiles), launched
     twice: two snapshots of one profiler;
  2. the same matmul launched one program per tile, with a partial last wave.
Each tile is a `tile` range holding, per K step, a `load` range and an `mma` range, then a
`store` range. The outputs: the stats overview (the full report in demo_stats.txt), a Perfetto
trace, a Chrome JSON trace, an SM occupancy PNG and the raw capture (for
`sm-profiler stats|info|export`).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time

STARTED = time.perf_counter()  # "done in" counts the imports: torch and triton take seconds

import torch  # noqa: E402

# The interpreter is a process-wide switch that Triton and sm_profiler.triton_ops read when they
# are imported: decide it before importing either.
HAS_GPU = torch.cuda.is_available()
if not HAS_GPU:
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

DEFAULT_OUT = "sm_profiler_demo_out"

# Event ids are compile-time constants; the host gives them names.
TILE, LOAD, MMA, STORE = (tl.constexpr(i) for i in range(4))
EVENT_NAMES = {0: "tile", 1: "load", 2: "mma", 3: "store"}


@triton.jit
def matmul_kernel(
    a,
    b,
    c,
    M,
    N,
    K,
    prof,
    BM: tl.constexpr,
    BN: tl.constexpr,
    BK: tl.constexpr,
    PROFILE: tl.constexpr,
):
    """C = A @ B. Program p computes tiles p, p + num_programs, ...: with one program per tile
    that is one tile each; with a grid of one program per SM it is a persistent kernel."""
    pid = tl.program_id(0)
    ctx = profiler_init(prof, pid, 0, ENABLED=PROFILE)
    tiles_n = tl.cdiv(N, BN)
    num_tiles = tl.cdiv(M, BM) * tiles_n
    for tile in range(pid, num_tiles, tl.num_programs(0)):
        ctx = profiler_event_start(ctx, TILE)
        rm = (tile // tiles_n) * BM + tl.arange(0, BM)
        rn = (tile % tiles_n) * BN + tl.arange(0, BN)
        acc = tl.zeros((BM, BN), tl.float32)
        for k in range(0, K, BK):
            rk = k + tl.arange(0, BK)
            ctx = profiler_event_start(ctx, LOAD)
            x = tl.load(a + rm[:, None] * K + rk[None, :])
            y = tl.load(b + rk[:, None] * N + rn[None, :])
            # after=: stamp the end only once both tiles have arrived (a load is otherwise
            # waited for where its value is first used: inside the mma range).
            ctx = profiler_event_end(ctx, LOAD, after=tl.sum(x) + tl.sum(y))
            ctx = profiler_event_start(ctx, MMA)
            acc = tl.dot(x, y, acc)
            ctx = profiler_event_end(ctx, MMA, after=acc)
        ctx = profiler_event_start(ctx, STORE)
        tl.store(c + rm[:, None] * N + rn[None, :], acc.to(c.dtype.element_ty))
        ctx = profiler_event_end(ctx, STORE)
        ctx = profiler_event_end(ctx, TILE)


def config(gpu: bool) -> dict:
    """Problem sizes: real ones on a GPU, tiny ones for the interpreter (about 30 ms a K step)."""
    if gpu:
        n_sms = torch.cuda.get_device_properties(0).multi_processor_count
        # 1.5 waves of 128 x 128 tiles: the one-program-per-tile launch ends in a half wave.
        tiles_n = 8
        tiles_m = -(-3 * n_sms // (2 * tiles_n))
        return dict(
            device="cuda",
            dtype=torch.float16,
            n_sms=n_sms,
            BM=128,
            BN=128,
            BK=64,
            M=128 * tiles_m,
            N=128 * tiles_n,
            K=2048,
            num_warps=8,
        )
    # 12 tiles of 16 x 16 on the 8 emulated SMs: 1.5 waves again.
    return dict(
        device="cpu",
        dtype=torch.float32,
        n_sms=sm_profiler.wire.format.EMULATED_SM_COUNT,
        BM=16,
        BN=16,
        BK=16,
        M=48,
        N=64,
        K=32,
        num_warps=4,
    )


def events_per_program(cfg: dict, grid: int) -> int:
    tiles = (cfg["M"] // cfg["BM"]) * (cfg["N"] // cfg["BN"])
    per_tile = 2 + 4 * (cfg["K"] // cfg["BK"]) + 2  # tile, (load, mma) per K step, store
    return -(-tiles // grid) * per_tile


def run(cfg: dict) -> list[sm_profiler.Capture]:
    """Launch the matmul three times (two persistent launches, one tile per program) and return
    the captures, after checking every result against torch."""
    dev, dt = cfg["device"], cfg["dtype"]
    M, N, K = cfg["M"], cfg["N"], cfg["K"]
    torch.manual_seed(0)
    a = torch.randn(M, K, device=dev, dtype=dt)
    b = torch.randn(K, N, device=dev, dtype=dt)
    ref = (a.float() @ b.float()).to(dt)
    tiles = (M // cfg["BM"]) * (N // cfg["BN"])
    captures = []
    for label, grid, launches in (
        ("persistent", min(cfg["n_sms"], tiles), 2),
        ("one_per_tile", tiles, 1),
    ):
        # One profiler per grid shape; snapshot() keeps each launch and re-arms the buffer.
        prof = sm_profiler.SmProfiler(
            num_blocks=grid,
            max_events_per_group=events_per_program(cfg, grid),
            device=dev,
            kernel_name=label,
        )
        for e, name in EVENT_NAMES.items():
            prof.register_event(e, name)
        for _ in range(launches):
            c = torch.empty(M, N, device=dev, dtype=dt)
            matmul_kernel[(grid,)](
                a,
                b,
                c,
                M,
                N,
                K,
                prof.get_buffer(),
                BM=cfg["BM"],
                BN=cfg["BN"],
                BK=cfg["BK"],
                PROFILE=True,
                num_warps=cfg["num_warps"],
            )
            torch.testing.assert_close(c.float(), ref.float(), atol=0.5, rtol=0.02)
            # Launches of one kernel share its name; traces and stats tell them apart by the
            # capture index: "persistent (launch 1)".
            prof.snapshot()
        captures += prof.captures()
    return captures


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default=DEFAULT_OUT, help="output directory (default %(default)s)")
    # The examples take their output directory as an argument; take it here too.
    p.add_argument("out_dir", nargs="?", metavar="OUT", help="the same as --out OUT")
    args = p.parse_args(argv)
    if args.out_dir is not None:
        args.out = args.out_dir
    t_start = time.perf_counter()

    if INTERPRET:
        print(
            "No GPU: the kernels run in Triton's CPU interpreter (TRITON_INTERPRET=1), with\n"
            "the host clock and emulated SM ids: the trace shows structure, not GPU timing."
        )
    cfg = config(gpu=not INTERPRET)
    where = torch.cuda.get_device_name(0) if not INTERPRET else "the CPU interpreter"
    print(
        f"Profiling a {cfg['M']}x{cfg['N']}x{cfg['K']} matmul on {where}:\n2 persistent launches "
        f"(grid {min(cfg['n_sms'], (cfg['M'] // cfg['BM']) * (cfg['N'] // cfg['BN']))}) and one "
        "launch with one program per tile.\n"
    )
    captures = run(cfg)
    trace = sm_profiler.decode(captures)

    from sm_profiler.report.stats import compute_stats, format_stats

    os.makedirs(args.out, exist_ok=True)
    paths = {
        "perfetto": os.path.join(args.out, "demo.perfetto-trace"),
        "chrome": os.path.join(args.out, "demo.json"),
        "png": os.path.join(args.out, "demo_sm_occupancy.png"),
        "capture": os.path.join(args.out, "demo_capture.npz"),
        "stats": os.path.join(args.out, "demo_stats.txt"),
    }
    # The overview fits a screen; the full report (SM occupancy and load imbalance of each
    # launch) goes to a file, the same text `sm-profiler stats` prints from the capture.
    stats = compute_stats(trace)
    width = min(shutil.get_terminal_size((80, 24)).columns, 100)
    print(format_stats(stats, width=width, sections=False), end="")
    with open(paths["stats"], "w", encoding="utf-8") as f:
        f.write(format_stats(stats, width=100))
    print(f"\nEach launch's SMs and load imbalance: {paths['stats']}")

    from sm_profiler.export import export

    export(trace, paths["perfetto"])
    export(trace, paths["chrome"])
    sm_profiler.save_many(captures, paths["capture"])
    print()
    print(f"wrote {paths['perfetto']}  (Perfetto trace)")
    print(f"wrote {paths['chrome']}  (Chrome JSON trace)")
    print(f"wrote {paths['capture']}  (raw capture, for sm-profiler)")
    try:
        from sm_profiler.export.plot import plot

        # One panel per launch, each from its own start: the host time between launches is cut.
        plot(trace, paths["png"])
        print(f"wrote {paths['png']}  (SM occupancy plot)")
    except sm_profiler.MissingDependencyError:
        print(
            "skipped the SM occupancy plot: matplotlib is not installed (pip install -e '.[plot]')"
        )
    print(
        f"\nOpen the trace: sm-profiler open {paths['perfetto']}\n"
        f"(or drag {paths['perfetto']} into https://ui.perfetto.dev)"
    )
    now = time.perf_counter()
    print(
        f"done in {now - STARTED:.1f} s ({t_start - STARTED:.1f} s of it importing torch and triton)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
