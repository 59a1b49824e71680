"""Decode a raw capture into TraceData, vectorized with numpy (no Python loop per event or lane).

Steps: validate the header; count each lane's records (leading non-zero slots; the device writes
an attempted count into the lane header only on overflow); rebuild 64-bit times from each lane's
anchor by summing the forward distances of the low 32-bit words; pair begins with ends per
(lane, event id) by nesting level; report dropped records and unmatched begins/ends instead of
failing on them.

Structural damage (bad magic, wrong size, records after an empty slot, reserved bits set) raises
FormatError: a trace that decodes is one the device could have written.

Speed notes: records are processed as flat arrays of the smallest dtype that holds them (uint8
kinds, uint16 event ids, uint32 halves of each word read through strided views), positions are
int32 where they fit, and pairing sorts nothing in the common case: it walks the few nesting
levels instead.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import ConfigError, FormatError
from ..wire import format as fmt
from ..wire.capture import Capture
from .auto_table import AutoTable
from .model import INSTANT, RANGE, KernelInfo, TraceData

_I32 = np.int32
_U32 = np.uint32
_U64 = np.uint64
# Deeper nesting than this pairs with one radix sort of the levels instead of a pass per level.
_MAX_LEVEL_PASSES = 16
# Up to this many event ids in lanes with overlapping ranges are taken one pass per id.
_MAX_EVENT_PASSES = 16


def decode(capture) -> TraceData:
    """Decode one capture (a Capture), or several onto one time axis (a list of them: one
    `capture` index each), or auto mode's table (an AutoTable).

    A bare uint64/int64 array is decoded as a capture with no names.
    """
    if isinstance(capture, AutoTable):
        return capture.decode()  # auto mode's table: one pass over its rows, no lane buffers
    if isinstance(capture, (list, tuple)):
        if not capture:
            raise ConfigError("decode needs at least one capture, got an empty list")
        return TraceData.concat([decode(c) for c in capture])
    if isinstance(capture, np.ndarray):
        capture = Capture(words=capture)
    if not isinstance(capture, Capture):
        raise ConfigError(
            f"decode takes a Capture, a list of them or a uint64 array, got "
            f"{type(capture).__name__}; use SmProfiler.capture() or sm_profiler.load(path)"
        )
    return _decode_capture(capture)


def _decode_capture(capture: Capture) -> TraceData:
    """One capture's words as its tables: lanes, events (ranges and instants), unmatched."""
    words = capture.words
    layout = fmt.Layout.from_header(words)
    nl, cap = layout.num_lanes, layout.capacity
    lanes = _LaneHeaders.read(words, layout)
    recs, anchor, sm, written = lanes.recs, lanes.anchor, lanes.sm, lanes.written
    nonzero = lanes.nonzero
    lanes.nonzero = None  # freed below, once the records are gathered

    lane_ids = np.arange(nl, dtype=_I32)
    block = lane_ids // layout.num_groups
    group = lane_ids % layout.num_groups
    # First record of each lane in the flat record arrays (lane-major, write order).
    lane_start = np.zeros(nl + 1, np.int64)
    np.cumsum(written, out=lane_start[1:])
    n = int(lane_start[-1])
    pos_t = _I32 if n < 2**31 else np.int64

    # The two 32-bit halves of every written record, flat. Full lanes need no gather for tags.
    halves = recs.view(_U32).reshape(nl, cap, 2)  # little-endian: [..., 0] time, [..., 1] tag
    full = n == nl * cap
    tag = halves[..., 1] if full else halves[..., 1][nonzero]
    kind, event = _split_tags(tag, lane_start)
    del tag
    hi = halves[..., 0].reshape(-1) if full else halves[..., 0][nonzero]
    del nonzero
    stale = _stale_lanes(hi, lane_start)
    time_ns = _rebuild_times(hi, lane_start, written, anchor)
    del hi
    _check_times(time_ns, lane_start)

    b_pos, e_pos = _pair(kind, event, lane_start, written)

    # One row per range (at its begin) or instant, in record order: lane, then time.
    # Columns are built so that each big temporary is freed before the next one is made.
    row = kind == fmt.KIND_INSTANT
    row[b_pos] = True
    end_of = np.arange(n, dtype=pos_t) if n else np.zeros(0, pos_t)
    end_of[b_pos] = e_pos
    um_pos = _unmatched(kind, b_pos, e_pos)
    del b_pos, e_pos
    key = {"lane": lane_ids, "sm": sm, "block": block, "group": group}
    unmatched = _unmatched_table(um_pos, lane_start, key, event, kind, time_ns)
    del um_pos
    s_pos = np.flatnonzero(row).astype(pos_t, copy=False)
    del row
    rows_per_lane = np.diff(np.searchsorted(s_pos, lane_start))
    e_rows = end_of[s_pos]
    del end_of
    start_ns = time_ns[s_pos]
    end_ns = time_ns[e_rows]
    del e_rows, time_ns
    ev_event = event[s_pos].astype(_I32)
    del event
    ev_kind = np.where(kind[s_pos] == fmt.KIND_INSTANT, INSTANT, RANGE).astype(np.int8)
    del kind, s_pos
    events = {
        "capture": np.zeros(len(start_ns), _I32),
        **{k: np.repeat(v, rows_per_lane) for k, v in key.items()},
        "event": ev_event,
        "kind": ev_kind,
        "start_ns": start_ns,
        "end_ns": end_ns,
    }
    lanes_t = {
        "capture": np.zeros(nl, _I32),
        **key,
        "anchor_ns": anchor.astype(np.int64),
        "written": written,
        "attempted": lanes.attempted,
        "dropped": lanes.attempted - written,
        "initialized": lanes.initialized,
    }
    info = _kernel_info(capture, layout, stale, lanes)
    return TraceData(events, lanes_t, unmatched, [info], dict(capture.event_names))


@dataclass
class _LaneHeaders:
    """Each lane's header words, checked, and its records as written (a ring's unrolled)."""

    recs: np.ndarray  # (lanes, capacity) record words, a view of the buffer where not a ring
    anchor: np.ndarray
    sm: np.ndarray  # SM id of each initialised lane, -1 for the others
    written: np.ndarray  # records each lane holds
    nonzero: np.ndarray | None  # (lanes, capacity): the slots that hold a record
    attempted: np.ndarray  # records each lane tried to write (more than written: dropped)
    initialized: np.ndarray
    ring_lanes: list[int]  # ring lanes that wrapped
    unclosed: list[int]  # ring lanes whose ring was not closed

    @staticmethod
    def read(words: np.ndarray, layout: fmt.Layout) -> _LaneHeaders:
        nl, cap = layout.num_lanes, layout.capacity
        lane_words = words[fmt.HEADER_WORDS :].reshape(nl, layout.lane_words)
        anchor = lane_words[:, fmt.LANE_ANCHOR]
        sm_att = lane_words[:, fmt.LANE_SM_ATTEMPTED]
        recs = lane_words[:, fmt.LANE_HEADER_WORDS :]  # (lanes, capacity) view, no copy

        initialized = anchor != 0
        ring_lanes: list[int] = []
        unclosed: list[int] = []
        ring_n = None
        if layout.ring:
            recs, sm_att, anchor, ring_lanes, unclosed, ring_n = _unroll_rings(
                recs, sm_att, anchor, initialized, cap
            )
        _check_lane_headers(anchor, sm_att, initialized)
        sm = np.where(initialized, (sm_att & _U64(fmt.LOW32)).astype(np.int64), -1).astype(_I32)
        # The device stores the cursor of the latest record that did not fit (0: no overflow).
        att_hdr = (sm_att >> _U64(32)).astype(np.int64)
        att_hdr[att_hdr > 0] += 1
        written, nonzero = _count_written(recs)
        if ring_n is not None:
            _check_ring_counts(written, ring_n, cap)
        _check_lanes(written, att_hdr, initialized, sm_att, cap, fmt.header_version(words))
        attempted = np.where(att_hdr > 0, att_hdr, written)
        return _LaneHeaders(
            recs, anchor, sm, written, nonzero, attempted, initialized, ring_lanes, unclosed
        )


def _unmatched_table(um_pos, lane_start, key, event, kind, time_ns) -> dict[str, np.ndarray]:
    """The unmatched table: the records at `um_pos` (flat positions) that pair with nothing."""
    um_lane = np.repeat(key["lane"], np.diff(np.searchsorted(um_pos, lane_start)))
    return {
        "capture": np.zeros(len(um_pos), _I32),
        **{k: v[um_lane] for k, v in key.items()},
        "event": event[um_pos].astype(_I32),
        "kind": kind[um_pos].astype(np.int8),
        "time_ns": time_ns[um_pos],
    }


def _kernel_info(capture: Capture, layout: fmt.Layout, stale, lanes: _LaneHeaders) -> KernelInfo:
    """What the capture says of its kernel and what its lanes say went wrong."""
    words = capture.words
    scratch = int(words[fmt.HDR_SCRATCH]) if fmt.header_version(words) >= 2 else 0
    reopened = scratch & fmt.SCRATCH_REOPENED if layout.emulated else 0
    return KernelInfo(
        name=capture.kernel_name,
        num_blocks=layout.num_blocks,
        num_groups=layout.num_groups,
        capacity=layout.capacity,
        emulated=layout.emulated,
        group_names=dict(capture.group_names),
        metadata=dict(capture.metadata),
        stale_lanes=stale,
        ring=layout.ring,
        ring_unclosed_lanes=lanes.unclosed,
        ring_wrapped_lanes=lanes.ring_lanes,
        out_of_shape_writes=(scratch & ~reopened) != 0,
        reopened_lanes=reopened != 0,
    )


# -- ring buffers ---------------------------------------------------------------------------


def _unroll_rings(recs, sm_att, anchor, initialized, cap: int):
    """Ring lanes as direct lanes: records oldest first, the overwritten count as drops.

    A lane closed by profiler_flush holds RING_MARK | attempted in lane word 1; if it wrapped,
    its oldest kept record is at slot attempted % capacity: the lanes are rotated there (a copy
    of those lanes only), and lane word 1 becomes what a direct lane that dropped the same
    number of records would hold (last_dropped = attempted - 1), so the rest of decode pairs
    the records in time order; an end whose begin was overwritten is then an unmatched end.

    Times: the flush of a lane that wrapped overwrites its anchor with the 64-bit time of the
    flush, and times are rebuilt backwards from it (the newest record is the one nearest the
    flush), so a persistent kernel may run for any time; the lane's anchor becomes its oldest
    kept record's time. Returns (records, lane word 1, anchors, lanes that wrapped, full lanes
    that were never closed, the mark's count per lane or -1).
    """
    hi = (sm_att >> _U64(32)).astype(np.int64)
    marked = (hi & fmt.RING_MARK) != 0
    attempted = hi & (fmt.RING_MARK - 1)
    if bool((marked & ~initialized).any()):
        raise FormatError("a ring lane was closed but never initialised: corrupt buffer")
    wrapped = np.flatnonzero(marked & (attempted > cap))
    # Closed lanes that did not wrap are direct lanes that never overflowed.
    new_hi = np.where(marked, np.where(attempted > cap, attempted - 1, 0), hi)
    sm_att = (sm_att & _U64(fmt.LOW32)) | (new_hi.astype(np.uint64) << _U64(32))
    if len(wrapped):
        shift = (attempted[wrapped] % cap).astype(np.int64)
        cols = (np.arange(cap, dtype=np.int64)[None, :] + shift[:, None]) % cap
        recs = recs.copy()  # the capture's own words stay as the device wrote them
        recs[wrapped] = np.take_along_axis(recs[wrapped], cols, axis=1)
        low = (recs[wrapped] & _U64(fmt.LOW32)).astype(np.int64)
        span = ((low[:, 1:] - low[:, :-1]) % (1 << 32)).sum(axis=1)
        end = anchor[wrapped].astype(np.int64)
        last = end - ((end & fmt.LOW32) - low[:, -1]) % (1 << 32)
        if bool((last - span <= 0).any()):
            raise FormatError("a ring lane's records reach back before time 0: corrupt buffer")
        anchor = anchor.copy()
        anchor[wrapped] = (last - span).astype(np.uint64)
    full = (recs[:, -1] != 0) if cap else np.zeros(len(hi), bool)
    # Full lanes without the mark: written by ops compiled without RING (first records kept,
    # any overflow counted as by a direct lane) or never flushed (order unknown).
    unclosed = np.flatnonzero(initialized & ~marked & full).tolist()
    return recs, sm_att, anchor, wrapped.tolist(), unclosed, np.where(marked, attempted, -1)


def _check_ring_counts(written, ring_n, cap: int) -> None:
    """A closed ring lane holds exactly what its mark says: n records when it did not wrap
    (n <= capacity), every slot when it did. Fewer is a lane the flush did not describe (records
    left by an earlier launch, or a damaged mark); decoding it would invent drops or rebuild
    times from empty slots. ring_n: the mark's count per lane, -1 where there is no mark."""
    bad = np.flatnonzero((ring_n >= 0) & (written != np.minimum(ring_n, cap)))
    if len(bad):
        i = int(bad[0])
        n = int(ring_n[i])
        what = f"all {cap} slots (it wrapped)" if n > cap else f"exactly {n} records"
        raise FormatError(
            f"lane {i}: its ring mark counts {n} records, so it must hold {what}, but "
            f"{int(written[i])} slots are written: the buffer was not zeroed before the launch "
            "(call init_buffer()) or is corrupt"
        )


# -- counting and checking ------------------------------------------------------------------

# A lane's records are written in time order, so the forward distance between two consecutive
# low words is the gap between them. A distance this large (>= 2.1 s, half the low word's
# range) is far more likely a step back in time: a record left in the slot by an earlier launch
# into the same buffer, whose own records ended before this launch's (3 events, then 1: slots
# 1 and 2 still hold the first launch's). Reported, not decoded differently.
STALE_STEP_NS = 1 << 31


def _stale_lanes(hi: np.ndarray, lane_start: np.ndarray) -> list[int]:
    """Lanes (indices) in which a record's low word steps back from its predecessor's."""
    if hi.size < 2:
        return []
    step = np.subtract(hi[1:], hi[:-1], dtype=_U32)
    back = np.flatnonzero(step >= _U32(STALE_STEP_NS)) + 1  # position of the later record
    back = back[~np.isin(back, lane_start)]  # a lane's first record follows the anchor, not it
    if not len(back):
        return []
    return np.unique(np.searchsorted(lane_start, back, side="right") - 1).tolist()


def _count_written(recs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Records per lane (the leading non-zero slots) and the (lanes, capacity) non-zero mask.

    Raises FormatError when a lane has a non-zero slot after an empty one.
    """
    nonzero = recs != 0
    count = np.count_nonzero(nonzero, axis=1)
    if recs.shape[1]:
        # argmin finds the first empty slot (0 when there is none: then the lane is full).
        contiguous = (count == recs.shape[1]) | (np.argmin(nonzero, axis=1) == count)
        bad = np.flatnonzero(~contiguous)
        if len(bad):
            i = int(bad[0])
            first_empty = int(np.argmin(nonzero[i]))
            raise FormatError(
                f"lane {i}: {int(count[i])} non-zero records but only the first {first_empty} "
                "are contiguous (a record follows an empty slot); the buffer was not zeroed "
                "before the launch (call init_buffer()) or is corrupt"
            )
    return count.astype(np.int64), nonzero


def _check_lane_headers(anchor, sm_att, initialized) -> None:
    """Anchors must leave int64 room (times are int64 ns) and SM ids must fit the int32 column,
    where -1 means "never initialised"; the device writes neither, so a bad one is corruption."""
    bad = np.flatnonzero(anchor > _U64(fmt.MAX_TIME_NS))
    if len(bad):
        i = int(bad[0])
        raise FormatError(
            f"lane {i}: anchor {int(anchor[i])} ns is past the largest time {fmt.MAX_TIME_NS} "
            "(2**63 - 1 ns, 292 years of %globaltimer): corrupt buffer"
        )
    bad = np.flatnonzero(initialized & ((sm_att & _U64(fmt.LOW32)) > _U64(fmt.MAX_SM_ID)))
    if len(bad):
        i = int(bad[0])
        raise FormatError(
            f"lane {i}: SM id {int(sm_att[i]) & fmt.LOW32} is above {fmt.MAX_SM_ID}, which no GPU "
            "reports: corrupt buffer"
        )


def _check_times(time_ns: np.ndarray, lane_start: np.ndarray) -> None:
    """Rebuilt times past 2**63 - 1 ns would wrap negative in int64: refuse them.

    An anchor below 2**63 plus at most 2**24 gaps below 2**32 stays below 2**64, so a uint64 time
    past the limit shows as a negative int64 here, never as a wrapped small one.
    """
    if len(time_ns) == 0 or int(time_ns.min()) >= 0:
        return
    i = int(np.argmax(time_ns < 0))
    lane = int(np.searchsorted(lane_start, i, side="right") - 1)
    raise FormatError(
        f"lane {lane}: record {i - int(lane_start[lane])} lands at "
        f"{int(time_ns[i].view(_U64))} ns, past the largest time {fmt.MAX_TIME_NS} "
        "(2**63 - 1 ns): corrupt anchor or buffer"
    )


def _check_lanes(written, att_hdr, initialized, sm_att, cap: int, version: int) -> None:
    bad = np.flatnonzero(~initialized & ((written > 0) | (sm_att != 0)))
    if len(bad):
        i = int(bad[0])
        raise FormatError(
            f"lane {i} holds records or a lane header but was never initialised (anchor is 0): "
            "a staged kernel (STAGE) run under the CPU interpreter without profiler_flush(ctx), "
            "or a corrupt buffer"
        )
    # att_hdr = last_dropped + 1 records were attempted, more than were kept: a direct lane
    # drops only past a full lane, a staged lane (STAGE < capacity, format version 3) may drop
    # before it is full.
    impossible = att_hdr <= written
    if version < fmt.VERSION_EARLY_DROPS:
        impossible |= (att_hdr <= cap) | (written < cap)
    bad = np.flatnonzero((att_hdr > 0) & impossible)
    if len(bad):
        i = int(bad[0])
        raise FormatError(
            f"lane {i}: overflow index {int(att_hdr[i]) - 1} is impossible with {int(written[i])} "
            f"records kept (the device writes it only when it drops the record at that index, "
            f"after the ones it kept): corrupt buffer"
        )


def _split_tags(tag: np.ndarray, lane_start: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """uint8 kinds and uint16 event ids of the records' tags (high words; flat, record order)."""
    n = tag.size
    kind = np.bitwise_and(tag, fmt.KIND_MASK, out=np.empty(tag.shape, np.uint8), casting="unsafe")
    if n and (int(tag.max()) > fmt.TAG_RESERVED_MASK ^ fmt.LOW32 or int(kind.min()) == 0):
        flat = tag.reshape(-1)
        bad = (flat & _U32(fmt.TAG_RESERVED_MASK)) != 0
        bad |= (flat & _U32(fmt.KIND_MASK)) == 0
        i = int(np.argmax(bad))
        lane = int(np.searchsorted(lane_start, i, side="right") - 1)
        raise FormatError(
            f"lane {lane}: record {i - int(lane_start[lane])} has tag 0x{int(flat[i]):08x} with "
            "kind 0 or reserved bits set; no sm_profiler op writes that (corrupt buffer or "
            "another format)"
        )
    event = np.right_shift(
        tag, fmt.EVENT_SHIFT, out=np.empty(tag.shape, np.uint16), casting="unsafe"
    )
    return kind.reshape(-1), event.reshape(-1)


# -- times ----------------------------------------------------------------------------------


def _rebuild_times(hi: np.ndarray, lane_start, written, anchor) -> np.ndarray:
    """64-bit ns times: anchor + running sum of forward distances between low 32-bit words.

    One pass: each slot holds the distance to the previous record (uint32 arithmetic wraps
    modulo 2**32); each lane's first slot holds the jump from the previous lane's last time to
    this lane's first, so one cumulative sum over all lanes gives every lane's times.
    """
    n = hi.size
    times = np.empty(n, _U64)
    if n == 0:
        return times.view(np.int64)
    times[0] = 0
    np.subtract(hi[1:], hi[:-1], out=times[1:], dtype=_U32)
    has = written > 0
    starts = lane_start[:-1][has]
    first = anchor[has] + (hi[starts] - (anchor[has] & _U64(fmt.LOW32)).astype(_U32)).astype(_U64)
    within = np.add.reduceat(times, starts) - times[starts]  # sum of a lane's later distances
    last = first + within
    times[starts[0]] = first[0]
    times[starts[1:]] = first[1:] - last[:-1]  # uint64: wraps, and the sum wraps back
    np.cumsum(times, out=times)
    return times.view(np.int64)


# -- pairing --------------------------------------------------------------------------------


def _pair(kind, event, lane_start, written) -> tuple[np.ndarray, np.ndarray]:
    """Positions of paired begins and their ends; each end closes the latest open begin of its
    (lane, event id).

    Fast path: one stack per lane. Where that pairs a begin with an end of the same id
    everywhere, it is exactly the per-(lane, event id) result (a stack restricted to one id is
    that id's stack). Lanes where it pairs different ids are redone grouped by (event id, lane).
    """
    has = written > 0
    starts = lane_start[:-1][has]
    b, e = _pair_groups(kind, starts)
    mismatch = event[b] != event[e]
    if not mismatch.any():
        return b, e
    # Redo the lanes with a mismatch with one stack per (event id, lane): take their begin/end
    # records of one event id at a time, in record order, so each (event id, lane) is contiguous.
    pos_t = b.dtype
    flag = np.zeros(len(kind), bool)
    flag[b[mismatch]] = True
    del mismatch
    bad_lane = np.zeros(len(written), bool)
    bad_lane[has] = np.logical_or.reduceat(flag, starts)
    redo = np.repeat(bad_lane, written)
    keep = ~redo[b]
    bs, es = [b[keep]], [e[keep]]
    del b, e, keep, flag
    redo &= kind != fmt.KIND_INSTANT
    present = np.zeros(fmt.NUM_EVENT_IDS, bool)
    present[event] = True  # a superset of the ids in the redone lanes
    ids = np.flatnonzero(present)
    if len(ids) <= _MAX_EVENT_PASSES:
        chunks = (np.flatnonzero(redo & (event == i)) for i in ids)
    else:  # many ids: one stable radix sort of the uint16 ids, then split by id
        sel = np.flatnonzero(redo)
        sel = sel[np.argsort(event[sel], kind="stable")]
        chunks = np.split(sel, np.flatnonzero(np.diff(event[sel])) + 1)
    rec_lane = np.repeat(np.arange(len(written), dtype=np.int32), written)
    for sel in chunks:
        lane = rec_lane[sel]
        new_group = np.ones(len(sel), bool)
        new_group[1:] = lane[1:] != lane[:-1]
        b2, e2 = _pair_groups(kind[sel], np.flatnonzero(new_group))
        bs.append(sel[b2].astype(pos_t))
        es.append(sel[e2].astype(pos_t))
    return np.concatenate(bs), np.concatenate(es)


def _pair_groups(kind: np.ndarray, starts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Pair begins and ends with one stack per group (contiguous runs beginning at `starts`).

    Each begin and each matched end gets a level: the stack depth it opens / closes (unmatched
    ends and instants get 0). In one group the records of one level alternate begin, end,
    begin, end, ... (an unmatched begin can only be a group's last at its level), and across
    groups a level's first record is always a begin; so a begin is paired exactly when the next
    record at its level is an end. No position check between groups is needed.
    """
    n = len(kind)
    if n == 0 or not len(starts):
        return np.zeros(0, _I32), np.zeros(0, _I32)
    is_b = kind == fmt.KIND_BEGIN
    is_e = kind == fmt.KIND_END
    delta = is_b.view(np.int8) - is_e.view(np.int8)
    del is_e
    depth = _depth_before(delta, starts, floor=False)
    # An end on an empty stack is unmatched and leaves it empty; only then is the floor needed.
    # The plain sum shows it as a negative depth next, or as an end at depth 0 ending a group.
    last = np.append(starts[1:], n) - 1
    if int(depth.min()) < 0 or bool(np.any(depth[last] + delta[last] < 0)):
        depth = _depth_before(delta, starts, floor=True)
    del delta
    # A begin opens level depth+1; a matched end closes level `depth` (>= 1); unmatched ends
    # (depth 0 after the floor) and instants get level 0.
    top = int(depth.max()) + 1
    level_t = np.uint8 if top < 256 else np.uint16 if top < 65536 else depth.dtype
    level = np.add(depth, is_b, out=np.empty(n, level_t), casting="unsafe")
    del depth, is_b
    level *= (kind != fmt.KIND_INSTANT).view(np.uint8)
    pos_t = _I32 if n < 2**31 else np.int64
    bs, es = [np.zeros(0, pos_t)], [np.zeros(0, pos_t)]
    if top <= _MAX_LEVEL_PASSES:
        for lv in range(1, top + 1):
            bs_, es_ = _adjacent_pairs(np.flatnonzero(level == lv), kind, pos_t)
            bs.append(bs_)
            es.append(es_)
    else:
        sel = np.flatnonzero(level)
        idx = sel[np.argsort(level[sel], kind="stable")]
        del sel
        bs_, es_ = _adjacent_pairs(idx, kind, pos_t)
        bs.append(bs_)
        es.append(es_)
    return np.concatenate(bs), np.concatenate(es)


def _adjacent_pairs(idx: np.ndarray, kind: np.ndarray, pos_t) -> tuple[np.ndarray, np.ndarray]:
    """Begins in `idx` directly followed (in `idx`) by an end: (begin positions, end positions)."""
    k = kind[idx]
    p = np.flatnonzero((k[:-1] == fmt.KIND_BEGIN) & (k[1:] == fmt.KIND_END))
    return idx[p].astype(pos_t), idx[p + 1].astype(pos_t)


def _depth_before(delta: np.ndarray, starts: np.ndarray, floor: bool) -> np.ndarray:
    """Stack depth before each record, every group starting at 0.

    floor=False: the plain running sum of delta (+1 begin, -1 end), which goes negative after an
    unmatched end. floor=True: the depth of a real stack, where an end on an empty stack leaves it
    empty: depth - min(0, running minimum), computed over all groups at once by giving group k
    the baseline -k * big so that no group's minimum reaches into the next.
    """
    n = len(delta)
    lengths = np.diff(np.append(starts, n))
    big = int(lengths.max()) + 1 if floor else 0
    wide = len(starts) * big + n >= 2**31
    x = np.empty(n, np.int64 if wide else _I32)
    x[0] = 0
    np.cumsum(delta[:-1], out=x[1:])  # depth before each record, counted from record 0
    base = x[starts]  # ... and at each group's start: subtract it (and the floor baseline)
    if floor:
        base += np.arange(len(starts), dtype=base.dtype) * big
    if base.any():
        x -= np.repeat(base, lengths)
    if floor:
        x -= np.minimum.accumulate(x)
    return x


def _unmatched(kind, b_pos, e_pos) -> np.ndarray:
    """Positions of begins and ends that were not paired, in record order."""
    n_be = len(kind) - int(np.count_nonzero(kind == fmt.KIND_INSTANT))
    if n_be == 2 * len(b_pos):
        return np.zeros(0, np.int64)
    um = kind != fmt.KIND_INSTANT
    um[b_pos] = False
    um[e_pos] = False
    return np.flatnonzero(um)
