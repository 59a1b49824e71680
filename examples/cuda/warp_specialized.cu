// A plain nvcc program profiled with sm_profiler: a warp-specialised producer / consumer kernel.
//
// In this example you will learn:
//   * how a C++ program sets up the buffer with sm_profiler_host.h (create, register names,
//     init, get_device_ptr) and writes a capture file (export_to_file) that the Python tools read:
//     `sm-profiler stats`, `sm-profiler export`, `sm_profiler.load`;
//   * how each warp group of a warp-specialised kernel gets its own lane, written by one chosen
//     leader thread (sm_profiler_init_leader), named with sm_profiler_register_group;
//   * how sm_profiler_event_end_after makes a range end only once a loaded value has arrived;
//   * that 3D grids work: the lane's block is the linear block index.
//
// Build and run: `make run` (see the Makefile). The kernel: each block sums the squares of its
// rows. Warps 0-3 (producer) copy tiles of the input into one of two shared-memory buffers,
// warps 4-7 (consumer) reduce the other one; a __syncthreads per tile hands the buffers over.
#include <sm_profiler_host.h>
#include <sm_profiler.cuh>

#include <cmath>
#include <vector>

#define EVT_LOAD 0
#define EVT_REDUCE 1
#define EVT_HANDOFF 2
#define GROUP_PRODUCER 0
#define GROUP_CONSUMER 1
#define TILE 1024   // floats per tile
#define TILES 16    // tiles per block
#define THREADS 256

__global__ void rows_sum_squares(const float* in, float* out, unsigned long long* prof) {
    __shared__ float stage[2][TILE];
    __shared__ float partial[THREADS / 2];
    unsigned int tid = threadIdx.x, block = sm_profiler_get_block_idx();
    bool producer = tid < THREADS / 2;
    // Group 0 is written by thread 0, group 1 by thread 128 (the first consumer thread).
    sm_profiler_leader_lane lane = sm_profiler_init_leader(
        prof, block, producer ? GROUP_PRODUCER : GROUP_CONSUMER, tid == 0 || tid == THREADS / 2);
    const float* rows = in + (size_t)block * TILE * TILES;
    float acc = 0.f;
    for (int t = 0; t <= TILES; ++t) {
        if (producer && t < TILES) {  // load tile t into buffer t % 2
            sm_profiler_event_start(lane, EVT_LOAD);
            float v = 0.f;
            for (int i = tid; i < TILE; i += THREADS / 2) {
                v = rows[(size_t)t * TILE + i];
                stage[t % 2][i] = v;
            }
            sm_profiler_event_end_after(lane, EVT_LOAD, __float_as_uint(v));
        } else if (!producer && t > 0) {  // reduce tile t - 1
            SM_PROFILER_RANGE(lane, EVT_REDUCE);
            for (int i = tid - THREADS / 2; i < TILE; i += THREADS / 2) {
                float v = stage[(t - 1) % 2][i];
                acc += v * v;
            }
        }
        sm_profiler_event_start(lane, EVT_HANDOFF);
        __syncthreads();
        sm_profiler_event_end(lane, EVT_HANDOFF);
    }
    if (!producer) partial[tid - THREADS / 2] = acc;
    __syncthreads();
    if (tid == THREADS / 2) {
        float s = 0.f;
        for (int i = 0; i < THREADS / 2; ++i) s += partial[i];
        out[block] = s;
    }
}

static int check(cudaError_t err, const char* what) {
    if (err == cudaSuccess) return 0;
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(err));
    return 1;
}

int main(int argc, char** argv) {
    const char* path = argc > 1 ? argv[1] : "warp_specialized.npz";
    dim3 grid(8, 8, 4);  // 256 blocks, numbered x fastest, then y, then z
    unsigned int blocks = grid.x * grid.y * grid.z;
    size_t n = (size_t)blocks * TILE * TILES;

    // Each lane: TILES ranges of its own work plus TILES + 1 hand-offs, two records each.
    sm_profiler_buffer_t prof = sm_profiler_create_buffer(blocks, 2, 2 * (2 * TILES + 1), 1);
    if (!prof) return 1;
    sm_profiler_register_event(prof, EVT_LOAD, "load");
    sm_profiler_register_event(prof, EVT_REDUCE, "reduce");
    sm_profiler_register_event(prof, EVT_HANDOFF, "handoff");
    sm_profiler_register_group(prof, GROUP_PRODUCER, "producer");
    sm_profiler_register_group(prof, GROUP_CONSUMER, "consumer");
    sm_profiler_set_kernel_name(prof, "rows_sum_squares");

    std::vector<float> host(n);
    for (size_t i = 0; i < n; ++i) host[i] = (float)((i * 2654435761u) % 1000) * 1e-3f;
    float *in = nullptr, *out = nullptr;
    if (check(cudaMalloc((void**)&in, n * sizeof(float)), "cudaMalloc") ||
        check(cudaMalloc((void**)&out, blocks * sizeof(float)), "cudaMalloc") ||
        check(cudaMemcpy(in, host.data(), n * sizeof(float), cudaMemcpyHostToDevice), "copy")) {
        return 1;
    }
    sm_profiler_init_buffer(prof);  // before each launch
    rows_sum_squares<<<grid, THREADS>>>(in, out,
                                        (unsigned long long*)sm_profiler_get_device_ptr(prof));
    if (check(cudaDeviceSynchronize(), "kernel")) return 1;

    std::vector<float> sums(blocks);
    if (check(cudaMemcpy(sums.data(), out, blocks * sizeof(float), cudaMemcpyDeviceToHost), "copy"))
        return 1;
    for (unsigned int b = 0; b < blocks; ++b) {  // the profiled kernel still sums
        double expect = 0;
        for (size_t i = 0; i < (size_t)TILE * TILES; ++i) {
            double v = host[(size_t)b * TILE * TILES + i];
            expect += v * v;
        }
        if (std::fabs(sums[b] - expect) > 1e-3 * expect) {
            std::fprintf(stderr, "block %u: sum %f, expected %f\n", b, sums[b], expect);
            return 1;
        }
    }
    if (sm_profiler_export_to_file(prof, path) != 0) return 1;
    std::printf("wrote %s: run `sm-profiler stats %s` or `sm-profiler export %s trace.json`\n",
                path, path, path);
    sm_profiler_destroy_buffer(prof);
    cudaFree(in);
    cudaFree(out);
    return 0;
}
