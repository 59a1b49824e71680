"""Small instrumented Triton kernels shared by the interpreter, compile and GPU tests."""

import triton
import triton.language as tl

from sm_profiler.triton_ops import (
    profiler_event_end,
    profiler_event_instant,
    profiler_event_start,
    profiler_flush,
    profiler_init,
)

# Event ids are constexprs: the device ops bake them into the record as immediates.
LOAD, STORE, LOOP, ITER, TICK, TAIL, SLEEP = (tl.constexpr(i) for i in range(7))


@triton.jit
def add_kernel(x, y, out, n, prof, BLOCK: tl.constexpr, PROFILE: tl.constexpr):
    pid = tl.program_id(0)
    ctx = profiler_init(prof, pid, 0, ENABLED=PROFILE)
    ctx = profiler_event_start(ctx, LOAD)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    a = tl.load(x + offs, mask=m)
    b = tl.load(y + offs, mask=m)
    ctx = profiler_event_end(ctx, LOAD, after=a + b)
    ctx = profiler_event_start(ctx, STORE)
    tl.store(out + offs, a + b, mask=m)
    ctx = profiler_event_end(ctx, STORE)


@triton.jit
def plain_add_kernel(x, y, out, n, prof, BLOCK: tl.constexpr, PROFILE: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    a = tl.load(x + offs, mask=m)
    b = tl.load(y + offs, mask=m)
    tl.store(out + offs, a + b, mask=m)


def loop_events(iters: int) -> int:
    """Records one program (or warp) of loop_kernel writes: loop begin, iteration begin and end,
    a tick every third iteration, two tail instants, loop end."""
    return 1 + 2 * iters + (iters + 2) // 3 + 2 + 1


@triton.jit
def loop_kernel(
    out,
    iters,
    prof,
    GROUP,
    PROFILE: tl.constexpr,
    PER_WARP: tl.constexpr = False,
    NUM_WARPS: tl.constexpr = 4,
    STAGE: tl.constexpr = 0,
):
    """Nested ranges in a for loop, instants in an if branch, and a while loop; with STAGE > 0
    the events are staged in shared memory and flushed at the end (a no-op flush otherwise)."""
    pid = tl.program_id(0)
    ctx = profiler_init(
        prof, pid, GROUP, ENABLED=PROFILE, PER_WARP=PER_WARP, NUM_WARPS=NUM_WARPS, STAGE=STAGE
    )
    acc = pid.to(tl.float32)
    ctx = profiler_event_start(ctx, LOOP)
    for i in range(iters):
        ctx = profiler_event_start(ctx, ITER)
        acc = acc * 1.0001 + i
        if i % 3 == 0:
            ctx = profiler_event_instant(ctx, TICK)
        ctx = profiler_event_end(ctx, ITER, after=acc)
    j = 0
    while j < 2:
        ctx = profiler_event_instant(ctx, TAIL)
        j += 1
    ctx = profiler_event_end(ctx, LOOP)
    profiler_flush(ctx)
    tl.store(out + pid, acc)


@triton.jit
def straight_kernel(
    prof,
    N_EVENTS: tl.constexpr,
    STAGE: tl.constexpr = 0,
    PER_WARP: tl.constexpr = False,
    RING: tl.constexpr = False,
):
    """N_EVENTS instants in straight-line code: the SASS cost per event is a difference of two.
    (STAGE needs PER_WARP; the launch's warps are the default 4.)"""
    ctx = profiler_init(prof, tl.program_id(0), 0, PER_WARP=PER_WARP, STAGE=STAGE, RING=RING)
    for _ in tl.static_range(N_EVENTS):
        ctx = profiler_event_instant(ctx, TICK)
    profiler_flush(ctx)


@triton.jit
def spin_kernel(
    prof, spun, reps, DELAY_NS: tl.constexpr, AFTER: tl.constexpr = False, STAGE: tl.constexpr = 0
):
    """Ranges around a known delay: spin until %globaltimer has advanced DELAY_NS.

    spun[i] gets the time the spin itself saw pass (its last timer read minus its first), so
    a test can compare our range with the delay as the hardware clock measured it.
    """
    ctx = profiler_init(prof, tl.program_id(0), 0, PER_WARP=STAGE > 0, NUM_WARPS=1, STAGE=STAGE)
    for i in range(reps):
        ctx = profiler_event_start(ctx, SLEEP)
        t = tl.inline_asm_elementwise(
            "{\n\t.reg .u64 t0, t;\n\t.reg .pred p;\n\t"
            "mov.u64 t0, %globaltimer;\n"
            "SPIN:\n\t"
            "mov.u64 t, %globaltimer;\n\t"
            "sub.u64 t, t, t0;\n\t"
            f"setp.lt.u64 p, t, {DELAY_NS};\n\t"
            "@p bra SPIN;\n\t"
            "mov.u64 $0, t;\n\t}",
            "=l",
            [],
            dtype=tl.int64,
            is_pure=False,
            pack=1,
        )
        if AFTER:
            ctx = profiler_event_end(ctx, SLEEP, after=t)
        else:
            ctx = profiler_event_end(ctx, SLEEP)
        tl.store(spun + i, t)
    profiler_flush(ctx)


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
    PER_WARP: tl.constexpr,
    NUM_WARPS: tl.constexpr,
    STAGE: tl.constexpr,
):
    """A tiled matmul (Triton's own shared memory, pipelined loads, tensor cores) with a load
    and a compute range per K step: the staged ops must not disturb Triton's shared memory."""
    pid = tl.program_id(0)
    grid_n = tl.cdiv(N, BN)
    rm = (pid // grid_n) * BM + tl.arange(0, BM)
    rn = (pid % grid_n) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    ctx = profiler_init(prof, pid, 0, PER_WARP=PER_WARP, NUM_WARPS=NUM_WARPS, STAGE=STAGE)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        ctx = profiler_event_start(ctx, LOAD)
        x = tl.load(a + rm[:, None] * K + (k + rk)[None, :])
        y = tl.load(b + (k + rk)[:, None] * N + rn[None, :])
        ctx = profiler_event_end(ctx, LOAD)
        ctx = profiler_event_start(ctx, ITER)
        acc = tl.dot(x, y, acc)
        ctx = profiler_event_end(ctx, ITER)
    profiler_flush(ctx)
    tl.store(c + rm[:, None] * N + rn[None, :], acc.to(tl.float16))


def ring_sequence(iters: int) -> list[tuple[int, int]]:
    """(kind, event id) of every record one lane of ring_kernel attempts, in order."""
    from sm_profiler.wire import format as fmt

    seq = [(fmt.KIND_INSTANT, TAIL.value)]
    for i in range(iters):
        seq.append((fmt.KIND_BEGIN, ITER.value))
        if i % 7 == 0:
            seq.append((fmt.KIND_INSTANT, TICK.value))
        seq.append((fmt.KIND_END, ITER.value))
    return seq


@triton.jit
def ring_kernel(
    prof,
    iters,
    PROFILE: tl.constexpr,
    RING: tl.constexpr = True,
    PER_WARP: tl.constexpr = False,
    NUM_WARPS: tl.constexpr = 4,
):
    """A persistent loop recording far more than a lane holds (ring_sequence); the flush closes
    the ring. With a tick every 7th iteration, which records are kept tells where the ring cut."""
    pid = tl.program_id(0)
    ctx = profiler_init(
        prof, pid, 0, ENABLED=PROFILE, RING=RING, PER_WARP=PER_WARP, NUM_WARPS=NUM_WARPS
    )
    ctx = profiler_event_instant(ctx, TAIL)
    for i in range(iters):
        ctx = profiler_event_start(ctx, ITER)
        if i % 7 == 0:
            ctx = profiler_event_instant(ctx, TICK)
        ctx = profiler_event_end(ctx, ITER)
    profiler_flush(ctx)
