"""Hostile input, round 5 (issue 52): our launches matched to torch's CUPTI rows at real clock
readings (item 1). Each test names the item of the issue it keeps fixed; each failed on the main
of 2026-11-29."""

from __future__ import annotations

import pytest

from sm_profiler.report.alignment import kernel_fit

# %globaltimer reads about 1.7e18 ns, where a float64 steps by 256 ns.
ORIGINS_NS = (0, 10**12, 17 * 10**17)


@pytest.mark.parametrize("origin_ns", ORIGINS_NS)
def test_1_launches_match_the_same_rows_at_every_clock_origin(origin_ns):
    # Two launches 100 ns apart against three CUPTI rows at 0, 30 and 100 ns (3 us earlier on
    # torch's clock): rows 30 and 100 keep their distances closest (30 ns apart, against 70 for
    # rows 0 and 30), so the offset is the median of 2,970 and 3,000 ns. At 1.7e18 the float64
    # times made both windows look exact and the first was taken.
    cupti_ns = origin_ns - 3000
    rows = {"k": [(cupti_ns + s, cupti_ns + s + 10) for s in (0, 30, 100)]}
    fit = kernel_fit(["k", "k"], [origin_ns, origin_ns + 100], None, rows)
    assert fit == {"offset_ns": 2985, "matched": 2, "median_abs_ns": 15.0}
