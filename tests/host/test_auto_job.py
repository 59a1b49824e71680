"""Auto mode under torchrun on the CPU (sm_profiler/export/auto_job.py, script.py): each rank's
files under its own name, the first profiled rank merging them after a bounded wait, `merge DIR`
and `stats DIR` for ranks of several nodes, and the per-rank report."""

from __future__ import annotations

import os
import time

import pytest
from auto_inputs import AUTO_T0, TableRegion, table_of, two_kernels

from sm_profiler.auto_mode import script
from sm_profiler.cli import main
from sm_profiler.errors import ConfigError
from sm_profiler.export import auto_job as jobs
from sm_profiler.report.auto_report import format_report


class RankRegion(TableRegion):
    """What AutoProfiler gives after a region on one rank: its table (a rank's records)."""

    def __init__(self, rank: int, slower_ns: int = 0):
        recs = [
            (t + (slower_ns if k == 2 else 0) * (i % 2), d + (slower_ns if k == 2 else 0), *rest)
            for i, (t, d, *rest) in enumerate(two_kernels())
            for k in [rest[2]]
        ]
        super().__init__(table_of(recs))
        self.table.sessions[0].update(rank=rank, world_size=2, host=f"node{rank}")


def _job(rank, world=2, local_world=None):
    return jobs.Job(rank, world, rank % (local_world or world), local_world or world)


def test_torchrun_environment_names_each_rank_and_its_node():
    env = {"RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2"}
    job = jobs.Job.from_env(env)
    assert job.several and job.stem() == "auto.rank3" and job.node_ranks() == [2, 3]
    assert jobs.Job.from_env({}).stem() == "auto"
    with pytest.raises(ConfigError, match="RANK=5 is outside WORLD_SIZE=4"):
        jobs.Job.from_env({"RANK": "5", "WORLD_SIZE": "4"})
    with pytest.raises(ConfigError, match="WORLD_SIZE='two' is not a number"):
        jobs.Job.from_env({"WORLD_SIZE": "two"})


def test_ranks_option_is_checked_against_the_job():
    job = _job(0, 4)
    assert jobs.parse_ranks("3, 0", job) == [0, 3]
    assert jobs.parse_ranks(None, job) == [0, 1, 2, 3]
    for bad, why in (
        ("4", "rank 4 is not in this job of 4 ranks"),
        ("a,b", "separated by commas"),
        (",", "at least one"),
    ):
        with pytest.raises(ConfigError, match=why):
            jobs.parse_ranks(bad, job)


def test_each_rank_writes_its_own_files_and_the_first_merges_them(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("SM_PROFILER_MERGE_TIMEOUT_S", "5")
    out = str(tmp_path / "prof")
    # Rank 1 finishes first; rank 0 then finds its file and merges.
    script.write_rank_outputs(RankRegion(1, slower_ns=200), out, 100, _job(1), [0, 1])
    assert sorted(os.listdir(out)) == [
        "auto.rank1.npz",
        "auto.rank1.npz.summary.json",  # what stats DIR and advise DIR read (issue 57)
        "auto.rank1_stats.txt",
    ]
    script.write_rank_outputs(RankRegion(0), out, 100, _job(0), [0, 1])
    names = sorted(os.listdir(out))
    assert names == sorted(
        [
            "auto.rank0.npz",
            "auto.rank0.npz.summary.json",
            "auto.rank0_stats.txt",
            "auto.rank1.npz",
            "auto.rank1.npz.summary.json",
            "auto.rank1_stats.txt",
            "auto_stats.txt",
            jobs.MERGED_TRACE,
        ]
    )
    text = capsys.readouterr().out
    assert "merged 2 of 2 ranks" in text
    report = (tmp_path / "prof" / "auto_stats.txt").read_text()
    assert "8 launches of 2 kernels" in report and "2 GPUs of 2 ranks" in report
    # Rank 1's gemm launches are 200 ns longer each: it is the straggler, gemm the difference.
    flat = " ".join(report.split())
    assert "slowest: rank 1" in flat and "most of the difference: gemm +" in flat
    # The job's trace, as the Perfetto UI orders it: GPU by GPU, each its root then its SMs.
    from trace_readers import read_trace

    r = read_trace((tmp_path / "prof" / jobs.MERGED_TRACE).read_bytes())
    assert [d.name for d in r.top_level()] == [
        "GPU 0 · triton_poi_fused_add_0, gemm",
        *[f"GPU 0 · SM {s}" for s in range(4)],
        "GPU 1 · triton_poi_fused_add_0, gemm",
        *[f"GPU 1 · SM {s}" for s in range(4)],
    ]


def test_a_missing_rank_is_waited_for_a_bounded_time_and_named(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("SM_PROFILER_MERGE_TIMEOUT_S", "0.5")
    out = str(tmp_path / "prof")
    t0 = time.monotonic()
    script.write_rank_outputs(RankRegion(0), out, 100, _job(0), [0, 1])
    assert time.monotonic() - t0 < 10
    err = capsys.readouterr().err
    assert "no file from rank 1" in err and f"sm-profiler merge {out}" in err
    assert "4 launches of 2 kernels" in open(os.path.join(out, "auto_stats.txt")).read()


def test_an_earlier_runs_rank_file_is_never_merged(tmp_path, monkeypatch):
    monkeypatch.setenv("SM_PROFILER_MERGE_TIMEOUT_S", "0.2")
    out = tmp_path / "prof"
    out.mkdir()
    earlier = RankRegion(1)
    earlier.table.metadata["job"] = dict(jobs.job_identity(), run_id="an-earlier-run")
    earlier.save(out / "auto.rank1.npz")  # written just now, but of another run

    def ours(path):
        return jobs.same_run(jobs.job_identity(), jobs.file_identity(path))

    found = jobs.wait_for(str(out), [0, 1], ours, 0.2)
    assert 1 not in found


def test_merge_and_stats_of_a_folder_copied_from_several_nodes(tmp_path, capsys):
    out = tmp_path / "prof"
    out.mkdir()
    for r in (0, 1):
        RankRegion(r, slower_ns=100 * r).save(out / f"auto.rank{r}.npz")
    assert main(["merge", str(out)]) == 0
    assert (out / jobs.MERGED_TRACE).stat().st_size > 0
    assert "2 ranks" in capsys.readouterr().out
    assert main(["stats", str(out), "--width", "80"]) == 0
    text = capsys.readouterr().out
    assert "per rank (2 ranks" in text and all(len(x) <= 80 for x in text.splitlines())
    assert main(["stats", str(tmp_path)]) == 2
    assert "holds no auto.rank*.npz" in capsys.readouterr().err


def test_stats_of_a_folder_of_captures_names_the_files_to_give(tmp_path, capsys):
    # Issue 46, item 10: `sm-profiler stats` of the demo's folder said only that it held no
    # auto.rank*.npz files.
    from captures import tiny_capture

    (tmp_path / "notes.txt").write_text("not a capture")
    for name in ("demo_capture.npz", "more.smp"):
        tiny_capture().save(tmp_path / name)
    assert main(["stats", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err == (
        f"sm-profiler: error: {str(tmp_path)!r} holds no auto.rank*.npz (or auto.npz) files, the "
        "files of `sm-profiler run`; it holds capture files demo_capture.npz, more.smp: give one "
        f"as the file, e.g. {tmp_path / 'demo_capture.npz'}\n"
    )
    assert main(["stats", str(tmp_path / "demo_capture.npz")]) == 0


def test_a_single_rank_report_has_no_rank_section():
    assert "per rank" not in format_report(table_of(two_kernels()).decode(), width=80)


def test_run_leaves_unlisted_ranks_plain_and_writes_nothing(tmp_path, monkeypatch, capsys):
    # Rank 1 of 2 with --ranks 0: the script runs (no region, no GPU needed), nothing written.
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    (tmp_path / "s.py").write_text("open('ran', 'w').write('yes')\n")
    assert main(["run", "--ranks", "0", "--out", "prof", "--", "s.py"]) == 0
    assert (tmp_path / "ran").read_text() == "yes" and not (tmp_path / "prof").exists()
    assert main(["run", "--ranks", "2", "--", "s.py"]) == 2
    assert "rank 2 is not in this job of 2 ranks" in capsys.readouterr().err


def test_rank_tables_line_up_on_the_host_clock():
    a, b = RankRegion(0).table, RankRegion(1).table
    a.sessions[0]["clock"] = [{"offset_ns": 1000, "error_ns": 50, "host_ns": 0}]
    b.sessions[0]["clock"] = [
        {"offset_ns": 5000, "error_ns": 10, "host_ns": 0},
        {"offset_ns": 4000, "error_ns": 90},
    ]
    merged = jobs.merged_table([a, b])
    first = {int(s["rank"]): s for s in merged.sessions}
    assert first[0]["clock_applied"] and first[1]["clock_applied"]
    starts = {
        r: int(merged.launches["start_ns"][merged.launches["session"] == i].min())
        for i, r in enumerate(merged.ranks().tolist())
    }
    # Same device times; rank 1's GPU clock runs 4 µs further ahead of the host's.
    assert starts[0] - starts[1] == 4000
    assert starts[0] == AUTO_T0 - 1000  # the tightest sample (error 10 ns) is the one used
