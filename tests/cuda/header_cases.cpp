// Plays the device for tests/device/test_cuda_host_writer.py: for each 8-word header in CASES (raw
// little-endian uint64s), a fresh NB x NG x CAP buffer gets that header written over its own,
// then export_to_file writes OUTDIR/case_<i>.npz. Prints one exit status per case, so the test
// can check that the C++ writer refuses exactly the headers Python's reader refuses.
//   header_cases NB NG CAP CASES OUTDIR [METADATA_VALUE]
#include <sm_profiler_host.h>

int main(int argc, char** argv) {
    if (argc < 6) return 2;
    uint32_t nb = (uint32_t)std::atoi(argv[1]), ng = (uint32_t)std::atoi(argv[2]);
    uint32_t cap = (uint32_t)std::atoi(argv[3]);
    std::FILE* f = std::fopen(argv[4], "rb");
    if (!f) return 2;
    uint64_t header[SM_PROFILER_HEADER_WORDS];
    for (int i = 0; std::fread(header, sizeof header, 1, f) == 1; ++i) {
        sm_profiler_buffer_t p = sm_profiler_create_buffer(nb, ng, cap, 1);
        if (!p) return 2;
        int rc = 0;
        if (argc > 6) rc = sm_profiler_set_metadata(p, "note", argv[6]) ? 10 : 0;
        uint64_t* words = sm_profiler_get_device_ptr(p);
        std::memcpy(words, header, sizeof header);
        std::string out = std::string(argv[5]) + "/case_" + std::to_string(i) + ".npz";
        if (rc == 0) rc = sm_profiler_export_to_file(p, out.c_str());
        std::printf("%d\n", rc);
        sm_profiler_destroy_buffer(p);
    }
    std::fclose(f);
    return 0;
}
