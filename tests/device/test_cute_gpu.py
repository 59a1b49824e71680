"""CuteDSL device ops on a real GPU: decoded content, not 'it ran'. Skipped without CUDA/cutlass.

Kernels are in cute_kernels.py. Every assertion message carries the numbers it compared, so a
failure read from a log explains itself.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
cutlass = pytest.importorskip(
    "cutlass", reason="needs CuteDSL: pip install nvidia-cutlass-dsl==4.8.1"
)
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.cute,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]

import cute_kernels as K  # noqa: E402  (tests/support is on sys.path: no package)
import cutlass.cute as cute  # noqa: E402
from cutlass import Int32  # noqa: E402
from cutlass.cute.runtime import make_ptr  # noqa: E402

import sm_profiler  # noqa: E402
from sm_profiler.wire import format as fmt  # noqa: E402

_DTYPES = {torch.int64: cutlass.Int64, torch.float32: cutlass.Float32}
_compiled: dict = {}


def _ptr(t):
    return make_ptr(_DTYPES[t.dtype], t.data_ptr(), cute.AddressSpace.gmem, assumed_align=8)


def _launch(fn, dynamic: tuple, constexprs: tuple = ()) -> None:
    """Compile fn once per constexpr set, then launch with `dynamic` (tensors become pointers)."""
    args = tuple(_ptr(a) if isinstance(a, torch.Tensor) else Int32(a) for a in dynamic)
    key = (fn.__name__, constexprs)
    if key not in _compiled:
        _compiled[key] = cute.compile(fn, *args, *constexprs)
    _compiled[key](*args)
    torch.cuda.synchronize()


def _sm_count() -> int:
    return torch.cuda.get_device_properties(0).multi_processor_count


def _profiler(num_blocks, num_groups=1, capacity=64):
    prof = sm_profiler.SmProfiler(num_blocks, num_groups, capacity, kernel_name="cute")
    for eid, name in K.EVENT_NAMES.items():
        prof.register_event(eid, name)
    return prof


def _run_loop(prof, iters, grid, group=0, per_warp=False, profile=True, buf=None):
    out = torch.zeros(grid * K.THREADS, device="cuda")
    buf = prof.get_buffer() if buf is None else buf
    _launch(K.launch_loop, (out, buf, iters, group, grid), (profile, per_warp))
    return out


def _assert_device_order(prof) -> None:
    """On the raw words: each lane's records go forward in time from its anchor (mod 2**32)."""
    words = prof.get_buffer().cpu().numpy().view(np.uint64)
    lanes = prof.layout.lanes(words)
    lo = (lanes["records"] & np.uint64(fmt.LOW32)).astype(np.int64)
    anchor_lo = (lanes["anchor"] & np.uint64(fmt.LOW32)).astype(np.int64)
    written = lanes["records"] != 0
    times = np.concatenate([anchor_lo[:, None], lo], axis=1)
    step = (times[:, 1:] - times[:, :-1]) % 2**32
    backwards = written & (step >= 2**31)  # a step "back" in time: a record out of order
    bad = np.argwhere(backwards)
    assert len(bad) == 0, (
        f"{len(bad)} records earlier than their predecessor, first (lane, slot): {bad[:5].tolist()}"
    )


def _assert_lanes_sane(trace, expect_lanes: int) -> None:
    lanes = trace.lanes
    init = lanes["initialized"]
    assert init.sum() == expect_lanes, f"{init.sum()} lanes initialised, expected {expect_lanes}"
    sm = lanes["sm"][init]
    n_sm = _sm_count()
    assert sm.min() >= 0 and sm.max() < n_sm, f"SM ids {sm.min()}..{sm.max()} outside [0, {n_sm})"
    ev = trace.events
    assert np.all(ev["end_ns"] >= ev["start_ns"]), "a range ends before it starts"
    before = ev["start_ns"] < lanes["anchor_ns"][ev["lane"]]
    assert not before.any(), f"{before.sum()} events before their lane's anchor"


def _assert_complete(trace) -> None:
    n_unmatched = len(trace.unmatched["kind"])
    assert trace.dropped_total == 0, f"{trace.dropped_total} records dropped with room for all"
    assert n_unmatched == 0, f"{n_unmatched} unmatched begins/ends: {trace.unmatched}"


def _loop_reference(grid: int, iters: int) -> torch.Tensor:
    acc = torch.arange(K.THREADS, device="cuda", dtype=torch.float32).repeat(grid) * 1e-3
    for _ in range(iters):
        acc = acc * 1.000001 + 1e-6
    return acc + 1e-6


# -- modes --------------------------------------------------------------------------------------


def test_per_warp_lanes_nest_count_and_share_their_block_sm():
    warps, iters, grid = K.THREADS // 32, 50, 2 * _sm_count()
    prof = _profiler(grid, num_groups=warps, capacity=K.loop_records(iters))
    out = _run_loop(prof, iters, grid, per_warp=True)
    torch.testing.assert_close(out, _loop_reference(grid, iters), rtol=1e-5, atol=1e-6)
    trace = prof.decode()
    _assert_lanes_sane(trace, grid * warps)
    _assert_complete(trace)
    _assert_device_order(prof)
    ev = trace.events
    per_lane = np.bincount(ev["lane"], minlength=grid * warps)
    expect = K.loop_rows(iters)
    assert np.all(per_lane == expect), f"rows per lane {np.unique(per_lane)}, expected {expect}"
    sm = trace.lanes["sm"].reshape(grid, warps)
    assert np.all(sm == sm[:, :1]), "the warps of one block ran on different SMs?"
    # Every iteration range lies inside its lane's loop range.
    loop, it = ev["event"] == K.LOOP, ev["event"] == K.ITER
    assert loop.sum() == grid * warps and it.sum() == grid * warps * iters
    lane_loop_start = np.zeros(grid * warps, np.int64)
    lane_loop_end = np.zeros(grid * warps, np.int64)
    lane_loop_start[ev["lane"][loop]] = ev["start_ns"][loop]
    lane_loop_end[ev["lane"][loop]] = ev["end_ns"][loop]
    inside = (ev["start_ns"][it] >= lane_loop_start[ev["lane"][it]]) & (
        ev["end_ns"][it] <= lane_loop_end[ev["lane"][it]]
    )
    assert inside.all(), f"{(~inside).sum()} iteration ranges outside their loop range"
    ticks = (ev["event"] == K.TICK).sum()
    assert ticks == grid * warps * ((iters + 2) // 3), f"{ticks} ticks"


def test_block_leader_one_lane_per_block():
    iters, grid = 20, 3 * _sm_count()
    prof = _profiler(grid, capacity=K.loop_records(iters))
    _run_loop(prof, iters, grid)
    trace = prof.decode()
    _assert_lanes_sane(trace, grid)
    _assert_complete(trace)
    _assert_device_order(prof)
    per_lane = np.bincount(trace.events["lane"], minlength=grid)
    assert np.all(per_lane == K.loop_rows(iters)), f"rows per lane {np.unique(per_lane)}"
    n_sms = len(np.unique(trace.lanes["sm"]))
    assert n_sms > _sm_count() // 2, f"{grid} blocks landed on only {n_sms} SMs"


def test_warp_group_leaders_write_their_own_group():
    iters, grid = 20, _sm_count()
    prof = _profiler(grid, num_groups=2, capacity=2 * iters)  # a begin and an end per iteration
    out = torch.zeros(grid * 256, device="cuda")
    _launch(K.launch_group, (out, prof.get_buffer(), iters, grid))
    trace = prof.decode()
    _assert_lanes_sane(trace, grid * 2)
    _assert_complete(trace)
    _assert_device_order(prof)
    ev = trace.events
    for group, event in ((0, K.PRODUCE), (1, K.CONSUME)):
        mine = ev["group"] == group
        ids = np.unique(ev["event"][mine])
        assert ids.tolist() == [event], f"group {group} recorded events {ids}, expected [{event}]"
        assert mine.sum() == grid * iters, f"group {group}: {mine.sum()} ranges"
    sm = trace.lanes["sm"].reshape(grid, 2)
    assert np.all(sm[:, 0] == sm[:, 1]), "both warp groups of a block must share its SM"


# -- overflow, shape, disabled -----------------------------------------------------------------


def test_overflow_keeps_the_first_records_and_counts_the_rest_exactly():
    iters, grid, capacity = 40, 2 * _sm_count(), 10
    prof = _profiler(grid, capacity=capacity)
    _run_loop(prof, iters, grid)
    trace = prof.decode()
    lanes = trace.lanes
    attempted = K.loop_records(iters)
    for col, expect in (("written", capacity), ("attempted", attempted)):
        got = np.unique(lanes[col])
        assert got.tolist() == [expect], f"lanes[{col!r}] = {got}, expected {expect}"
    assert trace.dropped_total == grid * (attempted - capacity), trace.dropped_total


@pytest.mark.parametrize(
    ("group", "per_warp", "expect"),
    [
        (1, False, [False, True] * 4),  # group 1 of 2; blocks 4..7 outside
        (2, False, [False] * 8),  # group 2: outside for every block
        (-1, False, [False] * 8),  # negative group: outside
        (0, True, [True, True] * 4),  # warps 0..3 -> groups 0..3, of which 0 and 1 exist
    ],
)
def test_out_of_shape_lanes_write_nothing(group, per_warp, expect):
    grid = 8
    prof = _profiler(4, num_groups=2, capacity=K.loop_records(3))
    words = prof.layout.total_words
    # The profiler buffer sits between guard words; nothing may touch them.
    guard = torch.full((words + 2048,), -1, dtype=torch.int64, device="cuda")
    inner = guard[1024 : 1024 + words]
    inner.copy_(prof.get_buffer())
    _run_loop(prof, 3, grid, group=group, per_warp=per_warp, buf=inner)
    lo, hi = guard[:1024], guard[1024 + words :]
    assert torch.all(lo == -1) and torch.all(hi == -1), (
        f"guard words overwritten: {(lo != -1).sum().item()} before, "
        f"{(hi != -1).sum().item()} after the buffer"
    )
    trace = sm_profiler.decode(sm_profiler.Capture(inner.cpu().numpy(), prof.event_names))
    init = trace.lanes["initialized"].tolist()
    assert init == expect, f"initialised lanes {init}, expected {expect}"
    if not any(expect):
        nonzero = int(torch.count_nonzero(inner[fmt.HEADER_WORDS :]))
        assert nonzero == 0, f"{nonzero} words written with every lane out of shape"


def test_disabled_writes_nothing():
    grid = 16
    prof = _profiler(grid)
    out = _run_loop(prof, 5, grid, profile=False)
    buf = prof.get_buffer()
    nonzero = int(torch.count_nonzero(buf[fmt.HEADER_WORDS :]))
    assert nonzero == 0, f"{nonzero} words written by a kernel compiled with enabled=False"
    torch.testing.assert_close(out, _loop_reference(grid, 5), rtol=1e-5, atol=1e-6)


# -- outputs ------------------------------------------------------------------------------------


def test_capture_saves_and_loads_back(tmp_path):
    iters, grid = 7, 4
    prof = _profiler(grid, num_groups=4, capacity=K.loop_records(iters))
    _run_loop(prof, iters, grid, per_warp=True)
    trace = prof.decode()
    path = tmp_path / "cute.npz"
    prof.save(path)
    again = sm_profiler.decode(sm_profiler.load(path))
    for col in ("lane", "event", "kind", "start_ns", "end_ns"):
        assert np.array_equal(trace.events[col], again.events[col]), f"column {col} differs"


def test_export_perfetto_reads_back_with_perfettos_protos(tmp_path):
    pb2 = pytest.importorskip("perfetto.protos.perfetto.trace.perfetto_trace_pb2")
    iters, grid = 7, 4
    prof = _profiler(grid, num_groups=4, capacity=K.loop_records(iters))
    _run_loop(prof, iters, grid, per_warp=True)
    trace = prof.decode()
    path = tmp_path / "cute.perfetto-trace"
    prof.export(path)
    parsed = pb2.Trace()
    parsed.ParseFromString(path.read_bytes())
    types = [p.track_event.type for p in parsed.packet if p.HasField("track_event")]
    begins = types.count(pb2.TrackEvent.TYPE_SLICE_BEGIN)
    ends = types.count(pb2.TrackEvent.TYPE_SLICE_END)
    instants = types.count(pb2.TrackEvent.TYPE_INSTANT)
    n_ranges = int((trace.events["kind"] == 0).sum())
    n_instants = int((trace.events["kind"] == 1).sum())
    assert n_ranges == grid * 4 * (1 + iters + 1), n_ranges
    # Every range is a slice, and so is each launch's span on the launches track.
    n_slices = n_ranges + len(trace.kernels)
    assert (begins, ends) == (n_slices, n_slices), (begins, ends, n_ranges)
    assert instants == n_instants, (instants, n_instants)


@pytest.mark.parametrize("per_warp", [False, True])
def test_ring_keeps_exactly_the_newest_records(per_warp):
    from ring_check import check_ring_capture

    sms, cap, iters = _sm_count(), 64, 300
    assert len(K.ring_sequence(iters)) >= 10 * cap
    groups = K.THREADS // 32 if per_warp else 1
    prof = sm_profiler.SmProfiler(sms, groups, cap, kernel_name="cute", ring=True)
    _launch(K.launch_ring, (prof.get_buffer(), iters, sms), (per_warp,))
    check_ring_capture(prof.capture(), K.ring_sequence(iters), list(range(sms * groups)))
