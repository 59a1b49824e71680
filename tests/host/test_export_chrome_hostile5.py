"""Hostile input, round 5 (issue 52): what the Perfetto UI keeps of the traces we write. Each test
names the item of the issue it keeps fixed; each failed on the main of 2026-11-29 (at a real
clock reading; at 0 and 1e12 ns, for the writers that count from a trace's own start, the
single export, merged ranks and the native Perfetto files, and for the recorded H200 merge, whose
ranges happen to read back exactly, they passed and keep it so).

Item 8: programs that follow each other on an SM slot (one ends the ns the next begins), recorded
at a real %globaltimer reading and moved onto torch's clock by an offset that is no whole µs,
written to every Chrome JSON trace we write and read back as the UI's JSON importer reads them
(trace_readers.ui_import: its doubles, llround(ts * 1000), one stack per thread): none dropped,
each at its exact ns; the native Perfetto writers read back (trace_readers.read_trace) the same.
"""

from __future__ import annotations

import json
import os
from collections import Counter

import pytest
from auto_inputs import TorchRegion
from trace_readers import read_trace, ui_import
from ui_inputs import ORIGINS, SKEW_NS
from ui_inputs import back_to_back_table as _table
from ui_inputs import torch_doc as _doc

from sm_profiler.auto_mode import script
from sm_profiler.cli import main
from sm_profiler.export import auto_torch_parts as torch_parts
from sm_profiler.export import export
from sm_profiler.export.merge import merge_ranks


def _host_programs(table, skew_ns: int = SKEW_NS) -> Counter:
    """(start, duration) in ns of every program, on torch's clock."""
    r = table.rows
    return Counter(
        (int(s) + skew_ns, int(e) - int(s)) for s, e in zip(r["start_ns"], r["end_ns"], strict=True)
    )


def _ui_programs(path) -> Counter:
    """A Chrome JSON file's programs as the UI reads them, after checking that it keeps every
    complete event the file holds: their (start, duration) in ns on the file's clock (its time
    origin + ts: baseTimeNanoseconds, or otherData's base_ns / start_ns)."""
    import gzip

    ui = ui_import(path)
    assert not ui.stats, (ui.stats, ui.dropped[:3])
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rb") as f:
        doc = json.loads(f.read())
    xs = sum(1 for e in doc["traceEvents"] if e.get("ph") == "X")
    assert ui.complete_events() == xs  # every complete event kept
    other = doc.get("otherData", {})
    origin = doc.get("baseTimeNanoseconds", other.get("base_ns", other.get("start_ns")))
    slots = {
        (e["pid"], e["tid"])
        for e in doc["traceEvents"]
        if e.get("name") == "thread_name" and e["args"]["name"].startswith("slot ")
    }
    return Counter((origin + ts, dur) for track in slots for _, ts, dur in ui.slices.get(track, []))


@pytest.mark.parametrize("t0", ORIGINS)
def test_8_run_torch_keeps_every_program_at_its_ns(tmp_path, t0):
    t = _table(t0)
    out = tmp_path / "out"
    script.write_outputs(TorchRegion(t, _doc(t)), str(out), 100, torch_json=True)
    assert _ui_programs(out / "auto.torch.json.gz") == _host_programs(t)


def _merge_torch(tmp_path, table, doc):
    """`sm-profiler merge auto.npz -o merged.json --torch torch.json` of `table` and `doc`."""
    table.save(tmp_path / "auto.npz")
    (tmp_path / "torch.json").write_text(json.dumps(doc))
    out = tmp_path / "merged.json"
    args = ["merge", tmp_path / "auto.npz", "-o", out, "--torch", tmp_path / "torch.json"]
    assert main([str(a) for a in args]) == 0
    return out


@pytest.mark.parametrize("t0", ORIGINS)
def test_8_merge_torch_keeps_every_program_at_its_ns(tmp_path, t0):
    t = _table(t0)
    assert _ui_programs(_merge_torch(tmp_path, t, _doc(t))) == _host_programs(t)


@pytest.mark.parametrize("t0", ORIGINS)
def test_8_the_job_trace_keeps_every_program_at_its_ns(tmp_path, t0):
    d = tmp_path / "prof"
    d.mkdir()
    tables = [_table(t0 + 7_001 * r, r, 2) for r in (0, 1)]
    for r, t in enumerate(tables):
        TorchRegion(t, _doc(t, r)).save(d / f"auto.rank{r}.npz")
    assert main(["merge", str(d), "-o", str(d / torch_parts.RANKS_TORCH_TRACE)]) == 0
    assert _ui_programs(d / torch_parts.RANKS_TORCH_TRACE) == sum(
        (_host_programs(t) for t in tables), Counter()
    )


@pytest.mark.parametrize("t0", ORIGINS)
def test_8_exports_and_merged_ranks_keep_every_program_at_its_ns(tmp_path, t0):
    t = _table(t0)
    export(t.decode(), tmp_path / "one.json")
    assert _ui_programs(tmp_path / "one.json") == _host_programs(t, 0)
    tables = [_table(t0 + 7_001 * r, r, 2) for r in (0, 1)]
    paths = []
    for r, tr in enumerate(tables):
        paths.append(tmp_path / f"auto.rank{r}.npz")
        tr.save(paths[-1])
    merge_ranks(paths, tmp_path / "ranks.json.gz")
    assert _ui_programs(tmp_path / "ranks.json.gz") == sum(
        (_host_programs(tr, 0) for tr in tables), Counter()
    )


def _native_programs(path) -> Counter:
    """A Perfetto file's programs as trace processor reads them (every slice closed by its own
    end, none left open: trace_readers.read_trace), (start, duration) in ns on its clock."""
    pytest.importorskip("perfetto.protos.perfetto.trace.perfetto_trace_pb2")
    with open(path, "rb") as f:
        r = read_trace(f.read())
    return Counter(
        (ts, dur)
        for uuid, d in r.tracks.items()
        if d.name.startswith("slot ")
        for _, ts, dur in r.slices[uuid]
    )


@pytest.mark.parametrize("t0", ORIGINS)
def test_8_native_perfetto_traces_keep_every_program_at_its_ns(tmp_path, t0):
    t = _table(t0)
    out = tmp_path / "out"
    script.write_outputs(TorchRegion(t, _doc(t)), str(out), 100)
    assert _native_programs(out / "auto.perfetto-trace") == _host_programs(t, 0)
    d = tmp_path / "prof"
    d.mkdir()
    tables = [_table(t0 + 7_001 * r, r, 2) for r in (0, 1)]
    for r, tr in enumerate(tables):
        TorchRegion(tr, _doc(tr, r)).save(d / f"auto.rank{r}.npz")
    assert main(["merge", str(d)]) == 0  # the job's trace: our programs, on %globaltimer
    both = sum((_host_programs(tr, 0) for tr in tables), Counter())
    assert _native_programs(d / "auto.ranks.perfetto-trace") == both


def _kineto_us(ns: int) -> float:
    """A time Kineto writes as "{µs}.{ns:03}", as json.loads reads it back."""
    return float(f"{ns // 1000}.{ns % 1000:03d}")


def test_8_step_ranges_end_the_ns_the_next_step_begins():
    """torch_profiler.step_ranges makes ProfilerStep#N ranges of the step marks, whose ts Kineto
    writes at 5e12 µs (a double's step there is about 1 ns): each step ends exactly where the
    next begins, in ns, or the UI drops every other step."""
    from sm_profiler.auto_mode.torch_profiler import END_MARK, MARK, step_ranges
    from sm_profiler.export.chrome import exact_ns

    at = [5_104_054_094_589_802 + n * 1_000_000 + (n * 7919) % 997 for n in range(40)]
    marks = [
        dict(ph="X", name=f"{MARK}{n}", pid=1, tid=1, ts=_kineto_us(t), dur=0.0)
        for n, t in enumerate(at[:-1])
    ]
    marks.append(
        dict(ph="X", name=f"{END_MARK}{len(at) - 2}", pid=1, tid=1, ts=_kineto_us(at[-1]), dur=0.0)
    )
    doc = step_ranges({"baseTimeNanoseconds": 0, "traceEvents": marks})
    steps = sorted(
        (e for e in doc["traceEvents"] if str(e.get("name")).startswith("ProfilerStep#")),
        key=lambda e: int(e["name"].split("#")[1]),
    )
    spans = [(exact_ns(e["ts"]), exact_ns(e["ts"]) + exact_ns(e["dur"])) for e in steps]
    assert spans == list(zip(at[:-1], at[1:], strict=True))


def test_8_windows_of_one_trace_move_onto_the_first_base_exactly():
    """torch_profiler.combine moves a later window's rows onto the first window's base: by an
    exact number of ns, at Kineto's 5e12 µs too."""
    from sm_profiler.auto_mode.torch_profiler import combine
    from sm_profiler.export.chrome import exact_ns

    base = 1_759_276_800_000_000_000
    at = [5_104_054_094_589_802 + 1_237 * n for n in range(200)]
    rows = [dict(ph="X", name="k", pid=1, tid=1, ts=_kineto_us(t), dur=1.0) for t in at]
    a = {"baseTimeNanoseconds": base, "traceEvents": []}
    b = {"baseTimeNanoseconds": base + 123_456_789, "traceEvents": rows}
    doc = combine([a, b])
    assert [exact_ns(e["ts"]) for e in doc["traceEvents"]] == [t + 123_456_789 for t in at]


def test_8_a_torch_row_kineto_put_at_its_base_leaves_the_origin_near_the_rows(tmp_path):
    """Kineto writes a row it has no time for at ts 0, its base (the start of the quarter): that
    row is put at the merged trace's origin and counted, and the origin stays near the rows,
    where every program keeps its ns."""
    t = _table(ORIGINS[-1])
    doc = _doc(t)
    doc["traceEvents"].append(
        dict(ph="X", cat="cpu_op", name="early", pid=11, tid=12, ts=0, dur=1.5)
    )
    out = _merge_torch(tmp_path, t, doc)
    assert _ui_programs(out) == _host_programs(t)
    merged = json.loads(out.read_text())
    origin = merged["sm_profiler_time_origin"]
    first = int(t.rows["start_ns"].min()) + SKEW_NS
    assert first - 10**10 < origin["ns"] <= first and origin["rows_before"] == 1
    assert origin["torch_base_ns"] == doc["baseTimeNanoseconds"]
    (early,) = [e for e in merged["traceEvents"] if e.get("name") == "early"]
    assert early["ts"] == 0


def test_8_a_recorded_h200_merge_puts_every_range_at_its_ns(tmp_path):
    """The recorded H200 captures and torch.profiler trace (tests/fixtures, Kineto's ts at
    4.6e12 µs): the UI reads each of our ranges at the ns the clock samples put it at."""
    from repo_paths import FIXTURES

    import sm_profiler
    from sm_profiler.export import merge
    from sm_profiler.export.chrome import PID_BASE

    caps = sm_profiler.load(os.path.join(FIXTURES, "captures_h200.smp"))
    torch_json = os.path.join(FIXTURES, "torch_trace_h200.json")
    out = tmp_path / "m.json"
    assert sm_profiler.merge_torch_trace(torch_json, caps, out)["method"] == "clock"
    ((_, parts),), _ = merge.align_ranks([caps], "auto", per_launch=True)
    want = Counter()
    for p in parts:
        ev = p.events
        start, end = ev["start_ns"][ev["kind"] == 0], ev["end_ns"][ev["kind"] == 0]
        want.update(zip(start.tolist(), (end - start).tolist(), strict=True))
    ui = ui_import(out)
    assert not ui.stats
    origin = json.loads(out.read_text())["baseTimeNanoseconds"]
    got = Counter(
        (origin + ts, dur)
        for (pid, _), slices in ui.slices.items()
        if isinstance(pid, int) and pid >= PID_BASE
        for name, ts, dur in slices
        if name == "busy"
    )
    assert sum(want.values()) == 8 and got == want
