"""`sm-profiler run --torch` and `sm_profiler.auto(torch_profiler=True)` on one GPU (issue 45):
torch.profiler records the steps we record, numbered as ours; the merged trace (Perfetto by
default, read back with trace_readers; with --torch-json Chrome JSON, read here without the
perfetto package) holds CPU ops, CUPTI kernels that are not ours (cuBLAS's
matmuls) and our per-SM programs; the report's share seen equals CUPTI's, computed here from the
trace's kernel rows alone. Run with -s to see the report."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch
from repo_paths import SUPPORT
from torch_trace_check import check_rank_trace, cupti_share, profiler_steps, read_json, report_share

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]


def _run(out, flag: str) -> None:
    """`sm-profiler run FLAG --steps 5-7` of auto_torch_train.py into `out`."""
    cmd = [sys.executable, "-m", "sm_profiler", "run", flag, "--steps", "5-7"]
    cmd += ["--width", "100", "--out", str(out), "--", os.path.join(SUPPORT, "auto_torch_train.py")]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=500)
    print(r.stdout[-6000:])
    assert r.returncode == 0, r.stderr[-4000:]


def test_run_torch_writes_a_perfetto_trace_of_torch_rows_and_our_programs(tmp_path):
    """Issue 56, item 11: by default the merged trace is native Perfetto: every torch row of
    the trace inside auto.npz at its exact ns, its launch -> kernel arrows, SMs in order, the
    window on the recorded steps."""
    pytest.importorskip("perfetto.protos.perfetto.trace.perfetto_trace_pb2")
    from trace_readers import read_trace

    from sm_profiler.export import auto_torch_parts as torch_parts
    from sm_profiler.export.chrome import exact_ns

    out = tmp_path / "prof"
    _run(out, "--torch")
    assert sorted(os.listdir(out)) == [
        "auto.npz",
        "auto.npz.summary.json",  # its summary (issue 57)
        "auto.perfetto-trace",
        "auto.torch.perfetto-trace",
        "auto_stats.txt",
    ]
    doc = torch_parts.read(out / "auto.npz")
    r = read_trace((out / "auto.torch.perfetto-trace").read_bytes())
    base = doc["baseTimeNanoseconds"]
    rows = {
        (e["name"], base + exact_ns(e["ts"]), exact_ns(e["dur"]))
        for e in doc["traceEvents"]
        if e.get("ph") == "X"
    }
    assert rows <= {s for slices in r.slices.values() for s in slices}
    assert any(a[1].startswith("cudaLaunch") or a[1].startswith("cuLaunch") for a, _ in r.flows)
    sms = [int(d.name.split()[-1]) for d in r.top_level() if " · SM " in d.name]
    assert sms == sorted(set(sms)) and len(sms) > 1  # in SM order, each once
    steps = [e for e in doc["traceEvents"] if str(e.get("name")).startswith("ProfilerStep#")]
    first = min(base + exact_ns(e["ts"]) for e in steps) - r.origin
    assert r.window["tracing_started"] <= first < r.window["tracing_disabled"]


def test_run_torch_json_writes_one_trace_of_torch_rows_and_our_programs(tmp_path):
    from sm_profiler.wire.capture import load

    out = tmp_path / "prof"
    _run(out, "--torch-json")
    assert sorted(os.listdir(out)) == [
        "auto.npz",
        "auto.npz.summary.json",  # its summary (issue 57)
        "auto.perfetto-trace",
        "auto.torch.json.gz",
        "auto_stats.txt",
    ]
    table = load(out / "auto.npz")
    assert set(table.launches["step"].tolist()) == {5, 6, 7}
    assert table.metadata["torch_profiler"]["steps"] == [5, 6, 7]
    names = {table.kernel_names()[k] for k in set(table.launches["kernel"].tolist())}
    doc = read_json(out / "auto.torch.json.gz")
    check_rank_trace(doc, names, [5, 6, 7], gpu=0)
    shown, steps, gpus = report_share((out / "auto_stats.txt").read_text())
    assert (steps, gpus) == (3, 1)
    assert shown == pytest.approx(cupti_share(doc, names), abs=0.051)
    print(f"seen from CUPTI: {shown}% (computed here: {cupti_share(doc, names):.3f}%)")
    # The Perfetto UI keeps every slice we wrote (issue 52, item 8): our programs (pids from
    # PID_BASE) and the ProfilerStep#N ranges (STEP_TID); torch's own rows are said, not judged.
    from trace_readers import ui_import

    from sm_profiler.auto_mode.torch_profiler import STEP_TID
    from sm_profiler.export.chrome import PID_BASE

    ui = ui_import(out / "auto.torch.json.gz")
    print(f"the UI's import: {ui.complete_events():,} complete events kept, dropped {ui.stats}")
    ours = [
        d for d in ui.dropped if (isinstance(d[0], int) and d[0] >= PID_BASE) or d[1] == STEP_TID
    ]
    assert not ours, ours[:5]


def test_auto_torch_profiler_in_a_script(tmp_path):
    import io

    from auto_models import Block

    import sm_profiler

    model = Block(256).cuda()
    x = torch.randn(64, 256, device="cuda")
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    with sm_profiler.auto(schedule="2-3", torch_profiler=True) as prof:
        step = torch.compile(model)
        for _ in range(5):
            step(x).float().pow(2).mean().backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            prof.step()
    doc = prof.torch_trace()
    assert profiler_steps(doc) == [2, 3]
    info = prof.merge_torch(tmp_path / "m.json.gz")
    merged = read_json(tmp_path / "m.json.gz")
    names = set(prof.table().kernel_names())
    check_rank_trace(merged, names, [2, 3], gpu=torch.cuda.current_device())
    assert info["coverage"]["devices"][0]["share"] > 0
    text = io.StringIO()
    prof.print_stats(file=text, width=100)
    shown, steps, _ = report_share(text.getvalue())
    assert steps == 2
    assert shown == pytest.approx(100 * info["coverage"]["devices"][0]["share"], abs=0.051)
    # What to fix first: host gaps over every kernel (cuBLAS's matmuls fill some), our launches
    # on CUPTI's clock within the tolerance, the same offset as the merge's.
    from sm_profiler.report.advise import ALIGN_TOLERANCE_NS, advise

    every, alone = advise(prof.table(), cupti=doc), advise(prof.table())
    print("\n".join(every.notes), every.cupti["gpus"])
    assert every.gaps_from == "cupti", every.notes
    g = every.cupti["gpus"][0]
    assert g["fit"]["median_abs_ns"] <= ALIGN_TOLERANCE_NS
    assert g["offset_ns"] == info["offset_ns"]

    def gaps(a):
        return next((f.estimate_ns_per_step for f in a.findings if f.kind == "host_gaps"), 0.0)

    assert gaps(every) <= gaps(alone) + 1
    assert "CUPTI: every kernel" in " ".join(text.getvalue().split())
    # The file carries the trace: merge of the file alone gives the same torch rows.
    prof.save(tmp_path / "auto.npz")
    from sm_profiler.cli import main

    assert main(["merge", str(tmp_path / "auto.npz"), "-o", str(tmp_path / "f.json.gz")]) == 0
    assert profiler_steps(read_json(tmp_path / "f.json.gz")) == [2, 3]


def test_torch_profiler_already_running_is_refused_before_the_region(tmp_path):
    import sm_profiler
    from sm_profiler import ConfigError

    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]):
        with pytest.raises(ConfigError, match="already running"):
            sm_profiler.auto(torch_profiler=True).start()
    from sm_profiler.auto_mode import session

    assert session.current() is None
