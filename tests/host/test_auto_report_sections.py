"""The run's report is built in one pass over the model (issue 53, done-when: "the run's report
is built by the report layer in one pass over the model, no per-section calls back into another
report's renderer"): report/auto_report.py computes each section once from the trace and
renders it at each width asked. Before, `run` formatted its report twice (the terminal's width
and auto_stats.txt's 100 columns), running the advisor and every section twice; `stats` and
the run's report found each (launch, SM) group's peak residency twice (the report's launch
table, then the advisor's launch columns); a flight-recorder dump's report called the run
report's renderer after its own opening.

And docs/architecture.md's recipe for a report (issue 53, the recipes checked by a test), run
as written: its toy report reads nothing but the trace's LaunchTable, and the section it
registers ends the run's report of manual captures and of auto mode's table, and `sm-profiler
stats` of an auto file (the recipe said a report is called by the CLI and the run's report,
which had no place for one)."""

from __future__ import annotations

import contextlib
import io
import os
import sys

import numpy as np
import pytest
from flight_inputs import flight_table
from repo_paths import ROOT

import sm_profiler
from sm_profiler.cli import main
from sm_profiler.trace.model import RANGE

ONE_GPU = os.path.join(ROOT, "examples", "recordings", "one_gpu")
TWO_RANKS = os.path.join(ROOT, "examples", "recordings", "two_ranks")


class Calls:
    """Calls of package functions, counted wherever a module of the package holds them."""

    def __init__(self, monkeypatch):
        self.monkeypatch = monkeypatch
        self.count: dict[str, int] = {}
        self.groups = 0  # (launch, SM) groups whose peak residency was found

    def watch(self, module_name: str, name: str) -> None:
        original = getattr(sys.modules[module_name], name)
        self.count[name] = 0

        def counted(*args, **kwargs):
            self.count[name] += 1
            if name == "peak_per_group":
                self.groups += int(args[3])
            return original(*args, **kwargs)

        for module in list(sys.modules.values()):
            if (module.__name__ or "").startswith("sm_profiler") and (
                module.__dict__.get(name) is original
            ):
                self.monkeypatch.setattr(module, name, counted)


@pytest.fixture
def calls(monkeypatch):
    import sm_profiler.report.advise
    import sm_profiler.report.auto_report
    import sm_profiler.report.dump  # noqa: F401

    c = Calls(monkeypatch)
    c.watch("sm_profiler.report.stats", "peak_per_group")
    c.watch("sm_profiler.report.advise", "advise")
    c.watch("sm_profiler.report.auto_report", "step_shares")
    c.watch("sm_profiler.report.dump", "gpu_state")
    return c


def _groups(trace) -> int:
    """The (launch, SM) groups of `trace`'s programs (a program's warps share its SM)."""
    ev = trace.events
    rng = ev["kind"] == RANGE
    pairs = np.stack([ev["capture"][rng].astype(np.int64), ev["sm"][rng].astype(np.int64)])
    return np.unique(pairs, axis=1).shape[1]


def _quiet(fn):
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        fn()
    return out.getvalue()


def test_run_s_report_at_two_widths_runs_each_section_once(calls, tmp_path):
    from sm_profiler.auto_mode import script
    from sm_profiler.cli import _decoded, _stored_torch

    trace = _decoded(ONE_GPU, None)
    cupti, docs = _stored_torch(ONE_GPU, trace.table)
    printed = _quiet(lambda: script._report(trace, str(tmp_path), 72, cupti, docs))
    written = (tmp_path / "auto_stats.txt").read_text()
    # Two widths of one report: the terminal's and the file's 100 columns, each whole.
    assert max(map(len, printed.splitlines())) <= 72 < max(map(len, written.splitlines())) <= 100
    for text in (printed, written):
        assert "What to fix first" in text and "per rank" not in text
    assert calls.count["advise"] == 1 and calls.count["step_shares"] == 1
    assert calls.groups == _groups(trace)  # each group's peak found once


@pytest.mark.parametrize("folder", [ONE_GPU, TWO_RANKS])
def test_stats_finds_each_group_s_peak_once_for_the_report_and_its_advice(calls, folder):
    text = _quiet(lambda: main(["stats", folder, "--width", "100"]))
    assert "What to fix first" in text
    assert calls.count["advise"] == 1
    from sm_profiler.cli import _decoded

    assert calls.groups == _groups(_decoded(folder, None))


def test_a_dump_s_report_is_the_run_s_report_with_its_opening_computed_once(calls, tmp_path):
    from sm_profiler.report.auto_report import dump_report

    ms = 10**6
    launches = [
        (k, s, 8, 8, s * ms + 100_000 * j, 50_000)
        for s in range(83, 90)
        for j, k in [(0, 1), (1, 2)]
    ]
    launches += [(1, 90, 8, 8, 90 * ms, 50_000), (3, 90, 1, 0, 0, 0), (2, 90, 8, 0, 0, 0)]
    info = {
        "trigger": "stall",
        "why": "no step ended within 3 s",
        "step": 90,
        "steps": [83, 90],
        "host_step": 90,
        "written_ns": 1_764_417_785_123_000_000,
        "live": True,
    }
    table = flight_table(launches, info)
    report = dump_report(table, 80)
    assert calls.count["gpu_state"] == 1 and calls.count["advise"] == 1
    assert report.startswith("Flight recorder: no step ended within 3 s")
    assert "\n\nsm_profiler auto: 15 launches of 2 kernels" in report  # those with records
    # `sm-profiler stats` of the dump's file says the same, from the same one pass.
    table.save(tmp_path / "d.npz")
    assert _quiet(lambda: main(["stats", str(tmp_path / "d.npz"), "--width", "80"])) == report
    assert calls.count["gpu_state"] == 2 and calls.count["advise"] == 2
    assert "in flight: spin_kernel" in report


# -- docs/architecture.md's recipe for a report, run as written --------------------------------


def _report_recipe() -> str:
    """The python block of docs/architecture.md's "Adding a report"."""
    import re

    text = open(os.path.join(ROOT, "docs", "architecture.md"), encoding="utf-8").read()
    section = text.split("## Adding a report", 1)[1].split("\n## ", 1)[0]
    (block,) = re.findall(r"```python\n(.*?)```", section, re.S)
    return block


@pytest.fixture
def recipe(monkeypatch):
    """The recipe's block run, its section registered in the run's report until the test ends."""
    from sm_profiler.report import auto_report

    monkeypatch.setattr(auto_report, "SECTIONS", list(auto_report.SECTIONS))
    names: dict = {}
    exec(compile(_report_recipe(), "toy_report.py", "exec"), names)
    return names


def _capture(kernel: str):
    from captures import build_capture

    lane = {"sm": 0, "anchor": 1000, "records": [("B", 0, 1100), ("E", 0, 1600)]}
    return build_capture({0: lane}, num_blocks=1, event_names={0: "load"}, kernel_name=kernel)


def test_the_report_recipe_reads_only_the_launch_table_and_the_basics(recipe):
    import ast
    import types

    from auto_inputs import table_of, two_kernels

    imports = [n for n in ast.walk(ast.parse(_report_recipe())) if isinstance(n, ast.ImportFrom)]
    assert sorted(n.module for n in imports) == [
        "sm_profiler.report.auto_report",
        "sm_profiler.text",
    ]
    # Its numbers need nothing of the trace but its LaunchTable, whatever recorded it.
    manual = sm_profiler.decode([_capture("b"), _capture("a"), _capture("b")])
    auto = table_of(two_kernels()).decode()
    for trace, want in (
        (manual, [("b", 2), ("a", 1)]),
        (auto, [("gemm", 2), ("triton_poi_fused_add_0", 2)]),
    ):
        only_table = types.SimpleNamespace(trace=types.SimpleNamespace(table=trace.table))
        assert recipe["launch_counts"](only_table) == want


def test_the_report_recipe_s_section_ends_the_run_s_report_of_either_trace(recipe):
    from auto_inputs import table_of, two_kernels

    from sm_profiler.report.auto_report import format_report

    manual = sm_profiler.decode([_capture("b"), _capture("a"), _capture("b")])
    assert format_report(manual, width=80).endswith("\n\nlaunches per kernel: b x2, a x1\n")
    text = format_report(table_of(two_kernels()).decode(), width=40)
    assert text.endswith("\nlaunches per kernel: gemm x2,\n  triton_poi_fused_add_0 x2\n")


def test_the_report_recipe_s_section_is_in_sm_profiler_stats_of_an_auto_file(tmp_path):
    import subprocess

    from auto_inputs import table_of, two_kernels

    table_of(two_kernels()).save(tmp_path / "auto.npz")
    code = (
        _report_recipe()
        + "\nimport sys\nfrom sm_profiler.cli import main\nsys.exit(main(sys.argv[1:]))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, "stats", str(tmp_path / "auto.npz"), "--width", "100"],
        cwd=tmp_path,
        env=dict(os.environ, PYTHONPATH=ROOT),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("sm_profiler auto: 4 launches of 2 kernels")
    assert out.stdout.endswith("\nlaunches per kernel: gemm x2, triton_poi_fused_add_0 x2\n")


def test_a_section_s_name_is_its_own(recipe):
    from sm_profiler.errors import ConfigError
    from sm_profiler.report.auto_report import SECTIONS, Section, register_section

    with pytest.raises(ConfigError, match="'launches per kernel' is there already"):
        register_section(Section("launches per kernel", len, list))
    assert [s.name for s in SECTIONS][-2:] == ["what to fix first", "launches per kernel"]
