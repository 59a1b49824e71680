"""The whole-step trace as native Perfetto (issue 56, item 11): `sm-profiler run --torch` and
`merge --torch ... -o X.perfetto-trace` write torch.profiler's rows as track events beside our SM
tracks (sm_profiler/export/torch_perfetto.py), read back as trace processor reads them
(trace_readers.read_trace): every torch slice, flow and program at its exact ns (at 0, 1e12 and
a real clock reading), names without pids, SMs in order, the window on the recorded steps, what
could not be drawn said. Before: Chrome JSON only, which the Perfetto UI named 'GPU 0 · SM 34
1879048227' and (before October 2025) ordered its own way. tests/e2e/test_browser.py opens it in
the UI itself."""

from __future__ import annotations

import gzip
import json
import os
from collections import Counter

import pytest
from auto_inputs import AUTO_T0, TorchRegion, table_of
from repo_paths import ROOT
from trace_readers import read_trace
from ui_inputs import ORIGINS, SKEW_NS, back_to_back_table, exact, kineto_doc

from sm_profiler.auto_mode import script
from sm_profiler.cli import main
from sm_profiler.export import auto_torch_parts as torch_parts
from sm_profiler.export.chrome import MAX_LEAD_NS
from sm_profiler.export.merge import merge_torch_trace
from sm_profiler.wire.capture import load

pytest.importorskip("perfetto.protos.perfetto.trace.perfetto_trace_pb2")

ONE_GPU = os.path.join(ROOT, "examples", "recordings", "one_gpu", "auto.npz")


def _read(path):
    with open(path, "rb") as f:
        return read_trace(f.read())


def _top(r, uuid: int):
    """The top-level track above track `uuid`."""
    d = r.tracks[uuid]
    while d.HasField("parent_uuid"):
        d = r.tracks[d.parent_uuid]
    return d


def _ours(d) -> bool:
    """A top-level track of our programs: an SM, or a rank's root."""
    return " · SM " in d.name or "host clock" in d.description


def _torch_slices(r) -> Counter:
    """(name, start ns, duration ns) of every slice on torch's tracks."""
    return Counter(
        (name, ts, dur)
        for uuid, slices in r.slices.items()
        if not _ours(_top(r, uuid))
        for name, ts, dur in slices
    )


def _doc_slices(doc) -> Counter:
    """What torch's trace says its slices are: its 'X' rows at base + exact ns."""
    base = doc["baseTimeNanoseconds"]
    return Counter(
        (e["name"], base + exact(e["ts"]), exact(e["dur"]))
        for e in doc["traceEvents"]
        if e.get("ph") == "X"
    )


def _programs(r) -> Counter:
    return Counter(
        (ts, dur)
        for uuid, d in r.tracks.items()
        if d.name.startswith("slot ")
        for _, ts, dur in r.slices[uuid]
    )


def _host_programs(table) -> Counter:
    """(start, duration) of every program on torch's clock (ui_inputs: SKEW_NS off ours)."""
    rows = table.rows
    return Counter(
        (int(s) + SKEW_NS, int(e) - int(s))
        for s, e in zip(rows["start_ns"], rows["end_ns"], strict=True)
    )


def _root(r):
    (root,) = [d for d in r.tracks.values() if "host clock" in d.description]
    return root


def _tracks_named(r, name: str) -> list[int]:
    return [u for u, d in r.tracks.items() if d.name == name]


@pytest.mark.parametrize("t0", ORIGINS)
def test_11_run_torch_writes_every_torch_row_flow_and_program_at_its_ns(tmp_path, t0):
    t = back_to_back_table(t0)
    doc = kineto_doc(t)
    out = tmp_path / "out"
    script.write_outputs(TorchRegion(t, doc), str(out), 100)
    assert sorted(os.listdir(out)) == [
        "auto.npz",
        "auto.npz.summary.json",  # its summary (issue 57)
        "auto.perfetto-trace",
        "auto.torch.perfetto-trace",
        "auto_stats.txt",
    ]
    r = _read(out / "auto.torch.perfetto-trace")
    assert _torch_slices(r) == _doc_slices(doc)
    assert _programs(r) == _host_programs(t)
    # Each launch's arrow from its cudaLaunchKernel to its kernel, as torch's 'ac2g' rows say.
    base = doc["baseTimeNanoseconds"]
    by_id = {}
    for e in doc["traceEvents"]:
        if e.get("cat") in ("kernel", "cuda_runtime"):
            by_id.setdefault(e["args"]["correlation"], {})[e["cat"]] = e
    want = {
        (
            ("cudaLaunchKernel", base + exact(k["cuda_runtime"]["ts"])),
            (k["kernel"]["name"], base + exact(k["kernel"]["ts"])),
        )
        for k in by_id.values()
    }
    got = {((a[1], a[2]), (b[1], b[2])) for a, b in r.flows}
    assert got == want and len(r.flows) == len(want)
    # Args: the kernel's own, typed as torch wrote them (a list as its JSON text).
    (kernel,) = [k for k in r.args if k[1] == "mm_tail"]
    (row,) = [e["args"] for e in doc["traceEvents"] if e.get("name") == "mm_tail"]
    assert r.args[kernel] == dict(row, grid="[40,1,1]") and r.categories[kernel] == ["kernel"]
    # The kernel we did not record, on each SM's 'other kernels (CUPTI)' track, at its ns.
    bars = Counter(s for u in _tracks_named(r, "other kernels (CUPTI)") for s in r.slices[u])
    nccl = [e for e in doc["traceEvents"] if e.get("name") == "ncclDevKernel_AllReduce"]
    want_bars = Counter()
    for e in nccl:
        for _ in range(2):  # on both SMs
            want_bars[(r_name(r, e), base + exact(e["ts"]), exact(e["dur"]))] += 1
    assert bars == want_bars


def r_name(r, e) -> str:
    """The name a bar of torch row `e` is drawn under (coverage.unseen_kernels adds its SMs)."""
    names = {n for u in _tracks_named(r, "other kernels (CUPTI)") for n, _, _ in r.slices[u]}
    (name,) = [n for n in names if n.startswith(e["name"])]
    return name


def _sm_table(sms: list[int]):
    recs = [(AUTO_T0 + 1_000 * p, 800, sm, 1, 1, p, 0, 0) for p, sm in enumerate(sms)]
    return table_of(recs, sm_count=132)


def test_11_sm_tracks_in_order_names_without_pids(tmp_path):
    t = _sm_table([112, 8, 22, 113, 8, 124])
    doc = kineto_doc(t)
    out = tmp_path / "m.perfetto-trace"
    merge_torch_trace(doc, [t], out)
    r = _read(out)
    tops = [d.name for d in sorted(
        (d for d in r.tracks.values() if not d.HasField("parent_uuid")),
        key=lambda d: r.written_names[d.uuid].encode(),  # the UI's order: by name as written
    )]  # fmt: skip
    # SMs 0 and 1 too: the unseen kernel's bars are drawn there (the doc's GPU has 2 SMs).
    assert tops == [
        "CPU · python3 (pid 11)",
        f"GPU 0 · {t.kernel_names()[0]}",
        "GPU 0 · CUDA streams",
        *[f"GPU 0 · SM {s}" for s in (0, 1, 8, 22, 112, 113, 124)],
        "Traces",
    ]
    cpu = next(d for d in r.tracks.values() if d.name == tops[0])
    threads = sorted(
        (d for d in r.tracks.values() if d.parent_uuid == cpu.uuid and not d.HasField("counter")),
        key=lambda d: d.sibling_order_rank,
    )
    assert [d.name for d in threads] == [
        "steps (sm_profiler)",  # torch's thread_sort_index -1
        "thread 11 (python3)",
        "thread 12 (pt_autograd_0)",
        "thread 12 (pt_autograd_0) (overlap)",
    ]
    # The memory counter, a track of the process, at each of its samples.
    (mem,) = [d for d in r.tracks.values() if d.name == "[memory] Total Allocated"]
    assert [v for _, v in r.counters[mem.uuid]] == [1024.5, 2049.0]


def test_11_a_slice_that_partly_overlaps_goes_beside_its_thread(tmp_path):
    t = back_to_back_table(ORIGINS[2])
    doc = kineto_doc(t)
    out = tmp_path / "m.perfetto-trace"
    merge_torch_trace(doc, [t], out)
    r = _read(out)
    base = doc["baseTimeNanoseconds"]
    rows = {e["name"]: e for e in doc["traceEvents"] if e.get("cat") == "cpu_op"}
    (own,) = _tracks_named(r, "thread 12 (pt_autograd_0)")
    (beside,) = _tracks_named(r, "thread 12 (pt_autograd_0) (overlap)")
    assert r.tracks[beside].parent_uuid == r.tracks[own].parent_uuid  # a sibling, not a child
    for name, uuid in (("aten::copy_", own), ("aten::add", beside)):
        e = rows[name]
        assert r.slices[uuid] == [(name, base + exact(e["ts"]), exact(e["dur"]))]


def test_11_opens_on_the_recorded_steps_of_a_long_recording(tmp_path):
    """Kineto's 'PyTorch Profiler' span ran 30 s, the recorded step at its start: the trace
    opens on the step and our programs, not on the 30 s."""
    t = back_to_back_table(ORIGINS[2])
    doc = kineto_doc(t, span_ns=30 * 10**9)
    out = tmp_path / "m.perfetto-trace"
    merge_torch_trace(doc, [t], out)
    r = _read(out)
    (step,) = [e for e in doc["traceEvents"] if e["name"] == "ProfilerStep#0"]
    lo = doc["baseTimeNanoseconds"] + exact(step["ts"])
    hi = lo + exact(step["dur"])
    opened = (r.window["tracing_started"] + r.origin, r.window["tracing_disabled"] + r.origin)
    pad = (hi - lo) // 50  # the writer's margin, from the trace's start on
    assert opened == (max(lo - pad, r.origin), hi + pad)
    spans = [s for u in _tracks_named(r, "PyTorch Profiler") for s in r.slices[u]]
    assert spans[0][2] == 30 * 10**9  # the whole recording is there, zoomed out
    assert "opens on the recorded steps (0)" in _root(r).description


def _x(name: str, tid: int, start_ns: int, dur_ns: int) -> dict:
    """An 'X' row of process 1 (times well below 2**43 µs: ns / 1e3 reads back exactly)."""
    return dict(ph="X", name=name, pid=1, tid=tid, ts=start_ns / 1e3, dur=dur_ns / 1e3)


def _flow(ph: str, fid: int, tid: int, at_ns: int, **more) -> dict:
    return dict(ph=ph, id=fid, name="n", cat="c", pid=1, tid=tid, ts=at_ns / 1e3, **more)


def test_11_flows_bind_as_the_ui_binds_chromes(tmp_path):
    """'s' to the innermost slice holding its time, 'f' with bp 'e' likewise, without it to the
    next slice to begin; a 't' in between chains three slices; ends with no slice, one end only,
    or both on one slice are said."""
    t = _sm_table([0, 1])
    x, f = _x, _flow
    rows = [
        x("outer", 1, 1_000, 9_000),
        x("inner", 1, 2_000, 2_000),
        x("b_first", 2, 1_000, 500),
        x("b_next", 2, 5_000, 500),
        x("c", 3, 2_600, 300),
        f("s", 1, 1, 2_500),  # inside inner, inside outer: inner
        f("t", 1, 3, 2_700),  # c
        f("f", 1, 2, 3_000),  # no bp: the next slice to begin on thread 2 (b_next)
        f("s", 2, 1, 1_100),  # outer only
        f("f", 2, 2, 1_200, bp="e"),  # b_first holds it
        f("s", 3, 9, 1_000),  # a thread with no slice: no end to bind
        f("f", 3, 2, 5_100, bp="e"),
        f("s", 4, 1, 9_500),  # one end only (Kineto's window cut the other)
        f("s", 5, 1, 2_100),  # both ends on inner
        f("f", 5, 1, 2_200, bp="e"),
    ]
    base = 1_700_000_000_000_000_000
    doc = {"baseTimeNanoseconds": base, "traceEvents": rows}
    out = tmp_path / "m.perfetto-trace"
    merge_torch_trace(doc, [t], out, offset_ns=0)
    r = _read(out)
    arrows = [((a[1], a[2] - base), (b[1], b[2] - base)) for a, b in r.flows]
    assert sorted(arrows) == sorted(
        [
            (("inner", 2_000), ("c", 2_600)),
            (("c", 2_600), ("b_next", 5_000)),
            (("outer", 1_000), ("b_first", 1_000)),
        ]
    )
    about = " ".join(_root(r).description.split())
    assert "flow ends ('s') with no slice to bind to (1)" in about
    # id 4, and id 3 whose 's' was not bound
    assert "flows with one end, the other outside torch's window (2)" in about
    assert "flows with both ends on one slice (1)" in about


def test_11_what_cannot_be_drawn_is_said_and_early_rows_put_at_the_start(tmp_path):
    t = back_to_back_table(ORIGINS[2])
    doc = kineto_doc(t)
    base = doc["baseTimeNanoseconds"]
    ours = int(t.rows["start_ns"].min()) + SKEW_NS
    early = (ours - MAX_LEAD_NS - 10**9 - base) / 1e3  # more than a day before our programs
    doc["traceEvents"] += [
        dict(ph="X", name="no time", pid=11, tid=11, ts=float("nan"), dur=1.0),
        dict(ph="X", name="no length", pid=11, tid=11, ts=1.0, dur=float("inf")),
        dict(ph="X", name="at its base", pid=11, tid=11, ts=early, dur=1.0),
    ]
    out = tmp_path / "m.perfetto-trace"
    merge_torch_trace(doc, [t], out)
    r = _read(out)
    about = " ".join(_root(r).description.split())
    assert (
        "left out of torch's trace: 'B' rows, a phase not drawn (1); 'E' rows, a phase not "
        "drawn (1); 'X' rows without a finite duration (1); 'X' rows without a finite ts (1)"
    ) in about
    assert "torch rows more than a day before our programs, put at the trace's start (1)" in about
    (s,) = [s for s in _torch_slices(r) if s[0] == "at its base"]
    assert s[1] == r.origin and r.origin == min(
        ts for slices in r.slices.values() for _, ts, _ in slices
    )


def test_11_merge_torch_writes_by_the_extension_and_refuses_others(tmp_path, capsys):
    t = back_to_back_table(ORIGINS[1])
    t.save(tmp_path / "auto.npz")
    (tmp_path / "torch.json").write_text(json.dumps(kineto_doc(t)))
    args = ["merge", str(tmp_path / "auto.npz"), "--torch", str(tmp_path / "torch.json"), "-o"]
    assert main([*args, str(tmp_path / "m.perfetto-trace")]) == 0
    assert _programs(_read(tmp_path / "m.perfetto-trace")) == _host_programs(t)
    assert main([*args, str(tmp_path / "m.json.gz")]) == 0
    assert main([*args, str(tmp_path / "m.txt")]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and ".perfetto-trace" in err and ".json" in err
    assert not (tmp_path / "m.txt").exists()


def test_11_the_recorded_h200_run_as_its_run_writes_it(tmp_path):
    """examples/recordings/one_gpu: the trace `run --torch` writes (torch_parts.merge_rank of
    the file's table and the torch trace inside it), and `merge auto.npz -o X.perfetto-trace`
    of the file alone the same: torch's rows and flows at their ns, 132 SMs in order."""
    doc = torch_parts.read(ONE_GPU)
    out = tmp_path / "auto.torch.perfetto-trace"
    torch_parts.merge_rank(doc, load(ONE_GPU), out)
    r = _read(out)
    assert _torch_slices(r) == _doc_slices(doc)
    ends = Counter()
    for e in doc["traceEvents"]:
        if e.get("ph") in ("s", "f"):
            ends[(e["cat"], e["id"])] += 1
    assert len(r.flows) == sum(1 for n in ends.values() if n == 2)
    sms = [d.name for d in r.top_level() if " · SM " in d.name]
    assert sms == [f"GPU 0 · SM {s}" for s in range(132)]
    assert main(["merge", ONE_GPU, "-o", str(tmp_path / "again.perfetto-trace")]) == 0
    again = _read(tmp_path / "again.perfetto-trace")
    assert _torch_slices(again) == _torch_slices(r) and _programs(again) == _programs(r)


@pytest.mark.parametrize(
    "flag, written",
    [("--torch", "auto.torch.perfetto-trace"), ("--torch-json", "auto.torch.json.gz")],
)
def test_11_run_writes_perfetto_and_chrome_json_on_request(tmp_path, monkeypatch, flag, written):
    """`sm-profiler run --torch` (a stand-in for auto mode's region, fake_run's) writes the
    Perfetto trace; `--torch-json`, torch.profiler on as with --torch, Chrome JSON instead."""
    pytest.importorskip("torch")
    from fake_run import FakeRegion, patch_auto

    from sm_profiler.auto_mode import torch_profiler

    t = back_to_back_table(ORIGINS[2])
    doc = kineto_doc(t)
    options = {}

    class TorchFake(FakeRegion):
        def captures(self):
            return t

        def torch_trace(self):
            return doc

    patch_auto(TorchFake, monkeypatch.setattr)
    import sm_profiler

    made = sm_profiler.auto
    monkeypatch.setattr(sm_profiler, "auto", lambda *a, **kw: options.update(kw) or made())
    monkeypatch.setattr(torch_profiler, "check_torch_profiler", lambda: None)
    (tmp_path / "s.py").write_text("pass\n")
    out = tmp_path / "o"
    assert main(["run", flag, "--out", str(out), "--", str(tmp_path / "s.py")]) == 0
    assert options["torch_profiler"] is True
    assert written in os.listdir(out) and len([f for f in os.listdir(out) if ".torch." in f]) == 1
    if written.endswith(".perfetto-trace"):
        assert _torch_slices(_read(out / written)) == _doc_slices(doc)
    else:
        with gzip.open(out / written) as f:
            assert {"kernel", "cpu_op"} <= {e.get("cat") for e in json.load(f)["traceEvents"]}
