"""
A CUDA C++ kernel profiled from PyTorch: ``torch.utils.cpp_extension.load_inline``
==================================================================================

In this example you will learn:

* how to include ``sm_profiler.cuh`` in a CUDA C++ kernel built by ``load_inline``
  (``extra_include_paths=[sm_profiler.cuda_include_dir()]``);
* how a kernel opens its block's lane (``sm_profiler_init``) and marks ranges with
  ``sm_profiler_event_start/end`` and the RAII ``SM_PROFILER_RANGE``;
* that ``SmProfiler`` needs nothing special for a C++ kernel: pass ``prof.get_buffer()``;
* how ``-DSM_PROFILER_DISABLE`` builds the same source with profiling compiled away.

The kernel is the classic shared-memory matrix transpose: a 2D grid of 32 x 32 tiles, a 2D block
of 32 x 8 threads. Needs a CUDA GPU and nvcc (load_inline compiles on first use, about a minute).
"""

# %%
# Motivation
# ----------
#
# A transpose tile has two phases, a coalesced load of rows into shared memory and a coalesced
# store of columns out of it, separated by a barrier. How long does each take, on which SM, and
# how long do the blocks wait at the barrier? One lane per block answers that.

import os
import sys

import torch


def _missing() -> str | None:
    if not torch.cuda.is_available():
        return "needs a CUDA GPU (and nvcc): the kernel is CUDA C++, with no CPU fallback"
    from torch.utils.cpp_extension import CUDA_HOME

    if CUDA_HOME is None:
        return "needs nvcc: install the CUDA toolkit or set CUDA_HOME"
    return None


if __name__ == "__main__" and (_why := _missing()):
    print(f"examples/cuda_load_inline.py: skipped, {_why}")
    sys.exit(0)

import sm_profiler  # noqa: E402
from sm_profiler import SmProfiler  # noqa: E402

# %%
# Compute kernel
# --------------
#
# Every thread calls the init and the events: warp 0 of the block stores (its threads write the
# same word, one transaction) and the other warps branch past each event. Event ids are plain
# integers 0..4095, named on the host with register_event.

CUDA_SRC = r"""
#include <cuda_runtime.h>
#include <sm_profiler.cuh>

#define TILE 32
#define ROWS 8
#define EVT_LOAD 0
#define EVT_BARRIER 1
#define EVT_STORE 2

__global__ void transpose_kernel(const float* in, float* out, int n, unsigned long long* prof) {
    __shared__ float tile[TILE][TILE + 1];  // +1: no bank conflicts on the column reads
    sm_profiler_lane lane = sm_profiler_init(prof);  // block = the linear block index
    int x = blockIdx.x * TILE + threadIdx.x, y = blockIdx.y * TILE + threadIdx.y;
    {
        SM_PROFILER_RANGE(lane, EVT_LOAD);  // ends at the closing brace
        for (int j = 0; j < TILE; j += ROWS)
            if (x < n && y + j < n) tile[threadIdx.y + j][threadIdx.x] = in[(y + j) * n + x];
    }
    sm_profiler_event_start(lane, EVT_BARRIER);
    __syncthreads();
    sm_profiler_event_end(lane, EVT_BARRIER);
    x = blockIdx.y * TILE + threadIdx.x;
    y = blockIdx.x * TILE + threadIdx.y;
    sm_profiler_event_start(lane, EVT_STORE);
    for (int j = 0; j < TILE; j += ROWS)
        if (x < n && y + j < n) out[(y + j) * n + x] = tile[threadIdx.x][threadIdx.y + j];
    sm_profiler_event_end(lane, EVT_STORE);
}

void transpose_launch(const float* in, float* out, int n, unsigned long long* prof,
                      cudaStream_t stream) {
    dim3 grid((n + TILE - 1) / TILE, (n + TILE - 1) / TILE), block(TILE, ROWS);
    transpose_kernel<<<grid, block, 0, stream>>>(in, out, n, prof);
}
"""
# The binding: tensors in, raw pointers to the launcher. The .cu file above includes no torch
# header, so it compiles in seconds; the buffer is SmProfiler's int64 tensor, as is.
CPP_SRC = r"""
#include <cuda_runtime.h>
void transpose_launch(const float*, float*, int, unsigned long long*, cudaStream_t);
void transpose(torch::Tensor in, torch::Tensor out, torch::Tensor prof, int64_t stream) {
    transpose_launch(in.data_ptr<float>(), out.data_ptr<float>(), (int)in.size(0),
                     reinterpret_cast<unsigned long long*>(prof.data_ptr<int64_t>()),
                     reinterpret_cast<cudaStream_t>(stream));
}
"""
EVENTS = {0: "load", 1: "barrier", 2: "store"}
TILE = 32


def build(profile: bool = True):
    """Compile the extension (cached by torch in its extensions folder)."""
    from torch.utils.cpp_extension import load_inline

    return load_inline(
        name="sm_profiler_transpose" + ("" if profile else "_off"),
        cpp_sources=CPP_SRC,
        cuda_sources=CUDA_SRC,
        functions=["transpose"],
        extra_include_paths=[sm_profiler.cuda_include_dir()],
        extra_cuda_cflags=["-O3"] + ([] if profile else ["-DSM_PROFILER_DISABLE"]),
    )


# %%
# Launcher
# --------
#
# One lane per block: (n / 32)^2 blocks, one group, three ranges (six records) per lane.


def make_profiler(n: int) -> SmProfiler:
    tiles = -(-n // TILE)
    prof = SmProfiler(tiles * tiles, 1, 6, kernel_name="transpose_kernel")
    for evt, name in EVENTS.items():
        prof.register_event(evt, name)
    return prof


# %%
# Correctness and profiling output
# --------------------------------


def main(out_dir="sm_profiler_examples_out/cuda_load_inline", n=2048):
    """Transpose, check, print the stats, write a trace. Returns what a test needs."""
    ext = build()
    x = torch.rand(n, n, device="cuda")
    out = torch.empty_like(x)
    prof = make_profiler(n)
    ext.transpose(x, out, prof.get_buffer(), torch.cuda.current_stream().cuda_stream)
    torch.testing.assert_close(out, x.t())  # the profiled kernel still transposes
    prof.print_stats()
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, "cuda_transpose.perfetto-trace")
    prof.export(path)
    print(f"wrote {path}: drag it into https://ui.perfetto.dev or run: sm-profiler open {path}")
    return {"profiler": prof, "trace": prof.decode(), "perfetto": path, "n": n}


# %%
# Benchmark
# ---------
#
# The same source with -DSM_PROFILER_DISABLE is the plain kernel: the difference is what the
# six events per block cost.

if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "sm_profiler_examples_out/cuda_load_inline")
    import triton.testing

    n = 8192
    x, out = torch.rand(n, n, device="cuda"), torch.empty(n, n, device="cuda")
    on, off, prof = build(True), build(False), make_profiler(n)
    buf, stream = prof.get_buffer(), torch.cuda.current_stream().cuda_stream
    t_on = triton.testing.do_bench(lambda: on.transpose(x, out, buf, stream))
    t_off = triton.testing.do_bench(lambda: off.transpose(x, out, buf, stream))
    print(f"profiled {t_on * 1e3:.1f} us, -DSM_PROFILER_DISABLE {t_off * 1e3:.1f} us")
