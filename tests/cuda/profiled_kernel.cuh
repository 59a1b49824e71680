// The kernel the GPU tests load three ways (torch load_inline, CuPy RawKernel, nvcc), in every
// lane mode, with 1D/2D/3D grids and blocks. NVRTC-safe: no standard headers.
//
// Per lane, in order: instant(EVT_START); `iters` ranges of EVT_ITER (RAII); one range of
// EVT_TAIL whose end waits for the result (end_after). 1 + 2 * iters + 2 records.
#include <sm_profiler.cuh>

#define EVT_ITER 1
#define EVT_TAIL 2
#define EVT_START 3

template <class LANE>
__device__ __forceinline__ float smp_test_body(LANE& lane, float acc, int iters) {
    sm_profiler_event_instant(lane, EVT_START);
    for (int i = 0; i < iters; ++i) {
        SM_PROFILER_RANGE(lane, EVT_ITER);
        for (int j = 0; j < 64; ++j) acc = acc * 1.000001f + 1e-6f;
    }
    sm_profiler_event_start(lane, EVT_TAIL);
    acc = sqrtf(acc);
    sm_profiler_event_end_after(lane, EVT_TAIL, __float_as_uint(acc));
    return acc;
}

// mode 0: per block (group 0); 1: per warp (groups = warps); 2: leaders, group 0 written by
// thread 0 and group 1 by thread 64 (the first thread of warp 2).
extern "C" __global__ void smp_test_kernel(float* out, unsigned long long* prof, int iters,
                                           int mode) {
    unsigned int tid = sm_profiler_get_thread_idx();
    unsigned int nthreads = blockDim.x * blockDim.y * blockDim.z;
    unsigned int block = sm_profiler_get_block_idx();
    float acc = (float)tid * 1e-3f;
    if (mode == 0) {
        sm_profiler_lane lane = sm_profiler_init(prof);
        acc = smp_test_body(lane, acc, iters);
    } else if (mode == 1) {
        sm_profiler_warp_lane lane = sm_profiler_init_per_warp(prof);
        acc = smp_test_body(lane, acc, iters);
    } else {
        sm_profiler_leader_lane lane =
            sm_profiler_init_leader(prof, block, tid >= 64 ? 1 : 0, tid == 0 || tid == 64);
        acc = smp_test_body(lane, acc, iters);
    }
    out[(unsigned long long)block * nthreads + tid] = acc;
}
