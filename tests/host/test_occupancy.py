"""The host check that warns when a staged lane's shared memory costs the kernel a resident block."""

import json
import warnings

import pytest

from sm_profiler.record import occupancy, ptx
from sm_profiler.record.occupancy import SmLimits, blocks_per_sm, stage_report

H100 = SmLimits(smem_per_sm_bytes=233472, max_threads_per_sm=2048, regs_per_sm=65536)
# The matmul of benchmarks/staged_occupancy.py: 8 warps, 3 pipeline stages of 128x64 + 64x128 fp16.
MATMUL_SMEM = 3 * (128 * 64 + 64 * 128) * 2


def _decl(nbytes):
    return f".shared .align 16 .b8 smp_stage_7[{nbytes}];\n"


def test_blocks_per_sm_takes_the_tightest_resource():
    assert blocks_per_sm(256, 32, 0, H100) == 8  # threads: 2048 / 256
    assert blocks_per_sm(256, 128, 0, H100) == 2  # registers: 65536 / (128 * 256)
    assert blocks_per_sm(256, 32, MATMUL_SMEM, H100) == 2  # shared memory
    assert blocks_per_sm(32, 16, 0, H100) == 32  # the per-SM block limit
    assert blocks_per_sm(256, 32, 240_000, H100) == 0


def test_a_stage_that_costs_a_block_is_reported_with_a_stage_that_fits():
    stage = ptx.stage_bytes(8, 258)  # every event of a warp, as measured in BENCHMARKS.md
    r = stage_report("mm", _decl(stage), MATMUL_SMEM, 8, 128, H100)
    assert (r.stage_bytes, r.blocks_without_stage, r.blocks_with_stage) == (stage, 2, 1)
    assert r.lowers_occupancy

    # The suggested STAGE is the largest that keeps 2 blocks: checked by brute force.
    def fits(n):
        return blocks_per_sm(256, 128, MATMUL_SMEM + ptx.stage_bytes(8, n), H100) == 2

    assert fits(r.fitting_stage) and not fits(r.fitting_stage + 1)
    assert 0 < r.fitting_stage < 258
    msg = r.message()
    assert "from 2 to 1" in msg and f"STAGE={r.fitting_stage}" in msg and "mm" in msg


def test_a_stage_that_fits_and_a_kernel_without_one_are_quiet():
    small = stage_report("mm", _decl(ptx.stage_bytes(8, 16)), MATMUL_SMEM, 8, 128, H100)
    assert small is not None and not small.lowers_occupancy
    assert stage_report("mm", "st.global.u64 [%rd1], %rd2;", MATMUL_SMEM, 8, 128, H100) is None


def test_no_stage_fits_says_use_direct_recording():
    full = H100.smem_per_sm_bytes - 1024 - 512  # 512 B left; a stage is at least 1 KiB
    r = stage_report("k", _decl(ptx.stage_bytes(4, 64)), full, 4, 32, H100)
    assert r.lowers_occupancy and r.fitting_stage == 0
    assert "STAGE=0" in r.message()


def _fake_load(tmp_path, monkeypatch, ptx_text, shared):
    (tmp_path / "k.ptx").write_text(ptx_text)
    (tmp_path / "k.json").write_text(json.dumps({"shared": shared, "num_warps": 8}))
    group = {"k.ptx": str(tmp_path / "k.ptx"), "k.json": str(tmp_path / "k.json")}
    monkeypatch.setattr(SmLimits, "of_device", classmethod(lambda cls, device=None: H100))
    monkeypatch.setattr(occupancy, "regs_per_thread", lambda function: 128)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        occupancy._on_kernel_load(None, 0, "mm_kernel", group, "h")
    return [w for w in caught if issubclass(w.category, occupancy.StageOccupancyWarning)]


def test_the_load_hook_warns_for_a_costly_stage_only(tmp_path, monkeypatch):
    costly = _fake_load(tmp_path, monkeypatch, _decl(ptx.stage_bytes(8, 258)), MATMUL_SMEM)
    assert len(costly) == 1 and "mm_kernel" in str(costly[0].message)
    assert _fake_load(tmp_path, monkeypatch, _decl(ptx.stage_bytes(8, 16)), MATMUL_SMEM) == []
    assert _fake_load(tmp_path, monkeypatch, "no stage here", MATMUL_SMEM) == []


def test_a_kernel_without_static_shared_memory_is_not_read(tmp_path, monkeypatch):
    # Every kernel the process loads passes the hook: where the driver says the kernel has no
    # static shared memory (no stage), its files are not opened at all.
    monkeypatch.setattr(occupancy, "_func_attribute", lambda function, attribute: 0)
    opened = []
    monkeypatch.setattr("builtins.open", lambda *a, **k: opened.append(a) or 1 / 0)
    occupancy._on_kernel_load(None, 0, "k", {"k.ptx": "k.ptx", "k.json": "k.json"}, "h")
    assert opened == []


def test_the_load_hook_never_breaks_a_launch(tmp_path):
    occupancy._on_kernel_load(
        None,
        0,
        "k",
        {"k.ptx": str(tmp_path / "missing.ptx"), "k.json": str(tmp_path / "missing.json")},
        "h",
    )
    occupancy._on_kernel_load(None, 0, "k", None, "h")


def test_importing_the_triton_ops_installs_the_hook():
    triton = pytest.importorskip("triton")
    import sm_profiler.triton_ops  # noqa: F401

    assert occupancy._on_kernel_load in triton.knobs.runtime.kernel_load_end_hook.calls
