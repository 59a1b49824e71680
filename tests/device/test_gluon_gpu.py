"""Gluon device ops on a real GPU (Hopper or newer: gl.warp_specialize): decoded content of every
partition's lanes. Skipped without CUDA."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(
        not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] < 9,
        reason="needs a CUDA GPU of compute capability 9.0 or newer",
    ),
]

pytest.importorskip("triton.experimental.gluon")
import gluon_kernels as K  # noqa: E402  (tests/support is on sys.path: no package)

import sm_profiler  # noqa: E402

WORKER_WARPS = 2


def _run(iters, grid, per_warp, capacity, num_groups, profile=True, extra_programs=0):
    prof = sm_profiler.SmProfiler(grid, num_groups, capacity)
    for i, name in enumerate(("loop", "iter", "tick", "partition")):
        prof.register_event(i, name)
    out = torch.zeros(2 * (grid + extra_programs), device="cuda")
    K.ws_loop_kernel[(grid + extra_programs,)](
        out,
        iters,
        prof.get_buffer(),
        PROFILE=profile,
        PER_WARP=per_warp,
        WORKER_WARPS=WORKER_WARPS,
        num_warps=4,
    )
    torch.cuda.synchronize()
    return prof, out


def _events_per_lane(iters):
    # partition begin/end, loop begin/end, per iteration begin, end, and a tick every third
    return 4 + 2 * iters + (iters + 2) // 3


@pytest.mark.parametrize("per_warp", [False, True])
def test_every_partition_records_its_own_lanes(per_warp):
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    iters, grid = 30, 2 * sms
    groups = [0, 4, 5] if per_warp else [0, 1]  # per warp: default warps 0..3, worker 4..5
    num_groups = 6 if per_warp else 2
    n = _events_per_lane(iters)
    prof, out = _run(iters, grid, per_warp, n, num_groups, extra_programs=3)
    trace = prof.decode()
    lanes = trace.lanes
    written = {
        int(g): int(lanes["initialized"][lanes["group"] == g].sum()) for g in range(num_groups)
    }
    expect_groups = list(range(6)) if per_warp else groups
    # Every block's lane of every partition (or warp) is written; nothing else.
    assert written == {g: (grid if g in expect_groups else 0) for g in range(num_groups)}
    sm = lanes["sm"][lanes["initialized"]]
    assert sm.min() >= 0 and sm.max() < sms
    assert trace.dropped_total == 0 and len(trace.unmatched["kind"]) == 0
    # Each lane holds exactly its events, in time order, after its anchor.
    counts = np.bincount(trace.events["lane"], minlength=len(lanes["lane"]))
    per_lane_records = np.zeros(len(lanes["lane"]), np.int64)
    ev = trace.events
    np.add.at(per_lane_records, ev["lane"], np.where(ev["kind"] == 0, 2, 1))
    assert set(per_lane_records[lanes["initialized"]].tolist()) == {n}
    assert counts[~lanes["initialized"]].sum() == 0
    same = ev["lane"][1:] == ev["lane"][:-1]
    assert np.all(np.diff(ev["start_ns"])[same] >= 0)
    assert np.all(ev["start_ns"] >= lanes["anchor_ns"][ev["lane"]])
    assert np.all(ev["end_ns"] >= ev["start_ns"])
    # The partitions of one block run at the same time, on the same SM.
    block_sm = {}
    for b, s in zip(lanes["block"], lanes["sm"], strict=True):
        if s >= 0:
            block_sm.setdefault(int(b), set()).add(int(s))
    assert all(len(v) == 1 for v in block_sm.values())


def test_profiled_output_is_bit_identical_to_the_unprofiled_one():
    iters, grid = 50, 64
    _, on = _run(iters, grid, False, 256, 2, profile=True)
    _, off = _run(iters, grid, False, 256, 2, profile=False)
    assert torch.equal(on, off)
    assert torch.all(on != 0)


def test_overflow_is_counted_exactly_in_each_partition():
    iters, grid = 30, 8
    n = _events_per_lane(iters)
    prof, _ = _run(iters, grid, False, n - 7, 2)
    trace = prof.decode()
    lanes = trace.lanes
    assert np.all(lanes["attempted"][lanes["initialized"]] == n)
    assert np.all(lanes["dropped"][lanes["initialized"]] == 7)


@pytest.mark.parametrize("per_warp", [False, True])
def test_ring_keeps_exactly_the_newest_records(per_warp):
    from ring_check import check_ring_capture

    sms = torch.cuda.get_device_properties(0).multi_processor_count
    cap, iters = 64, 300
    seq = K.ring_sequence(iters)
    assert len(seq) >= 10 * cap
    groups = 4 if per_warp else 1
    prof = sm_profiler.SmProfiler(sms, groups, cap, ring=True)
    K.ring_kernel[(sms,)](prof.get_buffer(), iters, PER_WARP=per_warp, num_warps=4)
    torch.cuda.synchronize()
    check_ring_capture(prof.capture(), seq, list(range(sms * groups)))
