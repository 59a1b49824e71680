"""What to fix first with torch.profiler's CUPTI kernel rows (`run --torch`, advise(cupti=)):
host gaps over every kernel the GPU ran, ours and CUPTI's on one time axis (ours moved by the
offset merge takes), so that cuBLAS-like kernels between our launches are not host gaps; the
uninstrumented kernels named as a note, their time never a finding (their launch shape gives
one: issue 55); the hostile cases (another rank's or GPU's trace, clocks that do not line up,
no kernel rows, other steps) said, and the host gaps then the instrumented kernels' alone;
`sm-profiler advise` / `stats` of a file that carries the trace use it."""

from __future__ import annotations

import json
import os

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
    # The uninstrumented kernel: a note with its time a step, its time never a finding (the fill rows say no shape).
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


# -- the kernels auto mode cannot see inside: findings from their launch shape (issue 55) -----

# wave_with_gaps with its fill kernel (a cuBLAS-like gemm of 9,780 ns in steps 0 and 1, none in
# step 2) given a shape: blocks of 128 threads, 32 registers a thread, no shared memory. On H100's
# limits 16 blocks reside a SM: threads 2,048 // 128 = 16, registers 65,536 // (32 x 32) = 64
# warps = 16 blocks (threads named first of equals), shared memory 228, the block limit 32. The
# trace's deviceProperties give 10 SMs: 160 slots.
FILL_NS = 9_780


@pytest.mark.parametrize(
    "blocks, kind, share",
    [
        # 208 blocks = 1.3 waves: the last of 2 fills 30 %: (1 - 0.3) x 9,780 / 2 a launch.
        (208, "partial_wave", 0.7 / 2),
        # 15 blocks on 10 SMs, one wave: the busiest SMs hold 2, the mean 1.5: 1 - 1.5 / 2.
        (15, "partial_wave", 0.25),
        # 4 blocks on 10 SMs: 6 idle for the kernel's time.
        (4, "idle_sms", 0.6),
    ],
)
def test_an_uninstrumented_kernel_gets_a_finding_from_its_launch_shape(blocks, kind, share):
    t = ai.wave_with_gaps()
    doc = ai.cupti_doc_of(t, fill_shape=([blocks, 1, 1], [128, 1, 1], 32, 0), num_sms=10)
    a = advise(t, cupti=doc)
    (f,) = [f for f in a.findings if f.kernel == "nvjet_sm90_gemm_tn"]
    assert f.kind == kind
    assert f.estimate_ns_per_step == pytest.approx(share * FILL_NS * 2 / 3)
    ev = f.evidence
    assert ev["source"] == "launch shape" and ev["sms_from"] == "deviceProperties"
    assert (ev["resident_per_sm"], ev["limit_binds"], ev["slots"]) == (16, "threads", 160)
    assert ev["waves"] == pytest.approx(blocks / 160) and ev["launches"] == 2
    assert (ev["grid"], ev["block"], ev["registers_per_thread"]) == (
        [blocks, 1, 1],
        [128, 1, 1],
        32,
    )
    assert "estimated from launch shape alone (CUPTI), never from per-SM records" in f.detail
    assert f.to_dict()["evidence"]["source"] == "launch shape"
    # Ranked beside ours: the 90 ns partial wave of wave_kernel is there too.
    assert ("partial_wave", "wave_kernel") in [(g.kind, g.kernel) for g in a.findings]
    assert [g.estimate_ns_per_step for g in a.findings] == sorted(
        (g.estimate_ns_per_step for g in a.findings), reverse=True
    )


def test_rows_without_registers_or_a_grid_give_no_launch_shape_finding():
    t = ai.wave_with_gaps()
    shaped = ai.cupti_doc_of(t, fill_shape=([208, 1, 1], [128, 1, 1], 32, 0), num_sms=10)
    for cupti in (ai.cupti_doc_of(t), kernel_table(shaped)):  # no shape; a kernel table alone
        a = advise(t, cupti=cupti)
        assert not [f for f in a.findings if f.evidence.get("source") == "launch shape"]


def test_the_one_gpu_recording_names_its_cublas_gemms_from_their_launch_shape(capsys):
    # examples/recordings/one_gpu: an H200 (132 SMs), a compiled MLP whose matmuls are cuBLAS
    # sm80_xmma gemms, e.g. grid 4x32x2 of 128 threads, 121 registers, 12,672 B shared: 4
    # resident a SM (registers: 3,872 -> 4,096 a warp, 16 warps), 256 / 528 = 0.48 waves.
    from repo_paths import ROOT

    from sm_profiler.cli import main

    path = os.path.join(ROOT, "examples", "recordings", "one_gpu")
    assert main(["advise", path, "--json", "--top", "100"]) == 0
    doc = json.loads(capsys.readouterr().out)
    shaped = [f for f in doc["findings"] if f["evidence"].get("source") == "launch shape"]
    gemms = [f for f in shaped if "sm80_xmma_gemm" in f["kernel"]]
    assert gemms
    g = next(f for f in gemms if f["evidence"]["grid"] == [4, 32, 2])
    ev = g["evidence"]
    assert (ev["block"], ev["registers_per_thread"], ev["shared_memory_bytes"]) == (
        [128, 1, 1],
        121,
        12672,
    )
    assert (ev["resident_per_sm"], ev["limit_binds"], ev["sms"]) == (4, "registers", 132)
    assert ev["waves"] == pytest.approx(256 / 528)
    # The text (top 5) shows one, with its evidence and where it came from.
    assert main(["advise", path]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "sm80_xmma_gemm" in text and "registers bind" in text
    assert "estimated from launch shape alone (CUPTI), never from per-SM records" in text


@pytest.mark.parametrize(
    "regs, smem, block",
    [
        ("many", 0, [128, 1, 1]),  # not a count
        (True, 0, [128, 1, 1]),  # a bool is not a count
        (-1, 0, [128, 1, 1]),
        (2**40, 0, [128, 1, 1]),
        (32, None, [128, 1, 1]),
        (255, 0, [1024, 1, 1]),  # 32 warps of 8,192 registers: no block fits
    ],
)
def test_a_launch_shape_that_cannot_be_read_or_run_gives_no_finding(regs, smem, block):
    t = ai.wave_with_gaps()
    doc = ai.cupti_doc_of(t, fill_shape=([208, 1, 1], block, regs, smem), num_sms=10)
    a = advise(t, cupti=doc)
    assert not [f for f in a.findings if f.evidence.get("source") == "launch shape"]
    assert a.gaps_from == "cupti"  # the rows still count as kernels the GPU ran
