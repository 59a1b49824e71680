"""Per-warp recording in a pipelined matmul: ours and Proton, each against a base timed beside it.

In device_overhead.py the matmul row moves between runs by more than the differences between
variants. Here our variants are timed against base in one CUPTI session (interleaved rounds), and
Proton alone in a Proton session right after (against that base); the whole measurement is
repeated `--repeats` times so the spread is visible. Variants: base; ours per warp direct; ours per warp
staged (STAGE=--stage); the same staged kernel with K a compile-time constant (the stage's clamp
folds away); Proton (enter/exit scope per region, every warp, its shared-memory buffer).

    python benchmarks/matmul_per_warp.py [--launches 20] [--rounds 3] [--repeats 3]
"""

from __future__ import annotations

import argparse
import statistics

import torch
import triton
import triton.language as tl
import triton.profiler as proton
import triton.profiler.language as pl
from staged_occupancy import WARPS, mm_kernel  # benchmarks/ (this script's folder)
from timing import add_timing_args, cupti_medians

from sm_profiler import SmProfiler
from sm_profiler.triton_ops import (
    profiler_event_end,
    profiler_event_start,
    profiler_flush,
    profiler_init,
)


@triton.jit
def mm_kernel_const_k(a, b, c, M, N, prof, K: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
                      BK: tl.constexpr, STAGE: tl.constexpr, NUM_WARPS: tl.constexpr):  # fmt: skip
    pid = tl.program_id(0)
    grid_n = tl.cdiv(N, BN)
    rm = (pid // grid_n) * BM + tl.arange(0, BM)
    rn = (pid % grid_n) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    ctx = profiler_init(prof, pid, 0, PER_WARP=True, NUM_WARPS=NUM_WARPS, STAGE=STAGE)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        ctx = profiler_event_start(ctx, 0)
        x = tl.load(a + rm[:, None] * K + (k + rk)[None, :])
        y = tl.load(b + (k + rk)[:, None] * N + rn[None, :])
        ctx = profiler_event_end(ctx, 0)
        ctx = profiler_event_start(ctx, 1)
        acc = tl.dot(x, y, acc)
        ctx = profiler_event_end(ctx, 1)
    profiler_flush(ctx)
    tl.store(c + rm[:, None] * N + rn[None, :], acc.to(tl.float16))


@triton.jit
def mm_kernel_proton(a, b, c, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid = tl.program_id(0)
    grid_n = tl.cdiv(N, BN)
    rm = (pid // grid_n) * BM + tl.arange(0, BM)
    rn = (pid % grid_n) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        pl.enter_scope("load")
        x = tl.load(a + rm[:, None] * K + (k + rk)[None, :])
        y = tl.load(b + (k + rk)[:, None] * N + rn[None, :])
        pl.exit_scope("load")
        pl.enter_scope("compute")
        acc = tl.dot(x, y, acc)
        pl.exit_scope("compute")
    tl.store(c + rm[:, None] * N + rn[None, :], acc.to(tl.float16))


def main():
    ap = argparse.ArgumentParser()
    add_timing_args(ap)
    ap.add_argument("--stage", type=int, default=128, help="STAGE of the staged variants")
    ap.add_argument("--repeats", type=int, default=3, help="whole measurements, for the spread")
    args = ap.parse_args()
    props = torch.cuda.get_device_properties(0)
    print({"device": props.name, "torch": torch.__version__, "triton": triton.__version__})
    M = N = K = 4096
    BM, BN, BK = 128, 128, 64
    a = torch.randn(M, K, device="cuda", dtype=torch.float16)
    b = torch.randn(K, N, device="cuda", dtype=torch.float16)
    c = torch.empty(M, N, device="cuda", dtype=torch.float16)
    grid = (M // BM) * (N // BN)
    prof = SmProfiler(grid, WARPS, 4 * (K // BK))
    opts = dict(num_warps=WARPS, num_stages=3)
    common = dict(BM=BM, BN=BN, BK=BK, NUM_WARPS=WARPS)
    buf = prof.get_buffer()
    fns = {
        "base": lambda: mm_kernel[(grid,)](a, b, c, M, N, K, buf, ENABLED=False, STAGE=0,
                                           **common, **opts),  # fmt: skip
        "warp": lambda: mm_kernel[(grid,)](a, b, c, M, N, K, buf, ENABLED=True, STAGE=0,
                                           **common, **opts),  # fmt: skip
        "staged": lambda: mm_kernel[(grid,)](a, b, c, M, N, K, buf, ENABLED=True,
                                             STAGE=args.stage, **common, **opts),  # fmt: skip
        "staged_const_k": lambda: mm_kernel_const_k[(grid,)](a, b, c, M, N, buf, K=K,
                                                             STAGE=args.stage, **common, **opts),
        "proton": lambda: mm_kernel_proton[(grid,)](a, b, c, M, N, K, BM=BM, BN=BN, BK=BK, **opts),
    }  # fmt: skip
    proton_fns = {"proton": fns.pop("proton")}
    for fn in fns.values():
        fn()
        fn()
    torch.cuda.synchronize()
    pl.enable_semantic("triton")
    runs = []
    for _ in range(args.repeats):
        # Ours against base in one CUPTI session; Proton alone in a Proton session right after,
        # against that base (Triton 3.6's Proton launch hook dies with SIGFPE on a kernel
        # without Proton scopes launched inside its session, so base cannot run beside it).
        t = cupti_medians(fns, args.launches, args.rounds, "mm_kernel")
        row = {k: 100 * (v - t["base"]) / t["base"] for k, v in t.items()}
        sess = proton.start("/tmp/sm_profiler_matmul_per_warp", backend="instrumentation")
        try:
            for fn in proton_fns.values():
                fn()
            torch.cuda.synchronize()
            tp = cupti_medians(proton_fns, args.launches, args.rounds, "mm_kernel")
        finally:
            proton.finalize(sess)
        row["proton"] = 100 * (tp["proton"] - t["base"]) / t["base"]
        runs.append(row)
        print({k: f"{v:+.1f} %" for k, v in row.items()}, f"base {t['base']:.1f} us")
    print("median over repeats:", {
        k: f"{statistics.median(r[k] for r in runs):+.1f} %" for k in runs[0]
    })  # fmt: skip


if __name__ == "__main__":
    main()
