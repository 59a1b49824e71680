"""Both writers on a ring trace with both kinds of drops (issue 23, item 3): each drop label
stays on its own lane."""

from __future__ import annotations

import numpy as np
from captures import EPOCH_T0, lane_base, ring_words
from reference_encoder import INSTANT

from sm_profiler.export import to_chrome_json, to_perfetto_bytes
from sm_profiler.trace.decode import decode
from sm_profiler.wire import format as fmt
from sm_profiler.wire.capture import Capture


def _ring_trace_with_both_kinds_of_drops():
    # Lane 0 wrapped (RING ops): its 2 oldest records were overwritten. Lane 1 was written by
    # ops compiled without RING in the same ring buffer: a direct lane that dropped its 2 newest.
    w = ring_words([[(INSTANT, 1, 10 + i) for i in range(6)], []], capacity=4)
    base = lane_base(1)
    w[base + fmt.LANE_ANCHOR] = np.uint64(EPOCH_T0)
    for i in range(4):
        w[base + fmt.LANE_HEADER_WORDS + i] = np.uint64(
            fmt.make_record(EPOCH_T0 + 100 + i, 2, INSTANT)
        )
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
        "2 older records overwritten (ring)": (EPOCH_T0 + 12 - t0) / 1e3,  # lane 0's first record
        "2 records dropped (lane full)": (EPOCH_T0 + 103 - t0) / 1e3,  # lane 1's last
    }


def test_3_drop_labels_follow_the_lane_in_perfetto():
    from trace_readers import read_trace

    trace = _ring_trace_with_both_kinds_of_drops()
    r = read_trace(to_perfetto_bytes(trace))
    marks = sorted(i for v in r.instants.values() for i in v if "records" in i[0])
    assert marks == [
        ("2 older records overwritten (ring)", EPOCH_T0 + 12),
        ("2 records dropped (lane full)", EPOCH_T0 + 103),
    ]
