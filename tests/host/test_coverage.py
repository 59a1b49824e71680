"""Coverage from a torch trace's CUPTI rows (sm_profiler/report/coverage.py), on hand-built traces whose
overlaps, gaps and steps give known shares: the step windows, the unions, the unseen ranking, the
layout of the unseen kernels for the SM tracks and its cap, malformed fields, the printed lines."""

from __future__ import annotations

import json

import numpy as np
import pytest
from captures import EPOCH_T0, cupti_doc, kernel_capture

from sm_profiler.errors import CaptureError
from sm_profiler.report.coverage import (
    coverage_lines,
    kernel_table,
    torch_coverage,
    unseen_kernels,
)


def k(name, start, end, **more) -> dict:
    return dict(name=name, start=start, end=end, **more)


# One profile, no steps: instrumented tri 0-100 and 300-400; gemm 50-150 and 350-380 (inside
# tri's second row); nccl 500-600. Busy: 0-150, 300-400, 500-600 = 350 of the span 0-600.
PROFILE = [
    k("tri", 0, 100),
    k("gemm", 50, 150),
    k("tri", 300, 400),
    k("gemm", 350, 380),
    k("nccl", 500, 600),
]


def test_shares_of_one_profile_are_the_unions_over_its_span():
    cov = torch_coverage(cupti_doc(PROFILE), ["tri"])
    assert cov["steps_from"] == "the whole profile"
    (d,) = cov["devices"]
    (s,) = d["steps"]
    assert s["step"] is None and s["span_ns"] == 600 and s["busy_ns"] == 350
    assert s["instrumented_ns"] == 200 and s["kernels"] == 5 and s["instrumented_kernels"] == 2
    assert d["share"] == pytest.approx(200 / 600)
    assert d["share_of_busy"] == pytest.approx(200 / 350)
    assert d["idle_share"] == pytest.approx(250 / 600)
    # Unseen, by total time (summed, not the union): gemm 130 ns in 2 launches, then nccl.
    assert [(u["name"], u["launches"], u["total_ns"]) for u in d["unseen"]] == [
        ("gemm", 2, 130),
        ("nccl", 1, 100),
    ]
    assert d["unseen"][0]["share"] == pytest.approx(130 / 600)


def test_overlapping_instrumented_rows_count_once():
    rows = [k("tri", 0, 100), k("tri", 40, 120), k("tri2", 110, 200), k("x", 200, 400)]
    d = torch_coverage(cupti_doc(rows), ["tri", "tri2"])["devices"][0]
    assert d["steps"][0]["instrumented_ns"] == 200 and d["share"] == pytest.approx(0.5)
    assert d["idle_share"] == 0.0


def test_a_kernel_belongs_to_the_step_that_launched_it():
    """Step 3's last kernel is launched inside its window but runs in step 4's: it is step 3's.
    Step 3's span runs to step 4's first kernel; a kernel launched after the last step is
    outside every step; a kernel without a launch row goes by its start."""
    rows = [
        k("tri", 500, 700, launch=100),
        k("gemm", 1100, 1200, launch=900),  # launched in step 3, runs in step 4's window
        k("tri", 1300, 1400, launch=1050),
        k("gemm", 1400, 1500),  # no launch row: its start, 1400, is in step 4
        k("late", 3000, 3100, launch=2500),
    ]
    steps = [(3, 0, 1000), (4, 1000, 2000)]
    cov = torch_coverage(cupti_doc(rows, steps), ["tri"])
    assert cov["steps_from"] == "ProfilerStep#N annotations"
    d = cov["devices"][0]
    s3, s4 = d["steps"]
    assert (s3["step"], s3["start_ns"] - EPOCH_T0, s3["kernels"]) == (3, 500, 2)
    assert s3["span_ns"] == 800 and s3["busy_ns"] == 300 and s3["instrumented_ns"] == 200
    assert (s4["step"], s4["span_ns"], s4["busy_ns"], s4["instrumented_ns"]) == (4, 200, 200, 100)
    assert d["outside_steps"] == 1
    assert d["share"] == pytest.approx(np.median([200 / 800, 100 / 200]))
    assert d["idle_share"] == pytest.approx(np.median([500 / 800, 0.0]))
    assert d["span_ns"] == 1000
    assert [u["name"] for u in d["unseen"]] == ["gemm"]  # 'late' ran in no step
    assert d["unseen"][0]["total_ns"] == 200 and d["unseen"][0]["share"] == pytest.approx(0.2)


def test_a_step_that_does_not_follow_spans_its_own_kernels():
    rows = [k("tri", 100, 200, launch=50), k("tri", 5100, 5150, launch=5050)]
    d = torch_coverage(cupti_doc(rows, [(3, 0, 1000), (5, 5000, 6000)]), ["tri"])["devices"][0]
    assert [s["span_ns"] for s in d["steps"]] == [100, 50]
    assert d["share"] == 1.0


def test_devices_are_apart_and_names_match_as_merge_matches_them():
    rows = [
        k("triton_poi_0", 0, 100, device=0),
        k("gemm", 100, 400, device=0),
        k("triton_poi_0", 0, 100, device=1),
    ]
    # CUPTI decorates nothing here, but the instrumented name is a prefix: merge.kernel_key.
    cov = torch_coverage(cupti_doc(rows), ["triton_poi"])
    assert [d["device"] for d in cov["devices"]] == [0, 1]
    assert cov["devices"][0]["share"] == pytest.approx(0.25)
    assert cov["devices"][1]["share"] == 1.0 and cov["devices"][1]["unseen"] == []


def test_a_row_without_args_device_is_its_pid():
    doc = cupti_doc([k("a", 0, 10, device=3)])
    doc["traceEvents"][0]["args"].pop("device")
    assert kernel_table(doc)["device"].tolist() == [3]


def test_sources_name_the_instrumented_kernels(tmp_path):
    from sm_profiler.wire.capture import save_many

    save_many([kernel_capture("tri")], tmp_path / "c.smp")
    path = tmp_path / "torch.json"
    path.write_text(json.dumps(cupti_doc(PROFILE)))
    by_file = torch_coverage(path, tmp_path / "c.smp")
    by_caps = torch_coverage(path, [kernel_capture("tri")])
    assert by_file == by_caps == torch_coverage(cupti_doc(PROFILE), ("tri",))


def test_no_kernel_rows_no_devices():
    assert torch_coverage(cupti_doc([]), ["tri"])["devices"] == []


def _bad(edit):
    doc = cupti_doc([k("a", 0, 10, launch=0, grid=(1, 1, 1))], [(1, 0, 100)], num_sms=4)
    edit(doc)
    return doc


def _row(doc, cat="kernel"):
    return next(e for e in doc["traceEvents"] if e.get("cat") == cat)


BAD = {
    "args not an object": (lambda d: _row(d).update(args=[1]), "args"),
    "device text": (lambda d: _row(d)["args"].update(device="x"), "args.device"),
    "device negative": (lambda d: _row(d)["args"].update(device=-1), "args.device"),
    "grid of two": (lambda d: _row(d)["args"].update(grid=[1, 2]), "args.grid"),
    "block zero": (lambda d: _row(d)["args"].update(block=[0, 1, 1]), "args.block"),
    "correlation text": (lambda d: _row(d)["args"].update(correlation="a"), "args.correlation"),
    "launch ts nan": (lambda d: _row(d, "cuda_runtime").update(ts=float("nan")), "ts"),
    "step dur missing": (lambda d: _row(d, "user_annotation").pop("dur"), "dur"),
    "deviceProperties object": (lambda d: d.update(deviceProperties={}), "deviceProperties"),
    "numSms text": (lambda d: d["deviceProperties"][0].update(numSms="x"), "numSms"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_malformed_fields_are_capture_errors_naming_them(tmp_path, case):
    from sm_profiler.export.merge import merge_torch_trace

    edit, what = BAD[case]
    with pytest.raises(CaptureError, match=f"{what}.*re-export it"):
        merge_torch_trace(_bad(edit), [kernel_capture("a")], tmp_path / "m.json")
    assert not (tmp_path / "m.json").exists()


def test_absent_grid_and_block_are_unknown_not_errors():
    t = kernel_table(cupti_doc([k("a", 0, 10)]))
    assert t["grid"].tolist() == [[-1, -1, -1]] and t["block"].tolist() == [[-1, -1, -1]]


# -- the unseen kernels' layout ---------------------------------------------------------------


def _layout(rows, n_sms, shown=(0, 1), cap=10**6):
    t = kernel_table(cupti_doc(rows))
    return unseen_kernels(t, np.ones(len(t["name"]), bool), n_sms, np.array(shown), cap)


def test_a_kernel_fills_every_sm_only_when_its_grid_has_as_many_blocks():
    kernels, info = _layout(
        [
            k("big", 0, 10, grid=(4, 2, 1), block=(128, 1, 1)),
            k("small", 20, 30, grid=(3, 1, 1)),
            k("nogrid", 40, 50),
        ],
        n_sms=4,
    )
    assert kernels["n_sms"].tolist() == [4, 3, 4]  # nogrid: on every SM
    assert kernels["sms"].tolist() == [0, 1, 2, 3]
    assert kernels["name"] == ["big", "small (any 3 of 4 SMs)", "nogrid (SMs unknown)"]
    big, small, nogrid = kernels["args"]
    assert big["grid"] == [4, 2, 1] and big["block"] == [128, 1, 1] and big["dur_ns"] == 10
    assert big["sms"] == "all 4 (grid of 8 blocks)"
    assert "does not say which: drawn on SMs 0-2" in small["sms"]
    assert nogrid["grid"] == "unknown" and nogrid["block"] == "unknown"
    assert info["slices"] == 11 and info["left_out_kernels"] == 0 and info["sms"] == 4


def test_without_an_sm_count_every_kernel_is_on_the_sms_shown():
    kernels, _ = _layout([k("big", 0, 10, grid=(400, 1, 1))], n_sms=None, shown=(5, 2, 7))
    assert kernels["sms"].tolist() == [2, 5, 7] and kernels["n_sms"].tolist() == [3]
    assert kernels["name"] == ["big (SMs unknown)"]


def test_the_cap_keeps_the_longest_kernels_in_time_order():
    rows = [k(f"k{i}", 100 * i, 100 * i + d, grid=(8, 1, 1)) for i, d in enumerate([5, 50, 20, 40])]
    kernels, info = _layout(rows, n_sms=4, cap=10)  # 4 slices each: two fit
    assert kernels["name"] == ["k1", "k3"]
    assert kernels["start_ns"].tolist() == sorted(kernels["start_ns"].tolist())
    assert (info["drawn"], info["slices"]) == (2, 8)
    assert (info["left_out_kernels"], info["left_out_slices"]) == (2, 8)


# -- the printed lines -------------------------------------------------------------------------


def test_lines_fit_80_columns_and_name_the_largest_unseen_kernels():
    long = "ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_64x3_nn" * 2
    rows = [k("tri", 0, 100), k(long, 100, 400), k("nccl", 400, 500)]
    rows += [k(f"small{i}", 500 + 10 * i, 501 + 10 * i) for i in range(8)]
    cov = torch_coverage(cupti_doc(rows), ["tri"])
    lines = coverage_lines(cov, width=80)
    assert all(len(line) <= 80 for line in lines), lines
    text = "\n".join(lines)
    assert "cuda:0, from CUPTI (the whole profile as one step)" in text
    assert f"{100 * cov['devices'][0]['share']:.1f}% of a step" in text
    listed = [line for line in lines if "x  " in line]
    assert len(listed) == 5 and "…" in listed[0] and "nccl" in listed[1]


def test_torch_coverage_is_sm_profilers():
    import sm_profiler

    assert sm_profiler.torch_coverage is torch_coverage
    assert sm_profiler.report.coverage.MAX_UNSEEN_SLICES == 50_000
