"""The one launch table every trace has, whatever recorded it (sm_profiler/trace/launches.py,
issue 53 item 1): manual captures and auto mode's table answer the same declared questions with
the same meaning, a method renamed on one of them fails here, and the package asks a trace's
table nothing it does not declare."""

from __future__ import annotations

import ast
import inspect
import os

import numpy as np
import pytest
from auto_inputs import table_of, two_kernels
from captures import tiny_capture
from repo_paths import ROOT

from sm_profiler.trace.auto_table import AutoTable
from sm_profiler.trace.decode import decode
from sm_profiler.trace.launches import (
    LAUNCH_COLUMNS,
    CaptureTable,
    LaunchList,
    LaunchTable,
)
from sm_profiler.trace.model import TraceData

PACKAGE = os.path.join(ROOT, "sm_profiler")


def _manual() -> TraceData:
    """Three captures, two of one kernel name, on a GPU of 132 SMs."""
    caps = [tiny_capture(), tiny_capture(10_000), tiny_capture(20_000)]
    caps[2].kernel_name = "other"
    for c in caps:
        c.metadata.update(sm_count=132, device_name="H200")
    return decode(caps)


def _auto() -> TraceData:
    return table_of(two_kernels()).decode()


@pytest.mark.parametrize("make", [_manual, _auto], ids=["manual", "auto"])
def test_1_every_trace_has_one_launch_table_with_the_declared_meaning(make):
    trace = make()
    table = trace.table
    n = len(trace.kernels)
    assert isinstance(table, LaunchTable) and table.num_launches == n >= 3
    for col in LAUNCH_COLUMNS:
        assert len(table.launches[col]) == n
    names = table.kernel_names()
    kernel = table.launches["kernel"]
    assert ((kernel >= 0) & (kernel < len(names))).all()
    # A launch's name is its kernel's, its KernelInfo's and the one the trace names it by.
    assert table.launch_names() == [names[k] for k in kernel.tolist()]
    assert table.launch_names() == [trace.kernels[c].name for c in range(n)]
    assert [table.launch_info(c).name for c in range(n)] == table.launch_names()
    session = table.launches["session"]
    assert ((session >= 0) & (session < len(table.sessions))).all()
    assert all(isinstance(s, dict) for s in table.sessions)
    assert len(table.ranks()) == len(table.gpu_ids()) == max(len(table.sessions), 1)
    # Each kind's first launch, in capture order; every launch is of one of them.
    reps = table.representatives()
    assert reps == sorted(reps) and set(reps) <= set(range(n)) and reps[0] == 0
    assert table.compile_steps().dtype == np.int64
    assert table.sm_counts(np.arange(n)).tolist() == [132 if make is _manual else 4] * n
    assert table.wrapped_lanes() == {}
    cols = table.launch_columns()
    assert list(cols)[:5] == ["kernel", "num_blocks", "num_groups", "capacity", "emulated"]
    codes, kernel_names = cols["kernel"]
    assert [kernel_names[k] for k in codes] == table.launch_names()
    assert not table.emulated


def test_1_manual_captures_are_a_launch_each_of_one_session_without_steps():
    trace = _manual()
    table = trace.table
    assert isinstance(table, CaptureTable) and not table.auto
    assert table.launches["kernel"].tolist() == [0, 1, 2]
    assert table.launches["step"].tolist() == [-1, -1, -1]
    assert table.sessions == [{"device_name": "H200", "sm_count": 132, "rank": None, "gpu": None}]
    assert table.metadata == {} and table.representatives() == [0, 1, 2]
    # Read when asked: a capture added to the trace is a launch of its table.
    trace.kernels.append(trace.kernels[0])
    assert trace.table.num_launches == 4


def test_1_an_auto_trace_reads_its_recording_table():
    table = table_of(two_kernels())
    trace = table.decode()
    assert isinstance(trace.kernels, LaunchList) and trace.table is table and table.auto
    # Launches of one kernel share it: two kernels, four launches, one session.
    assert table.kernel_names() == ["triton_poi_fused_add_0", "gemm"]
    assert len(table.sessions) == 1 and table.representatives() == [0, 2]


def test_1_the_two_tables_implement_every_declared_method_alike():
    """A method renamed on either table, or given other parameters, fails here (and the table
    could not be made at all: LaunchTable is abstract)."""
    declared = sorted(LaunchTable.__abstractmethods__)
    assert {"kernel_names", "compile_steps", "sm_counts", "representatives"} <= set(declared)
    for impl in (AutoTable, CaptureTable):
        assert not impl.__abstractmethods__, impl
        for name in declared:
            assert name in vars(impl), f"{impl.__name__} does not define {name}"
            base, own = getattr(LaunchTable, name), getattr(impl, name)
            if callable(base):
                assert list(inspect.signature(own).parameters) == list(
                    inspect.signature(base).parameters
                ), f"{impl.__name__}.{name}"


def _table_uses(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, name) of each attribute the code reads on a trace's table: `x.table.name`, and
    `t.name` where `t = x.table` in the same function (or one it is inside)."""
    out = set()
    scopes = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)]
    for scope in scopes:
        bound = {
            t.id
            for n in ast.walk(scope)
            if isinstance(n, ast.Assign)
            and isinstance(n.value, ast.Attribute)
            and n.value.attr == "table"
            for t in n.targets
            if isinstance(t, ast.Name)
        }
        for n in ast.walk(scope):
            if not isinstance(n, ast.Attribute):
                continue
            v = n.value
            if (isinstance(v, ast.Attribute) and v.attr == "table") or (
                isinstance(v, ast.Name) and v.id in bound
            ):
                out.add((n.lineno, n.attr))
    return sorted(out)


def test_1_readers_ask_a_trace_s_table_only_what_it_declares():
    declared = set(dir(LaunchTable)) | set(LaunchTable.__annotations__)
    asked, wrong = set(), []
    for folder, _, files in os.walk(PACKAGE):
        for f in files:
            if not f.endswith(".py"):
                continue
            path = os.path.join(folder, f)
            for line, name in _table_uses(ast.parse(open(path, encoding="utf-8").read())):
                asked.add(name)
                if name not in declared:
                    wrong.append(f"{os.path.relpath(path, ROOT)}:{line}: .table.{name}")
    assert not wrong, "not declared by LaunchTable:\n" + "\n".join(wrong)
    assert {"launches", "auto", "compile_steps", "launch_names", "sessions"} <= asked


def _probes(tree: ast.AST, names: set[str]) -> list[tuple[int, str]]:
    """(line, name) of each getattr(x, "name") or hasattr(x, "name") of one of `names`."""
    out = []
    for n in ast.walk(tree):
        if (
            isinstance(n, ast.Call)
            and isinstance(n.func, ast.Name)
            and n.func.id in ("getattr", "hasattr")
            and len(n.args) >= 2
            and isinstance(n.args[1], ast.Constant)
            and n.args[1].value in names
        ):
            out.append((n.lineno, n.args[1].value))
    return out


def test_1_no_module_probes_which_kind_of_source_it_holds():
    """Issue 53: 27 getattr(..., "table" / "auto" / "is_auto_table") probes in 10 files told an
    auto trace from captures; a renamed attribute made every probe answer "captures" silently.
    The kinds are types now (AutoTable, CaptureSequence) and a trace's launches one table."""
    from sm_profiler.wire.auto_file import AutoColumns

    members = set(dir(LaunchTable)) | set(vars(AutoTable)) | set(vars(AutoColumns))
    names = {m for m in members if not m.startswith("__")}
    names |= {"table", "auto", "is_auto_table", "names", "representatives", "metadata"}
    found = []
    for folder, _, files in os.walk(PACKAGE):
        for f in files:
            if f.endswith(".py"):
                path = os.path.join(folder, f)
                tree = ast.parse(open(path, encoding="utf-8").read())
                found += [
                    f"{os.path.relpath(path, ROOT)}:{ln}: {name}"
                    for ln, name in _probes(tree, names)
                ]
    # metadata: Triton's kernels and compiled objects (the binding, launch slots) are not ours.
    theirs = ("sm_profiler/auto_mode/binding.py", "sm_profiler/record/slots.py")
    found = [f for f in found if not (f.startswith(theirs) and f.endswith(": metadata"))]
    assert not found, "probes of the source model:\n" + "\n".join(found)
