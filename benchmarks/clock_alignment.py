"""How %globaltimer maps onto CUPTI's clock (torch.profiler), measured on this GPU.

1. offset and drift: sm_profiler.record.clock.measure_clock (probe kernel answering a pinned-memory flag
   between two CLOCK_REALTIME reads) every second for --seconds; offset = the shortest round
   trip's midpoint, drift = slope of the offsets over host time.
2. agreement: --launches launches of an instrumented kernel under torch.profiler; each launch's
   CUPTI start / end vs its first / last stamp mapped with (1) (merge_torch_trace's "clock").
3. with --gpus 2: the two GPUs' clocks against each other (one flag releasing both probes).

    python -m benchmarks run clock_alignment [--seconds 10] [--launches 50] [--fixture DIR]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import tempfile
import time

import numpy as np
import torch
import triton
import triton.language as tl

import sm_profiler
from sm_profiler.record.clock import compare_gpus, measure_clock
from sm_profiler.triton_ops import profiler_event_end, profiler_event_start, profiler_init


@triton.jit
def busy_kernel(x, prof, N: tl.constexpr, ITERS: tl.constexpr):
    ctx = profiler_init(prof)
    ctx = profiler_event_start(ctx, 0)
    offs = tl.program_id(0) * N + tl.arange(0, N)
    v = tl.load(x + offs)
    for _ in range(ITERS):
        v = v * 1.0001 + 1e-4
    tl.store(x + offs, v)
    ctx = profiler_event_end(ctx, 0, after=v)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--launches", type=int, default=50)
    ap.add_argument("--gpus", type=int, default=1)
    ap.add_argument("--fixture", default=None, help="also write a small torch trace + captures")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    dev = torch.cuda.get_device_properties(0)
    info = {"device": dev.name, "torch": torch.__version__, "triton": triton.__version__}
    print(info)
    res = {"info": info}

    samples = []
    t_end = time.monotonic() + args.seconds
    while True:
        samples.append(measure_clock())
        if time.monotonic() > t_end:
            break
        time.sleep(max(0.0, min(1.0, t_end - time.monotonic())))
    h = np.array([s["host_ns"] for s in samples], np.float64)
    o = np.array([s["offset_ns"] for s in samples], np.float64)
    slope = float(np.polyfit(h - h[0], o, 1)[0]) if len(h) > 1 else 0.0
    res["clock"] = {
        "samples": samples,
        "drift_ppm": slope * 1e6,
        "offset_spread_ns": float(o.max() - o.min()),
    }
    print(
        f"offset %globaltimer - CLOCK_REALTIME: {o[0]:.0f} ns (±{samples[0]['error_ns']} ns, "
        f"rtt min {samples[0]['rtt_min_ns']} ns); over {(h[-1] - h[0]) / 1e9:.1f} s: "
        f"spread {o.max() - o.min():.0f} ns, drift {slope * 1e6:.3f} ppm"
    )

    from torch.profiler import ProfilerActivity, profile

    x = torch.rand(132 * 1024, device="cuda")
    prof = sm_profiler.SmProfiler(132, 1, 4, slots=args.launches)
    prof.register_event(0, "busy")
    busy_kernel[(132,)](x, prof.get_buffer(), N=1024, ITERS=2000)
    torch.cuda.synchronize()
    prof.init_buffer()
    prof.calibrate_clock()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as tp:
        for _ in range(args.launches):
            busy_kernel[(132,)](x, prof.get_buffer(), N=1024, ITERS=2000)
        torch.cuda.synchronize()
    prof.calibrate_clock()
    with tempfile.TemporaryDirectory() as d:
        tj = os.path.join(d, "t.json")
        tp.export_chrome_trace(tj)  # a profile exports once; the merges read the file
        with open(tj) as f:
            torch_doc = json.load(f)
        merged = sm_profiler.merge_torch_trace(tj, prof, os.path.join(d, "m.json"))
        res["merge"] = merged
        e = merged["error"][0]
        print(
            f"torch merge ({merged['method']}): {e['matched']} launches; first stamp - CUPTI "
            f"start {e['start_delta_ns']}; last stamp - CUPTI end {e['end_delta_ns']}"
        )
        # The same launches aligned by their own CUPTI rows (no probe samples): for comparison.
        caps = [
            dataclasses.replace(c, metadata={k: v for k, v in c.metadata.items() if k != "clock"})
            for c in prof.captures()
        ]
        kernel = sm_profiler.merge_torch_trace(torch_doc, caps, os.path.join(d, "k.json"))
    res["merge_by_kernels"] = kernel
    print(
        f"aligned by the kernels' own CUPTI rows instead: offset {kernel.get('offset_ns')}, "
        f"{kernel['error'][0]}"
    )
    if args.fixture:
        os.makedirs(args.fixture, exist_ok=True)
        small = sm_profiler.SmProfiler(4, 1, 4, slots=2)
        small.register_event(0, "busy")
        busy_kernel[(4,)](x, small.get_buffer(), N=1024, ITERS=2000)
        torch.cuda.synchronize()
        small.init_buffer()
        small.calibrate_clock()
        with profile(activities=[ProfilerActivity.CUDA]) as sp:
            for _ in range(2):
                busy_kernel[(4,)](x, small.get_buffer(), N=1024, ITERS=2000)
            torch.cuda.synchronize()
        small.calibrate_clock()
        sp.export_chrome_trace(os.path.join(args.fixture, "torch_trace_h200.json"))
        small.save(os.path.join(args.fixture, "captures_h200.smp"))
        small.close()
    if args.gpus > 1:
        res["gpus"] = compare_gpus([f"cuda:{i}" for i in range(args.gpus)])
        res["gpu_offsets"] = [measure_clock(f"cuda:{i}") for i in range(args.gpus)]
        print("GPUs against cuda:0:", res["gpus"]["diff_ns"])
        print(
            "offsets vs CLOCK_REALTIME:",
            [(g["device"], g["offset_ns"], g["error_ns"]) for g in res["gpu_offsets"]],
        )
    prof.close()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1, default=str)


if __name__ == "__main__":
    main()
