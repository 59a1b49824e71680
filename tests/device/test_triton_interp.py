"""The Triton ops under TRITON_INTERPRET=1: the whole pipeline on a CPU, no GPU needed.

tests/conftest.py turns the interpreter on (before Triton is imported) when there is no GPU.
"""

import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(
    os.environ.get("TRITON_INTERPRET", "0") in ("", "0"),
    reason="interpreter tests run where TRITON_INTERPRET=1 (set by conftest.py without a GPU)",
)

import triton  # noqa: E402
import triton.language as tl  # noqa: E402
import triton_kernels as K  # noqa: E402

import sm_profiler  # noqa: E402
from sm_profiler.triton_ops import profiler_event_instant, profiler_init  # noqa: E402
from sm_profiler.wire import format as fmt  # noqa: E402

NAMES = ("load", "store", "loop", "iter", "tick", "tail", "sleep")


def _profiler(num_blocks, num_groups=1, capacity=64):
    prof = sm_profiler.SmProfiler(num_blocks, num_groups, capacity, device="cpu")
    for i, name in enumerate(NAMES):
        prof.register_event(i, name)
    return prof


def test_vector_add_end_to_end():
    n, block = 1000, 256
    grid = (n + block - 1) // block
    prof = _profiler(grid)
    x, y = torch.randn(n), torch.randn(n)
    out = torch.empty(n)
    K.add_kernel[(grid,)](x, y, out, n, prof.get_buffer(), BLOCK=block, PROFILE=True)
    torch.testing.assert_close(out, x + y)
    trace = prof.decode()
    assert trace.emulated
    assert len(trace) == 2 * grid and trace.dropped_total == 0
    ev = trace.events
    assert ev["block"].tolist() == [b for b in range(grid) for _ in range(2)]
    assert [trace.event_name(e) for e in ev["event"][:2]] == ["load", "store"]
    assert np.all(ev["end_ns"] >= ev["start_ns"])
    # Emulated SM ids: program id modulo the emulated SM count.
    assert trace.lanes["sm"].tolist() == [b % fmt.EMULATED_SM_COUNT for b in range(grid)]


def test_loop_kernel_nesting_instants_and_while():
    iters, grid = 7, 3
    prof = _profiler(grid, capacity=K.loop_events(iters))
    out = torch.empty(grid)
    K.loop_kernel[(grid,)](out, iters, prof.get_buffer(), 0, PROFILE=True)
    trace = prof.decode()
    assert trace.dropped_total == 0 and len(trace.unmatched["kind"]) == 0
    ev = trace.events
    for lane in range(grid):
        mine = ev["lane"] == lane
        names = [trace.event_name(e) for e in ev["event"][mine]]
        assert names.count("iter") == iters
        assert names.count("tick") == (iters + 2) // 3
        assert names.count("tail") == 2
        assert names[0] == "loop"  # the outer range starts first and encloses the rest
        s, e = ev["start_ns"][mine], ev["end_ns"][mine]
        assert np.all(s[1:] >= s[0]) and np.all(e[1:] <= e[0])
        assert np.all(np.diff(s) >= 0)


def test_overflowing_lane_counts_exactly_what_was_dropped():
    iters, grid, cap = 10, 2, 5
    prof = _profiler(grid, capacity=cap)
    K.loop_kernel[(grid,)](torch.empty(grid), iters, prof.get_buffer(), 0, PROFILE=True)
    trace = prof.decode()
    assert trace.lanes["written"].tolist() == [cap] * grid
    assert trace.lanes["attempted"].tolist() == [K.loop_events(iters)] * grid
    assert trace.lanes["dropped"].tolist() == [K.loop_events(iters) - cap] * grid
    # The records that fit are the first five: loop begin, iter 0 begin, tick, iter 0 end,
    # iter 1 begin. So one range and one instant decode, and the two begins are unmatched.
    mine = trace.events["lane"] == 0
    assert [trace.event_name(e) for e in trace.events["event"][mine]] == ["iter", "tick"]
    um = trace.unmatched["lane"] == 0
    assert [trace.event_name(e) for e in trace.unmatched["event"][um]] == ["loop", "iter"]
    assert trace.unmatched["kind"][um].tolist() == [fmt.KIND_BEGIN] * 2


def _only_flagged(buf, before):
    # Out-of-shape programs write nothing but the flag in the header's scratch word (as on a
    # GPU, where their drop stores land there).
    assert int(buf[fmt.HDR_SCRATCH]) == fmt.SCRATCH_OUT_OF_SHAPE
    rest = torch.ones_like(buf, dtype=torch.bool)
    rest[fmt.HDR_SCRATCH] = False
    assert torch.equal(buf[rest], before[rest])


def test_out_of_shape_programs_write_nothing_but_the_flag():
    prof = _profiler(2, num_groups=2, capacity=K.loop_events(3))
    buf = prof.get_buffer()
    before = buf.clone()
    out = torch.empty(6)
    K.loop_kernel[(6,)](out, 3, buf, 2, PROFILE=True)  # group 2 of 2: outside for every block
    K.loop_kernel[(6,)](out, 3, buf, -1, PROFILE=True)  # negative group
    _only_flagged(buf, before)
    K.loop_kernel[(6,)](out, 3, buf, 1, PROFILE=True)  # blocks 2..5 are outside
    trace = prof.decode()
    assert trace.lanes["initialized"].tolist() == [False, True, False, True]
    assert set(trace.events["block"].tolist()) == {0, 1}
    assert trace.kernels[0].out_of_shape_writes and not trace.kernels[0].reopened_lanes


def test_per_warp_mode_emulates_one_lane_per_warp():
    warps, grid, iters = 4, 2, 3
    prof = _profiler(grid, num_groups=warps, capacity=K.loop_events(iters))
    K.loop_kernel[(grid,)](
        torch.empty(grid),
        iters,
        prof.get_buffer(),
        0,
        PROFILE=True,
        PER_WARP=True,
        NUM_WARPS=warps,
    )
    trace = prof.decode()
    assert trace.lanes["initialized"].all()
    per_lane = np.bincount(trace.events["lane"], minlength=grid * warps)
    assert np.all(per_lane == per_lane[0]) and per_lane[0] > 0


def test_disabled_ops_write_nothing():
    prof = _profiler(2)
    buf = prof.get_buffer()
    before = buf.clone()
    K.loop_kernel[(2,)](torch.empty(2), 3, buf, 0, PROFILE=False)
    assert torch.equal(buf, before)


def test_trace_says_it_was_emulated(tmp_path):
    prof = _profiler(1)
    K.loop_kernel[(1,)](torch.empty(1), 2, prof.get_buffer(), 0, PROFILE=True)
    import io

    out = io.StringIO()
    prof.print_stats(file=out)
    assert "emulated" in out.getvalue().lower()
    prof.export(tmp_path / "t.json")
    assert "emulated" in (tmp_path / "t.json").read_text().lower()


def _run_loop(prof, grid, iters, group=0, **kw):
    K.loop_kernel[(grid,)](torch.empty(grid), iters, prof.get_buffer(), group, PROFILE=True, **kw)
    return prof.decode()


def _names(trace, lane=0):
    mine = trace.events["lane"] == lane
    return [trace.event_name(e) for e in trace.events["event"][mine]]


WARPS = 2


def _staged(prof, grid, iters, group=0, **kw):
    kw.setdefault("PER_WARP", True)
    return _run_loop(prof, grid, iters, group, NUM_WARPS=WARPS, **kw)


def test_staged_lanes_decode_like_direct_ones():
    iters, grid = 7, 3
    total = K.loop_events(iters)
    direct = _staged(_profiler(grid, WARPS, total), grid, iters)
    staged = _staged(_profiler(grid, WARPS, total), grid, iters, STAGE=total)
    assert staged.dropped_total == 0 and len(staged.unmatched["kind"]) == 0
    assert np.all(staged.lanes["written"] == total)
    for lane in range(grid * WARPS):
        assert _names(staged, lane) == _names(direct, lane)


def test_a_stage_smaller_than_the_lane_keeps_stage_minus_one_and_counts_the_rest():
    # 10 iterations = 29 events into a stage of 5: slots 0..3 hold the first four records, slot 4
    # was overwritten by every later one (the newest is dropped), so four are kept.
    iters, grid, stage = 10, 2, 5
    trace = _staged(_profiler(grid, WARPS, 64), grid, iters, STAGE=stage)
    total = K.loop_events(iters)
    assert trace.lanes["written"].tolist() == [stage - 1] * grid * WARPS
    assert trace.lanes["attempted"].tolist() == [total] * grid * WARPS
    assert trace.lanes["dropped"].tolist() == [total - stage + 1] * grid * WARPS
    # Kept: loop begin, iter 0 begin, tick, iter 0 end -> one range, one instant, loop unmatched.
    assert _names(trace) == ["iter", "tick"]
    um = trace.unmatched["lane"] == 0
    assert [trace.event_name(e) for e in trace.unmatched["event"][um]] == ["loop"]


def test_a_stage_that_is_exactly_full_drops_nothing():
    iters, grid = 4, 2
    total = K.loop_events(iters)
    trace = _staged(_profiler(grid, WARPS, 64), grid, iters, STAGE=total)
    assert trace.dropped_total == 0 and np.all(trace.lanes["written"] == total)


def test_a_stage_larger_than_the_lane_keeps_capacity():
    iters, grid, cap = 10, 2, 5
    trace = _staged(_profiler(grid, WARPS, cap), grid, iters, STAGE=64)
    assert np.all(trace.lanes["written"] == cap)
    assert np.all(trace.lanes["dropped"] == K.loop_events(iters) - cap)
    assert _names(trace) == ["iter", "tick"]


def test_staged_out_of_shape_programs_write_nothing_but_the_flag():
    prof = _profiler(2, num_groups=2, capacity=K.loop_events(3))
    buf = prof.get_buffer()
    before = buf.clone()
    kw = dict(PROFILE=True, PER_WARP=True, NUM_WARPS=WARPS, STAGE=8)
    K.loop_kernel[(6,)](torch.empty(6), 3, buf, 2, **kw)  # groups 2, 3 of 2
    K.loop_kernel[(6,)](torch.empty(6), 3, buf, -2, **kw)  # groups -2, -1
    _only_flagged(buf, before)


def test_staging_is_refused_per_program_and_past_static_shared_memory():
    with pytest.raises(Exception, match="STAGE needs PER_WARP=True"):
        _staged(_profiler(1), 1, 2, STAGE=8, PER_WARP=False)
    with pytest.raises(Exception, match=r"STAGE=8192 needs .* static shared memory.*lower STAGE"):
        _staged(_profiler(1, WARPS), 1, 2, STAGE=8192)


def test_a_staged_kernel_without_profiler_flush_is_reported_not_decoded_as_data():
    @triton.jit
    def no_flush(prof, WARPS: tl.constexpr):
        ctx = profiler_init(prof, tl.program_id(0), 0, PER_WARP=True, NUM_WARPS=WARPS, STAGE=8)
        ctx = profiler_event_instant(ctx, 0)

    prof = _profiler(1, WARPS)
    no_flush[(1,)](prof.get_buffer(), WARPS=WARPS)
    with pytest.raises(sm_profiler.FormatError, match=r"without profiler_flush\(ctx\)"):
        prof.decode()


def test_ring_mode_keeps_each_lanes_newest_records():
    from ring_check import check_ring_capture

    iters, grid = 60, 3
    seq = K.ring_sequence(iters)
    prof = sm_profiler.SmProfiler(grid, 1, 16, device="cpu", ring=True)
    for i, name in enumerate(NAMES):
        prof.register_event(i, name)
    K.ring_kernel[(grid,)](prof.get_buffer(), iters, PROFILE=True)
    assert len(seq) > 8 * 16
    check_ring_capture(prof.capture(), seq, list(range(grid)))


def test_ring_ops_on_a_direct_buffer_keep_the_first_records():
    iters = 30
    seq = K.ring_sequence(iters)
    prof = _profiler(1, capacity=16)
    K.ring_kernel[(1,)](prof.get_buffer(), iters, PROFILE=True)
    trace = prof.decode()
    assert int(trace.lanes["written"][0]) == 16
    assert int(trace.lanes["attempted"][0]) == len(seq)
    assert not trace.kernels[0].ring and not trace.kernels[0].ring_unclosed_lanes


def test_direct_ops_on_a_ring_buffer_are_reported():
    prof = sm_profiler.SmProfiler(1, 1, 16, device="cpu", ring=True)
    K.ring_kernel[(1,)](prof.get_buffer(), 30, PROFILE=True, RING=False)
    trace = prof.decode()
    assert trace.kernels[0].ring_unclosed_lanes == [0]  # the first records, as a direct lane
    assert int(trace.lanes["written"][0]) == 16
    assert int(trace.lanes["attempted"][0]) == len(K.ring_sequence(30))
    warnings = sm_profiler.report.stats.compute_stats(trace).warnings
    assert any("not closed by profiler_flush" in w for w in warnings)
    assert any("Raise max_events_per_group" in w for w in warnings)
