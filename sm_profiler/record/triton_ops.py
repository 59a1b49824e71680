"""Triton device ops: record ranges and instants into the sm_profiler buffer from a @triton.jit kernel.

    from sm_profiler.triton_ops import (
        profiler_init, profiler_event_start, profiler_event_end, profiler_event_instant)

    @triton.jit
    def kernel(..., prof_buf, PROFILE: tl.constexpr):
        ctx = profiler_init(prof_buf, tl.program_id(0), 0, ENABLED=PROFILE)
        ctx = profiler_event_start(ctx, LOAD)
        x = tl.load(...)
        ctx = profiler_event_end(ctx, LOAD, after=x)

The context is a tuple of registers (records pointer, cursor, capacity, leader flag, and for
staged lanes the stage's shared address and last slot) that every op returns updated: the cursor
never lives in global memory, so no event costs a load, an atomic or a fence. Per event the device reads %globaltimer (keeping the low 32 bits) and does ONE 8-byte store
(see sm_profiler/wire/format.py for the record layout); a predicate turns the store of an overflowing
record into a 4-byte store of its cursor (the lane's drop count).

Modes
  per program (default): one lane per (program, group); warp 0 of the program stamps and stores
      (its lanes write the same word: one transaction); the other warps branch over every event
      with one warp-uniform branch, so they pay one instruction, not the whole op.
  per warp (PER_WARP=True): lane `group + warp index`; every warp reads its own timer and
      writes its own lane (its threads store the same word: one transaction), so warp skew is
      real. No event tests a leader flag; lanes outside the buffer's shape write only the
      header's scratch word (format.HDR_SCRATCH).
  per warp, staged (PER_WARP=True, STAGE=n): each warp's events go to its region of a static
      shared-memory stage of n records (no bounds test, no global store, no wait for the
      buffer header), and profiler_flush(ctx), once after the last event, copies them into
      the buffer. The cheapest per-warp recording; the stage takes (NUM_WARPS + 1) * (n + 2)
      * 8 B of shared memory per program (rounded up to 1 KiB), which can cost occupancy in a
      kernel that uses much shared memory itself (see docs/api.md).

Under TRITON_INTERPRET=1 (no GPU) inline asm is not available: the ops fall back to the host
clock (time.monotonic_ns) and an emulated SM id (program id modulo EMULATED_SM_COUNT), written
with plain tl.store. SmProfiler(device="cpu") marks such buffers as emulated.

Ordering caveat: the compiler may move a timer read across arithmetic, and a load's value is only
waited for where it is used. `after=value` makes the stamp wait for `value` (a scalar, or a tensor
that is first reduced with tl.sum — a reduction across the program, so it also waits for the
other warps); use it on the end of a range that should include a load or a computation.
"""

from __future__ import annotations

import os
import time

import triton
import triton.language as tl

from ..wire import format as fmt
from . import occupancy, ptx

# Compile-time copies of the wire format (format.py is the source of truth).
_HEADER_WORDS = tl.constexpr(fmt.HEADER_WORDS)
_LANE_HEADER_WORDS = tl.constexpr(fmt.LANE_HEADER_WORDS)
_HDR_SHAPE = tl.constexpr(fmt.HDR_SHAPE)
_HDR_CAPACITY_FLAGS = tl.constexpr(fmt.HDR_CAPACITY_FLAGS)
_HDR_SLOTS = tl.constexpr(fmt.HDR_SLOTS)
_HDR_SCRATCH = tl.constexpr(fmt.HDR_SCRATCH)
_SCRATCH_OUT_OF_SHAPE = tl.constexpr(fmt.SCRATCH_OUT_OF_SHAPE)
_SCRATCH_REOPENED = tl.constexpr(fmt.SCRATCH_REOPENED)
_KIND_BEGIN = tl.constexpr(fmt.KIND_BEGIN)
_KIND_END = tl.constexpr(fmt.KIND_END)
_KIND_INSTANT = tl.constexpr(fmt.KIND_INSTANT)
_EVENT_SHIFT = tl.constexpr(fmt.EVENT_SHIFT)
_MAX_EVENT_ID = tl.constexpr(fmt.MAX_EVENT_ID)
_EMULATED_SM_COUNT = tl.constexpr(fmt.EMULATED_SM_COUNT)
_FLAG_RING = tl.constexpr(fmt.FLAG_RING)
_RING_MARK = tl.constexpr(fmt.RING_MARK)

# Chosen once, when this module is imported: Triton's interpreter is a process-wide switch.
_INTERPRET = tl.constexpr(os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"))
# A staged lane's shared memory is invisible to Triton: warn at kernel load if it costs a block.
occupancy.install()


def _host_clock_ns() -> int:
    """Interpreter stand-in for %globaltimer (ns)."""
    return time.monotonic_ns()


# Triton's dependency scanner only accepts jit functions and builtins in jit code; this host
# function is reached only under the interpreter, where jit code runs as plain Python.
_host_clock_ns.__triton_builtin__ = True


# --------------------------------------------------------------------------------------------
# Init
# --------------------------------------------------------------------------------------------


@triton.jit
def profiler_init(
    buffer_ptr,
    block=None,
    group=0,
    ENABLED: tl.constexpr = True,
    PER_WARP: tl.constexpr = False,
    NUM_WARPS: tl.constexpr = 4,
    STAGE: tl.constexpr = 0,
    RING: tl.constexpr = False,
):
    """Open this program's lane and stamp its anchor. Returns the context the other ops take.

    buffer_ptr  the int64 tensor from SmProfiler.get_buffer() (or None: recording disabled)
    block       lane block index (default: the linear program id)
    group       lane group; with PER_WARP the first group, and warp w writes group + w
    ENABLED     constexpr; False compiles every op away (the kernel's PTX is the plain kernel's)
    NUM_WARPS   with PER_WARP: the launch's num_warps. The interpreter emulates that many warps;
                a staged GPU lane sizes its stage by it (extra warps' events count as dropped)
    STAGE       constexpr, with PER_WARP; 0 (default) writes every event straight into the
                buffer. n > 0 stages up to n events per warp in shared memory (the cheapest
                per-warp recording) and needs profiler_flush(ctx) after the last event;
                without it the lanes stay empty.
    RING        constexpr; True compiles ops that honour a ring buffer (SmProfiler(ring=True),
                the header's FLAG_RING): record n goes to slot n & (capacity - 1), one AND more
                per event, so a lane keeps its newest records; call profiler_flush(ctx) after
                the last event to close the lane. With a direct buffer they record as usual.
                False (default): the header's ring flag is not read, the ops cost what they did.
    Lanes outside the buffer's shape (block >= num_blocks, group >= num_groups) record nothing.
    """
    if buffer_ptr is not None:
        tl.static_assert(
            buffer_ptr.dtype.element_ty == tl.int64,
            "profiler_init: the buffer must be the int64 tensor from SmProfiler.get_buffer(); "
            "pass that, not another tensor",
        )
    tl.static_assert(STAGE >= 0, "STAGE must be >= 0 (0 = no shared-memory staging)")
    tl.static_assert(not (RING and STAGE > 0), "RING and STAGE do not combine: use one of them")
    if STAGE > 0:
        tl.static_assert(
            PER_WARP,
            "STAGE needs PER_WARP=True: per program, the direct ops already cost the floor per "
            "event (warp 0 records, the other warps branch past), and staging measured slower",
        )
        err: tl.constexpr = _stage_error(NUM_WARPS, STAGE)
        tl.static_assert(err == "", err)
    if not ENABLED:
        return _disabled_context()
    elif buffer_ptr is None:
        return _disabled_context()
    else:
        if block is None:
            block = _linear_program_id()
        else:
            # A literal block puts every program into one lane, where their records mix.
            tl.static_assert(
                isinstance(block, tl.tensor),
                "profiler_init: block is a Python literal, so every program would write the same "
                "lane; pass the program's index, e.g. tl.program_id(0), or leave block out",
            )
        # The lane rule (format.open_lane): _launch_slot, then _lane_in_slot.
        slot = _launch_slot(buffer_ptr)
        block = tl.full((), 0, tl.int32) + block
        if _INTERPRET:
            return _init_emulated(slot, block, group, PER_WARP, NUM_WARPS, STAGE, RING)
        else:
            if PER_WARP:
                group = group + _warp_index()
            group = tl.full((), 0, tl.int32) + group
            records, capacity, valid, mask = _lane_in_slot(slot, block, group)
            cursor = tl.full((), 0, tl.int32)
            if STAGE > 0:
                # The header loads above are not waited for until profiler_flush. The leader
                # (uint32, as per warp) is the has-region flag the flush needs.
                leader, stage = _init_staged_asm(NUM_WARPS, STAGE)
                return records, cursor, capacity, leader, stage, tl.full((), STAGE - 1, tl.uint32)
            else:
                leader = _init_lane_asm(records, valid.to(tl.int32), PER_WARP)
                z = tl.full((), 0, tl.int8)  # no stage
                if RING:
                    # The slot mask rides where a staged lane keeps its last slot.
                    return records, cursor, capacity, leader, z, mask
                else:
                    return records, cursor, capacity, leader, z, z


# Triton's spelling of the lane rule (format.open_lane), in two halves so that the GPU path can
# compute its warp index between them, where it always has (the PTX stays as it was). Triton
# keeps this arithmetic instead of ptx.OPEN_LANE for a measured reason (ptx.open_lane); the
# interpreter runs the same two functions, and tests/device/test_lane_rule.py runs them against
# format.open_lane and ptx.OPEN_LANE.


@triton.jit
def _launch_slot(buffer_ptr):
    """Slot 0's header -> this launch's slot: (its start, num_blocks (0 past the last slot),
    num_groups, capacity, header word w2)."""
    shape = tl.load(buffer_ptr + _HDR_SHAPE)
    num_blocks = (shape & 0xFFFFFFFF).to(tl.int32)
    num_groups = (shape >> 32).to(tl.int32)
    capacity_flags = tl.load(buffer_ptr + _HDR_CAPACITY_FLAGS)
    capacity = (capacity_flags & 0xFFFFFFFF).to(tl.int32)
    # This launch's slot is min(next, last + 1); past the last slot every lane is out of shape
    # and writes only the spare header's scratch word.
    slots = tl.load(buffer_ptr + _HDR_SLOTS)
    last = slots >> 32
    slot = tl.minimum(slots & 0xFFFFFFFF, last + 1)
    lanes = num_blocks.to(tl.int64) * num_groups
    slot_ptr = buffer_ptr + slot * (lanes * (capacity + _LANE_HEADER_WORDS) + _HEADER_WORDS)
    num_blocks = tl.where(slot <= last, num_blocks, 0)
    return slot_ptr, num_blocks, num_groups, capacity, capacity_flags


@triton.jit
def _lane_in_slot(slot, block, group):
    """The lane (block, group) of `slot` (from _launch_slot), elementwise over block and group
    (int32; the interpreter passes one group per emulated warp): (records[0]'s address,
    capacity, valid, ring mask (uint32))."""
    slot_ptr, num_blocks, num_groups, capacity, capacity_flags = slot
    # Unsigned compares also reject negative indices.
    valid = (block.to(tl.uint32) < num_blocks.to(tl.uint32)) & (
        group.to(tl.uint32) < num_groups.to(tl.uint32)
    )
    # A lane outside the shape gets capacity 0 and records at the end of the global header:
    # each of its events takes the overflow path and stores its cursor into the header's
    # scratch word (format.HDR_SCRATCH), inside the buffer. No event needs a "valid" test.
    lane = block.to(tl.int64) * num_groups + group
    offset = tl.where(valid, lane * (capacity + _LANE_HEADER_WORDS) + _LANE_HEADER_WORDS, 0)
    records = slot_ptr + _HEADER_WORDS + offset
    capacity = tl.where(valid, capacity, 0)
    # The ring mask: capacity - 1 for a real lane of a ring buffer, all ones (the direct rule)
    # otherwise.
    ring = ((capacity_flags >> 32) & _FLAG_RING) != 0
    mask = tl.where(ring & (capacity != 0), capacity - 1, -1).to(tl.uint32)
    return records, capacity, valid, mask


@triton.jit
def _disabled_context():
    # Values returned from a jit function become tensors, so "disabled" is marked by a type the
    # ops test at compile time (an int8 cursor); the constants are dead code and vanish.
    z = tl.full((), 0, tl.int8)
    return z, z, z, z, z, z


@triton.jit
def _linear_program_id():
    return (tl.program_id(2) * tl.num_programs(1) + tl.program_id(1)) * tl.num_programs(
        0
    ) + tl.program_id(0)


@triton.jit
def _warp_index():
    return tl.inline_asm_elementwise(
        "mov.u32 $0, %tid.x;\n\tshr.u32 $0, $0, 5;", "=r", [], dtype=tl.int32, is_pure=True, pack=1
    )


_INIT_STAGED_CONSTRAINTS = tl.constexpr(ptx.INIT_STAGED_CONSTRAINTS)
_INIT_PROGRAM_ASM = tl.constexpr(ptx.init_leader(per_warp=False))  # all of warp 0
_INIT_WARP_ASM = tl.constexpr(ptx.init_leader(per_warp=True))  # every warp, lane 0 stamps


def _ptx_text(name, *args):
    """ptx.<name>(*args), for the constexpr functions below."""
    return getattr(ptx, name)(*args)


# Triton's dependency scanner refuses plain functions referenced from jit code (constexpr
# functions included); this one only builds strings at compile time. Kernel cache keys still
# follow ptx.py's texts through _STAGED_TEXTS_KEY.
_ptx_text.__triton_builtin__ = True


@triton.constexpr_function
def _stage_error(num_warps, stage):
    return _ptx_text("stage_error", num_warps, stage)


@triton.constexpr_function
def _init_staged_text(num_warps, stage, texts_key):
    # texts_key is unused here: the caller passes a constexpr global built from ptx.py's texts,
    # so that Triton's kernel cache key (which hashes the constexpr globals a kernel reads, not
    # the Python code this calls) changes whenever those texts do.
    return _ptx_text("init_staged", num_warps, stage)


_STAGED_TEXTS_KEY = tl.constexpr(ptx.init_staged(1, 1) + ptx.flush() + ptx.record_staged(False))


@triton.jit
def _init_staged_asm(NUM_WARPS: tl.constexpr, STAGE: tl.constexpr):
    asm: tl.constexpr = _init_staged_text(NUM_WARPS, STAGE, _STAGED_TEXTS_KEY)
    has_region, stage = tl.inline_asm_elementwise(
        asm, _INIT_STAGED_CONSTRAINTS, [], dtype=(tl.uint32, tl.uint32), is_pure=False, pack=1
    )
    return has_region, stage


@triton.jit
def _init_lane_asm(records, valid, PER_WARP: tl.constexpr):
    # The leader's dtype tells the event ops, at compile time, which record text to use:
    # uint32 = every warp leads its lane (no test), int32 = warp 0 (a warp-uniform branch).
    if PER_WARP:
        leader = tl.inline_asm_elementwise(
            _INIT_WARP_ASM, "=r,l,r", [records, valid], dtype=tl.uint32, is_pure=False, pack=1
        )
    else:
        leader = tl.inline_asm_elementwise(
            _INIT_PROGRAM_ASM, "=r,l,r", [records, valid], dtype=tl.int32, is_pure=False, pack=1
        )
    return leader


# --------------------------------------------------------------------------------------------
# Events
# --------------------------------------------------------------------------------------------


@triton.jit
def profiler_event_start(ctx, event_id: tl.constexpr, after=None):
    """Begin a range of event `event_id` (constexpr, 0..4095). Returns the updated context."""
    return record_event(ctx, event_id, _KIND_BEGIN, after)


@triton.jit
def profiler_event_end(ctx, event_id: tl.constexpr, after=None):
    """End the innermost open range of `event_id`. `after=value` stamps only once value is ready."""
    return record_event(ctx, event_id, _KIND_END, after)


@triton.jit
def profiler_event_instant(ctx, event_id: tl.constexpr, after=None):
    """Record a point event."""
    return record_event(ctx, event_id, _KIND_INSTANT, after)


@triton.jit
def record_event(ctx, event_id: tl.constexpr, kind: tl.constexpr, after):
    """One event into the context's lane; the Gluon ops' events come here too (their contexts
    are these, with no stage), a tensor `after` already reduced by gluon_ops._reduced."""
    records, cursor, capacity, leader, stage, last = ctx
    if cursor.dtype == tl.int8:
        # Disabled context: nothing to record, nothing emitted.
        return ctx
    else:
        tl.static_assert(event_id >= 0, "event id must be >= 0")
        tl.static_assert(event_id <= _MAX_EVENT_ID, "event id must be <= 4095")
        tag: tl.constexpr = (tl.constexpr(event_id) << _EVENT_SHIFT) | kind
        if _INTERPRET:
            _record_emulated(records, cursor, capacity, leader, tag, stage, last)
        elif stage.dtype != tl.int8:
            _record_staged_asm(cursor, tag, stage, last, after)
        else:
            _record_asm(records, cursor, capacity, leader, tag, last, after)
        return records, cursor + 1, capacity, leader, stage, last


# ptx.record: t = %globaltimer; rec = tag << 32 | t.lo32; if leader: cursor < capacity ?
#   records[cursor] = rec : lane[1].hi32 = cursor (the latest dropped record)
# The texts and their constraints are ptx.py's (ptx.elementwise_index says where each is); the
# record's spelling suits the ptxas that Triton bundles (ptx.record explains why).
_VECTOR = ptx.vector_store_for(ptx.triton_ptxas_release())
_RECORD_TEXTS = tl.constexpr(ptx.elementwise_records(_VECTOR))
_RECORD_CONSTRAINTS = tl.constexpr(ptx.ELEMENTWISE_RECORD_CONSTRAINTS)


@triton.jit
def _record_asm(records, cursor, capacity, leader, tag: tl.constexpr, mask, after):
    # The leader's dtype says who records: uint32, every warp its own lane (no test); int32,
    # warp 0 (the other warps branch over the event, one instruction for them). A mask (not
    # int8: RING=True) wraps the slot: cursor & mask.
    if leader.dtype == tl.uint32:
        per_warp: tl.constexpr = 4
    else:
        per_warp: tl.constexpr = 0
    if mask.dtype != tl.int8:
        ring: tl.constexpr = 1
    else:
        ring: tl.constexpr = 0
    # The tag is a constant operand (a scalar i32, built without tl.full, which Gluon refuses).
    if after is None:
        asm: tl.constexpr = _RECORD_TEXTS[per_warp + ring]  # ptx.elementwise_index
        constraints: tl.constexpr = _RECORD_CONSTRAINTS[ring]
        if ring:
            _store_asm(asm, constraints, (records, cursor, capacity, leader, tag, mask))
        else:
            _store_asm(asm, constraints, (records, cursor, capacity, leader, tag))
    else:
        asm_after: tl.constexpr = _RECORD_TEXTS[per_warp + 2 + ring]
        constraints_after: tl.constexpr = _RECORD_CONSTRAINTS[2 + ring]
        dep = _dependency(after)
        if ring:
            _store_asm(
                asm_after, constraints_after, (records, cursor, capacity, leader, tag, mask, dep)
            )
        else:
            _store_asm(asm_after, constraints_after, (records, cursor, capacity, leader, tag, dep))


@triton.jit
def _store_asm(asm: tl.constexpr, constraints: tl.constexpr, operands):
    """An asm run for its stores (ptx.py's texts with first=1): its $0 is a dummy output."""
    tl.inline_asm_elementwise(asm, constraints, operands, dtype=tl.int32, is_pure=False, pack=1)


_STAGED_ASM = tl.constexpr(ptx.record_staged(after=False, first=1))
_STAGED_AFTER_ASM = tl.constexpr(ptx.record_staged(after=True, first=1))


@triton.jit
def _record_staged_asm(cursor, tag: tl.constexpr, stage, last, after):
    # The slot address is plain Triton arithmetic (every warp records), which the compiler fuses
    # into the loop's addressing and, with a known trip count, folds the clamp out of.
    slot = stage + tl.minimum(cursor.to(tl.uint32), last) * 8
    tag_reg = tl.full((), tag, tl.int32)
    if after is None:
        _store_asm(_STAGED_ASM, "=r,r,r", (slot, tag_reg))
    else:
        _store_asm(_STAGED_AFTER_ASM, "=r,r,r,r", (slot, tag_reg, _dependency(after)))


# --------------------------------------------------------------------------------------------
# Flush (staged lanes)
# --------------------------------------------------------------------------------------------

_FLUSH_ASM = tl.constexpr(ptx.flush(first=1))
_RING_CLOSE_ASM = tl.constexpr(ptx.ELEMENTWISE_RING_CLOSE)
_RING_CLOSE_CONSTRAINTS = tl.constexpr(ptx.ELEMENTWISE_RING_CLOSE_CONSTRAINTS)


@triton.jit
def profiler_flush(ctx):
    """Copy a staged warp lane (profiler_init(..., PER_WARP=True, STAGE=n)) into the buffer, or
    close a ring lane (RING=True: its record count, so the decoder knows where the ring starts);
    call it once, after the last event, in code every warp runs. Otherwise (and with recording
    disabled) it compiles to nothing, so instrumented kernels can always call it."""
    records, cursor, capacity, leader, stage, last = ctx
    if cursor.dtype == tl.int8:
        pass  # disabled
    elif stage.dtype == tl.int8 and last.dtype != tl.int8:
        if _INTERPRET:
            _ring_close_emulated(records, cursor, capacity, leader, last)
        else:
            operands = (records, cursor, capacity, leader, last)
            _store_asm(_RING_CLOSE_ASM, _RING_CLOSE_CONSTRAINTS, operands)
    elif stage.dtype == tl.int8:
        pass  # every event is already in the buffer
    elif _INTERPRET:
        _flush_emulated(records, cursor, capacity, leader, stage, last)
    else:
        _store_asm(_FLUSH_ASM, "=r,l,r,r,r,r,r", (records, cursor, capacity, stage, last, leader))


@triton.jit
def _dependency(value):
    """A 32-bit scalar that exists only once `value` does (a register move for 32-bit scalars)."""
    if isinstance(value, tl.tensor) and len(value.shape) > 0:
        value = tl.sum(tl.ravel(value).to(tl.float32), axis=0)
    if value.dtype.primitive_bitwidth == 32:
        return value.to(tl.int32, bitcast=True)
    elif value.dtype.is_int():
        return value.to(tl.int32)  # truncation: the low register, no arithmetic
    else:
        return value.to(tl.float32).to(tl.int32, bitcast=True)


# --------------------------------------------------------------------------------------------
# CPU interpreter fallback (TRITON_INTERPRET=1): the same layout, written with tl.store.
# --------------------------------------------------------------------------------------------


@triton.jit
def _init_emulated(
    slot,
    block,
    group,
    PER_WARP: tl.constexpr,
    NUM_WARPS: tl.constexpr,
    STAGE: tl.constexpr,
    RING: tl.constexpr,
):
    if PER_WARP:
        groups = group + tl.arange(0, NUM_WARPS)
    else:
        groups = group + tl.arange(0, 1)
    # Every mask is a tensor of the lanes' shape: Triton 3.9's interpreter refuses a scalar
    # bool combined with a tensor one ("mask has unsupported dtype").
    blocks = block + tl.zeros(groups.shape, tl.int32)
    records, capacity, valid, mask = _lane_in_slot(slot, blocks, groups)
    _flag_emulated(slot[0], records, valid)
    anchor = tl.full(groups.shape, _host_clock_ns(), tl.int64)
    if STAGE > 0:
        # The stage is emulated in the buffer's record slots (slots past min(capacity, STAGE)
        # are never written); as on the device, the lane header is written only by the flush,
        # so a kernel that forgets profiler_flush fails here as it would on a GPU. The stage
        # element carries the anchor until then.
        stage = anchor
        last = tl.full((), STAGE - 1, tl.int32)
    else:
        _stamp_emulated(records, anchor, valid, tl.zeros(anchor.shape, tl.int64))
        stage = tl.full((), 0, tl.int8)
        if RING:
            last = mask.to(tl.int32, bitcast=True)  # the slot mask
        else:
            last = stage
    return records, tl.full((), 0, tl.int32), capacity, valid, stage, last


@triton.jit
def _flag_emulated(buffer_ptr, records, valid):
    # What the device cannot afford to check, the interpreter can: it sets flags in the header's
    # scratch word (format.py) that the stats turn into warnings. An out-of-shape lane writes the
    # high half, as its drop store on a GPU does; a lane whose anchor is already set was opened
    # by an earlier launch into the same buffer (or by a second program), so its records mix.
    scratch = buffer_ptr + _HDR_SCRATCH + tl.zeros(valid.shape, tl.int64)
    old = tl.load(records - 2, mask=valid, other=0)
    flags = tl.where(valid, 0, _SCRATCH_OUT_OF_SHAPE) | tl.where(old != 0, _SCRATCH_REOPENED, 0)
    word = tl.load(scratch)
    tl.store(scratch, word | flags, mask=flags != 0)


@triton.jit
def _stamp_emulated(records, anchor, valid, last_dropped):
    # The lane header: the anchor, and sm | last_dropped << 32 (format.lane_word1).
    sm = _linear_program_id() % _EMULATED_SM_COUNT
    tl.store(records - 2, anchor, mask=valid)
    tl.store(records - 1, (last_dropped << 32) + sm, mask=valid)


@triton.jit
def _record_emulated(records, cursor, capacity, leader, tag: tl.constexpr, stage, last):
    t = tl.full(records.shape, _host_clock_ns(), tl.int64) & 0xFFFFFFFF
    rec = (tl.full(t.shape, tag, tl.int64) << 32) | t
    cursor = cursor + tl.zeros(records.shape, tl.int32)  # a tensor, so masks are tensors
    if stage.dtype != tl.int8:
        # Staged: slot min(cursor, last); the flush counts the drops.
        slot = tl.minimum(cursor, last)
        tl.store(records + slot, rec, mask=leader & (slot < capacity))
    else:
        slot = cursor
        if last.dtype != tl.int8:
            slot = cursor & last  # RING: the mask is all ones unless the buffer is a ring
        fits = slot < capacity
        tl.store(records + slot, rec, mask=leader & fits)
        # Overflow: the cursor of this dropped record goes into the high half of lane word 1.
        word1 = tl.load(records - 1, mask=leader & ~fits, other=0)
        last_dropped = cursor.to(tl.int64) << 32
        tl.store(records - 1, (word1 & 0xFFFFFFFF) | last_dropped, mask=leader & ~fits)


@triton.jit
def _ring_close_emulated(records, cursor, capacity, leader, mask):
    # As ptx.ring_close: in a ring buffer, lane[1].hi32 = RING_MARK | cursor, and a lane that
    # wrapped gets its anchor re-stamped with the time of the close.
    cursor = cursor + tl.zeros(records.shape, tl.int32)
    mask = mask + tl.zeros(records.shape, tl.int32)
    cap = capacity + tl.zeros(records.shape, tl.int32)
    close = leader & (mask != -1) & (cap > 0)
    old = tl.load(records - 2, mask=close, other=0)
    anchor = tl.where(cursor > cap, tl.full(records.shape, _host_clock_ns(), tl.int64), old)
    _stamp_emulated(records, anchor, close, cursor.to(tl.int64) | _RING_MARK)


@triton.jit
def _flush_emulated(records, cursor, capacity, leader, anchor, last):
    # The device's rule: the stage held every record if cursor <= STAGE; otherwise its last slot
    # holds the newest record, which is dropped (here: erased from the buffer).
    cursor = cursor + tl.zeros(records.shape, tl.int32)  # tensors, so masks are tensors
    last = last + tl.zeros(records.shape, tl.int32)
    overflowed = cursor > last + 1
    erase = leader & overflowed & (last < capacity)
    tl.store(records + last, tl.zeros(records.shape, tl.int64), mask=erase)
    kept = tl.minimum(tl.where(overflowed, last, cursor), capacity)
    last_dropped = tl.where(kept < cursor, cursor - 1, 0).to(tl.int64)
    _stamp_emulated(records, anchor, leader, tl.zeros(anchor.shape, tl.int64) + last_dropped)
