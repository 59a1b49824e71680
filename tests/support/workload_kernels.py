"""Small Triton kernels that record through a profiler's buffer, for the launch-slot and merge
tests that run under the interpreter (test_slots.py, test_workload.py): `instants` records N
instants per program, `ranged` one range."""

import triton
import triton.language as tl

import sm_profiler
from sm_profiler.triton_ops import (
    profiler_event_end,
    profiler_event_instant,
    profiler_event_start,
    profiler_init,
)


@triton.jit
def instants(prof, N: tl.constexpr):
    ctx = profiler_init(prof, tl.program_id(0), 0)
    for _ in tl.static_range(N):
        ctx = profiler_event_instant(ctx, 1)


@triton.jit
def ranged(prof):
    ctx = profiler_init(prof)
    ctx = profiler_event_start(ctx, 0)
    ctx = profiler_event_end(ctx, 0)


def slotted_profiler(slots, blocks=2):
    """A CPU profiler of `blocks` blocks, one group, 8 records a lane, `slots` launch slots;
    events 0 'work' and 1 'tick'."""
    p = sm_profiler.SmProfiler(blocks, 1, 8, device="cpu", slots=slots)
    p.register_event(0, "work")
    p.register_event(1, "tick")
    return p
