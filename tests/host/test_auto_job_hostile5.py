"""Hostile input, round 5 (issue 52): the files of a run folder (export/auto_job.py), as `advise
DIR`, `stats DIR` and `merge DIR` read them. Each test names the item of the issue it keeps
fixed; each failed on the main of 2026-11-29."""

from __future__ import annotations

import pytest
from auto_inputs import table_of, two_kernels

from sm_profiler.cli import main
from sm_profiler.export import auto_job as jobs

HOUR_NS = 3600 * 10**9


def _alone(shift_ns: int, rank=0):
    """A recording of one process (`sm-profiler run` without torchrun: rank 0, no run id),
    steps 3 and 4, `shift_ns` later than the first."""
    recs = [(r[0] + shift_ns, *r[1:]) for r in two_kernels()]
    labels = {5: (1, 0), 6: (1, 0), 9: (2, 0)}
    session = {"step_tags": {"1": 3, "2": 4}} | ({} if rank is None else {"rank": rank})
    t = table_of(recs, labels=labels, session=session)
    if rank is None:
        for s in t.sessions:
            s.pop("rank", None)
    t.metadata["job"] = jobs.job_identity({})
    return t


@pytest.mark.parametrize("command", ["advise", "stats", "merge"])
def test_6_two_recordings_of_rank_0_in_one_folder_are_refused_by_each_command(
    tmp_path, capsys, command
):
    # Two single-process recordings an hour apart, copied into one folder as two ranks' files.
    _alone(0).save(tmp_path / "auto.rank0.npz")
    _alone(HOUR_NS).save(tmp_path / "auto.rank1.npz")
    assert main([command, str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    assert "auto.rank0.npz and auto.rank1.npz both hold rank 0's recording" in err
    assert "of two runs" in err and "folder of their own" in err
    assert not (tmp_path / jobs.MERGED_TRACE).exists()  # refused before anything is written


def test_a_folder_of_a_file_per_rank_is_read_alike_by_each_command(tmp_path, capsys):
    # What item 6's refusal keeps: one file of each rank.
    _alone(0, rank=0).save(tmp_path / "auto.rank0.npz")
    _alone(0, rank=1).save(tmp_path / "auto.rank1.npz")
    assert main(["advise", str(tmp_path), "--json"]) == 0
    assert '"ranks": 2' in capsys.readouterr().out
    assert main(["stats", str(tmp_path)]) == 0
    assert "per rank (2 ranks" in capsys.readouterr().out
    assert main(["merge", str(tmp_path)]) == 0
    assert "2 ranks" in capsys.readouterr().out


def test_files_that_name_no_rank_are_not_compared(tmp_path):
    # What item 6's refusal keeps: sessions without a rank (files written before ranks were
    # named) say nothing to compare.
    _alone(0, rank=None).save(tmp_path / "auto.rank0.npz")
    _alone(0, rank=None).save(tmp_path / "auto.rank1.npz")
    assert len(jobs.load_ranks([tmp_path])) == 2
