"""SmProfiler's convenience methods are thin wrappers: the same parameters as the functions they
wrap (minus the trace), and the same output on the same capture. If a function gains an option,
the method must gain it too, or these tests fail."""

from __future__ import annotations

import inspect
import io

import numpy as np
import pytest
from reference_encoder import BEGIN, END, INSTANT, Lane, Stream, encode

import sm_profiler.export
import sm_profiler.export.plot
import sm_profiler.report.stats
from sm_profiler.trace.decode import decode

torch = pytest.importorskip("torch")
from sm_profiler.auto_mode.session import AutoProfiler  # noqa: E402
from sm_profiler.profiler import SmProfiler  # noqa: E402
from sm_profiler.report.auto_report import print_report  # noqa: E402

# method name -> the function it wraps, whose first parameter is the trace.
WRAPPED = {
    "print_stats": sm_profiler.report.stats.print_stats,
    "export": sm_profiler.export.export,
    "plot": sm_profiler.export.plot.plot,
    "stats": sm_profiler.report.stats.compute_stats,
}


def _params(sig: inspect.Signature) -> list[tuple]:
    return [(p.name, p.kind, p.default) for p in sig.parameters.values()]


@pytest.mark.parametrize("name", sorted(WRAPPED))
def test_methods_take_the_wrapped_functions_parameters(name):
    fn = WRAPPED[name]
    want = inspect.signature(fn)
    got = inspect.signature(getattr(SmProfiler, name))
    assert _params(got)[0][0] == "self"
    # The function's first parameter is the trace, which the method decodes itself.
    assert _params(got)[1:] == _params(want)[1:], f"SmProfiler.{name} drifted from {fn.__module__}"


def _profiler() -> SmProfiler:
    """Two snapshots (launches) far apart, one of them with dropped records: the stats warn and
    an export with cut_gaps has notes to return."""
    prof = SmProfiler(num_blocks=2, num_groups=1, max_events_per_group=4, device="cpu")
    prof.register_event(0, "load")
    prof.register_event(1, "tick")
    for t0, n in ((10**6, 2), (10**9, 6)):  # the second launch overflows lane 0
        recs = [(BEGIN, 0, t0 + 10 * i) if i % 2 == 0 else (END, 0, t0 + 10 * i) for i in range(n)]
        lanes = {(0, 0): Lane(t0, 3, recs), (1, 0): Lane(t0 + 5, 4, [(INSTANT, 1, t0 + 7)])}
        stream = Stream(2, 1, 4, lanes, flags=1)
        prof.get_buffer().copy_(torch.from_numpy(encode(stream).view(np.int64)))
        prof.snapshot("k")
    return prof


def test_print_stats_prints_what_print_stats_prints():
    prof = _profiler()
    trace = decode(prof.captures())
    for width in (None, 48, 100):
        ours, theirs = io.StringIO(), io.StringIO()
        prof.print_stats(file=ours, width=width)
        sm_profiler.report.stats.print_stats(trace, file=theirs, width=width)
        assert ours.getvalue() == theirs.getvalue()
    assert "dropped" in ours.getvalue()
    assert sm_profiler.report.stats.format_stats(prof.stats(), width=100) == theirs.getvalue()


@pytest.mark.parametrize("ext", [".perfetto-trace", ".json"])
def test_export_writes_and_returns_what_export_does(tmp_path, ext):
    prof = _profiler()
    trace = decode(prof.captures())
    for options in ({}, {"cut_gaps": True}, {"capture": 1, "summary": True}):
        ours, theirs = tmp_path / f"ours{ext}", tmp_path / f"theirs{ext}"
        notes = prof.export(ours, **options)
        want = sm_profiler.export.export(trace, theirs, **options)
        assert notes == want
        assert ours.read_bytes() == theirs.read_bytes()
        if options:
            assert notes  # the cut gap or the one capture is said


def test_plot_draws_what_plot_draws(tmp_path):
    pytest.importorskip("matplotlib")
    prof = _profiler()
    ours = prof.plot(tmp_path / "ours.svg", width_in=6.0, capture=1)
    theirs = sm_profiler.export.plot.plot(
        decode(prof.captures()), tmp_path / "theirs.svg", width_in=6.0, capture=1
    )
    assert ours == str(tmp_path / "ours.svg") and theirs == str(tmp_path / "theirs.svg")
    assert (tmp_path / "ours.svg").stat().st_size > 0


# AutoProfiler (sm_profiler.auto) wraps the same functions, its report in place of the stats.
AUTO_WRAPPED = {
    "export": sm_profiler.export.export,
    "plot": sm_profiler.export.plot.plot,
    "print_stats": print_report,
}


@pytest.mark.parametrize("name", sorted(AUTO_WRAPPED))
def test_auto_profiler_methods_take_the_wrapped_functions_parameters(name):
    fn = AUTO_WRAPPED[name]
    got = _params(inspect.signature(getattr(AutoProfiler, name)))
    want = _params(inspect.signature(fn))
    if (
        want[-1][1] is not inspect.Parameter.VAR_KEYWORD
        and got[-1][1] is inspect.Parameter.VAR_KEYWORD
    ):
        got = got[:-1]  # keyword options passed on as they are: plot's are checked by plot
        want = [p for p in want if p[1] is not inspect.Parameter.KEYWORD_ONLY]
    assert [p[0] for p in got[1:]] == [p[0] for p in want[1:]], f"AutoProfiler.{name} drifted"


def test_auto_profiler_export_and_report_are_the_functions(tmp_path):
    import auto_inputs

    prof = AutoProfiler()
    prof._table = auto_inputs.table_of(auto_inputs.two_kernels())  # what the region recorded
    trace = decode(prof._table)
    notes = prof.export(tmp_path / "ours.json", cut_gaps=True)
    assert notes and notes == sm_profiler.export.export(
        trace, tmp_path / "theirs.json", cut_gaps=True
    )
    assert (tmp_path / "ours.json").read_bytes() == (tmp_path / "theirs.json").read_bytes()
    ours, theirs = io.StringIO(), io.StringIO()
    prof.print_stats(file=ours, width=80)
    print_report(trace, file=theirs, width=80)
    assert ours.getvalue() == theirs.getvalue() != ""
