"""Auto mode's default trace of a long run (sm_profiler/trace/timeline.py, _build_budgeted): the
first recorded steps that fit drawn in full and opened on, every other program in bounded
summary counters, whatever the number of steps, launches and programs. The budgets are made
small here; benchmarks/auto_host.py measures the real ones."""

from __future__ import annotations

import numpy as np
import pytest
from auto_inputs import AUTO_T0, table_of

from sm_profiler.export import to_chrome_json, to_perfetto_bytes
from sm_profiler.trace import timeline
from sm_profiler.trace.timeline import build


def _steps(n_steps=5, launches=4, programs=6, first_gap=2_000):
    """Steps 10.. of `launches` launches 2 µs apart (the first step's `first_gap` apart)."""
    tables = []
    from sm_profiler.trace.auto_table import AutoTable

    for s in range(n_steps):
        gap = first_gap if s == 0 else 2_000
        recs = [
            (
                AUTO_T0 + (s > 0) * (launches * first_gap + s * 100_000) + k * gap + 10 * p,
                900,
                p % 4,
                100 * s + k + 1,
                1 + k % 2,
                p,
                0,
                0,
            )
            for k in range(launches)
            for p in range(programs)
        ]
        tables.append(
            table_of(
                recs,
                step_tag=s + 1,
                session={"step_tags": {str(k + 1): 10 + k for k in range(n_steps)}},
            )
        )
    return AutoTable.concat(tables)


@pytest.fixture
def small_budget(monkeypatch):
    monkeypatch.setattr(timeline, "AUTO_DETAIL_ROWS", 40)
    monkeypatch.setattr(timeline, "SUMMARY_POINTS", 400)
    monkeypatch.setattr(timeline, "MIN_LAUNCH_BINS", 4)


def test_the_first_steps_that_fit_are_drawn_and_opened_on(small_budget):
    table = _steps()
    trace = table.decode()
    tl = build(trace)
    # 24 programs a step: step 10 fits the budget of 40, steps 10 and 11 do not.
    assert len(tl.trace.events["kind"]) == 24
    assert set(tl.trace.events["capture"].tolist()) == set(
        np.flatnonzero(table.launches["step"] == 10).tolist()
    )
    lo = int(table.launches["start_ns"][table.launches["step"] == 10].min())
    hi = int(table.launches["end_ns"][table.launches["step"] == 10].max())
    assert tl.focus_ns == (lo, hi) and tl.focus_label == "step 10"
    # Everything else is in the summary counters; every launch is on the launches track.
    assert tl.summary is not None and len(tl.summary["value"]) <= 400 + 2 * len(tl.sms)
    assert len(tl.launches["capture"]) == table.num_launches == 20
    assert any("full detail for 4 launches, from step 10" in n for n in tl.notes)
    with pytest.warns(UserWarning, match="full detail for 4 launches, from step 10"):
        doc = to_chrome_json(trace)
    programs = [
        e
        for e in doc["traceEvents"]
        if e.get("ph") == "X" and "(launch" not in e["name"] and e.get("pid", 0) > 0
    ]
    assert len(programs) <= 24 + 20
    with pytest.warns(UserWarning, match="summarised"):
        assert to_perfetto_bytes(trace)


def test_a_step_that_compiled_is_named_and_the_trace_opens_on_the_first_steady_one(small_budget):
    # Issue 46, item 6: the report's longest step and slowest steps led with step 0, which
    # compiled (2.49 s where a steady step took 9.4 ms), and the trace opened on it.
    from sm_profiler.report.auto_report import format_report

    table = _steps(first_gap=2_000_000)  # step 10's launches 2 ms apart: compiling between
    assert table.compile_steps().tolist() == [10]
    assert _steps().compile_steps().tolist() == []  # a first step as long as the others
    trace = table.decode()
    tl = build(trace)
    eleven = table.launches["step"] == 11
    lo, hi = (
        int(table.launches["start_ns"][eleven].min()),
        int(table.launches["end_ns"][eleven].max()),
    )
    assert tl.focus_ns == (lo, hi)
    assert tl.focus_label == "step 11, the first after the steps that compiled (10)"
    assert set(tl.trace.events["capture"].tolist()) == set(np.flatnonzero(eleven).tolist())
    text = format_report(trace, width=100)
    flat = " ".join(text.split())
    assert "longest step 11 " in flat or "longest step 12 " in flat  # 7.0 µs each
    assert "compiling: step 10 (6.00 ms) ran kernels for the first time, more than 3x the" in flat
    lines = text.splitlines()
    head = next(i for i, ln in enumerate(lines) if "kernel most above its median step" in ln)
    rows = []
    for ln in lines[head + 1 :]:
        if not ln.strip():
            break
        rows.append(ln.split()[0])
    assert rows == ["11", "12", "13", "14"]  # the slowest steps, step 10 left out


def test_a_launch_larger_than_the_budget_is_drawn_from_its_start(small_budget):
    recs = [(AUTO_T0 + 10 * p, 500, p % 4, 1, 1, p, 0, 0) for p in range(100)]
    trace = table_of(recs).decode()
    tl = build(trace)
    ev = tl.trace.events
    assert len(ev["kind"]) == 40
    assert ev["start_ns"].max() <= AUTO_T0 + 10 * 39  # the first 40 programs to start
    # The lanes left are numbered afresh: every event finds its lane.
    assert (tl.ev_lane < len(tl.trace.lanes["lane"])).all()
    assert "programs starting in its first" in tl.focus_label
    with pytest.warns(UserWarning, match="summarised"):
        assert to_perfetto_bytes(trace)


def test_more_launches_than_the_track_holds_keep_those_drawn(small_budget, monkeypatch):
    monkeypatch.setattr(timeline, "MAX_LAUNCH_SLICES", 10)
    table = _steps()
    tl = build(table.decode())
    assert len(tl.launches["capture"]) == 4
    assert any("holds the 4 launches drawn in full, not all 20" in n for n in tl.notes)


def test_a_summary_of_too_many_launches_bins_each_sm_over_the_run(small_budget, monkeypatch):
    monkeypatch.setattr(timeline, "SUMMARY_POINTS", 40)
    tl = build(_steps(n_steps=8).decode())
    events = set(tl.summary["event"].tolist())
    assert events == {timeline.ALL_KERNELS_EVENT}
    assert tl.summary_name(timeline.ALL_KERNELS_EVENT).startswith("programs of all kernels")


def test_asking_for_everything_still_gives_everything(small_budget):
    trace = _steps().decode()
    assert len(build(trace, summary=False).trace.events["kind"]) == 120


def test_representatives_are_each_kernel_and_levels_first_launch_across_parts():
    """One launch of each (kernel, per_warp), its first, ordered by kernel then level, found a
    part of the launches at a time: pairs first seen in a later part, or in several, count once."""
    from types import SimpleNamespace

    from sm_profiler.trace.auto_table import AutoTable

    rng = np.random.default_rng(7)
    n = 200_000  # more than three parts of 65,536
    kernel = rng.integers(1, 40, n).astype(np.uint16)
    per_warp = (rng.random(n) < 0.3).astype(np.uint8)
    kernel[150_000] = 77  # only in the third part
    kernel[70_000] = kernel[190_000] = 78  # in the second and the fourth
    per_warp[[150_000, 70_000, 190_000]] = 1
    table = SimpleNamespace(launches={"kernel": kernel, "per_warp": per_warp})
    key = kernel.astype(np.int64) * 2 + per_warp
    want = np.unique(key, return_index=True)[1].tolist()
    assert AutoTable.representatives(table) == want
    assert 150_000 in want and 70_000 in want and 190_000 not in want
