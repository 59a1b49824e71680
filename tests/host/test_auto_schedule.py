"""Auto mode over a long run (sm_profiler/wire/auto_schedule.py, session.py): the steps recorded
follow torch.profiler.schedule exactly, steps turn recording on and off and tag each step's
records, and the report names the steps. The GPU side is tests/device/test_auto_gpu.py."""

from __future__ import annotations

import pytest
from auto_inputs import AUTO_T0, table_of
from hypothesis import given, settings
from hypothesis import strategies as st

import sm_profiler
from sm_profiler.auto_mode import binding, session
from sm_profiler.errors import ConfigError
from sm_profiler.report.auto_report import format_report
from sm_profiler.wire.auto_schedule import Schedule


@settings(max_examples=200, deadline=None)
@given(
    wait=st.integers(0, 4),
    warmup=st.integers(0, 4),
    active=st.integers(1, 4),
    repeat=st.integers(0, 3),
    skip_first=st.integers(0, 5),
)
def test_the_steps_recorded_are_torch_profilers_active_steps(
    wait, warmup, active, repeat, skip_first
):
    import warnings

    from torch.profiler import ProfilerAction
    from torch.profiler import schedule as torch_schedule

    ours = sm_profiler.schedule(wait, warmup, active, repeat, skip_first)
    with warnings.catch_warnings():  # torch warns of warmup=0, which is ours to test
        warnings.simplefilter("ignore", UserWarning)
        theirs = torch_schedule(
            wait=wait, warmup=warmup, active=active, repeat=repeat, skip_first=skip_first
        )
    for step in range(60):
        active_there = theirs(step) in (ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE)
        assert ours.records(step) == active_there, step


def test_the_command_lines_spellings():
    s = Schedule.parse("1000-1005")
    assert [k for k in range(990, 1010) if s.records(k)] == list(range(1000, 1006))
    assert s.describe() == "steps 1000-1005" and s.last_step() == 1005
    assert Schedule.parse("7").describe() == "step 7"
    s = Schedule.parse("wait=1, warmup=1, active=2, repeat=2, skip_first=3")
    assert [k for k in range(20) if s.records(k)] == [5, 6, 9, 10]
    for bad, why in (
        ("5-3", "before the first"),
        ("a-b", "give STEPS as"),
        ("wait=x", "not a whole number"),
        ("often=2", "no setting 'often'"),
        ("active=0", "active must be at least 1"),
    ):
        with pytest.raises(ConfigError, match=why):
            Schedule.parse(bad)
    with pytest.raises(ConfigError, match="schedule must be"):
        sm_profiler.auto(schedule=5)


def test_the_docs_schedule_and_steps_option_record_the_same_steps():
    # Issue 46, item 3: docs/auto.md's schedule recorded 1000-1004, and `--steps 1000-1005`,
    # said to do the same, records 1000 to 1005.
    import re

    from repo_paths import ROOT

    with open(f"{ROOT}/docs/auto.md", encoding="utf-8") as f:
        doc = f.read()
    (args, first, last), *_ = re.findall(
        r"sm_profiler\.schedule\((.*?)\)  # steps (\d+)-(\d+)", doc
    )
    (steps,) = re.findall(r"`sm-profiler run --steps (\S+) -- train\.py` does the same", doc)
    sched = sm_profiler.schedule(**eval(f"dict({args})"))
    assert sched == Schedule.parse(steps)
    assert [k for k in range(2000) if sched.records(k)] == list(range(int(first), int(last) + 1))


def test_steps_turn_recording_on_and_off_and_tag_each_step(monkeypatch):
    # The region's bookkeeping without a GPU: what it asks the binding to do at each step.
    calls = []
    monkeypatch.setattr(binding, "set_recording", calls.append)
    prof = sm_profiler.auto(schedule="2-3")
    monkeypatch.setattr(session, "_active", [prof])
    assert not prof._records(0)
    for _ in range(5):
        prof.step()
    assert calls == [False, True, True, False, False]
    assert prof._step_tags == {1: 2, 2: 3}  # steps 2 and 3 got tags 1 and 2
    # Optimizer steps stop counting once the script steps by hand.
    prof._on_optimizer_step(object(), (), {})
    assert prof.step_num == 5


def test_the_first_optimizer_counts_the_steps(monkeypatch):
    monkeypatch.setattr(binding, "set_recording", lambda on: None)
    prof = sm_profiler.auto(count_optimizer_steps=True)
    monkeypatch.setattr(session, "_active", [prof])
    a, b = object(), object()
    for _ in range(3):
        prof._on_optimizer_step(a, (), {})
        prof._on_optimizer_step(b, (), {})  # a second optimizer in the same round
    assert prof.step_num == 3


def test_each_launch_carries_its_step_and_the_report_names_them():
    recs = [
        (AUTO_T0 + 1000 * i, 400 + 100 * i, p, 10 + i, 1, p, 0, 0)
        for i in range(3)
        for p in range(2)
    ]
    tables = []
    for tag in (1, 2):
        tables.append(table_of(recs, step_tag=tag, session={"step_tags": {"1": 1000, "2": 1001}}))
    assert set(tables[0].launches["step"].tolist()) == {1000}
    assert set(tables[1].launches["step"].tolist()) == {1001}
    from sm_profiler.trace.auto_table import AutoTable

    both = AutoTable.concat(tables)
    both.metadata["schedule"] = "steps 1000-1001"
    text = " ".join(format_report(both.decode(), width=80).split())
    assert "steps: 2 recorded (1000-1001) by steps 1000-1001" in text
    assert "GPU time per step" in text
    caps = list(both)
    assert sorted({c.metadata["step"] for c in caps}) == [1000, 1001]


def test_export_and_stats_pick_steps_of_an_auto_file(tmp_path, capsys):
    from sm_profiler.cli import main
    from sm_profiler.trace.auto_table import AutoTable

    recs = [(AUTO_T0 + 1000 * i, 400, p, 10 + i, 1, p, 0, 0) for i in range(3) for p in range(2)]
    tags = {"1": 1000, "2": 1001}
    both = AutoTable.concat(
        [table_of(recs, step_tag=t, session={"step_tags": tags}) for t in (1, 2)]
    )
    path = tmp_path / "auto.npz"
    both.save(path)
    assert main(["stats", str(path), "--steps", "1001", "--width", "80"]) == 0
    assert "3 launches of 1 kernel," in capsys.readouterr().out
    out = tmp_path / "t.json"
    assert main(["export", str(path), str(out), "--steps", "1000-1001"]) == 0
    assert main(["export", str(path), str(out), "--steps", "7"]) == 2
    assert "no launch of this file is in step 7; its steps: 1000, 1001" in capsys.readouterr().err
    assert both.select_steps("1000").num_launches == 3


def test_the_report_says_what_share_of_a_step_instrumented_kernels_ran():
    # Two steps, each two 100 ns launches 300 ns apart; step 1000's period runs to step 1001's
    # first launch (1,000 ns): 20 % seen; the last step's period is its span (400 ns): 50 %.
    from sm_profiler.trace.auto_table import AutoTable

    def step(t0, first_grid):
        return [(t0 + off, 100, 0, first_grid + k, 1, 0, 0, 0) for k, off in enumerate((0, 300))]

    tags = {"1": 1000, "2": 1001}
    both = AutoTable.concat(
        [
            table_of(step(AUTO_T0 + 1000 * s, 10 * s), step_tag=s + 1, session={"step_tags": tags})
            for s in (0, 1)
        ]
    )
    text = " ".join(format_report(both.decode(), width=100).split())
    assert "instrumented kernels ran 35% of a step" in text


def test_the_report_sets_the_slowest_steps_side_by_side_with_the_kernel_that_made_them_slow():
    # Three steps, each one launch of kernel 1 (100 ns) then one of kernel 2 (200 ns); in step
    # 1001 kernel 2 takes 900 ns: the slowest step, 700 ns above kernel 2's median.
    from sm_profiler.trace.auto_table import AutoTable

    tags = {"1": 1000, "2": 1001, "3": 1002}
    tables = []
    for s in range(3):
        t0, gemm = AUTO_T0 + 10_000 * s, 900 if s == 1 else 200
        recs = [(t0, 100, 0, 10 * s, 1, 0, 0, 0), (t0 + 200, gemm, 1, 10 * s + 1, 2, 0, 0, 0)]
        tables.append(table_of(recs, step_tag=s + 1, session={"step_tags": tags}))
    text = format_report(AutoTable.concat(tables).decode(), width=80)
    lines = text.splitlines()
    head = next(i for i, ln in enumerate(lines) if "kernel most above its median step" in ln)
    rows = [ln.split() for ln in lines[head + 1 : head + 4]]
    assert [r[0] for r in rows] == ["1000", "1001", "1002"]
    assert rows[1][1:3] == ["1.10", "µs"] and rows[1][-3:] == ["gemm", "+700", "ns"], rows
    assert rows[0][-1] == "-" and rows[2][-1] == "-"  # no kernel above its median there
    assert all(len(ln) <= 80 for ln in lines)
