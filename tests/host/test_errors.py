"""sm_profiler/errors.py (issue 53, item 6): every error a user can reach is one of its classes,
with the fix in its message, and still the builtin it was (code catching ValueError or
RuntimeError keeps working); the warnings live there too, still importable from their old
modules. A bare builtin raise is left only where it states an internal invariant: the list
below names each, with why, so that the count cannot grow unseen."""

from __future__ import annotations

import ast
import os

import numpy as np
import pytest
from captures import tiny_capture
from repo_paths import ROOT

from sm_profiler import errors
from sm_profiler.trace.decode import decode

PACKAGE = os.path.join(ROOT, "sm_profiler")
BUILTINS = {
    "ValueError",
    "RuntimeError",
    "TypeError",
    "KeyError",
    "IndexError",
    "OSError",
    "NotImplementedError",
    "Exception",
    "AssertionError",
}
# (file below sm_profiler/, function, exception) -> why a builtin is right there.
ALLOWED = {
    ("trace/model.py", "TraceData.select_capture", "IndexError"): (
        "a sequence's index out of range: Python's own protocol (docs/api.md)"
    ),
    ("trace/auto_table.py", "AutoTable.capture", "IndexError"): "a sequence's index, as above",
    ("trace/launches.py", "LaunchList.__getitem__", "IndexError"): (
        "a sequence's index, as above (list(trace.kernels) stops on it)"
    ),
    ("report/stats_data.py", "Stats.event", "KeyError"): (
        "a lookup by name: Python's own protocol (docs/api.md says KeyError)"
    ),
    ("report/advise.py", "ProgramColumns.__getitem__", "KeyError"): (
        "a Mapping's lookup (Python's protocol); internal: advise asks only for the launches "
        "tail_candidates named, whose long programs a summary carries"
    ),
    ("trace/timeline.py", "LaneNames.__getitem__", "KeyError"): (
        "internal: every lane a writer asks for was named by the timeline"
    ),
    ("export/auto_torch_parts.py", "merge_job", "ValueError"): (
        "internal: the CLI passes one torch trace (or None) per rank file"
    ),
    ("export/job_trace.py", "_write_full", "ValueError"): (
        "internal: every rank's first start is in the facts the trace's origin is taken from"
    ),
    ("export/job_trace.py", "_write_counters", "ValueError"): (
        "internal: the counters' bins were chosen so that their bytes fit the room left"
    ),
    ("auto_mode/registers.py", "usage", "ValueError"): (
        "internal: the cubin is the one ptxas just wrote"
    ),
    ("auto_mode/registers.py", "with_maxnreg", "ValueError"): (
        "internal: keep_occupancy catches it and keeps its first build"
    ),
    ("auto_mode/binding.py", "_wrap_static_init.__init__", "NotImplementedError"): (
        "internal: Inductor takes it as 'cannot launch statically' and uses Triton's launcher"
    ),
    ("auto_mode/graph_switch.py", "Switch.follow", "RuntimeError"): (
        "internal: the binding catches it and warns (AutoWarning)"
    ),
    ("auto_mode/graph_switch.py", "prepare", "RuntimeError"): (
        "internal: the binding catches it and warns (AutoWarning)"
    ),
    ("auto_mode/rewrite.py", "instrument", "ValueError"): (
        "internal: the binding passes a level AutoProfiler checked (ConfigError)"
    ),
    ("record/ptx.py", "record_parts", "ValueError"): "internal: the ops pass their own modes",
    ("record/ptx.py", "init_staged", "ValueError"): (
        "internal: the ops refuse a bad STAGE with stage_error's text first"
    ),
    ("record/ptx.py", "auto_epilogue", "ValueError"): "internal: auto_kernel_tag makes the tags",
    ("record/cuda.py", "cuda_asm", "ValueError"): "internal: ptx.py's texts, at generation",
    ("record/cuda.py", "_own_indent", "ValueError"): "internal: ptx.py's spelling of a part",
    ("record/cuda.py", "ptx_header", "ValueError"): "internal: ptx.py's part names",
}


def _bare_raises() -> set[tuple[str, str, str]]:
    """(file, enclosing function's qualified name, builtin) of every `raise Builtin(...)`."""
    found = set()
    for folder, _, files in os.walk(PACKAGE):
        for f in files:
            if f.endswith(".py"):
                path = os.path.join(folder, f)
                rel = os.path.relpath(path, PACKAGE).replace(os.sep, "/")
                tree = ast.parse(open(path, encoding="utf-8").read())
                found.update((rel, where, name) for where, name in _raises(tree, []))
    return found


def _raises(node, names: list[str]):
    """(qualified name of the enclosing def, builtin) of each bare builtin raise under `node`."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            yield from _raises(child, names + [child.name])
            continue
        if isinstance(child, ast.Raise) and isinstance(child.exc, ast.Call):
            name = getattr(child.exc.func, "id", None)
            if name in BUILTINS:
                yield ".".join(names), name
        yield from _raises(child, names)


def test_every_bare_builtin_raise_is_an_internal_invariant_on_the_list():
    found = _bare_raises()
    assert len(found) > 10  # the reader found them
    new = sorted(found - set(ALLOWED))
    assert not new, (
        "raise an errors.py class with the fix in its message (a user can reach it), or add "
        f"the internal invariant to ALLOWED with why: {new}"
    )
    gone = sorted(set(ALLOWED) - found)
    assert not gone, f"no longer raised: take them off ALLOWED: {gone}"


def test_the_warnings_and_the_rewrite_error_live_in_errors_and_import_as_before():
    from sm_profiler.auto_mode import binding, rewrite
    from sm_profiler.record import occupancy

    assert binding.AutoWarning is errors.AutoWarning
    assert occupancy.StageOccupancyWarning is errors.StageOccupancyWarning
    assert rewrite.RewriteError is errors.RewriteError
    for w in (errors.AutoWarning, errors.StageOccupancyWarning):
        assert issubclass(w, errors.SmProfilerWarning) and issubclass(w, UserWarning)
        assert w.__module__ == "sm_profiler.errors"
    assert issubclass(errors.RewriteError, errors.SmProfilerError)


def test_concat_of_nothing_says_what_to_give():
    from sm_profiler.trace.auto_table import AutoTable
    from sm_profiler.trace.model import TraceData

    for concat in (TraceData.concat, AutoTable.concat):
        with pytest.raises(errors.ConfigError, match="at least one") as e:
            concat([])
        assert isinstance(e.value, ValueError)


def test_an_unknown_breakdown_is_a_config_error_naming_the_choices():
    from sm_profiler.report.stats import breakdown

    with pytest.raises(errors.ConfigError, match="use one of group, sm, launch"):
        breakdown(decode(tiny_capture()), "warp")


def test_a_summary_past_int64_says_how_to_export_it():
    from sm_profiler.trace.summary import ActiveRanges

    with pytest.raises(errors.ConfigError, match="--window-us") as e:
        ActiveRanges(np.array([0], np.int64), np.array([2**62], np.int64), 10)
    assert isinstance(e.value, ValueError)


def test_no_driver_is_a_device_error_saying_what_to_check(monkeypatch):
    from sm_profiler.auto_mode import driver
    from sm_profiler.record import occupancy

    monkeypatch.setattr(occupancy, "load_libcuda", lambda: None)
    with pytest.raises(errors.DeviceError, match="nvidia-smi") as e:
        driver.libcuda()
    assert isinstance(e.value, RuntimeError) and isinstance(e.value, errors.SmProfilerError)
    with pytest.raises(errors.DeviceError, match="CUDA error 700; check the GPU"):
        driver.check_rc(700, "cuMemcpyDtoDAsync")  # no driver to name it: the number alone
