"""Resident blocks per SM from a launch's shape (report/occupancy.py, issue 55, item 2): each
case worked out by hand against H100's / H200's limits (2,048 threads, 32 blocks, 65,536
registers allocated 256 to a warp, 233,472 bytes of shared memory, 1,024 reserved a block)."""

from __future__ import annotations

import pytest

from sm_profiler.report.occupancy import SmLimits, resident_blocks, waves


@pytest.mark.parametrize(
    "threads, regs, smem, blocks, binds",
    [
        # one_gpu's cuBLAS gemm: 4 warps; 121 registers x 32 = 3,872, rounded up to 4,096 a warp:
        # 65,536 // 4,096 = 16 warps = 4 blocks (threads: 16, shared 233,472 // 13,696 = 17).
        (128, 121, 12672, 4, "registers"),
        # 8 warps of 32 registers: 1,024 a warp, 64 warps = 8 blocks; threads 2,048 // 256 = 8
        # (ties: threads named first); shared 233,472 // 5,380 = 43.
        (256, 32, 4356, 8, "threads"),
        # 64 threads, few registers, no shared memory: 32 by threads, 32 by the block limit.
        (64, 16, 0, 32, "threads"),
        # 32 threads: 64 by threads, the block limit 32 binds.
        (32, 16, 0, 32, "blocks"),
        # 100 KB of shared memory: 233,472 // (102,400 + 1,024) = 2.
        (128, 32, 102400, 2, "shared memory"),
        # 255 registers: 8,160 -> 8,192 a warp, 8 warps a SM; a block of 1,024 threads is 32
        # warps: none resides.
        (1024, 255, 0, 0, "registers"),
    ],
)
def test_resident_blocks_by_hand(threads, regs, smem, blocks, binds):
    r = resident_blocks(threads, regs, smem)
    assert (r.blocks, r.binds) == (blocks, binds)
    assert r.blocks == min(r.by_limit.values()) or r.blocks == 0


def test_occupancy_and_waves():
    r = resident_blocks(128, 121, 12672)
    assert r.occupancy(128, SmLimits()) == 16 / 64
    assert waves(256, 132, r.blocks) == 256 / 528
    assert waves(1000, 132, 0) == 0.0


def test_device_properties_give_the_limits_where_they_say():
    lim, src = SmLimits.of_device_properties(
        {"maxThreadsPerMultiprocessor": 1536, "regsPerMultiprocessor": 65536}
    )
    assert (lim.threads, lim.registers, lim.smem_bytes, src) == (
        1536,
        65536,
        233472,
        "deviceProperties",
    )
    assert resident_blocks(256, 16, 0, lim).by_limit["threads"] == 6
    assert SmLimits.of_device_properties({"numSms": 132})[1] == "H100/H200 defaults"
    assert SmLimits.of_device_properties({"maxThreadsPerMultiprocessor": True})[0] == SmLimits()
