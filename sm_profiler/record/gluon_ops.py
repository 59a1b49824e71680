"""Gluon device ops: record ranges and instants into the sm_profiler buffer from a @gluon.jit kernel,
in the default partition and in every worker partition of `gl.warp_specialize`.

    from sm_profiler.gluon_ops import (
        profiler_init, profiler_event_start, profiler_event_end, profiler_event_instant)

    @gluon.jit
    def producer(prof, ..., PROFILE: gl.constexpr):           # a worker partition
        ctx = profiler_init(prof, gl.program_id(0), PRODUCER, ENABLED=PROFILE)
        ctx = profiler_event_start(ctx, WAIT_EMPTY)
        mbarrier.wait(empty, phase)
        ctx = profiler_event_end(ctx, WAIT_EMPTY)

The names, arguments and the context are those of `sm_profiler.triton_ops`, whose event and
flush functions these call (the inline PTX of `sm_profiler.record.ptx`; the lane is opened by its
OPEN_LANE): per event one %globaltimer read and one 8-byte store, the cursor in a register, no
load, atomic or fence. Differences, all from what a partition is:

  per partition (default): one lane per (block, group). Call `profiler_init` at the start of
      each partition function with that partition's group: worker partitions take no tensors,
      so each opens its own lane (the buffer pointer is an ordinary argument). The first warp of
      the partition opens the lane and records, the other warps branch past the init and each
      event; a one-warp partition records with no leader test. "First" is counted inside the
      partition: the ops take the thread index from a Gluon `arange` laid one element per
      thread over `gl.num_warps()` warps, which the compiler numbers from the partition's first
      warp (a raw %tid.x would point at warp 0 of the block, which no worker partition has).
  per warp (PER_WARP=True): lane `group + warp index inside the partition`, every warp records.
      Give each partition its own range of groups, e.g. default group 0..3, producer 4.
      Per warp costs more than per partition on a warp-specialized loop (BENCHMARKS.md has the
      numbers); in loops larger than the instruction cache both swing by build, not by mode.

No election between partitions is needed or done: every partition writes its own lane, and a
lane's writer is chosen inside it. (Triton briefly de-duplicated side-effecting inline asm across
partitions, #11511, and reverted it: the ops never rely on either behaviour.)

Staging (STAGE > 0) is not offered, on purpose. Gluon's own shared memory
(`gl.allocate_shared_memory`) would let the compiler count the stage, but a store of one record
per warp into a row at the cursor, in a loop of events, gets a barrier (`bar.sync`) before it:
the compiler's barrier analysis cannot tell that the rows differ. Measured on CPU compiles with
Triton 3.6, 3.7, 3.8 and 3.9 (3.9 drops the barrier only in straight-line code, where the rows
are constants); tests/device/test_gluon_compile.py pins it, and fails when that changes. A barrier per
event costs more than the direct global store and holds the partition's warps together, which
a profiler must not do. `profiler_flush` is a no-op kept for symmetry with the Triton ops.
There is no interpreter fallback: Triton's interpreter does not run Gluon kernels.
"""

from __future__ import annotations

from triton.experimental import gluon
from triton.experimental.gluon import language as gl

from ..wire import format as fmt
from . import ptx
from . import triton_ops as _triton_ops

# Compile-time copies of the wire format (format.py is the source of truth).
_HEADER_WORDS = gl.constexpr(fmt.HEADER_WORDS)
_KIND_BEGIN = gl.constexpr(fmt.KIND_BEGIN)
_KIND_END = gl.constexpr(fmt.KIND_END)
_KIND_INSTANT = gl.constexpr(fmt.KIND_INSTANT)

# ptx.open_lane finds the lane and stamps its anchor and SM id. The events and the flush are the
# Triton ops' own jit functions (a @gluon.jit function may call @triton.jit ones): one dispatch
# over ptx.py's record texts for the two.
_OPEN_LANE_ASM = gl.constexpr(ptx.OPEN_LANE)
_OPEN_LANE_CONSTRAINTS = gl.constexpr(ptx.OPEN_LANE_CONSTRAINTS)
_WARP_ZERO_ASM = gl.constexpr(ptx.WARP_ZERO_VOTED)
_WARP_ZERO_CONSTRAINTS = gl.constexpr(ptx.WARP_ZERO_CONSTRAINTS)


@gluon.jit
def profiler_init(
    buffer_ptr,
    block=None,
    group=0,
    ENABLED: gl.constexpr = True,
    PER_WARP: gl.constexpr = False,
    RING: gl.constexpr = False,
):
    """Open this partition's lane (block, group), or with PER_WARP one lane per warp of the
    partition (group + warp index), and stamp its anchor and SM id. Returns the context.

    buffer_ptr: the int64 tensor from SmProfiler.get_buffer() (or None: records nothing).
    block: the lane's block index (a scalar such as gl.program_id(0)); default program_id(0).
    Lanes outside the buffer's shape record nothing (capacity 0: their stores of a drop cursor
    land in the header's scratch word, inside the buffer).
    RING: honour a ring buffer (SmProfiler(ring=True)), as the Triton ops' RING: one AND more
    per event, and profiler_flush(ctx) after the last event closes the lane."""
    if not ENABLED:
        return _disabled_context()
    elif buffer_ptr is None:
        return _disabled_context()
    else:
        gl.static_assert(
            buffer_ptr.dtype.element_ty == gl.int64,
            "sm_profiler: buffer_ptr must be the int64 tensor from SmProfiler.get_buffer()",
        )
        if block is None:
            block = gl.program_id(0)
        else:
            # A literal block puts every program into one lane, where their records mix.
            gl.static_assert(
                isinstance(block, gl.tensor),
                "profiler_init: block is a Python literal, so every program would write the same "
                "lane; pass the program's index, e.g. gl.program_id(0), or leave block out",
            )
        thread = _partition_thread()
        block = gl.full((), 0, gl.int32) + block
        if PER_WARP:
            # Every warp leads its own lane (uint32 tells the events: no leader test).
            lane_group = thread // 32 + group  # a tensor: each warp's own lane
            leader = gl.full(thread.shape, 1, gl.uint32, thread.type.layout)
            opens = leader.to(gl.int32)
        elif gl.num_warps() == 1:
            # A one-warp partition (a TMA producer, an MMA issuer): its warp writes the lane with
            # no leader test at all, as per warp. A branch around each event would cut the
            # partition's only instruction stream into blocks that ptxas cannot schedule across
            # (measured: the worker of benchmarks/gluon_overhead.py, BENCHMARKS.md).
            lane_group = gl.full((), 0, gl.int32) + group
            leader = gl.full(thread.shape, 1, gl.uint32, thread.type.layout)
            opens = leader.to(gl.int32)
        else:
            # The partition's first warp leads (int32: a warp-uniform branch per event), and
            # opens the lane alone: the other warps branch past the header's loads. A shift in
            # inline PTX (ptx.WARP_ZERO), not `warp == 0`: LLVM turns that into a mask of the
            # thread index that hides the flag's warp-uniformity from ptxas, which then wraps
            # every event in a BSSY/BSYNC pair (10 SASS per event instead of 8).
            lane_group = gl.full((), 0, gl.int32) + group
            leader = gl.inline_asm_elementwise(
                _WARP_ZERO_ASM,
                _WARP_ZERO_CONSTRAINTS,
                [thread],
                dtype=gl.int32,
                is_pure=True,
                pack=1,
            )
            opens = leader
        # ptx.open_lane: launch slots, the lane rule (a lane outside the shape gets capacity 0),
        # the stamp.
        offset, capacity, mask = gl.inline_asm_elementwise(
            _OPEN_LANE_ASM,
            _OPEN_LANE_CONSTRAINTS,
            [buffer_ptr, block, lane_group, opens, opens],
            dtype=(gl.int64, gl.int32, gl.uint32),
            is_pure=False,
            pack=1,
        )
        records = buffer_ptr + _HEADER_WORDS + offset
        cursor = gl.full((), 0, gl.int32)
        z = gl.full((), 0, gl.int8)  # no stage
        if RING:
            return records, cursor, capacity, leader, z, mask
        else:
            return records, cursor, capacity, leader, z, z


@gluon.jit
def _partition_thread():
    """The thread index inside the current partition, one element per thread (a tensor).

    gl.arange over 32 * num_warps elements laid one per thread: Gluon numbers a partition's
    threads from its first warp."""
    nw: gl.constexpr = gl.num_warps()
    layout: gl.constexpr = gl.BlockedLayout([1], [32], [nw], [0])
    return gl.arange(0, 32 * nw, layout)


@gluon.jit
def _disabled_context():
    # triton_ops._disabled_context in Gluon's spelling: Gluon's gl.full takes a layout, and
    # tl.full (which has none) is refused in a Gluon kernel.
    z = gl.full((), 0, gl.int8)
    return z, z, z, z, z, z


@gluon.jit
def profiler_event_start(ctx, event_id: gl.constexpr, after=None):
    """Begin a range of event `event_id` (constexpr, 0..4095). Returns the updated context."""
    return _record(ctx, event_id, _KIND_BEGIN, after)


@gluon.jit
def profiler_event_end(ctx, event_id: gl.constexpr, after=None):
    """End the innermost open range of `event_id`. `after=value` stamps only once value is ready."""
    return _record(ctx, event_id, _KIND_END, after)


@gluon.jit
def profiler_event_instant(ctx, event_id: gl.constexpr, after=None):
    """Record a point event."""
    return _record(ctx, event_id, _KIND_INSTANT, after)


@gluon.jit
def profiler_flush(ctx):
    """Close a ring lane (RING=True); otherwise nothing to flush: every event is already in the
    buffer (no staged lanes in Gluon yet). Kept so that kernels of either front end read alike."""
    _triton_ops.profiler_flush(ctx)


@gluon.jit
def _record(ctx, event_id: gl.constexpr, kind: gl.constexpr, after):
    # The Triton ops' event (triton_ops.record_event, which also turns a scalar `after` into the
    # dependency register); a tensor `after` is reduced here first, as Gluon's tensors need.
    records, cursor, capacity, leader, stage, last = ctx
    if cursor.dtype != gl.int8:
        if isinstance(after, gl.tensor):
            if len(after.shape) > 0:
                after = _reduced(after)
    return _triton_ops.record_event(ctx, event_id, kind, after)


@gluon.jit
def _reduced(value):
    """`value` summed to a float32 scalar with gl.sum, one axis at a time: a reduction across
    the partition's warps, which waits for them. (The Triton ops reduce with tl.ravel, which
    does not take Gluon's layouts.)"""
    value = value.to(gl.float32)
    for _ in gl.static_range(len(value.shape)):
        value = gl.sum(value, axis=0)
    return value
