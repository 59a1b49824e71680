"""The summary mode (sm_profiler/trace/summary.py and the timeline's summary): counters that hold every
range's time, chosen automatically above a size, checked against the full export of the same
trace; traces without ranges summarise too. The filters are tested in test_timeline.py."""

from __future__ import annotations

import json

import numpy as np
import pytest
from captures import kernel_capture, synthetic_trace
from hypothesis import given, settings
from hypothesis import strategies as st
from reference_encoder import INSTANT
from trace_readers import has_perfetto, read_trace, slices_by_sm

from sm_profiler.export import to_chrome_json, to_perfetto_bytes
from sm_profiler.trace import timeline
from sm_profiler.trace.decode import decode
from sm_profiler.trace.model import RANGE
from sm_profiler.trace.summary import SUMMARY_BINS, active_ranges
from sm_profiler.wire.capture import Capture

# Perfetto's protos read the files back (the test extra); the hostile-input tests run without them.
needs_perfetto = pytest.mark.skipif(not has_perfetto(), reason="needs perfetto (the test extra)")


@needs_perfetto
def test_summary_counters_hold_every_range_time_and_detail_sms_stay_whole():
    trace = synthetic_trace()
    full = slices_by_sm(read_trace(to_perfetto_bytes(trace, summary=False)))
    r = read_trace(to_perfetto_bytes(trace, summary=True, detail_sms=[5]))
    # SM 5 in full; every other SM has only counters.
    assert slices_by_sm(r) == {"SM 5": full["SM 5"]}
    ev = trace.events
    is_r = ev["kind"] == RANGE
    for d in r.tracks.values():
        if not d.name.endswith("(active ranges)"):
            continue
        sm = int(r.tracks[d.parent_uuid].name.split()[1])
        name = d.name.removesuffix(" (active ranges)")
        pts = r.counters[d.uuid]
        area = sum((t1 - t0) * v for (t0, v), (t1, _) in zip(pts, pts[1:], strict=False))
        eid = {v: k for k, v in trace.event_names.items()}[name]
        m = is_r & (ev["sm"] == sm) & (ev["event"] == eid)
        assert area == pytest.approx(int((ev["end_ns"] - ev["start_ns"])[m].sum()), rel=1e-9)
        assert pts[-1][1] == 0


@needs_perfetto
def test_summary_is_automatic_above_the_size_and_says_what_it_did(monkeypatch):
    trace = synthetic_trace()
    monkeypatch.setattr(timeline, "SUMMARY_ROWS", len(trace) - 1)
    with pytest.warns(UserWarning, match=r"summarised \(more than .* trace rows.*--no-summary"):
        data = to_perfetto_bytes(trace)
    r = read_trace(data)
    assert "summarised" in r.tracks[1].description
    assert any(d.name.endswith("(active ranges)") for d in r.tracks.values())
    # However many ranges: at most one sample per bin (plus a start and an end) per counter.
    ctrs = [u for u, d in r.tracks.items() if d.name.endswith("(active ranges)")]
    assert max(len(r.counters[u]) for u in ctrs) <= SUMMARY_BINS + 2
    js = to_chrome_json(trace, summary=True)
    assert any(e["name"].endswith("(active ranges)") for e in js["traceEvents"])
    assert "summarised" in js["otherData"]["notes"][0]
    monkeypatch.setattr(timeline, "SUMMARY_ROWS", len(trace))
    assert not any(
        d.name.endswith("(active ranges)")
        for d in read_trace(to_perfetto_bytes(trace)).tracks.values()
    )


@needs_perfetto
@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 1), st.integers(0, 1000), st.integers(0, 300)),
        min_size=1,
        max_size=30,
    ),
    st.integers(1, 17),
)
def test_active_ranges_match_a_brute_force_count(rows, bins):
    group = np.array([g for g, _, _ in rows])
    start = np.array([s for _, s, _ in rows], np.int64)
    end = start + np.array([d for _, _, d in rows], np.int64)
    lo = np.array([0, 0], np.int64)
    hi = np.array([1300, 1300], np.int64)
    got = active_ranges(start, end, group, lo, hi, bins=bins)
    for g in (0, 1):
        m = got["group"] == g
        t, v = got["time_ns"][m], got["value"][m]
        for k in range(bins):
            a, b = int(t[k]), int(t[k + 1])
            sel = group == g
            cover = np.clip(np.minimum(end[sel], b) - np.maximum(start[sel], a), 0, None).sum()
            assert v[k] == pytest.approx(cover / max(b - a, 1), abs=1e-9)


# -- hostile input (issue 23, item 7): traces without ranges --------------------------------------


def instants_capture(n: int = 50) -> Capture:
    return kernel_capture(records=[(INSTANT, 2, 10 + i) for i in range(n)])


def test_7_summarising_a_trace_without_ranges_works(tmp_path):
    from sm_profiler.export import export
    from sm_profiler.trace.timeline import build

    trace = decode(instants_capture())
    tl = build(trace, summary=True)
    assert len(tl.summary["value"]) == 0
    export(trace, tmp_path / "t.json", summary=True)
    export(trace, tmp_path / "t.perfetto-trace", summary=True)
    doc = json.loads((tmp_path / "t.json").read_text())
    assert not any(e.get("ph") == "C" and "active ranges" in e["name"] for e in doc["traceEvents"])


def test_7_the_default_summary_of_many_instants_works(tmp_path, monkeypatch):
    from sm_profiler.export import export
    from sm_profiler.trace import timeline

    monkeypatch.setattr(timeline, "SUMMARY_ROWS", 5)
    with pytest.warns(UserWarning, match="summarised"):
        export(decode(instants_capture()), tmp_path / "t.json")


@needs_perfetto
def test_a_summary_of_several_launches_keeps_each_sms_time_per_event():
    # Auto mode's traces hold many launches on the same SMs: the summary table then holds each
    # launch's samples in turn, and the Perfetto writer must still give each (SM, event) one
    # track in time order (it raised IndexError, or would have mixed tracks).
    import auto_inputs as A

    caps = A.table_of(A.two_kernels())
    trace = decode(caps)
    assert len(trace.kernels) > 1
    ev = trace.events
    is_r = ev["kind"] == RANGE
    for pack in (True, False):
        r = read_trace(to_perfetto_bytes(trace, summary=True, pack=pack, detail_sms=[]))
        tracks = [d for d in r.tracks.values() if d.name.endswith("(active ranges)")]
        assert tracks
        seen = set()
        for d in tracks:
            sm = int(r.tracks[d.parent_uuid].name.split()[1])
            name = d.name.removesuffix(" (active ranges)")
            pts = r.counters[d.uuid]
            assert [t for t, _ in pts] == sorted(t for t, _ in pts)
            area = sum((t1 - t0) * v for (t0, v), (t1, _) in zip(pts, pts[1:], strict=False))
            eid = {v: k for k, v in trace.event_names.items()}[name]
            m = is_r & (ev["sm"] == sm) & (ev["event"] == eid)
            assert area == pytest.approx(int((ev["end_ns"] - ev["start_ns"])[m].sum()), rel=1e-9)
            seen.add((sm, eid))
        assert seen == set(zip(ev["sm"][is_r].tolist(), ev["event"][is_r].tolist(), strict=True))
