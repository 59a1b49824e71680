"""Triton's automatic warp specialization and our ops: the compile-level findings that
examples/warp_specialized.py and docs/api.md report, pinned per Triton release (CPU only)."""

import pytest
from compile_probes import run_probe

triton = pytest.importorskip("triton")

# What compiles (and is specialized) per release; the modes are explained in triton_ws_probe.py.
OK_PER_RELEASE = {
    "3.6.0": {
        "sm_90 none outside",
        "sm_90 chain outside",
        "sm_90 chain inside",
        "sm_100 none outside",
        "sm_100 ops outside",
        "sm_100 stored outside",
        "sm_100 chain outside",
    },
}
# 3.7 to 3.9: Hopper no longer specializes this kernel, instrumented or not; Blackwell takes all.
OK_PER_RELEASE["3.7.1"] = OK_PER_RELEASE["3.8.0"] = OK_PER_RELEASE["3.9.0"] = {
    "sm_100 none outside",
    "sm_100 ops outside",
    "sm_100 ops inside",
    "sm_100 stored outside",
    "sm_100 stored inside",
    "sm_100 chain outside",
    "sm_100 chain inside",
}


@pytest.fixture(scope="module")
def probe():
    return run_probe("triton_ws_probe.py", timeout_s=900)


def test_what_compiles_under_warp_specialize_is_as_documented(probe):
    release = probe.pop("triton")
    if release not in OK_PER_RELEASE:
        pytest.skip(f"findings pinned for Triton {sorted(OK_PER_RELEASE)}, not {release}")
    ok = {key for key, result in probe.items() if result == "ok"}
    assert ok == OK_PER_RELEASE[release], {k: probe[k] for k in ok ^ OK_PER_RELEASE[release]}
