"""Small instrumented Gluon kernels shared by the compile probe and the GPU tests."""

from triton.experimental import gluon
from triton.experimental.gluon import language as gl

from sm_profiler.gluon_ops import (
    profiler_event_end,
    profiler_event_instant,
    profiler_event_start,
    profiler_flush,
    profiler_init,
)

LOOP, ITER, TICK, PARTITION = (gl.constexpr(i) for i in range(4))
# Lane groups: the default partition's, then the worker's (per warp: 4 default warps, 0..3).
DEFAULT, WORKER = gl.constexpr(0), gl.constexpr(1)
WORKER_PER_WARP = gl.constexpr(4)


@gluon.jit
def straight_kernel(prof, N_EVENTS: gl.constexpr, PER_WARP: gl.constexpr = False):
    """N_EVENTS instants in straight-line code: the SASS cost per event is a difference of two."""
    ctx = profiler_init(prof, gl.program_id(0), 0, PER_WARP=PER_WARP)
    for _ in gl.static_range(N_EVENTS):
        ctx = profiler_event_instant(ctx, TICK)


@gluon.jit
def _loop_body(out, iters, ctx, OFFSET: gl.constexpr):
    acc = gl.program_id(0).to(gl.float32) + OFFSET
    ctx = profiler_event_start(ctx, LOOP)
    for i in range(iters):
        ctx = profiler_event_start(ctx, ITER)
        acc = acc * 1.0001 + i
        if i % 3 == 0:
            ctx = profiler_event_instant(ctx, TICK)
        ctx = profiler_event_end(ctx, ITER, after=acc)
    ctx = profiler_event_end(ctx, LOOP)
    gl.store(out + gl.program_id(0) * 2 + OFFSET, acc)
    return ctx


@gluon.jit
def _default_partition(out, iters, prof, PROFILE: gl.constexpr, PER_WARP: gl.constexpr):
    ctx = profiler_init(prof, gl.program_id(0), DEFAULT, ENABLED=PROFILE, PER_WARP=PER_WARP)
    ctx = profiler_event_start(ctx, PARTITION)
    ctx = _loop_body(out, iters, ctx, 0)
    ctx = profiler_event_end(ctx, PARTITION)


@gluon.jit
def _worker_partition(out, iters, prof, PROFILE: gl.constexpr, PER_WARP: gl.constexpr):
    if PER_WARP:
        group: gl.constexpr = WORKER_PER_WARP
    else:
        group: gl.constexpr = WORKER
    ctx = profiler_init(prof, gl.program_id(0), group, ENABLED=PROFILE, PER_WARP=PER_WARP)
    ctx = profiler_event_start(ctx, PARTITION)
    ctx = _loop_body(out, iters, ctx, 1)
    ctx = profiler_event_end(ctx, PARTITION)


@gluon.jit
def ws_loop_kernel(
    out,
    iters,
    prof,
    PROFILE: gl.constexpr,
    PER_WARP: gl.constexpr = False,
    WORKER_WARPS: gl.constexpr = 2,
):
    """A default partition (num_warps warps) and one worker partition (WORKER_WARPS warps), each
    recording a loop into its own lane(s); out[2 * pid + partition] = the loop's result."""
    # (The argument tuples are written inline: a tuple assigned to a variable first turns its
    # constexprs into tensors.)
    gl.warp_specialize(
        [
            (_default_partition, (out, iters, prof, PROFILE, PER_WARP)),
            (_worker_partition, (out, iters, prof, PROFILE, PER_WARP)),
        ],
        [WORKER_WARPS],
        [48],
    )


@gluon.jit
def plain_ws_loop_kernel(
    out,
    iters,
    prof,
    PROFILE: gl.constexpr,
    PER_WARP: gl.constexpr = False,
    WORKER_WARPS: gl.constexpr = 2,
):
    gl.warp_specialize(
        [(_plain_default, (out, iters)), (_plain_worker, (out, iters))], [WORKER_WARPS], [48]
    )


@gluon.jit
def _plain_loop(out, iters, OFFSET: gl.constexpr):
    acc = gl.program_id(0).to(gl.float32) + OFFSET
    for i in range(iters):
        acc = acc * 1.0001 + i
    gl.store(out + gl.program_id(0) * 2 + OFFSET, acc)


@gluon.jit
def _plain_default(out, iters):
    _plain_loop(out, iters, 0)


@gluon.jit
def _plain_worker(out, iters):
    _plain_loop(out, iters, 1)


@gluon.jit
def _straight_partition(prof, GROUP: gl.constexpr, N_EVENTS: gl.constexpr, PER_WARP: gl.constexpr):
    ctx = profiler_init(prof, gl.program_id(0), GROUP, PER_WARP=PER_WARP)
    for _ in gl.static_range(N_EVENTS):
        ctx = profiler_event_instant(ctx, TICK)


@gluon.jit
def ws_straight_kernel(prof, N_EVENTS: gl.constexpr, PER_WARP: gl.constexpr = False):
    """N_EVENTS instants in each of two partitions (4 default warps, a 1-warp worker)."""
    gl.warp_specialize(
        [
            (_straight_partition, (prof, 0, N_EVENTS, PER_WARP)),
            (_straight_partition, (prof, 4, N_EVENTS, PER_WARP)),
        ],
        [1],
        [48],
    )


_STAMP = gl.constexpr("{\n\t.reg .u64 t;\n\tmov.u64 t, %globaltimer;\n\tmov.b64 $0, t;\n\t}")


@gluon.jit
def smem_stage_kernel(prof, iters, STAGE: gl.constexpr):
    """Why gluon_ops has no staged lanes: a stage allocated with Gluon's own
    gl.allocate_shared_memory (so the compiler would count it), one record per warp per event
    stored through a row at the cursor, in a loop as events are. The compiler's barrier analysis
    cannot tell that the rows differ, so it puts a barrier (bar.sync) before every event's store:
    dearer than the direct global store, and it holds the partition's warps together."""
    nw: gl.constexpr = gl.num_warps()
    per_warp: gl.constexpr = gl.SliceLayout(0, gl.BlockedLayout([1, 1], [32, 1], [1, nw], [0, 1]))
    stage = gl.allocate_shared_memory(gl.int64, [STAGE, nw], gl.SwizzledSharedLayout(1, 1, 1, [0]))
    w = gl.arange(0, nw, per_warp)
    for i in range(iters):
        t = gl.inline_asm_elementwise(_STAMP, "=l,r", [w], dtype=gl.int64, is_pure=False, pack=1)
        stage.index(gl.minimum(i, STAGE - 1)).store(t)


def ring_sequence(iters: int) -> list[tuple[int, int]]:
    """(kind, event id) of every record one lane of ring_kernel attempts, in order."""
    from sm_profiler.wire import format as fmt

    seq = [(fmt.KIND_INSTANT, PARTITION.value)]
    for i in range(iters):
        seq.append((fmt.KIND_BEGIN, ITER.value))
        if i % 7 == 0:
            seq.append((fmt.KIND_INSTANT, TICK.value))
        seq.append((fmt.KIND_END, ITER.value))
    return seq


@gluon.jit
def ring_kernel(prof, iters, PER_WARP: gl.constexpr = False):
    """A persistent loop recording far more than a lane holds, into a ring (ring_sequence)."""
    ctx = profiler_init(prof, gl.program_id(0), 0, PER_WARP=PER_WARP, RING=True)
    ctx = profiler_event_instant(ctx, PARTITION)
    for i in range(iters):
        ctx = profiler_event_start(ctx, ITER)
        if i % 7 == 0:
            ctx = profiler_event_instant(ctx, TICK)
        ctx = profiler_event_end(ctx, ITER)
    profiler_flush(ctx)
