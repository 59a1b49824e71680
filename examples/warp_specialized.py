"""
Per-warp lanes and warp specialization
======================================

In this example you will learn:

* how to give every warp of a program its own lane (``PER_WARP=True``): each warp reads its
  own timer, so the trace shows warps side by side and the skew between them;
* how to name lanes with ``register_group`` (``block 3 · warp 1`` in Perfetto);
* how to make per-warp recording cheap with a shared-memory stage (``STAGE=n`` and one
  ``profiler_flush(ctx)`` at the end), and what that stage costs;
* what works today with Triton's automatic warp specialization
  (``tl.range(..., warp_specialize=True)``), where producer warps load and consumer warps
  compute, and what does not.

What works (``python examples/warp_specialized.py --compile-check`` compiles for sm_90 and
sm_100 on a CPU with ``triton.compile``; docs/api.md has the table per Triton release, pinned by
tests/device/test_triton_ws.py):

* per-warp lanes in an ordinary kernel, events anywhere: GPU (sm_90, sm_100) and the CPU
  interpreter (which emulates ``num_warps`` lanes with one clock);
* sm_100 (Blackwell), ``warp_specialize=True``: with Triton 3.6 the ops compile *outside* the
  specialized loop (they run in the default partition only: the producer and MMA warps record
  nothing), and fail *inside* it; with Triton 3.7 to 3.9 they compile inside the loop of a
  TMA-descriptor matmul (tests/support/triton_ws_probe.py), and inside this pointer-load one with 3.7
  only (3.8 and 3.9 fail);
* sm_90 (Hopper), ``warp_specialize=True``: with Triton 3.6 any profiler op makes Triton's Hopper
  pass fail (it mishandles an inline asm with side effects whose result reaches no load or
  store: every op is one). Ops whose every result reaches a Triton store do compile (an
  experiment, docs/api.md), but are not shipped. With Triton 3.7 to 3.9, Hopper does not specialize
  this pointer-load kernel even without our ops. So on an H100 this example runs the per-warp
  kernel only.

To see real producer/consumer warps, write the kernel in Gluon (``sm_profiler.gluon_ops``,
examples/gluon_ws_matmul.py) or CuteDSL (docs/cute.md), where each partition's role is explicit.
"""

# %%
# Motivation
# ----------
#
# In a warp-specialized kernel the warps of one program do different jobs: producers issue
# loads, consumers wait for the data and run MMAs. Whether the consumers starve or the producers
# stall is a per-warp question that kernel-level profilers cannot answer. Per-warp lanes are the
# tool for it; this example shows them on an ordinary tiled matmul, where all warps run the same
# code, so the interesting part is how far apart in time identical warps run.

import argparse
import contextlib
import os
import sys
import tempfile

import torch

# Without a GPU, use Triton's CPU interpreter (must be set before triton is imported); but
# --compile-check compiles for the GPU, which needs no GPU and no interpreter.
if "--compile-check" in sys.argv[1:]:
    os.environ["TRITON_INTERPRET"] = "0"
elif not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
INTERPRET = os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")
DEVICE = "cpu" if INTERPRET else "cuda"

import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from sm_profiler import SmProfiler  # noqa: E402
from sm_profiler.record import ptx  # noqa: E402
from sm_profiler.triton_ops import (  # noqa: E402
    profiler_event_end,
    profiler_event_start,
    profiler_flush,
    profiler_init,
)

TILE, LOAD, MMA = (tl.constexpr(i) for i in range(3))
EVENT_NAMES = ["tile", "load", "mma"]

# %%
# Compute kernel
# --------------
#
# ``PER_WARP=True``: lane (block, group + warp index). The profiler therefore needs
# ``num_groups >= num_warps``. ``NUM_WARPS`` is the launch's ``num_warps``: the interpreter
# emulates that many lanes, and a stage is sized by it. ``STAGE=n`` keeps up to n events per
# warp in shared memory ((NUM_WARPS + 1) * (n + 2) * 8 bytes per program) and
# ``profiler_flush`` copies them into the buffer at the end: per event a timer read and a
# shared store instead of a global store and a bounds test. ``INNER`` puts load/mma ranges
# inside the K loop; ``WS`` asks Triton to warp-specialize the loop (see above for where that
# compiles).


@triton.jit
def matmul_kernel(
    a_ptr,
    b_ptr,
    c_ptr,
    M,
    N,
    K,
    prof,
    BM: tl.constexpr,
    BN: tl.constexpr,
    BK: tl.constexpr,
    PROFILE: tl.constexpr,
    NUM_WARPS: tl.constexpr,
    INNER: tl.constexpr = True,
    WS: tl.constexpr = False,
    STAGE: tl.constexpr = 0,
):
    pid = tl.program_id(0)
    ctx = profiler_init(
        prof, pid, 0, ENABLED=PROFILE, PER_WARP=True, NUM_WARPS=NUM_WARPS, STAGE=STAGE
    )
    tiles_n = tl.cdiv(N, BN)
    rm = (pid // tiles_n) * BM + tl.arange(0, BM)
    rn = (pid % tiles_n) * BN + tl.arange(0, BN)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    ctx = profiler_event_start(ctx, TILE)
    for k in tl.range(0, K, BK, warp_specialize=WS):
        rk = k + tl.arange(0, BK)
        if INNER:
            ctx = profiler_event_start(ctx, LOAD)
        a = tl.load(a_ptr + rm[:, None] * K + rk[None, :])
        b = tl.load(b_ptr + rk[:, None] * N + rn[None, :])
        if INNER:
            # after= a tensor reduces it across the program: every warp waits for all tiles.
            ctx = profiler_event_end(ctx, LOAD, after=tl.sum(a) + tl.sum(b))
            ctx = profiler_event_start(ctx, MMA)
        acc = tl.dot(a, b, acc)
        if INNER:
            ctx = profiler_event_end(ctx, MMA, after=acc)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc.to(c_ptr.dtype.element_ty))
    ctx = profiler_event_end(ctx, TILE, after=acc)
    profiler_flush(ctx)  # staged: copy the warps' records into the buffer; else compiles away


# %%
# Launcher
# --------


def make_profiler(num_programs, num_warps, K, BK):
    prof = SmProfiler(
        num_blocks=num_programs,
        num_groups=num_warps,  # one lane per warp
        max_events_per_group=2 + 4 * (K // BK),
        device=DEVICE,
        kernel_name="matmul_per_warp",
        group_names=[f"warp {w}" for w in range(num_warps)],
    )
    for i, name in enumerate(EVENT_NAMES):
        prof.register_event(i, name)
    return prof


def matmul(a, b, prof, BM, BN, BK, num_warps, ws=False, inner=True, stage=0):
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty((M, N), device=a.device, dtype=a.dtype)
    grid = ((M // BM) * (N // BN),)
    matmul_kernel[grid](
        a,
        b,
        c,
        M,
        N,
        K,
        prof.get_buffer(),
        BM=BM,
        BN=BN,
        BK=BK,
        PROFILE=True,
        NUM_WARPS=num_warps,
        INNER=inner,
        WS=ws,
        STAGE=stage,
        num_warps=num_warps,
    )
    return c


# %%
# Correctness and profiling output
# --------------------------------


def main(out_dir="sm_profiler_examples_out/warp_specialized", small=None):
    small = INTERPRET if small is None else small
    if small:
        M, N, K, BM, BN, BK, dtype = 32, 32, 32, 16, 16, 16, torch.float32
    else:
        M, N, K, BM, BN, BK, dtype = 2048, 2048, 2048, 128, 128, 64, torch.float16
    num_warps = 4
    torch.manual_seed(0)
    a = torch.randn(M, K, device=DEVICE, dtype=dtype)
    b = torch.randn(K, N, device=DEVICE, dtype=dtype)
    prof = make_profiler((M // BM) * (N // BN), num_warps, K, BK)
    c = matmul(a, b, prof, BM, BN, BK, num_warps)
    torch.testing.assert_close(c.float(), a.float() @ b.float(), atol=0.5, rtol=0.02)
    prof.print_stats()

    # Warp skew: per program, how far apart its warps started and ended the tile.
    trace = prof.decode()
    ev = trace.events
    tiles = ev["event"] == 0
    skews = []
    for blk in range(prof.num_blocks):
        m = tiles & (ev["block"] == blk)
        skews.append(int(ev["end_ns"][m].max() - ev["end_ns"][m].min()))
    print(
        f"warps of one program end their tile up to {max(skews)} ns apart "
        f"(median over programs {sorted(skews)[len(skews) // 2]} ns)"
    )
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, "warp_specialized.perfetto-trace")
    prof.export(path)
    print(f"wrote {path} (one track per warp: 'block 0 · warp 1', ...)")

    # The same launch staged: every warp's events through shared memory, one flush at the end.
    # The stage holds all of a warp's events here, so the decoded lanes are the same.
    stage = prof.max_events_per_group
    prof_staged = make_profiler((M // BM) * (N // BN), num_warps, K, BK)
    c = matmul(a, b, prof_staged, BM, BN, BK, num_warps, stage=stage)
    torch.testing.assert_close(c.float(), a.float() @ b.float(), atol=0.5, rtol=0.02)
    staged = prof_staged.decode()
    same = staged.lanes["written"].tolist() == trace.lanes["written"].tolist()
    print(
        f"staged (STAGE={stage}, {ptx.stage_bytes(num_warps, stage) // 1024} KiB of shared "
        f"memory per program): {len(staged)} ranges, "
        f"{'the same records per warp' if same else 'DIFFERENT records per warp'}, "
        f"{staged.dropped_total} dropped"
    )

    result = {
        "profiler": prof,
        "trace": trace,
        "perfetto": path,
        "num_warps": num_warps,
        "staged": staged,
    }
    cc = torch.cuda.get_device_capability() if not INTERPRET else (0, 0)
    if cc[0] >= 10:
        # Blackwell: warp-specialize the K loop, profiler ops outside it (see the docstring).
        prof_ws = SmProfiler(
            (M // BM) * (N // BN),
            16,
            2,
            device=DEVICE,
            kernel_name="matmul_ws",
            group_names=[f"warp {w}" for w in range(16)],
        )
        prof_ws.register_event(0, "tile")
        c = matmul(a, b, prof_ws, BM, BN, BK, num_warps, ws=True, inner=False)
        torch.testing.assert_close(c.float(), a.float() @ b.float(), atol=0.5, rtol=0.02)
        prof_ws.print_stats()
        result["perfetto_ws"] = os.path.join(out_dir, "warp_specialized_ws.perfetto-trace")
        prof_ws.export(result["perfetto_ws"])
    else:
        print("warp_specialize=True: not run (needs a Blackwell GPU, sm_100; see the docstring)")
    return result


# %%
# What compiles where
# -------------------
#
# Compiling needs no GPU: ``triton.compile`` with a ``GPUTarget`` builds PTX and a cubin on the
# CPU. This needs the GPU code path of the ops, not the interpreter's: ``--compile-check``
# leaves the interpreter off.

SIGNATURE = {
    "a_ptr": "*fp16",
    "b_ptr": "*fp16",
    "c_ptr": "*fp16",
    "M": "i32",
    "N": "i32",
    "K": "i32",
    "prof": "*i64",
    "BM": "constexpr",
    "BN": "constexpr",
    "BK": "constexpr",
    "PROFILE": "constexpr",
    "NUM_WARPS": "constexpr",
    "INNER": "constexpr",
    "WS": "constexpr",
    "STAGE": "constexpr",
}
VARIANTS = {
    "per-warp ops in the K loop": dict(WS=False, INNER=True),
    "warp_specialize, ops outside the loop": dict(WS=True, INNER=False),
    "warp_specialize, ops inside the loop": dict(WS=True, INNER=True),
}


def compile_check(capabilities=(90, 100)):
    """{(capability, variant): "ok" or the first line of the compiler's error}."""
    if INTERPRET:
        raise RuntimeError(
            "compile_check needs the GPU code path: run `python examples/warp_specialized.py "
            "--compile-check`, or import this module with TRITON_INTERPRET=0"
        )
    from triton.backends.compiler import GPUTarget

    out = {}
    for cap in capabilities:
        for name, v in VARIANTS.items():
            consts = dict(BM=128, BN=128, BK=64, PROFILE=True, NUM_WARPS=4, STAGE=0, **v)
            src = triton.compiler.ASTSource(
                fn=matmul_kernel, signature=SIGNATURE, constexprs=consts
            )
            try:
                with _compiler_stderr_dropped():
                    k = triton.compile(
                        src, target=GPUTarget("cuda", cap, 32), options={"num_warps": 4}
                    )
                assert "%globaltimer" in k.asm["ptx"]
                out[(cap, name)] = "ok"
            except Exception as e:  # the compiler raises RuntimeError and CompilationError
                out[(cap, name)] = (str(e).strip().splitlines() or [type(e).__name__])[0][:120]
    return out


@contextlib.contextmanager
def _compiler_stderr_dropped():
    """Where a pass fails, the compiler writes the whole module's IR (hundreds of lines) to the
    process's stderr from C++; the table says what failed in one line, so that goes nowhere."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with tempfile.TemporaryFile() as sink:
            os.dup2(sink.fileno(), 2)
            try:
                yield
            finally:
                os.dup2(saved, 2)
    finally:
        os.close(saved)


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("out", nargs="?", default="sm_profiler_examples_out/warp_specialized")
    p.add_argument("--compile-check", action="store_true", help="compile for sm_90 and sm_100")
    args = p.parse_args()
    if args.compile_check:
        for (cap, name), res in compile_check().items():
            print(f"sm_{cap}  {name:<40} {res}")
    else:
        main(args.out)
