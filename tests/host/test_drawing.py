"""The timeline as data (sm_profiler/trace/drawing.py, issue 44 item 3): the writers (Perfetto,
Chrome, the picture, the rank merges) read a Drawing built once from the Timeline and never call
back into it or into the trace; building one asks the Timeline each name once; the picture's
keywords are figure's everywhere."""

from __future__ import annotations

import ast
import inspect
import json
import os
import re

import numpy as np
import pytest
from captures import EPOCH_T0, basic_capture, build_capture, kernel_capture, nested_trace, torch_doc
from repo_paths import ROOT

import sm_profiler.export.plot as plot_mod
from sm_profiler.export import chrome, merge, perfetto, timeline
from sm_profiler.export.chrome import encode_json
from sm_profiler.trace.decode import decode
from sm_profiler.trace.drawing import Drawing, drawing_of, launch_drawings
from sm_profiler.trace.model import TraceData
from sm_profiler.trace.timeline import Timeline

# What a writer could ask the Timeline or the trace, were it to call back.
TIMELINE_CALLS = (
    "sm_name",
    "lane_name",
    "lane_names",
    "lane_rank",
    "launch_name",
    "unmatched_name",
    "summary_name",
    "cut_name",
    "launch_tracks",
    "block_slots",
    "event_levels",
    "drop_marks",
)
TRACE_CALLS = ("event_name", "capture_name", "lane_label", "group_suffix", "group_name")
TRACE_PROPERTIES = ("start_ns", "end_ns", "emulated", "dropped_total")
FIGURE = plot_mod.figure


def _refuse(*_, **__):
    raise AssertionError("a writer called back into the Timeline or the trace")


def _unusable(monkeypatch) -> None:
    """From here on, any Timeline method, the root's name, and the trace's names and bounds
    raise."""
    for name in TIMELINE_CALLS:
        monkeypatch.setattr(Timeline, name, _refuse)
    monkeypatch.setattr(Timeline, "root_name", property(_refuse))
    for name in TRACE_CALLS:
        monkeypatch.setattr(TraceData, name, _refuse)
    for name in TRACE_PROPERTIES:
        monkeypatch.setattr(TraceData, name, property(_refuse))


def _drop_and_unmatched() -> TraceData:
    """Two launches: a lane that overflowed, unmatched begins and ends, partial overlaps."""
    lanes = {
        0: {
            "sm": 2,
            "anchor": 1000,
            "records": [("B", 0, 1100), ("B", 1, 1200), ("E", 0, 1300), ("E", 1, 1400)] * 6,
        },
        1: {"sm": 4, "anchor": 900, "records": [("E", 0, 950), ("B", 0, 1000), ("E", 0, 2000)]},
        2: {"sm": 4, "anchor": 2500, "records": [("B", 2, 2600)]},
    }
    names = {0: "a", 1: "b", 2: "c"}
    first = build_capture(lanes, num_blocks=3, capacity=8, event_names=names, kernel_name="k")
    return decode([first, basic_capture(), basic_capture()])


CASES = [
    ("plain", lambda: nested_trace(), {}),
    ("drops, cut gaps", _drop_and_unmatched, {"cut_gaps": True}),
    ("packed", _drop_and_unmatched, {"pack": True}),
    ("summary", _drop_and_unmatched, {"summary": True, "detail_sms": [4]}),
    ("one capture", _drop_and_unmatched, {"capture": 1}),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_writers_draw_the_drawing_alone(monkeypatch, case):
    _, make, options = case
    trace = make()
    want_pf = perfetto.to_perfetto_bytes(timeline(trace, **options))
    want_js = encode_json(chrome.to_chrome_json(timeline(trace, **options)))
    d = drawing_of(timeline(trace, **options))
    _unusable(monkeypatch)
    assert perfetto.to_perfetto_bytes(d) == want_pf
    assert encode_json(chrome.to_chrome_json(d)) == want_js
    # Ranks: the same drawing twice, on one axis.
    assert b"".join(perfetto.iter_ranks_chunks([(0, d), (1, d)]))
    doc = chrome.ranks_json([(0, d), (1, d)], d.start_ns)
    assert doc["sm_profiler_dropped_records"]["total"] == 2 * d.dropped_total


def test_the_picture_draws_its_panels_alone(monkeypatch, tmp_path):
    pytest.importorskip("matplotlib")
    trace = _drop_and_unmatched()
    want = tmp_path / "want.png"
    plot_mod.plot(trace, want, width_in=6.0)
    panels = plot_mod.panels(trace)
    emulated = trace.emulated
    _unusable(monkeypatch)
    fig = plot_mod.draw_panels(panels, emulated, 6.0, 100, None, None, 50_000)
    got = tmp_path / "got.png"
    fig.savefig(got, dpi=100)
    assert got.read_bytes() == want.read_bytes()


def test_merges_draw_the_drawings_alone(monkeypatch, tmp_path):
    """merge_ranks and merge_torch_trace build each rank's timeline, then its drawing; their
    writers ask neither the timelines nor the traces."""
    caps = [[kernel_capture("a")], [kernel_capture("b", t0=EPOCH_T0 + 5000)]]
    torch = torch_doc([decode(kernel_capture("a"))])

    def run(out):
        merge.merge_ranks(caps, out / "r.perfetto-trace", align="none")
        merge.merge_ranks(caps, out / "r.json", align="none")
        merge.merge_torch_trace(torch, [kernel_capture("a")], out / "t.json")

    os.makedirs(tmp_path / "want")
    run(tmp_path / "want")

    def unusable_while(writer):
        def run_writer(*a, **k):
            with pytest.MonkeyPatch.context() as m:
                _unusable(m)
                return writer(*a, **k)

        return run_writer

    monkeypatch.setattr(merge, "ranks_json", unusable_while(merge.ranks_json))
    monkeypatch.setattr(merge, "_write_perfetto", unusable_while(merge._write_perfetto))
    os.makedirs(tmp_path / "got")
    run(tmp_path / "got")
    for name in ("r.perfetto-trace", "r.json", "t.json"):
        got, want = (tmp_path / d / name for d in ("got", "want"))
        assert got.read_bytes() == want.read_bytes(), name


def _counted(monkeypatch) -> dict[str, int]:
    calls = dict.fromkeys(TIMELINE_CALLS, 0)
    for name in TIMELINE_CALLS:
        real = getattr(Timeline, name)

        def counting(self, *a, _name=name, _real=real, **k):
            calls[_name] += 1
            return _real(self, *a, **k)

        monkeypatch.setattr(Timeline, name, counting)
    return calls


def test_an_export_visits_the_timeline_once(monkeypatch):
    trace = _drop_and_unmatched()
    tl = timeline(trace, cut_gaps=True)
    calls = _counted(monkeypatch)
    d = drawing_of(tl)
    once = dict(calls)
    # Each name asked once: an SM's, a launch's, an unmatched kind's; every lane's in one call.
    assert once["sm_name"] == len(d.sms) and once["launch_name"] == len(d.launch_names)
    assert once["lane_names"] == 1 and once["lane_name"] == 0
    assert once["unmatched_name"] == len(
        np.unique(trace.unmatched["kind"] * 100 + trace.unmatched["event"])
    )
    assert once["drop_marks"] == 1 and once["launch_tracks"] == 1
    for writer in (perfetto.to_perfetto_bytes, chrome.to_chrome_json):
        calls.update(dict.fromkeys(calls, 0))
        writer(tl)  # a Timeline given: drawn first, once
        assert calls == once, writer.__module__
        calls.update(dict.fromkeys(calls, 0))
        writer(d)
        assert not any(calls.values()), writer.__module__


def test_lane_names_are_lane_name():
    trace = _drop_and_unmatched()
    for options in ({}, {"pack": True}):
        tl = timeline(trace, **options)
        rows = np.arange(len(tl.trace.lanes["lane"]))
        names = tl.lane_names(rows)
        assert [names[g] for g in rows] == [tl.lane_name(int(g)) for g in rows]
    names = timeline(nested_trace()).lane_names([0, 1, 3])
    assert [names[0], names[1], names[3]] == [
        "block 0 · producer",
        "block 0 · consumer",
        "block 1 · consumer",
    ]
    # A lane holds a part number; its name's parts are made once per (launch, group).
    assert len(names.heads) == 2 and names.part.dtype == np.int32
    with pytest.raises(KeyError):
        names[2]


def test_writers_import_the_drawing_not_the_timeline():
    """export/perfetto.py and chrome.py take their constants and layout rules from
    trace/drawing.py; the Timeline is named for type hints only."""
    for name in ("perfetto", "chrome"):
        path = os.path.join(ROOT, "sm_profiler", "export", f"{name}.py")
        tree = ast.parse(open(path, encoding="utf-8").read())
        hinted = {
            id(n)
            for node in ast.walk(tree)
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
            for n in ast.walk(node)
        }
        modules = [
            node.module
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and id(node) not in hinted
        ]
        assert "trace.timeline" not in modules, name
        assert "trace.drawing" in modules, name


def test_writers_run_no_layout_rule():
    """Issue 53, item 4: the Perfetto writer ran order_rows, the Chrome writer assign_slots, and
    the picture split the trace into launches and found the top-level ranges itself; the
    drawing decides all of it once (Drawing.lane_rows, levels, block_slots, top_level,
    launch_drawings) and the writers read the results."""
    rules = {"order_rows", "assign_slots", "block_slots", "build", "select_capture"}
    for name in ("perfetto", "chrome", "plot"):
        path = os.path.join(ROOT, "sm_profiler", "export", f"{name}.py")
        tree = ast.parse(open(path, encoding="utf-8").read())
        used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
        used |= {a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names}
        # Read off the drawing (d.block_slots: its result), a rule is not called: trace.build.
        used |= {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)} - {"block_slots"}
        assert not used & rules, (name, sorted(used & rules))


def test_the_drawing_lays_out_each_launch_as_the_whole_trace_names_it():
    trace = _drop_and_unmatched()
    parts = launch_drawings(trace)
    assert [title for title, _ in parts] == [
        "k · 3 blocks",
        "kernel (launch 1) · 2 blocks",
        "kernel (launch 2) · 2 blocks",
    ]
    for c, (_, d) in enumerate(parts):
        assert d.groups.tolist() == [trace.kernels[c].num_groups]
        assert d.summary is None  # every range: no summary, each lane its own
    assert launch_drawings(trace, 1)[0][0] == parts[1][0]


def test_a_drawing_is_plain_data():
    d = drawing_of(timeline(_drop_and_unmatched()))
    assert isinstance(d, Drawing)
    for value in vars(d).values():
        assert not isinstance(value, (Timeline, TraceData))
    assert d.lanes.names[0] == "k · block 0" and d.mark_names
    assert d.sm_names == [f"SM {s}" for s in d.sms.tolist()]


# -- the picture's keywords: figure's, passed on by plot, SmProfiler.plot, AutoProfiler.plot ----


def _figure_options() -> dict:
    """A value other than the default for each of figure's keywords."""
    sig = inspect.signature(FIGURE)
    given = {"width_in": 3.5, "dpi": 42, "colors": {"a": "red"}, "title": "t", "max_vector": 7}
    given["capture"] = 0
    assert set(given) == {
        p.name for p in sig.parameters.values() if p.kind is inspect.Parameter.KEYWORD_ONLY
    }, "figure gained a keyword: add it here and to docs/api.md's plot lines"
    return given


def test_every_plot_passes_figures_keywords_on(monkeypatch, tmp_path):
    pytest.importorskip("matplotlib")
    torch = pytest.importorskip("torch")  # noqa: F841 (SmProfiler needs it)
    from sm_profiler.auto_mode.session import AutoProfiler
    from sm_profiler.profiler import SmProfiler

    trace = nested_trace()
    seen = []

    class Fig:
        dpi = 42

        def savefig(self, path, dpi):
            assert dpi == 42
            open(path, "wb").close()

    def figure(t, **options):
        seen.append(options)
        return Fig()

    monkeypatch.setattr(plot_mod, "figure", figure)
    monkeypatch.setattr(SmProfiler, "decode", lambda self: trace)
    monkeypatch.setattr(AutoProfiler, "decode", lambda self: trace)
    given = _figure_options()
    plot_mod.plot(trace, tmp_path / "a.png", **given)
    SmProfiler.plot(object.__new__(SmProfiler), tmp_path / "b.png", **given)
    AutoProfiler.plot(object.__new__(AutoProfiler), tmp_path / "c.png", **given)
    assert seen == [given] * 3


def test_the_api_docs_list_figures_keywords():
    want = list(_figure_options())
    text = open(os.path.join(ROOT, "docs", "api.md"), encoding="utf-8").read()
    lines = [m.group(1) for m in re.finditer(r"plot\((?:trace, )?path, \*, ([^)]*)\)", text)]
    assert lines, "docs/api.md names plot's keywords"
    for line in lines:
        assert re.findall(r"(\w+)=", line) == want, line


def test_plot_writes_what_figure_draws(tmp_path):
    pytest.importorskip("matplotlib")
    trace = nested_trace()
    plot_mod.plot(trace, tmp_path / "a.png", dpi=50, width_in=4.0)
    fig = plot_mod.figure(trace, dpi=50, width_in=4.0)
    fig.savefig(tmp_path / "b.png", dpi=50)
    assert (tmp_path / "a.png").read_bytes() == (tmp_path / "b.png").read_bytes()
    assert json.dumps(_figure_options())  # the options are plain values
