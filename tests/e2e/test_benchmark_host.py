"""The host benchmark's synthetic capture is a valid trace (so its numbers measure real work)."""

import numpy as np

from sm_profiler.trace.decode import decode


def _host_benchmark():
    from benchmarks import captures  # the host benchmark's capture (benchmarks/host.py)

    return captures


def test_synthetic_capture_decodes_to_what_it_was_built_from():
    host = _host_benchmark()
    cap = host.synthetic_capture(7 * 800 * 64, num_lanes=64)  # lanes run ~1.2 ms: past the wrap
    trace = decode(cap)
    units = cap.layout.capacity // len(host.UNIT) * cap.layout.num_lanes
    # Each unit: one load range, two mma ranges nested in it, one store instant.
    assert len(trace) == 4 * units
    assert trace.dropped_total == 0 and len(trace.unmatched["kind"]) == 0
    names = np.array([trace.event_name(e) for e in trace.events["event"]])
    assert (names == "mma").sum() == 2 * units and (names == "store").sum() == units
    # Times cross a wrap of the low 32 bits (at 2**62 + 7 * 2**32) and still come out in order.
    wrap = (1 << 62) + 7 * (1 << 32)
    start = trace.events["start_ns"]
    assert (start < wrap).any() and (start >= wrap).any()
    assert np.all(trace.duration_ns >= 0)
    same_lane = trace.events["lane"][1:] == trace.events["lane"][:-1]
    assert np.all(np.diff(start)[same_lane] >= 0)
