"""Decode a raw capture into TraceData, vectorized with numpy (no Python loop per event or lane).

Steps: validate the header; count each lane's records (leading non-zero slots, or the attempted
count the device wrote on overflow); rebuild 64-bit times from each lane's anchor by summing the
forward distances of the low 32-bit words; pair begins with ends per (lane, event id) by nesting
level; report dropped records and unmatched begins/ends instead of failing on them.

Structural damage (bad magic, wrong size, records after an empty slot, reserved bits set) raises
FormatError: a trace that decodes is one the device could have written.
"""

from __future__ import annotations

import numpy as np

from . import format as fmt
from .capture import Capture
from .errors import FormatError
from .trace import INSTANT, RANGE, KernelInfo, TraceData

_I32 = np.int32


def decode(capture: Capture | list[Capture]) -> TraceData:
    """Decode one capture, or several onto one time axis (one `capture` index each)."""
    if isinstance(capture, (list, tuple)):
        return TraceData.concat([decode(c) for c in capture])
    words = capture.words
    layout = fmt.Layout.from_header(words)
    lanes = layout.lanes(words)
    nl, cap = layout.num_lanes, layout.capacity

    anchor = lanes["anchor"]
    sm_att = lanes["sm_attempted"]
    recs = lanes["records"]  # (lanes, capacity) view, no copy
    sm = (sm_att & fmt.LOW32).astype(_I32)
    att_hdr = (sm_att >> np.uint64(32)).astype(np.int64)

    written = _count_written(recs)
    initialized = anchor != 0
    _check_lanes(written, att_hdr, initialized, recs, cap)
    attempted = np.where(att_hdr > 0, att_hdr, written)

    lane_ids = np.arange(nl, dtype=_I32)
    block = lane_ids // layout.num_groups
    group = lane_ids % layout.num_groups

    # Flat records in lane-major, write order.
    if int(written.min(initial=cap)) == cap:
        flat = recs.reshape(-1)
    else:
        flat = recs[np.arange(cap) < written[:, None]]
    rec_lane = np.repeat(lane_ids, written)
    tag = (flat & fmt.LOW32).astype(np.uint32)
    kind = (tag & fmt.KIND_MASK).astype(np.int8)
    event = ((tag >> fmt.EVENT_SHIFT) & fmt.EVENT_MASK).astype(np.int16)
    _check_tags(tag, kind, rec_lane)
    time_ns = _rebuild_times(flat, rec_lane, written, anchor)
    del flat, tag

    begin_pos, end_pos, unmatched_pos = _pair(kind, event, rec_lane)
    instant_pos = np.flatnonzero(kind == fmt.KIND_INSTANT)

    # One row per range or instant, ordered by the position of its first record (lane, then
    # time order) without a sort: scatter row numbers into a position-indexed array.
    n = len(kind)
    starts = np.concatenate([begin_pos, instant_pos])
    ends = np.concatenate([end_pos, instant_pos])
    kinds = np.concatenate(
        [np.full(len(begin_pos), RANGE, np.int8), np.full(len(instant_pos), INSTANT, np.int8)]
    )
    slot = np.full(n, -1, dtype=np.int64)
    slot[starts] = np.arange(len(starts))
    order = slot[slot >= 0]
    del slot
    s_pos, e_pos = starts[order], ends[order]
    ev_lane = rec_lane[s_pos]
    events = {
        "capture": np.zeros(len(order), _I32),
        "lane": ev_lane,
        "sm": sm[ev_lane],
        "block": block[ev_lane],
        "group": group[ev_lane],
        "event": event[s_pos].astype(_I32),
        "kind": kinds[order],
        "start_ns": time_ns[s_pos],
        "end_ns": time_ns[e_pos],
    }
    um_lane = rec_lane[unmatched_pos]
    unmatched = {
        "capture": np.zeros(len(unmatched_pos), _I32),
        "lane": um_lane,
        "sm": sm[um_lane],
        "block": block[um_lane],
        "group": group[um_lane],
        "event": event[unmatched_pos].astype(_I32),
        "kind": kind[unmatched_pos],
        "time_ns": time_ns[unmatched_pos],
    }
    lanes_t = {
        "capture": np.zeros(nl, _I32),
        "lane": lane_ids,
        "sm": np.where(initialized, sm, -1).astype(_I32),
        "block": block,
        "group": group,
        "anchor_ns": anchor.astype(np.int64),
        "written": written,
        "attempted": attempted,
        "dropped": attempted - written,
        "initialized": initialized,
    }
    info = KernelInfo(
        name=capture.kernel_name,
        num_blocks=layout.num_blocks,
        num_groups=layout.num_groups,
        capacity=cap,
        emulated=layout.emulated,
        group_names=dict(capture.group_names),
        metadata=dict(capture.metadata),
    )
    return TraceData(events, lanes_t, unmatched, [info], dict(capture.event_names))


def _count_written(recs: np.ndarray) -> np.ndarray:
    """Records per lane = index of the first empty (zero) slot, or capacity if none is empty."""
    nonzero = recs != 0
    first_empty = np.argmin(nonzero, axis=1)
    full = nonzero[:, -1] if recs.shape[1] else np.ones(len(recs), bool)
    return np.where(full & nonzero[:, 0], recs.shape[1], first_empty).astype(np.int64)


def _check_lanes(written, att_hdr, initialized, recs, cap) -> None:
    nl = len(written)
    # Nothing may follow the first empty slot: count non-zero slots and compare.
    nonzero_total = np.count_nonzero(recs, axis=1)
    bad = np.flatnonzero(nonzero_total != written)
    if len(bad):
        i = int(bad[0])
        raise FormatError(
            f"lane {i}: {int(nonzero_total[i])} non-zero records but only the first "
            f"{int(written[i])} are contiguous; the buffer was not zeroed before the launch "
            "(call init_buffer()) or is corrupt"
        )
    bad = np.flatnonzero(~initialized & ((written > 0) | (att_hdr > 0)))
    if len(bad):
        i = int(bad[0])
        raise FormatError(f"lane {i} holds records but was never initialised (anchor is 0): corrupt buffer")
    bad = np.flatnonzero((att_hdr > 0) & ((att_hdr <= cap) | (written < cap)))
    if len(bad):
        i = int(bad[0])
        raise FormatError(
            f"lane {i}: overflow count {int(att_hdr[i])} is impossible with capacity {cap} and "
            f"{int(written[i])} records written: corrupt buffer"
        )
    del nl


def _check_tags(tag: np.ndarray, kind: np.ndarray, rec_lane: np.ndarray) -> None:
    bad = np.flatnonzero((kind == 0) | ((tag & fmt.TAG_RESERVED_MASK) != 0))
    if len(bad):
        i = int(bad[0])
        raise FormatError(
            f"lane {int(rec_lane[i])}: record tag 0x{int(tag[i]):08x} has kind 0 or reserved bits "
            "set; this is not a record an sm_profiler op writes (corrupt buffer or another format)"
        )


def _rebuild_times(flat, rec_lane, written, anchor) -> np.ndarray:
    """64-bit ns times: anchor + running sum of forward distances between low 32-bit words."""
    n = len(flat)
    if n == 0:
        return np.zeros(0, np.int64)
    lo = flat >> np.uint64(32)
    lane_start = np.cumsum(written) - written  # index of each lane's first record
    has = written > 0
    starts = lane_start[has]
    prev = np.empty_like(lo)
    prev[1:] = lo[:-1]
    prev[starts] = anchor[has] & np.uint64(fmt.LOW32)
    d = (lo - prev) & np.uint64(fmt.LOW32)  # uint64 wraps modulo 2**64, the mask makes it 2**32
    del lo, prev
    cs = np.cumsum(d)
    before = cs[starts] - d[starts]  # sum of all earlier lanes' distances
    del d
    cs -= np.repeat(before, written[has])
    cs += np.repeat(anchor[has], written[has])
    return cs.view(np.int64)


def _pair(kind: np.ndarray, event: np.ndarray, rec_lane: np.ndarray):
    """Match begins with ends: returns (begin positions, end positions, unmatched positions).

    Fast path: treat each lane as one stack (every range nested in the ones open around it).
    Lanes where that pairs a begin with an end of another event id, or leaves anything unmatched,
    are redone with one stack per (lane, event id), which also pairs overlapping ranges.
    """
    be = np.flatnonzero(kind != fmt.KIND_INSTANT)
    if len(be) == 0:
        z = np.zeros(0, np.int64)
        return z, z, z
    lane = rec_lane[be]
    b, e, um = _match(be, lane.astype(np.int64), kind[be] == fmt.KIND_BEGIN)
    bad = np.zeros(int(rec_lane.max()) + 1 if len(rec_lane) else 0, bool)
    bad[rec_lane[b[event[b] != event[e]]]] = True
    bad[rec_lane[um]] = True
    if not bad.any():
        return b, e, um
    keep = ~bad[rec_lane[b]]
    b, e = b[keep], e[keep]
    slow = be[bad[lane]]
    key = rec_lane[slow].astype(np.int64) * fmt.NUM_EVENT_IDS + event[slow]
    order = np.argsort(key, kind="stable")
    slow, key = slow[order], key[order]
    b2, e2, um2 = _match(slow, key, kind[slow] == fmt.KIND_BEGIN)
    return np.concatenate([b, b2]), np.concatenate([e, e2]), um2


def _match(pos: np.ndarray, grp: np.ndarray, is_begin: np.ndarray):
    """Pair begins and ends in `pos` (sorted by group, then write order) by nesting level.

    In one group, the begins and ends at one level alternate in time (between two begins that
    open level L an end must close it), so a begin paired with the next record at its level is
    paired iff that record is an end. Levels may go negative past unmatched ends; that still holds.
    """
    delta = np.where(is_begin, 1, -1).astype(np.int64)
    cs = np.cumsum(delta)
    first = np.ones(len(pos), bool)
    first[1:] = grp[1:] != grp[:-1]
    gstart = np.flatnonzero(first)
    offset = (cs - delta)[gstart]
    depth_after = cs - np.repeat(offset, np.diff(np.append(gstart, len(pos))))
    level = depth_after + (~is_begin)
    lo, hi = (int(level.min()), int(level.max())) if len(level) else (0, 0)
    # Small integer keys get numpy's radix sort, which is linear.
    if -(1 << 15) <= lo and hi < (1 << 15):
        level = level.astype(np.int16)
    order = np.argsort(level, kind="stable")
    g, lv, bg = grp[order], level[order], is_begin[order]
    pair = bg[:-1] & ~bg[1:] & (g[:-1] == g[1:]) & (lv[:-1] == lv[1:])
    bi = order[:-1][pair]
    ei = order[1:][pair]
    paired = np.zeros(len(pos), bool)
    paired[bi] = True
    paired[ei] = True
    return pos[bi], pos[ei], pos[~paired]
