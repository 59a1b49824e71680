"""Triton device ops on a real GPU: decoded content, not 'it ran'. Skipped without CUDA."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]

import triton_kernels as K  # noqa: E402  (tests/support is on sys.path: no package)

import sm_profiler  # noqa: E402
from sm_profiler.wire import format as fmt  # noqa: E402


def _sm_count():
    return torch.cuda.get_device_properties(0).multi_processor_count


def _profiler(num_blocks, num_groups=1, capacity=64):
    prof = sm_profiler.SmProfiler(num_blocks, num_groups, capacity)
    for name in ("load", "store", "loop", "iter", "tick", "tail", "sleep"):
        prof.register_event(len(prof.event_names), name)
    return prof


def _assert_lanes_sane(trace, expect_lanes):
    lanes = trace.lanes
    init = lanes["initialized"]
    assert init.sum() == expect_lanes
    sm = lanes["sm"][init]
    assert sm.min() >= 0 and sm.max() < _sm_count()
    # Within a lane, events are in time order and each range ends after it starts.
    ev = trace.events
    assert np.all(ev["end_ns"] >= ev["start_ns"])
    same_lane = ev["lane"][1:] == ev["lane"][:-1]
    assert np.all(np.diff(ev["start_ns"])[same_lane] >= 0)
    # Every event happens after its lane's anchor.
    assert np.all(ev["start_ns"] >= lanes["anchor_ns"][ev["lane"]])


def test_vector_add_records_every_program():
    n, block = 1 << 20, 1024
    grid = n // block
    prof = _profiler(grid)
    x, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    out = torch.empty_like(x)
    K.add_kernel[(grid,)](x, y, out, n, prof.get_buffer(), BLOCK=block, PROFILE=True)
    torch.testing.assert_close(out, x + y)
    trace = prof.decode()
    _assert_lanes_sane(trace, grid)
    assert len(trace) == 2 * grid
    assert trace.dropped_total == 0 and len(trace.unmatched["kind"]) == 0
    ev = trace.events
    assert sorted(set(ev["event"].tolist())) == [K.LOAD.value, K.STORE.value]
    # The load range ends before the store range starts, in every program.
    load = ev["event"] == K.LOAD.value
    assert np.all(ev["end_ns"][load] <= ev["start_ns"][~load])
    # Programs spread over many SMs.
    assert len(np.unique(trace.lanes["sm"])) > _sm_count() // 2


def test_loop_kernel_nesting_instants_and_overflow():
    iters, grid = 40, 3 * _sm_count()
    per_program = K.loop_events(iters)
    prof = _profiler(grid, capacity=per_program)
    out = torch.empty(grid, device="cuda")
    K.loop_kernel[(grid + 5,)](out, iters, prof.get_buffer(), 0, PROFILE=True)
    trace = prof.decode()
    _assert_lanes_sane(trace, grid)  # the 5 programs outside the buffer wrote nothing
    assert trace.dropped_total == 0 and len(trace.unmatched["kind"]) == 0
    ev = trace.events
    per_lane = np.bincount(ev["lane"], minlength=grid)
    assert np.all(per_lane == 1 + iters + (iters + 2) // 3 + 2)
    loop = ev["event"] == K.LOOP.value
    it = ev["event"] == K.ITER.value
    # Every iteration range lies inside its program's loop range.
    outer_start = ev["start_ns"][loop][ev["lane"][it]]
    outer_end = ev["end_ns"][loop][ev["lane"][it]]
    assert np.all(ev["start_ns"][it] >= outer_start) and np.all(ev["end_ns"][it] <= outer_end)

    # The same launch with too small a buffer: exact dropped counts, no write outside it.
    small = _profiler(grid, capacity=10)
    sentinel = small.get_buffer()
    K.loop_kernel[(grid,)](out, iters, sentinel, 0, PROFILE=True)
    t2 = small.decode()
    assert np.all(t2.lanes["written"] == 10)
    assert np.all(t2.lanes["attempted"] == per_program)
    assert np.all(t2.lanes["dropped"] == per_program - 10)


def _guarded(prof):
    """One big allocation with the profiler's buffer in the middle of -1 guard words:
    (the allocation, the buffer inside it, the buffer's length in words)."""
    words = prof.layout.total_words
    guard = torch.full((words + 2048,), -1, dtype=torch.int64, device="cuda")
    inner = guard[1024 : 1024 + words]
    inner.copy_(prof.get_buffer())
    return guard, inner, words


def test_out_of_shape_programs_write_nothing_outside_the_buffer():
    grid = 8
    prof = _profiler(4, num_groups=2, capacity=16)
    guard, inner, words = _guarded(prof)
    out = torch.empty(grid, device="cuda")
    K.loop_kernel[(grid,)](out, 3, inner, 1, PROFILE=True)  # group 1 of 2; blocks 4..7 outside
    K.loop_kernel[(grid,)](out, 3, inner, 2, PROFILE=True)  # group 2: outside for every block
    K.loop_kernel[(grid,)](out, 3, inner, -1, PROFILE=True)  # negative group: outside
    torch.cuda.synchronize()
    assert torch.all(guard[:1024] == -1) and torch.all(guard[1024 + words :] == -1)
    # Inside the buffer, out-of-shape programs touch only the header's scratch word: the high
    # half holds one of their drop cursors (3 iterations: 11 events, cursors 0..10).
    hdr = inner[: fmt.HEADER_WORDS].cpu().numpy().view(np.uint64)
    fresh = prof.layout.header()
    assert np.array_equal(hdr[: fmt.HDR_SCRATCH], fresh[: fmt.HDR_SCRATCH])
    scratch = int(hdr[fmt.HDR_SCRATCH])
    assert scratch & 0xFFFFFFFF == 0 and (scratch >> 32) <= 10, hex(scratch)
    cap = sm_profiler.Capture(inner.cpu().numpy(), prof.event_names)
    trace = sm_profiler.decode(cap)
    init = trace.lanes["initialized"]
    assert init.tolist() == [False, True] * 4


@pytest.mark.parametrize("after", [False, True])
def test_range_around_known_delay_measures_it_within_64_ns(after):
    delay_ns, reps = 10_000, 64
    prof = _profiler(1, capacity=2 * reps)
    spun = torch.zeros(reps, dtype=torch.int64, device="cuda")
    K.spin_kernel[(1,)](prof.get_buffer(), spun, reps, DELAY_NS=delay_ns, AFTER=after, num_warps=1)
    trace = prof.decode()
    d = trace.duration_ns
    assert len(d) == reps and trace.dropped_total == 0
    spun = spun.cpu().numpy()
    assert np.all(spun >= delay_ns)
    # Our range around the spin measures what the spin itself saw pass. The difference is two
    # timer reads (about 19 ns each on H200) plus quantisation to the 32 ns tick of %globaltimer,
    # so it is 0..64 ns typically and one more tick now and then (measured on H200: 0/32/64/96).
    excess = d - spun
    print(f"after={after}: range - spin (ns): {np.unique(excess, return_counts=True)}")
    assert np.all(excess >= 0), excess
    assert np.median(excess) <= 64, excess
    assert np.max(excess) <= 128, excess


def test_per_warp_mode_one_lane_per_warp_with_distinct_times():
    warps, grid, iters = 4, 2 * _sm_count(), 50
    per_program = K.loop_events(iters)
    prof = _profiler(grid, num_groups=warps, capacity=per_program)
    out = torch.empty(grid, device="cuda")
    K.loop_kernel[(grid,)](
        out, iters, prof.get_buffer(), 0, PROFILE=True, PER_WARP=True, num_warps=warps
    )
    trace = prof.decode()
    _assert_lanes_sane(trace, grid * warps)
    assert trace.dropped_total == 0 and len(trace.unmatched["kind"]) == 0
    lanes = trace.lanes
    # The warps of one program share its SM.
    sm = lanes["sm"].reshape(grid, warps)
    assert np.all(sm == sm[:, :1])
    # Each warp stamped its own times: within a program, the warps' anchors or event times differ.
    ev = trace.events
    starts = ev["start_ns"].reshape(grid, warps, -1)
    distinct = np.array([len(np.unique(starts[p], axis=0)) for p in range(grid)])
    assert np.mean(distinct > 1) > 0.5


def test_disabled_writes_nothing():
    grid = 16
    prof = _profiler(grid)
    out = torch.empty(grid, device="cuda")
    buf = prof.get_buffer()
    K.loop_kernel[(grid,)](out, 5, buf, 0, PROFILE=False)
    torch.cuda.synchronize()
    assert int(torch.count_nonzero(buf[8:])) == 0


# -- staged warp lanes (profiler_init(..., PER_WARP=True, STAGE=n) + profiler_flush) ----------


def _names_by_lane(trace):
    ev = trace.events
    return [ev["event"][ev["lane"] == i].tolist() for i in range(len(trace.lanes))]


def _loop(prof, grid, iters, group=0, warps=4, **kw):
    K.loop_kernel[(grid,)](
        torch.empty(grid, device="cuda"),
        iters,
        prof.get_buffer(),
        group,
        PROFILE=True,
        PER_WARP=True,
        num_warps=warps,
        **kw,
    )
    return prof.decode()


def test_staged_lanes_decode_like_direct_ones():
    iters, warps, grid = 40, 4, 2 * _sm_count()
    total = K.loop_events(iters)
    direct = _loop(_profiler(grid, warps, total), grid, iters, NUM_WARPS=warps)
    staged = _loop(_profiler(grid, warps, total), grid, iters, NUM_WARPS=warps, STAGE=128)
    _assert_lanes_sane(staged, grid * warps)
    assert staged.dropped_total == 0 and len(staged.unmatched["kind"]) == 0
    assert np.all(staged.lanes["written"] == total)
    assert _names_by_lane(staged) == _names_by_lane(direct)
    sm = staged.lanes["sm"].reshape(grid, warps)
    assert np.all(sm == sm[:, :1])
    # each warp stamped its own times
    starts = staged.events["start_ns"].reshape(grid, warps, -1)
    assert np.mean([len(np.unique(starts[p], axis=0)) > 1 for p in range(grid)]) > 0.5


def test_staged_overflow_keeps_what_fit_and_counts_exactly():
    iters, warps, grid = 40, 4, _sm_count()
    total = K.loop_events(iters)
    # A stage smaller than the lane: STAGE - 1 records kept (the last slot held the newest).
    t = _loop(_profiler(grid, warps, total), grid, iters, NUM_WARPS=warps, STAGE=16)
    assert np.all(t.lanes["written"] == 15) and np.all(t.lanes["attempted"] == total)
    # A lane smaller than the stage: capacity records kept.
    t = _loop(_profiler(grid, warps, 10), grid, iters, NUM_WARPS=warps, STAGE=256)
    assert np.all(t.lanes["written"] == 10) and np.all(t.lanes["dropped"] == total - 10)


def test_staged_out_of_shape_warps_write_nothing_at_all():
    grid = 8
    prof = _profiler(4, num_groups=4, capacity=16)
    guard, inner, words = _guarded(prof)
    before = inner.clone()
    out = torch.empty(grid, device="cuda")
    for group in (4, -4):  # warps 0..3 -> groups 4..7 or -4..-1: outside for every block
        K.loop_kernel[(grid,)](out, 3, inner, group, PROFILE=True, PER_WARP=True, STAGE=32)
    torch.cuda.synchronize()
    assert torch.all(guard[:1024] == -1) and torch.all(guard[1024 + words :] == -1)
    assert torch.equal(inner, before)  # not even the header's scratch word
    # blocks 4..7 are outside, blocks 0..3 inside: only their lanes change
    K.loop_kernel[(grid,)](out, 3, inner, 0, PROFILE=True, PER_WARP=True, STAGE=32)
    torch.cuda.synchronize()
    assert torch.all(guard[:1024] == -1) and torch.all(guard[1024 + words :] == -1)
    t = sm_profiler.decode(sm_profiler.Capture(inner.cpu().numpy(), prof.event_names))
    assert t.lanes["initialized"].all() and t.dropped_total == 0


def test_staged_warps_past_num_warps_record_nothing_and_count_their_events_as_dropped():
    # The ops were told 2 warps, the launch has 4: warps 2 and 3 share the spare stage region.
    iters, grid = 10, _sm_count()
    total = K.loop_events(iters)
    t = _loop(_profiler(grid, 4, total), grid, iters, warps=4, NUM_WARPS=2, STAGE=total)
    written = t.lanes["written"].reshape(grid, 4)
    assert np.all(written[:, :2] == total) and np.all(written[:, 2:] == 0)
    assert np.all(t.lanes["attempted"] == total)


def test_staged_ops_leave_tritons_shared_memory_alone():
    # A pipelined tensor-core matmul uses Triton's dynamic shared memory; the stage is static
    # shared memory in front of it. The product must be right and the events complete.
    M = N = K_ = 512
    BM, BN, BK, warps = 128, 128, 64, 8
    a = torch.randn(M, K_, device="cuda", dtype=torch.float16)
    b = torch.randn(K_, N, device="cuda", dtype=torch.float16)
    grid = (M // BM) * (N // BN)
    per_lane = 4 * (K_ // BK)
    c = torch.empty(M, N, device="cuda", dtype=torch.float16)
    prof = _profiler(grid, num_groups=warps, capacity=per_lane)
    K.matmul_kernel[(grid,)](
        a,
        b,
        c,
        M,
        N,
        K_,
        prof.get_buffer(),
        BM=BM,
        BN=BN,
        BK=BK,
        PER_WARP=True,
        NUM_WARPS=warps,
        STAGE=per_lane,
        num_warps=warps,
        num_stages=3,
    )
    torch.testing.assert_close(c.float(), a.float() @ b.float(), atol=0.5, rtol=0.02)
    t = prof.decode()
    _assert_lanes_sane(t, grid * warps)
    assert t.dropped_total == 0 and len(t) == grid * warps * per_lane // 2


def test_staged_range_around_known_delay_measures_it_within_64_ns():
    delay_ns, reps = 10_000, 64
    prof = _profiler(1, capacity=2 * reps)
    spun = torch.zeros(reps, dtype=torch.int64, device="cuda")
    K.spin_kernel[(1,)](
        prof.get_buffer(), spun, reps, DELAY_NS=delay_ns, STAGE=2 * reps, num_warps=1
    )
    d = prof.decode().duration_ns
    excess = d - spun.cpu().numpy()
    print(f"staged: range - spin (ns): {np.unique(excess, return_counts=True)}")
    assert len(d) == reps and np.all(excess >= 0)
    assert np.median(excess) <= 64 and np.max(excess) <= 128, excess


def test_a_stage_that_costs_blocks_warns_at_first_launch():
    from sm_profiler.record import occupancy, ptx

    iters, warps, grid, stage = 8, 4, 4, 1199  # ~48 KiB of stage: 4 blocks/SM instead of 16
    limits = occupancy.SmLimits.of_device()
    with pytest.warns(occupancy.StageOccupancyWarning, match="lowers resident blocks") as w:
        trace = _loop(_profiler(grid, warps, 64), grid, iters, NUM_WARPS=warps, STAGE=stage)
    _assert_lanes_sane(trace, grid * warps)  # the warning changes nothing else
    msg = str(w[0].message)
    without = limits.max_threads_per_sm // (32 * warps)
    with_stage = limits.smem_per_sm_bytes // (ptx.stage_bytes(warps, stage) + 1024)
    assert f"from {without} to {with_stage}" in msg


@pytest.mark.parametrize("per_warp", [False, True])
def test_ring_persistent_kernel_keeps_exactly_the_newest_records(per_warp):
    """A persistent kernel (one program per SM) recording ~10x a lane's capacity into a ring:
    every lane keeps exactly its newest records, in order, and counts the rest overwritten."""
    from ring_check import check_ring_capture

    sms, cap, iters = _sm_count(), 64, 300
    seq = K.ring_sequence(iters)
    assert len(seq) >= 10 * cap
    groups = 4 if per_warp else 1
    prof = sm_profiler.SmProfiler(sms, groups, cap, ring=True)
    K.ring_kernel[(sms,)](
        prof.get_buffer(), iters, PROFILE=True, PER_WARP=per_warp, NUM_WARPS=4, num_warps=4
    )
    torch.cuda.synchronize()
    capture = prof.capture()
    check_ring_capture(capture, seq, list(range(sms * groups)))
    trace = sm_profiler.decode(capture)
    _assert_lanes_sane(trace, sms * groups)
    # The flush re-stamped each wrapped lane after its last record; times rebuilt backwards.
    ev = trace.events
    assert (ev["end_ns"] - ev["start_ns"]).max() < 10**8


def test_ring_kernel_on_a_direct_buffer_keeps_the_first_records():
    sms, cap, iters = _sm_count(), 64, 300
    prof = sm_profiler.SmProfiler(sms, 1, cap)
    K.ring_kernel[(sms,)](prof.get_buffer(), iters, PROFILE=True)
    trace = prof.decode()
    assert (trace.lanes["written"] == cap).all()
    assert (trace.lanes["attempted"] == len(K.ring_sequence(iters))).all()
    seq = K.ring_sequence(iters)[:cap]
    lane0 = trace.events["lane"] == 0
    assert int(trace.events["kind"][lane0].tolist().count(1)) == sum(k == 3 for k, _ in seq)
