"""Auto mode's report (sm_profiler/report/auto_report.py) of records read from a hand-made buffer."""

from __future__ import annotations

import numpy as np
from auto_inputs import table_of, two_kernels

from sm_profiler.report.auto_report import format_report
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

    from sm_profiler.report.auto_report import format_report

    table = table_of(two_kernels())
    assert "via_triton" not in format_report(table.decode(), width=80)
    table.metadata["via_triton"] = True
    text = " ".join(format_report(table.decode(), width=80).split())
    assert "via_triton: matmuls and attention ran as Triton kernels" in text
    assert "not the production ones'" in text


def test_step_shares_and_compile_steps_of_gpus_that_skip_and_share_steps():
    """The (step, GPU) cells that ran (table.pair_cells, issue 52) give each step its longest
    GPU, each GPU's period over its own steps, and the step that compiled."""
    from auto_inputs import AUTO_T0, table_of

    from sm_profiler.report.auto_report import step_shares
    from sm_profiler.trace.auto_table import AutoTable

    def rank(r, skip, slow_first):
        recs, labels = [], {}
        for s in range(6):
            if s == skip:
                continue
            for k, off in enumerate((0, 200)):
                launch = 10 * s + k
                dur = 50_000 if (s == 0 and slow_first) else 100
                recs.append((AUTO_T0 + 1000 * s + off + 7 * r, dur, k, launch, 1 + k, 0, 0, 0))
                labels[launch] = (s + 1, 0)
        tags = {str(s + 1): s for s in range(6)}
        return table_of(recs, labels=labels, session={"rank": r, "step_tags": tags})

    both = AutoTable.concat([rank(0, 3, True), rank(1, 4, False), rank(2, -1, False)])
    got = step_shares(both.decode())
    assert got["steps"].tolist() == list(range(6))
    # Step 0: rank 0's ran 50,200 ns; the others 300 ns.
    assert got["span_ns"].tolist() == [50_200, 300, 300, 300, 300, 300]
    assert np.all((got["share"] > 0) & (got["share"] <= 1))
    assert both.compile_steps().tolist() == [0]


def test_median_with_zeros_is_the_median_over_every_rank():
    from sm_profiler.report.auto_report import median_with_zeros

    rng = np.random.default_rng(3)
    for n in (1, 2, 5, 6):
        dense = rng.integers(0, 4, (7, n)).astype(np.float64) * (rng.random((7, n)) < 0.5)
        group, rank = np.nonzero(dense)  # the cells that ran: the zeros are left out
        got = median_with_zeros(group, dense[group, rank], 7, n)
        assert got.tolist() == np.median(dense, axis=1).tolist()
