"""Hostile input, round 4 (issue 42): auto tables, steps, rank merging and `merge --torch`. Each
test names the item of the issue it keeps fixed; each failed on the main of 2026-11-27."""

from __future__ import annotations

import re

import numpy as np
import pytest
from auto_inputs import AUTO_T0, TableRegion, table_of, two_kernels, write_auto_file
from cli_runs import run_cli

from sm_profiler.errors import CaptureError
from sm_profiler.wire import format as fmt
from sm_profiler.wire.capture import load


def _per_warp_table():
    """Two programs of 4 warps each, recorded per warp."""
    recs = []
    for p in range(2):
        for w in range(4):
            info = 1 | (w << 16) | fmt.AUTO_PER_WARP
            recs.append((AUTO_T0 + 100 * p + w, 90, p, 7, info, p, 0, 0))
    return table_of(recs)


def test_1_launch_rows_that_wrap_when_summed_are_refused(tmp_path):
    table = table_of(two_kernels())  # 4 launches of 4 rows: 16 rows
    rows = np.array([2**62] * 4 + [16], np.int64)  # sums to 16 in int64
    first = (np.cumsum(rows) - rows).astype(np.int64)
    cols = {f"launch_{k}": np.resize(table.launches[k], 5) for k in table.launches}
    cols.update(launch_rows=rows, launch_first_row=first)
    path = tmp_path / "wrap.npz"
    write_auto_file(path, table, columns=cols)
    with pytest.raises(CaptureError, match="a launch holds no rows, or more than the file"):
        load(path)
    r = run_cli("stats", path)  # a separate process: SIGSEGV before
    assert r.returncode == 2 and "damaged auto file" in r.stderr, r.stderr


@pytest.mark.parametrize("num_warps", [10**9, "4 warps", [4], 0, True, 4.5])
def test_2_3_a_kernel_num_warps_no_launch_can_have_is_refused(tmp_path, num_warps):
    path = tmp_path / "warps.npz"
    write_auto_file(
        path, _per_warp_table(), meta=lambda m: m["kernels"][0].update(num_warps=num_warps)
    )
    with pytest.raises(
        CaptureError, match=r"kernel 0's num_warps .* not a whole number in 1\.\.128"
    ):
        load(path)
    r = run_cli("export", path, tmp_path / "out.json", timeout=30)
    assert r.returncode == 2 and "num_warps" in r.stderr and "Traceback" not in r.stderr


def test_4_a_row_warp_past_the_record_field_is_refused(tmp_path):
    table = _per_warp_table()
    warp = table.rows["warp"].astype(np.int32)
    warp[-1] = 2**31 - 1
    path = tmp_path / "warp.npz"
    write_auto_file(path, table, columns={"row_warp": warp})
    with pytest.raises(CaptureError, match=r"a row's warp is outside 0\.\.127"):
        load(path)
    r = run_cli("export", path, tmp_path / "out.json", timeout=30)  # built 2**31 names before
    assert r.returncode == 2 and "warp" in r.stderr


def test_13_a_newer_auto_file_is_refused_naming_both_versions(tmp_path):
    path = tmp_path / "v3.npz"
    write_auto_file(path, table_of(two_kernels()), meta=lambda m: m.update(capture_file_version=3))
    with pytest.raises(
        CaptureError, match="version 3; .*capture files of version 1 and auto files of version 2"
    ):
        load(path)


@pytest.mark.parametrize(
    "column, change, why",
    [
        ("launch_rows", lambda v: np.where(np.arange(len(v)) == 0, 0, v), "holds no rows"),
        ("launch_start_ns", lambda v: v + 1, "start_ns disagrees with its rows"),
        ("launch_end_ns", lambda v: v - 1, "end_ns disagrees with its rows"),
        ("launch_grid_x", lambda v: v * 1000, "grid_x disagrees with its rows"),
        ("launch_gpu", lambda v: v + 3, "gpu is not its session's"),
    ],
)
def test_launches_that_disagree_with_their_rows_are_refused(tmp_path, column, change, why):
    # Decided in issue 42: a launch is its rows, so an empty launch, or one whose times, grid
    # or GPU say other than its rows and session, is a damaged file (no writer makes one).
    table = table_of(two_kernels())
    path = tmp_path / "bad.npz"
    v = np.asarray(table.launches[column[len("launch_") :]]).astype(np.int64)
    write_auto_file(path, table, columns={column: change(v).astype(np.int64)})
    with pytest.raises(CaptureError, match=why):
        load(path)


def test_a_saved_table_still_loads_whole(tmp_path):
    table = table_of(two_kernels())
    path = tmp_path / "ok.npz"
    write_auto_file(path, table)
    back = load(path)
    assert back.num_launches == table.num_launches == 4 and back.num_rows == 16


@pytest.mark.parametrize("steps", ["²", "1-²", "active=²", "٣", "1-٣"])
def test_6_digits_int_refuses_are_not_steps(steps):
    from sm_profiler.errors import ConfigError
    from sm_profiler.wire.auto_schedule import Schedule

    with pytest.raises(ConfigError, match="--steps"):
        Schedule.parse(steps)


def test_6_cli_steps_of_other_digits_is_a_clear_error(tmp_path):
    path = tmp_path / "auto.npz"
    table_of(two_kernels(), step_tag=1, session={"step_tags": {"1": 3}}).save(path)
    for cmd in (
        ["stats", path, "--steps", "²"],
        ["export", path, tmp_path / "o.json", "--steps", "1-²"],
    ):
        r = run_cli(*cmd)
        assert r.returncode == 2 and "--steps" in r.stderr and "Traceback" not in r.stderr, r.stderr


@pytest.mark.parametrize("key", ["RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"])
def test_6_torchrun_numbers_of_other_digits_are_refused(key):
    from sm_profiler.auto_mode.session import rank_info
    from sm_profiler.errors import ConfigError
    from sm_profiler.export.auto_job import Job

    env = {"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "2", key: "²"}
    with pytest.raises(ConfigError, match=f"{key}='²' is not a number"):
        Job.from_env(env)
    saved = dict(__import__("os").environ)
    try:
        __import__("os").environ.update(env)
        info = rank_info()  # no traceback: a value int() refuses is left out
        assert info.get(key.lower(), 0) in (0, 2)
    finally:
        __import__("os").environ.clear()
        __import__("os").environ.update(saved)


def test_7_steps_past_65535_recorded_keep_their_own_numbers():
    # 70,000 recorded steps, one launch each, the last three kept (a ring): each launch carries
    # its own step. Before, every step after the 65,535th got tag 1, mapped to the latest step.
    labels = {100 + s: (s + 1, 0) for s in range(69_997, 70_000)}
    labels[5] = (1, 0)
    recs = [
        (AUTO_T0 + 1000 * i, 100, i, launch, 1, 0, 0, 0)
        for i, launch in enumerate([5, *sorted(labels)[1:]])
    ]
    step_tags = {
        str(t): s + 1000 for t, s in ((1, 0), (69_998, 69_997), (69_999, 69_998), (70_000, 69_999))
    }
    table = table_of(recs, labels=labels, session={"step_tags": step_tags})
    assert table.launches["step"].tolist() == [1000, 70_997, 70_998, 70_999]


def test_7_the_region_numbers_each_recorded_step_once(monkeypatch):
    import sm_profiler
    from sm_profiler.auto_mode import binding, session
    from sm_profiler.wire.auto_areas import Areas

    monkeypatch.setattr(binding, "set_recording", lambda on: None)
    monkeypatch.setattr(binding, "set_step", lambda step_tag, tag: areas.mark(step_tag, tag))
    prof = sm_profiler.auto(ring=True)
    areas = Areas(64, ring=True)
    prof._buffers = {0: {"areas": areas}}
    monkeypatch.setattr(session, "_active", [prof])
    for _ in range(70_010):
        prof.step()
        areas.take(4)  # a launch a step: the ring keeps the last 16
    assert prof._step_tag == 70_010  # steps 1, 2, ... got tags 1, 2, ...: never reused
    assert len(prof._step_tags) <= 1 << 17  # forgotten steps are pruned: memory stays flat
    kept = areas.areas()
    assert len(kept) == 16
    assert [prof._step_tags[int(t)] for t in kept[:, 2]] == list(range(69_995, 70_011))
    words = areas.header_and_areas()
    from sm_profiler.wire.auto_records import read_header

    d = words[fmt.AUTO_HEADER_WORDS :].reshape(-1, 2)
    assert fmt.auto_label_parts(d[:, 1])[0].tolist() == kept[:, 2].tolist()
    assert read_header(np.concatenate([words, np.zeros(64 * 4, np.uint64)]))["areas"] == 16


def test_5_stats_escapes_kernel_names_in_the_kernel_table_and_per_rank_lines(tmp_path):
    from sm_profiler.trace.auto_table import AutoTable

    evil = "evil\x1b[2J\x1b]0;pwned\x07kernel"
    kernels = {1: {"name": evil, "num_warps": 4}, 2: {"name": "gemm", "num_warps": 8}}
    a = table_of(two_kernels(), kernels=kernels)
    b = table_of(two_kernels(), kernels=kernels, session={"rank": 1})
    for rank, t in enumerate((a, b)):
        t.save(tmp_path / f"auto.rank{rank}.npz")
    r = run_cli("stats", tmp_path / "auto.rank0.npz")
    assert r.returncode == 0 and "\x1b" not in r.stdout and "\x07" not in r.stdout
    assert "evil\\x1b[2J" in r.stdout  # the kernel table
    r = run_cli("stats", tmp_path)  # every rank: the per-rank lines name kernels too
    assert r.returncode == 0, r.stderr
    assert "per rank" in r.stdout and "\x1b" not in r.stdout and "\x07" not in r.stdout
    assert len(AutoTable.concat([a, b]).sessions) == 2


def test_8_interleaved_steps_give_each_step_its_own_union():
    from sm_profiler.report.auto_report import step_shares

    # Two streams: step 1's long launch [0, 400) with a short one [300, 350) inside it, step
    # 2's launches [10, 30) and [20, 40) in between: in launch order the steps interleave.
    recs = [
        (AUTO_T0, 400, 0, 1, 1, 0, 0, 0),
        (AUTO_T0 + 10, 20, 1, 2, 1, 0, 0, 0),
        (AUTO_T0 + 20, 20, 2, 3, 1, 0, 0, 0),
        (AUTO_T0 + 300, 50, 3, 4, 1, 0, 0, 0),
    ]
    labels = {1: (1, 0), 2: (2, 0), 3: (2, 0), 4: (1, 0)}
    table = table_of(recs, labels=labels, session={"step_tags": {"1": 1, "2": 2}})
    got = step_shares(table.decode())
    assert got["steps"].tolist() == [1, 2]
    # Step 1: its union is its span (400 of 400: 100 %, was 112 %); step 2: 30 of its 30 ns.
    assert np.allclose(got["share"], [1.0, 1.0]), got["share"]


def test_8_lagging_ranks_with_identical_steps_report_identical_shares():
    from sm_profiler.report.auto_report import step_shares
    from sm_profiler.trace.auto_table import AutoTable

    def rank(r, lag):
        recs, labels = [], {}
        for s in range(2):  # two steps of the same three launches, 1 µs apart
            for k, off in enumerate((0, 150, 400)):
                launch = 10 * s + k
                recs.append((AUTO_T0 + lag + 1000 * s + off, 100, k, launch, 1, 0, 0, 0))
                labels[launch] = (s + 1, 0)
        return table_of(recs, labels=labels, session={"rank": r, "step_tags": {"1": 5, "2": 6}})

    both = AutoTable.concat([rank(0, 0), rank(1, 130), rank(2, 260), rank(3, 777)])
    got = step_shares(both.decode())
    assert got["steps"].tolist() == [5, 6]
    # Each rank: 300 ns busy of its step-5 period (1,000 ns to step 6) and of its step 6 span (500).
    assert np.allclose(got["share"], [0.3, 0.6]), got["share"]
    assert got["span_ns"].tolist() == [500, 500]


def _rank_table(rank, run_id="run-a"):
    from sm_profiler.export import auto_job as jobs

    t = table_of(two_kernels(), session={"rank": rank, "world_size": 3})
    t.metadata["job"] = dict(jobs.job_identity(), run_id=run_id)
    return t


@pytest.mark.parametrize("odd", ["auto.rank01.npz", "auto.rank\u0661.npz", "auto.rank+1.npz"])
def test_9_a_rank_file_of_another_spelling_is_named_not_dropped(tmp_path, odd):
    from sm_profiler.cli import main
    from sm_profiler.export import auto_job as jobs

    for r in (0, 1, 2):
        _rank_table(r).save(tmp_path / f"auto.rank{r}.npz")
    _rank_table(1).save(tmp_path / odd)
    with pytest.raises(CaptureError, match=re.escape(odd) + ".*rename each to auto.rankN.npz"):
        jobs.load_ranks([tmp_path])
    assert main(["stats", str(tmp_path)]) == 2
    # Without it, every launch of the three ranks is read: 3 x 4 launches.
    (tmp_path / odd).unlink()
    assert jobs.merged_table(jobs.load_ranks([tmp_path])).num_launches == 12


def test_10_a_recent_file_of_another_run_is_never_merged(tmp_path, capsys, monkeypatch):
    from sm_profiler.auto_mode import script
    from sm_profiler.export import auto_job as jobs

    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "run-b")
    monkeypatch.setenv("SM_PROFILER_MERGE_TIMEOUT_S", "0.3")
    out = tmp_path / "prof"
    out.mkdir()
    _rank_table(1, run_id="run-a").save(out / "auto.rank1.npz")  # left 30 s ago? a second ago

    region = TableRegion(table_of(two_kernels()))
    script.write_rank_outputs(region, str(out), 100, jobs.Job(0, 2, 0, 2), [0, 1])
    io = capsys.readouterr()
    assert "merged 1 of 2 ranks" in io.out
    assert "rank 1 is of another run" in io.err
    assert jobs.file_identity(str(out / "auto.rank0.npz"))["run_id"] == "run-b"


def test_10_merge_dir_says_when_files_of_several_runs_are_mixed(tmp_path):
    from sm_profiler.cli import main
    from sm_profiler.export import auto_job as jobs

    _rank_table(0, "run-a").save(tmp_path / "auto.rank0.npz")
    _rank_table(1, "run-b").save(tmp_path / "auto.rank1.npz")
    r = run_cli("merge", tmp_path)
    assert r.returncode == 2 and "of 2 runs, not one" in r.stderr and "run-a" in r.stderr
    assert not (tmp_path / jobs.MERGED_TRACE).exists()  # refused before anything is written
    assert main(["stats", str(tmp_path)]) == 2


def test_10_same_run_needs_the_run_id_or_else_the_agent():
    from sm_profiler.export.auto_job import same_run

    a = {"run_id": "u1", "restart": "0", "master": "h:1", "agent": "n0:5:9"}
    assert same_run(a, dict(a, agent="n1:7:3"))  # another node of one run
    assert not same_run(a, dict(a, restart="1"))  # torchrun restarted the workers
    assert not same_run(a, dict(a, run_id="u2")) and not same_run(a, None)
    b = dict(a, run_id="none")  # a static rendezvous: no run id of torchrun's own
    assert same_run(b, dict(b)) and not same_run(b, dict(b, agent="n0:5:10"))


def _torch_doc_and_capture(tmp_path):
    import json

    from captures import cupti_doc, kernel_capture

    doc = cupti_doc([{"name": "a", "start": 0, "end": 10, "launch": 0}], [(1, 0, 100)], num_sms=4)
    cap = tmp_path / "c.smp"
    from sm_profiler.wire.capture import save_many

    save_many([kernel_capture("a")], cap)
    return doc, cap, json


@pytest.mark.parametrize(
    "edit, why",
    [
        (
            lambda d, rows: rows("user_annotation").update(
                name="ProfilerStep#99999999999999999999"
            ),
            "step number",
        ),
        (
            lambda d, rows: rows("user_annotation").update(ts=4.6e15, dur=4e15),
            "outside 0..2\\*\\*63 ns",
        ),
        (lambda d, rows: rows("kernel").update(ts=4.6e15, dur=1e15), "outside 0..2\\*\\*63 ns"),
    ],
)
def test_11_12_torch_times_and_steps_past_int64_are_clear_errors(tmp_path, edit, why):
    doc, cap, json = _torch_doc_and_capture(tmp_path)
    doc["baseTimeNanoseconds"] = 2**62 - 1

    def rows(cat):
        return next(e for e in doc["traceEvents"] if e.get("cat") == cat)

    edit(doc, rows)
    (tmp_path / "t.json").write_text(json.dumps(doc))
    out = tmp_path / "m.json"
    r = run_cli("merge", "--torch", tmp_path / "t.json", cap, "-o", out)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert re.search(why, r.stderr) and "re-export it" in r.stderr, r.stderr
    assert not out.exists()  # refused before anything is written
    from sm_profiler.report.coverage import torch_coverage

    with pytest.raises(CaptureError, match=why):
        torch_coverage(doc, ["a"])  # no "idle -100.0 %" from a wrapped time


def test_merged_traces_carry_the_dropped_records(tmp_path):
    # Decided in issue 42: `merge` (and merge --torch, the job's trace) say what each rank
    # dropped, as `export` does of one trace.
    import gzip
    import json

    from trace_readers import read_trace

    from sm_profiler.cli import main
    from sm_profiler.export import auto_job as jobs

    recs = [(AUTO_T0 + 100 * p, 50, p % 2, 1, 1, p, 0, 0) for p in range(3)]
    recs += [(AUTO_T0 + 2000 + 100 * p, 50, 1, 3, 1, p, 0, 0) for p in range(4)]
    for r in (0, 1):
        t = table_of(recs, capacity=4 if r else 64, session={"rank": r})
        t.metadata["job"] = dict(jobs.job_identity(), run_id="x")
        t.save(tmp_path / f"auto.rank{r}.npz")
    assert main(["merge", str(tmp_path)]) == 0  # the job's trace: Perfetto, said in each root
    roots = [d for d in read_trace((tmp_path / jobs.MERGED_TRACE).read_bytes()).top_level()]
    abouts = [d.description for d in roots if d.description]
    assert len(abouts) == 2
    assert all("records dropped: 4 (rank 0: 0, rank 1: 4)" in a for a in abouts)
    assert main(["merge", str(tmp_path), "-o", str(tmp_path / "m.json.gz")]) == 0
    doc = json.loads(gzip.open(tmp_path / "m.json.gz").read())
    assert doc["sm_profiler_dropped_records"] == {"total": 4, "per_rank": {"0": 0, "1": 4}}
