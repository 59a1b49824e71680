"""A pure-Python reference for the wire format, for tests only.

`encode` writes a stream description into uint64 words exactly as the device ops would: one
anchor and sm id per lane that ran, one word per record, the attempted count in the lane header
only when the lane overflowed, untouched lanes left zero. `expected` says what a correct decoder
must return for the same stream. Both are written the slow, obvious way (a Python loop and one
stack per (lane, event id)) so that they can be checked by reading, and share no code with
`sm_profiler.trace.decode`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np

from sm_profiler.wire import format as fmt

BEGIN, END, INSTANT = fmt.KIND_BEGIN, fmt.KIND_END, fmt.KIND_INSTANT


@dataclass
class Lane:
    """One lane that ran profiler_init: its anchor, SM, and the records it tried to write."""

    anchor_ns: int
    sm_id: int
    records: list[tuple[int, int, int]] = field(default_factory=list)  # (kind, event, time_ns)
    closed: bool = True  # ring buffers: profiler_flush ran (wrote RING_MARK | attempted)
    close_ns: int | None = None  # when it ran (default: 5 ns after the last record)


@dataclass
class Stream:
    """What the device did: lanes keyed by (block, group); lanes not listed never ran."""

    num_blocks: int
    num_groups: int
    capacity: int
    lanes: dict[tuple[int, int], Lane] = field(default_factory=dict)
    flags: int = 0


@dataclass
class Expected:
    """A decode result as plain Python, in the decoder's order (lane, then write position)."""

    ranges: list[tuple[int, int, int, int]]  # (lane, event, start_ns, end_ns)
    instants: list[tuple[int, int, int]]  # (lane, event, time_ns)
    rows: list[
        tuple[int, int, int, int, int]
    ]  # (lane, event, kind, start_ns, end_ns), events order
    unmatched: list[tuple[int, int, int, int]]  # (lane, event, wire kind, time_ns)
    written: list[int]
    attempted: list[int]
    sm: list[int]  # -1 for lanes that never ran
    anchor_ns: list[int]  # 0 for lanes that never ran


def lane_index(stream: Stream, block: int, group: int) -> int:
    return block * stream.num_groups + group


def encode(stream: Stream) -> np.ndarray:
    """The buffer as the device leaves it: header, then every lane's words."""
    cap = stream.capacity
    stride = fmt.LANE_HEADER_WORDS + cap
    nl = stream.num_blocks * stream.num_groups
    words = [0] * (fmt.HEADER_WORDS + nl * stride)
    words[fmt.HDR_MAGIC_VERSION] = fmt.MAGIC | (fmt.VERSION << 32)
    words[fmt.HDR_SHAPE] = stream.num_blocks | (stream.num_groups << 32)
    words[fmt.HDR_CAPACITY_FLAGS] = cap | (stream.flags << 32)
    ring = bool(stream.flags & fmt.FLAG_RING)
    for (block, group), lane in stream.lanes.items():
        base = fmt.HEADER_WORDS + lane_index(stream, block, group) * stride
        words[base + fmt.LANE_ANCHOR] = lane.anchor_ns
        if ring:
            # Record n goes to slot n % capacity, newer over older; the flush writes the count.
            mark = (fmt.RING_MARK | len(lane.records)) if lane.closed else 0
            words[base + fmt.LANE_SM_ATTEMPTED] = lane.sm_id | (mark << 32)
            if lane.closed and len(lane.records) > cap:  # the flush re-stamps the anchor
                words[base + fmt.LANE_ANCHOR] = _close_ns(lane)
            slots = [(i % cap, r) for i, r in enumerate(lane.records)]
        else:
            words[base + fmt.LANE_SM_ATTEMPTED] = fmt.lane_word1(lane.sm_id, len(lane.records), cap)
            slots = list(enumerate(lane.records[:cap]))
        for i, (kind, event, time_ns) in slots:
            tag = (event << fmt.EVENT_SHIFT) | kind
            words[base + fmt.LANE_HEADER_WORDS + i] = (tag << fmt.TAG_SHIFT) | (time_ns & fmt.LOW32)
    return np.array(words, dtype=np.uint64)


def _close_ns(lane: Lane) -> int:
    return lane.close_ns if lane.close_ns is not None else lane.records[-1][2] + 5


def expected(stream: Stream) -> Expected:
    """Pair each end with the latest open begin of its event id on its lane (one stack per id)."""
    nl = stream.num_blocks * stream.num_groups
    cap = stream.capacity
    ranges, instants, rows, unmatched = [], [], [], []
    written, attempted, sm, anchor = [0] * nl, [0] * nl, [-1] * nl, [0] * nl
    for (block, group), lane in sorted(stream.lanes.items()):
        li = lane_index(stream, block, group)
        # A ring keeps the newest records (oldest first); a direct lane its first ones.
        ring = stream.flags & fmt.FLAG_RING and lane.closed
        kept = lane.records[-cap:] if ring else lane.records[:cap]
        written[li], attempted[li] = len(kept), len(lane.records)
        sm[li], anchor[li] = lane.sm_id, lane.anchor_ns
        if ring and len(lane.records) > cap:  # a wrapped ring starts at its oldest kept record
            anchor[li] = kept[0][2]
        stacks: dict[int, list[int]] = {}
        start_rows: dict[int, tuple] = {}  # write position -> row, for the events order
        um: list[tuple[int, tuple]] = []
        for pos, (kind, event, t) in enumerate(kept):
            if kind == INSTANT:
                start_rows[pos] = (li, event, 1, t, t)
            elif kind == BEGIN:
                stacks.setdefault(event, []).append(pos)
            elif stacks.get(event):
                b = stacks[event].pop()
                start_rows[b] = (li, event, 0, kept[b][2], t)
            else:
                um.append((pos, (li, event, END, t)))
        for event, open_begins in stacks.items():
            um.extend((b, (li, event, BEGIN, kept[b][2])) for b in open_begins)
        for pos in sorted(start_rows):
            row = start_rows[pos]
            rows.append(row)
            if row[2] == 0:
                ranges.append((row[0], row[1], row[3], row[4]))
            else:
                instants.append((row[0], row[1], row[3]))
        unmatched.extend(r for _, r in sorted(um))
    return Expected(ranges, instants, rows, unmatched, written, attempted, sm, anchor)


def actual(trace) -> Expected:
    """A TraceData of one capture as an `Expected`, for exact comparison."""
    ev, um, ln = trace.events, trace.unmatched, trace.lanes
    rows = [
        (int(a), int(b), int(c), int(d), int(e))
        for a, b, c, d, e in zip(
            ev["lane"], ev["event"], ev["kind"], ev["start_ns"], ev["end_ns"], strict=True
        )
    ]
    return Expected(
        ranges=[(r[0], r[1], r[3], r[4]) for r in rows if r[2] == 0],
        instants=[(r[0], r[1], r[3]) for r in rows if r[2] == 1],
        rows=rows,
        unmatched=[
            (int(a), int(b), int(c), int(d))
            for a, b, c, d in zip(um["lane"], um["event"], um["kind"], um["time_ns"], strict=True)
        ],
        written=[int(x) for x in ln["written"]],
        attempted=[int(x) for x in ln["attempted"]],
        sm=[int(x) for x in ln["sm"]],
        anchor_ns=[
            int(x) if i else 0 for x, i in zip(ln["anchor_ns"], ln["initialized"], strict=True)
        ],
    )


def check_invariants(trace) -> None:
    """What any successful decode must satisfy, whatever bytes it came from."""
    for table in (trace.events, trace.unmatched, trace.lanes):
        lengths = {k: len(v) for k, v in table.items()}
        assert len(set(lengths.values())) == 1, lengths
    ln, ev, um = trace.lanes, trace.events, trace.unmatched
    (info,) = trace.kernels
    assert len(ln["lane"]) == info.num_blocks * info.num_groups
    assert (ln["written"] >= 0).all() and (ln["written"] <= info.capacity).all()
    assert (ln["attempted"] >= ln["written"]).all()
    assert (ln["dropped"] == ln["attempted"] - ln["written"]).all()
    assert not (ln["written"][~ln["initialized"]]).any()
    assert (ev["start_ns"] <= ev["end_ns"]).all()
    assert ((ev["event"] >= 0) & (ev["event"] <= fmt.MAX_EVENT_ID)).all()
    assert set(np.unique(um["kind"]).tolist()) <= {BEGIN, END}
    # Every written record is accounted for exactly once.
    n_ranges = int((ev["kind"] == 0).sum())
    n_instants = int((ev["kind"] == 1).sum())
    assert 2 * n_ranges + n_instants + len(um["kind"]) == int(ln["written"].sum())


def decode_or_format_error(words: np.ndarray) -> None:
    """The one allowed outcome for arbitrary words: FormatError, or a decode that makes sense."""
    from sm_profiler.errors import FormatError
    from sm_profiler.trace.decode import decode
    from sm_profiler.wire.capture import (
        Capture,  # here, not above: encode shares no code with decode
    )

    try:
        trace = decode(Capture(words=words))
    except FormatError as e:
        assert str(e)  # a message, not a bare exception
        return
    check_invariants(trace)


def examples(n: int) -> int:
    """Hypothesis example counts, scaled by SM_PROFILER_FUZZ (e.g. 20 for a long local run)."""
    return max(1, int(n * float(os.environ.get("SM_PROFILER_FUZZ", "1"))))
