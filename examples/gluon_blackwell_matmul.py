"""
Who waited on what, on Blackwell: a warp-specialized tcgen05 matmul in Gluon
============================================================================

The Blackwell (sm_100) sibling of ``gluon_ws_matmul.py`` (read that one first). In this
example you will learn:

* how the partitions change when the MMA is ``tcgen05``: the accumulator lives in *tensor
  memory*, the MMA is issued by **one thread** and completes asynchronously, so a single-warp
  **mma** worker issues the MMAs and the 4-warp default partition is the **epilogue**;
* what an ``mma`` range means then: the time to *issue* a tcgen05 MMA, not to run it. The MMA's
  completion is signalled on the slot's *empty* mbarrier (``tcgen05_mma(..., mbarriers=[...])``),
  so it shows up as the end of the producer's ``wait_empty``; the end of a tile's MMAs
  (``tcgen05_commit``) shows up as the end of the epilogue's ``wait_acc``;
* double-buffered accumulators (two tiles in tensor memory): the epilogue of tile t overlaps
  the MMAs of tile t + 1, and ``wait_epilogue`` in the mma lane shows when it does not.

Partitions and lane groups: producer (worker, 1 warp, group 0), mma (worker, 1 warp, group 1),
epilogue (default, 4 warps, group 2). The events are those of ``gluon_ws_matmul.py``.

Needs a Blackwell data-center GPU (sm_100) to run; not run by this project's tests, which only
compile it for sm_100 on a CPU (``main()`` does the same without such a GPU). Compiles with
Triton 3.6 through 3.9; the API differences met: the TMA copy names (see ``_tma_load``) and
loading the accumulator from tensor memory, which needs an explicit register layout
(``get_tmem_reg_layout``) in 3.6 and takes none in 3.9, where that function is gone.

Run: ``python examples/gluon_blackwell_matmul.py [OUT_DIR]``.
"""

# %%
# Setup
# -----

import os
import sys

import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia import blackwell as bw
from triton.experimental.gluon.language.nvidia.blackwell import (
    TensorMemoryLayout,
    allocate_tensor_memory,
    fence_async_shared,
    mbarrier,
    tcgen05_commit,
    tcgen05_mma,
    tma,
)

from sm_profiler.gluon_ops import (
    profiler_event_end,
    profiler_event_instant,
    profiler_event_start,
    profiler_flush,
    profiler_init,
)

if hasattr(tma, "async_load"):  # Triton >= 3.7 names; 3.6 has only the old ones
    _tma_load, _tma_store = tma.async_load, tma.async_store
else:
    _tma_load, _tma_store = tma.async_copy_global_to_shared, tma.async_copy_shared_to_global
# Triton 3.6: tensor_memory_descriptor.load(layout) needs get_tmem_reg_layout(...); later
# versions pick the layout themselves (load()) and no longer have the function.
get_tmem_reg_layout = getattr(bw, "get_tmem_reg_layout", None)
TMEM_LOAD_NEEDS_LAYOUT = gl.constexpr(get_tmem_reg_layout is not None)

# The events, lane groups, tile sizes and host helpers are the Hopper sibling's.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gluon_ws_matmul import (  # noqa: E402
    BLOCK_K,
    BLOCK_M,
    BLOCK_N,
    EPILOGUE,
    EPILOGUE_GROUP,
    LOAD,
    MMA,
    MMA_GROUP,
    NUM_STAGES,
    PRODUCER,
    TILE,
    WAIT_ACC,
    WAIT_EMPTY,
    WAIT_EPILOGUE,
    WAIT_FULL,
    _layouts,
    _tile_coords,
    grid_size,
    make_profiler,
)

NUM_ACC = 2  # accumulators in tensor memory: the epilogue drains one while the MMA fills the other
NUM_WARPS = 4  # the default (epilogue) partition

# %%
# Compute kernel
# --------------
#
# As in the Hopper example, every partition walks the same (tile, k) sequence; slots and phases
# follow from a running counter. Tile t uses accumulator ``t % NUM_ACC``.


@gluon.jit
def _producer_partition(
    a_desc,
    b_desc,
    c_desc,
    a_bufs,
    b_bufs,
    c_smem,
    acc_tmem,
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
            ctx = profiler_event_start(ctx, WAIT_EMPTY)
            mbarrier.wait(empty_bars.index(s), ((it // STAGES) & 1) ^ 1)
            ctx = profiler_event_end(ctx, WAIT_EMPTY)
            ctx = profiler_event_instant(ctx, LOAD)
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
    acc_tmem,
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
    ACCS: gl.constexpr = acc_tmem.type.shape[0]
    pid = gl.program_id(0)
    ctx = profiler_init(prof, pid, MMA_GROUP, ENABLED=PROFILE)
    num_pid_n = gl.cdiv(c_desc.shape[1], BN)
    num_tiles = gl.cdiv(c_desc.shape[0], BM) * num_pid_n
    k_steps = gl.cdiv(a_desc.shape[1], BK)
    it = 0
    t = 0
    for _tile in range(pid, num_tiles, gl.num_programs(0)):
        ctx = profiler_event_start(ctx, TILE)
        buf = t % ACCS
        acc = acc_tmem.index(buf)
        # The epilogue must have read this accumulator (tile t - ACCS) out of tensor memory.
        ctx = profiler_event_start(ctx, WAIT_EPILOGUE)
        mbarrier.wait(acc_empty.index(buf), ((t // ACCS) & 1) ^ 1)
        ctx = profiler_event_end(ctx, WAIT_EPILOGUE)
        use_acc = False
        for _k in range(k_steps):
            s = it % STAGES
            ctx = profiler_event_start(ctx, WAIT_FULL)
            mbarrier.wait(full_bars.index(s), (it // STAGES) & 1)
            ctx = profiler_event_end(ctx, WAIT_FULL)
            ctx = profiler_event_start(ctx, MMA)  # the issue; completion frees the slot
            tcgen05_mma(
                a_bufs.index(s),
                b_bufs.index(s),
                acc,
                use_acc=use_acc,
                mbarriers=[empty_bars.index(s)],
            )
            ctx = profiler_event_end(ctx, MMA)
            use_acc = True
            it += 1
        tcgen05_commit(acc_ready.index(buf))  # arrives once every MMA of the tile is done
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
    acc_tmem,
    empty_bars,
    full_bars,
    acc_ready,
    acc_empty,
    prof,
    PROFILE: gl.constexpr,
):
    BM: gl.constexpr = c_desc.block_type.shape[0]
    BN: gl.constexpr = c_desc.block_type.shape[1]
    ACCS: gl.constexpr = acc_tmem.type.shape[0]
    pid = gl.program_id(0)
    ctx = profiler_init(prof, pid, EPILOGUE_GROUP, ENABLED=PROFILE)
    num_pid_n = gl.cdiv(c_desc.shape[1], BN)
    num_tiles = gl.cdiv(c_desc.shape[0], BM) * num_pid_n
    t = 0
    for tile in range(pid, num_tiles, gl.num_programs(0)):
        ctx = profiler_event_start(ctx, TILE)
        off_m, off_n = _tile_coords(tile, num_pid_n, BM, BN)
        buf = t % ACCS
        ctx = profiler_event_start(ctx, WAIT_ACC)
        mbarrier.wait(acc_ready.index(buf), (t // ACCS) & 1)
        ctx = profiler_event_end(ctx, WAIT_ACC)
        ctx = profiler_event_start(ctx, EPILOGUE)
        if TMEM_LOAD_NEEDS_LAYOUT:
            reg_layout: gl.constexpr = get_tmem_reg_layout(
                gl.float32, (BM, BN), acc_tmem.type.layout, gl.num_warps()
            )
            acc = acc_tmem.index(buf).load(reg_layout)
        else:
            acc = acc_tmem.index(buf).load()
        mbarrier.arrive(acc_empty.index(buf), count=1)  # the MMAs may refill it now
        tma.store_wait(0)  # the previous tile's store has read c_smem
        c_smem.store(acc.to(c_desc.dtype))
        fence_async_shared()
        _tma_store(c_desc, [off_m, off_n], c_smem)
        ctx = profiler_event_end(ctx, EPILOGUE)
        ctx = profiler_event_end(ctx, TILE)
        t += 1
    tma.store_wait(0)
    profiler_flush(ctx)


@gluon.jit
def bw_matmul_kernel(
    a_desc,
    b_desc,
    c_desc,
    prof,
    PROFILE: gl.constexpr,
    NUM_STAGES: gl.constexpr,
    NUM_ACC: gl.constexpr,
):
    BM: gl.constexpr = c_desc.block_type.shape[0]
    BN: gl.constexpr = c_desc.block_type.shape[1]
    a_bufs = gl.allocate_shared_memory(
        a_desc.dtype, [NUM_STAGES] + a_desc.block_type.shape, a_desc.layout
    )
    b_bufs = gl.allocate_shared_memory(
        b_desc.dtype, [NUM_STAGES] + b_desc.block_type.shape, b_desc.layout
    )
    c_smem = gl.allocate_shared_memory(c_desc.dtype, c_desc.block_type.shape, c_desc.layout)
    acc_tmem = allocate_tensor_memory(
        gl.float32, [NUM_ACC, BM, BN], TensorMemoryLayout(block=(BM, BN), col_stride=1)
    )
    empty_bars = gl.allocate_shared_memory(gl.int64, [NUM_STAGES, 1], mbarrier.MBarrierLayout())
    full_bars = gl.allocate_shared_memory(gl.int64, [NUM_STAGES, 1], mbarrier.MBarrierLayout())
    acc_ready = gl.allocate_shared_memory(gl.int64, [NUM_ACC, 1], mbarrier.MBarrierLayout())
    acc_empty = gl.allocate_shared_memory(gl.int64, [NUM_ACC, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(NUM_STAGES):
        mbarrier.init(empty_bars.index(i), count=1)
        mbarrier.init(full_bars.index(i), count=1)
    for i in gl.static_range(NUM_ACC):
        mbarrier.init(acc_ready.index(i), count=1)
        mbarrier.init(acc_empty.index(i), count=1)
    fence_async_shared()

    gl.warp_specialize(
        [
            (
                _epilogue_partition,
                (
                    a_desc,
                    b_desc,
                    c_desc,
                    a_bufs,
                    b_bufs,
                    c_smem,
                    acc_tmem,
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
                    acc_tmem,
                    empty_bars,
                    full_bars,
                    acc_ready,
                    acc_empty,
                    prof,
                    PROFILE,
                ),
            ),
            (
                _mma_partition,
                (
                    a_desc,
                    b_desc,
                    c_desc,
                    a_bufs,
                    b_bufs,
                    c_smem,
                    acc_tmem,
                    empty_bars,
                    full_bars,
                    acc_ready,
                    acc_empty,
                    prof,
                    PROFILE,
                ),
            ),
        ],
        [1, 1],  # warps: producer, mma
        [40, 40],  # registers per thread of the workers
    )


# %%
# Launcher
# --------


def matmul(a, b, prof=None):
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

    M, K = a.shape
    N = b.shape[1]
    c = torch.empty((M, N), device=a.device, dtype=torch.float16)
    a_l, b_l, c_l = _layouts()
    a_desc = TensorDescriptor.from_tensor(a, [BLOCK_M, BLOCK_K], a_l)
    b_desc = TensorDescriptor.from_tensor(b, [BLOCK_K, BLOCK_N], b_l)
    c_desc = TensorDescriptor.from_tensor(c, [BLOCK_M, BLOCK_N], c_l)
    if prof is None:
        buf, profile = torch.zeros(1, device=a.device, dtype=torch.int64), False
    else:
        buf, profile = prof.get_buffer(), prof.enabled
    bw_matmul_kernel[(grid_size(M, N),)](
        a_desc,
        b_desc,
        c_desc,
        buf,
        PROFILE=profile,
        NUM_STAGES=NUM_STAGES,
        NUM_ACC=NUM_ACC,
        num_warps=NUM_WARPS,
    )
    return c


# %%
# Compiling without a GPU
# -----------------------


def signature():
    a_l, b_l, c_l = _layouts()
    return {
        "a_desc": f"tensordesc<fp16[{BLOCK_M}, {BLOCK_K}],{a_l!r}>",
        "b_desc": f"tensordesc<fp16[{BLOCK_K}, {BLOCK_N}],{b_l!r}>",
        "c_desc": f"tensordesc<fp16[{BLOCK_M}, {BLOCK_N}],{c_l!r}>",
        "prof": "*i64",
        "PROFILE": "constexpr",
        "NUM_STAGES": "constexpr",
        "NUM_ACC": "constexpr",
    }


def compile_for(profile, arch=100):
    from triton.backends.compiler import GPUTarget
    from triton.experimental.gluon._runtime import GluonASTSource

    consts = {"PROFILE": profile, "NUM_STAGES": NUM_STAGES, "NUM_ACC": NUM_ACC}
    src = GluonASTSource(bw_matmul_kernel, signature(), consts)
    return triton.compile(src, target=GPUTarget("cuda", arch, 32), options={"num_warps": NUM_WARPS})


def compile_check():
    out = {}
    for profile in (False, True):
        out[profile] = compile_for(profile).asm["ptx"].count("%globaltimer")
        print(
            f"compiled bw_matmul_kernel for sm_100 with PROFILE={profile}: "
            f"{out[profile]} %globaltimer reads in the PTX"
        )
    return out


# %%
# Correctness and profiling output
# --------------------------------


def main(out_dir="sm_profiler_examples_out/gluon_blackwell_matmul", M=4096, N=4096, K=4096):
    if not (torch.cuda.is_available() and torch.cuda.get_device_capability()[0] == 10):
        print("no Blackwell (sm_100) GPU: compiling for sm_100 on the CPU instead")
        compile_check()
        return None
    torch.manual_seed(0)
    a = torch.randn(M, K, device="cuda", dtype=torch.float16)
    b = torch.randn(K, N, device="cuda", dtype=torch.float16)
    c_plain = matmul(a, b)
    torch.testing.assert_close(c_plain.float(), torch.matmul(a, b).float(), atol=0.5, rtol=0.02)
    prof = make_profiler(M, N, K, kernel_name="gluon_blackwell_matmul")
    c = matmul(a, b, prof)
    torch.cuda.synchronize()
    assert torch.equal(c, c_plain), "the profiled result differs from the unprofiled one"
    print(f"C ({M}x{N}, K={K}) matches torch.matmul; profiled C is bit-identical")
    prof.print_stats()
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, "gluon_blackwell_matmul.perfetto-trace")
    prof.export(path)
    print(f"wrote {path}")
    return prof.decode()


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "sm_profiler_examples_out/gluon_blackwell_matmul")
