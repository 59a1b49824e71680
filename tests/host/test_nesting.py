"""Where the time went inside a lane (sm_profiler/trace/nesting.py): self time subtracts direct children
only; waits are the gaps between siblings, per pair of events. Checked on a hand-built trace
(tests/support/captures.py, nested_trace) directly and through compute_stats."""

from __future__ import annotations

from captures import nested_trace

from sm_profiler.report.stats import compute_stats


def test_self_time_subtracts_direct_children_only():
    from sm_profiler.trace.nesting import self_time

    trace = nested_trace()
    st = compute_stats(trace)
    assert st.event("tile").total_ns == 100 and st.event("tile").self_ns == 100 - 20 - 25
    assert st.event("mma").self_ns == st.event("mma").total_ns == 25 + 40 + 10
    assert st.event("load").self_ns == 30
    ev = trace.events
    tile = (ev["event"] == 3) & (ev["kind"] == 0)
    assert self_time(trace)[tile].tolist() == [55]


def test_waits_are_gaps_between_siblings_per_event_pair():
    st = compute_stats(nested_trace())
    got = {(w.before, w.after): (w.count, w.total_ns, w.max_ns) for w in st.waits}
    assert got == {
        ("load", "mma"): (1, 5, 5),  # inside the tile
        ("tile", "store"): (1, 10, 10),  # top level
        ("mma", "mma"): (1, 10, 10),  # the consumer lane
    }
