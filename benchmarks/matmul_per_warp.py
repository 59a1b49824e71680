"""Per-warp recording in a pipelined matmul: ours and Proton, each against a base timed beside it.

In device_overhead.py the matmul row moves between runs by more than the differences between
variants. Here (the per-warp matmul, benchmarks/triton_kernels.py's mm_kernel) our variants are
timed against base in one CUPTI session (interleaved rounds), and Proton alone in a Proton session
right after (against that base); the whole measurement is repeated `--repeats` times so the
spread is visible. Variants: base; ours per warp direct; ours per warp staged (STAGE=--stage); the
same staged kernel with K a compile-time constant (compiled on a CPU, its PTX keeps the stage's
clamps all the same); Proton (enter/exit scope per region, every warp, its shared-memory buffer).

    python -m benchmarks run matmul_per_warp [--launches 20] [--rounds 3] [--repeats 3]
"""

from __future__ import annotations

import argparse
import statistics

import torch
import triton
import triton.profiler as proton
import triton.profiler.language as pl

from benchmarks.timing import add_timing_args, added_pct, cupti_medians
from benchmarks.triton_kernels import WARPS, matmul_kernel_proton, matmul_operands, mm_kernel
from sm_profiler import SmProfiler


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
    a, b, c = matmul_operands(M, N, K)
    grid = (M // BM) * (N // BN)
    prof = SmProfiler(grid, WARPS, 4 * (K // BK))
    opts = dict(num_warps=WARPS, num_stages=3)
    common = dict(BM=BM, BN=BN, BK=BK, NUM_WARPS=WARPS)
    buf = prof.get_buffer()
    fns = {
        "base": lambda: mm_kernel[(grid,)](
            a, b, c, M, N, K, buf, ENABLED=False, STAGE=0, **common, **opts
        ),
        "warp": lambda: mm_kernel[(grid,)](
            a, b, c, M, N, K, buf, ENABLED=True, STAGE=0, **common, **opts
        ),
        "staged": lambda: mm_kernel[(grid,)](
            a, b, c, M, N, K, buf, ENABLED=True, STAGE=args.stage, **common, **opts
        ),
        "staged_const_k": lambda: mm_kernel[(grid,)](
            a, b, c, M, N, K, buf, ENABLED=True, STAGE=args.stage, K_CONST=K, **common, **opts
        ),
        "proton": lambda: matmul_kernel_proton[(grid,)](
            a, b, c, M, N, K, BM=BM, BN=BN, BK=BK, **opts
        ),
    }
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
        row = {k: added_pct(v, t["base"]) for k, v in t.items()}
        sess = proton.start("/tmp/sm_profiler_matmul_per_warp", backend="instrumentation")
        try:
            for fn in proton_fns.values():
                fn()
            torch.cuda.synchronize()
            tp = cupti_medians(proton_fns, args.launches, args.rounds, "matmul_kernel_proton")
        finally:
            proton.finalize(sess)
        row["proton"] = added_pct(tp["proton"], t["base"])
        runs.append(row)
        print({k: f"{v:+.1f} %" for k, v in row.items()}, f"base {t['base']:.1f} us")
    print(
        "median over repeats:",
        {k: f"{statistics.median(r[k] for r in runs):+.1f} %" for k in runs[0]},
    )


if __name__ == "__main__":
    main()
