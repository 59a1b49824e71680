"""Hostile input, round 5 (issue 52): the stats of a manual capture at real clock readings
(item 1). Each test names the item of the issue it keeps fixed; each failed on the main of
2026-11-29."""

from __future__ import annotations

import pytest
from captures import TINY_REPORT, tiny_capture

from sm_profiler.report.stats import compute_stats
from sm_profiler.report.stats_table import format_stats
from sm_profiler.trace.decode import decode

# %globaltimer reads about 1.7e18 ns, where a float64 steps by 256 ns.
ORIGINS_NS = (0, 10**12, 17 * 10**17)


@pytest.mark.parametrize("origin_ns", ORIGINS_NS)
def test_1_the_load_imbalance_is_the_same_at_every_clock_origin(origin_ns):
    # SM 1 ends 800 ns after the mean SM; at 1.7e18 it read 768 ns.
    stats = compute_stats(decode([tiny_capture(origin_ns)]))
    assert stats.imbalance.excess_ns == 800
    assert stats.imbalance.max_end_ns - stats.span.start_ns == 4300
    assert format_stats(stats) == TINY_REPORT
