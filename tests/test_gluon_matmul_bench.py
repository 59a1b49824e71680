"""The Proton head-to-head benchmark's Gluon matmul (benchmarks/gluon_matmul_overhead.py) compiles
for sm_90 on a CPU in every variant, with the timer reads each variant should have."""

import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("triton.experimental.gluon")

HERE = os.path.dirname(__file__)
# Events per lane: the kernel range (2) and, per K step, four ranges (8) written once in the
# loop body, plus the last wgmma wait (2): 12 records in the code.
RECORDS_IN_CODE = 12


@pytest.fixture(scope="module")
def probe():
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    out = subprocess.run(
        [sys.executable, os.path.join(HERE, "gluon_matmul_bench_probe.py")],
        capture_output=True, text=True, env=env, timeout=600,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout)


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
