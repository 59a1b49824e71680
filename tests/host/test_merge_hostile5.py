"""Hostile input, round 5 (issue 52): merging ranks by their clock samples at real clock
readings (item 1). Each test names the item of the issue it keeps fixed; each failed on the main
of 2026-11-29."""

from __future__ import annotations

import pytest
from captures import kernel_capture

from sm_profiler.export.merge import clock_offset

# %globaltimer reads about 1.7e18 ns, where a float64 steps by 256 ns.
ORIGINS_NS = (0, 10**12, 17 * 10**17)


@pytest.mark.parametrize("origin_ns", ORIGINS_NS)
def test_1_the_clock_fit_is_the_same_at_every_clock_origin(origin_ns):
    # Two samples 2 ms apart, the offset 10 ns larger at the second: 5 ppm of drift. At 1.7e18
    # the samples' host times were floats 1,999,872 ns apart: 5.0006 ppm, 320 ns off 1,000 s on.
    samples = [
        {"host_ns": origin_ns + h, "offset_ns": o, "error_ns": 300}
        for h, o in ((0, 5000), (2_000_000, 5010))
    ]
    offset, desc = clock_offset([kernel_capture(metadata={"clock": samples})])
    assert desc["drift_ppm"] == pytest.approx(5.0, rel=1e-9) and desc["offset_ns"] == 5000
    t_gpu = origin_ns + 5000 + 10**12  # 1,000 s of host time after the first sample
    assert round(offset(t_gpu)) == 5000 + 5_000_000
    assert round(offset(origin_ns + 5000)) == 5000


@pytest.mark.parametrize(
    "meta",
    [
        {"clock": [{"host_ns": 0, "offset_ns": -(2**63) + 10}]},
        {"clock": [{"host_ns": 0, "offset_ns": 2**63 - 10}]},
        {"barrier_ns": 2**63 - 1},
    ],
    ids=["clock_back", "clock_on", "barrier"],
)
def test_5_a_rank_moved_past_int64_is_refused(tmp_path, meta):
    # Rank 1's times (1.7e18 ns) moved by its clock samples or barrier stamp would wrap: the
    # merged trace began at -7.5e18 ns.
    from sm_profiler.errors import FormatError
    from sm_profiler.export.merge import merge_ranks

    first = {"clock": [{"host_ns": 0, "offset_ns": 0}]} if "clock" in meta else {"barrier_ns": 0}
    ranks = [[kernel_capture(metadata=first)], [kernel_capture(metadata=meta)]]
    out = tmp_path / "m.json"
    with pytest.raises(
        FormatError, match=r"rank 1's .* outside 0\.\.2\*\*63 - 1 ns.*remove the key"
    ):
        merge_ranks(ranks, out)
    assert not out.exists()
