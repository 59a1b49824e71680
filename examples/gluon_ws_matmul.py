"""
Who waited on what: a warp-specialized Hopper matmul in Gluon
==============================================================

In this example you will learn:

* how to instrument a **warp-specialized** Gluon kernel (``gl.warp_specialize``): every
  partition opens its own lane with ``profiler_init(prof, pid, GROUP)``, so the producer warp,
  the MMA warpgroup and the epilogue warp each get a thread in Perfetto
  (``block 3 · producer``, ``block 3 · mma``, ``block 3 · epilogue``);
* which events answer "who waited on what" in a pipelined kernel: a ``wait_empty`` range while
  the producer waits for a free shared-memory slot, a ``load`` instant when it issues the TMA
  copies, a ``wait_full`` range while the MMA waits for the data, an ``mma`` range, and the
  hand-off of each output tile to the epilogue (``wait_epilogue`` on one side, ``wait_acc`` and
  ``epilogue`` on the other), plus a ``tile`` range per output tile in every partition;
* how to read the trace: a consumer that spends its time in ``wait_full`` is starved by
  memory; a producer that spends its time in ``wait_empty`` is ahead and the MMA is the
  bottleneck, as it should be in a compute-bound matmul;
* that ``PROFILE=False`` compiles every op away (the PTX has no ``%globaltimer``) and that the
  profiled result is bit-identical to the unprofiled one.

The kernel: a persistent (grid = number of SMs, tiles strided by the grid), pipelined
(``NUM_STAGES`` shared-memory slots, each with a *full* and an *empty* mbarrier)
fp16 x fp16 -> fp16 matmul with fp32 accumulation, on Hopper (sm_90): TMA loads, ``wgmma``
(``warpgroup_mma``) and a TMA store. Three partitions:

* **mma** (the default partition, 4 warps = one warpgroup): waits for a full slot, runs the
  wgmma, frees the slot; at the end of a tile converts the accumulator to fp16 and hands it to
  the epilogue through shared memory;
* **producer** (worker, 1 warp): waits for an empty slot, issues the two TMA loads of A and B
  into it (``mbarrier.expect`` + TMA copy);
* **epilogue** (worker, 1 warp): waits for the tile, stores it with TMA, and frees the C buffer.

Needs an H100/H200 (sm_90) to run. Without one, ``main()`` compiles the kernel for sm_90 on the
CPU (profiled and unprofiled) and reports the ``%globaltimer`` reads in the PTX. Compiles with
Triton 3.6 through 3.9 (the only API difference used here: the TMA copies were renamed from
``tma.async_copy_global_to_shared`` / ``async_copy_shared_to_global`` to ``tma.async_load`` /
``async_store``; see ``_tma_load`` below).

Run: ``python examples/gluon_ws_matmul.py [OUT_DIR]``.
"""

# %%
# Motivation
# ----------
#
# In a warp-specialized kernel the warps of a program do different jobs and hand data to each
# other through shared memory and mbarriers. When such a kernel is slower than expected, the
# question is *which side waits*: does the MMA warpgroup wait for loads (memory bound, or too few
# stages), does the producer wait for free slots (fine: the tensor cores are the bottleneck), or
# does the MMA wait for the epilogue to drain the previous tile? Kernel-level timings cannot
# tell; per-partition lanes with one range around each wait can.

import os
import sys
import warnings

import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (
    fence_async_shared,
    mbarrier,
    tma,
    warpgroup_mma,
    warpgroup_mma_wait,
)

from sm_profiler import SmProfiler
from sm_profiler.gluon_ops import (
    profiler_event_end,
    profiler_event_instant,
    profiler_event_start,
    profiler_flush,
    profiler_init,
)

# Triton 3.6 names the TMA copies async_copy_global_to_shared / async_copy_shared_to_global;
# later versions call them async_load / async_store (and the old names raise). Both are builtins
# with the same arguments, so a module-level alias works inside @gluon.jit code.
if hasattr(tma, "async_load"):
    _tma_load, _tma_store = tma.async_load, tma.async_store
else:
    _tma_load, _tma_store = tma.async_copy_global_to_shared, tma.async_copy_shared_to_global

# Event ids (constexpr, 0..4095) and their names, registered on the host.
TILE, WAIT_EMPTY, LOAD, WAIT_FULL, MMA, WAIT_EPILOGUE, WAIT_ACC, EPILOGUE = (
    gl.constexpr(i) for i in range(8)
)
EVENT_NAMES = [
    "tile",
    "wait_empty",
    "load",
    "wait_full",
    "mma",
    "wait_epilogue",
    "wait_acc",
    "epilogue",
]
# Lane groups: one per partition.
PRODUCER, MMA_GROUP, EPILOGUE_GROUP = gl.constexpr(0), gl.constexpr(1), gl.constexpr(2)
GROUP_NAMES = ["producer", "mma", "epilogue"]

BLOCK_M, BLOCK_N, BLOCK_K, NUM_STAGES = 128, 128, 64, 4
NUM_WARPS = 4  # the default (mma) partition: one warpgroup for wgmma
WORKER_WARPS = [1, 1]  # producer, epilogue (the kernel's warp_specialize call spells them out)

# %%
# Compute kernel
# --------------
#
# All three partitions walk the same sequence: output tiles ``pid, pid + P, pid + 2P, ...``
# (P = the grid), and inside a tile the K steps. A running counter ``it`` over all (tile, k)
# pairs picks the slot (``it % NUM_STAGES``) and the mbarrier phase (``(it // NUM_STAGES) & 1``),
# so the producer and the MMA agree on the slot without talking. A fresh mbarrier counts as having
# completed the phase before phase 0, which is why the producer waits on ``phase ^ 1``: its first
# pass over the ring does not block.
#
# The events sit right around the waits. The ``load`` instant is stamped *before* the TMA is
# issued, so on every lane it precedes the moment the MMA sees the slot full (the test checks
# this causality on the GPU).


@gluon.jit
def _tile_coords(tile, num_pid_n, BM: gl.constexpr, BN: gl.constexpr):
    return (tile // num_pid_n) * BM, (tile % num_pid_n) * BN


@gluon.jit
def _producer_partition(
    a_desc,
    b_desc,
    c_desc,
    a_bufs,
    b_bufs,
    c_smem,
    empty_bars,
    full_bars,
    acc_ready,
    acc_empty,
    prof,
    PROFILE: gl.constexpr,
):
    BM: gl.constexpr = c_desc.block_type.shape[0]
    BN: gl.constexpr = c_desc.block_type.shape[1]
    BK: gl.constexpr = a_desc.block_type.shape[1]
    STAGES: gl.constexpr = a_bufs.type.shape[0]
    pid = gl.program_id(0)
    ctx = profiler_init(prof, pid, PRODUCER, ENABLED=PROFILE)
    num_pid_n = gl.cdiv(c_desc.shape[1], BN)
    num_tiles = gl.cdiv(c_desc.shape[0], BM) * num_pid_n
    k_steps = gl.cdiv(a_desc.shape[1], BK)
    it = 0
    for tile in range(pid, num_tiles, gl.num_programs(0)):
        ctx = profiler_event_start(ctx, TILE)
        off_m, off_n = _tile_coords(tile, num_pid_n, BM, BN)
        for k in range(k_steps):
            s = it % STAGES
            phase = (it // STAGES) & 1
            ctx = profiler_event_start(ctx, WAIT_EMPTY)
            mbarrier.wait(empty_bars.index(s), phase ^ 1)
            ctx = profiler_event_end(ctx, WAIT_EMPTY)
            ctx = profiler_event_instant(ctx, LOAD)  # before the issue: precedes "full"
            bar = full_bars.index(s)
            mbarrier.expect(bar, a_desc.block_type.nbytes + b_desc.block_type.nbytes)
            _tma_load(a_desc, [off_m, k * BK], bar, a_bufs.index(s))
            _tma_load(b_desc, [k * BK, off_n], bar, b_bufs.index(s))
            it += 1
        ctx = profiler_event_end(ctx, TILE)
    profiler_flush(ctx)


@gluon.jit
def _mma_partition(
    a_desc,
    b_desc,
    c_desc,
    a_bufs,
    b_bufs,
    c_smem,
    empty_bars,
    full_bars,
    acc_ready,
    acc_empty,
    prof,
    PROFILE: gl.constexpr,
):
    BM: gl.constexpr = c_desc.block_type.shape[0]
    BN: gl.constexpr = c_desc.block_type.shape[1]
    BK: gl.constexpr = a_desc.block_type.shape[1]
    STAGES: gl.constexpr = a_bufs.type.shape[0]
    # wgmma's accumulator layout: the partition's warps stacked along M, one m64nNk16 per warp
    # group (instr_shape [16, N, 16] for fp16).
    acc_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[gl.num_warps(), 1], instr_shape=[16, BN, 16]
    )
    pid = gl.program_id(0)
    ctx = profiler_init(prof, pid, MMA_GROUP, ENABLED=PROFILE)
    num_pid_n = gl.cdiv(c_desc.shape[1], BN)
    num_tiles = gl.cdiv(c_desc.shape[0], BM) * num_pid_n
    k_steps = gl.cdiv(a_desc.shape[1], BK)
    it = 0
    t = 0
    for _tile in range(pid, num_tiles, gl.num_programs(0)):
        ctx = profiler_event_start(ctx, TILE)
        acc = gl.zeros((BM, BN), dtype=gl.float32, layout=acc_layout)
        for _k in range(k_steps):
            s = it % STAGES
            phase = (it // STAGES) & 1
            ctx = profiler_event_start(ctx, WAIT_FULL)
            mbarrier.wait(full_bars.index(s), phase)
            ctx = profiler_event_end(ctx, WAIT_FULL)
            ctx = profiler_event_start(ctx, MMA)
            acc = warpgroup_mma(a_bufs.index(s), b_bufs.index(s), acc, is_async=True)
            # Wait for this wgmma before freeing its slot (a deeper kernel would keep one in
            # flight and free the previous slot instead).
            acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))
            ctx = profiler_event_end(ctx, MMA)
            mbarrier.arrive(empty_bars.index(s), count=1)
            it += 1
        # Hand the tile to the epilogue: wait until it has stored the previous one.
        ctx = profiler_event_start(ctx, WAIT_EPILOGUE)
        mbarrier.wait(acc_empty, (t & 1) ^ 1)
        ctx = profiler_event_end(ctx, WAIT_EPILOGUE)
        c_smem.store(acc.to(c_desc.dtype))
        fence_async_shared()  # order the shared stores before the epilogue's TMA store
        mbarrier.arrive(acc_ready, count=1)
        ctx = profiler_event_end(ctx, TILE)
        t += 1
    profiler_flush(ctx)


@gluon.jit
def _epilogue_partition(
    a_desc,
    b_desc,
    c_desc,
    a_bufs,
    b_bufs,
    c_smem,
    empty_bars,
    full_bars,
    acc_ready,
    acc_empty,
    prof,
    PROFILE: gl.constexpr,
):
    BM: gl.constexpr = c_desc.block_type.shape[0]
    BN: gl.constexpr = c_desc.block_type.shape[1]
    pid = gl.program_id(0)
    ctx = profiler_init(prof, pid, EPILOGUE_GROUP, ENABLED=PROFILE)
    num_pid_n = gl.cdiv(c_desc.shape[1], BN)
    num_tiles = gl.cdiv(c_desc.shape[0], BM) * num_pid_n
    t = 0
    for tile in range(pid, num_tiles, gl.num_programs(0)):
        ctx = profiler_event_start(ctx, TILE)
        off_m, off_n = _tile_coords(tile, num_pid_n, BM, BN)
        ctx = profiler_event_start(ctx, WAIT_ACC)
        mbarrier.wait(acc_ready, t & 1)
        ctx = profiler_event_end(ctx, WAIT_ACC)
        ctx = profiler_event_start(ctx, EPILOGUE)
        fence_async_shared()  # the mma warps' shared stores, before the TMA (async proxy) reads
        _tma_store(c_desc, [off_m, off_n], c_smem)
        tma.store_wait(0)  # the store has read c_smem: it may be overwritten
        ctx = profiler_event_end(ctx, EPILOGUE)
        mbarrier.arrive(acc_empty, count=1)
        ctx = profiler_event_end(ctx, TILE)
        t += 1
    profiler_flush(ctx)


@gluon.jit
def ws_matmul_kernel(a_desc, b_desc, c_desc, prof, PROFILE: gl.constexpr, NUM_STAGES: gl.constexpr):
    """C = A @ B. a_desc [BM, BK], b_desc [BK, BN], c_desc [BM, BN] TMA descriptors (fp16)."""
    a_bufs = gl.allocate_shared_memory(
        a_desc.dtype, [NUM_STAGES] + a_desc.block_type.shape, a_desc.layout
    )
    b_bufs = gl.allocate_shared_memory(
        b_desc.dtype, [NUM_STAGES] + b_desc.block_type.shape, b_desc.layout
    )
    c_smem = gl.allocate_shared_memory(c_desc.dtype, c_desc.block_type.shape, c_desc.layout)
    empty_bars = gl.allocate_shared_memory(gl.int64, [NUM_STAGES, 1], mbarrier.MBarrierLayout())
    full_bars = gl.allocate_shared_memory(gl.int64, [NUM_STAGES, 1], mbarrier.MBarrierLayout())
    acc_ready = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    acc_empty = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    for i in gl.static_range(NUM_STAGES):
        mbarrier.init(empty_bars.index(i), count=1)
        mbarrier.init(full_bars.index(i), count=1)
    mbarrier.init(acc_ready, count=1)
    mbarrier.init(acc_empty, count=1)
    fence_async_shared()  # the initialised barriers are visible to the TMA unit

    # Every partition gets the same arguments (written inline: a tuple assigned to a variable
    # first would turn the constexpr PROFILE into a tensor). The default partition comes first.
    gl.warp_specialize(
        [
            (
                _mma_partition,
                (
                    a_desc,
                    b_desc,
                    c_desc,
                    a_bufs,
                    b_bufs,
                    c_smem,
                    empty_bars,
                    full_bars,
                    acc_ready,
                    acc_empty,
                    prof,
                    PROFILE,
                ),
            ),
            (
                _producer_partition,
                (
                    a_desc,
                    b_desc,
                    c_desc,
                    a_bufs,
                    b_bufs,
                    c_smem,
                    empty_bars,
                    full_bars,
                    acc_ready,
                    acc_empty,
                    prof,
                    PROFILE,
                ),
            ),
            (
                _epilogue_partition,
                (
                    a_desc,
                    b_desc,
                    c_desc,
                    a_bufs,
                    b_bufs,
                    c_smem,
                    empty_bars,
                    full_bars,
                    acc_ready,
                    acc_empty,
                    prof,
                    PROFILE,
                ),
            ),
        ],
        [1, 1],  # warps: producer, epilogue (WORKER_WARPS)
        [40, 40],  # registers per thread: scalar code only; the mma warpgroup gets the rest
    )


# %%
# Launcher
# --------
#
# TMA descriptors describe the full matrices and the tile each copy moves; the shared layouts
# (NVMMASharedLayout, 128-byte swizzle) are what both TMA and wgmma read. The grid is the number
# of SMs (at most the number of tiles): one persistent program per SM.


def _layouts():
    f16 = gl.float16
    return (
        gl.NVMMASharedLayout.get_default_for([BLOCK_M, BLOCK_K], f16),
        gl.NVMMASharedLayout.get_default_for([BLOCK_K, BLOCK_N], f16),
        gl.NVMMASharedLayout.get_default_for([BLOCK_M, BLOCK_N], f16),
    )


def num_tiles(M, N):
    return triton.cdiv(M, BLOCK_M) * triton.cdiv(N, BLOCK_N)


def grid_size(M, N):
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    return min(sms, num_tiles(M, N))


def make_profiler(M, N, K, kernel_name="gluon_ws_matmul"):
    """One lane per (program, partition); capacity for the busiest lane (the mma's)."""
    grid = grid_size(M, N)
    tiles_per_program = triton.cdiv(num_tiles(M, N), grid)
    k_steps = triton.cdiv(K, BLOCK_K)
    # mma per tile: tile (2) + per K step wait_full and mma (4) + wait_epilogue (2).
    # producer per tile: 2 + 3 per K step; epilogue: 6.
    prof = SmProfiler(
        num_blocks=grid,
        num_groups=len(GROUP_NAMES),
        max_events_per_group=tiles_per_program * (4 + 4 * k_steps),
        kernel_name=kernel_name,
        group_names=GROUP_NAMES,
    )
    for i, name in enumerate(EVENT_NAMES):
        prof.register_event(i, name)
    return prof


def matmul(a, b, prof=None):
    """C = a @ b (fp16, fp32 accumulation) with the warp-specialized kernel; records into
    `prof` (an SmProfiler from make_profiler) when given."""
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

    M, K = a.shape
    K2, N = b.shape
    assert K == K2 and a.dtype == b.dtype == torch.float16
    assert a.is_contiguous() and b.is_contiguous()
    c = torch.empty((M, N), device=a.device, dtype=torch.float16)
    a_l, b_l, c_l = _layouts()
    a_desc = TensorDescriptor.from_tensor(a, [BLOCK_M, BLOCK_K], a_l)
    b_desc = TensorDescriptor.from_tensor(b, [BLOCK_K, BLOCK_N], b_l)
    c_desc = TensorDescriptor.from_tensor(c, [BLOCK_M, BLOCK_N], c_l)
    if prof is None:
        # An unprofiled launch still needs a pointer argument: a one-word dummy, never touched.
        buf, profile = torch.zeros(1, device=a.device, dtype=torch.int64), False
    else:
        buf, profile = prof.get_buffer(), prof.enabled
        assert prof.num_blocks >= grid_size(M, N)
    ws_matmul_kernel[(grid_size(M, N),)](
        a_desc, b_desc, c_desc, buf, PROFILE=profile, NUM_STAGES=NUM_STAGES, num_warps=NUM_WARPS
    )
    return c


# %%
# Compiling without a GPU
# -----------------------
#
# ``triton.compile`` with a ``GPUTarget`` builds PTX for sm_90 on a CPU. The descriptors'
# types are spelled out in the signature: ``tensordesc<fp16[128, 64],NVMMASharedLayout(...)>``.


def signature():
    a_l, b_l, c_l = _layouts()
    return {
        "a_desc": f"tensordesc<fp16[{BLOCK_M}, {BLOCK_K}],{a_l!r}>",
        "b_desc": f"tensordesc<fp16[{BLOCK_K}, {BLOCK_N}],{b_l!r}>",
        "c_desc": f"tensordesc<fp16[{BLOCK_M}, {BLOCK_N}],{c_l!r}>",
        "prof": "*i64",
        "PROFILE": "constexpr",
        "NUM_STAGES": "constexpr",
    }


def compile_for(profile, arch=90):
    """The compiled kernel (``.asm["ptx"]``, ``.asm["ttgir"]``, ...) for sm_`arch`."""
    from triton.backends.compiler import GPUTarget
    from triton.experimental.gluon._runtime import GluonASTSource

    src = GluonASTSource(
        ws_matmul_kernel, signature(), {"PROFILE": profile, "NUM_STAGES": NUM_STAGES}
    )
    return triton.compile(src, target=GPUTarget("cuda", arch, 32), options={"num_warps": NUM_WARPS})


def timer_reads(ptx_text):
    return ptx_text.count("%globaltimer")


def compile_check():
    out = {}
    for profile in (False, True):
        k = compile_for(profile)
        out[profile] = timer_reads(k.asm["ptx"])
        print(
            f"compiled ws_matmul_kernel for sm_90 with PROFILE={profile}: "
            f"{out[profile]} %globaltimer reads in the PTX"
        )
    return out


# %%
# Correctness and profiling output
# --------------------------------


def is_hopper():
    return torch.cuda.is_available() and torch.cuda.get_device_capability()[0] == 9


def summarize_waits(trace):
    """Total time per (partition, event), as a share of the partition's tile time."""
    ev = trace.events
    lines = []
    for g, gname in enumerate(GROUP_NAMES):
        m = ev["group"] == g
        tile = (ev["end_ns"] - ev["start_ns"])[m & (ev["event"] == 0) & (ev["kind"] == 0)].sum()
        parts = []
        for e, name in enumerate(EVENT_NAMES[1:], start=1):
            sel = m & (ev["event"] == e) & (ev["kind"] == 0)
            if sel.any() and tile > 0:
                share = 100.0 * (ev["end_ns"] - ev["start_ns"])[sel].sum() / tile
                parts.append(f"{name} {share:.0f}%")
        lines.append(f"  {gname:<9} " + ", ".join(parts))
    return "time inside the tiles, per partition:\n" + "\n".join(lines)


def main(out_dir="sm_profiler_examples_out/gluon_ws_matmul", M=4096, N=4096, K=4096):
    if not is_hopper():
        print("no Hopper (sm_90) GPU: compiling for sm_90 on the CPU instead")
        compile_check()
        return None
    torch.manual_seed(0)
    a = torch.randn(M, K, device="cuda", dtype=torch.float16)
    b = torch.randn(K, N, device="cuda", dtype=torch.float16)
    c_plain = matmul(a, b)
    ref = torch.matmul(a, b)
    torch.testing.assert_close(c_plain.float(), ref.float(), atol=0.5, rtol=0.02)
    prof = make_profiler(M, N, K)
    c = matmul(a, b, prof)
    torch.cuda.synchronize()
    assert torch.equal(c, c_plain), "the profiled result differs from the unprofiled one"
    print(f"C ({M}x{N}, K={K}) matches torch.matmul; profiled C is bit-identical")
    prof.print_stats()
    trace = prof.decode()
    print(summarize_waits(trace))
    # What the events cost: the same launch timed with and without them, on a profiler of its
    # own. Its records are never read: relaunching into one buffer is fine for timing (each
    # launch rewrites its lanes from the start), so the warning that says so is silenced.
    prof_timing = make_profiler(M, N, K)
    ms_plain = triton.testing.do_bench(lambda: matmul(a, b))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        ms_prof = triton.testing.do_bench(lambda: matmul(a, b, prof_timing))
    tflops = 2 * M * N * K / (ms_plain * 1e-3) / 1e12
    print(
        f"unprofiled {ms_plain * 1e3:.1f} us ({tflops:.0f} TFLOP/s), profiled "
        f"{ms_prof * 1e3:.1f} us ({100 * (ms_prof / ms_plain - 1):+.1f}%)"
    )
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, "gluon_ws_matmul.perfetto-trace")
    prof.export(path)
    print(f"wrote {path} (per SM: 'block b · producer', 'block b · mma', 'block b · epilogue')")
    return trace


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "sm_profiler_examples_out/gluon_ws_matmul")
