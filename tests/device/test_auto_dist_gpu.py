"""Auto mode under torchrun on two GPUs (issue 29): DDP and FSDP2 with torch.compile, each rank
recording its own GPU; each rank's launches in the steps it recorded equal CUPTI's launches of
that rank in the same steps (names, grids, one record per program); rank 0 merges every rank
into one report and one trace. Run with -s to see the report."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from collections import Counter

import numpy as np
import pytest
import torch
from repo_paths import SUPPORT

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(
        not torch.cuda.is_available() or torch.cuda.device_count() < 2, reason="needs 2 GPUs"
    ),
]


def _torchrun(
    port: int, out, run_options: list[str], mode: str, compile_mode: str, script_args=None
):
    """`sm-profiler run` of auto_dist_train.py on 2 GPUs under torchrun."""
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2"]
    cmd += ["--master_port", str(port), "-m", "sm_profiler", "run", *run_options]
    cmd += ["--out", str(out), "--", os.path.join(SUPPORT, "auto_dist_train.py")]
    cmd += [mode, compile_mode, *(script_args or [str(out)])]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=400)


def _cupti_launches(path) -> Counter:
    """(kernel name, grid) -> launches, of the Triton kernels in a torch.profiler trace."""
    doc = json.loads(open(path).read())
    out = Counter()
    for e in doc["traceEvents"]:
        if e.get("cat") == "kernel" and e["name"].startswith("triton"):
            out[(e["name"], tuple(e["args"]["grid"]))] += 1
    return out


@pytest.mark.parametrize(
    "mode, compile_mode",
    [("ddp", "default"), ("fsdp2", "default"), ("ddp", "reduce-overhead")],
)
def test_torchrun_every_rank_records_its_launches_and_rank0_merges(tmp_path, mode, compile_mode):
    from sm_profiler.export.auto_job import MERGED_TRACE
    from sm_profiler.wire.capture import load

    out = tmp_path / "prof"
    out.mkdir()
    port = 29500 + hash((mode, compile_mode)) % 1000
    r = _torchrun(port, out, ["--steps", "2-4", "--width", "100"], mode, compile_mode)
    print(r.stdout[-4000:])
    assert r.returncode == 0, r.stderr[-4000:]
    assert "merged 2 of 2 ranks" in r.stdout
    for rank in (0, 1):
        table = load(out / f"auto.rank{rank}.npz")
        assert [int(s["rank"]) for s in table.sessions] == [rank]
        assert [int(s["gpu"]) for s in table.sessions] == [rank]  # its own GPU, not cuda:0
        L = table.launches
        assert set(L["step"].tolist()) == {2, 3, 4}
        names = table.kernel_names()
        ours = Counter(
            (names[k], (int(x), int(y), int(z)))
            for k, x, y, z in zip(L["kernel"], L["grid_x"], L["grid_y"], L["grid_z"], strict=True)
        )
        theirs = _cupti_launches(out / f"cupti.rank{rank}.json")
        assert ours == theirs, (rank, ours - theirs, theirs - ours)
        # One record per program: every launch holds its whole grid.
        assert (L["rows"] == L["grid_x"] * L["grid_y"] * L["grid_z"]).all()
        sms = table.sessions[0]["sm_count"]
        assert (table.rows["sm"] >= 0).all() and (table.rows["sm"] < sms).all()
        assert table.counts()["dropped"] == 0
    report = (out / "auto_stats.txt").read_text()
    assert "2 GPUs of 2 ranks" in report and "per rank (2 ranks" in report
    # Issue 57: each rank wrote its summary; the job's report from them is rank 0's, of every
    # rank's records joined, line for line.
    cmd = [sys.executable, "-m", "sm_profiler", "stats", str(out), "--width", "100"]
    from_summaries = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert from_summaries.stdout == report, from_summaries.stderr[-2000:]
    assert "no summary" not in from_summaries.stderr
    assert (out / MERGED_TRACE).stat().st_size > 0  # the job's trace (Perfetto)
    # The same ranks as Chrome JSON (merge -o), read here without the perfetto package.
    from sm_profiler.cli import main

    assert main(["merge", str(out), "-o", str(out / "ranks.json.gz")]) == 0
    doc = json.loads(gzip.open(out / "ranks.json.gz").read())
    procs = {e["args"]["name"] for e in doc["traceEvents"] if e.get("name") == "process_name"}
    assert {p.split(" · ")[0] for p in procs if " · SM" in p} == {"GPU 0", "GPU 1"}
    ts = np.array([e["ts"] for e in doc["traceEvents"] if e.get("ph") == "X"], float)
    assert ts.max() - ts.min() < 60e6  # one time axis: the ranks' steps within a minute


def test_ranks_option_profiles_some_ranks_only(tmp_path):
    out = tmp_path / "prof"
    out.mkdir()
    r = _torchrun(29801, out, ["--ranks", "1", "--steps", "2-4"], "ddp", "default")
    assert r.returncode == 0, r.stderr[-4000:]
    names = sorted(p.name for p in out.iterdir() if p.name.startswith("auto"))
    assert names == [
        "auto.rank1.npz",
        "auto.rank1.npz.summary.json",  # its summary (issue 57)
        "auto.rank1_stats.txt",
        "auto.ranks.perfetto-trace",
        "auto_stats.txt",
    ]


def test_a_rank_torchrun_stops_keeps_what_it_recorded(tmp_path):
    # Issue 42: rank 1 raises at step 6; rank 0 blocks in that step's all-reduce until torchrun
    # stops it with SIGTERM (SIGKILL 30 s later). Rank 0 wrote nothing before.
    import time

    from sm_profiler.wire.capture import load

    out = tmp_path / "prof"
    out.mkdir()
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2"]
    cmd += ["--master_port", "29811", "-m", "sm_profiler", "run", "--steps", "2-3"]
    cmd += ["--out", str(out), "--", os.path.join(SUPPORT, "auto_dist_kill.py")]
    t0 = time.monotonic()
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    took = time.monotonic() - t0
    print(f"job ended after {took:.1f} s\n", r.stderr[-3000:])
    assert r.returncode != 0
    assert "rank 1 fails at step 6" in r.stderr
    assert "SIGTERM" in r.stderr  # rank 0 says it was stopped and writes
    for rank in (0, 1):
        table = load(out / f"auto.rank{rank}.npz")
        L = table.launches
        assert set(L["step"].tolist()) == {2, 3}, (rank, set(L["step"].tolist()))
        assert (L["rows"] == L["grid_x"] * L["grid_y"] * L["grid_z"]).all()
        assert table.counts()["unwritten"] == 0 and table.counts()["dropped"] == 0
        sms = table.sessions[0]["sm_count"]
        assert (table.rows["sm"] < sms).all() and (
            table.rows["end_ns"] >= table.rows["start_ns"]
        ).all()
        assert [int(s["rank"]) for s in table.sessions] == [rank]
        assert (out / f"auto.rank{rank}_stats.txt").exists()
    # Both ranks recorded the same launches of steps 2-3 (DDP: one program).
    a, b = (load(out / f"auto.rank{k}.npz") for k in (0, 1))
    assert a.num_launches == b.num_launches > 0


def test_torchrun_torch_every_rank_writes_torch_rows_with_its_programs(tmp_path):
    """Issue 45: `torchrun ... sm-profiler run --torch --steps 5-7`: per rank and for the job, one
    Chrome JSON trace of torch.profiler's CPU ops and CUPTI kernels (NCCL's and cuBLAS's among
    them) with our per-SM programs; ProfilerStep#N are the steps recorded; each report's share
    seen is CUPTI's, computed here from the kernel rows alone; `merge DIR` of the rank files
    copied elsewhere (another node's way) gives the job's trace with torch's rows again."""
    import shutil

    from torch_trace_check import (
        check_rank_trace,
        cupti_share,
        cupti_steps,
        median,
        processes,
        read_json,
        report_share,
    )

    from sm_profiler.cli import main
    from sm_profiler.export.auto_torch_parts import RANKS_TORCH_TRACE
    from sm_profiler.wire.capture import load

    out = tmp_path / "prof"
    out.mkdir()
    opts = ["--torch-json", "--steps", "5-7", "--width", "100"]
    r = _torchrun(29831, out, opts, "ddp", "default", ["none", "9"])
    print(r.stdout[-6000:])
    assert r.returncode == 0, r.stderr[-4000:]
    assert "merged 2 of 2 ranks" in r.stdout
    names_of, per_rank = {}, {}
    for rank in (0, 1):
        table = load(out / f"auto.rank{rank}.npz")
        assert set(table.launches["step"].tolist()) == {5, 6, 7}
        names = {table.kernel_names()[k] for k in set(table.launches["kernel"].tolist())}
        names_of[rank] = names
        doc = read_json(out / f"auto.rank{rank}.torch.json.gz")
        check_rank_trace(doc, names, [5, 6, 7], gpu=rank)
        nccl = {e["name"] for e in doc["traceEvents"] if e.get("cat") == "kernel"}
        assert any("nccl" in n.lower() for n in nccl), sorted(nccl)[:20]
        shown, steps, gpus = report_share((out / f"auto.rank{rank}_stats.txt").read_text())
        assert (steps, gpus) == (3, 1)
        assert shown == pytest.approx(cupti_share(doc, names), abs=0.051), rank
        per_rank[rank] = cupti_steps(doc, names)

    def check_job(path):
        doc = read_json(path)
        procs = processes(doc)
        for rank in (0, 1):
            mine = {p for p, n in procs.items() if n.startswith(f"rank {rank} · ")}
            assert mine, procs
            assert any(n.startswith(f"GPU {rank} · SM ") for n in procs.values())
            kernels = {
                e["name"]
                for e in doc["traceEvents"]
                if e.get("cat") == "kernel" and e["pid"] in mine
            }
            assert any("nccl" in n.lower() for n in kernels)
            steps = sorted(
                e["name"]
                for e in doc["traceEvents"]
                if e["pid"] in mine and str(e.get("name", "")).startswith("ProfilerStep#")
            )
            assert steps == ["ProfilerStep#5", "ProfilerStep#6", "ProfilerStep#7"]
        ts = [e["ts"] for e in doc["traceEvents"] if e.get("ph") == "X"]
        assert max(ts) - min(ts) < 60e6  # one time axis

    check_job(out / RANKS_TORCH_TRACE)
    # The job's share: per step, both GPUs' instrumented time over their spans summed.
    shown, steps, gpus = report_share((out / "auto_stats.txt").read_text())
    assert (steps, gpus) == (3, 2)
    both = [
        (per_rank[0][n][0] + per_rank[1][n][0]) / (per_rank[0][n][1] + per_rank[1][n][1])
        for n in (5, 6, 7)
    ]
    assert shown == pytest.approx(100 * median(both), abs=0.051)
    # Several nodes, no shared filesystem: the rank files alone, copied together.
    copied = tmp_path / "copied"
    copied.mkdir()
    for rank in (0, 1):
        shutil.copy(out / f"auto.rank{rank}.npz", copied)
    assert main(["merge", str(copied), "-o", str(copied / RANKS_TORCH_TRACE)]) == 0
    check_job(copied / RANKS_TORCH_TRACE)
    # And as Perfetto, merge's default (issue 56, item 11): each rank's torch rows beside its SMs.
    from trace_readers import read_trace

    from sm_profiler.export.auto_torch_parts import RANKS_TORCH_PERFETTO

    assert main(["merge", str(copied)]) == 0
    tops = [d.name for d in read_trace((copied / RANKS_TORCH_PERFETTO).read_bytes()).top_level()]
    for rank in (0, 1):
        assert any(n.startswith(f"GPU {rank} · CPU · ") for n in tops), tops
        assert any(n.startswith(f"GPU {rank} · SM ") for n in tops), tops
