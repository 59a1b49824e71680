"""Head-to-head with Proton on a pipelined Gluon Hopper matmul: kernel time and host time, one run.

The kernel has the structure of Proton's own annotated Gluon example
(third_party/proton/tutorials/intra_kernel/example_dsl.py, `blocked_matmul_pipelined_kernel`):
8 warps, 128x128x128 fp16 tiles, two shared-memory slots for A and B, one mbarrier; per K step a
TMA load into one slot while the wgmma of the previous step still runs on the other. Both tools
record at the same points: a range around the whole kernel, and per K step around the TMA issue,
the TMA wait, the wgmma wait and the wgmma issue, plus the last wgmma wait. Variants:
  base         no instrumentation
  floor        per event one %globaltimer read and one 8-byte store, cursor in a register
  floor_w0     the floor written by warp 0 alone, warps 1-7 branching past it: the floor of a
               lane one warp writes (what `ours` is)
  ours         sm_profiler.gluon_ops, one lane per block (the kernel is one 8-warp partition:
               warp 0 records)
  ours_pred    diagnostic: ours with warps 1-7's stores predicated off instead of branched over
  ours_warp    sm_profiler.gluon_ops with PER_WARP=True (8 lanes per block)
  proton       pl.enter_scope/exit_scope at the same points, in a Proton instrumentation
               session with its defaults (Gluon, all warps, shared-memory buffer)

Kernel times: CUPTI (torch.profiler) medians over interleaved launches; Proton's inside its
session. Every variant's output must equal the base's bit for bit, and the base's must match
torch.matmul. Host time per launch, over --host-launches launches of --host-shape (Proton's
example's): the launch call alone and launch-to-data-on-host, for both tools, then our decode +
Perfetto export of all launches against Proton's finalize (its trace output).

    python -m benchmarks run gluon_matmul_overhead [--launches 20] [--rounds 3] [--json out.json]
"""

from __future__ import annotations

import argparse
import faulthandler
import json
import os
import statistics
import tempfile
import time

import torch
import triton
import triton.profiler.language as pl
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (
    fence_async_shared,
    mbarrier,
    tma,
    warpgroup_mma,
    warpgroup_mma_init,
    warpgroup_mma_wait,
)

from benchmarks.gluon_kernels import record_pred, timer  # the same floor and diagnostic
from benchmarks.timing import cupti_medians, event_medians
from sm_profiler import SmProfiler
from sm_profiler.export import export
from sm_profiler.gluon_ops import (  # _partition_thread: the ops' thread index in a partition
    _partition_thread,
    profiler_event_end,
    profiler_event_start,
    profiler_init,
)
from sm_profiler.record import ptx
from sm_profiler.wire import format as fmt

# Triton 3.6 spells the TMA copies async_copy_*; later versions async_load / async_store.
if hasattr(tma, "async_load"):
    _tma_load, _tma_store = tma.async_load, tma.async_store
else:
    _tma_load, _tma_store = tma.async_copy_global_to_shared, tma.async_copy_shared_to_global

MODES = {
    "base": 0,
    "floor": 1,
    "floor_w0": 6,
    "ours": 2,
    "ours_pred": 5,
    "ours_warp": 3,
    "proton": 4,
}
KERNEL, TMA_ISSUE, TMA_WAIT, WGMMA_WAIT, WGMMA_ISSUE, WGMMA_LAST_WAIT = (
    gl.constexpr(i) for i in range(6)
)
EVENT_NAMES = [
    "kernel",
    "tma_loads_issue",
    "tma_loads_wait",
    "wgmma_wait",
    "wgmma_issue",
    "wgmma_last_wait",
]
BLOCK, NUM_WARPS = 128, 8
_WARP_ZERO_ASM = gl.constexpr(ptx.WARP_ZERO_VOTED)
# floor_w0: $1 address, $2 leader (warp-uniform): the leader's warp reads the timer and stores it.
_FLOOR_W0_ASM = gl.constexpr(
    "{\n\t.reg .pred p;\n\t.reg .u64 t;\n\tsetp.ne.u32 p, $2, 0;\n\t"
    "@!p bra.uni SMP_FW0_${:uid};\n\tmov.u64 t, %globaltimer;\n\tst.global.u64 [$1], t;\n\t"
    "SMP_FW0_${:uid}:\n\tmov.u32 $0, 0;\n\t}"
)


def events_per_lane(K):
    """Records one lane holds: the kernel range, 4 ranges per K step, the last wait."""
    return 2 * (2 + 4 * triton.cdiv(K, BLOCK))


@gluon.jit
def _init(prof, block, lane_words, MODE: gl.constexpr):
    if MODE == 2 or MODE == 5:
        return profiler_init(prof, block, 0)
    elif MODE == 3:
        return profiler_init(prof, block, 0, PER_WARP=True)
    elif MODE == 6:  # floor_w0: the floor's slice, and the ops' leader flag (warp 0, voted)
        leader = gl.inline_asm_elementwise(
            _WARP_ZERO_ASM, "=r,r", [_partition_thread()], dtype=gl.int32, is_pure=True, pack=1
        )
        z = gl.full((), 0, gl.int32)
        return prof + block.to(gl.int64) * lane_words, z, z, leader, z, z
    else:  # floor: a private slice of the buffer per block (base, proton: unused)
        z = gl.full((), 0, gl.int32)
        return prof + block.to(gl.int64) * lane_words, z, z, z, z, z


@gluon.jit
def _mark(ctx, EVT: gl.constexpr, NAME: gl.constexpr, MODE: gl.constexpr, START: gl.constexpr):
    """Each variant's begin (START) or end of scope EVT / NAME."""
    if MODE == 1:
        ptr, cursor, a, b, c, d = ctx
        gl.store(ptr + cursor, timer())
        return ptr, cursor + 1, a, b, c, d
    elif MODE == 6:
        ptr, cursor, a, leader, c, d = ctx
        gl.inline_asm_elementwise(
            _FLOOR_W0_ASM, "=r,l,r", [ptr + cursor, leader], dtype=gl.int32, is_pure=False, pack=1
        )
        return ptr, cursor + 1, a, leader, c, d
    elif MODE == 2 or MODE == 3:
        if START:
            return profiler_event_start(ctx, EVT)
        else:
            return profiler_event_end(ctx, EVT)
    elif MODE == 5:
        if START:
            return record_pred(ctx, (EVT << fmt.EVENT_SHIFT) | fmt.KIND_BEGIN)
        else:
            return record_pred(ctx, (EVT << fmt.EVENT_SHIFT) | fmt.KIND_END)
    elif MODE == 4:
        if START:
            pl.enter_scope(NAME)
        else:
            pl.exit_scope(NAME)
        return ctx
    else:
        return ctx


@gluon.jit
def _enter(ctx, EVT: gl.constexpr, NAME: gl.constexpr, MODE: gl.constexpr):
    return _mark(ctx, EVT, NAME, MODE, True)


@gluon.jit
def _exit(ctx, EVT: gl.constexpr, NAME: gl.constexpr, MODE: gl.constexpr):
    return _mark(ctx, EVT, NAME, MODE, False)


@gluon.jit
def pipelined_matmul_kernel(a_desc, b_desc, c_desc, prof, lane_words, MODE: gl.constexpr):
    """C = A @ B, one 128x128 tile per program; A [M, K], B [K, N] fp16, fp32 accumulation."""
    BM: gl.constexpr = c_desc.block_type.shape[0]
    BN: gl.constexpr = c_desc.block_type.shape[1]
    BK: gl.constexpr = a_desc.block_type.shape[1]
    K = a_desc.shape[1]
    pid_m = gl.program_id(0)
    pid_n = gl.program_id(1)
    ctx = _init(prof, pid_n * gl.num_programs(0) + pid_m, lane_words, MODE)
    ctx = _enter(ctx, KERNEL, "kernel", MODE)

    a_bufs = gl.allocate_shared_memory(a_desc.dtype, [2] + a_desc.block_type.shape, a_desc.layout)
    b_bufs = gl.allocate_shared_memory(b_desc.dtype, [2] + b_desc.block_type.shape, b_desc.layout)
    bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(bar, count=1)
    # wgmma's accumulator: the 8 warps stacked along M (16 rows each), one m64nBNk16 per group.
    acc_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[gl.num_warps(), 1], instr_shape=[16, BN, 16]
    )
    acc = warpgroup_mma_init(gl.zeros((BM, BN), dtype=gl.float32, layout=acc_layout))
    slot = 0
    phase = 0
    for k in range(0, K, BK):
        a = a_bufs.index(slot)
        b = b_bufs.index(slot)
        mbarrier.expect(bar, a_desc.block_type.nbytes + b_desc.block_type.nbytes)
        ctx = _enter(ctx, TMA_ISSUE, "tma_loads_issue", MODE)
        _tma_load(a_desc, [pid_m * BM, k], bar, a)
        _tma_load(b_desc, [k, pid_n * BN], bar, b)
        ctx = _exit(ctx, TMA_ISSUE, "tma_loads_issue", MODE)
        ctx = _enter(ctx, TMA_WAIT, "tma_loads_wait", MODE)
        mbarrier.wait(bar, phase=phase)
        ctx = _exit(ctx, TMA_WAIT, "tma_loads_wait", MODE)
        phase ^= 1
        # Wait for the previous step's wgmma (it read the other slot), then issue this one
        # asynchronously: the next TMA load overlaps it.
        ctx = _enter(ctx, WGMMA_WAIT, "wgmma_wait", MODE)
        acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))
        ctx = _exit(ctx, WGMMA_WAIT, "wgmma_wait", MODE)
        ctx = _enter(ctx, WGMMA_ISSUE, "wgmma_issue", MODE)
        acc = warpgroup_mma(a, b, acc, is_async=True)
        ctx = _exit(ctx, WGMMA_ISSUE, "wgmma_issue", MODE)
        slot ^= 1
    ctx = _enter(ctx, WGMMA_LAST_WAIT, "wgmma_last_wait", MODE)
    acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))
    ctx = _exit(ctx, WGMMA_LAST_WAIT, "wgmma_last_wait", MODE)
    mbarrier.invalidate(bar)

    c_smem = gl.allocate_shared_memory(c_desc.dtype, c_desc.block_type.shape, c_desc.layout)
    c_smem.store(acc.to(c_desc.dtype))
    fence_async_shared()  # the shared stores, before the TMA unit (async proxy) reads them
    _tma_store(c_desc, [pid_m * BM, pid_n * BN], c_smem)
    tma.store_wait(pendings=0)
    ctx = _exit(ctx, KERNEL, "kernel", MODE)


class Problem:
    """Inputs, descriptors, output and buffers of one (M, N, K)."""

    def __init__(self, M, N, K):
        from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

        torch.manual_seed(0)
        self.M, self.N, self.K = M, N, K
        self.a = torch.randn(M, K, device="cuda", dtype=torch.float16)
        self.b = torch.randn(K, N, device="cuda", dtype=torch.float16)
        self.c = torch.empty(M, N, device="cuda", dtype=torch.float16)
        f16 = gl.float16
        lay = gl.NVMMASharedLayout.get_default_for([BLOCK, BLOCK], f16)
        self.descs = [
            TensorDescriptor.from_tensor(t, [BLOCK, BLOCK], lay) for t in (self.a, self.b, self.c)
        ]
        self.grid = (triton.cdiv(M, BLOCK), triton.cdiv(N, BLOCK))
        self.blocks = self.grid[0] * self.grid[1]
        self.events = events_per_lane(K)
        self.lane_words = self.events + 8
        self.plain = torch.zeros(self.blocks * self.lane_words, dtype=torch.int64, device="cuda")
        self.profs = {
            "ours": self.profiler(1),
            "ours_pred": self.profiler(1),
            "ours_warp": self.profiler(NUM_WARPS),
        }

    def profiler(self, groups):
        prof = SmProfiler(self.blocks, groups, self.events, kernel_name="pipelined_matmul")
        for i, name in enumerate(EVENT_NAMES):
            prof.register_event(i, name)
        return prof

    def launch(self, mode, buf=None):
        if buf is None:
            buf = self.profs[mode].get_buffer() if mode in self.profs else self.plain
        pipelined_matmul_kernel[self.grid](
            *self.descs, buf, self.lane_words, MODE=MODES[mode], num_warps=NUM_WARPS
        )

    def ranges_per_lane(self):
        return self.events // 2


def check_outputs(p: Problem, modes) -> dict:
    """Whether the base matches torch.matmul, every variant's output equals the base's bit for
    bit, and ours recorded every range of every lane (printed; a failure marks the row)."""
    p.launch("base")
    base = p.c.clone()
    ref = torch.matmul(p.a, p.b)
    err = (base.float() - ref.float()).abs()
    ok = {
        "base_vs_torch_max_abs_err": round(float(err.max()), 4),
        "base_matches_torch": bool(torch.allclose(base.float(), ref.float(), atol=0.5, rtol=0.02)),
    }
    for mode in modes:
        p.c.zero_()
        if mode in p.profs:
            p.profs[mode].init_buffer()
        p.launch(mode)
        torch.cuda.synchronize()
        ok[f"{mode}_output_equal"] = bool(torch.equal(p.c, base))
        if mode in p.profs:
            trace = p.profs[mode].decode()
            lanes = p.blocks * p.profs[mode].num_groups
            ok[f"{mode}_records_complete"] = bool(
                trace.dropped_total == 0 and len(trace) == lanes * p.ranges_per_lane()
            )
    bad = [k for k, v in ok.items() if v is False]
    err = ok["base_vs_torch_max_abs_err"]
    print(
        f"checks {p.M}x{p.N}x{p.K}: "
        + ("all passed" if not bad else f"FAILED: {bad}")
        + f" (base vs torch.matmul: max abs error {err})",
        flush=True,
    )
    return ok


def proton_session(path, data="tree"):
    import triton.profiler as proton

    pl.enable_semantic("gluon")
    return proton, proton.start(path, data=data, backend="instrumentation")


def _stage(text):
    print(f"[{time.strftime('%H:%M:%S')}] {text}", flush=True)


def kernel_times(p: Problem, launches, rounds, timing="cupti") -> dict:
    ours = ("base", "floor", "floor_w0", "ours", "ours_pred", "ours_warp")
    fns = {m: (lambda m=m: p.launch(m)) for m in ours}
    _stage(f"kernel times ({timing}): {', '.join(ours)}")
    if timing == "cupti":
        t = cupti_medians(fns, launches, rounds, "pipelined_matmul_kernel")
    else:  # CUDA events: includes the launch; compare only with each other
        t = event_medians(fns, launches, rounds)
    if timing != "cupti":
        t["proton"] = None
        return t
    _stage("kernel times: proton, in its session")
    try:
        proton, sess = proton_session(os.path.join(tempfile.gettempdir(), "smp_proton_matmul"))
        try:
            p.launch("proton")  # compiled inside the session (outside it the scopes vanish)
            torch.cuda.synchronize()
            t["proton"] = cupti_medians(
                {"proton": lambda: p.launch("proton")}, launches, rounds, "pipelined_matmul_kernel"
            )["proton"]
            with_proton = p.c.clone()
            p.launch("base")
            torch.cuda.synchronize()
            t["proton_output_equal"] = bool(torch.equal(p.c, with_proton))
        finally:
            proton.finalize(sess)
    except Exception as e:  # report, keep the other numbers
        t["proton"] = None
        print(f"proton failed: {type(e).__name__}: {str(e)[:300]}")
    return t


def _per_launch_ms(fn, n):
    """Median wall time of fn() over n calls, and the total including a final synchronize."""
    torch.cuda.synchronize()
    each = []
    t_all = time.perf_counter()
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        each.append(time.perf_counter() - t0)
    torch.cuda.synchronize()
    total = time.perf_counter() - t_all
    return round(statistics.median(each) * 1e3, 4), round(total / n * 1e3, 4)


def host_times(p: Problem, n: int) -> dict:
    """Host cost per launch of both tools, and the cost of turning n launches into a trace."""
    out = {"launches": n}
    out["base_launch_ms"], out["base_total_ms"] = _per_launch_ms(lambda: p.launch("base"), n)
    prof = p.profiler(1)
    buf = prof.get_buffer()
    # Ours, the launch alone: the buffer is one more pointer argument.
    out["ours_launch_ms"], out["ours_total_ms"] = _per_launch_ms(lambda: p.launch("ours", buf), n)
    # Ours, keeping every launch: launch + snapshot (waits for the kernel, copies the buffer to
    # the host, re-initialises it).
    prof.init_buffer()

    def keep():
        p.launch("ours", prof.get_buffer())
        prof.snapshot()

    out["ours_snapshot_ms"], _ = _per_launch_ms(keep, n)
    tmp = tempfile.mkdtemp()
    t0 = time.perf_counter()
    trace = prof.decode()
    t1 = time.perf_counter()
    export(trace, os.path.join(tmp, "ours.perfetto-trace"))
    t2 = time.perf_counter()
    out["ours_decode_ms"] = round((t1 - t0) * 1e3, 2)
    out["ours_decode_export_ms"] = round((t2 - t0) * 1e3, 2)
    out["ours_events"] = len(trace)
    out["ours_file_bytes"] = os.path.getsize(os.path.join(tmp, "ours.perfetto-trace"))
    try:
        proton, sess = proton_session(os.path.join(tmp, "proton"), data="trace")
        try:
            p.launch("proton")  # compiled (or loaded) before timing
            torch.cuda.synchronize()
            out["proton_launch_ms"], out["proton_total_ms"] = _per_launch_ms(
                lambda: p.launch("proton"), n
            )
        finally:
            t0 = time.perf_counter()
            proton.finalize(sess)
            out["proton_finalize_ms"] = round((time.perf_counter() - t0) * 1e3, 2)
        out["proton_files"] = {
            f: os.path.getsize(os.path.join(tmp, f))
            for f in os.listdir(tmp)
            if f.startswith("proton")
        }
    except Exception as e:
        print(f"proton host timing failed: {type(e).__name__}: {str(e)[:300]}")
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--launches", type=int, default=20, help="launches per variant per round")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds over all variants")
    ap.add_argument("--host-launches", type=int, default=20, help="launches timed on the host")
    ap.add_argument(
        "--shapes",
        default="4096x4096x4096,512x512x1024",
        help="MxNxK,... (the second default is Proton's example's)",
    )
    ap.add_argument("--host-shape", default="512x512x1024", help="the shape timed on the host")
    ap.add_argument(
        "--timing",
        choices=("cupti", "events"),
        default="cupti",
        help="kernel times from CUPTI (default) or CUDA events (ours only: Proton's "
        "per-launch host work would be in its numbers)",
    )
    ap.add_argument("--json", default=None, help="also write the rows to this file")
    args = ap.parse_args()
    faulthandler.enable()  # a crash inside CUDA, CUPTI or Proton still names the Python line
    rows, host = [], None
    for shape in args.shapes.split(","):
        M, N, K = (int(x) for x in shape.split("x"))
        p = Problem(M, N, K)
        checks = check_outputs(p, ("floor", "floor_w0", "ours", "ours_pred", "ours_warp"))
        t = kernel_times(p, args.launches, args.rounds, args.timing)
        base = t["base"]
        added = {
            k: (None if t.get(k) is None else round(t[k] - base, 3)) for k in MODES if k != "base"
        }
        ratio = {k: (None if v is None else round(v / added["floor"], 3)) for k, v in added.items()}
        row = {
            "kernel": f"pipelined matmul {shape}",
            "blocks": p.blocks,
            "us": t,
            "added_us": added,
            "vs_floor_added": ratio,
            "checks": checks,
        }
        rows.append(row)
        print(
            f"{row['kernel']:<32} base {base:8.2f} us  "
            + "  ".join(
                f"{k} +{v:.2f} ({100 * v / base:.1f} %)" if v is not None else f"{k} n/a"
                for k, v in added.items()
            )
        )
        if shape == args.host_shape:
            _stage(f"host times over {args.host_launches} launches of {shape}")
            host = host_times(p, args.host_launches)
            print("host per launch (ms), " + ", ".join(f"{k} {v}" for k, v in host.items()))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(
                {
                    "device": torch.cuda.get_device_name(),
                    "torch": torch.__version__,
                    "triton": triton.__version__,
                    "rows": rows,
                    "host": host,
                },
                f,
                indent=1,
            )


if __name__ == "__main__":
    main()
