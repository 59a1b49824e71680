// Writes a capture file through sm_profiler_host.h without CUDA (SM_PROFILER_HOST_NO_CUDA):
// the test plays the device, writing records into the buffer as the kernel's events would.
//   host_writer OUT.npz [launches]
// Lanes: 3 blocks x 2 groups, capacity 4. Block b, group g on SM 10 + b; each lane records
// begin/end of event 1 (b + g + 1 times, times 1000 * k ns after the anchor); lane (2, 1)
// attempts 6 records and keeps 4 (last_dropped 5).
#include <sm_profiler_host.h>

static void play_device(uint64_t* words, uint32_t launch) {
    const uint32_t blocks = 3, groups = 2, cap = 4;
    for (uint32_t b = 0; b < blocks; ++b) {
        for (uint32_t g = 0; g < groups; ++g) {
            uint64_t* lane = words + SM_PROFILER_HEADER_WORDS +
                             (uint64_t)(b * groups + g) * (SM_PROFILER_LANE_HEADER_WORDS + cap);
            uint64_t anchor = 5000000000ull + launch * 1000000ull + b * 100;
            uint32_t attempted = (b == 2 && g == 1) ? 6 : 2 * ((b + g) % 2 + 1);
            lane[0] = anchor;
            uint64_t last_dropped = attempted > cap ? attempted - 1 : 0;
            lane[1] = (10 + b) | (last_dropped << 32);
            for (uint32_t i = 0; i < attempted && i < cap; ++i) {
                uint32_t kind = i % 2 ? SM_PROFILER_KIND_END : SM_PROFILER_KIND_BEGIN;
                uint64_t tag = (1u << SM_PROFILER_EVENT_SHIFT) | kind;
                lane[2 + i] = (tag << 32) | (uint32_t)(anchor + 1000 * (i + 1));
            }
        }
    }
}

int main(int argc, char** argv) {
    if (argc < 2) return 2;
    int launches = argc > 2 ? std::atoi(argv[2]) : 1;
    sm_profiler_buffer_t prof = sm_profiler_create_buffer(3, 2, 4, 1);
    if (!prof) return 1;
    if (sm_profiler_register_event(prof, 1, "compute \"main\" loop") ||
        sm_profiler_register_group(prof, 0, "producer") ||
        sm_profiler_register_group(prof, 1, "consumer") ||
        sm_profiler_set_kernel_name(prof, "host_writer") ||
        sm_profiler_set_metadata(prof, "launch_label", "step\t1 \\ ok")) {
        return 1;
    }
    for (int l = 0; l < launches; ++l) {
        if (l) sm_profiler_snapshot(prof);
        play_device(sm_profiler_get_device_ptr(prof), l);
    }
    int rc = sm_profiler_export_to_file(prof, argv[1]);
    sm_profiler_destroy_buffer(prof);
    return rc;
}
