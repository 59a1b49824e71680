"""`sm-profiler diff BEFORE AFTER` (sm_profiler/report/diff.py, issue 55, item 3): what changed
per kernel between two auto-mode recordings, the kernels that went, appeared, were renamed or
re-tuned, and for each finding of BEFORE's advice what AFTER recovered against its estimate;
planted defects and their fixes worked out by hand; hostile inputs (two jobs, no common kernels,
a file without steps, a manual capture, a missing file, the same file twice) one clear line or
a clear note each."""

from __future__ import annotations

import json
import os
import re

import advise_inputs as ai
import numpy as np
import pytest
from captures import tiny_capture
from repo_paths import ROOT

from sm_profiler.cli import main
from sm_profiler.errors import ConfigError
from sm_profiler.report.diff import DIFF_VERSION, diff, diff_lines
from sm_profiler.trace.auto_table import AutoTable

# %globaltimer reads about 1.7e18 ns, where a float64 steps by 256 ns.
ORIGINS_NS = (0, 10**12, 17 * 10**17)


def one_wave(steps=3, dur=120, kernel="wave_kernel", period=200):
    """one_point_one_waves' kernel fixed: 10 programs of `dur` ns on 10 SMs (one full wave, each
    program 1.2x the work at dur=120), steps `period` ns apart, as before."""
    out = []
    for k in range(steps):
        t = period * k
        out.append(ai.launch([(sm, t, t + dur) for sm in range(10)], kernel, step=k))
    return ai.make_table(out, sm_count=10)


def back_to_back(steps=3):
    """host_gaps' launches fixed: per step 5 launches of 4 programs of 100 ns, back to back;
    steps 500 ns apart (no gap left)."""
    out = []
    for k in range(steps):
        for j in range(5):
            t = 500 * k + 100 * j
            out.append(ai.launch([(sm, t, t + 100) for sm in range(4)], "tiny_kernel", step=k))
    return ai.make_table(out, sm_count=4)


def rank_launches(durations_ns=(200, 200), steps=3):
    """Per rank, one launch a step of 4 programs (one per SM) of its duration, steps 300 ns
    apart: slow_rank's launches at (100, 300), fixed at (200, 200)."""
    return [
        [
            ai.launch([(sm, 300 * k, 300 * k + dur) for sm in range(4)], "step_kernel", step=k)
            for k in range(steps)
        ]
        for dur in durations_ns
    ]


def even_ranks(steps=3):
    """slow_rank fixed: both ranks run 200 ns a step, steps 300 ns apart."""
    return ai.ranks_table(rank_launches((200, 200), steps))


def _flat(lines: list[str]) -> str:
    """Wrapped lines as one line of words: what they say, whatever the width."""
    return " ".join(" ".join(lines).split())


def with_warps(table, num_warps: int):
    """`table` whose kernels were compiled with `num_warps` warps."""
    kernels = [dict(k, num_warps=num_warps) for k in table.kernels]
    return AutoTable(table.rows, table.launches, kernels, table.sessions, table.metadata)


def _saved(tmp_path, table, name):
    path = tmp_path / name
    table.save(path)
    return str(path)


def _run(capsys, *args) -> tuple[int, str, str]:
    status = main(["diff", *map(str, args)])
    out = capsys.readouterr()
    return status, out.out, out.err


# -- the planted defects and their fixes ------------------------------------------------------------


def test_a_fixed_partial_wave_recovers_what_is_measured_against_its_estimate():
    # BEFORE: 11 programs of 100 ns on 10 SMs, one resident each: the advisor's estimate E =
    # (1 - 1/10) x 100 ns = 90 ns a step. AFTER: 10 programs of 120 ns (one wave, 1.2x the
    # work each): the kernel's time a step goes 200 ns -> 120 ns, R = 80 ns, R / E = 8/9.
    d = diff(ai.one_point_one_waves(), one_wave())
    (f,) = d.findings
    assert (f.kind, f.kernel, f.rank, f.gpu) == ("partial_wave", "wave_kernel", 0, 0)
    assert f.measured == "kernel_time" and f.kernel_after == "wave_kernel"
    assert f.estimate_ns == pytest.approx(90.0)
    assert (f.before_ns, f.after_ns) == (pytest.approx(200.0), pytest.approx(120.0))
    assert f.recovered_ns == pytest.approx(80.0)
    assert f.recovered_over_estimate == pytest.approx(80 / 90)
    text = _flat(diff_lines(d, 80))
    assert "1. partial last wave: wave_kernel" in text
    assert "estimate 90 ns, recovered 80 ns, 89% of it" in text
    assert "its time per step 200 ns → 120 ns" in text


def test_the_planted_case_reads_the_same_in_json_and_through_the_command(tmp_path, capsys):
    b = _saved(tmp_path, ai.one_point_one_waves(), "before.npz")
    a = _saved(tmp_path, one_wave(), "after.npz")
    status, out, err = _run(capsys, b, a, "--json")
    assert status == 0 and err == ""
    doc = json.loads(out)
    assert doc["schema"] == "sm_profiler.diff" and doc["diff_version"] == DIFF_VERSION == 1
    (f,) = doc["findings"]
    assert f["rank_order"] == 1 and f["kind"] == "partial_wave"
    assert f["estimate_ns"] == pytest.approx(90.0) and f["recovered_ns"] == pytest.approx(80.0)
    assert f["recovered_over_estimate"] == pytest.approx(80 / 90)
    (k,) = doc["kernels"]
    assert k["kernel"] == "wave_kernel" and k["change_ns"] == pytest.approx(-80.0)
    assert k["change_share"] == pytest.approx(-0.4)
    assert doc["before"]["steps"] == [0, 1, 2] and doc["after"]["steps"] == [0, 1, 2]
    status, text, _ = _run(capsys, b, a, "--width", "80")
    assert status == 0 and "estimate 90 ns, recovered 80 ns, 89% of it" in text
    assert max(len(line) for line in text.splitlines()) <= 80


def test_fixed_host_gaps_recover_the_step_time():
    # BEFORE: 5 launches of 100 ns 500 ns apart a step, steps 2.5 µs apart: periods 2500, 2500
    # and 2100 (the last: its span), E = (2000 + 2000 + 1600) / 3 of gaps. AFTER: the launches
    # back to back, steps 500 ns apart: periods of 500 ns. R = 7100 / 3 - 500 = E: 100%.
    d = diff(ai.host_gaps(), back_to_back())
    f = d.findings[0]
    assert f.kind == "host_gaps" and f.measured == "step_time" and f.kernel_after is None
    assert f.estimate_ns == pytest.approx(5600 / 3)
    assert (f.before_ns, f.after_ns) == (pytest.approx(7100 / 3), pytest.approx(500.0))
    assert f.recovered_over_estimate == pytest.approx(1.0)
    assert (d.before.step_ns, d.after.step_ns) == (pytest.approx(7100 / 3), pytest.approx(500))


def test_an_evened_slow_rank_is_measured_on_its_own_gpu():
    # BEFORE: rank 1 runs 300 ns a step, rank 0 100 ns: E = 300 - 200 = 100 ns. AFTER: both 200
    # ns, steps still 300 ns apart (the last step's period is its span: 300 -> 200 ns).
    d = diff(ai.slow_rank(), even_ranks())
    f = next(f for f in d.findings if f.kind == "slow_rank")
    assert (f.rank, f.measured) == (1, "step_time")
    assert f.estimate_ns == pytest.approx(100.0)
    assert f.before_ns == pytest.approx(300.0)
    assert f.after_ns == pytest.approx((300 + 300 + 200) / 3)
    assert f.recovered_ns == pytest.approx(100 / 3)
    (k,) = d.kernels  # every GPU summed: 100 + 300 -> 200 + 200 a step
    assert k["before"]["time_ns"] == pytest.approx(400) and k["change_ns"] == pytest.approx(0)
    assert "(rank 1)" in _flat(diff_lines(d, 80))


@pytest.mark.parametrize("origin_ns", ORIGINS_NS[1:])
def test_every_figure_is_the_same_at_every_clock_origin(origin_ns):
    pairs = [
        (ai.one_point_one_waves(), one_wave()),
        (ai.host_gaps(), back_to_back()),
        (ai.slow_rank(), even_ranks()),
    ]
    for before, after in pairs:
        moved = diff(ai.shifted(before, origin_ns), ai.shifted(after, origin_ns + 12_345))
        assert moved.to_json() == diff(before, after).to_json()


# -- per kernel ---------------------------------------------------------------------------------------


def test_per_kernel_changes_per_step_and_per_launch():
    d = diff(ai.one_point_one_waves(), one_wave())
    (k,) = d.kernels
    b, a = k["before"], k["after"]
    assert (b["time_ns"], a["time_ns"]) == (200, 120)
    assert (b["launches"], a["launches"]) == (1, 1)
    assert (b["programs"], a["programs"]) == (11, 10)
    assert (b["waves"], a["waves"]) == (pytest.approx(1.1), pytest.approx(1.0))
    # the last SM (0) ends 100 ns after the median SM; the one wave ends at once
    assert (b["tail_ns"], a["tail_ns"]) == (100, 0)
    # 10 SMs x 200 ns of which 11 x 100 ns busy: 45% idle; one full wave: none
    assert (b["idle_pct"], a["idle_pct"]) == (pytest.approx(45.0), pytest.approx(0.0))
    assert k["retuned"] == {"grid": [[11, 1, 1], [10, 1, 1]]}
    text = _flat(diff_lines(d, 80))
    assert "programs 11 → 10; waves 1.10 → 1.00; idle% 45 → 0; tail 100 ns → 0 ns" in text
    assert "re-tuned: grid 11x1x1 → 10x1x1" in text


def test_a_kernel_re_tuned_to_more_warps_says_so():
    before = with_warps(ai.one_point_one_waves(), 4)
    after = with_warps(ai.one_point_one_waves(), 8)
    (k,) = diff(before, after).kernels
    assert k["retuned"] == {"num_warps": [[4], [8]]} and k["change_ns"] == 0
    assert "re-tuned: num_warps 4 → 8" in _flat(diff_lines(diff(before, after), 80))


def test_steps_of_different_counts_compare_by_their_means():
    # 3 steps against 7 of the same kernel: the same time a step, 3 and 7 steps said.
    d = diff(one_wave(steps=3), one_wave(steps=7))
    (k,) = d.kernels
    assert k["change_ns"] == 0 and k["after"]["launches"] == 1
    text = _flat(diff_lines(d, 80))
    assert "BEFORE: 3 steps (0-2)" in text and "AFTER: 7 steps (0-6)" in text


def test_a_step_that_compiled_is_left_out_of_the_means():
    # AFTER's step 0 runs the kernel for the first time and takes 100x: left out, as the
    # advisor leaves it out.
    slow = ai.launch([(sm, 0, 20_000) for sm in range(10)], "wave_kernel", step=0)
    rest = [
        ai.launch([(sm, t, t + 120) for sm in range(10)], "wave_kernel", step=k)
        for k, t in ((1, 20_000), (2, 20_200), (3, 20_400))
    ]
    d = diff(ai.one_point_one_waves(), ai.make_table([slow, *rest], sm_count=10))
    assert d.after.steps == [1, 2, 3] and d.after.left_out == [0]
    assert d.kernels[0]["after"]["time_ns"] == 120
    assert "1 step that compiled left out" in _flat(diff_lines(d, 80))


def test_kernels_that_went_appeared_and_were_renamed():
    # "old" went; "triton_poi_fused_add_0" is "triton_poi_fused_add_1" renamed (alike names,
    # another grid); "alpha" became "omega" (the same grid, 8 programs, once a step); "new"
    # appeared (a grid of its own).
    def table(names_grids):
        out = []
        for k in range(2):
            t = 10_000 * k
            for j, (name, n) in enumerate(names_grids):
                s = t + 1000 * j
                out.append(ai.launch([(p % 4, s, s + 100) for p in range(n)], name, step=k))
        return ai.make_table(out, sm_count=4)

    before = table([("old", 3), ("triton_poi_fused_add_0", 4), ("alpha", 8), ("same", 2)])
    after = table([("triton_poi_fused_add_1", 6), ("omega", 8), ("same", 2), ("new", 5)])
    d = diff(before, after)
    assert [k["kernel"] for k in d.kernels] == ["same"]
    assert set(d.went) == {"old", "triton_poi_fused_add_0", "alpha"}
    assert set(d.appeared) == {"triton_poi_fused_add_1", "omega", "new"}
    renamed = {(r["before"], r["after"]): r["why"] for r in d.renamed}
    assert renamed == {
        ("triton_poi_fused_add_0", "triton_poi_fused_add_1"): ["similar name"],
        ("alpha", "omega"): ["same grid and launches"],
    }
    text = _flat(diff_lines(d, 80))
    assert "went: old (" in text and "appeared: new (" in text
    assert "probably renamed: triton_poi_fused_add_0 → triton_poi_fused_add_1" in text
    assert "probably renamed: alpha → omega (same grid and launches" in text


def test_a_finding_of_a_renamed_kernel_is_measured_under_its_new_name():
    before = ai.one_point_one_waves()
    d = diff(before, one_wave(kernel="wave_kernel_1"))
    (f,) = d.findings
    assert f.kernel_after == "wave_kernel_1" and f.recovered_ns == pytest.approx(80.0)
    assert "probably renamed wave_kernel_1" in f.note


# -- hostile inputs -----------------------------------------------------------------------------------


def test_the_same_file_twice_changes_nothing(tmp_path, capsys):
    path = _saved(tmp_path, ai.one_point_one_waves(), "same.npz")
    status, out, err = _run(capsys, path, path, "--json")
    doc = json.loads(out)
    assert status == 0 and err == ""
    assert [k["change_ns"] for k in doc["kernels"]] == [0]
    assert doc["step_change_ns"] == 0 and not doc["went"] and not doc["appeared"]
    assert [f["recovered_ns"] for f in doc["findings"]] == [0]
    status, text, _ = _run(capsys, path, path, "--width", "80")
    assert "(no change)" in text and "recovered 0 ns, 0% of it" in text


def test_two_jobs_of_different_ranks_are_one_line_saying_what_differs(tmp_path, capsys):
    b = _saved(tmp_path, ai.one_point_one_waves(), "one.npz")
    a = _saved(tmp_path, ai.slow_rank(), "two.npz")
    status, out, err = _run(capsys, b, a)
    assert status == 2 and out == "" and len(err.splitlines()) == 1
    assert "different jobs: BEFORE has 1 rank (0), AFTER 2 ranks (0-1)" in err
    assert "rank 0 GPU 0: test GPU (10 SMs) in BEFORE, test GPU (4 SMs) in AFTER" in err
    assert "--different-jobs" in err
    status, out, err = _run(capsys, b, a, "--different-jobs", "--width", "80")
    assert status == 0 and "note: different jobs, compared anyway" in out


def test_another_gpu_is_another_job():
    after = ai.one_point_one_waves()
    for s in after.sessions:
        s["device_name"] = "NVIDIA H200"
    with pytest.raises(ConfigError, match=r"rank 0 GPU 0: test GPU \(10 SMs\) in BEFORE, "):
        diff(ai.one_point_one_waves(), after)


def test_run_ids_are_not_compared():
    # A fix is measured in a new run, which torchrun names anew.
    before, after = ai.one_point_one_waves(), one_wave()
    before.metadata["job"] = {"run_id": "a", "restart": "0", "master": "h:1"}
    after.metadata["job"] = {"run_id": "b", "restart": "0", "master": "h:1"}
    assert diff(before, after).findings[0].recovered_ns == pytest.approx(80.0)


def test_no_common_kernel_lists_what_went_and_appeared_and_says_nothing_matched(tmp_path, capsys):
    before = ai.one_point_one_waves()
    after = ai.make_table([ai.launch([(0, 0, 50)], "xyz", step=k) for k in range(3)], sm_count=10)
    b, a = _saved(tmp_path, before, "b.npz"), _saved(tmp_path, after, "a.npz")
    status, out, _ = _run(capsys, b, a, "--width", "80")
    assert status == 0
    assert "went: wave_kernel (200 ns a step)" in out and "appeared: xyz (50 ns a step)" in out
    assert "nothing matched" in out and "kernels of both" not in out
    # the finding's kernel went: all its time is what it recovered, said
    assert "recovered 200 ns" in out and "not in AFTER: all its time counts" in out


def test_a_file_without_steps_is_compared_per_recording_and_says_so(tmp_path, capsys):
    # AFTER recorded no steps: both are compared per recording, BEFORE's advice too (its 3
    # launches' 90 ns each: 270 ns in the recording), AFTER's 3 launches of 120 ns: 360 ns.
    after = one_wave()
    after.launches["step"][:] = -1
    d = diff(ai.one_point_one_waves(), after)
    assert d.basis == "recording" and d.before.basis == d.after.basis == "recording"
    (f,) = d.findings
    assert f.estimate_ns == pytest.approx(270.0)
    assert (f.before_ns, f.after_ns) == (pytest.approx(600.0), pytest.approx(360.0))
    lines = diff_lines(d, 80)
    text = _flat(lines)
    assert "AFTER recorded no steps" in text and "per recording" in text
    assert "BEFORE: no steps (3 launches)" in text
    assert max(len(line) for line in lines) <= 80


def test_a_manual_capture_is_refused_with_the_fix(tmp_path, capsys):
    manual = tmp_path / "manual.npz"
    tiny_capture().save(manual)
    auto = _saved(tmp_path, ai.one_point_one_waves(), "auto.npz")
    for args in ((manual, auto), (auto, manual)):
        status, out, err = _run(capsys, *args)
        assert status == 2 and out == "" and len(err.splitlines()) == 1
        assert "diff compares auto-mode recordings" in err and "sm-profiler run" in err
        assert "manual.npz" in err


def test_a_missing_file_is_one_line(tmp_path, capsys):
    auto = _saved(tmp_path, ai.one_point_one_waves(), "auto.npz")
    status, out, err = _run(capsys, auto, tmp_path / "gone.npz")
    assert status == 2 and out == "" and len(err.splitlines()) == 1 and "gone.npz" in err


def test_run_folders_of_rank_files_are_compared(tmp_path, capsys):
    for name, durations in (("before", (100, 300)), ("after", (200, 200))):
        folder = tmp_path / name
        folder.mkdir()
        for r, launches in enumerate(rank_launches(durations)):
            ai.make_table(launches, ranks=(r,)).save(folder / f"auto.rank{r}.npz")
    status, out, err = _run(capsys, tmp_path / "before", tmp_path / "after", "--json")
    assert status == 0, err
    doc = json.loads(out)
    assert [g["rank"] for g in doc["before"]["gpus"]] == [0, 1]
    f = next(f for f in doc["findings"] if f["kind"] == "slow_rank")
    assert f["recovered_ns"] == pytest.approx(100 / 3)


def test_names_from_a_file_reach_the_terminal_escaped_and_every_line_fits():
    name = "\x1b[31mevil_" + "x" * 120
    d = diff(one_wave(kernel=name), one_wave(kernel=name + "2"))
    lines = diff_lines(d, 80)
    assert "\x1b" not in _flat(lines) and "\\x1b" in _flat(lines)
    assert max(len(line) for line in lines) <= 80


# -- the docs -----------------------------------------------------------------------------------------


def test_docs_cli_names_every_key_of_the_json():
    with open(os.path.join(ROOT, "docs", "cli.md"), encoding="utf-8") as f:
        doc = f.read()
    section = doc[doc.index("## diff") :]
    d = json.loads(diff(ai.host_gaps(), back_to_back()).to_json())
    keys = set(d) | set(d["before"]) | set(d["before"]["gpus"][0]) | set(d["findings"][0])
    d = json.loads(diff(ai.one_point_one_waves(), one_wave(kernel="wave_kernel_1")).to_json())
    keys |= set(d["went"][0]) | set(d["renamed"][0])
    d = json.loads(diff(ai.one_point_one_waves(), one_wave()).to_json())
    keys |= set(d["kernels"][0]) | set(d["kernels"][0]["before"])
    missing = sorted(k for k in keys if not re.search(rf"`{k}`", section))
    assert missing == []
    assert np.all([f"`{k}`" in section for k in ("diff_version", "recovered_over_estimate")])


def test_docs_cli_shows_what_the_planted_case_prints():
    with open(os.path.join(ROOT, "docs", "cli.md"), encoding="utf-8") as f:
        doc = f.read()
    section = doc[doc.index("## diff") : doc.index("## open")]
    shown = re.search(r"\n```\n(sm-profiler diff: .*?)\n```", section, re.S).group(1)
    names = ("before/auto.npz", "after/auto.npz")
    d = diff(ai.one_point_one_waves(), one_wave(period=120), names=names)
    assert shown == "\n".join(diff_lines(d, 96))


def test_a_recording_of_no_launch_is_one_line(tmp_path, capsys):
    empty = _saved(tmp_path, ai.make_table([], sm_count=10), "empty.npz")
    auto = _saved(tmp_path, one_wave(), "auto.npz")
    for args in ((empty, auto), (auto, empty)):
        status, out, err = _run(capsys, *args)
        assert status == 2 and out == "" and len(err.splitlines()) == 1
        assert "empty.npz' recorded no launch: nothing to compare" in err


def test_a_finding_on_a_gpu_after_does_not_have_is_not_measured():
    # Compared anyway: rank 1's slowest-rank finding has no rank 1 in AFTER to measure on.
    one_rank = ai.make_table(rank_launches((200,))[0], ranks=(0,))
    d = diff(ai.slow_rank(), one_rank, different_jobs=True)
    f = next(f for f in d.findings if f.kind == "slow_rank")
    assert f.after_ns is None and f.recovered_ns is None and f.recovered_over_estimate is None
    assert f.note == "AFTER has no rank 1 GPU 0"
    assert "not measured: AFTER has no rank 1 GPU 0" in _flat(diff_lines(d, 80))
    assert json.loads(d.to_json())["findings"][0]["recovered_ns"] is None


def test_a_recorded_job_against_itself_fits_80_columns_and_changes_nothing(capsys):
    # examples/recordings/two_ranks: two ranks recorded on an H200, 15 kernels, 24 findings.
    folder = os.path.join(ROOT, "examples", "recordings", "two_ranks")
    status, out, err = _run(capsys, folder, folder, "--width", "80", "--top", "30")
    assert status == 0 and err == ""
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= 80
    assert "(no change)" in _flat(lines) and out.count("recovered 0 µs, 0% of it") == 24
    assert "went:" not in out and "appeared:" not in out and "re-tuned" not in out


def test_a_kernel_gone_from_the_findings_gpu_only_says_where():
    # "few" (2 programs on 8 SMs) runs 1 µs a step on rank 0 and 2 µs on rank 1: its idle-SM
    # finding is rank 1's (6/8 x 2 µs). AFTER, rank 1 runs "other" in its place.
    def job(rank1_kernel):
        return ai.ranks_table(
            [
                [ai.launch([(0, 0, dur), (1, 0, dur)], name, step=0)]
                for dur, name in ((1000, "few"), (2000, rank1_kernel))
            ],
            sm_count=8,
        )

    d = diff(job("few"), job("other"))
    f = next(f for f in d.findings if f.kind == "idle_sms")
    assert (f.kernel, f.rank, f.estimate_ns) == ("few", 1, pytest.approx(1500.0))
    assert (f.before_ns, f.after_ns, f.recovered_ns) == (2000, 0, 2000)
    assert f.note == "not run on rank 1 GPU 0 in AFTER: all its time there counts"
