"""CuteDSL kernels instrumented with cute_ops, shared by test_cute_compile.py and test_cute_gpu.py.

Every buffer argument is a cute.Pointer (cute.runtime.make_ptr), so the same compiled function
serves a CPU-only compile (address 0) and a GPU run (the tensor's data_ptr()).
"""

from __future__ import annotations

import cutlass
import cutlass.cute as cute
from cutlass import Float32, Int32

import cute_ops

LOAD, COMPUTE, STORE = 0, 1, 2
LOOP, ITER, TICK, TAIL = 3, 4, 5, 6
PRODUCE, CONSUME = 7, 8
EVENT_NAMES = {
    LOAD: "load",
    COMPUTE: "compute",
    STORE: "store",
    LOOP: "loop",
    ITER: "iter",
    TICK: "tick",
    TAIL: "tail",
    PRODUCE: "produce",
    CONSUME: "consume",
}
THREADS = 128


def loop_records(iters: int) -> int:
    """Records one lane of loop_kernel writes: loop begin/end, iter begin/end, ticks, tail."""
    return 2 + 2 * iters + (iters + 2) // 3 + 2


def loop_rows(iters: int) -> int:
    """Decoded rows (ranges and instants) per lane of loop_kernel."""
    return 1 + iters + (iters + 2) // 3 + 1


# -- elementwise add: the plain kernel and the instrumented one, bodies otherwise identical ------


@cute.kernel
def add_kernel(
    x: cute.Pointer,
    y: cute.Pointer,
    out: cute.Pointer,
    prof_buf: cute.Pointer,
    PROFILE: cutlass.Constexpr[bool],
):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    i = bidx * THREADS + tidx
    tx = cute.make_tensor(x, cute.make_layout(1 << 20))
    ty = cute.make_tensor(y, cute.make_layout(1 << 20))
    to = cute.make_tensor(out, cute.make_layout(1 << 20))
    prof = cute_ops.init(prof_buf, bidx, 0, enabled=PROFILE)
    with prof.region(LOAD):
        a = tx[i]
        b = ty[i]
    prof.start(COMPUTE)
    c = a + b
    prof.end(COMPUTE, after=c)
    with prof.region(STORE):
        to[i] = c


@cute.kernel
def plain_add_kernel(
    x: cute.Pointer,
    y: cute.Pointer,
    out: cute.Pointer,
    prof_buf: cute.Pointer,
    PROFILE: cutlass.Constexpr[bool],
):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    i = bidx * THREADS + tidx
    tx = cute.make_tensor(x, cute.make_layout(1 << 20))
    ty = cute.make_tensor(y, cute.make_layout(1 << 20))
    to = cute.make_tensor(out, cute.make_layout(1 << 20))
    a = tx[i]
    b = ty[i]
    c = a + b
    to[i] = c


@cute.jit
def launch_add(x, y, out, prof_buf, grid: Int32, PROFILE: cutlass.Constexpr[bool]):
    add_kernel(x, y, out, prof_buf, PROFILE).launch(grid=(grid, 1, 1), block=(THREADS, 1, 1))


@cute.jit
def launch_plain_add(x, y, out, prof_buf, grid: Int32, PROFILE: cutlass.Constexpr[bool]):
    plain_add_kernel(x, y, out, prof_buf, PROFILE).launch(grid=(grid, 1, 1), block=(THREADS, 1, 1))


# -- straight-line events: the per-event cost, without loop overhead --------------------------


@cute.kernel
def straight_kernel(prof_buf: cute.Pointer, N_EVENTS: cutlass.Constexpr[int]):
    bidx, _, _ = cute.arch.block_idx()
    prof = cute_ops.init(prof_buf, bidx, 0)
    for k in cutlass.range_constexpr(N_EVENTS):
        if cutlass.const_expr(k % 2 == 0):
            prof.start(LOOP)
        else:
            prof.end(LOOP)


@cute.jit
def launch_straight(prof_buf, N_EVENTS: cutlass.Constexpr[int]):
    straight_kernel(prof_buf, N_EVENTS).launch(grid=(1, 1, 1), block=(THREADS, 1, 1))


# -- a dynamic loop with nested ranges, instants in a dynamic `if`, and `with` regions --------


@cute.kernel
def loop_kernel(
    out: cute.Pointer,
    prof_buf: cute.Pointer,
    iters: Int32,
    group: Int32,
    PROFILE: cutlass.Constexpr[bool],
    PER_WARP: cutlass.Constexpr[bool],
):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    step = Float32(1e-6)  # defined before the regions: must stay visible inside them
    acc = Float32(tidx) * Float32(1e-3)
    prof = cute_ops.init(prof_buf, bidx, group, per_warp=PER_WARP, enabled=PROFILE)
    prof.start(LOOP)
    for i in cutlass.range(iters, unroll=1):
        with prof.region(ITER):
            acc = acc * Float32(1.000001) + step
        if i % 3 == 0:
            prof.instant(TICK)
    prof.end(LOOP, after=acc)
    with prof.region(TAIL):
        result = acc + step  # defined inside the region: must stay visible after it
    to = cute.make_tensor(out, cute.make_layout(1 << 24))
    to[bidx * THREADS + tidx] = result


@cute.jit
def launch_loop(
    out,
    prof_buf,
    iters: Int32,
    group: Int32,
    grid: Int32,
    PROFILE: cutlass.Constexpr[bool],
    PER_WARP: cutlass.Constexpr[bool],
):
    loop_kernel(out, prof_buf, iters, group, PROFILE, PER_WARP).launch(
        grid=(grid, 1, 1), block=(THREADS, 1, 1)
    )


# -- two warp groups with chosen leaders: group 0 produces, group 1 consumes -------------------


@cute.kernel
def group_kernel(out: cute.Pointer, prof_buf: cute.Pointer, iters: Int32):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    wg = tidx // 128  # warp group 0 or 1
    prof = cute_ops.init(prof_buf, bidx, wg, leader=(tidx % 128) == 0)
    acc = Float32(tidx)
    for _ in cutlass.range(iters, unroll=1):
        if wg == 0:
            with prof.region(PRODUCE):
                acc = acc + Float32(1.0)
        else:
            with prof.region(CONSUME):
                acc = acc * Float32(0.5)
    to = cute.make_tensor(out, cute.make_layout(1 << 24))
    to[bidx * 256 + tidx] = acc


@cute.jit
def launch_group(out, prof_buf, iters: Int32, grid: Int32):
    group_kernel(out, prof_buf, iters).launch(grid=(grid, 1, 1), block=(256, 1, 1))


# -- ring mode: a persistent loop that records far more than a lane holds --------------------


def ring_sequence(iters: int) -> list[tuple[int, int]]:
    """(kind, event id) of every record one lane of ring_kernel attempts, in order."""
    from sm_profiler.wire import format as fmt

    seq = [(fmt.KIND_INSTANT, TAIL)]
    for i in range(iters):
        seq.append((fmt.KIND_BEGIN, ITER))
        if i % 7 == 0:
            seq.append((fmt.KIND_INSTANT, TICK))
        seq.append((fmt.KIND_END, ITER))
    return seq


@cute.kernel
def ring_kernel(prof_buf: cute.Pointer, iters: Int32, PER_WARP: cutlass.Constexpr[bool]):
    bidx, _, _ = cute.arch.block_idx()
    prof = cute_ops.init(prof_buf, bidx, 0, per_warp=PER_WARP, ring=True)
    prof.instant(TAIL)
    for i in cutlass.range(iters, unroll=1):
        prof.start(ITER)
        if i % 7 == 0:
            prof.instant(TICK)
        prof.end(ITER)
    prof.flush()


@cute.jit
def launch_ring(prof_buf, iters: Int32, grid: Int32, PER_WARP: cutlass.Constexpr[bool]):
    ring_kernel(prof_buf, iters, PER_WARP).launch(grid=(grid, 1, 1), block=(THREADS, 1, 1))


@cute.kernel
def lane_probe_kernel(
    prof_buf: cute.Pointer,
    out: cute.Pointer,
    block: Int32,
    group: Int32,
    PER_WARP: cutlass.Constexpr[bool],
    RING: cutlass.Constexpr[bool],
):
    """What cute_ops.init found for lane (block, group): out[0] records[0]'s byte address,
    out[1] the capacity, out[2] the ring mask (RING only). For the lane-rule test, which runs the
    compiled PTX on the CPU."""
    prof = cute_ops.init(prof_buf, block, group, per_warp=PER_WARP, ring=RING)
    to = cute.make_tensor(out, cute.make_layout(3))
    to[0] = prof._records
    to[1] = cutlass.Int64(prof._capacity)
    if cutlass.const_expr(RING):
        to[2] = cutlass.Int64(prof._mask)


@cute.jit
def lane_probe(
    prof_buf,
    out,
    block: Int32,
    group: Int32,
    PER_WARP: cutlass.Constexpr[bool],
    RING: cutlass.Constexpr[bool],
):
    lane_probe_kernel(prof_buf, out, block, group, PER_WARP, RING).launch(
        grid=(1, 1, 1), block=(64, 1, 1)
    )
