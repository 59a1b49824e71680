"""What a per-warp stage costs a kernel that lives on shared memory: a pipelined matmul.

The stage is static shared memory, (NUM_WARPS + 1) * (STAGE + 2) * 8 B per program. A kernel whose
own shared memory leaves little room per SM loses a resident block once the stage no longer fits
beside it; this script times the matmul of device_overhead.py (4096^3 fp16, 128x128x64 tiles,
8 warps, 3 stages, 4 events per K step = 256 per warp) at several STAGE sizes and prints, for each,
the stage's bytes and the blocks per SM that shared memory and registers allow.

    python benchmarks/staged_occupancy.py [--launches 30] [--rounds 3]
"""

from __future__ import annotations

import argparse

import torch
import triton
import triton.language as tl
from device_overhead import matmul_operands  # benchmarks/ (this script's folder)
from timing import add_timing_args, cupti_medians

from sm_profiler import SmProfiler, ptx
from sm_profiler.triton_ops import (
    profiler_event_end,
    profiler_event_start,
    profiler_flush,
    profiler_init,
)

WARPS = 8
RESERVED_SMEM_PER_BLOCK = 1024  # the driver's share of each block's shared memory (sm_80+)


@triton.jit
def mm_kernel(a, b, c, M, N, K, prof, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
              ENABLED: tl.constexpr, STAGE: tl.constexpr, NUM_WARPS: tl.constexpr,
              K_CONST: tl.constexpr = 0):  # fmt: skip
    if K_CONST > 0:
        K = K_CONST  # a compile-time K: the K loop's trip count is known to the compiler
    pid = tl.program_id(0)
    grid_n = tl.cdiv(N, BN)
    rm = (pid // grid_n) * BM + tl.arange(0, BM)
    rn = (pid % grid_n) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    ctx = profiler_init(prof, pid, 0, ENABLED=ENABLED, PER_WARP=True, NUM_WARPS=NUM_WARPS,
                        STAGE=STAGE)  # fmt: skip
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


def blocks_per_sm(kernel, static_smem: int, props) -> int | None:
    """Resident blocks per SM allowed by shared memory, registers and threads (None where this
    torch does not report the SM's limits)."""
    names = ("shared_memory_per_multiprocessor", "regs_per_multiprocessor",
             "max_threads_per_multi_processor")  # fmt: skip
    smem_sm, regs_sm, threads_sm = (getattr(props, n, None) for n in names)
    if None in (smem_sm, regs_sm, threads_sm):
        return None
    per_block = kernel.metadata.shared + static_smem + RESERVED_SMEM_PER_BLOCK
    return min(
        smem_sm // per_block, regs_sm // (kernel.n_regs * 32 * WARPS), threads_sm // (32 * WARPS)
    )


def main():
    ap = argparse.ArgumentParser()
    add_timing_args(ap)
    ap.add_argument("--stages", default="32,128,192,256", help="STAGE sizes to time")
    args = ap.parse_args()
    props = torch.cuda.get_device_properties(0)
    print({"device": props.name, "torch": torch.__version__, "triton": triton.__version__})
    M = N = K = 4096
    BM, BN, BK = 128, 128, 64
    a, b, c = matmul_operands(M, N, K)
    grid = (M // BM) * (N // BN)
    per_warp = 4 * (K // BK)
    prof = SmProfiler(grid, WARPS, per_warp)
    variants = {"base": (False, 0), "direct": (True, 0)}
    variants.update({f"STAGE={s}": (True, int(s)) for s in args.stages.split(",")})
    fns, info = {}, {}
    for name, (enabled, stage) in variants.items():

        def launch(enabled=enabled, stage=stage):
            return mm_kernel[(grid,)](a, b, c, M, N, K, prof.get_buffer(), BM=BM, BN=BN, BK=BK,
                                      ENABLED=enabled, STAGE=stage, NUM_WARPS=WARPS,
                                      num_warps=WARPS, num_stages=3)  # fmt: skip

        kernel = launch()
        static = ptx.stage_bytes(WARPS, stage) if stage else 0
        prof.init_buffer()
        launch()
        kept = int(prof.decode().lanes["written"].sum()) if enabled else 0
        info[name] = {
            "stage_bytes": static,
            "triton_smem": kernel.metadata.shared,
            "regs": kernel.n_regs,
            "blocks_per_sm": blocks_per_sm(kernel, static, props),
            "records_kept_per_warp": kept // (grid * WARPS),
        }
        fns[name] = launch
    torch.cuda.synchronize()
    t = cupti_medians(fns, args.launches, args.rounds, "mm_kernel")
    base = t["base"]
    for name in fns:
        print(f"{name:12s} {t[name]:8.2f} us {100 * (t[name] - base) / base:+6.1f} %  {info[name]}")


if __name__ == "__main__":
    main()
