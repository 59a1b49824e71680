// sm_profiler_host.h: the host side of sm_profiler for C++ programs (header-only).
//
//   sm_profiler_buffer_t prof = sm_profiler_create_buffer(num_blocks, num_groups, 256, 1);
//   sm_profiler_register_event(prof, LOAD, "load");
//   sm_profiler_init_buffer(prof);                        // before each launch
//   kernel<<<grid, block>>>(..., sm_profiler_get_device_ptr(prof));
//   sm_profiler_export_to_file(prof, "capture.npz");     // then: sm-profiler stats capture.npz
//   sm_profiler_destroy_buffer(prof);
//
// The capture file is the one format Python's SmProfiler.save writes (docs/format.md, "Capture
// files"): a zip archive of uncompressed .npy members, `meta` (JSON names and metadata) and
// `words_0`, `words_1`, ... (the raw buffers). `sm-profiler info|stats|export` and
// `sm_profiler.load` read it. Every function checks its input first and, on bad input, prints
// one line to stderr saying what is wrong and returns nonzero (or NULL), having changed nothing.
//
// Define SM_PROFILER_HOST_NO_CUDA to build without the CUDA runtime: the "device" buffer is then
// host memory (for tests, or to write capture files from words obtained elsewhere).

#ifndef SM_PROFILER_HOST_H
#define SM_PROFILER_HOST_H

#include <cerrno>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "sm_profiler_format.h"

#ifndef SM_PROFILER_HOST_NO_CUDA
#include <cuda_runtime.h>
#endif

// Entries and offsets at or above this many bytes use zip64 records (a test lowers it to 0).
#ifndef SM_PROFILER_ZIP64_THRESHOLD
#define SM_PROFILER_ZIP64_THRESHOLD 0xFFFFFFFFull
#endif

// The `capture_file_version` this header writes (sm_profiler/capture.py, CAPTURE_FILE_VERSION).
#define SM_PROFILER_CAPTURE_FILE_VERSION 1

struct sm_profiler_capture {
    std::vector<uint64_t> words;
    std::map<int, std::string> event_names;
    std::map<int, std::string> group_names;
    std::string kernel_name;
    std::vector<std::pair<std::string, std::string>> metadata;  // key, JSON value text
};

struct sm_profiler_buffer {
    uint32_t num_blocks, num_groups, capacity;
    int enabled;
    uint64_t* device_words;  // the buffer the kernel writes (host memory without CUDA)
    size_t total_words;
    int handouts;  // sm_profiler_get_device_ptr calls since the last init
    std::map<int, std::string> event_names, group_names;
    std::string kernel_name;
    std::vector<std::pair<std::string, std::string>> metadata;
    std::vector<sm_profiler_capture> snapshots;
};
typedef sm_profiler_buffer* sm_profiler_buffer_t;

namespace sm_profiler_detail {

inline int fail(const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    std::fputs("sm_profiler: error: ", stderr);
    std::vfprintf(stderr, fmt, ap);
    std::fputc('\n', stderr);
    va_end(ap);
    return 1;
}

// Why `name` can't label an event, group or kernel ("" if it can). Printable ASCII only: the
// Python reader refuses names that are not printable text, and ASCII is printable everywhere.
inline std::string name_problem(const char* name) {
    if (name == nullptr) return "is NULL";
    bool blank = true;
    for (const char* c = name; *c; ++c) {
        unsigned char u = (unsigned char)*c;
        if (u < 0x20 || u > 0x7e) {
            char buf[96];
            std::snprintf(buf, sizeof buf, "holds byte 0x%02x; use printable ASCII (0x20..0x7e)", u);
            return buf;
        }
        if (u != ' ') blank = false;
    }
    return blank ? "must be non-empty (and not only spaces)" : "";
}

inline std::string json_string(const std::string& s) {
    std::string out = "\"";
    for (unsigned char c : s) {
        if (c == '"' || c == '\\') {
            out += '\\';
            out += (char)c;
        } else if (c < 0x20) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\u%04x", c);
            out += buf;
        } else {
            out += (char)c;
        }
    }
    return out + "\"";
}

inline std::string json_names(const std::map<int, std::string>& names) {
    std::string out = "{";
    for (const auto& kv : names) {
        if (out.size() > 1) out += ", ";
        out += json_string(std::to_string(kv.first)) + ": " + json_string(kv.second);
    }
    return out + "}";
}

// The `meta` member: {"capture_file_version": 1, "captures": [{names, kernel, metadata}, ...]}.
inline std::string meta_json(const std::vector<sm_profiler_capture>& caps) {
    std::string out = "{\"capture_file_version\": " +
                      std::to_string(SM_PROFILER_CAPTURE_FILE_VERSION) + ", \"captures\": [";
    for (size_t i = 0; i < caps.size(); ++i) {
        const sm_profiler_capture& c = caps[i];
        out += i ? ", {" : "{";
        out += "\"event_names\": " + json_names(c.event_names);
        out += ", \"group_names\": " + json_names(c.group_names);
        out += ", \"kernel_name\": " + json_string(c.kernel_name);
        out += ", \"metadata\": {";
        for (size_t j = 0; j < c.metadata.size(); ++j) {
            out += (j ? ", " : "") + json_string(c.metadata[j].first) + ": " + c.metadata[j].second;
        }
        out += "}}";
    }
    return out + "]}";
}

// A .npy (version 1.0) header for a 1-D array of `count` items of numpy type `descr`.
inline std::string npy_header(const char* descr, uint64_t count) {
    std::string dict = std::string("{'descr': '") + descr +
                       "', 'fortran_order': False, 'shape': (" + std::to_string(count) + ",), }";
    size_t total = 10 + dict.size() + 1;  // magic, version, length, dict, '\n'
    dict.append((64 - total % 64) % 64, ' ');
    dict += '\n';
    std::string out("\x93NUMPY\x01\x00", 8);
    out += (char)(dict.size() & 0xff);
    out += (char)(dict.size() >> 8);
    return out + dict;
}

inline uint32_t crc32(uint32_t crc, const unsigned char* p, size_t n) {
    static uint32_t table[256];
    static bool ready = false;
    if (!ready) {
        for (uint32_t i = 0; i < 256; ++i) {
            uint32_t c = i;
            for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
            table[i] = c;
        }
        ready = true;
    }
    crc = ~crc;
    for (size_t i = 0; i < n; ++i) crc = table[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
    return ~crc;
}

struct writer {
    std::FILE* f;
    uint64_t offset;
    bool ok;
    void bytes(const void* p, size_t n) {
        if (ok && n && std::fwrite(p, 1, n, f) != n) ok = false;
        offset += n;
    }
    void u16(uint32_t v) {
        unsigned char b[2] = {(unsigned char)v, (unsigned char)(v >> 8)};
        bytes(b, 2);
    }
    void u32(uint32_t v) {
        unsigned char b[4] = {(unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16),
                              (unsigned char)(v >> 24)};
        bytes(b, 4);
    }
    void u64(uint64_t v) {
        u32((uint32_t)v);
        u32((uint32_t)(v >> 32));
    }
};

struct zip_entry {
    std::string name;
    uint32_t crc;
    uint64_t size, offset;
};

inline bool big(uint64_t v) { return v >= SM_PROFILER_ZIP64_THRESHOLD; }
inline uint32_t field32(uint64_t v) { return big(v) ? 0xFFFFFFFFu : (uint32_t)v; }

// One uncompressed ("stored") member: local header, .npy header, data.
inline void zip_member(writer& w, std::vector<zip_entry>& dir, const std::string& name,
                       const std::string& npy, const void* data, uint64_t nbytes,
                       uint16_t dos_time, uint16_t dos_date) {
    zip_entry e{name, 0, npy.size() + nbytes, w.offset};
    e.crc = crc32(0, (const unsigned char*)npy.data(), npy.size());
    const unsigned char* p = (const unsigned char*)data;
    for (uint64_t done = 0; done < nbytes;) {
        size_t n = (size_t)((nbytes - done) < (1ull << 24) ? nbytes - done : (1ull << 24));
        e.crc = crc32(e.crc, p + done, n);
        done += n;
    }
    bool z64 = big(e.size);
    w.u32(0x04034b50u);
    w.u16(z64 ? 45 : 20);  // version needed: 4.5 for zip64
    w.u16(0);              // flags
    w.u16(0);              // method: stored
    w.u16(dos_time);
    w.u16(dos_date);
    w.u32(e.crc);
    w.u32(field32(e.size));  // compressed size
    w.u32(field32(e.size));
    w.u16((uint32_t)name.size());
    w.u16(z64 ? 20 : 0);
    w.bytes(name.data(), name.size());
    if (z64) {
        w.u16(1);  // zip64 extended information
        w.u16(16);
        w.u64(e.size);
        w.u64(e.size);
    }
    w.bytes(npy.data(), npy.size());
    for (uint64_t done = 0; done < nbytes;) {
        size_t n = (size_t)((nbytes - done) < (1ull << 24) ? nbytes - done : (1ull << 24));
        w.bytes(p + done, n);
        done += n;
    }
    dir.push_back(e);
}

inline void zip_directory(writer& w, const std::vector<zip_entry>& dir, uint16_t dos_time,
                          uint16_t dos_date) {
    uint64_t start = w.offset;
    for (const zip_entry& e : dir) {
        uint16_t extra = (big(e.size) ? 16 : 0) + (big(e.offset) ? 8 : 0);
        w.u32(0x02014b50u);
        w.u16(45);  // made by: 4.5
        w.u16(extra ? 45 : 20);
        w.u16(0);
        w.u16(0);
        w.u16(dos_time);
        w.u16(dos_date);
        w.u32(e.crc);
        w.u32(field32(e.size));
        w.u32(field32(e.size));
        w.u16((uint32_t)e.name.size());
        w.u16(extra ? extra + 4 : 0);
        w.u16(0);  // comment
        w.u16(0);  // disk
        w.u16(0);  // internal attributes
        w.u32(0);  // external attributes
        w.u32(field32(e.offset));
        w.bytes(e.name.data(), e.name.size());
        if (extra) {  // the fields set to 0xFFFFFFFF above, in this order
            w.u16(1);
            w.u16(extra);
            if (big(e.size)) {
                w.u64(e.size);
                w.u64(e.size);
            }
            if (big(e.offset)) w.u64(e.offset);
        }
    }
    uint64_t size = w.offset - start, count = dir.size();
    if (big(start) || big(size) || count >= 0xFFFF) {
        uint64_t eocd64 = w.offset;
        w.u32(0x06064b50u);  // zip64 end of central directory record
        w.u64(44);
        w.u16(45);
        w.u16(45);
        w.u32(0);
        w.u32(0);
        w.u64(count);
        w.u64(count);
        w.u64(size);
        w.u64(start);
        w.u32(0x07064b50u);  // its locator
        w.u32(0);
        w.u64(eocd64);
        w.u32(1);
    }
    w.u32(0x06054b50u);
    w.u16(0);
    w.u16(0);
    w.u16(count >= 0xFFFF ? 0xFFFF : (uint32_t)count);
    w.u16(count >= 0xFFFF ? 0xFFFF : (uint32_t)count);
    w.u32(field32(size));
    w.u32(field32(start));
    w.u16(0);
}

// Why `words` is not a buffer the Python reader accepts ("" if it is): every check of
// format.Layout.from_header, in its order, so that a file is never written that cannot be read
// back (tests/device/test_cuda_header.py runs both on the same headers).
inline std::string buffer_problem(const std::vector<uint64_t>& words) {
    char buf[160];
    if (words.size() < SM_PROFILER_HEADER_WORDS) return "is shorter than the buffer header";
    uint64_t mv = words[SM_PROFILER_HDR_MAGIC_VERSION];
    if ((uint32_t)mv != SM_PROFILER_MAGIC) return "does not start with the sm_profiler magic";
    uint64_t version = mv >> 32;
    if (version < SM_PROFILER_MIN_READABLE_VERSION || version > SM_PROFILER_FORMAT_VERSION) {
        std::snprintf(buf, sizeof buf, "has format version %llu; readers accept %u..%u",
                      (unsigned long long)version, SM_PROFILER_MIN_READABLE_VERSION,
                      SM_PROFILER_FORMAT_VERSION);
        return buf;
    }
    uint64_t shape = words[SM_PROFILER_HDR_SHAPE], cf = words[SM_PROFILER_HDR_CAPACITY_FLAGS];
    uint64_t nb = (uint32_t)shape, ng = shape >> 32, cap = (uint32_t)cf, flags = cf >> 32;
    if (!nb || !ng || !cap) return "has an empty shape (a disabled profiler's buffer)";
    if (nb > SM_PROFILER_MAX_BLOCKS || ng > SM_PROFILER_MAX_GROUPS || cap > SM_PROFILER_MAX_CAPACITY)
        return "has an impossible shape (above the largest blocks, groups or capacity)";
    if (flags & ~(uint64_t)SM_PROFILER_KNOWN_FLAGS) {
        std::snprintf(buf, sizeof buf, "sets header flags 0x%llx that readers do not know",
                      (unsigned long long)flags);
        return buf;
    }
    if ((flags & SM_PROFILER_FLAG_RING) && (cap & (cap - 1)))
        return "is a ring buffer whose capacity is not a power of two";
    // Reserved words: w3..w6 before launch slots, w5..w6 with them; w7 is scratch from version 2.
    size_t first = version >= SM_PROFILER_VERSION_SLOTS ? SM_PROFILER_HDR_LABEL + 1
                                                        : SM_PROFILER_HDR_CAPACITY_FLAGS + 1;
    size_t end = version >= 2 ? SM_PROFILER_HDR_SCRATCH : SM_PROFILER_HEADER_WORDS;
    for (size_t i = first; i < end; ++i) {
        if (words[i]) {
            std::snprintf(buf, sizeof buf, "sets reserved header word %zu (0x%llx)", i,
                          (unsigned long long)words[i]);
            return buf;
        }
    }
    if (words.size() != SM_PROFILER_HEADER_WORDS + nb * ng * (SM_PROFILER_LANE_HEADER_WORDS + cap))
        return "has a size that does not match its header";
    return "";
}

// Byte offset of the first byte of `s` that is not strict UTF-8 (what Python's bytes.decode
// accepts: no overlong forms, no surrogates, nothing past U+10FFFF), or npos if there is none.
inline size_t utf8_problem(const std::string& s) {
    const unsigned char* p = (const unsigned char*)s.data();
    size_t n = s.size(), i = 0;
    while (i < n) {
        unsigned char c = p[i];
        size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
        if (len == 0 || i + len > n) return i;
        uint32_t cp = len == 1 ? c : len == 2 ? (c & 0x1Fu) : len == 3 ? (c & 0x0Fu) : (c & 0x07u);
        for (size_t k = 1; k < len; ++k) {
            if ((p[i + k] & 0xC0) != 0x80) return i;
            cp = (cp << 6) | (p[i + k] & 0x3Fu);
        }
        static const uint32_t least[5] = {0, 0, 0x80, 0x800, 0x10000};
        if (cp < least[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return i;
        i += len;
    }
    return std::string::npos;
}

// Write `caps` to `path` (replaced whole or not at all: a temporary file, then a rename).
inline int write_capture_file(const char* path, const std::vector<sm_profiler_capture>& caps) {
    if (path == nullptr || !*path) return fail("export_to_file: the path is empty");
    if (caps.empty()) return fail("export_to_file: nothing to write: no launch was recorded");
    for (size_t i = 0; i < caps.size(); ++i) {
        std::string why = buffer_problem(caps[i].words);
        if (!why.empty()) return fail("cannot write '%s': capture %zu %s", path, i, why.c_str());
    }
    std::string meta = meta_json(caps);
    size_t bad = utf8_problem(meta);
    if (bad != std::string::npos) {
        return fail("cannot write '%s': the names or metadata hold byte 0x%02x, which is not "
                    "UTF-8 (readers refuse the file); pass UTF-8 text to set_metadata", path,
                    (unsigned char)meta[bad]);
    }
    std::time_t now = std::time(nullptr);
    std::tm t = *std::gmtime(&now);
    uint16_t dos_time = (uint16_t)((t.tm_hour << 11) | (t.tm_min << 5) | (t.tm_sec / 2));
    uint16_t dos_date = (uint16_t)(((t.tm_year - 80) << 9) | ((t.tm_mon + 1) << 5) | t.tm_mday);
    // A random name next to `path`, created exclusively ("x": O_EXCL), never through a symlink
    // or over a file already there; another name if one is in the way.
    std::random_device rd;
    std::string tmp;
    std::FILE* f = nullptr;
    for (int attempt = 0; attempt < 16 && f == nullptr; ++attempt) {
        char suffix[40];
        std::snprintf(suffix, sizeof suffix, ".%08x%08x.tmp", (unsigned)rd(), (unsigned)rd());
        tmp = std::string(path) + suffix;
        f = std::fopen(tmp.c_str(), "wbx");
        if (f == nullptr && errno != EEXIST) break;
    }
    if (!f) return fail("cannot write '%s': %s", path, std::strerror(errno));
    writer w{f, 0, true};
    std::vector<zip_entry> dir;
    zip_member(w, dir, "meta.npy", npy_header("|u1", meta.size()), meta.data(), meta.size(),
               dos_time, dos_date);
    for (size_t i = 0; i < caps.size(); ++i) {
        const std::vector<uint64_t>& words = caps[i].words;
        zip_member(w, dir, "words_" + std::to_string(i) + ".npy", npy_header("<u8", words.size()),
                   words.data(), words.size() * 8, dos_time, dos_date);
    }
    zip_directory(w, dir, dos_time, dos_date);
    bool ok = w.ok && std::fflush(f) == 0;
    ok = (std::fclose(f) == 0) && ok;
    if (!ok || std::rename(tmp.c_str(), path) != 0) {
        int err = errno;
        std::remove(tmp.c_str());
        return fail("cannot write '%s': %s", path, std::strerror(err));
    }
    return 0;
}

inline std::string iso_utc_now() {
    std::time_t now = std::time(nullptr);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S+00:00", std::gmtime(&now));
    return buf;
}

inline void set_meta(std::vector<std::pair<std::string, std::string>>& meta,
                     const std::string& key, const std::string& json_value) {
    for (auto& kv : meta) {
        if (kv.first == key) {
            kv.second = json_value;
            return;
        }
    }
    meta.emplace_back(key, json_value);
}

inline int register_name(std::map<int, std::string>& table, int id, const char* name,
                         const char* what) {
    std::string why = name_problem(name);
    if (!why.empty()) return fail("%s %d: the name %s", what, id, why.c_str());
    for (const auto& kv : table) {
        if (kv.second == name && kv.first != id) {
            return fail("%s name '%s' is already %s %d: give each %s its own name", what, name,
                        what, kv.first, what);
        }
    }
    table[id] = name;
    return 0;
}

inline int check_buffer(const sm_profiler_buffer* buf, const char* fn) {
    if (buf == nullptr) return fail("%s: the buffer is NULL (sm_profiler_create_buffer failed?)", fn);
    return 0;
}

}  // namespace sm_profiler_detail

// ---------------------------------------------------------------------------------------------
// The API (the seed's names)
// ---------------------------------------------------------------------------------------------

// A buffer of num_blocks x num_groups lanes of max_events_per_group records each, zeroed, its
// header written. enabled=0 makes a header-only buffer in which every lane is out of shape, so
// the kernel's events store nothing. NULL (and a message) on bad sizes or a failed allocation.
inline sm_profiler_buffer_t sm_profiler_create_buffer(uint32_t num_blocks, uint32_t num_groups,
                                                      uint32_t max_events_per_group,
                                                      int enabled = 1);
inline int sm_profiler_init_buffer(sm_profiler_buffer_t buf);

inline sm_profiler_buffer_t sm_profiler_create_buffer(uint32_t num_blocks, uint32_t num_groups,
                                                      uint32_t max_events_per_group,
                                                      int enabled) {
    using sm_profiler_detail::fail;
    const struct {
        const char* name;
        uint32_t value, limit;
    } sizes[] = {{"num_blocks", num_blocks, SM_PROFILER_MAX_BLOCKS},
                 {"num_groups", num_groups, SM_PROFILER_MAX_GROUPS},
                 {"max_events_per_group", max_events_per_group, SM_PROFILER_MAX_CAPACITY}};
    for (const auto& s : sizes) {
        if (s.value == 0) {
            fail("create_buffer: %s must be positive, got 0", s.name);
            return nullptr;
        }
        if (s.value > s.limit) {
            fail("create_buffer: %s=%u is larger than the supported %u; lower it", s.name, s.value,
                 s.limit);
            return nullptr;
        }
    }
    uint64_t words = SM_PROFILER_HEADER_WORDS + (uint64_t)num_blocks * num_groups *
                                                    (SM_PROFILER_LANE_HEADER_WORDS + max_events_per_group);
    if (words * SM_PROFILER_WORD_BYTES > SM_PROFILER_MAX_BUFFER_BYTES) {
        fail("create_buffer: the buffer would need %.1f GiB (%u blocks x %u groups x %u records x "
             "8 B); the limit is %llu GiB: lower max_events_per_group or num_blocks",
             words * 8.0 / (1ull << 30), num_blocks, num_groups, max_events_per_group,
             (unsigned long long)(SM_PROFILER_MAX_BUFFER_BYTES >> 30));
        return nullptr;
    }
    if (!enabled) words = SM_PROFILER_HEADER_WORDS;
    uint64_t* mem = nullptr;
#ifdef SM_PROFILER_HOST_NO_CUDA
    mem = (uint64_t*)std::calloc(words, SM_PROFILER_WORD_BYTES);
    if (mem == nullptr) {
        fail("create_buffer: cannot allocate %llu bytes", (unsigned long long)(words * 8));
        return nullptr;
    }
#else
    cudaError_t err = cudaMalloc((void**)&mem, words * SM_PROFILER_WORD_BYTES);
    if (err == cudaErrorMemoryAllocation) {
        fail("create_buffer: cudaMalloc of %llu bytes failed: %s; lower max_events_per_group or "
             "num_blocks", (unsigned long long)(words * 8), cudaGetErrorString(err));
        return nullptr;
    }
    if (err != cudaSuccess) {  // no device, no driver, a driver too old: not a size problem
        fail("create_buffer: no usable CUDA GPU (cudaMalloc: %s); this program needs a CUDA "
             "GPU and its driver", cudaGetErrorString(err));
        return nullptr;
    }
#endif
    sm_profiler_buffer_t buf = new sm_profiler_buffer();
    buf->num_blocks = num_blocks;
    buf->num_groups = num_groups;
    buf->capacity = max_events_per_group;
    buf->enabled = enabled ? 1 : 0;
    buf->device_words = mem;
    buf->total_words = (size_t)words;
    buf->handouts = 0;
    buf->kernel_name = "kernel";
    if (sm_profiler_init_buffer(buf) != 0) {
#ifdef SM_PROFILER_HOST_NO_CUDA
        std::free(mem);
#else
        cudaFree(mem);
#endif
        delete buf;
        return nullptr;
    }
    return buf;
}

// Name event id event_no (0..4095), as SmProfiler.register_event.
inline int sm_profiler_register_event(sm_profiler_buffer_t buf, int event_no, const char* name) {
    if (sm_profiler_detail::check_buffer(buf, "register_event")) return 1;
    if (event_no < 0 || event_no > (int)SM_PROFILER_MAX_EVENT_ID) {
        return sm_profiler_detail::fail("register_event: event_no %d is out of range 0..%u",
                                        event_no, SM_PROFILER_MAX_EVENT_ID);
    }
    return sm_profiler_detail::register_name(buf->event_names, event_no, name, "event");
}

// Name group `group` (0..num_groups-1), e.g. 0 "producer", 1 "consumer".
inline int sm_profiler_register_group(sm_profiler_buffer_t buf, int group, const char* name) {
    if (sm_profiler_detail::check_buffer(buf, "register_group")) return 1;
    if (group < 0 || group >= (int)buf->num_groups) {
        return sm_profiler_detail::fail("register_group: group %d is out of range 0..%u", group,
                                        buf->num_groups - 1);
    }
    return sm_profiler_detail::register_name(buf->group_names, group, name, "group");
}

// The kernel name the capture's traces and stats show (default "kernel").
inline int sm_profiler_set_kernel_name(sm_profiler_buffer_t buf, const char* name) {
    if (sm_profiler_detail::check_buffer(buf, "set_kernel_name")) return 1;
    std::string why = sm_profiler_detail::name_problem(name);
    if (!why.empty()) return sm_profiler_detail::fail("set_kernel_name: the name %s", why.c_str());
    buf->kernel_name = name;
    return 0;
}

// A string entry of the capture's metadata (`sm-profiler info` lists them).
inline int sm_profiler_set_metadata(sm_profiler_buffer_t buf, const char* key, const char* value) {
    if (sm_profiler_detail::check_buffer(buf, "set_metadata")) return 1;
    if (key == nullptr || !*key || value == nullptr) {
        return sm_profiler_detail::fail("set_metadata: key and value must be non-NULL, the key "
                                        "non-empty");
    }
    for (const char* text : {key, value}) {
        size_t bad = sm_profiler_detail::utf8_problem(text);
        if (bad != std::string::npos) {
            return sm_profiler_detail::fail(
                "set_metadata: the %s holds byte 0x%02x at offset %zu, which is not UTF-8; pass "
                "UTF-8 text (readers refuse a file that is not)", text == key ? "key" : "value",
                (unsigned char)text[bad], bad);
        }
    }
    sm_profiler_detail::set_meta(buf->metadata, key, sm_profiler_detail::json_string(value));
    return 0;
}

// Zero the buffer and write its header. Call before each launch that records into it.
inline int sm_profiler_init_buffer(sm_profiler_buffer_t buf) {
    if (sm_profiler_detail::check_buffer(buf, "init_buffer")) return 1;
    uint64_t header[SM_PROFILER_HEADER_WORDS] = {0};
    header[SM_PROFILER_HDR_MAGIC_VERSION] =
        SM_PROFILER_MAGIC | ((uint64_t)SM_PROFILER_FORMAT_VERSION << 32);
    if (buf->enabled) {  // a disabled buffer's shape is 0 x 0: every lane is out of shape
        header[SM_PROFILER_HDR_SHAPE] = buf->num_blocks | ((uint64_t)buf->num_groups << 32);
        header[SM_PROFILER_HDR_CAPACITY_FLAGS] = buf->capacity;
    }
#ifdef SM_PROFILER_HOST_NO_CUDA
    std::memset(buf->device_words, 0, buf->total_words * SM_PROFILER_WORD_BYTES);
    std::memcpy(buf->device_words, header, sizeof header);
#else
    cudaError_t err = cudaMemset(buf->device_words, 0, buf->total_words * SM_PROFILER_WORD_BYTES);
    if (err == cudaSuccess) {
        err = cudaMemcpy(buf->device_words, header, sizeof header, cudaMemcpyHostToDevice);
    }
    if (err != cudaSuccess) {
        return sm_profiler_detail::fail("init_buffer: %s", cudaGetErrorString(err));
    }
#endif
    buf->handouts = 0;
    return 0;
}

// The buffer to pass to the kernel (its sm_profiler_init* calls take it). One launch per
// init_buffer: a second launch into the same buffer mixes its records with the first's.
inline uint64_t* sm_profiler_get_device_ptr(sm_profiler_buffer_t buf) {
    if (sm_profiler_detail::check_buffer(buf, "get_device_ptr")) return nullptr;
    buf->handouts += 1;
    return buf->device_words;
}

// Copy the buffer to the host as one capture (waits for the device), then zero it for the next
// launch. export_to_file writes the snapshots, then the buffer's current launch if any.
inline int sm_profiler_snapshot(sm_profiler_buffer_t buf) {
    if (sm_profiler_detail::check_buffer(buf, "snapshot")) return 1;
    if (!buf->enabled) {
        return sm_profiler_detail::fail("snapshot: this buffer was created with enabled=0");
    }
    sm_profiler_capture cap;
    cap.words.resize(buf->total_words);
#ifdef SM_PROFILER_HOST_NO_CUDA
    std::memcpy(cap.words.data(), buf->device_words, buf->total_words * SM_PROFILER_WORD_BYTES);
    sm_profiler_detail::set_meta(cap.metadata, "device", "\"host memory (no CUDA)\"");
#else
    cudaError_t err = cudaDeviceSynchronize();
    if (err == cudaSuccess) {
        err = cudaMemcpy(cap.words.data(), buf->device_words,
                         buf->total_words * SM_PROFILER_WORD_BYTES, cudaMemcpyDeviceToHost);
    }
    if (err != cudaSuccess) {
        return sm_profiler_detail::fail("snapshot: copying the buffer failed: %s",
                                        cudaGetErrorString(err));
    }
    int dev = 0;
    cudaDeviceProp props;
    if (cudaGetDevice(&dev) == cudaSuccess && cudaGetDeviceProperties(&props, dev) == cudaSuccess) {
        using sm_profiler_detail::json_string;
        using sm_profiler_detail::set_meta;
        set_meta(cap.metadata, "device", json_string("cuda:" + std::to_string(dev)));
        set_meta(cap.metadata, "device_name", json_string(props.name));
        set_meta(cap.metadata, "sm_count", std::to_string(props.multiProcessorCount));
        set_meta(cap.metadata, "compute_capability",
                 json_string(std::to_string(props.major) + "." + std::to_string(props.minor)));
    }
    int runtime = 0;
    if (cudaRuntimeGetVersion(&runtime) == cudaSuccess) {
        sm_profiler_detail::set_meta(
            cap.metadata, "cuda_runtime",
            sm_profiler_detail::json_string(std::to_string(runtime / 1000) + "." +
                                            std::to_string(runtime % 1000 / 10)));
    }
#endif
    sm_profiler_detail::set_meta(cap.metadata, "created",
                                 sm_profiler_detail::json_string(sm_profiler_detail::iso_utc_now()));
    sm_profiler_detail::set_meta(cap.metadata, "writer", "\"sm_profiler_host.h\"");
    sm_profiler_detail::set_meta(cap.metadata, "buffer_handouts",
                                 std::to_string(buf->handouts ? buf->handouts : 1));
    for (const auto& kv : buf->metadata) sm_profiler_detail::set_meta(cap.metadata, kv.first, kv.second);
    cap.event_names = buf->event_names;
    cap.group_names = buf->group_names;
    cap.kernel_name = buf->kernel_name;
    buf->snapshots.push_back(cap);
    return sm_profiler_init_buffer(buf);
}

// Write every snapshot, and the current launch (if the buffer was handed out since the last
// init or snapshot), to a capture file: `sm-profiler stats FILE`, `sm_profiler.load(FILE)`.
inline int sm_profiler_export_to_file(sm_profiler_buffer_t buf, const char* filename) {
    if (sm_profiler_detail::check_buffer(buf, "export_to_file")) return 1;
    if (!buf->enabled) {
        return sm_profiler_detail::fail(
            "export_to_file: this buffer was created with enabled=0 and holds no records");
    }
    if (buf->handouts > 0 && sm_profiler_snapshot(buf) != 0) return 1;
    return sm_profiler_detail::write_capture_file(filename, buf->snapshots);
}

// Free the device buffer and everything the host holds for it.
inline void sm_profiler_destroy_buffer(sm_profiler_buffer_t buf) {
    if (buf == nullptr) return;
#ifdef SM_PROFILER_HOST_NO_CUDA
    std::free(buf->device_words);
#else
    cudaFree(buf->device_words);
#endif
    delete buf;
}

#endif  // SM_PROFILER_HOST_H
