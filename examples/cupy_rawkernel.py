"""
A CUDA C++ kernel compiled by NVRTC: CuPy ``RawKernel``, one lane per warp
=========================================================================

In this example you will learn:

* how to compile ``sm_profiler.cuh`` with NVRTC (CuPy's ``RawKernel``), passing
  ``-I`` + ``sm_profiler.cuda_include_dir()``;
* how every warp records into its own lane (``sm_profiler_init_per_warp``), so that warps of one
  block that do different amounts of work show up as different timeline rows;
* how to hand a torch-allocated ``SmProfiler`` buffer to a CuPy kernel (``cupy.from_dlpack``).

The kernel is a persistent grid-stride sum of squares: each warp takes chunks of the input until
none are left, one range per chunk, an instant when it is done. Needs a CUDA GPU and CuPy.
"""

# %%
# Compute kernel
# --------------
#
# NVRTC has no standard headers; sm_profiler.cuh needs none. Warp w of block b writes lane
# (b, w): the buffer has one group per warp.

import importlib.util
import os
import sys

import numpy as np
import torch


def _missing() -> str | None:
    if not torch.cuda.is_available():
        return "needs a CUDA GPU: the kernel is CUDA C++, with no CPU fallback"
    if importlib.util.find_spec("cupy") is None:
        return "needs CuPy: pip install cupy-cuda12x (or the build for your CUDA)"
    return None


if __name__ == "__main__" and (_why := _missing()):
    print(f"examples/cupy_rawkernel.py: skipped, {_why}")
    sys.exit(0)

import sm_profiler  # noqa: E402
from sm_profiler import SmProfiler  # noqa: E402

CUDA_SRC = r"""
#include <sm_profiler.cuh>

#define EVT_CHUNK 0
#define EVT_DONE 1
#define CHUNK 1024

extern "C" __global__ void sum_squares(const float* x, long long n, float* out,
                                       unsigned long long* prof) {
    sm_profiler_warp_lane lane = sm_profiler_init_per_warp(prof);
    unsigned int warp = sm_profiler_get_warp_id(), lane_id = sm_profiler_get_lane_id();
    unsigned int warps_per_block = blockDim.x / 32;
    long long first = (long long)blockIdx.x * warps_per_block + warp;
    long long stride = (long long)gridDim.x * warps_per_block;
    float acc = 0.f;
    for (long long c = first; c * CHUNK < n; c += stride) {
        SM_PROFILER_RANGE(lane, EVT_CHUNK);
        for (long long i = c * CHUNK + lane_id; i < n && i < (c + 1) * CHUNK; i += 32)
            acc += x[i] * x[i];
    }
    for (int o = 16; o > 0; o >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, o);
    if (lane_id == 0) atomicAdd(out, acc);
    sm_profiler_event_instant(lane, EVT_DONE);
}
"""
WARPS_PER_BLOCK = 8
CHUNK = 1024


def kernel():
    import cupy

    return cupy.RawKernel(
        CUDA_SRC,
        "sum_squares",
        # The digest: CuPy caches builds by source and options, not by the included headers.
        options=(
            f"-I{sm_profiler.cuda_include_dir()}",
            "--std=c++17",
            f"-DSM_PROFILER_HEADERS={sm_profiler.record.cuda.headers_digest()}",
        ),
    )


# %%
# Launcher
# --------
#
# A persistent grid: one block per SM. Each warp takes about chunks / warps of the chunks; the
# lane needs two records per chunk and one for the instant.


def make_profiler(n: int, blocks: int) -> SmProfiler:
    warps = blocks * WARPS_PER_BLOCK
    chunks = -(-n // CHUNK)
    chunks_per_warp = -(-chunks // warps)
    prof = SmProfiler(blocks, WARPS_PER_BLOCK, 2 * chunks_per_warp + 1, kernel_name="sum_squares")
    prof.register_event(0, "chunk")
    prof.register_event(1, "done")
    return prof


def sum_squares(x: torch.Tensor, prof: SmProfiler, blocks: int) -> float:
    import cupy

    xc = cupy.from_dlpack(x)
    out = cupy.zeros(1, dtype=cupy.float32)
    buf = cupy.from_dlpack(prof.get_buffer())  # the same memory, no copy
    kernel()((blocks,), (32 * WARPS_PER_BLOCK,), (xc, np.int64(x.numel()), out, buf))
    cupy.cuda.get_current_stream().synchronize()
    return float(out[0])


# %%
# Correctness and profiling output
# --------------------------------


def main(out_dir="sm_profiler_examples_out/cupy_rawkernel", n=1 << 22):
    """Sum, check, print the stats, write a trace. Returns what a test needs."""
    blocks = torch.cuda.get_device_properties(0).multi_processor_count
    x = torch.rand(n, device="cuda")
    prof = make_profiler(n, blocks)
    total = sum_squares(x, prof, blocks)
    expect = float((x.double() ** 2).sum())
    assert abs(total - expect) <= 1e-4 * expect, (total, expect)
    prof.print_stats()
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, "cupy_sum_squares.perfetto-trace")
    prof.export(path)
    print(f"wrote {path}: drag it into https://ui.perfetto.dev or run: sm-profiler open {path}")
    return {"profiler": prof, "trace": prof.decode(), "perfetto": path, "n": n, "blocks": blocks}


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "sm_profiler_examples_out/cupy_rawkernel")
