"""Hostile inputs of the job's answer from summaries (issue 57, Done-when: "a summary that
disagrees with its records, summaries of several runs, a missing rank"; and a summary of a
newer version, or damaged): each one clear line naming the file and the fix, no traceback, and
the answer never taken from a summary that is not of the file beside it."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from rank_folders import RUN, rank_table, write_rank_folder

from sm_profiler.cli import main
from sm_profiler.wire.summary_file import SUMMARY_VERSION, summary_path

T0 = 1_700_000_000_000_000_000


@pytest.fixture
def folder(tmp_path):
    """Three ranks of one run at real clock readings, each with its summary."""
    path = tmp_path / "run"
    write_rank_folder(path, ranks=3, origin_ns=T0)
    assert main(["summarize", str(path)]) == 0
    return path


def _fails(capsys, *args) -> str:
    """The one line `sm-profiler ARGS` says on stderr, exiting 2."""
    assert main([str(a) for a in args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("sm-profiler: error: ") and err.count("\n") == 1, err
    return err


def _edit(path, change) -> None:
    doc = json.loads(open(path).read())
    change(doc)
    with open(path, "w") as f:
        json.dump(doc, f)


@pytest.mark.parametrize("command", ["stats", "advise"])
def test_1_a_rank_file_written_again_after_its_summary_is_refused_saying_how_to_rebuild_it(
    folder, capsys, command
):
    """Its size differs: the summary is of an earlier recording, never read as this one's."""
    rank1 = folder / "auto.rank1.npz"
    capsys.readouterr()
    rank_table(1, 3, T0, steps=5).save(rank1)  # a later run of rank 1, one step more
    err = _fails(capsys, command, folder)
    assert f"{summary_path(rank1)} disagrees with its records" in err
    assert f"auto.rank1.npz has {os.path.getsize(rank1):,}" in err
    assert f"sm-profiler summarize {rank1}" in err


def test_1_a_rank_file_of_the_same_size_but_other_columns_is_refused(folder, capsys):
    """Same size, one program's time changed: its zip directory's CRCs differ."""
    rank0 = folder / "auto.rank0.npz"
    table = rank_table(0, 3, T0)
    table.rows["end_ns"] = np.asarray(table.rows["end_ns"]).copy()
    table.rows["end_ns"][5] += 7
    size = os.path.getsize(rank0)
    table.save(rank0)
    assert os.path.getsize(rank0) == size
    capsys.readouterr()
    err = _fails(capsys, "stats", folder)
    assert "disagrees with its records: auto.rank0.npz's columns are not those it summarizes" in err
    assert f"sm-profiler summarize {rank0}" in err


def test_1_a_summary_whose_steps_are_not_its_records_is_refused(folder, capsys):
    """Its step list edited: it says which steps each holds."""
    path = summary_path(folder / "auto.rank2.npz")
    _edit(path, lambda d: d.update(steps=[0, 1, 2]))
    capsys.readouterr()
    err = _fails(capsys, "advise", folder, "--json")
    assert "it lists steps 0-2, auto.rank2.npz holds steps 0-3" in err


def test_2_summaries_of_several_runs_in_one_folder_are_refused(folder, capsys):
    """Rank 1's file and summary of another run (torchrun's run id): one line naming both
    runs, before any answer."""
    other = rank_table(1, 3, T0)
    other.metadata["job"] = dict(RUN, run_id="r58")
    other.save(folder / "auto.rank1.npz")
    assert main(["summarize", str(folder / "auto.rank1.npz")]) == 0
    capsys.readouterr()
    err = _fails(capsys, "stats", folder)
    assert "these files are of 2 runs, not one: run r57" in err and "run r58" in err


def test_3_a_missing_rank_is_named_and_the_answer_is_of_the_ranks_found(folder, capsys):
    """WORLD_SIZE 3, rank 1's files gone: a note names it; the answer is over ranks 0 and 2."""
    os.remove(folder / "auto.rank1.npz")
    os.remove(summary_path(folder / "auto.rank1.npz"))
    capsys.readouterr()
    assert main(["stats", str(folder)]) == 0
    got = capsys.readouterr()
    note = [line for line in got.err.splitlines() if "no file" in line]
    assert note == [
        f"note: rank 1 of the job's 3 (WORLD_SIZE) has no file in {folder}: this is the "
        "answer of the 2 ranks found; copy the missing ranks' auto.rankN.npz (or their "
        ".summary.json) here for the whole job"
    ]
    assert "per rank (2 ranks" in got.out
    assert main(["advise", str(folder), "--json"]) == 0
    notes = json.loads(capsys.readouterr().out)["notes"]
    assert any("rank 1 of the job's 3 (WORLD_SIZE) has no file" in n for n in notes)


def test_4_a_summary_of_a_newer_version_is_refused_saying_what_to_do(folder, capsys):
    path = summary_path(folder / "auto.rank0.npz")
    v = SUMMARY_VERSION
    _edit(path, lambda d: d.update(summary_version=v + 1))
    capsys.readouterr()
    err = _fails(capsys, "stats", folder)
    assert f"{path} is a summary of version {v + 1}, newer than this sm_profiler reads ({v})" in err
    assert f"upgrade sm_profiler, or rebuild it with `sm-profiler summarize {folder}" in err


def test_4_a_summary_of_an_earlier_version_is_refused_saying_to_rebuild_it(
    folder, capsys, monkeypatch
):
    """Its numbers are an earlier analysis's: never joined with this one's."""
    import sm_profiler.wire.summary_file as summary_file

    v = SUMMARY_VERSION
    monkeypatch.setattr(summary_file, "SUMMARY_VERSION", v + 1)  # as a later sm_profiler reads
    monkeypatch.setenv("SM_PROFILER_WORKERS", "1")  # read here, where the patch is
    capsys.readouterr()
    err = _fails(capsys, "advise", folder)
    path = summary_path(folder / "auto.rank0.npz")
    assert f"{path} is a summary of version {v}, made by an earlier sm_profiler" in err
    assert f"rebuild it with `sm-profiler summarize {folder / 'auto.rank0.npz'}`" in err


@pytest.mark.parametrize(
    "damage, says",
    [
        (lambda d: d["launches"]["start_ns"].__setitem__(0, "x"), "not a list of numbers"),
        (lambda d: d["launches"]["kernel"].__setitem__(0, -1), "kernel number lies outside"),
        (lambda d: d["launches"]["session"].__setitem__(0, 9), "session number lies outside"),
        (lambda d: d["report"]["waves"].pop(), "has 23 values, not 24"),
        (lambda d: d["launches"]["step"].__setitem__(0, 9), "not its launches' steps"),
        (lambda d: d.pop("advice"), "KeyError"),
        (lambda d: d["launches"]["end_ns"].__setitem__(0, 0), "ends before it starts"),
        (lambda d: d["long_programs"].update(launches=[99]), "long-program launch number"),
    ],
)
def test_5_a_damaged_summary_is_refused_saying_what_and_how_to_rebuild_it(
    folder, capsys, damage, says
):
    path = summary_path(folder / "auto.rank2.npz")
    _edit(path, damage)
    capsys.readouterr()
    err = _fails(capsys, "advise", folder)
    assert f"{path} is damaged (" in err and says in err, err
    assert f"sm-profiler summarize {folder / 'auto.rank2.npz'}" in err


def test_5_a_summary_that_is_not_json_or_not_ours_is_refused(folder, capsys):
    path = summary_path(folder / "auto.rank0.npz")
    with open(path, "w") as f:
        f.write("{not json")
    capsys.readouterr()
    assert f"cannot read the summary {path}" in _fails(capsys, "stats", folder)
    with open(path, "w") as f:
        json.dump({"kind": "something else"}, f)
    assert "is not a rank summary sm_profiler wrote" in _fails(capsys, "stats", folder)


def test_summarize_refuses_a_file_of_the_manual_ops(tmp_path, capsys):
    from captures import tiny_capture

    from sm_profiler.wire.capture import save_many

    path = tmp_path / "manual.npz"
    save_many([tiny_capture()], path)
    err = _fails(capsys, "summarize", path)
    assert "holds captures of the manual ops, not an auto-mode recording" in err
    assert not os.path.exists(summary_path(path))


def test_3_ranks_left_out_by_run_ranks_are_not_missing(tmp_path, capsys):
    """`run --ranks 0,2` of a job of 3: rank 1 wrote nothing on purpose; no note. Rank 2's
    files gone: it is named, as one of the ranks profiled."""
    folder = tmp_path / "run"
    folder.mkdir()
    for r in (0, 2):
        table = rank_table(r, 3, T0)
        table.metadata["profiled_ranks"] = [0, 2]  # as run --ranks 0,2 writes it
        table.save(folder / f"auto.rank{r}.npz")
    assert main(["stats", str(folder)]) == 0
    assert "no file" not in capsys.readouterr().err
    os.remove(folder / "auto.rank2.npz")
    assert main(["stats", str(folder)]) == 0
    assert (
        f"note: rank 2 of the 2 profiled (run --ranks 0, 2) has no file in {folder}"
        in capsys.readouterr().err
    )


def test_a_workers_setting_that_is_not_a_count_is_refused(folder, capsys, monkeypatch):
    monkeypatch.setenv("SM_PROFILER_WORKERS", "two")
    capsys.readouterr()
    err = _fails(capsys, "stats", folder)
    assert "SM_PROFILER_WORKERS='two' is not a number of processes: give 1 or more" in err
    monkeypatch.setenv("SM_PROFILER_WORKERS", "1")
    assert main(["advise", str(folder)]) == 0
