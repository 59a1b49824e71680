"""What does recording cost on the GPU? Every variant side by side, in one run.

Variants (per kernel):
  base        no instrumentation
  floor       one %globaltimer read + one 8-byte store per event, cursor in a register, no checks
  ours        sm_profiler.triton_ops, one lane per program
  ours_warp   sm_profiler.triton_ops with PER_WARP=True (every warp writes its own lane)
  ours_warp_staged
              PER_WARP=True with STAGE=n: each warp's events staged in shared memory, one
              profiler_flush at the end of the program copies them into the buffer
  proton      Triton's Proton instrumentation (enter_scope/exit_scope, backend="instrumentation")
  seed        the original SM Profiler op style: a counter read-modify-write in global memory and
              a 40-byte event (5 stores) per record

The kernels are benchmarks/triton_kernels.py's loop_kernel and matmul_kernel. Kernel time comes
from CUPTI through torch.profiler (median over launches); Proton launches are timed the same way
where CUPTI can run beside it, else with CUDA events (the output says which).

    python -m benchmarks run device_overhead [--launches 30] [--json out.json]
"""

from __future__ import annotations

import argparse
import json

import torch
import triton

from benchmarks.timing import add_timing_args, added_pct, cupti_medians, proton_timed
from benchmarks.triton_kernels import (
    ABLATION,
    MODES,
    OURS,
    loop_kernel,
    loop_kernel_proton,
    matmul_kernel,
    matmul_kernel_proton,
    matmul_operands,
)
from sm_profiler import SmProfiler

MODES_RUN = dict(MODES)


def run_case(name, make_launch, events_per_program, grid, launches, rounds, proton_launch):
    """Time every variant; all of them in one CUPTI session, interleaved over `rounds`."""
    fns = {mode: make_launch(mode) for mode in MODES_RUN}
    for fn in fns.values():  # compile and warm up outside the timed session
        fn()
        fn()
    torch.cuda.synchronize()
    row = cupti_medians(fns, launches, rounds, name)
    row["proton"], row["proton_timing"] = proton_launch()
    base = row["base"]
    out = {"case": name, "grid": grid, "events_per_program": events_per_program}
    for k in ["base", "floor", *OURS, "proton", "seed", *ABLATION]:
        if row.get(k) is None:
            continue
        out[f"{k}_us"] = round(row[k], 3)
        out[f"{k}_added_pct"] = round(added_pct(row[k], base), 2)
    added_floor = row["floor"] - base
    out["ours_vs_floor_added"] = (
        round((row["ours"] - base) / added_floor, 3) if added_floor > 0 else None
    )
    out["proton_timing"] = row["proton_timing"]
    return out


def decoded(make, prof):
    """One launch of each of our variants into a fresh buffer: what decodes (events, drops).

    A check that the timed code records what it should, not only that it runs."""
    out = {}
    for mode in OURS:
        prof.init_buffer()
        make(mode, prof)()
        t = prof.decode()
        out[mode] = {
            "ranges": len(t),
            "dropped": int(t.dropped_total),
            "lanes": int(t.lanes["initialized"].sum()),
        }
    return out


def main():
    ap = argparse.ArgumentParser()
    add_timing_args(ap)
    ap.add_argument("--skip-matmul", action="store_true")
    ap.add_argument(
        "--matmul-stage",
        type=int,
        default=128,
        help="STAGE of ours_warp_staged in the matmul (of 256 events per warp; 128 is what "
        "Proton's shared buffer keeps there, and a stage for all 256 costs the kernel its second "
        "block per SM: see staged_occupancy.py)",
    )
    ap.add_argument("--ablation", action="store_true", help="also time the floor plus each piece")
    args = ap.parse_args()
    if args.ablation:
        MODES_RUN.update(ABLATION)
    dev = torch.cuda.get_device_properties(0)
    info = {
        "device": dev.name,
        "sms": dev.multi_processor_count,
        "torch": torch.__version__,
        "triton": triton.__version__,
        "cuda": torch.version.cuda,
    }
    print(info)
    rows = []
    grid = args.grid
    out = torch.empty(grid * 1024, device="cuda")
    for iters, inner in [(64, 64), (64, 16), (16, 16)]:
        epp = 2 * iters
        prof = SmProfiler(grid, 4, epp)  # 4 groups: room for per-warp mode
        plain = torch.zeros(grid * (1 + epp * 5 + 8), dtype=torch.int64, device="cuda")
        lane_words = 1 + epp * 5 + 8

        def make(mode, iters=iters, inner=inner, prof=prof, plain=plain, lane_words=lane_words):
            buf = prof.get_buffer() if mode in OURS else plain
            m = MODES_RUN[mode]

            def launch():
                if mode == "seed":
                    buf.zero_()  # the seed's counters live in the buffer: reset them per launch
                loop_kernel[(grid,)](
                    out, buf, lane_words, ITERS=iters, INNER=inner, MODE=m, num_warps=4
                )

            return launch

        def prot(iters=iters, inner=inner):
            return proton_timed(
                lambda: loop_kernel_proton[(grid,)](out, ITERS=iters, INNER=inner, num_warps=4),
                args.launches,
                "loop_kernel_proton",
            )

        row = run_case("loop_kernel", make, epp, grid, args.launches, args.rounds, prot)
        row.update(ITERS=iters, INNER_FMA=inner)
        row["decoded"] = decoded(lambda mode, p: make(mode, prof=p), SmProfiler(grid, 4, epp))
        rows.append(row)
        print(json.dumps(row))
    if not args.skip_matmul:
        M = N = K = 4096
        BM, BN, BK = 128, 128, 64
        a, b, c = matmul_operands(M, N, K)
        mgrid = (M // BM) * (N // BN)
        epp = 4 * (K // BK)
        prof = SmProfiler(mgrid, 8, epp)
        lane_words = 1 + epp * 5 + 8
        plain = torch.zeros(mgrid * lane_words, dtype=torch.int64, device="cuda")

        def make_mm(mode, prof=prof):
            buf = prof.get_buffer() if mode in OURS else plain
            m = MODES_RUN[mode]

            def launch():
                if mode == "seed":
                    buf.zero_()
                matmul_kernel[(mgrid,)](
                    a,
                    b,
                    c,
                    M,
                    N,
                    K,
                    buf,
                    lane_words,
                    BM=BM,
                    BN=BN,
                    BK=BK,
                    MODE=m,
                    STAGE=args.matmul_stage,
                    num_warps=8,
                    num_stages=3,
                )

            return launch

        def prot_mm():
            return proton_timed(
                lambda: matmul_kernel_proton[(mgrid,)](
                    a, b, c, M, N, K, BM=BM, BN=BN, BK=BK, num_warps=8, num_stages=3
                ),
                args.launches,
                "matmul_kernel_proton",
            )

        row = run_case("matmul_kernel", make_mm, epp, mgrid, args.launches, args.rounds, prot_mm)
        row["decoded"] = decoded(lambda mode, p: make_mm(mode, prof=p), SmProfiler(mgrid, 8, epp))
        torch.testing.assert_close(c.float(), (a.float() @ b.float()), atol=0.5, rtol=0.02)
        row.update(M=M, N=N, K=K, BM=BM, BN=BN, BK=BK)
        rows.append(row)
        print(json.dumps(row))
    print()
    hdr = (
        f"{'case':<14}{'base µs':>9}{'floor':>8}{'ours':>8}{'warp':>8}{'staged':>8}"
        f"{'proton':>8}{'seed':>8}  ours/floor"
    )
    print(hdr)
    for r in rows:
        case = f"{r['case'][:6]} {r.get('INNER_FMA', '')}".strip()

        def pct(k, r=r):
            v = r.get(f"{k}_added_pct")
            return f"{v:+.1f}%" if v is not None else "n/a"

        abl = "  ".join(f"{k} {pct(k)}" for k in ABLATION if f"{k}_us" in r)
        print(
            f"{case:<14}{r['base_us']:>9.2f}{pct('floor'):>8}{pct('ours'):>8}{pct('ours_warp'):>8}"
            f"{pct('ours_warp_staged'):>8}"
            f"{pct('proton'):>8}{pct('seed'):>8}  {r['ours_vs_floor_added']}  {abl}"
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"info": info, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
