"""What auto mode keeps of a loaded kernel (binding.register_loaded): its launch shape beside its
names, registers a thread among them (issue 55: the advisor bounds the programs an SM holds by
them), each field where it belongs."""

from __future__ import annotations

import pytest

from sm_profiler.auto_mode import binding


@pytest.fixture
def state(monkeypatch):
    for name in ("kernels", "by_module", "by_tag"):
        monkeypatch.setattr(binding.STATE, name, {})
    monkeypatch.setattr(binding, "_current_device", lambda: 0)
    monkeypatch.setattr(binding, "_buffer", lambda device: None)
    return binding.STATE


def mode(level="program"):
    return f"{binding.MODE_PREFIX}-v{binding.REWRITE_VERSION}-{level}"


def test_a_loaded_kernel_keeps_its_registers_beside_its_shape_and_names(state):
    meta = {"instrumentation_mode": mode(), "num_warps": 16, "num_stages": 3, "shared": 1024}
    meta["hash"] = "abc123"
    binding.register_loaded(7, "fma_kernel", meta, None, "train.py:12 (step)", registers=64)
    (entry,) = state.kernels.values()
    got = entry.as_metadata()
    assert got["registers"] == 64 and got["num_warps"] == 16 and got["shared_bytes"] == 1024
    assert got["cache_hash"] == "abc123" and got["call_site"] == "train.py:12 (step)"
    assert "source" not in got and "origins" not in got  # no @triton.jit function given


def test_registers_the_driver_could_not_say_are_left_out(state):
    meta = {"instrumentation_mode": mode(), "num_warps": 4, "shared": 0, "hash": "ff00"}
    binding.register_loaded(8, "k", meta, registers=0)
    (entry,) = state.kernels.values()
    assert "registers" not in entry.as_metadata()


def test_a_plain_kernel_is_not_registered(state):
    binding.register_loaded(9, "plain", {"num_warps": 4}, registers=32)
    assert state.kernels == {}
