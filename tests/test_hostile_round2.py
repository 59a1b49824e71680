"""Hostile input, round 2 (issue 23): launch slots, ring buffers, merge, query and the C++
writer. One regression test (or a few) per item of the issue, named test_<item>_...; the fuzz
tests of v4 slots, ring lanes and merge inputs are in test_capture_fuzz.py."""

from __future__ import annotations

import json

import numpy as np
import pytest
from reference_encoder import BEGIN, END, INSTANT, Lane, Stream, encode

from sm_profiler import format as fmt
from sm_profiler.capture import Capture
from sm_profiler.decode import decode
from sm_profiler.errors import FormatError
from sm_profiler.export import to_chrome_json, to_perfetto_bytes

T0 = 1_700_000_000_000_000_000


def ring_words(records_per_lane: list[list], capacity: int = 4, closed=None) -> np.ndarray:
    s = Stream(1, len(records_per_lane), capacity, flags=fmt.FLAG_RING)
    for g, recs in enumerate(records_per_lane):
        s.lanes[(0, g)] = Lane(T0, 1, [(k, e, T0 + t) for k, e, t in recs],
                               closed=True if closed is None else closed[g])  # fmt: skip
    return encode(s)


def lane_base(g: int, capacity: int = 4) -> int:
    return fmt.HEADER_WORDS + g * (fmt.LANE_HEADER_WORDS + capacity)


# -- 1, 2: ring lanes hold what their mark says ------------------------------------------------


def test_1_closed_ring_lane_holding_fewer_records_than_its_mark_is_refused():
    recs = [(INSTANT, 1, 10 + i) for i in range(4)]
    w = ring_words([recs])
    base = lane_base(0)
    assert decode(w).lanes["written"].tolist() == [4]
    # The mark says 2 records, but 4 slots hold records (2 left by an earlier launch).
    w[base + fmt.LANE_SM_ATTEMPTED] = np.uint64(1 | ((fmt.RING_MARK | 2) << 32))
    with pytest.raises(FormatError, match="ring mark counts 2 records.*exactly 2.*4 slots"):
        decode(w)
    # ... and the other way: a mark for 4 over 2 records.
    w2 = ring_words([recs[:2]])
    w2[base + fmt.LANE_SM_ATTEMPTED] = np.uint64(1 | ((fmt.RING_MARK | 4) << 32))
    with pytest.raises(FormatError, match="ring mark counts 4"):
        decode(w2)


def test_2_wrapped_ring_lane_with_an_empty_newest_slot_is_refused():
    recs = [(INSTANT, 1, 10 + i) for i in range(6)]  # 6 over capacity 4: wrapped
    w = ring_words([recs])
    assert decode(w).lanes["attempted"].tolist() == [6]
    newest = lane_base(0) + fmt.LANE_HEADER_WORDS + (6 - 1) % 4
    w[newest] = 0
    with pytest.raises(FormatError, match="ring mark counts 6 records.*all 4 slots"):
        decode(w)


# -- 3: drop labels follow what the lane did, the same in both writers -------------------------


def _ring_trace_with_both_kinds_of_drops():
    # Lane 0 wrapped (RING ops): its 2 oldest records were overwritten. Lane 1 was written by
    # ops compiled without RING in the same ring buffer: a direct lane that dropped its 2 newest.
    w = ring_words([[(INSTANT, 1, 10 + i) for i in range(6)], []], capacity=4)
    base = lane_base(1)
    w[base + fmt.LANE_ANCHOR] = np.uint64(T0)
    for i in range(4):
        w[base + fmt.LANE_HEADER_WORDS + i] = np.uint64(fmt.make_record(T0 + 100 + i, 2,
                                                                        INSTANT))  # fmt: skip
    w[base + fmt.LANE_SM_ATTEMPTED] = np.uint64(fmt.lane_word1(1, 6, 4))
    trace = decode(Capture(w, {1: "a", 2: "b"}))
    assert trace.lanes["dropped"].tolist() == [2, 2]
    assert trace.kernels[0].ring_wrapped_lanes == [0]
    return trace


def test_3_drop_labels_follow_the_lane_in_chrome_json():
    trace = _ring_trace_with_both_kinds_of_drops()
    doc = to_chrome_json(trace)
    t0 = doc["otherData"]["start_ns"]
    marks = {e["name"]: e["ts"] for e in doc["traceEvents"] if "records" in e["name"]}
    assert marks == {
        "2 older records overwritten (ring)": (T0 + 12 - t0) / 1e3,  # lane 0's first record
        "2 records dropped (lane full)": (T0 + 103 - t0) / 1e3,  # lane 1's last
    }


def test_3_drop_labels_follow_the_lane_in_perfetto():
    from test_export_perfetto import read_trace

    trace = _ring_trace_with_both_kinds_of_drops()
    r = read_trace(to_perfetto_bytes(trace))
    marks = sorted(i for v in r.instants.values() for i in v if "records" in i[0])
    assert marks == [("2 older records overwritten (ring)", T0 + 12),
                     ("2 records dropped (lane full)", T0 + 103)]  # fmt: skip
