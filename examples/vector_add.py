"""
Vector addition: the smallest instrumentation
=============================================

In this example you will learn:

* how to hand a Triton kernel an sm_profiler buffer and open the program's lane with
  ``profiler_init``;
* how to mark a region with ``profiler_event_start`` / ``profiler_event_end``, which return the
  updated context (``ctx = profiler_event_start(ctx, LOAD)``);
* how to turn profiling off at compile time, so that the same kernel costs nothing unprofiled;
* how to read the result: ``print_stats``, the decoded table, and a Perfetto trace.

Runs on a GPU, or without one in Triton's CPU interpreter (smaller sizes, host clock).
"""

# %%
# Motivation
# ----------
#
# A GPU profiler such as Nsight Compute tells you how long a kernel took and which hardware
# counters it moved. It does not tell you *when* program 17 started, on which SM it ran, or how
# long its loads took compared to its stores. sm_profiler answers that from inside the kernel:
# each event stamps ``%globaltimer`` into a per-program lane of a buffer, with no atomics and no
# synchronisation.

import os
import sys

import torch

# Without a GPU, use Triton's CPU interpreter. It is a process-wide switch read when triton (and
# sm_profiler.triton_ops) are imported, so it must be set before those imports.
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
INTERPRET = os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")
DEVICE = "cpu" if INTERPRET else "cuda"

import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from sm_profiler import SmProfiler  # noqa: E402
from sm_profiler.triton_ops import (  # noqa: E402
    profiler_event_end,
    profiler_event_start,
    profiler_init,
)

# %%
# Compute kernel
# --------------
#
# Event ids are ``tl.constexpr`` globals: the id is baked into the record as an immediate, so an
# event costs a timer read and one 8-byte store. ``PROFILE`` is a constexpr too: with
# ``PROFILE=False`` every op compiles away and the kernel is the plain one.

LOAD = tl.constexpr(0)
STORE = tl.constexpr(1)


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, prof, BLOCK: tl.constexpr, PROFILE: tl.constexpr):
    pid = tl.program_id(0)
    # One lane per program: block = pid, group = 0.
    ctx = profiler_init(prof, pid, 0, ENABLED=PROFILE)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n  # the last program may run past the end
    ctx = profiler_event_start(ctx, LOAD)
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    # A load is waited for where its value is first used. after=x + y makes the end stamp wait
    # until both loads have arrived, so the load range really covers the loads.
    ctx = profiler_event_end(ctx, LOAD, after=x + y)
    ctx = profiler_event_start(ctx, STORE)
    tl.store(out_ptr + offs, x + y, mask=mask)
    ctx = profiler_event_end(ctx, STORE)


# %%
# Launcher
# --------
#
# The profiler needs the number of lanes (one per program here) and how many records a lane
# holds: two ranges are four records (a begin and an end each).


def add(x, y, prof=None, block=1024):
    out = torch.empty_like(x)
    n = x.numel()
    grid = (triton.cdiv(n, block),)
    add_kernel[grid](
        x,
        y,
        out,
        n,
        prof.get_buffer() if prof is not None else None,
        BLOCK=block,
        PROFILE=prof is not None and prof.enabled,
    )
    return out


def make_profiler(n, block):
    prof = SmProfiler(
        num_blocks=triton.cdiv(n, block),
        num_groups=1,
        max_events_per_group=4,
        device=DEVICE,
        kernel_name="add_kernel",
    )
    prof.register_event(0, "load")
    prof.register_event(1, "store")
    return prof


# %%
# Correctness and profiling output
# --------------------------------


def main(out_dir="sm_profiler_examples_out/vector_add", small=None):
    """Run, check against torch, print the stats and write a trace. Returns what a test needs."""
    small = INTERPRET if small is None else small
    n, block = (3000, 1024) if small else (1 << 24, 4096)
    torch.manual_seed(0)
    x = torch.rand(n, device=DEVICE)
    y = torch.rand(n, device=DEVICE)
    prof = make_profiler(n, block)
    out = add(x, y, prof, block)
    torch.testing.assert_close(out, x + y)  # the instrumented kernel still adds

    prof.print_stats()
    trace = prof.decode()
    # The decoded table: one row per range, with the SM it ran on and ns timestamps.
    ev = trace.events
    for i in range(min(4, len(trace))):
        print(
            f"block {ev['block'][i]} on SM {ev['sm'][i]}: {trace.event_name(ev['event'][i])} "
            f"took {ev['end_ns'][i] - ev['start_ns'][i]} ns"
        )
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, "vector_add.perfetto-trace")
    prof.export(path)
    print(f"wrote {path}: drag it into https://ui.perfetto.dev or run: sm-profiler open {path}")
    return {"profiler": prof, "trace": trace, "perfetto": path, "n": n, "block": block}


# %%
# Benchmark
# ---------
#
# On a GPU, compare the kernel with profiling compiled in and compiled out: the difference is
# what the instrumentation costs (a few instructions per event).

if __name__ == "__main__":
    res = main(out_dir=sys.argv[1] if len(sys.argv) > 1 else "sm_profiler_examples_out/vector_add")
    if not INTERPRET:
        n = 1 << 24
        x, y = torch.rand(n, device=DEVICE), torch.rand(n, device=DEVICE)
        prof = make_profiler(n, 4096)
        off = SmProfiler(1, enabled=False, device=DEVICE)
        t_on = triton.testing.do_bench(lambda: add(x, y, prof, 4096))
        t_off = triton.testing.do_bench(lambda: add(x, y, off, 4096))
        gbps = 3 * n * 4 / (t_off * 1e-3) / 1e9
        print(f"profiled {t_on * 1e3:.1f} us, unprofiled {t_off * 1e3:.1f} us ({gbps:.0f} GB/s)")
