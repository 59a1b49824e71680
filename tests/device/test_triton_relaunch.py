"""Launches that share one buffer, and programs outside its shape: reported, never merged silently.
Runs the Triton ops under the interpreter (CI) and checks hand-built buffers."""

import warnings

import numpy as np
import pytest
import torch
import triton
import triton.language as tl
from reference_encoder import INSTANT, Lane, Stream, encode

import sm_profiler
from sm_profiler.report.stats import compute_stats, format_stats
from sm_profiler.triton_ops import (
    profiler_event_end,
    profiler_event_instant,
    profiler_event_start,
    profiler_init,
)
from sm_profiler.wire import format as fmt
from sm_profiler.wire.capture import Capture

pytestmark = pytest.mark.skipif(torch.cuda.is_available(), reason="interpreter tests")


@triton.jit
def instants_kernel(prof, N: tl.constexpr):
    ctx = profiler_init(prof, tl.program_id(0), 0)
    for _ in tl.static_range(N):
        ctx = profiler_event_instant(ctx, 1)


@triton.jit
def ranged_kernel(prof, N: tl.constexpr):
    ctx = profiler_init(prof, tl.program_id(0), 0)
    for _ in tl.static_range(N):
        ctx = profiler_event_start(ctx, 1)
        ctx = profiler_event_end(ctx, 1)


@triton.jit
def literal_block_kernel(prof):
    ctx = profiler_init(prof, 0, 0)
    ctx = profiler_event_instant(ctx, 1)


def _launches(*events, grid=2):
    prof = sm_profiler.SmProfiler(grid, 1, 8, device="cpu")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for n in events:
            instants_kernel[(grid,)](prof.get_buffer(), N=n)
    return prof, [str(w.message) for w in caught]


@pytest.mark.parametrize("events", [(3, 1), (1, 3), (2, 2)])
def test_a_second_launch_into_one_buffer_is_reported(events):
    prof, caught = _launches(*events)
    assert len(caught) == 1 and "snapshot()" in caught[0]
    stats = compute_stats(prof.decode())
    assert any("handed out 2 times" in w for w in stats.warnings), stats.warnings


def test_stale_records_of_an_earlier_launch_are_named_by_lane():
    # 3 then 1: slots 1 and 2 still hold the first launch's records, older than slot 0's.
    t0 = 10 * 2**32
    lanes = {
        (0, 0): Lane(
            t0 + 1000, 2, [(INSTANT, 1, t0 + 1100), (INSTANT, 1, t0 + 20), (INSTANT, 1, t0 + 30)]
        ),
        (1, 0): Lane(t0 + 1000, 3, [(INSTANT, 1, t0 + 1200)]),
    }
    words = encode(Stream(2, 1, 4, lanes=lanes))
    trace = sm_profiler.decode(Capture(words=words))
    assert trace.kernels[0].stale_lanes == [0]
    text = " ".join(compute_stats(trace).warnings)
    assert "1 lanes hold records older" in text and "block 0 group 0" in text


def test_one_launch_reports_nothing():
    prof, caught = _launches(3)
    assert not caught
    stats = compute_stats(prof.decode())
    assert not [w for w in stats.warnings if "launch" in w or "shape" in w], stats.warnings


def test_programs_outside_the_shape_are_reported():
    words = encode(Stream(1, 1, 4, lanes={(0, 0): Lane(2**33, 1, [(INSTANT, 1, 2**33 + 5)])}))
    words[fmt.HDR_SCRATCH] = np.uint64(3)  # an out-of-shape lane's drop cursor
    stats = compute_stats(sm_profiler.decode(Capture(words=words)))
    assert any("outside the buffer's shape" in w for w in stats.warnings), stats.warnings


def test_a_literal_block_is_refused_at_compile_time():
    prof = sm_profiler.SmProfiler(4, 1, 4, device="cpu")
    with pytest.raises(Exception, match="block is a Python literal"):
        literal_block_kernel[(4,)](prof.get_buffer())


# -- issue 22: nothing silently wrong under the interpreter -----------------------------------


def _report(prof) -> str:
    return format_stats(compute_stats(prof.decode()), width=100)


def test_a_grid_larger_than_num_blocks_is_reported_under_the_interpreter():
    # The GPU ops flag out-of-shape programs in the header's scratch word; so does the
    # interpreter now, so "4/4 lanes initialised" no longer hides the 4 programs left out.
    prof = sm_profiler.SmProfiler(4, 1, 8, device="cpu")
    instants_kernel[(8,)](prof.get_buffer(), N=2)
    trace = prof.decode()
    assert trace.kernels[0].out_of_shape_writes
    assert "programs outside the buffer's shape (4 blocks" in _report(prof)


def test_one_buffer_passed_to_two_launches_is_reported_under_the_interpreter():
    # get_buffer() once, two launches recording the same amounts: the second overwrites the
    # first exactly, so only the interpreter's "lane opened twice" flag can tell.
    prof = sm_profiler.SmProfiler(2, 1, 8, device="cpu")
    prof.register_event(1, "tick")
    buf = prof.get_buffer()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no get_buffer() warning: it was called once
        instants_kernel[(2,)](buf, N=2)
        instants_kernel[(2,)](buf, N=2)
    trace = prof.decode()
    assert trace.kernels[0].reopened_lanes and not trace.kernels[0].stale_lanes
    text = _report(prof)
    assert "lanes were opened twice: a second launch into the same buffer" in text
    assert "span not shown (launches mixed)" in text


def test_one_launch_opens_no_lane_twice():
    prof = sm_profiler.SmProfiler(2, 1, 8, device="cpu")
    instants_kernel[(2,)](prof.get_buffer(), N=2)
    prof.snapshot()
    instants_kernel[(2,)](prof.get_buffer(), N=2)  # after snapshot(): a fresh buffer
    trace = prof.decode()
    assert not any(k.reopened_lanes or k.out_of_shape_writes for k in trace.kernels)
    assert "span not shown" not in _report(prof)


@pytest.mark.parametrize("events", [(3, 1), (1, 3)])
def test_a_span_that_mixes_launches_is_never_printed(events):
    # 3 then 1: slots 1 and 2 keep the first launch's records, which decode 4.29 s (2**32 ns)
    # after the second's; the span, SM times and waits would show that host-time artefact.
    prof = sm_profiler.SmProfiler(2, 1, 8, device="cpu")
    prof.register_event(1, "tick")
    buf = prof.get_buffer()
    for n in events:
        ranged_kernel[(2,)](buf, N=n)
    stats = compute_stats(prof.decode())
    assert stats.mixed
    text = format_stats(stats, width=100)
    assert "span not shown (launches mixed)" in text
    assert "4.29 s" not in text and "SMs (times in" not in text and "load imbalance" not in text
    assert "SM times not shown" in text
    # In a trace of several captures, the mixed launch's span is left out of the launches table.
    prof.snapshot()
    ranged_kernel[(2,)](prof.get_buffer(), N=1)
    prof.snapshot()
    stats = compute_stats(prof.decode())
    (row,) = stats.launches
    assert row.mixed == 1 and len(row.span_ns) == 1 and max(row.span_ns) < 2**31
    assert "4.29 s" not in format_stats(stats, width=100)


def test_an_unregistered_event_id_is_named_in_a_warning():
    prof = sm_profiler.SmProfiler(2, 1, 8, device="cpu")
    prof.register_event(0, "load")
    instants_kernel[(2,)](prof.get_buffer(), N=1)  # records event 1, never registered
    stats = compute_stats(prof.decode())
    (w,) = [w for w in stats.warnings if "without a name" in w]
    assert '1 event id without a name (1; shown as "event 1")' in w
    assert 'prof.register_event(1, "load")' in w
    prof.register_event(1, "tick")
    assert not [w for w in compute_stats(prof.decode()).warnings if "without a name" in w]
