"""Kernel timing shared by the device benchmarks: CUPTI or CUDA-event medians."""

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
