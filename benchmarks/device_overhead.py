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

Kernel time comes from CUPTI through torch.profiler (median over launches); Proton launches are
timed the same way where CUPTI can run beside it, else with CUDA events (the output says which).

    python benchmarks/device_overhead.py [--launches 30] [--json out.json]
"""

from __future__ import annotations

import argparse
import json

import torch
import triton
import triton.language as tl
import triton.profiler.language as pl
from timing import (  # benchmarks/timing.py (this script's folder)
    add_timing_args,
    cupti_medians,
    event_medians,
)

from sm_profiler import SmProfiler
from sm_profiler.triton_ops import (
    profiler_event_end,
    profiler_event_start,
    profiler_flush,
    profiler_init,
)

MODES = {"base": 0, "floor": 1, "ours": 2, "ours_warp": 3, "seed": 5, "ours_warp_staged": 10}
OURS = ("ours", "ours_warp", "ours_warp_staged")
# Ablation (--ablation): the floor plus one piece of our op at a time, to see what each costs.
ABLATION = {"floor_tag": 6, "floor_tag_bound": 7, "floor_tag_bound_count": 8}
EVT = tl.constexpr(0)
EVT2 = tl.constexpr(1)
SEED_WORDS = tl.constexpr(5)  # 40-byte events


@triton.jit
def _globaltimer():
    return tl.inline_asm_elementwise(
        "mov.u64 $0, %globaltimer;", "=l", [], dtype=tl.int64, is_pure=False, pack=1
    )


# Ablation records: {time.lo, tag} (tag in the high word), predicated on p0 = thread 0.
_ABL_TAG = tl.constexpr(
    "{\n\t.reg .u64 t, r;\n\t.reg .u32 lo;\n\t.reg .pred p;\n\t"
    "mov.u64 t, %globaltimer;\n\tcvt.u32.u64 lo, t;\n\tmov.b64 r, {lo, $3};\n\t"
    "setp.ne.u32 p, $2, 0;\n\t@p st.global.u64 [$1], r;\n\tmov.u32 $0, 0;\n\t}"
)
_ABL_BOUND = tl.constexpr(
    "{\n\t.reg .u64 t, r;\n\t.reg .u32 lo;\n\t.reg .pred p, q;\n\t"
    "mov.u64 t, %globaltimer;\n\tcvt.u32.u64 lo, t;\n\tmov.b64 r, {lo, $3};\n\t"
    "setp.ne.u32 q, $2, 0;\n\tsetp.lt.and.u32 p, $4, $5, q;\n\t"
    "@p st.global.u64 [$1], r;\n\tmov.u32 $0, 0;\n\t}"
)
_ABL_COUNT = tl.constexpr(
    "{\n\t.reg .u64 t, r;\n\t.reg .u32 lo;\n\t.reg .pred p, q, o;\n\t"
    "mov.u64 t, %globaltimer;\n\tcvt.u32.u64 lo, t;\n\tmov.b64 r, {lo, $3};\n\t"
    "setp.ne.u32 q, $2, 0;\n\tsetp.lt.and.u32 p|o, $4, $5, q;\n\t"
    "@p st.global.u64 [$1], r;\n\t@o st.global.u32 [$6+-4], $4;\n\t"
    "mov.u32 $0, 0;\n\t}"
)


@triton.jit
def _rec_init(prof, pid, lane_words, MODE: tl.constexpr, STAGE: tl.constexpr = 0,
              NUM_WARPS: tl.constexpr = 4):  # fmt: skip
    if MODE == 2:
        return profiler_init(prof, pid, 0)
    elif MODE == 3:
        return profiler_init(prof, pid, 0, PER_WARP=True)
    elif MODE == 10:
        return profiler_init(prof, pid, 0, PER_WARP=True, NUM_WARPS=NUM_WARPS, STAGE=STAGE)
    else:
        # floor / seed / ablation: a private slice of a plain int64 buffer per program
        leader = tl.inline_asm_elementwise(
            "{\n\t.reg .u32 w;\n\t.reg .pred p;\n\tmov.u32 w, %tid.x;\n\t"
            "setp.eq.u32 p, w, 0;\n\tselp.u32 $0, 1, 0, p;\n\t}",
            "=r", [], dtype=tl.int32, is_pure=True, pack=1,
        )  # fmt: skip
        cap = (lane_words - 16) // 5
        return prof + pid.to(tl.int64) * lane_words, tl.full((), 0, tl.int32), cap, leader


@triton.jit
def _rec(ctx, E: tl.constexpr, START: tl.constexpr, MODE: tl.constexpr):
    if MODE == 1:
        ptr, cursor, a, b = ctx
        tl.store(ptr + cursor, _globaltimer())
        return ptr, cursor + 1, a, b
    elif MODE == 5:
        ptr, cursor, a, b = ctx
        c = tl.load(ptr)  # the counter lives in global memory
        rec = ptr + 1 + c.to(tl.int64) * SEED_WORDS
        tl.store(rec + 0, _globaltimer())
        tl.store(rec + 1, E)
        tl.store(rec + 2, START)
        tl.store(rec + 3, tl.program_id(0))
        tl.store(rec + 4, 0)
        tl.store(ptr, c + 1)
        return ctx
    elif MODE >= 6 and MODE <= 8:
        ptr, cursor, cap, leader = ctx
        tag = tl.full((), E * 4 + 1 + (not START), tl.int32)
        if MODE == 6:
            asm: tl.constexpr = _ABL_TAG
        elif MODE == 7:
            asm: tl.constexpr = _ABL_BOUND
        else:
            asm: tl.constexpr = _ABL_COUNT
        tl.inline_asm_elementwise(
            asm, "=r,l,r,r,r,r,l", [ptr + 2 + cursor, leader, tag, cursor, cap, ptr + 2],
            dtype=tl.int32, is_pure=False, pack=1,
        )  # fmt: skip
        return ptr, cursor + 1, cap, leader
    elif MODE == 2 or MODE == 3 or MODE == 10:
        if START:
            return profiler_event_start(ctx, E)
        else:
            return profiler_event_end(ctx, E)
    else:
        return ctx


@triton.jit
def _rec_done(ctx, MODE: tl.constexpr):
    if MODE == 10:
        profiler_flush(ctx)


@triton.jit
def loop_kernel(out, prof, lane_words, ITERS: tl.constexpr, INNER: tl.constexpr, MODE: tl.constexpr,
                BLOCK: tl.constexpr = 1024):  # fmt: skip
    pid = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    acc = (offs + pid).to(tl.float32) * 1e-3
    ctx = _rec_init(prof, pid, lane_words, MODE, STAGE=2 * ITERS)
    for _ in range(ITERS):
        ctx = _rec(ctx, EVT, True, MODE)
        for _j in tl.static_range(INNER):
            acc = acc * 1.000001 + 1e-6
        ctx = _rec(ctx, EVT, False, MODE)
    _rec_done(ctx, MODE)
    tl.store(out + pid * BLOCK + offs, acc)


@triton.jit
def loop_kernel_proton(out, ITERS: tl.constexpr, INNER: tl.constexpr, BLOCK: tl.constexpr = 1024):
    pid = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    acc = (offs + pid).to(tl.float32) * 1e-3
    for _ in range(ITERS):
        pl.enter_scope("iter")
        for _j in tl.static_range(INNER):
            acc = acc * 1.000001 + 1e-6
        pl.exit_scope("iter")
    tl.store(out + pid * BLOCK + offs, acc)


@triton.jit
def matmul_kernel(a, b, c, M, N, K, prof, lane_words, BM: tl.constexpr, BN: tl.constexpr,
                  BK: tl.constexpr, MODE: tl.constexpr, STAGE: tl.constexpr):  # fmt: skip
    pid = tl.program_id(0)
    grid_n = tl.cdiv(N, BN)
    pm, pn = pid // grid_n, pid % grid_n
    rm = pm * BM + tl.arange(0, BM)
    rn = pn * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    ctx = _rec_init(prof, pid, lane_words, MODE, STAGE=STAGE, NUM_WARPS=8)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        ctx = _rec(ctx, EVT, True, MODE)  # load
        x = tl.load(a + rm[:, None] * K + (k + rk)[None, :])
        y = tl.load(b + (k + rk)[:, None] * N + rn[None, :])
        ctx = _rec(ctx, EVT, False, MODE)
        ctx = _rec(ctx, EVT2, True, MODE)  # compute
        acc = tl.dot(x, y, acc)
        ctx = _rec(ctx, EVT2, False, MODE)
    _rec_done(ctx, MODE)
    tl.store(c + rm[:, None] * N + rn[None, :], acc.to(tl.float16))


@triton.jit
def matmul_kernel_proton(a, b, c, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid = tl.program_id(0)
    grid_n = tl.cdiv(N, BN)
    pm, pn = pid // grid_n, pid % grid_n
    rm = pm * BM + tl.arange(0, BM)
    rn = pn * BN + tl.arange(0, BN)
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


def matmul_operands(M: int, N: int, K: int):
    """The matmul case's fp16 inputs a (M x K), b (K x N) and its output c, on the GPU."""
    a = torch.randn(M, K, device="cuda", dtype=torch.float16)
    b = torch.randn(K, N, device="cuda", dtype=torch.float16)
    return a, b, torch.empty(M, N, device="cuda", dtype=torch.float16)


def cupti_median_us(fn, launches: int, name_part: str) -> float:
    """Median kernel duration (µs) of `launches` calls of fn, read from CUPTI via torch.profiler."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    return cupti_medians({"fn": fn}, launches, 1, name_part)["fn"]


def event_median_us(fn, launches: int) -> float:
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    return event_medians({"fn": fn}, launches, 1)["fn"]


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
        out[f"{k}_added_pct"] = round(100 * (row[k] - base) / base, 2)
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
        out[mode] = {"ranges": len(t), "dropped": int(t.dropped_total),
                     "lanes": int(t.lanes["initialized"].sum())}  # fmt: skip
    return out


def proton_timed(fn, launches, name):
    """Time a Proton-instrumented launch; returns (µs, method) or (None, reason)."""
    try:
        import triton.profiler as proton

        pl.enable_semantic("triton")
        sess = proton.start("/tmp/sm_profiler_bench_proton", backend="instrumentation")
        try:
            try:
                t, how = cupti_median_us(fn, launches * 2, name), "cupti"
            except Exception:
                t, how = event_median_us(fn, launches), "cuda-events"
        finally:
            proton.finalize(sess)
        return t, how
    except Exception as e:  # report, don't hide: the row says why Proton is missing
        return None, f"failed: {type(e).__name__}: {e}"[:200]


def main():
    ap = argparse.ArgumentParser()
    add_timing_args(ap)
    ap.add_argument("--skip-matmul", action="store_true")
    ap.add_argument(
        "--matmul-stage", type=int, default=128,
        help="STAGE of ours_warp_staged in the matmul (of 256 events per warp; 128 is what "
        "Proton's shared buffer keeps there, and a stage for all 256 costs the kernel its second "
        "block per SM: see staged_occupancy.py)",
    )  # fmt: skip
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
                matmul_kernel[(mgrid,)](a, b, c, M, N, K, buf, lane_words, BM=BM, BN=BN, BK=BK,
                                        MODE=m, STAGE=args.matmul_stage, num_warps=8,
                                        num_stages=3)  # fmt: skip

            return launch

        def prot_mm():
            return proton_timed(
                lambda: matmul_kernel_proton[(mgrid,)](
                    a, b, c, M, N, K, BM=BM, BN=BN, BK=BK, num_warps=8, num_stages=3
                ),  # fmt: skip
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
    hdr = (f"{'case':<14}{'base µs':>9}{'floor':>8}{'ours':>8}{'warp':>8}{'staged':>8}"
           f"{'proton':>8}{'seed':>8}  ours/floor")  # fmt: skip
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
