// The nvcc path of the GPU tests: run profiled_kernel.cuh's kernel through sm_profiler_host.h and
// write a capture file.
//   gpu_capture OUT.npz MODE ITERS CAPACITY NUM_BLOCKS NUM_GROUPS GX GY GZ BX BY BZ
// NUM_BLOCKS below the grid's block count leaves the extra blocks out of the buffer's shape.
#include <sm_profiler_host.h>

#include "profiled_kernel.cuh"

int main(int argc, char** argv) {
    if (argc != 13) {
        std::fprintf(stderr, "usage: %s OUT MODE ITERS CAPACITY NUM_BLOCKS NUM_GROUPS GX GY GZ "
                             "BX BY BZ\n", argv[0]);
        return 2;
    }
    int a[12];
    for (int i = 2; i < 13; ++i) a[i] = std::atoi(argv[i]);
    int mode = a[2], iters = a[3];
    dim3 grid(a[7], a[8], a[9]), block(a[10], a[11], a[12]);
    sm_profiler_buffer_t prof = sm_profiler_create_buffer(a[5], a[6], a[4], 1);
    if (!prof) return 1;
    sm_profiler_register_event(prof, EVT_ITER, "iter");
    sm_profiler_register_event(prof, EVT_TAIL, "tail");
    sm_profiler_register_event(prof, EVT_START, "start");
    sm_profiler_set_kernel_name(prof, "smp_test_kernel");
    float* out = nullptr;
    size_t n = (size_t)grid.x * grid.y * grid.z * block.x * block.y * block.z;
    if (cudaMalloc((void**)&out, n * sizeof(float)) != cudaSuccess) return 1;
    smp_test_kernel<<<grid, block>>>(out, (unsigned long long*)sm_profiler_get_device_ptr(prof),
                                     iters, mode);
    cudaError_t err = cudaDeviceSynchronize();
    if (err != cudaSuccess) {
        std::fprintf(stderr, "kernel failed: %s\n", cudaGetErrorString(err));
        return 1;
    }
    int rc = sm_profiler_export_to_file(prof, argv[1]);
    sm_profiler_destroy_buffer(prof);
    cudaFree(out);
    return rc;
}
