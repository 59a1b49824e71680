"""What a per-warp stage costs a kernel that lives on shared memory: a pipelined matmul.

The stage is static shared memory, (NUM_WARPS + 1) * (STAGE + 2) * 8 B per program. A kernel whose
own shared memory leaves little room per SM loses a resident block once the stage no longer fits
beside it; this script times the per-warp matmul (benchmarks/triton_kernels.py's mm_kernel:
4096^3 fp16, 128x128x64 tiles, 8 warps, 3 stages, 4 events per K step = 256 per warp) at several
STAGE sizes and prints, for each, the stage's bytes and the blocks per SM that shared memory and
registers allow.

    python -m benchmarks run staged_occupancy [--launches 30] [--rounds 3]
"""

from __future__ import annotations

import argparse

import torch
import triton

from benchmarks.timing import add_timing_args, added_pct, cupti_medians
from benchmarks.triton_kernels import WARPS, matmul_operands, mm_kernel
from sm_profiler import SmProfiler
from sm_profiler.record import ptx

RESERVED_SMEM_PER_BLOCK = 1024  # the driver's share of each block's shared memory (sm_80+)


def blocks_per_sm(kernel, static_smem: int, props) -> int | None:
    """Resident blocks per SM allowed by shared memory, registers and threads (None where this
    torch does not report the SM's limits)."""
    names = (
        "shared_memory_per_multiprocessor",
        "regs_per_multiprocessor",
        "max_threads_per_multi_processor",
    )
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
            return mm_kernel[(grid,)](
                a,
                b,
                c,
                M,
                N,
                K,
                prof.get_buffer(),
                BM=BM,
                BN=BN,
                BK=BK,
                ENABLED=enabled,
                STAGE=stage,
                NUM_WARPS=WARPS,
                num_warps=WARPS,
                num_stages=3,
            )

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
        print(f"{name:12s} {t[name]:8.2f} us {added_pct(t[name], base):+6.1f} %  {info[name]}")


if __name__ == "__main__":
    main()
