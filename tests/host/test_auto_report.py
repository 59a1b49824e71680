"""Auto mode's report (sm_profiler/auto_mode/report.py) of records read from a hand-made buffer."""

from __future__ import annotations

from auto_inputs import table_of, two_kernels

from sm_profiler.auto_mode.report import format_report
from sm_profiler.trace.decode import decode


def test_report_fits_80_columns_and_sorts_by_time():
    caps = table_of(two_kernels())
    text = format_report(decode(caps), width=80)
    assert all(len(line) <= 80 for line in text.splitlines())
    rows = [ln.split()[0] for ln in text.splitlines() if ln.startswith(("triton_", "gemm"))]
    # kernel 1: spans of 530 and 430 ns; gemm: two replays of 330 ns
    assert rows[0].startswith("triton_poi") and rows[1] == "gemm"
    assert "960 ns" in text and "660 ns" in text
    assert "longest tails:" in text


def test_a_via_triton_table_says_its_kernels_stand_in_for_the_production_ones():
    from auto_inputs import table_of, two_kernels

    from sm_profiler.auto_mode.report import format_report

    table = table_of(two_kernels())
    assert "via_triton" not in format_report(table.decode(), width=80)
    table.metadata["via_triton"] = True
    text = " ".join(format_report(table.decode(), width=80).split())
    assert "via_triton: matmuls and attention ran as Triton kernels" in text
    assert "not the production ones'" in text
