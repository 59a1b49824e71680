// sm_profiler.cuh: record ranges and instants from CUDA C++ kernels into the sm_profiler buffer.
//
//   #include <sm_profiler.cuh>          // nvcc -I"$(sm-profiler --include)"
//
//   __global__ void kernel(..., unsigned long long* prof_buf) {
//       auto lane = sm_profiler_init(prof_buf);          // one lane per block, written by warp 0
//       sm_profiler_event_start(lane, LOAD);
//       ...
//       sm_profiler_event_end(lane, LOAD);
//       { SM_PROFILER_RANGE(lane, COMPUTE); ... }        // start here, end at the scope's end
//   }
//
// The buffer is the one `SmProfiler.get_buffer()` (Python) or `sm_profiler_get_device_ptr()`
// (sm_profiler_host.h) returns; its layout is sm_profiler/format.py's (docs/format.md). A lane is
// a few registers (records address, cursor, capacity, leader flag) that the init returns and
// every event updates through its reference: no event loads, counts atomically or fences. Per
// event the writer reads %globaltimer once and does one 8-byte store; a lane that is full stores
// its cursor (the drop count) instead. The PTX is sm_profiler/ptx.py's, the same text the Triton,
// Gluon and CuteDSL ops emit (sm_profiler_ptx.h is generated from it).
//
// Lanes (lane index = block * num_groups + group):
//   sm_profiler_init(buf, block, group)          per block: warp 0 stores (its threads the same
//       word: one transaction), the other warps branch past each event with one warp-uniform
//       branch; thread 0 stamps the lane's anchor and SM id.
//   sm_profiler_init_per_warp(buf, block, first_group)
//       per warp: warp w of the block writes lane group first_group + w, with no leader test.
//   sm_profiler_init_leader(buf, block, group, is_leader)
//       one chosen thread writes (e.g. the first thread of a warp-specialised kernel's producer
//       or consumer warp group); its stores are predicated per thread.
// Every thread calls the init and the events (no `if` around them is needed). Lanes outside the
// buffer's shape (block >= num_blocks, group >= num_groups) record nothing: they get capacity 0
// and their drop stores land in the buffer header's scratch word.
//
// Compile-time switches: with SM_PROFILER_DISABLE defined every call compiles to nothing (the
// kernel's SASS is the plain kernel's); the lane type and the buffer parameter stay. With
// SM_PROFILER_RING defined the lanes honour a ring buffer (SmProfiler(ring=True)): record n goes
// to slot n & (capacity - 1), one AND more per event, and sm_profiler_flush(lane) after the last
// event writes the count; on a buffer without the ring flag they record as without the switch.
// NVRTC-safe: no standard headers.

#ifndef SM_PROFILER_CUH
#define SM_PROFILER_CUH

#include "sm_profiler_format.h"
#include "sm_profiler_ptx.h"

// Which spelling of the 8-byte record store (sm_profiler/ptx.py, `vector_store_for`): ptxas 13
// compiles the vector store to fewer instructions, older ptxas the packed one. Override with
// -DSM_PROFILER_VECTOR_STORE=0 or 1.
#ifndef SM_PROFILER_VECTOR_STORE
#if defined(__CUDACC_VER_MAJOR__) && __CUDACC_VER_MAJOR__ >= 13
#define SM_PROFILER_VECTOR_STORE 1
#else
#define SM_PROFILER_VECTOR_STORE 0
#endif
#endif

#if SM_PROFILER_VECTOR_STORE
#define SM_PROFILER_PTX_RECORD_(MODE) SM_PROFILER_PTX_RECORD_VECTOR_##MODE
#define SM_PROFILER_PTX_RING_RECORD_(MODE) SM_PROFILER_PTX_RING_RECORD_VECTOR_##MODE
#else
#define SM_PROFILER_PTX_RECORD_(MODE) SM_PROFILER_PTX_RECORD_PACKED_##MODE
#define SM_PROFILER_PTX_RING_RECORD_(MODE) SM_PROFILER_PTX_RING_RECORD_PACKED_##MODE
#endif

// The `block` argument's default: the linear block index.
#define SM_PROFILER_AUTO_BLOCK 0xFFFFFFFFu

// Who writes a lane (the template argument of sm_profiler_lane_t).
enum sm_profiler_mode {
    SM_PROFILER_MODE_PER_BLOCK = 0,  // warp 0 of the block; the other warps branch past
    SM_PROFILER_MODE_PER_WARP = 1,   // every warp its own lane
    SM_PROFILER_MODE_LEADER = 2,     // one chosen thread per lane
};

// One thread's view of its lane: registers, passed by reference to the events.
template <int MODE>
struct sm_profiler_lane_t {
    unsigned long long records;  // byte address of the lane's records[0]
    unsigned int cursor;         // records attempted so far
    unsigned int capacity;       // records the lane holds; 0 outside the buffer's shape
    unsigned int leader;         // per block: 1 in warp 0; leader mode: 1 in the leader
    unsigned int mask;           // SM_PROFILER_RING: capacity - 1 in a ring buffer, else ~0u
    static const int mode = MODE;
};

typedef sm_profiler_lane_t<SM_PROFILER_MODE_PER_BLOCK> sm_profiler_lane;
typedef sm_profiler_lane_t<SM_PROFILER_MODE_PER_WARP> sm_profiler_warp_lane;
typedef sm_profiler_lane_t<SM_PROFILER_MODE_LEADER> sm_profiler_leader_lane;

// ---------------------------------------------------------------------------------------------
// Helpers (the seed's names): indices for 1D, 2D and 3D grids and blocks.
// ---------------------------------------------------------------------------------------------

// Lane id within the warp, 0..31.
static __device__ __forceinline__ unsigned int sm_profiler_get_lane_id() {
    unsigned int id;
    asm volatile("mov.u32 %0, %%laneid;" : "=r"(id));
    return id;
}

// Linear thread index within the block (x fastest, then y, then z).
static __device__ __forceinline__ unsigned int sm_profiler_get_thread_idx() {
    return (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;
}

// Warp index within the block, from the linear thread index (any block shape).
static __device__ __forceinline__ unsigned int sm_profiler_get_warp_id() {
    return sm_profiler_get_thread_idx() >> 5;
}

// Linear block index within the grid (x fastest, then y, then z).
static __device__ __forceinline__ unsigned int sm_profiler_get_block_idx() {
    return (blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
}

// The SM this thread runs on.
static __device__ __forceinline__ unsigned int sm_profiler_get_smid() {
    unsigned int id;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
    return id;
}

// %globaltimer, ns (the clock every record's time comes from).
static __device__ __forceinline__ unsigned long long sm_profiler_get_timestamp() {
    unsigned long long t;
    asm volatile(SM_PROFILER_PTX_GLOBALTIMER : "=l"(t));
    return t;
}

#ifdef SM_PROFILER_DISABLE

// ---------------------------------------------------------------------------------------------
// Disabled: no loads, no stores, no asm. The lane is a constant the compiler drops.
// ---------------------------------------------------------------------------------------------

template <int MODE>
static __device__ __forceinline__ sm_profiler_lane_t<MODE> sm_profiler_disabled_lane_() {
    sm_profiler_lane_t<MODE> lane = {0ull, 0u, 0u, 0u, 0u};
    return lane;
}
static __device__ __forceinline__ sm_profiler_lane sm_profiler_init(
    const void*, unsigned int = SM_PROFILER_AUTO_BLOCK, unsigned int = 0) {
    return sm_profiler_disabled_lane_<SM_PROFILER_MODE_PER_BLOCK>();
}
static __device__ __forceinline__ sm_profiler_warp_lane sm_profiler_init_per_warp(
    const void*, unsigned int = SM_PROFILER_AUTO_BLOCK, unsigned int = 0) {
    return sm_profiler_disabled_lane_<SM_PROFILER_MODE_PER_WARP>();
}
static __device__ __forceinline__ sm_profiler_leader_lane sm_profiler_init_leader(
    const void*, unsigned int, unsigned int, bool) {
    return sm_profiler_disabled_lane_<SM_PROFILER_MODE_LEADER>();
}
template <int MODE>
static __device__ __forceinline__ void sm_profiler_event_start(
    sm_profiler_lane_t<MODE>&, unsigned int, bool = true) {}
template <int MODE>
static __device__ __forceinline__ void sm_profiler_event_end(
    sm_profiler_lane_t<MODE>&, unsigned int, bool = true) {}
template <int MODE>
static __device__ __forceinline__ void sm_profiler_event_instant(
    sm_profiler_lane_t<MODE>&, unsigned int, bool = true) {}
template <int MODE>
static __device__ __forceinline__ void sm_profiler_event_end_after(
    sm_profiler_lane_t<MODE>&, unsigned int, unsigned int, bool = true) {}
template <int MODE>
static __device__ __forceinline__ void sm_profiler_flush(sm_profiler_lane_t<MODE>&) {}

#else  // recording

// ---------------------------------------------------------------------------------------------
// Init: read the buffer's shape, find the lane, stamp its anchor (%globaltimer) and SM id.
// ---------------------------------------------------------------------------------------------

template <int MODE>
static __device__ __forceinline__ sm_profiler_lane_t<MODE> sm_profiler_open_lane_(
    const void* buffer, unsigned int block, unsigned int group, unsigned int leader,
    bool stamper, unsigned int opens) {
    // ptx.py's open_lane: the lane rule of docs/format.md (launch slots; a lane outside the
    // shape gets capacity 0 and records at the end of the global header, so its events take the
    // overflow path into the scratch word), and the stamp. Where `opens` (warp-uniform) is 0,
    // one branch and no load: per block, warps 1.. never wait for the buffer's header.
    sm_profiler_lane_t<MODE> out;
    unsigned long long offset_words;
    unsigned int ring_mask;
    asm volatile(SM_PROFILER_PTX_OPEN_LANE
                 : "=l"(offset_words), "=r"(out.capacity), "=r"(ring_mask)
                 : "l"(buffer), "r"(block), "r"(group), "r"(opens), "r"(stamper ? 1u : 0u));
    out.records = (unsigned long long)buffer +
                  (SM_PROFILER_HEADER_WORDS + offset_words) * SM_PROFILER_WORD_BYTES;
    out.cursor = 0u;
    // The leader flag ignores the lane's validity (capacity 0 already keeps such a lane in the
    // scratch word): a flag that depends on the thread index alone lets ptxas keep one predicate.
    out.leader = leader;
#ifdef SM_PROFILER_RING
    out.mask = ring_mask;  // capacity - 1 on a real lane of a ring buffer: events wrap there
#else
    out.mask = 0xFFFFFFFFu;
    (void)ring_mask;
#endif
    return out;
}

// 1 in every thread of warp 0, else 0; spelt so that ptxas sees a warp-uniform value.
static __device__ __forceinline__ unsigned int sm_profiler_warp_zero_() {
    unsigned int flag;
    asm volatile(SM_PROFILER_PTX_WARP_ZERO : "=r"(flag) : "r"(sm_profiler_get_thread_idx()));
    return flag;
}

// The lane of a per-block or leader lane, opened only in the warps that write it (`opens`,
// warp-uniform); the other warps skip the header's loads (and the wait for them) and the lane
// arithmetic, and get an empty lane at the header's end, which no event of theirs stores to.
// Opening behind this branch also keeps the lane's address in ordinary registers: opened in every
// warp, ptxas 12.8/13.0 held it in uniform ones and copied it back before each record's store.
template <int MODE>
static __device__ __forceinline__ sm_profiler_lane_t<MODE> sm_profiler_open_in_writing_warp_(
    const void* buffer, unsigned int block, unsigned int group, unsigned int leader,
    bool stamper, unsigned int opens) {
    sm_profiler_lane_t<MODE> lane;
    if (opens) {
        lane = sm_profiler_open_lane_<MODE>(buffer, block, group, leader, stamper, opens);
    } else {
        lane.records = (unsigned long long)buffer +
                       SM_PROFILER_HEADER_WORDS * SM_PROFILER_WORD_BYTES;
        lane.cursor = 0u;
        lane.capacity = 0u;
        lane.mask = 0xFFFFFFFFu;
    }
    lane.leader = leader;
    return lane;
}

// One lane per (block, group), written by warp 0 of the block. block: the lane's block index
// (default: the linear block index); group: its group.
static __device__ __forceinline__ sm_profiler_lane sm_profiler_init(
    const void* buffer, unsigned int block = SM_PROFILER_AUTO_BLOCK, unsigned int group = 0) {
    if (block == SM_PROFILER_AUTO_BLOCK) block = sm_profiler_get_block_idx();
    unsigned int warp_zero = sm_profiler_warp_zero_();
    return sm_profiler_open_in_writing_warp_<SM_PROFILER_MODE_PER_BLOCK>(
        buffer, block, group, warp_zero, sm_profiler_get_thread_idx() == 0, warp_zero);
}

// One lane per warp: warp w of the block writes lane (block, first_group + w).
static __device__ __forceinline__ sm_profiler_warp_lane sm_profiler_init_per_warp(
    const void* buffer, unsigned int block = SM_PROFILER_AUTO_BLOCK, unsigned int first_group = 0) {
    if (block == SM_PROFILER_AUTO_BLOCK) block = sm_profiler_get_block_idx();
    return sm_profiler_open_lane_<SM_PROFILER_MODE_PER_WARP>(
        buffer, block, first_group + sm_profiler_get_warp_id(), 1u,
        sm_profiler_get_lane_id() == 0, 1u);
}

// One lane per (block, group), written by the one thread where is_leader is true (for example
// `threadIdx.x == 128` for the first thread of the second warp group). The other threads of the
// block may call the events too: they store nothing.
static __device__ __forceinline__ sm_profiler_leader_lane sm_profiler_init_leader(
    const void* buffer, unsigned int block, unsigned int group, bool is_leader) {
    unsigned int holds;  // 1 in every thread of the warp that holds the leader
    asm volatile(SM_PROFILER_PTX_WARP_HOLDS : "=r"(holds) : "r"(is_leader ? 1u : 0u));
    return sm_profiler_open_in_writing_warp_<SM_PROFILER_MODE_LEADER>(
        buffer, block, group, is_leader ? 1u : 0u, is_leader, holds);
}

// ---------------------------------------------------------------------------------------------
// Events. event_no: 0..4095 (SmProfiler.register_event / sm_profiler_register_event ids); a
// larger id is masked to 12 bits. predicate: where false the event is skipped (nothing stored,
// the cursor stays); keep it the same in every thread that writes the lane (or true in one of
// them, e.g. sm_profiler_get_lane_id() == 0, which then writes alone).
// ---------------------------------------------------------------------------------------------

static __device__ __forceinline__ unsigned int sm_profiler_tag_(unsigned int event_no,
                                                                unsigned int kind) {
    return ((event_no & SM_PROFILER_MAX_EVENT_ID) << SM_PROFILER_EVENT_SHIFT) | kind;
}

#ifdef SM_PROFILER_RING
// Ring-capable events: the same record, its slot cursor & mask (mask ~0u: the direct rule).
#define SM_PROFILER_ASM_RECORD_(MODE)                                                          \
    asm volatile(SM_PROFILER_PTX_RING_RECORD_(MODE)::"l"(lane.records), "r"(lane.cursor),     \
                 "r"(lane.capacity), "r"(lane.leader), "r"(tag), "r"(lane.mask))
#define SM_PROFILER_ASM_RECORD_AFTER_(MODE)                                                    \
    asm volatile(SM_PROFILER_PTX_RING_RECORD_(MODE)::"l"(lane.records), "r"(lane.cursor),     \
                 "r"(lane.capacity), "r"(lane.leader), "r"(tag), "r"(lane.mask),              \
                 "r"(dependency))
#else
#define SM_PROFILER_ASM_RECORD_(MODE)                                                          \
    asm volatile(SM_PROFILER_PTX_RECORD_(MODE)::"l"(lane.records), "r"(lane.cursor),          \
                 "r"(lane.capacity), "r"(lane.leader), "r"(tag))
#define SM_PROFILER_ASM_RECORD_AFTER_(MODE)                                                    \
    asm volatile(SM_PROFILER_PTX_RECORD_(MODE)::"l"(lane.records), "r"(lane.cursor),          \
                 "r"(lane.capacity), "r"(lane.leader), "r"(tag), "r"(dependency))
#endif

template <int MODE>
static __device__ __forceinline__ void sm_profiler_record_(sm_profiler_lane_t<MODE>& lane,
                                                           unsigned int tag) {
    if (MODE == SM_PROFILER_MODE_PER_BLOCK) {
        SM_PROFILER_ASM_RECORD_(PER_BLOCK);
    } else if (MODE == SM_PROFILER_MODE_PER_WARP) {
        SM_PROFILER_ASM_RECORD_(PER_WARP);
    } else {
        SM_PROFILER_ASM_RECORD_(LEADER);
    }
    lane.cursor += 1u;
}

// The same record, whose timer read waits until `dependency` exists (a value the range's work
// produced, as 32 bits: e.g. __float_as_uint(x)); see docs/cuda.md, "Ordering".
template <int MODE>
static __device__ __forceinline__ void sm_profiler_record_after_(sm_profiler_lane_t<MODE>& lane,
                                                                 unsigned int tag,
                                                                 unsigned int dependency) {
    if (MODE == SM_PROFILER_MODE_PER_BLOCK) {
        SM_PROFILER_ASM_RECORD_AFTER_(PER_BLOCK_AFTER);
    } else if (MODE == SM_PROFILER_MODE_PER_WARP) {
        SM_PROFILER_ASM_RECORD_AFTER_(PER_WARP_AFTER);
    } else {
        SM_PROFILER_ASM_RECORD_AFTER_(LEADER_AFTER);
    }
    lane.cursor += 1u;
}

// Close the lane after its last event: with SM_PROFILER_RING, in a ring buffer, the writer
// stores the number of records attempted (and re-stamps the anchor if the ring wrapped), so the
// decoder knows where the ring starts; otherwise nothing. Every thread may call it.
template <int MODE>
static __device__ __forceinline__ void sm_profiler_flush(sm_profiler_lane_t<MODE>& lane) {
#ifdef SM_PROFILER_RING
    asm volatile(SM_PROFILER_PTX_RING_CLOSE::"l"(lane.records), "r"(lane.cursor),
                 "r"(lane.capacity), "r"(lane.leader), "r"(lane.mask));
#else
    (void)lane;
#endif
}

// Begin a range of event_no.
template <int MODE>
static __device__ __forceinline__ void sm_profiler_event_start(sm_profiler_lane_t<MODE>& lane,
                                                               unsigned int event_no,
                                                               bool predicate = true) {
    if (predicate) sm_profiler_record_(lane, sm_profiler_tag_(event_no, SM_PROFILER_KIND_BEGIN));
}

// End the innermost open range of event_no.
template <int MODE>
static __device__ __forceinline__ void sm_profiler_event_end(sm_profiler_lane_t<MODE>& lane,
                                                             unsigned int event_no,
                                                             bool predicate = true) {
    if (predicate) sm_profiler_record_(lane, sm_profiler_tag_(event_no, SM_PROFILER_KIND_END));
}

// A point event.
template <int MODE>
static __device__ __forceinline__ void sm_profiler_event_instant(sm_profiler_lane_t<MODE>& lane,
                                                                 unsigned int event_no,
                                                                 bool predicate = true) {
    if (predicate) {
        sm_profiler_record_(lane, sm_profiler_tag_(event_no, SM_PROFILER_KIND_INSTANT));
    }
}

// End a range once `dependency` (32 bits of a value the range computed or loaded) exists.
template <int MODE>
static __device__ __forceinline__ void sm_profiler_event_end_after(
    sm_profiler_lane_t<MODE>& lane, unsigned int event_no, unsigned int dependency,
    bool predicate = true) {
    if (predicate) {
        sm_profiler_record_after_(lane, sm_profiler_tag_(event_no, SM_PROFILER_KIND_END),
                                  dependency);
    }
}

#endif  // SM_PROFILER_DISABLE

// ---------------------------------------------------------------------------------------------
// RAII range: SM_PROFILER_RANGE(lane, EVT) records start(EVT) here and end(EVT) where the
// enclosing scope ends (any number per scope).
// ---------------------------------------------------------------------------------------------

template <class T> struct sm_profiler_unref_ { typedef T type; };
template <class T> struct sm_profiler_unref_<T&> { typedef T type; };

template <class LANE>
struct sm_profiler_range_t {
    LANE& lane;
    unsigned int event_no;
    __device__ __forceinline__ sm_profiler_range_t(LANE& l, unsigned int e)
        : lane(l), event_no(e) {
        sm_profiler_event_start(lane, event_no);
    }
    __device__ __forceinline__ ~sm_profiler_range_t() { sm_profiler_event_end(lane, event_no); }
};

#define SM_PROFILER_CAT_(a, b) a##b
#define SM_PROFILER_CAT(a, b) SM_PROFILER_CAT_(a, b)
#define SM_PROFILER_RANGE(lane, event_no)                                                    \
    sm_profiler_range_t<typename sm_profiler_unref_<decltype(lane)>::type> SM_PROFILER_CAT( \
        sm_profiler_range_, __LINE__)(lane, event_no)

#endif  // SM_PROFILER_CUH
