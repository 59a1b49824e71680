"""CuteDSL device ops: the sm_profiler wire format written from @cute.kernel code.

A `Profiler` is a handful of registers (the lane's records address, the cursor, the capacity, the
leader flag). Its methods emit inline PTX at the point where they are traced and advance the
cursor, a Python-level Int32: it never lives in global memory. The class implements CuteDSL's
value protocol (`__extract_mlir_values__` / `__new_from_mlir_values__`) with the cursor as its
only run-time value, so CuteDSL carries it through `cutlass.range` loops and dynamic `if`s like
any Int32 the kernel updates there.

The methods are plain Python that emit IR: no control flow of their own, no regions, so
`with prof.region(E):` does not open a scope and the code inside sees (and defines) the same
variables as the code around it.
"""

from __future__ import annotations

from typing import Any

import cutlass
import cutlass.cute as cute
from cutlass import Boolean, Int32, Int64, Numeric, Uint32
from cutlass._mlir import ir
from cutlass._mlir.dialects import arith, llvm
from cutlass.cutlass_dsl import T

from sm_profiler.errors import ConfigError, UsageError
from sm_profiler.record import ptx as _ptx
from sm_profiler.wire import format as fmt

_WORD_BYTES = fmt.WORD_BYTES


# --------------------------------------------------------------------------------------------
# Small IR helpers
# --------------------------------------------------------------------------------------------


def _asm(result, operands: list[ir.Value], text: str, constraints: str):
    """llvm.inline_asm with side effects: never hoisted, merged or dropped by LLVM.

    cute.arch.inline_ptx would rewrite the `%` of `%globaltimer`; this is the op it wraps.
    """
    return llvm.inline_asm(
        result,
        operands,
        text,
        constraints,
        has_side_effects=True,
        is_align_stack=False,
        asm_dialect=llvm.AsmDialect.AD_ATT,
    )


def _i32(value: int) -> ir.Value:
    return arith.constant(T.i32(), value)


def _load_u64(address: Int64) -> Int64:
    """A plain 64-bit global load (the header words, once per lane)."""
    ptr = llvm.inttoptr(llvm.PointerType.get(1), address.ir_value())
    return Int64(llvm.load(T.i64(), ptr))


def read_globaltimer() -> Int64:
    """The full 64-bit %globaltimer (ns), as a side-effecting read that stays where it is traced."""
    return Int64(_asm(T.i64(), [], _ptx.GLOBALTIMER, "=l"))


def _buffer_address(buffer: Any) -> Int64:
    """The byte address of word 0 of the profiler buffer, from a tensor, a pointer or an Int64."""
    if isinstance(buffer, cute.Tensor):
        dtype, ptr = buffer.element_type, buffer.iterator
    elif isinstance(buffer, cute.Pointer):
        dtype, ptr = buffer.dtype, buffer
    elif isinstance(buffer, Int64):
        return buffer
    else:
        raise UsageError(
            f"cute_ops.init: buffer must be the profiler buffer as a cute.Tensor "
            f"(from_dlpack(prof.get_buffer())), a cute.Pointer to Int64, or its Int64 address; "
            f"got {type(buffer).__name__}"
        )
    if dtype not in (cutlass.Int64, cutlass.Uint64):
        raise UsageError(
            f"cute_ops.init: the profiler buffer holds 64-bit words, but this buffer's element "
            f"type is {dtype}; pass SmProfiler.get_buffer() (torch.int64) unchanged"
        )
    return ptr.toint()


def _dependency(value: Any) -> ir.Value:
    """A 32-bit register that exists only once `value` does (no arithmetic for 32-bit values)."""
    if not isinstance(value, Numeric):
        raise UsageError(
            f"after= takes a scalar run-time value (a cutlass Numeric such as Float32 or Int32), "
            f"got {type(value).__name__}; for a register fragment pass one of its elements"
        )
    v = value.ir_value()
    width = type(value).width
    if not isinstance(v.type, ir.IntegerType):
        v = arith.bitcast(ir.IntegerType.get_signless(width), v)
    if width < 32:
        v = arith.extui(T.i32(), v)
    elif width > 32:
        v = arith.trunci(T.i32(), v)
    return v


# --------------------------------------------------------------------------------------------
# Compile-time argument checks
# --------------------------------------------------------------------------------------------


def _static_bool(value: Any, name: str) -> bool:
    if isinstance(value, bool):
        return value
    raise UsageError(
        f"cute_ops.init: {name} must be known when the kernel is compiled (a Python bool or a "
        f"cutlass.Constexpr[bool] kernel argument), got {type(value).__name__} {value!r}"
    )


def _event_id(event_id: Any) -> int:
    if isinstance(event_id, bool) or not isinstance(event_id, int):
        raise UsageError(
            f"event id must be a compile-time int (a Python int or a cutlass.Constexpr[int]), got "
            f"{type(event_id).__name__} {event_id!r}; the tag is baked into the instruction"
        )
    if not 0 <= event_id <= fmt.MAX_EVENT_ID:
        raise ConfigError(
            f"event id {event_id} is out of range: it must be in 0..{fmt.MAX_EVENT_ID} "
            "(the format's 12-bit event field); use SmProfiler.register_event ids"
        )
    return event_id


# --------------------------------------------------------------------------------------------
# The per-thread handle
# --------------------------------------------------------------------------------------------


class Profiler:
    """One thread's view of its lane. Create it with `cute_ops.init` inside a kernel.

    Every thread holds one and calls its methods (no `if` around them is needed); only the
    lane's leader stores. Disabled handles (enabled=False, or buffer None) emit nothing.
    """

    __slots__ = ("_records", "_cursor", "_capacity", "_leader", "_mode", "enabled", "_mask")

    def __init__(
        self,
        records: Int64 | None,
        cursor: Int32 | None,
        capacity: Int32 | None,
        leader: Int32 | None,
        enabled: bool,
        mode: str = "thread",
        mask: Int32 | None = None,
    ):
        self._records = records  # byte address of records[0] of this thread's lane
        self._cursor = cursor  # records attempted so far: the only run-time state
        self._capacity = capacity  # 0 for a lane outside the buffer's shape
        self._leader = leader  # Int32 flag; its meaning depends on the mode (ptx.RECORD_MODES)
        self._mode = mode  # "warp": warp 0 leads; "all": every warp; "thread": chosen threads
        self.enabled = enabled
        # init(ring=True): the slot mask (capacity - 1 in a ring buffer, else all ones)
        self._mask = mask

    # -- CuteDSL value protocol: the cursor is carried through dynamic loops and ifs ---------

    def __extract_mlir_values__(self) -> list[ir.Value]:
        return [self._cursor.ir_value()] if self.enabled else []

    def __new_from_mlir_values__(self, values: list[ir.Value]) -> Profiler:
        cursor = Int32(values[0]) if self.enabled else None
        return Profiler(
            self._records,
            cursor,
            self._capacity,
            self._leader,
            self.enabled,
            self._mode,
            self._mask,
        )

    # -- events ------------------------------------------------------------------------------

    def start(self, event_id: int, *, after: Any = None) -> None:
        """Begin a range of `event_id` (a compile-time int, 0..4095)."""
        self._record(event_id, fmt.KIND_BEGIN, after)

    def end(self, event_id: int, *, after: Any = None) -> None:
        """End the innermost open range of `event_id`. `after=x` stamps only once x exists."""
        self._record(event_id, fmt.KIND_END, after)

    def instant(self, event_id: int, *, after: Any = None) -> None:
        """Record a point event."""
        self._record(event_id, fmt.KIND_INSTANT, after)

    def region(self, event_id: int, *, after: Any = None) -> _Region:
        """`with prof.region(E):` records start(E) on entry and end(E, after=after) on exit.

        It opens no scope: names defined before are visible inside, and names defined inside
        stay visible after, as with any `with`.
        """
        _event_id(event_id)  # fail at the `with` line, not at its end
        return _Region(self, event_id, after)

    @property
    def cursor(self) -> Int32 | None:
        """Records attempted so far (an Int32 register; None when disabled)."""
        return self._cursor

    def _record(self, event_id: int, kind: int, after: Any) -> None:
        tag = fmt.make_tag(_event_id(event_id), kind)
        if not self.enabled:
            return
        operands = self._lane_operands() + [_i32(tag)]
        if self._mask is not None:
            operands.append(self._mask.ir_value())
            if after is None:
                _asm(None, operands, _ptx.RING_RECORD[self._mode], _ptx.RING_RECORD_CONSTRAINTS)
            else:
                operands.append(_dependency(after))
                _asm(
                    None,
                    operands,
                    _ptx.RING_RECORD_AFTER[self._mode],
                    _ptx.RING_RECORD_AFTER_CONSTRAINTS,
                )
        elif after is None:
            _asm(None, operands, _ptx.RECORD[self._mode], _ptx.RECORD_CONSTRAINTS)
        else:
            operands.append(_dependency(after))
            _asm(None, operands, _ptx.RECORD_AFTER[self._mode], _ptx.RECORD_AFTER_CONSTRAINTS)
        self._cursor = self._cursor + 1

    def _lane_operands(self) -> list[ir.Value]:
        """The operands every text takes first: records, cursor, capacity, leader."""
        return [
            self._records.ir_value(),
            self._cursor.ir_value(),
            self._capacity.ir_value(),
            self._leader.ir_value(),
        ]

    def flush(self) -> None:
        """Close a ring lane (init(..., ring=True)): writes its record count, so the decoder
        knows where the ring starts. Call once, after the last event; a no-op otherwise."""
        if not self.enabled or self._mask is None:
            return
        operands = self._lane_operands() + [self._mask.ir_value()]
        _asm(None, operands, _ptx.RING_CLOSE, _ptx.RING_CLOSE_CONSTRAINTS)

    def __repr__(self) -> str:
        return f"Profiler(enabled={self.enabled})"


class _Region:
    __slots__ = ("_prof", "_event_id", "_after")

    def __init__(self, prof: Profiler, event_id: int, after: Any):
        self._prof, self._event_id, self._after = prof, event_id, after

    def __enter__(self) -> Profiler:
        self._prof.start(self._event_id)
        return self._prof

    def __exit__(self, *exc) -> bool:
        if exc[0] is None:
            self._prof.end(self._event_id, after=self._after)
        return False


# --------------------------------------------------------------------------------------------
# Init
# --------------------------------------------------------------------------------------------


def _linear_block_index() -> Int32:
    bx, by, bz = cute.arch.block_idx()
    gx, gy, _ = cute.arch.grid_dim()
    return (bz * gy + by) * gx + bx


def _linear_thread_index() -> Int32:
    tx, ty, tz = cute.arch.thread_idx()
    nx, ny, _ = cute.arch.block_dim()
    return (tz * ny + ty) * nx + tx


def init(
    buffer: Any,
    block: Any = None,
    group: Any = 0,
    *,
    per_warp: bool = False,
    leader: Any = None,
    enabled: bool = True,
    ring: bool = False,
) -> Profiler:
    """Open this thread's lane and stamp its anchor and SM id. Call once, inside the kernel.

    buffer    the SmProfiler buffer: a cute.Tensor (from_dlpack(prof.get_buffer())), a
              cute.Pointer to Int64, or its Int64 address; None disables recording
    block     lane block index (default: the linear block index)
    group     lane group (an int or an Int32); with per_warp, the first group: warp w of the
              block writes lane group + w
    per_warp  False: one lane per (block, group), written by `leader`;
              True: one lane per warp, written by that warp (its threads store the same word)
    leader    with per_warp=False, a run-time Boolean that is true in exactly one thread of the
              lane (e.g. `tidx == 128` for the first thread of a consumer warp group): its
              stores are predicated per thread. Default: warp 0 of the block writes (all its
              threads, the same word) and the other warps branch over each event, which is
              cheaper than any per-thread leader
    enabled   compile-time bool; False emits nothing at all (the plain kernel's PTX)
    ring      compile-time bool; True honours a ring buffer (SmProfiler(ring=True)): record n
              goes to slot n & (capacity - 1), one AND more per event; call prof.flush() after
              the last event to close the lane. With a direct buffer it records as usual

    Lanes outside the buffer's shape (block >= num_blocks, group >= num_groups, negatives)
    record nothing (they write only the header's scratch word).
    """
    enabled = _static_bool(enabled, "enabled")
    per_warp = _static_bool(per_warp, "per_warp")
    ring = _static_bool(ring, "ring")
    if not enabled or buffer is None:
        return Profiler(None, None, None, None, enabled=False)
    if isinstance(leader, bool):
        raise UsageError(
            "cute_ops.init: leader must be a run-time Boolean true in one thread of the lane "
            "(e.g. tidx == 0), not a Python bool: every thread would write the same lane; pass "
            "a run-time comparison of the thread index"
        )
    if per_warp and leader is not None:
        raise ConfigError(
            "cute_ops.init: per_warp=True makes every warp the writer of its own lane; "
            "pass either per_warp=True or leader=..., not both"
        )

    base = _buffer_address(buffer)
    block = _linear_block_index() if block is None else Int32(block)
    group = Int32(group)
    tid = _linear_thread_index()
    if per_warp:
        # Not cute.arch.warp_idx(): it broadcasts with shfl.sync over the full warp, which is
        # undefined where only part of the warp runs the init.
        group = group + tid // 32
        mode, lead, stamper = "all", Boolean(True), cute.arch.lane_idx() == 0
    elif leader is None:
        # Warp 0 leads: every thread of it stores (the same word), the other warps branch over
        # each event; the first thread stamps the lane.
        warp0 = Int32(_asm(T.i32(), [tid.ir_value()], _ptx.WARP_ZERO, _ptx.WARP_ZERO_CONSTRAINTS))
        mode, lead, stamper = "warp", warp0 != 0, tid == 0
    else:
        mode, lead = "thread", Boolean(leader)
        stamper = lead

    # The lane rule (format.open_lane), spelled in IR rather than with ptx.OPEN_LANE's text, for
    # a measured reason: with the text, ptxas keeps the lane's address in uniform registers and
    # copies it back on every event, which made per-warp recording cost more (BENCHMARKS.md,
    # CuteDSL ops). tests/device/test_lane_rule.py runs this spelling's compiled PTX against
    # format.open_lane on the CPU.
    shape = _load_u64(base + fmt.HDR_SHAPE * _WORD_BYTES)
    capacity = Int32(_load_u64(base + fmt.HDR_CAPACITY_FLAGS * _WORD_BYTES) & fmt.LOW32)
    num_blocks = Int32(shape & fmt.LOW32)
    num_groups = Int32(shape >> 32)
    # Launch slots (format.py): the slot's start; past the last slot no lane is valid.
    ctrl = _load_u64(base + fmt.HDR_SLOTS * _WORD_BYTES)
    last = ctrl >> 32
    next_slot = ctrl & fmt.LOW32
    slot = Int64(
        arith.select((next_slot <= last).ir_value(), next_slot.ir_value(), (last + 1).ir_value())
    )
    slot_words = Int64(num_blocks) * Int64(num_groups) * Int64(capacity + fmt.LANE_HEADER_WORDS)
    base = base + slot * (slot_words + fmt.HEADER_WORDS) * _WORD_BYTES
    num_blocks = Int32(
        arith.select((slot <= last).ir_value(), num_blocks.ir_value(), Int32(0).ir_value())
    )
    # Unsigned compares also reject negative indices.
    valid = (Uint32(block) < Uint32(num_blocks)) & (Uint32(group) < Uint32(num_groups))
    lane = Int64(block) * Int64(num_groups) + Int64(group)
    lane_bytes = Int64(capacity + fmt.LANE_HEADER_WORDS) * _WORD_BYTES
    offset = lane * lane_bytes + fmt.LANE_HEADER_WORDS * _WORD_BYTES
    # A lane outside the shape gets capacity 0 and records at the end of the global header: its
    # events all take the overflow path, whose store lands in the header's scratch word
    # (format.HDR_SCRATCH), inside the buffer. So no event tests "is my lane real".
    offset = Int64(arith.select(valid.ir_value(), offset.ir_value(), Int64(0).ir_value()))
    capacity = Int32(arith.select(valid.ir_value(), capacity.ir_value(), Int32(0).ir_value()))
    records = base + fmt.HEADER_WORDS * _WORD_BYTES + offset
    stamp = Int32(valid & stamper)
    _asm(None, [records.ir_value(), stamp.ir_value()], _ptx.INIT, _ptx.INIT_CONSTRAINTS)
    # The leader flag ignores `valid` (capacity 0 already keeps such a lane in the scratch word):
    # a flag that depends on the thread index alone lets ptxas keep one predicate for all events.
    mask = None
    if ring:
        flags = Int32(_load_u64(base + fmt.HDR_CAPACITY_FLAGS * _WORD_BYTES) >> 32)
        is_ring = ((flags & fmt.FLAG_RING) != 0) & (capacity > 0)
        mask = Int32(
            arith.select(is_ring.ir_value(), (capacity - 1).ir_value(), Int32(-1).ir_value())
        )
    return Profiler(records, Int32(0), capacity, Int32(lead), enabled=True, mode=mode, mask=mask)
