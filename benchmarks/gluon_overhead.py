"""What does recording cost in a warp-specialized Gluon kernel? Every variant side by side, one run.

The kernel: a default partition (4 warps) runs an elementwise loop over a 1024-element tile and a
1-warp worker partition runs a shorter loop of its own; each partition records a range per
iteration. Variants:
  base        no instrumentation (PROFILE=False: the ops compile away)
  floor       per event one %globaltimer read and one 8-byte store (every thread of the
              partition stores the same word), cursor in a register, no lane logic
  ours        sm_profiler.gluon_ops, one lane per (block, partition): the partition's first
              warp records, the other warps branch past each event
  ours_pred   diagnostic: ours with the other warps' stores predicated off instead of branched
              over (benchmarks/gluon_kernels.py's record_pred); BENCHMARKS.md run 9
  ours_warp   sm_profiler.gluon_ops with PER_WARP=True
  proton      Proton's instrumentation (pl.enter_scope/exit_scope at the same points)

Kernel time from CUPTI (torch.profiler), medians over interleaved launches.

    python -m benchmarks run gluon_overhead [--launches 30] [--rounds 3] [--grid 1056]
        [--json out.json] [--loops 64x16,64x32,64x64] [--timing cupti|events]

Under another profiler (e.g. ncu's warp stall reasons for run 9's open question), leave CUPTI
and Proton out: `--loops 64x64 --launches 1 --rounds 1 --timing events`.
"""

from __future__ import annotations

import argparse
import json

import numpy as np
import torch
import triton
import triton.profiler.language as pl
from triton.experimental import gluon
from triton.experimental.gluon import language as gl

from benchmarks.gluon_kernels import record_pred, timer
from benchmarks.timing import add_timing_args, cupti_medians, event_medians
from sm_profiler import SmProfiler
from sm_profiler.gluon_ops import profiler_event_end, profiler_event_start, profiler_init
from sm_profiler.wire import format as fmt

MODES = {"base": 0, "floor": 1, "ours": 2, "ours_warp": 3, "proton": 4, "ours_pred": 5}
EVT = gl.constexpr(0)
BLOCK = gl.constexpr(1024)


@gluon.jit
def _init(prof, lane_words, GROUP: gl.constexpr, MODE: gl.constexpr):
    if MODE == 2 or MODE == 5:
        return profiler_init(prof, gl.program_id(0), GROUP)
    elif MODE == 3:
        return profiler_init(prof, gl.program_id(0), GROUP * 4, PER_WARP=True)
    else:  # floor: a private slice of the buffer per (program, partition)
        lane = gl.program_id(0) * 2 + GROUP
        z = gl.full((), 0, gl.int32)
        return prof + lane.to(gl.int64) * lane_words, z, z, z, z, z


@gluon.jit
def _rec(ctx, START: gl.constexpr, MODE: gl.constexpr):
    if MODE == 1:
        ptr, cursor, a, b, c, d = ctx
        gl.store(ptr + cursor, timer())
        return ptr, cursor + 1, a, b, c, d
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
            pl.enter_scope("iter")
        else:
            pl.exit_scope("iter")
        return ctx
    else:
        return ctx


@gluon.jit
def _partition(
    out,
    prof,
    lane_words,
    ITERS: gl.constexpr,
    INNER: gl.constexpr,
    GROUP: gl.constexpr,
    MODE: gl.constexpr,
):
    nw: gl.constexpr = gl.num_warps()
    layout: gl.constexpr = gl.BlockedLayout([BLOCK // (32 * nw)], [32], [nw], [0])
    offs = gl.arange(0, BLOCK, layout)
    acc = (offs + gl.program_id(0)).to(gl.float32) * 1e-3
    if MODE == 0 or MODE == 4:
        ctx = gl.full((), 0, gl.int32)
    else:
        ctx = _init(prof, lane_words, GROUP, MODE)
    for _ in range(ITERS):
        ctx = _rec(ctx, True, MODE)
        for _j in gl.static_range(INNER):
            acc = acc * 1.000001 + 1e-6
        ctx = _rec(ctx, False, MODE)
    gl.store(out + (gl.program_id(0) * 2 + GROUP) * BLOCK + offs, acc)


@gluon.jit
def ws_loop_kernel(
    out, prof, lane_words, ITERS: gl.constexpr, INNER: gl.constexpr, MODE: gl.constexpr
):
    gl.warp_specialize(
        [
            (_partition, (out, prof, lane_words, ITERS, INNER, 0, MODE)),
            (_partition, (out, prof, lane_words, ITERS // 2, INNER, 1, MODE)),
        ],
        [1],
        [80],
    )


def _safe(fn, *args):
    try:
        return fn(*args)
    except Exception as e:  # a diagnostic: report, keep the timings
        print(f"{fn.__name__} failed: {type(e).__name__}: {e}")
        return {}


def lane_spans(launch, prof, plain, lane_words, iters) -> dict:
    """Where the added time goes: per variant, medians over blocks (µs) of the default
    partition's warp 0 and the worker's span (first iteration start to last iteration end) and
    iteration time, and of the worker's start after the default's (from the records). ptxas
    may move arithmetic across a record, so a span is firmer than an iteration's time."""
    out = {}
    for mode in ("floor", "ours", "ours_pred", "ours_warp"):
        if mode == "floor":
            plain.zero_()
            launch(mode)
            w = plain.view(-1, 2, lane_words).cpu().numpy().astype(np.int64)
            d, k = w[:, 0, : 2 * iters], w[:, 1, : 2 * (iters // 2)]
            lanes = {"default": (d[:, 0::2], d[:, 1::2]), "worker": (k[:, 0::2], k[:, 1::2])}
        else:
            prof.init_buffer()
            launch(mode)
            ev = prof.decode().events
            worker = 4 if mode == "ours_warp" else 1
            lanes = {}
            for name, g in (("default", 0), ("worker", worker)):
                m = ev["group"] == g
                order = np.lexsort((ev["start_ns"][m], ev["block"][m]))
                n = int(m.sum()) // len(np.unique(ev["block"][m]))
                lanes[name] = (
                    ev["start_ns"][m][order].reshape(-1, n),
                    ev["end_ns"][m][order].reshape(-1, n),
                )
        sp = {}
        for name, (st, en) in lanes.items():
            sp[f"{name}_span"] = round(float(np.median(en[:, -1] - st[:, 0])) / 1e3, 2)
            sp[f"{name}_iter"] = round(float(np.median(en - st)) / 1e3, 3)
        lag = lanes["worker"][0][:, 0] - lanes["default"][0][:, 0]
        sp["worker_lag"] = round(float(np.median(lag)) / 1e3, 2)
        out[mode] = sp
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_timing_args(ap)
    ap.add_argument("--loops", default="64x16,64x32,64x64", help="ITERSxINNER,... to run")
    ap.add_argument(
        "--timing",
        choices=("cupti", "events"),
        default="cupti",
        help="CUPTI kernel times (default), or CUDA-event times without Proton",
    )
    args = ap.parse_args()
    grid, rows = args.grid, []
    for loop in args.loops.split(","):
        iters, inner = (int(x) for x in loop.split("x"))
        out = torch.empty(grid * 2 * 1024, device="cuda")
        events = 2 * iters
        prof = SmProfiler(grid, 8, events)
        lane_words = events + 8
        plain = torch.zeros(grid * 2 * lane_words, dtype=torch.int64, device="cuda")

        def launch(mode, iters=iters, inner=inner, out=out, prof=prof, plain=plain, lw=lane_words):
            buf = prof.get_buffer() if mode.startswith("ours") else plain
            ws_loop_kernel[(grid,)](
                out, buf, lw, ITERS=iters, INNER=inner, MODE=MODES[mode], num_warps=4
            )

        ours = ("base", "floor", "ours", "ours_pred", "ours_warp")
        fns = {m: (lambda m=m: launch(m)) for m in ours}
        if args.timing == "cupti":
            t = cupti_medians(fns, args.launches, args.rounds, "ws_loop_kernel")
        else:
            t = event_medians(fns, args.launches, args.rounds)
        # Check what ours recorded before trusting its time.
        for mode in ("ours", "ours_pred"):
            prof.init_buffer()
            launch(mode)
            trace = prof.decode()
            assert trace.dropped_total == 0 and len(trace) == grid * (iters + iters // 2), mode
        try:
            if args.timing != "cupti":
                raise RuntimeError("left out (CUDA-event timing would include its host work)")
            import triton.profiler as proton

            pl.enable_semantic("gluon")
            sess = proton.start("/tmp/sm_profiler_gluon_proton", backend="instrumentation")
            try:
                t["proton"] = cupti_medians(
                    {"proton": lambda: launch("proton")},
                    args.launches,
                    args.rounds,
                    "ws_loop_kernel",
                )["proton"]
            finally:
                proton.finalize(sess)
        except Exception as e:
            t["proton"] = None
            print(f"proton failed: {type(e).__name__}: {str(e)[:200]}")
        base = t["base"]
        added = {k: (None if v is None else v - base) for k, v in t.items()}
        row = {
            "kernel": f"gluon ws loop {iters}x{inner}",
            "us": t,
            "added_us": added,
            "ours_vs_floor_added": round(added["ours"] / added["floor"], 3),
            "ours_pred_vs_floor_added": round(added["ours_pred"] / added["floor"], 3),
            "spans_us": _safe(lane_spans, launch, prof, plain, lane_words, iters),
        }
        rows.append(row)
        print(
            f"{row['kernel']:<24} base {base:8.2f} us  "
            + "  ".join(
                f"{k} +{v:.2f}" if v is not None else f"{k} n/a"
                for k, v in added.items()
                if k != "base"
            )
            + f"  ours/floor {row['ours_vs_floor_added']}"
            f"  ours_pred/floor {row['ours_pred_vs_floor_added']}"
        )
        for mode, sp in row["spans_us"].items():
            print(f"    {mode:<10} " + "  ".join(f"{k} {v}" for k, v in sp.items()))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(
                {
                    "device": torch.cuda.get_device_name(),
                    "torch": torch.__version__,
                    "triton": triton.__version__,
                    "rows": rows,
                },
                f,
                indent=1,
            )


if __name__ == "__main__":
    main()
