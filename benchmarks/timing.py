"""Kernel timing shared by the device benchmarks: CUPTI or CUDA-event medians, interleaved.

Every variant of a benchmark is timed in the same session, in rounds that interleave the
variants, so that clock and thermal drift hit all of them alike; a variant's figure is the median
over its launches, and what instrumentation costs is its time added over the uninstrumented base
(`added_pct`).
"""

from __future__ import annotations

import statistics

import torch


def add_timing_args(ap) -> None:
    """The command-line options every device benchmark takes (argparse parser `ap`)."""
    ap.add_argument("--launches", type=int, default=30, help="launches per variant per round")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds over all variants")
    ap.add_argument("--grid", type=int, default=1056, help="programs (blocks) per launch")
    ap.add_argument("--json", default=None, help="also write the rows to this file")


def cupti_medians(fns: dict, launches: int, rounds: int, kernel: str) -> dict[str, float]:
    """Median kernel time (µs) of each variant in `fns` (name -> launch function).

    All variants run in one profiler session, interleaved over `rounds` so that drift hits all of
    them alike; only kernels whose name contains `kernel` are counted (fills and copies are not).
    """
    from torch.profiler import ProfilerActivity, profile

    order = []
    with profile(activities=[ProfilerActivity.CUDA]) as p:
        for _ in range(rounds):
            for mode, fn in fns.items():
                for _ in range(launches):
                    fn()
                    order.append(mode)
        torch.cuda.synchronize()
    durs = [
        e.device_time
        for e in p.events()
        if e.device_type == torch.autograd.DeviceType.CUDA and kernel in e.name
    ]
    if len(durs) != len(order):
        raise RuntimeError(f"CUPTI saw {len(durs)} launches of {kernel}, expected {len(order)}")
    per: dict[str, list[float]] = {}
    for mode, d in zip(order, durs, strict=True):
        per.setdefault(mode, []).append(d)
    return {k: statistics.median(v) for k, v in per.items()}


def event_medians(fns: dict, launches: int, rounds: int) -> dict[str, float]:
    """Median time (µs) of each variant in `fns` between two CUDA events around each launch.

    The fallback where CUPTI cannot run; it includes launch overhead, so compare only with other
    CUDA-event numbers. Interleaved over `rounds` like `cupti_medians`.
    """
    per: dict[str, list[float]] = {}
    for _ in range(rounds):
        for mode, fn in fns.items():
            for _ in range(launches):
                s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                s.record()
                fn()
                e.record()
                e.synchronize()
                per.setdefault(mode, []).append(s.elapsed_time(e) * 1e3)
    return {k: statistics.median(v) for k, v in per.items()}


def added_pct(t: float, base: float) -> float:
    """Time added over `base`, in percent of `base` (how every overhead here is reported)."""
    return 100 * (t - base) / base


def cupti_median_us(fn, launches: int, name_part: str) -> float:
    """Median kernel duration (µs) of `launches` calls of fn, read from CUPTI via torch.profiler,
    after three warm-up calls."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    return cupti_medians({"fn": fn}, launches, 1, name_part)["fn"]


def event_median_us(fn, launches: int) -> float:
    """Median CUDA-event time (µs) of `launches` calls of fn, after three warm-up calls."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    return event_medians({"fn": fn}, launches, 1)["fn"]


def proton_timed(fn, launches, name):
    """Time a Proton-instrumented Triton launch inside a Proton instrumentation session; returns
    (µs, "cupti" or "cuda-events") or (None, why it failed)."""
    try:
        import triton.profiler as proton
        import triton.profiler.language as pl

        pl.enable_semantic("triton")
        sess = proton.start("/tmp/sm_profiler_bench_proton", backend="instrumentation")
        try:
            try:
                t, how = cupti_median_us(fn, launches * 2, name), "cupti"
            except Exception:
                t, how = event_median_us(fn, launches), "cuda-events"
        finally:
            proton.finalize(sess)
        return t, how
    except Exception as e:  # report, don't hide: the row says why Proton is missing
        return None, f"failed: {type(e).__name__}: {e}"[:200]
