"""Hostile input of the job's trace (`merge DIR`, sm_profiler/export/job_trace.py; issue 57, item
3): ranks that are not there, budgets too small, options that do not apply. Each gets one line
naming the problem and the fix, and nothing is written."""

from __future__ import annotations

import os

import pytest
from auto_inputs import job_folder

from sm_profiler.cli import main
from sm_profiler.export import auto_job as jobs


def _error(capsys, folder, *args) -> str:
    """The one line `merge` says on stderr where it fails (exit status 2), having written no
    trace, not even a temporary one."""
    before = set(os.listdir(folder))
    assert main(["merge", str(folder), *map(str, args)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert set(os.listdir(folder)) == before
    return err


@pytest.fixture
def job(tmp_path):
    job_folder(tmp_path)  # 12 ranks, rank 7 slow
    return tmp_path


def test_3_ranks_naming_a_rank_with_no_file_names_it_and_the_ranks_there(job, capsys):
    err = _error(capsys, job, "--ranks", "0,5,17")
    assert "holds no file of rank 17; its ranks are 0-11" in err
    assert "--ranks '0,5,x': give rank numbers" in _error(capsys, job, "--ranks", "0,5,x")


def test_3_a_budget_too_small_for_one_rank_says_what_one_rank_takes(job, capsys):
    err = _error(capsys, job, "--all-ranks", "--max-mb", "0.001")
    assert "rank 7 alone takes" in err and "drawn in full, more than --max-mb 0.001" in err
    assert "raise --max-mb to" in err
    # With the other ranks as counters: their room is kept first, and said.
    err = _error(capsys, job, "--max-mb", "0.001")
    assert "the other 9 ranks' busy-SM counters need" in err and "raise --max-mb to" in err


def test_3_ranks_in_full_past_the_budget_name_those_that_fit(job, capsys):
    # A budget that holds the counters' room and the first two ranks in full (7, 5: slowest
    # first) but not the third.
    from sm_profiler.export.job_trace import MB, write_job_trace

    files = jobs.folder_files(str(job))
    info = write_job_trace(files, job / "probe.perfetto-trace")
    os.remove(job / "probe.perfetto-trace")
    size = info["full_bytes"]
    assert list(size) == [7, 5, 0]
    mb = (info["counters_room"] + size[7] + size[5] + size[0] // 2) / MB
    err = _error(capsys, job, "--max-mb", mb)
    assert f"the 3 ranks drawn in full do not fit in --max-mb {mb:g} with" in err
    assert "ranks 7, 5 take" in err and "draw fewer (--ranks 7,5) or raise --max-mb to" in err


@pytest.mark.parametrize("mb", ["0", "-1", "nan", "inf"])
def test_3_a_budget_that_is_no_size_is_refused(job, capsys, mb):
    err = _error(capsys, job, "--max-mb", mb)
    assert f"--max-mb {float(mb)}: give a size in MB above 0, e.g. 100" in err


def test_3_options_that_do_not_apply_are_refused(job, capsys, tmp_path):
    assert "give one" in _error(capsys, job, "--ranks", "1", "--all-ranks")
    err = _error(capsys, job, "-o", tmp_path / "job.json", "--ranks", "1")
    assert "--ranks chooses the ranks of a run's folder merged to a .perfetto-trace" in err


def test_3_a_missing_rank_is_named_in_one_line_and_the_others_merged(tmp_path, capsys):
    job_folder(tmp_path, skip=(3,))
    assert main(["merge", str(tmp_path)]) == 0
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("note: no file of rank 3 (a job of 12 ranks)")
    assert "copy the missing auto.rankN.npz files into the folder" in err
    from trace_readers import has_perfetto, read_trace

    if has_perfetto():
        r = read_trace((tmp_path / jobs.MERGED_TRACE).read_bytes())
        assert any("no file of rank 3" in d.description for d in r.top_level())


def test_3_a_rank_that_recorded_nothing_is_not_the_fastest_and_draws_if_asked(tmp_path, capsys):
    from auto_inputs import table_of

    job_folder(tmp_path, ranks=4, slow=1)
    table_of([], session={"rank": 4, "world_size": 5}).save(tmp_path / "auto.rank4.npz")
    assert main(["merge", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "rank 0 (fastest" in out and "2 ranks (3-4)" in out
    assert main(["merge", str(tmp_path), "--ranks", "4"]) == 0  # before: a ValueError
    assert "in full: rank 4 (asked for)" in capsys.readouterr().out


def test_3_a_file_that_names_no_rank_numbered_as_another_is_refused(tmp_path, capsys):
    # auto.rank1.npz's sessions name no rank (its file name's is taken), auto.rank0.npz's say 1.
    from auto_inputs import AUTO_T0, table_of

    table_of([(AUTO_T0, 100, 0, 1, 1, 0, 0, 0)], session={"rank": 1}).save(
        tmp_path / "auto.rank0.npz"
    )
    t = table_of([(AUTO_T0, 100, 0, 1, 1, 0, 0, 0)])
    del t.sessions[0]["rank"]
    t.save(tmp_path / "auto.rank1.npz")
    err = _error(capsys, tmp_path)
    assert "auto.rank0.npz and auto.rank1.npz are both rank 1" in err


def test_3_align_is_honoured_and_barrier_refused(job, capsys):
    assert main(["merge", str(job), "--align", "none"]) == 0
    assert "aligned by none" in capsys.readouterr().out
    assert "--align barrier: a run's folder is aligned by" in _error(
        capsys, job, "--align", "barrier"
    )
