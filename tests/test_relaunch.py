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
from sm_profiler import format as fmt
from sm_profiler.capture import Capture
from sm_profiler.stats import compute_stats
from sm_profiler.triton_ops import profiler_event_instant, profiler_init

pytestmark = pytest.mark.skipif(torch.cuda.is_available(), reason="interpreter tests")


@triton.jit
def instants_kernel(prof, N: tl.constexpr):
    ctx = profiler_init(prof, tl.program_id(0), 0)
    for _ in tl.static_range(N):
        ctx = profiler_event_instant(ctx, 1)


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
    lanes = {(0, 0): Lane(t0 + 1000, 2, [(INSTANT, 1, t0 + 1100), (INSTANT, 1, t0 + 20),
                                         (INSTANT, 1, t0 + 30)]),
             (1, 0): Lane(t0 + 1000, 3, [(INSTANT, 1, t0 + 1200)])}  # fmt: skip
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
