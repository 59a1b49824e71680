"""What to fix first with torch.profiler's CUPTI kernel rows (`run --torch`, advise(cupti=)):
host gaps over every kernel the GPU ran, ours and CUPTI's on one time axis (ours moved by the
offset merge takes), so that cuBLAS-like kernels between our launches are not host gaps; the
uninstrumented kernels named as a note, never a finding; the hostile cases (another rank's or
GPU's trace, clocks that do not line up, no kernel rows, other steps) said, and the host gaps
then the instrumented kernels' alone; `sm-profiler advise` / `stats` of a file that carries the
trace use it."""

from __future__ import annotations

import json

import advise_inputs as ai
import numpy as np
import pytest

from sm_profiler.report.advise import INSTRUMENTED_ONLY, KINDS, advise, advise_lines
from sm_profiler.report.coverage import kernel_table

# wave_with_gaps: 3 steps of 10 µs (the last: its own 200 ns span), each a 200 ns launch with
# a 90 ns partial last wave. By the records alone: (9,800 + 9,800 + 0) / 3 ns of host gaps a
# step. With the fill kernel from each launch's end to 20 ns before the next: 20 + 20 + 0.
GAPS_RECORDS = 19_600 / 3
GAPS_CUPTI = 40 / 3


def _kinds(a):
    return [f.kind for f in a.findings]


def test_cupti_kernels_filling_the_gaps_rank_the_partial_wave_first():
    t = ai.wave_with_gaps()
    alone = advise(t)
    assert _kinds(alone)[0] == "host_gaps"
    assert alone.findings[0].estimate_ns_per_step == pytest.approx(GAPS_RECORDS)
    assert alone.gaps_from == "instrumented" and INSTRUMENTED_ONLY in alone.notes
    doc = ai.cupti_doc_of(t)
    a = advise(t, cupti=doc)
    assert a.gaps_from == "cupti" and INSTRUMENTED_ONLY not in a.notes
    assert _kinds(a) == ["partial_wave", "host_gaps"]
    assert a.findings[0].estimate_ns_per_step == pytest.approx(90.0)
    gaps = a.findings[1]
    assert gaps.estimate_ns_per_step == pytest.approx(GAPS_CUPTI)
    ev = gaps.evidence
    assert ev["source"] == "cupti" and ev["busy_ns"] == pytest.approx((9980 * 2 + 200) / 3)
    assert ev["instrumented_busy_ns"] == 200 and ev["launches_per_step"] == 1
    assert gaps.detail.startswith("GPU idle between kernels (CUPTI: every kernel)")
    # The same offset merge takes: %globaltimer - CUPTI's clock.
    (g,) = a.cupti["gpus"]
    assert g["used"] and g["offset_ns"] == -(ai.CUPTI_BASE_NS + ai.CUPTI_LEAD_NS)
    assert g["error"]["matched"] == 3 and g["error"]["max_abs_ns"] == 0
    # The uninstrumented kernel: a note with its time a step, never a finding.
    u = a.cupti["uninstrumented"]
    assert u["dominant"] and u["kernels"][0]["kernel"] == "nvjet_sm90_gemm_tn"
    assert u["kernels"][0]["library"] == "cuBLAS/CUTLASS matmul"
    assert u["ns_per_step"] == pytest.approx(9780 * 2 / 3)
    assert set(_kinds(a)) <= set(KINDS)
    text = " ".join(" ".join(advise_lines(a, 100)).split())
    assert "a step 6.73 µs; CUPTI: every kernel):" in text
    assert "1. 90 ns (1%) partial last wave: wave_kernel" in text
    assert "not instrumented (CUPTI)" in text and "Not counted as recoverable" in text
    assert "via_triton=True" in text
    assert all(len(line) <= 100 for line in advise_lines(a, 100))
    # The kernel table alone gives the same.
    b = advise(t, cupti=kernel_table(doc))
    assert [(f.kind, f.estimate_ns_per_step) for f in b.findings] == [
        (f.kind, f.estimate_ns_per_step) for f in a.findings
    ]


def test_the_offset_is_the_one_merge_takes(tmp_path):
    from sm_profiler.export.merge import merge_torch_trace

    t = ai.wave_with_gaps()
    doc = ai.cupti_doc_of(t, jitter=[0, 30, -10])  # launch jitter: the median is taken
    info = merge_torch_trace(doc, [t], tmp_path / "m.json")
    a = advise(t, cupti=doc)
    assert info["method"] == "kernels"
    assert a.cupti["gpus"][0]["offset_ns"] == info["offset_ns"]
    assert a.gaps_from == "cupti"


def _falls_back(a, words):
    assert a.gaps_from == "instrumented", a.cupti
    assert _kinds(a)[0] == "host_gaps"
    assert a.findings[0].estimate_ns_per_step == pytest.approx(GAPS_RECORDS)
    assert "instrumented launches a step" in a.findings[0].detail
    assert INSTRUMENTED_ONLY in a.notes
    said = " ".join(a.notes)
    assert words in said, said
    assert "CUPTI: every kernel" not in advise_lines(a, 100)[1]


def test_another_ranks_trace_is_said_and_left_out():
    t = ai.wave_with_gaps()  # its session says rank 0
    _falls_back(advise(t, cupti=ai.cupti_doc_of(t, rank=1)), "is rank 1's")
    # As {rank: trace}: a trace for a rank the table does not hold.
    _falls_back(advise(t, cupti={3: ai.cupti_doc_of(t)}), "rank 3, which the table does not")


def test_another_gpus_trace_is_said_and_left_out():
    t = ai.wave_with_gaps()
    _falls_back(advise(t, cupti=ai.cupti_doc_of(t, device=1)), "ran on cuda:1, not on cuda:0")


def test_clocks_that_do_not_line_up_are_said_and_left_out():
    # Each launch's CUPTI row off by tens of µs, differently: no one offset fits them.
    t = ai.wave_with_gaps(steps=7)
    doc = ai.cupti_doc_of(t, jitter=[0, 40_000, -30_000, 25_000, -45_000, 35_000, -20_000])
    a = advise(t, cupti=doc)
    assert a.gaps_from == "instrumented" and _kinds(a)[0] == "host_gaps"
    assert "does not line up with the launches" in " ".join(a.notes)
    assert a.cupti["gpus"][0]["fit"]["median_abs_ns"] > 5_000


def test_no_kernel_rows_and_other_steps_are_said_and_left_out():
    from captures import cupti_doc

    t = ai.wave_with_gaps()
    _falls_back(advise(t, cupti=cupti_doc([], base_ns=ai.CUPTI_BASE_NS)), "no kernel rows")
    other = ai.cupti_doc_of(t, steps=(20, 21, 22))
    _falls_back(advise(t, cupti=other), "torch.profiler's steps are not the steps recorded")
    # A trace of other launches altogether: none of our kernels among its rows.
    doc = ai.cupti_doc_of(t)
    for e in doc["traceEvents"]:
        if e.get("name") == "wave_kernel":
            e["name"] = "someone_elses_kernel"
    _falls_back(advise(t, cupti=doc), "none of the instrumented kernels")


def test_several_ranks_each_with_its_own_trace_or_none():
    per_rank = []
    for _ in (0, 1):
        per_rank.append(
            [
                ai.launch([(sm, 10_000 * k, 10_000 * k + 100) for sm in range(4)], "s", step=k)
                for k in range(3)
            ]
        )
    t = ai.ranks_table(per_rank)
    one = ai.make_table(per_rank[1], ranks=(1,))
    doc1 = ai.cupti_doc_of(one, rank=1)
    a = advise(t, cupti={1: doc1})
    assert a.gaps_from == "mixed"
    assert "CUPTI: every kernel on 1 of 2 GPUs" in " ".join(advise_lines(a, 200))
    assert any("rank 0 (cuda:0): no torch trace" in n for n in a.notes)
    # Rank 1's gaps are filled, rank 0's are not: the host-gap line is rank 0's, its gaps not
    # taken for a wait for rank 1 (whose busy time counts kernels rank 0's does not).
    f = next(f for f in a.findings if f.kind == "host_gaps")
    assert f.rank == 0 and f.evidence["source"] == "instrumented"
    assert f.estimate_ns_per_step == pytest.approx((9_900 * 2) / 3)
    assert f.evidence["wait_for_other_ranks_ns"] == 0
    # One trace without distributedInfo for a table of two ranks: which rank is unknown.
    b = advise(t, cupti=ai.cupti_doc_of(one))
    assert b.gaps_from == "instrumented" and any("which rank" in n for n in b.notes)
    # With distributedInfo it goes to its rank.
    c = advise(t, cupti=doc1)
    assert [g["used"] for g in c.cupti["gpus"]] == [False, True]


def test_estimates_with_cupti_never_exceed_the_step():
    t = ai.wave_with_gaps(steps=5)
    a = advise(t, cupti=ai.cupti_doc_of(t, leave=3_000))
    per_gpu = sum(f.estimate_ns_per_step for f in a.findings)
    assert 0 < per_gpu <= a.step_ns
    assert all(f.estimate_ns_per_step >= 0 for f in a.findings)


def test_advise_and_stats_of_a_file_with_its_torch_trace(tmp_path, capsys):
    from sm_profiler.cli import main
    from sm_profiler.export import auto_torch_parts as torch_parts

    t = ai.wave_with_gaps()
    doc = ai.cupti_doc_of(t)
    path = tmp_path / "auto.npz"
    t.save(path, torch_parts.members(doc))
    assert main(["advise", str(path), "--width", "100"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "CUPTI: every kernel):" in text and "1. 90 ns (1%) partial last wave" in text
    assert main(["advise", str(path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["gaps_from"] == "cupti" and out["cupti"]["gpus"][0]["used"] is True
    assert [f["kind"] for f in out["findings"]] == ["partial_wave", "host_gaps"]
    assert out["cupti"]["uninstrumented"]["kernels"][0]["kernel"] == "nvjet_sm90_gemm_tn"
    assert main(["stats", str(path), "--width", "100"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    section = text[text.index("What to fix first") :]
    assert "CUPTI: every kernel):" in section and " 1. 90 ns (1%) partial last wave" in section
    assert "seen, from CUPTI" in text
    # Without the trace inside: as before.
    plain = tmp_path / "plain.npz"
    t.save(plain)
    assert main(["advise", str(plain), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["gaps_from"] == "instrumented"


def test_advise_of_a_run_folder_takes_each_ranks_trace(tmp_path, capsys):
    from sm_profiler.cli import main
    from sm_profiler.export import auto_torch_parts as torch_parts

    for r in (0, 1):
        launches = [
            ai.launch([(sm, 10_000 * k, 10_000 * k + 100) for sm in range(4)], "s", step=k)
            for k in range(3)
        ]
        t = ai.make_table(launches, ranks=(r,))
        t.save(tmp_path / f"auto.rank{r}.npz", torch_parts.members(ai.cupti_doc_of(t, rank=r)))
    assert main(["advise", str(tmp_path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["gaps_from"] == "cupti"
    assert [g["used"] for g in out["cupti"]["gpus"]] == [True, True]
    f = next(f for f in out["findings"] if f["kind"] == "host_gaps")
    assert f["estimate_ns_per_step"] == pytest.approx(GAPS_CUPTI)


def test_a_damaged_torch_trace_in_the_report_is_said_and_left_out():
    from sm_profiler.report.auto_report import format_report

    t = ai.wave_with_gaps()
    doc = ai.cupti_doc_of(t)
    for e in doc["traceEvents"]:
        if e.get("cat") == "kernel":
            e["args"]["device"] = "gpu zero"  # not a device number
    text = " ".join(format_report(t.decode(), width=100, torch_trace=doc).split())
    assert "note: the torch trace was left out" in text
    assert "What to fix first" in text and "1. 6.53 µs" in text
    assert np.isfinite(advise(t).step_ns)
