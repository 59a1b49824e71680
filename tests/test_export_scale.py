"""Export filters and the summary mode, checked against the full export of the same trace."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_export_perfetto import read_trace

from sm_profiler import timeline
from sm_profiler.errors import ConfigError
from sm_profiler.export import to_chrome_json, to_perfetto_bytes
from sm_profiler.summary import SUMMARY_BINS, active_ranges
from sm_profiler.trace import RANGE

pytest.importorskip("perfetto.protos.perfetto.trace.perfetto_trace_pb2")


def synthetic(n=20_000):
    from benchmarks.captures import synthetic_capture
    from sm_profiler.decode import decode

    return decode(synthetic_capture(n, num_lanes=256))


def slices_by_sm(r):
    """{SM track name: Counter of (lane name, slice)} of a read trace."""
    out = {}
    for d in r.threads():
        parent = r.tracks[d.parent_uuid]
        while parent.name not in {p.name for p in r.processes()}:
            parent = r.tracks[parent.parent_uuid]
        out.setdefault(parent.name, Counter()).update((d.name, s) for s in r.slices[d.uuid])
    return out


def test_sm_filters_partition_the_full_export():
    trace = synthetic()
    full = slices_by_sm(read_trace(to_perfetto_bytes(trace, summary=False)))
    sms = sorted(int(n.split()[1]) for n in full)
    parts = {}
    for half in (sms[::2], sms[1::2]):
        parts.update(slices_by_sm(read_trace(to_perfetto_bytes(trace, sms=half, summary=False))))
    assert parts == full


def test_block_group_event_and_window_filters():
    trace = synthetic()
    ev = trace.events
    r = read_trace(to_perfetto_bytes(trace, blocks=[0, 1], groups=[2], events=["mma"],
                                     summary=False))  # fmt: skip
    got = sorted(s[1:] for d in r.threads() for s in r.slices[d.uuid])
    m = np.isin(ev["block"], [0, 1]) & (ev["group"] == 2) & (ev["event"] == 1) & (ev["kind"] == 0)
    assert got == sorted(zip(ev["start_ns"][m].tolist(), (ev["end_ns"] - ev["start_ns"])[m].tolist(),
                             strict=True))  # fmt: skip
    assert {d.name.split(" · ")[1] for d in r.threads()} == {"group 2"}
    # A window keeps every range touching it, whole.
    a, b = 2_000, 5_000
    t0 = trace.start_ns
    r = read_trace(to_perfetto_bytes(trace, window_ns=(a, b), summary=False))
    got = sum(len(r.slices[d.uuid]) for d in r.threads())
    m = (ev["kind"] == RANGE) & (ev["end_ns"] >= t0 + a) & (ev["start_ns"] <= t0 + b)
    assert got == int(m.sum()) > 0
    with pytest.raises(ConfigError, match="no event named 'nope'"):
        to_perfetto_bytes(trace, events=["nope"])
    with pytest.raises(ConfigError, match="not an int"):
        to_perfetto_bytes(trace, sms=["3"])


def test_summary_counters_hold_every_range_time_and_detail_sms_stay_whole():
    trace = synthetic()
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


def test_summary_is_automatic_above_the_size_and_says_what_it_did(monkeypatch):
    trace = synthetic()
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
    assert not any(d.name.endswith("(active ranges)")
                   for d in read_trace(to_perfetto_bytes(trace)).tracks.values())  # fmt: skip


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 1), st.integers(0, 1000), st.integers(0, 300)),
                min_size=1, max_size=30), st.integers(1, 17))  # fmt: skip
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


def test_filters_and_one_capture_say_what_they_kept(tmp_path):
    from sm_profiler.export import export

    trace = synthetic()
    sm0 = int(trace.lanes["sm"][0])
    notes = export(trace, tmp_path / "t.json", sms=[sm0], summary=False)
    kept = int(np.isin(trace.lanes["sm"][trace.events["lane"]], [sm0]).sum())
    assert notes == [f"filtered (sms): {kept:,} of {len(trace):,} ranges and instants kept"]
    assert 0 < kept < len(trace)
    assert export(trace, tmp_path / "u.json", summary=False) == []
