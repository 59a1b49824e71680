"""fix_first's suite of planted defects (issue 55, item 4: compute- and memory-bound programs,
partial waves at several residencies, a tail from skewed work, idle SMs, host gaps, a slow rank
and a cuBLAS matmul shape of a poor wave count, each with its fix), checked without a GPU: its
kernels compile for sm_90 with the residency each case needs (plain and as auto mode
instruments them), every case runs end to end on the model of the GPU (`--dry-run`: the plant
ranked first, its fix read from the finding's evidence, the table worst case first, the JSON and
`sm-profiler diff` of a plant against its fix), and the pieces the GPU run takes from the host
(the plants' work, the matmul shapes chosen from a sweep of CUPTI's launch shapes) on inputs
made by hand. tests/device/test_fix_first_gpu.py runs the cases on a GPU."""

from __future__ import annotations

import pytest
from compile_probes import run_probe

from benchmarks import plant_kernels as pk

# -- the kernels compile, with the residency each case plants at (slow: conftest.SLOW) ---------


@pytest.fixture(scope="module")
def compiled():
    return run_probe("plant_compile_probe.py")


def test_every_plant_kernel_compiles_for_sm90_at_the_residency_its_case_needs(compiled):
    assert set(compiled) == set(pk.CONFIGS)
    for name, config in pk.CONFIGS.items():
        for build in ("plain", "auto"):
            got = compiled[name][build]
            assert got["resident"] == config.resident, (name, build, got)
            assert got["spill_bytes"] == 0, (name, build, got)
        assert (
            compiled[name]["auto"]["instrumented"] and not compiled[name]["plain"]["instrumented"]
        )


def test_the_fma_kernels_keep_every_dependent_fma(compiled):
    # The loop of N FMAs a chain is unrolled or not, but never folded: a and b are arguments.
    for name, config in pk.CONFIGS.items():
        fmas = compiled[name]["plain"]["fma"]
        if config.kernel == "fma":
            assert fmas in (config.chains, config.chains * config.fmas), (name, fmas)
        else:
            assert fmas == 0, name
