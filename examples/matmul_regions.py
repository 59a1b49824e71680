"""
Matrix multiplication: where the time goes inside a program
===========================================================

In this example you will learn:

* how to nest ranges: a ``k_loop`` range around the K loop, and in each step a ``load`` range
  and an ``mma`` range, then a ``store`` range;
* why a range end needs ``after=value``: the timer read is an instruction like any other, and
  without a data dependency it does not wait for a load to arrive or an MMA to finish;
* what ``after=`` costs, and how to compare the profiled kernel with the unprofiled one;
* how to read per-event totals from ``SmProfiler.stats()``.

Runs on a GPU, or without one in Triton's CPU interpreter (small matrices, host clock).
"""

# %%
# Motivation
# ----------
#
# A kernel-level profiler says "this matmul took 310 us". Inside each program the time splits
# between waiting for tiles of A and B, the tensor-core MMAs and the final store. Stamping each
# region in every program gives that split per program and per SM, and shows programs that
# wait longer than others.
#
# The ordering caveat
# ~~~~~~~~~~~~~~~~~~~
#
# GPUs issue a load and move on; the load's result is waited for where it is first *used*. A
# range end stamped right after ``tl.load`` therefore measures the time to *issue* the load, and
# the wait for the data lands in whatever range uses it first (here: the MMA). Likewise the
# compiler may schedule independent arithmetic across a timer read. ``after=value`` puts a data
# dependency on ``value`` in front of the timer read, so the end is stamped only once ``value``
# exists. A tensor passed to ``after=`` is first reduced with ``tl.sum``: a reduction across the
# program, which also waits for the other warps and costs a little time itself. Events inside a
# K loop also change the schedule (e.g. software pipelining of loads), so compare the profiled
# kernel's time with the unprofiled one (``PROFILE=False``) before trusting the split: on an
# H200 (4096^3, fp16) the profiled kernel took 0.48 ms against 0.25 ms unprofiled, most of it
# the two reductions per K step that ``after=`` adds. Use it to find where time goes, not to
# time the kernel.

import os
import sys

import torch

# Without a GPU, use Triton's CPU interpreter (must be set before triton is imported).
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

K_LOOP, LOAD, MMA, STORE = (tl.constexpr(i) for i in range(4))
EVENT_NAMES = ["k_loop", "load", "mma", "store"]

# %%
# Compute kernel
# --------------
#
# A plain tiled matmul on a 2D grid: program (m, n) computes one BM x BN tile of C.
# ``profiler_init`` without a block index uses the linear program id (m + n * grid_m).


@triton.jit
def matmul_kernel(
    a_ptr,
    b_ptr,
    c_ptr,
    M,
    N,
    K,
    prof,
    BM: tl.constexpr,
    BN: tl.constexpr,
    BK: tl.constexpr,
    PROFILE: tl.constexpr,
):
    ctx = profiler_init(prof, ENABLED=PROFILE)
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    ctx = profiler_event_start(ctx, K_LOOP)
    for k in range(0, K, BK):
        rk = k + tl.arange(0, BK)
        ctx = profiler_event_start(ctx, LOAD)
        a = tl.load(a_ptr + rm[:, None] * K + rk[None, :])
        b = tl.load(b_ptr + rk[:, None] * N + rn[None, :])
        # Without after=, this end would be stamped as soon as the loads are issued.
        ctx = profiler_event_end(ctx, LOAD, after=tl.sum(a) + tl.sum(b))
        ctx = profiler_event_start(ctx, MMA)
        acc = tl.dot(a, b, acc)
        ctx = profiler_event_end(ctx, MMA, after=acc)  # wait for the MMA's result
    ctx = profiler_event_end(ctx, K_LOOP)
    ctx = profiler_event_start(ctx, STORE)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc.to(c_ptr.dtype.element_ty))
    ctx = profiler_event_end(ctx, STORE)


# %%
# Launcher
# --------
#
# Each program records 2 records for k_loop, 4 per K step (load and mma) and 2 for store.


def events_per_program(K, BK):
    return 2 + 4 * (K // BK) + 2


def matmul(a, b, prof, BM, BN, BK, num_warps=4):
    M, K = a.shape
    _, N = b.shape
    assert M % BM == 0 and N % BN == 0 and K % BK == 0, "this example has no masking"
    c = torch.empty((M, N), device=a.device, dtype=a.dtype)
    grid = (M // BM, N // BN)
    matmul_kernel[grid](
        a,
        b,
        c,
        M,
        N,
        K,
        prof.get_buffer(),
        BM=BM,
        BN=BN,
        BK=BK,
        PROFILE=prof.enabled,
        num_warps=num_warps,
    )
    return c


def make_profiler(M, N, K, BM, BN, BK, enabled=True):
    prof = SmProfiler(
        num_blocks=(M // BM) * (N // BN),
        max_events_per_group=events_per_program(K, BK),
        enabled=enabled,
        device=DEVICE,
        kernel_name="matmul",
    )
    for i, name in enumerate(EVENT_NAMES):
        prof.register_event(i, name)
    return prof


def sizes(small):
    if small:  # the interpreter runs about 30 ms per K step: keep it to a few programs
        return dict(M=32, N=48, K=64, BM=16, BN=16, BK=16), torch.float32
    return dict(M=4096, N=4096, K=4096, BM=128, BN=128, BK=64), torch.float16


# %%
# Correctness and profiling output
# --------------------------------


def main(out_dir="sm_profiler_examples_out/matmul_regions", small=None):
    small = INTERPRET if small is None else small
    s, dtype = sizes(small)
    torch.manual_seed(0)
    a = torch.randn(s["M"], s["K"], device=DEVICE, dtype=dtype)
    b = torch.randn(s["K"], s["N"], device=DEVICE, dtype=dtype)
    prof = make_profiler(**s)
    c = matmul(a, b, prof, s["BM"], s["BN"], s["BK"])
    torch.testing.assert_close(c.float(), (a.float() @ b.float()), atol=0.5, rtol=0.02)

    prof.print_stats()
    stats = prof.stats()
    load, mma, store = (stats.event(n) for n in ("load", "mma", "store"))
    total = load.total_ns + mma.total_ns + store.total_ns
    print(
        f"inside the programs: load {100 * load.total_ns / total:.0f}%, "
        f"mma {100 * mma.total_ns / total:.0f}%, store {100 * store.total_ns / total:.0f}% "
        "of the timed regions"
    )
    os.makedirs(out_dir, exist_ok=True)
    paths = {
        "perfetto": os.path.join(out_dir, "matmul_regions.perfetto-trace"),
        "json": os.path.join(out_dir, "matmul_regions.json"),
    }
    prof.export(paths["perfetto"])
    prof.export(paths["json"])
    print(f"wrote {paths['perfetto']} and {paths['json']}")
    return {"profiler": prof, "trace": prof.decode(), "stats": stats, "sizes": s, **paths}


# %%
# Benchmark
# ---------
#
# The profiled kernel against the same kernel with the ops compiled out, and against torch.

if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "sm_profiler_examples_out/matmul_regions")
    if not INTERPRET:
        s, dtype = sizes(small=False)
        a = torch.randn(s["M"], s["K"], device=DEVICE, dtype=dtype)
        b = torch.randn(s["K"], s["N"], device=DEVICE, dtype=dtype)
        on, off = make_profiler(**s), make_profiler(**s, enabled=False)
        blk = (s["BM"], s["BN"], s["BK"])
        t_on = triton.testing.do_bench(lambda: matmul(a, b, on, *blk))
        t_off = triton.testing.do_bench(lambda: matmul(a, b, off, *blk))
        t_torch = triton.testing.do_bench(lambda: a @ b)
        tflops = 2 * s["M"] * s["N"] * s["K"] / (t_off * 1e-3) / 1e12
        print(
            f"profiled {t_on:.3f} ms, unprofiled {t_off:.3f} ms ({tflops:.0f} TFLOP/s), "
            f"torch {t_torch:.3f} ms"
        )
