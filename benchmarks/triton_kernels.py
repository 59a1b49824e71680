"""Triton kernels that more than one benchmark times, with their instrumented variants.

  loop_kernel           programs of 4 warps x 1024 elements: ITERS iterations of INNER dependent
                        FMAs each, one range (2 events) per iteration; MODE picks the variant
                        (MODES, ABLATION: device_overhead.py's docstring says what each is)
  loop_kernel_proton    the same loop with Proton's enter_scope / exit_scope
  matmul_kernel         a pipelined fp16 matmul, a load and a compute range per K step, MODE as
                        in loop_kernel
  matmul_kernel_proton  the same matmul with Proton's scopes
  mm_kernel             the same matmul with the library's per-warp ops only (ENABLED, STAGE,
                        optionally K a compile-time constant), WARPS warps

Used by device_overhead.py, workload_overhead.py, staged_occupancy.py and matmul_per_warp.py.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
import triton.profiler.language as pl

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
def _rec_init(
    prof, pid, lane_words, MODE: tl.constexpr, STAGE: tl.constexpr = 0, NUM_WARPS: tl.constexpr = 4
):
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
            "=r",
            [],
            dtype=tl.int32,
            is_pure=True,
            pack=1,
        )
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
            asm,
            "=r,l,r,r,r,r,l",
            [ptr + 2 + cursor, leader, tag, cursor, cap, ptr + 2],
            dtype=tl.int32,
            is_pure=False,
            pack=1,
        )
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
def loop_kernel(
    out,
    prof,
    lane_words,
    ITERS: tl.constexpr,
    INNER: tl.constexpr,
    MODE: tl.constexpr,
    BLOCK: tl.constexpr = 1024,
):
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
def matmul_kernel(
    a,
    b,
    c,
    M,
    N,
    K,
    prof,
    lane_words,
    BM: tl.constexpr,
    BN: tl.constexpr,
    BK: tl.constexpr,
    MODE: tl.constexpr,
    STAGE: tl.constexpr,
):
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


# -- the per-warp matmul of staged_occupancy.py and matmul_per_warp.py -------------------------

WARPS = 8  # warps per program of mm_kernel


@triton.jit
def mm_kernel(
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
    ENABLED: tl.constexpr,
    STAGE: tl.constexpr,
    NUM_WARPS: tl.constexpr,
    K_CONST: tl.constexpr = 0,
):
    if K_CONST > 0:
        K = K_CONST  # a compile-time K: the K loop's trip count is known to the compiler
    pid = tl.program_id(0)
    grid_n = tl.cdiv(N, BN)
    rm = (pid // grid_n) * BM + tl.arange(0, BM)
    rn = (pid % grid_n) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    ctx = profiler_init(
        prof, pid, 0, ENABLED=ENABLED, PER_WARP=True, NUM_WARPS=NUM_WARPS, STAGE=STAGE
    )
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
