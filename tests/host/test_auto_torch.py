"""`sm-profiler run --torch` / `sm_profiler.auto(torch_profiler=True)` on the CPU (issue 45):
torch.profiler driven by our steps (its CPU activity works without a GPU: the step numbering and
the windows are real), its trace inside each rank file, the per-rank and job traces merged with
it, `merge DIR` of copied rank files, the report's share from CUPTI rows, and the hostile cases
(a rank without a torch trace, steps that disagree, a damaged member, no GPU).
tests/device/test_auto_torch_gpu.py and test_auto_dist_gpu.py run it on GPUs."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import zipfile

import numpy as np
import pytest
from auto_inputs import AUTO_T0, TorchRegion, table_of
from captures import cupti_doc

from sm_profiler.auto_mode import script
from sm_profiler.cli import main
from sm_profiler.errors import ConfigError
from sm_profiler.export import auto_job as jobs
from sm_profiler.export import auto_torch_parts as torch_parts
from sm_profiler.report.coverage import report_share, torch_coverage
from sm_profiler.wire.auto_schedule import Schedule

torch = pytest.importorskip("torch")
from torch.profiler import ProfilerActivity  # noqa: E402

from sm_profiler.auto_mode.torch_profiler import TorchSteps, check_torch_profiler  # noqa: E402

CPU = [ProfilerActivity.CPU]


def _profiler_steps(doc) -> list[int]:
    return sorted(
        int(e["name"].split("#")[1])
        for e in doc["traceEvents"]
        if str(e.get("name", "")).startswith("ProfilerStep#")
    )


def _marks(doc) -> list[int]:
    """The steps whose `mark k` record_function torch.profiler recorded."""
    return sorted(
        int(e["name"].split()[1])
        for e in doc["traceEvents"]
        if str(e.get("name", "")).startswith("mark ")
    )


def _run_steps(schedule: str, n: int, activities=CPU):
    """TorchSteps on `schedule` over n steps of a loop, each marked by a record_function; the
    step advances inside an 'Optimizer.step' range, as an optimizer's post hook does."""
    s = Schedule.parse(schedule)
    steps = TorchSteps(s.records, activities=activities)
    steps.start()
    x = torch.randn(32, 32)
    for k in range(n):
        with torch.profiler.record_function(f"mark {k}"):
            x = (x @ x).tanh()
        with torch.profiler.record_function("Optimizer.step#SGD.step"):
            x = x * 0.5
            steps.step()
    # After n steps the loop is in step n (its ProfilerStep#n, empty, ends with the region).
    return steps, steps.finish(), [k for k in range(n + 1) if s.records(k)]


# -- torch.profiler on our steps ----------------------------------------------------------------


@pytest.mark.parametrize(
    "schedule, n",
    [
        ("5-7", 10),
        ("0-2", 5),  # step 0 recorded: no warm-up step before it
        ("wait=1,warmup=1,active=2,repeat=2,skip_first=1", 12),  # two windows, one trace
        ("5-7", 6),  # the run ends inside the window: steps 5 and 6 (begun, empty)
        ("wait=2,active=1", 9),  # repeats until the run ends
    ],
)
def test_torch_profiler_records_our_recorded_steps_numbered_as_ours(schedule, n):
    steps, doc, recorded = _run_steps(schedule, n)
    assert steps.notes == []
    assert _profiler_steps(doc) == recorded
    assert _marks(doc) == [k for k in recorded if k < n]  # nothing of the steps in between
    assert isinstance(doc["baseTimeNanoseconds"], int)
    # Each step's ops inside its ProfilerStep#N range, which nests with nothing on its thread.
    windows = {
        int(e["name"].split("#")[1]): (e["ts"], e["ts"] + e["dur"])
        for e in doc["traceEvents"]
        if str(e.get("name", "")).startswith("ProfilerStep#")
    }
    for e in doc["traceEvents"]:
        if str(e.get("name", "")).startswith("mark "):
            lo, hi = windows[int(e["name"].split()[1])]
            assert lo <= e["ts"] and e["ts"] + e["dur"] <= hi + 1e-3
    _assert_nested(doc)
    assert not any("sm_profiler.step" in str(e.get("name")) for e in doc["traceEvents"])


def _assert_nested(doc) -> None:
    """On every thread, complete events nest: none begins inside another and ends after it."""
    by_thread: dict = {}
    for e in doc["traceEvents"]:
        if e.get("ph") == "X":
            by_thread.setdefault((e["pid"], e["tid"]), []).append((e["ts"], e["ts"] + e["dur"]))
    for rows in by_thread.values():
        stack: list[float] = []
        for a, b in sorted(rows, key=lambda r: (r[0], -r[1])):
            while stack and stack[-1] <= a + 1e-3:  # back to back within torch's 1 ns rounding
                stack.pop()
            assert not stack or b <= stack[-1] + 1e-3, (a, b, stack[-1])
            stack.append(b)


def test_no_recorded_step_gives_no_trace():
    steps, doc, recorded = _run_steps("20-22", 5)
    assert doc is None and recorded == []


def test_a_torch_profiler_that_fails_mid_run_is_switched_off_and_said(monkeypatch):
    s = Schedule.parse("2-3")
    steps = TorchSteps(s.records, activities=CPU)
    steps.start()
    original = type(steps._prof).step
    calls = []

    def failing(self):
        calls.append(self.step_num)
        if self.step_num == 1:
            raise RuntimeError("CUPTI gave up")
        return original(self)

    monkeypatch.setattr(type(steps._prof), "step", failing)
    for _ in range(5):
        steps.step()  # never raises into the user's step
    assert steps.finish() is None
    assert len(steps.notes) == 1 and "failed at step 2" in steps.notes[0]
    assert "CUPTI gave up" in steps.notes[0] and calls == [0, 1]


def test_the_windows_of_a_repeating_schedule_are_one_trace_on_the_first_base():
    from sm_profiler.auto_mode.torch_profiler import combine

    meta = {"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "python"}}
    a = {"baseTimeNanoseconds": 1000, "traceEvents": [dict(meta, ts=1.0), {"ph": "X", "ts": 2.0}]}
    b = {"baseTimeNanoseconds": 3000, "traceEvents": [dict(meta, ts=9.0), {"ph": "X", "ts": 2.0}]}
    doc = combine([a, b])
    assert doc["baseTimeNanoseconds"] == 1000
    assert [e["ts"] for e in doc["traceEvents"]] == [1.0, 2.0, 4.0]  # b's row 2 µs later


def test_torch_needs_cuda_and_no_other_profiler_said_before_anything_runs(tmp_path, monkeypatch):
    if not torch.cuda.is_available():
        with pytest.raises(ConfigError, match="torch sees no CUDA device"):
            check_torch_profiler()
    check_torch_profiler(cuda=False)
    with torch.profiler.profile(activities=CPU):
        with pytest.raises(ConfigError, match="already running"):
            check_torch_profiler(cuda=False)
    with pytest.raises(ConfigError, match="torch_profiler must be True or False"):
        import sm_profiler

        sm_profiler.auto(torch_profiler="yes")


def test_run_torch_without_a_gpu_is_refused_before_anything_is_written(
    tmp_path, monkeypatch, capsys
):
    from sm_profiler.auto_mode import session

    monkeypatch.setattr(session, "check_can_run", lambda: None)  # as if auto mode could run
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    script_path = tmp_path / "s.py"
    script_path.write_text("raise SystemExit('the script must not run')\n")
    out = tmp_path / "out"
    assert main(["run", "--torch", "--out", str(out), "--", str(script_path)]) == 2
    err = capsys.readouterr().err
    assert "torch sees no CUDA device" in err and "must not run" not in err
    assert not out.exists()


def test_the_region_drives_torch_profiler_from_its_own_steps(monkeypatch):
    """AutoProfiler's step hook (prof.step(), optimizer steps) advances torch's steps, and the
    region's end keeps the trace and says which steps it holds (no GPU: the region is entered
    by hand, its binding calls stubbed)."""
    from sm_profiler.auto_mode import binding, session

    monkeypatch.setattr(binding, "set_recording", lambda on: None)
    monkeypatch.setattr(binding, "set_step", lambda *a: None)
    prof = session.AutoProfiler(schedule="3-4", torch_profiler=True)
    prof._torch = TorchSteps(prof._records, activities=CPU)
    session._active.append(prof)
    try:
        prof._torch.start()
        for _ in range(7):
            torch.randn(8, 8).sum()
            prof.step()
        prof._stop_torch()
    finally:
        session._active.remove(prof)
    assert prof.step_num == 7
    assert _profiler_steps(prof._torch_doc) == [3, 4]
    assert prof.metadata["torch_profiler"]["steps"] == [3, 4]
    assert prof.metadata["torch_profiler"]["notes"] == []


# -- a table of steps 5-7 and the CUPTI rows of the same run ----------------------------------

STEPS = (5, 6, 7)
STEP_NS = 10_000
LEAD_NS = 50_000  # the torch trace's rows: ns after its baseTimeNanoseconds
KERNELS = {1: {"name": "triton_a", "num_warps": 4}, 2: {"name": "triton_b", "num_warps": 4}}


def step_table(rank: int = 0, steps=STEPS, world: int = 2):
    """Per step: triton_a (4 programs, 1,030 ns) at 0, triton_b (530 ns) at 3,000 ns."""
    recs, labels = [], {}
    for i, _ in enumerate(steps):
        t0 = AUTO_T0 + i * STEP_NS
        for k, (off, dur, kid) in enumerate([(0, 1000, 1), (3000, 500, 2)]):
            launch = 10 * i + k
            recs += [(t0 + off + 10 * p, dur, p, launch, kid, p, 0, 0) for p in range(4)]
            labels[launch] = (i + 1, 0)
    tags = {str(i + 1): s for i, s in enumerate(steps)}
    session = {"rank": rank, "world_size": world, "gpu": rank, "step_tags": tags}
    return table_of(recs, kernels=KERNELS, labels=labels, session=session)


def step_doc(table, rank: int = 0, steps=STEPS, num_sms: int = 4) -> dict:
    """torch.profiler's trace of the same steps: each launch's CUPTI row (named by its kernel),
    a cuBLAS matmul and an NCCL all-reduce a step, each launched 100 ns before it runs, and
    the ProfilerStep#N annotations."""
    names = table.kernel_names()
    L = table.launches
    rows = []
    for k, s, e in zip(L["kernel"], L["start_ns"], L["end_ns"], strict=True):
        start = int(s) - AUTO_T0 + LEAD_NS
        rows.append(
            dict(name=names[int(k)], start=start, end=start + int(e) - int(s), grid=(4, 1, 1))
        )
    marks = []
    for i, n in enumerate(steps):
        t0 = LEAD_NS + i * STEP_NS
        rows.append(dict(name="nvjet_sm90_gemm", start=t0 + 1500, end=t0 + 2800, grid=(132, 1, 1)))
        rows.append(
            dict(name="ncclDevKernel_AllReduce", start=t0 + 4000, end=t0 + 6000, grid=(2, 1, 1))
        )
        marks.append((n, t0 - 300, t0 + STEP_NS - 400))
    for r in rows:
        r.update(launch=r["start"] - 100, device=rank)
    # torch's clock a little before %globaltimer's values here (on a GPU both are the host's
    # epoch): the offsets stay exact in float64.
    doc = cupti_doc(rows, steps=marks, base_ns=AUTO_T0 - 2_000_000 + 7_000 * rank, num_sms=num_sms)
    doc["deviceProperties"][0]["id"] = rank
    doc["distributedInfo"] = {"rank": rank, "world_size": 2}
    return doc


# Per step: the instrumented union 1,030 + 530 ns of a 10,000 ns period (step 7: of its own
# 6,000 ns span): the median share is 15.6 %.
SHARE = 1560 / STEP_NS


def _json(path) -> dict:
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rb") as f:
        return json.loads(f.read())


def _processes(doc) -> set[str]:
    return {e["args"]["name"] for e in doc["traceEvents"] if e.get("name") == "process_name"}


def test_report_share_is_torch_coverages_for_one_gpu_and_sums_gpus_per_step():
    t = step_table()
    cov = torch_coverage(step_doc(t), ["triton_a", "triton_b"])
    one = report_share([cov])
    assert one["share"] == cov["devices"][0]["share"] == pytest.approx(SHARE)
    assert one["per_step"] == {5: pytest.approx(SHARE), 6: pytest.approx(SHARE), 7: 1560 / 6000}
    assert [u["name"] for u in one["unseen"]] == ["ncclDevKernel_AllReduce", "nvjet_sm90_gemm"]
    # Two GPUs: a step's instrumented time over its spans, summed over both.
    t1 = step_table(1)
    cov1 = torch_coverage(step_doc(t1, 1), ["triton_a"])  # only triton_a counted on GPU 1
    both = report_share([cov, cov1])
    assert both["gpus"] == 2
    assert both["per_step"][5] == pytest.approx((1560 + 1030) / (2 * STEP_NS))
    assert report_share([{"devices": []}]) is None


def test_one_process_writes_its_torch_merged_trace_and_reports_cuptis_share(tmp_path, capsys):
    t = step_table(world=1)
    doc = step_doc(t)
    out = tmp_path / "out"
    script.write_outputs(TorchRegion(t, doc), str(out), 100, torch_json=True)
    names = sorted(os.listdir(out))
    assert names == [
        "auto.npz",
        "auto.npz.summary.json",  # its summary, which stats DIR and advise DIR read (issue 57)
        "auto.perfetto-trace",
        "auto.torch.json.gz",
        "auto_stats.txt",
    ]
    printed = capsys.readouterr().out
    assert "auto.torch.json.gz" in printed
    # The file carries torch's trace, as torch wrote it.
    assert torch_parts.read(out / "auto.npz") == json.loads(json.dumps(doc))
    # The merged trace: torch's rows, our SMs, the unseen kernels on them; steps 5-7.
    merged = _json(out / "auto.torch.json.gz")
    assert _profiler_steps(merged) == [5, 6, 7]
    cats = {e.get("cat") for e in merged["traceEvents"]}
    assert {"kernel", "cuda_runtime", "user_annotation"} <= cats
    assert {f"GPU 0 · SM {s}" for s in range(4)} <= _processes(merged)
    bars = [e for e in merged["traceEvents"] if "CUPTI" in str(e.get("args", {}).get("source"))]
    assert {e["name"].split(" (")[0] for e in bars} == {
        "nvjet_sm90_gemm",
        "ncclDevKernel_AllReduce",
    }
    assert merged["sm_profiler_alignment"]["method"] == "kernels"
    assert merged["sm_profiler_alignment"]["error"]["0"]["max_abs_ns"] == 0
    # The report: the share from CUPTI, the records' own beside it, the largest unseen kernels.
    report = " ".join((out / "auto_stats.txt").read_text().split())
    assert (
        "seen, from CUPTI (torch.profiler, median of 3 steps): instrumented kernels ran 15.6%"
        in report
    )
    assert "ncclDevKernel_AllReduce" in report and "nvjet_sm90_gemm" in report
    assert "by the records alone" in report


def test_torchrun_ranks_write_torch_files_and_the_first_merges_them(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("SM_PROFILER_MERGE_TIMEOUT_S", "5")
    out = str(tmp_path / "prof")
    regions = {r: TorchRegion(step_table(r), step_doc(step_table(r), r)) for r in (0, 1)}
    for r in (1, 0):
        job = jobs.Job(r, 2, r, 2)
        script.write_rank_outputs(regions[r], out, 100, job, [0, 1], torch_json=True)
    assert sorted(os.listdir(out)) == sorted(
        [
            "auto.rank0.npz",
            "auto.rank0.npz.summary.json",
            "auto.rank0.torch.json.gz",
            "auto.rank0_stats.txt",
            "auto.rank1.npz",
            "auto.rank1.npz.summary.json",
            "auto.rank1.torch.json.gz",
            "auto.rank1_stats.txt",
            "auto.ranks.perfetto-trace",
            "auto.ranks.torch.json.gz",
            "auto_stats.txt",
        ]
    )
    printed = capsys.readouterr().out
    assert "auto.ranks.torch.json.gz" in printed and "merged 2 of 2 ranks" in printed
    for r in (0, 1):
        rank_doc = _json(os.path.join(out, f"auto.rank{r}.torch.json.gz"))
        assert _profiler_steps(rank_doc) == [5, 6, 7]
        assert {f"GPU {r} · SM {s}" for s in range(4)} <= _processes(rank_doc)
        text = " ".join(open(os.path.join(out, f"auto.rank{r}_stats.txt")).read().split())
        assert (
            "from CUPTI (torch.profiler, median of 3 steps): instrumented kernels ran 15.6%" in text
        )
    _check_job_trace(os.path.join(out, "auto.ranks.torch.json.gz"))
    job_report = " ".join(open(os.path.join(out, "auto_stats.txt")).read().split())
    assert "median of 3 steps over 2 GPUs): instrumented kernels ran 15.6%" in job_report


def test_a_job_too_big_to_merge_whole_keeps_each_ranks_torch_trace_and_reports_from_summaries(
    tmp_path, capsys, monkeypatch
):
    # Issue 57: rank 0 of `run --torch` joined every rank's records for the job's torch trace,
    # whatever the job's size. Where they would not fit, the ranks' files keep their own, and
    # the job's report comes from the summaries, as without torch traces.
    monkeypatch.setenv("SM_PROFILER_MERGE_TIMEOUT_S", "5")
    monkeypatch.setattr(jobs, "memory_bytes", lambda: 1000)
    out = str(tmp_path / "prof")
    regions = {r: TorchRegion(step_table(r), step_doc(step_table(r), r)) for r in (0, 1)}
    for r in (1, 0):
        job = jobs.Job(r, 2, r, 2)
        script.write_rank_outputs(regions[r], out, 100, job, [0, 1], torch_json=True)
    names = os.listdir(out)
    assert "auto.ranks.torch.json.gz" not in names
    assert {"auto.rank0.torch.json.gz", "auto.rank1.torch.json.gz", "auto_stats.txt"} <= set(names)
    err = " ".join(capsys.readouterr().err.split())
    assert "the ranks' torch traces are not merged: merged whole into" in err
    assert "the job's report is made from the ranks' summaries" in err
    report = " ".join(open(os.path.join(out, "auto_stats.txt")).read().split())
    assert "48 programs on 2 GPUs of 2 ranks" in report


def _check_job_trace(path, ranks=(0, 1)):
    doc = _json(path)
    procs = _processes(doc)
    for r in ranks:
        assert any(p.startswith(f"rank {r} · ") for p in procs), procs
        assert {f"GPU {r} · SM {s}" for s in range(4)} <= procs
    # Each rank's torch rows: its own processes, ProfilerStep#5-7 twice, kernels of both GPUs.
    pid_rank = {}
    for e in doc["traceEvents"]:
        if e.get("name") == "process_name" and e["args"]["name"].startswith("rank "):
            pid_rank[e["pid"]] = int(e["args"]["name"].split()[1])
    steps = sorted(
        (pid_rank[e["pid"]], e["name"])
        for e in doc["traceEvents"]
        if str(e.get("name", "")).startswith("ProfilerStep#")
    )
    assert steps == [(r, f"ProfilerStep#{n}") for r in ranks for n in STEPS]
    nccl = {
        pid_rank[e["pid"]]
        for e in doc["traceEvents"]
        if e.get("cat") == "kernel" and "nccl" in e["name"]
    }
    assert nccl == set(ranks)
    # One time axis: rank 1's torch base is 7 µs after rank 0's, its rows moved by as much
    # (onto the trace's own origin, exactly); and each rank's programs sit on its CUPTI rows.
    origin = doc["baseTimeNanoseconds"]
    assert origin == doc["sm_profiler_time_origin"]["ns"] and origin % 10**9 == 0
    for r in ranks:
        rows = [
            e["ts"]
            for e in doc["traceEvents"]
            if e.get("cat") == "kernel" and e["name"] == "triton_a" and pid_rank[e["pid"]] == r
        ]
        assert origin + round(rows[0] * 1e3) == AUTO_T0 - 2_000_000 + LEAD_NS + 7_000 * r
    assert doc["sm_profiler_alignment"]["ranks"]["0"]["method"] == "kernels"
    # No pid is another's tid, and no two ranks share a thread.
    pids = {e["pid"] for e in doc["traceEvents"]}
    tids = {(e["pid"], e["tid"]) for e in doc["traceEvents"] if "tid" in e}
    assert not {t for _, t in tids} & pids
    return doc


def test_merge_dir_of_rank_files_copied_from_several_nodes_brings_their_torch_rows(
    tmp_path, capsys
):
    """Two nodes, no shared filesystem: each rank's file is all that is copied."""
    copied = tmp_path / "copied"
    copied.mkdir()
    for r in (0, 1):
        node = tmp_path / f"node{r}"
        node.mkdir()
        t = step_table(r)
        TorchRegion(t, step_doc(t, r)).save(node / f"auto.rank{r}.npz")
        shutil.copy(node / f"auto.rank{r}.npz", copied)
    assert main(["merge", str(copied)]) == 0
    printed = " ".join(capsys.readouterr().out.split())
    assert sorted(os.listdir(copied)) == [
        "auto.rank0.npz",
        "auto.rank1.npz",
        "auto.ranks.perfetto-trace",
        "auto.ranks.torch.perfetto-trace",
    ]
    assert "torch.profiler's rows of 2 ranks" in printed
    assert "rank 1: aligned by kernels" in printed and "15.6% of a step" in printed
    # -o NAME.json.gz: the one trace with torch's rows as Chrome JSON; -o .perfetto-trace: as
    # the folder's default is (test_torch_perfetto.py reads those).
    assert main(["merge", str(copied), "-o", str(tmp_path / "job.json.gz")]) == 0
    _check_job_trace(tmp_path / "job.json.gz")
    assert main(["merge", str(copied), "-o", str(tmp_path / "job.perfetto-trace")]) == 0
    same = (tmp_path / "job.perfetto-trace").read_bytes()
    assert same == (copied / "auto.ranks.torch.perfetto-trace").read_bytes()
    # Files given one by one work as the folder does.
    files = [str(copied / f"auto.rank{r}.npz") for r in (0, 1)]
    assert main(["merge", *files, "-o", str(tmp_path / "files.json")]) == 0
    _check_job_trace(tmp_path / "files.json")


def test_merge_dir_where_a_rank_has_no_torch_trace_says_so(tmp_path, capsys):
    d = tmp_path / "prof"
    d.mkdir()
    t0, t1 = step_table(0), step_table(1)
    TorchRegion(t0, step_doc(t0, 0)).save(d / "auto.rank0.npz")
    t1.save(d / "auto.rank1.npz")  # run without --torch, or its trace lost
    assert main(["merge", str(d), "-o", str(d / "torch.json.gz")]) == 0
    err = capsys.readouterr().err
    assert "rank 1's file carries no torch.profiler trace" in err
    doc = _json(d / "torch.json.gz")
    procs = _processes(doc)
    assert {f"GPU {r} · SM {s}" for r in (0, 1) for s in range(4)} <= procs
    assert not any(p.startswith("rank 1 · ") for p in procs)
    assert doc["sm_profiler_alignment"]["ranks"]["1"]["torch"] is False


def test_steps_that_disagree_are_said_and_still_merged(tmp_path, capsys):
    d = tmp_path / "prof"
    d.mkdir()
    for r in (0, 1):
        t = step_table(r)
        doc = step_doc(t, r, steps=(2, 3, 4) if r == 1 else STEPS)  # rank 1's trace: other steps
        TorchRegion(t, doc).save(d / f"auto.rank{r}.npz")
    assert main(["merge", str(d)]) == 0
    err = " ".join(capsys.readouterr().err.split())
    assert "rank 1: torch.profiler's steps (2-4) are not the steps recorded (5-7)" in err
    assert "rank 0:" not in err
    assert (d / "auto.ranks.torch.perfetto-trace").exists()


def test_a_damaged_torch_member_is_a_one_line_error(tmp_path, capsys):
    d = tmp_path / "prof"
    d.mkdir()
    t = step_table(0, world=1)
    t.save(d / "auto.rank0.npz", {torch_parts.MEMBER: b"not gzip at all"})
    assert main(["merge", str(d)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "torch.profiler trace is damaged" in err
    # A member that inflates to JSON but not a trace: the torch trace reader's message.
    t.save(d / "auto.rank0.npz", {torch_parts.MEMBER: gzip.compress(b"[1, 2]")})
    assert main(["merge", str(d)]) == 2
    assert "no traceEvents list" in capsys.readouterr().err


def test_the_member_leaves_the_table_as_it_was(tmp_path):
    t = step_table(0)
    path = tmp_path / "auto.rank0.npz"
    TorchRegion(t, step_doc(t)).save(path)
    from sm_profiler.wire.capture import load

    back = load(path)
    assert back.num_launches == t.num_launches
    assert np.array_equal(back.launches["step"], t.launches["step"])
    with zipfile.ZipFile(path) as z:
        assert f"{torch_parts.MEMBER}.npy" in z.namelist()
    plain = tmp_path / "plain.npz"
    t.save(plain)
    assert torch_parts.read(plain) is None


def test_a_real_cpu_torch_profile_merges_with_a_rank_file(tmp_path, capsys):
    """torch.profiler's own CPU trace (no kernel rows: no CUPTI share) inside a rank file and
    merged: its CPU ops are the rank's processes, named by rank."""
    _, doc, _ = _run_steps("5-7", 9)
    d = tmp_path / "prof"
    d.mkdir()
    for r in (0, 1):
        TorchRegion(step_table(r), doc).save(d / f"auto.rank{r}.npz")
    assert main(["merge", str(d), "-o", str(d / "torch.json.gz")]) == 0
    merged = _json(d / "torch.json.gz")
    procs = _processes(merged)
    assert any(p.startswith("rank 0 · ") for p in procs) and any(
        p.startswith("rank 1 · ") for p in procs
    )
    ops = [e for e in merged["traceEvents"] if e.get("cat") == "cpu_op"]
    assert ops and all(isinstance(e["pid"], int) for e in ops)
