"""The job's answer from its ranks' summaries (issue 57, items 1 and 2;
sm_profiler/export/job_summaries.py, report/rank_summary.py, wire/summary_file.py): `stats DIR`
and `advise DIR` say, number for number, what the full analysis of every rank's records loaded
and joined says, from a summary of kilobytes a rank; `run` writes each rank's summary and
`sm-profiler summarize FILE` older files'; a rank without one is read from its records."""

from __future__ import annotations

import json
import os

import pytest
from rank_folders import write_rank_folder

from sm_profiler.cli import main
from sm_profiler.export import auto_job as jobs
from sm_profiler.report.advise import advise
from sm_profiler.report.auto_report import format_report
from sm_profiler.wire.summary_file import SUMMARY_VERSION, summary_path

ORIGINS = (0, 10**12, 1_700_000_000_000_000_000)  # clock origins no figure may depend on


def _full(folder, steps=None):
    """The full analysis today's `stats DIR` and `advise DIR` made: every rank's records loaded
    and joined (merged_table), then the report and the advisor over them."""
    table = jobs.merged_table(jobs.load_ranks([folder]))
    if steps is not None:
        table = table.select_steps(steps)
    return table


def _cli(capsys, *args):
    assert main([str(a) for a in args]) == 0
    return capsys.readouterr()


@pytest.mark.parametrize("origin", ORIGINS)
def test_stats_and_advise_of_a_folder_say_from_summaries_what_the_full_analysis_says(
    tmp_path, capsys, origin
):
    """Items 1, 2: four ranks, rank 2 slow, at real clock readings (1.7e18 ns) and at 0: the
    report's every line and advise's every finding, evidence and note (its JSON) are those of
    every rank's records loaded and joined; the slow rank is named with its kernel."""
    folder = tmp_path / "run"
    write_rank_folder(folder, ranks=4, origin_ns=origin, slow_rank=2)
    full = _full(folder)
    want_report = format_report(full.decode(), width=100)
    want_advice = advise(full).to_json(10)
    out = _cli(capsys, "summarize", folder).out
    assert out.count("wrote") == 4 and "auto.rank3.npz.summary.json" in out
    got = _cli(capsys, "stats", folder, "--width", 100)
    assert got.out == want_report and got.err == ""
    assert _cli(capsys, "advise", folder, "--json").out == want_advice + "\n"
    advice = json.loads(want_advice)
    slow = [f for f in advice["findings"] if f["kind"] == "slow_rank"]
    assert slow[0]["rank"] == 2 and slow[0]["evidence"]["kernels"][0]["kernel"] == "gemm_tile"
    assert advice["left_out_steps"] == [0]  # the step that compiled, found over the job
    assert "slowest: rank 2" in " ".join(want_report.split())


def test_the_steps_option_and_a_narrow_report_say_what_the_full_analysis_says(tmp_path, capsys):
    """--steps reads the ranks' records (those steps only), one rank at a time; --width 80."""
    folder = tmp_path / "run"
    write_rank_folder(folder, ranks=3, origin_ns=ORIGINS[2], slow_rank=0)
    _cli(capsys, "summarize", folder)
    full = _full(folder)
    assert _cli(capsys, "stats", folder, "--width", 80).out == format_report(
        full.decode(), width=80
    )
    part = _full(folder, "1-2")
    got = _cli(capsys, "stats", folder, "--width", 100, "--steps", "1-2").out
    assert got == format_report(part.decode(), width=100)
    got = _cli(capsys, "advise", folder, "--json", "--steps", "1-2").out
    assert got == advise(part).to_json(10) + "\n"


def test_stats_and_advise_of_a_folder_with_summaries_never_load_a_ranks_records(
    tmp_path, capsys, monkeypatch
):
    """Item 2: with every rank's summary beside it, no rank's records are loaded (today's
    analysis loaded and joined all of them: 21 MB of memory a rank)."""
    import sm_profiler.wire.capture as capture

    folder = tmp_path / "run"
    write_rank_folder(folder, ranks=3, origin_ns=ORIGINS[2])
    _cli(capsys, "summarize", folder)

    def refuse(path):
        raise AssertionError(f"records loaded: {path}")

    monkeypatch.setattr(capture, "load", refuse)
    monkeypatch.setenv("SM_PROFILER_WORKERS", "1")  # every rank read here, where the patch is
    assert "slowest: rank 1" in " ".join(_cli(capsys, "stats", folder).out.split())
    assert '"slow_rank"' in _cli(capsys, "advise", folder, "--json").out


def test_a_rank_file_without_a_summary_is_read_from_its_records(tmp_path, capsys):
    """Records only where a file has no summary (files recorded before summaries): the same
    answer, and a note saying how to write them."""
    folder = tmp_path / "run"
    write_rank_folder(folder, ranks=3, origin_ns=ORIGINS[1])
    _cli(capsys, "summarize", folder / "auto.rank0.npz", folder / "auto.rank2.npz")
    assert not os.path.exists(summary_path(folder / "auto.rank1.npz"))
    got = _cli(capsys, "stats", folder, "--width", 100)
    assert got.out == format_report(_full(folder).decode(), width=100)
    assert (
        "note: 1 of 3 rank files had no summary" in got.err and "sm-profiler summarize" in got.err
    )
    assert not os.path.exists(summary_path(folder / "auto.rank1.npz"))  # nothing written


def test_a_summary_is_kilobytes_versioned_and_says_the_ranks_own_answer(tmp_path, capsys):
    """Item 1: what a summary holds (docs/format.md, "Rank summaries"): its version, its records
    (size, zip directory, steps), the launches, the rank's own steps, kernels and findings."""
    folder = tmp_path / "run"
    write_rank_folder(folder, ranks=2, origin_ns=ORIGINS[2], slow_rank=1)
    _cli(capsys, "summarize", folder / "auto.rank1.npz")
    path = summary_path(folder / "auto.rank1.npz")
    doc = json.loads(open(path).read())
    assert doc["summary_version"] == SUMMARY_VERSION and doc["kind"] == "sm_profiler.rank_summary"
    rec = doc["records"]
    assert rec["file"] == "auto.rank1.npz" and rec["steps"] == [0, 1, 2, 3]
    assert rec["bytes"] == os.path.getsize(folder / "auto.rank1.npz")
    assert doc["rank"] == 1 and len(doc["launches"]["start_ns"]) == 24
    assert {k["kernel"] for k in doc["per_kernel"]} == {"gemm_tile", "reduce_rows", "add_bias"}
    assert doc["per_step"]["step"] == [0, 1, 2, 3] and doc["per_step"]["compiled"] == [0]
    assert doc["findings"]["findings"][0]["kind"] in ("host_gaps", "tail", "partial_wave")
    assert os.path.getsize(path) < 64 * 1024


def test_run_writes_each_ranks_summary_beside_its_file(tmp_path, monkeypatch):
    """Item 1: at the end of `run`, each rank writes its summary beside its rank file, of it."""
    from auto_inputs import TableRegion
    from rank_folders import rank_table

    from sm_profiler.auto_mode import script
    from sm_profiler.wire.summary_file import read_summary

    monkeypatch.setenv("SM_PROFILER_MERGE_TIMEOUT_S", "0")
    out = str(tmp_path / "prof")
    job = jobs.Job(1, 2, 1, 2)
    region = TableRegion(rank_table(1, 2, ORIGINS[2]))
    script.write_rank_outputs(region, out, 100, job, [0, 1])
    doc = read_summary(summary_path(os.path.join(out, "auto.rank1.npz")))  # checked against it
    assert doc["rank"] == 1 and doc["launches"]["step"][-1] == 3
    assert {"run_id", "restart", "master", "agent"} <= set(doc["metadata"]["job"])  # its run's
    assert doc["metadata"]["profiled_ranks"] == [0, 1]  # the ranks --ranks profiled


def test_a_folder_of_the_ranks_summaries_alone_gives_the_same_answer(tmp_path, capsys):
    """Item 2: the job's answer needs no rank's records: the ranks' summaries copied from their
    nodes into a folder of their own (kilobytes a rank) give what the rank files give."""
    import shutil

    folder, alone = tmp_path / "run", tmp_path / "summaries"
    write_rank_folder(folder, ranks=3, origin_ns=ORIGINS[2], slow_rank=2)
    _cli(capsys, "summarize", folder)
    alone.mkdir()
    for r in range(3):
        shutil.copy(summary_path(folder / f"auto.rank{r}.npz"), alone)
    want = format_report(_full(folder).decode(), width=100)
    assert _cli(capsys, "stats", alone, "--width", 100).out == want
    assert _cli(capsys, "advise", alone, "--json").out == advise(_full(folder)).to_json(10) + "\n"
    assert main(["stats", str(alone), "--steps", "1"]) == 2  # --steps reads records
    assert "--steps reads each rank's records" in capsys.readouterr().err


@pytest.mark.parametrize("summaries", [True, False])
def test_ranks_that_carry_torch_traces_give_what_the_full_analysis_gives(
    tmp_path, capsys, summaries
):
    """`run --torch` rank files: the share seen from CUPTI, host gaps over every kernel and the
    launch-shape findings of the kernels auto mode cannot see inside, from each summary's
    kernel rows of its torch trace (or each rank file's trace read in its worker), as from every
    rank's whole trace read at once."""
    from rank_folders import write_torch_rank_folder

    from sm_profiler.export import auto_torch_parts as torch_parts
    from sm_profiler.report.coverage import report_share, torch_coverage

    folder = tmp_path / "run"
    write_torch_rank_folder(folder, ranks=3, origin_ns=ORIGINS[2], slow_rank=1)
    full = _full(folder)
    docs = torch_parts.stored(str(folder))
    names = torch_parts.instrumented_names(full)
    share = report_share([torch_coverage(d, names) for d in docs.values()])
    want = format_report(full.decode(), width=100, cupti=share, torch_trace=docs)
    want_advice = advise(full, cupti=docs).to_json(10)
    assert json.loads(want_advice)["gaps_from"] == "cupti" and "from CUPTI" in want
    assert '"source": "launch shape"' in want_advice
    if summaries:
        _cli(capsys, "summarize", folder)
    assert _cli(capsys, "stats", folder, "--width", 100).out == want
    assert _cli(capsys, "advise", folder, "--json").out == want_advice + "\n"


def test_the_first_rank_writes_the_jobs_report_from_the_ranks_summaries(tmp_path, monkeypatch):
    """At the end of `run` under torchrun, the first rank's auto_stats.txt comes from the
    summaries the ranks wrote (no rank's records joined with the others'), and is the full
    analysis' report of every rank's records, line for line."""
    from auto_inputs import TableRegion
    from rank_folders import rank_table

    from sm_profiler.auto_mode import script

    monkeypatch.setenv("SM_PROFILER_MERGE_TIMEOUT_S", "5")
    out = tmp_path / "prof"
    real = jobs.load_ranks

    def refuse(paths):
        raise AssertionError(f"every rank's records loaded: {paths}")

    monkeypatch.setattr(jobs, "load_ranks", refuse)
    for r in (1, 0):
        region = TableRegion(rank_table(r, 2, ORIGINS[2], slow=r == 1))
        script.write_rank_outputs(region, str(out), 100, jobs.Job(r, 2, r, 2), [0, 1])
    report = (out / "auto_stats.txt").read_text()
    full = jobs.merged_table(real([str(out)]))
    assert report == format_report(full.decode(), width=100)
    assert "slowest: rank 1" in " ".join(report.split())


@pytest.mark.parametrize("origin", ORIGINS)
def test_diff_of_two_run_folders_says_from_summaries_what_the_full_analysis_says(
    tmp_path, capsys, monkeypatch, origin
):
    """`sm-profiler diff DIR DIR` of two runs of a job (rank 2 slow before, rank 1 after), from
    the ranks' summaries, never a rank's records: the same JSON, finding for finding and kernel
    for kernel, as the diff of every rank's records loaded and joined; text too."""
    import sm_profiler.wire.capture as capture
    from sm_profiler.report.diff import diff, diff_lines

    before, after = tmp_path / "before", tmp_path / "after"
    write_rank_folder(before, ranks=4, origin_ns=origin, slow_rank=2)
    write_rank_folder(after, ranks=4, origin_ns=origin + 10**9, slow_rank=1)
    want = diff(_full(before), _full(after), names=(str(before), str(after)))
    _cli(capsys, "summarize", before)
    _cli(capsys, "summarize", after)

    def refuse(path):
        raise AssertionError(f"records loaded: {path}")

    monkeypatch.setattr(capture, "load", refuse)
    monkeypatch.setenv("SM_PROFILER_WORKERS", "1")  # every rank read here, where the patch is
    got = _cli(capsys, "diff", before, after, "--json")
    assert got.out == want.to_json() + "\n" and got.err == ""
    doc = json.loads(got.out)
    assert any(f["kind"] == "slow_rank" and f["rank"] == 2 for f in doc["findings"])
    text = _cli(capsys, "diff", before, after, "--width", 80).out
    assert text == "\n".join(diff_lines(want, 80)) + "\n"
