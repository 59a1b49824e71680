"""A workload of 100 launches: what recording every launch costs on the host and on the device,
ours (launch slots, labelled by Triton's launch hook, no sync) vs Proton, and the time from the
last launch to a written trace. The loop kernel of device_overhead.py (benchmarks/
triton_kernels.py's loop_kernel, ITERS=16, INNER=16).

  base      the loop kernel, uninstrumented
  ours      sm_profiler ops into a slotted buffer (slots=100): the launch hook labels each
            launch and queues the one-program slot step behind it
  proton    Proton instrumentation (enter_scope/exit_scope, backend="instrumentation")

host µs/launch   wall time of the Python loop that queues 100 launches, over 100 (no sync inside)
device µs/launch CUPTI: the summed duration of every kernel the variant ran (ours: + the steps)
stream µs/launch CUDA events around the 100 launches, over 100 (includes launch gaps)
to trace ms      from the last launch queued to a trace file on disk (ours: captures + decode +
                 Perfetto export, each stage printed; Proton: finalize, which writes its own
                 trace; its per-launch host time already paid for the parsing)

    python -m benchmarks run workload_overhead [--launches 100] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time

import torch
import triton

import sm_profiler
from benchmarks.triton_kernels import MODES, loop_kernel, loop_kernel_proton

ITERS, INNER = 16, 16


def _cupti_total_us(fn, launches: int) -> float:
    """Summed CUPTI kernel time (µs) of one call of fn (which queues `launches` launches)."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as p:
        fn()
        torch.cuda.synchronize()
    ks = [e for e in p.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    return sum(e.device_time for e in ks) / launches, len(ks)


def _timed(fn, launches: int) -> dict:
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    t0 = time.perf_counter()
    fn()
    host = (time.perf_counter() - t0) / launches * 1e6
    e.record()
    torch.cuda.synchronize()
    return {"host_us": host, "stream_us": s.elapsed_time(e) * 1e3 / launches}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--launches", type=int, default=100)
    ap.add_argument("--grid", type=int, default=1056)
    ap.add_argument("--repeats", type=int, default=5, help="timed rounds; medians reported")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    n, grid = args.launches, args.grid
    dev = torch.cuda.get_device_properties(0)
    info = {
        "device": dev.name,
        "torch": torch.__version__,
        "triton": triton.__version__,
        "cuda": torch.version.cuda,
        "launches": n,
        "grid": grid,
        "kernel": f"loop_kernel ITERS={ITERS} INNER={INNER}",
    }
    print(info)
    out = torch.empty(grid * 1024, device="cuda")
    plain = torch.zeros(8, dtype=torch.int64, device="cuda")
    prof = sm_profiler.SmProfiler(grid, 1, 2 * ITERS, slots=n)

    def base():
        for _ in range(n):
            loop_kernel[(grid,)](
                out, plain, 0, ITERS=ITERS, INNER=INNER, MODE=MODES["base"], num_warps=4
            )

    def ours():
        buf = prof.get_buffer()
        for _ in range(n):
            loop_kernel[(grid,)](
                out, buf, 0, ITERS=ITERS, INNER=INNER, MODE=MODES["ours"], num_warps=4
            )

    def proton_launches():
        for _ in range(n):
            loop_kernel_proton[(grid,)](out, ITERS=ITERS, INNER=INNER, num_warps=4)

    rows = {}
    for name, fn in (("base", base), ("ours", ours)):
        fn()  # compile, warm up
        reps = []
        for _ in range(args.repeats):
            prof.init_buffer()
            reps.append(_timed(fn, n))
        prof.init_buffer()
        dev_us, kernels = _cupti_total_us(fn, n)
        rows[name] = {k: statistics.median(r[k] for r in reps) for k in reps[0]}
        rows[name].update(device_us=dev_us, kernels_per_launch=kernels / n)
    # ours: the captures of the last round decode to n labelled launches
    prof.init_buffer()
    ours()
    with tempfile.TemporaryDirectory() as d:
        t0 = time.perf_counter()
        caps = prof.captures()  # one sync, one copy, split into launches
        t1 = time.perf_counter()
        trace = sm_profiler.decode(caps)
        t2 = time.perf_counter()
        sm_profiler.export.export(trace, os.path.join(d, "w.perfetto-trace"))
        t3 = time.perf_counter()
        sm_profiler.export.export(trace, os.path.join(d, "w.json"))
        t4 = time.perf_counter()
        rows["ours"]["to_trace_ms"] = (t3 - t0) * 1e3
        rows["ours"]["to_trace_stages_ms"] = {
            "captures": (t1 - t0) * 1e3,
            "decode": (t2 - t1) * 1e3,
            "perfetto_export": (t3 - t2) * 1e3,
            "chrome_json_export": (t4 - t3) * 1e3,
            "events": len(trace),
            "lanes": int(len(trace.lanes["lane"])),
        }
    assert len(trace.kernels) == n and trace.dropped_total == 0, (len(trace.kernels),)
    assert all(k.name == "loop_kernel" for k in trace.kernels)
    rows["ours"]["decoded_launches"] = len(trace.kernels)
    prof.close()

    try:
        import triton.profiler as proton
        import triton.profiler.language as pl

        pl.enable_semantic("triton")
        with tempfile.TemporaryDirectory() as d:
            sess = proton.start(os.path.join(d, "p"), backend="instrumentation")
            proton_launches()  # compile, warm up
            torch.cuda.synchronize()
            # Proton's host time per launch is large (it syncs and parses per launch): one round.
            rows["proton"] = _timed(proton_launches, n)
            try:
                dev_us, kernels = _cupti_total_us(proton_launches, n)
                rows["proton"].update(device_us=dev_us, kernels_per_launch=kernels / n)
            except Exception as e:  # CUPTI beside Proton may be refused: say so
                rows["proton"]["device_us"] = f"failed: {type(e).__name__}: {e}"[:160]
            proton.finalize(sess)
            sess = proton.start(os.path.join(d, "q"), backend="instrumentation")
            proton_launches()
            t0 = time.perf_counter()
            proton.finalize(sess)
            rows["proton"]["to_trace_ms"] = (time.perf_counter() - t0) * 1e3
            rows["proton"]["files"] = sorted(os.listdir(d))
    except Exception as e:
        rows["proton"] = {"failed": f"{type(e).__name__}: {e}"[:300]}

    base_dev = rows["base"]["device_us"]
    print(
        f"{'variant':<8}{'host µs/launch':>16}{'device µs/launch':>18}{'added':>8}"
        f"{'stream µs/launch':>18}{'to trace ms':>13}"
    )
    for name, r in rows.items():
        if "failed" in r:
            print(f"{name:<8} {r['failed']}")
            continue
        d = r.get("device_us")
        added = f"{d - base_dev:8.2f}" if isinstance(d, float) else "       -"
        dtxt = f"{d:18.2f}" if isinstance(d, float) else f"{'-':>18}"
        tt = r.get("to_trace_ms")
        print(
            f"{name:<8}{r['host_us']:16.2f}{dtxt}{added}{r['stream_us']:18.2f}"
            f"{(f'{tt:13.1f}' if tt is not None else f'{chr(45):>13}')}"
        )
    print(
        "ours, last launch to trace:",
        {
            k: (round(v, 1) if isinstance(v, float) else v)
            for k, v in rows["ours"]["to_trace_stages_ms"].items()
        },
    )
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"info": info, "rows": rows}, f, indent=1, default=str)


if __name__ == "__main__":
    main()
