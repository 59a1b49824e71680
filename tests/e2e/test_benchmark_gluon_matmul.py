"""The Proton head-to-head benchmark's Gluon matmul (benchmarks/gluon_matmul_overhead.py) compiles
for sm_90 on a CPU in every variant, with the timer reads each variant should have."""

import pytest
from compile_probes import run_probe

pytest.importorskip("triton.experimental.gluon")

# Events per lane: the kernel range (2) and, per K step, four ranges (8) written once in the
# loop body, plus the last wgmma wait (2): 12 records in the code.
RECORDS_IN_CODE = 12


@pytest.fixture(scope="module")
def probe():
    return run_probe("gluon_matmul_bench_probe.py")


def test_every_variant_is_a_wgmma_matmul_with_a_fenced_tma_store(probe):
    for mode, facts in probe.items():
        assert facts["wgmma"], mode
        # Without the fence the TMA store read stale shared memory (3 % of C wrong on an H200).
        assert facts["fence_before_tma_store"], mode


def test_timer_reads_per_variant(probe):
    # Proton's scopes compile away outside a Proton session, like the base.
    assert probe["base"]["timer_reads"] == probe["proton"]["timer_reads"] == 0
    assert probe["floor"]["timer_reads"] == RECORDS_IN_CODE
    for mode in ("ours", "ours_pred", "ours_warp"):
        assert probe[mode]["timer_reads"] == RECORDS_IN_CODE + 1, mode  # + the init's anchor
