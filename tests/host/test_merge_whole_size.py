"""A merge of every rank's records into one file, refused before anything is read or written
where it would not fit in memory (issue 57: a job's answer never from every rank's records in one
machine's memory): `sm-profiler merge DIR -o X.json` of a big job, and the job's torch trace that
rank 0 of `sm-profiler run --torch` writes at the end, which then leaves the ranks' torch traces
in their files and makes the job's report from the summaries."""

from __future__ import annotations

import os

import pytest
from rank_folders import write_rank_folder

from sm_profiler.cli import main
from sm_profiler.export import auto_job as jobs


@pytest.fixture
def folder(tmp_path):
    write_rank_folder(tmp_path / "run", ranks=3, origin_ns=1_700_000_000_000_000_000)
    return tmp_path / "run"


def _files_bytes(folder) -> int:
    return sum(os.path.getsize(p) for p in jobs.rank_paths([folder]))


def test_the_estimate_is_the_files_times_the_formats_measured_peak(folder, monkeypatch):
    files = _files_bytes(folder)
    paths = jobs.rank_paths([folder])
    monkeypatch.setattr(jobs, "memory_bytes", lambda: 2 * 37 * files)  # JSON fits, just
    assert jobs.whole_merge_refusal(paths, "x.json") is None
    monkeypatch.setattr(jobs, "memory_bytes", lambda: 2 * 37 * files - 2)
    why = jobs.whole_merge_refusal(paths, "x.json.gz")
    assert "3 recordings" in why and "Chrome JSON: about 37x the files" in why
    assert jobs.whole_merge_refusal(paths, "x.perfetto-trace") is None  # 6x
    monkeypatch.setattr(jobs, "memory_bytes", lambda: 0)  # unknown: never refused
    assert jobs.whole_merge_refusal(paths, "x.json") is None


def test_merge_of_a_job_too_big_to_hold_is_refused_before_anything_is_written(
    folder, tmp_path, monkeypatch, capsys
):
    monkeypatch.setattr(jobs, "memory_bytes", lambda: 20 * _files_bytes(folder))
    out = tmp_path / "job.json"
    capsys.readouterr()
    assert main(["merge", str(folder), "-o", str(out)]) != 0
    text = " ".join(capsys.readouterr().err.split())
    assert "would take about" in text and "more than half of the" in text
    assert "sm-profiler merge DIR -o job.perfetto-trace" in text
    assert "SM_PROFILER_MERGE_ANY_SIZE=1 merges whole anyway" in text
    assert not out.exists()
    # The job trace (Perfetto, one rank read at a time) is what it points at: written.
    assert main(["merge", str(folder), "-o", str(tmp_path / "job.perfetto-trace")]) == 0
    monkeypatch.setenv("SM_PROFILER_MERGE_ANY_SIZE", "1")
    assert main(["merge", str(folder), "-o", str(out)]) == 0 and out.exists()
