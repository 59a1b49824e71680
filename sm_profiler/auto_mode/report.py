"""The auto-mode report: per launch, how the grid filled the GPU; per kernel, the launches
summed, sorted by time.

For one launch (one capture of an auto trace; a program is one lane's range):
  span        first program start to last program end
  waves       programs / (SMs of the GPU x most programs resident on one SM at once)
  per SM      programs per SM that ran any (mean)
  idle %      SM-time of the span with no program resident, over every SM of the GPU
  tail        the last SM to finish, and how long after the median SM's last program it ends
  imbalance   busiest SM's busy time over the mean busy time of the SMs that ran
"""

from __future__ import annotations

import shutil
import sys
from dataclasses import dataclass

import numpy as np

from ..stats import union_length
from ..stats_table import fit_table, format_time, wrap
from ..timeline import peak_resident
from ..trace import RANGE, TraceData


@dataclass
class LaunchReport:
    capture: int
    kernel: str
    start_ns: int
    span_ns: int
    programs: int
    sms_used: int
    waves: float
    per_sm: float
    idle_pct: float
    last_sm: int
    tail_ns: int
    imbalance: float


@dataclass
class KernelReport:
    kernel: str
    launches: int
    total_ns: int
    mean_ns: float
    programs: float
    waves: float
    idle_pct: float
    tail_ns: float
    imbalance: float


def launch_reports(trace: TraceData, sm_count: int | None = None) -> list[LaunchReport]:
    """One LaunchReport per capture with any program (block level: warps of a program merge)."""
    ev = trace.events
    rng = ev["kind"] == RANGE
    cap = ev["capture"][rng].astype(np.int64)
    sm = ev["sm"][rng].astype(np.int64)
    start = ev["start_ns"][rng].astype(np.int64)
    end = ev["end_ns"][rng].astype(np.int64)
    blk = ev["block"][rng].astype(np.int64)
    out = []
    order = np.lexsort((start, sm, cap))
    cap, sm, start, end, blk = cap[order], sm[order], start[order], end[order], blk[order]
    cuts = np.flatnonzero(cap[1:] != cap[:-1]) + 1
    for a, b in zip(np.r_[0, cuts].tolist(), np.r_[cuts, len(cap)].tolist(), strict=True):
        if a == b:
            continue
        c = int(cap[a])
        s_sm, s, e, bl = sm[a:b], start[a:b], end[a:b], blk[a:b]
        k = trace.kernels[c]
        gpu_sms = int(sm_count or k.metadata.get("sm_count") or 0)
        lo, hi = int(s.min()), int(e.max())
        span = max(hi - lo, 1)
        sms, first = np.unique(s_sm, return_index=True)
        idx = np.searchsorted(sms, s_sm)
        busy = union_length(idx, s, e, len(sms))
        last_end = np.maximum.reduceat(e, first)
        gpu_sms = max(gpu_sms, len(sms))
        programs = len(np.unique(bl))
        peak = peak_resident(idx, s, e)
        waves = programs / max(gpu_sms * peak, 1)
        j = int(np.argmax(last_end))
        tail = int(last_end[j] - np.median(last_end))
        idle = 100.0 * (1.0 - float(busy.sum()) / (gpu_sms * span))
        imb = float(busy.max() / max(busy.mean(), 1))
        out.append(
            LaunchReport(
                c,
                k.name,
                lo,
                span,
                programs,
                len(sms),
                waves,
                programs / len(sms),
                max(idle, 0.0),
                int(sms[j]),
                tail,
                imb,
            )
        )
    return out


def kernel_reports(launches: list[LaunchReport]) -> list[KernelReport]:
    """Launches of one kernel name summed, by total time (largest first)."""
    by: dict[str, list[LaunchReport]] = {}
    for r in launches:
        by.setdefault(r.kernel, []).append(r)
    out = []
    for name, rs in by.items():
        span = np.array([r.span_ns for r in rs], float)
        w = span / span.sum()
        out.append(
            KernelReport(
                name,
                len(rs),
                int(span.sum()),
                float(span.mean()),
                float(np.mean([r.programs for r in rs])),
                float(np.mean([r.waves for r in rs])),
                float(np.dot(w, [r.idle_pct for r in rs])),
                float(np.mean([r.tail_ns for r in rs])),
                float(np.mean([r.imbalance for r in rs])),
            )
        )
    out.sort(key=lambda k: -k.total_ns)
    return out


def format_report(trace: TraceData, width: int | None = None, top: int = 20) -> str:
    if width is None:
        width = shutil.get_terminal_size((100, 24)).columns
    width = max(width, 40)
    launches = launch_reports(trace)
    kernels = kernel_reports(launches)
    meta = trace.kernels[0].metadata if trace.kernels else {}
    sess = meta.get("auto_session", {})
    lines = wrap(
        f"sm_profiler auto: {len(launches):,} launches of {len(kernels)} kernels, "
        f"{sum(r.programs for r in launches):,} programs"
        f" on {meta.get('device_name', 'a GPU')} ({meta.get('sm_count', '?')} SMs)",
        width,
    )
    if sess.get("dropped"):
        kept = "newest" if sess.get("ring") else "first"
        lines += wrap(
            f"warning: {sess['dropped']:,} of {sess['claimed']:,} program records "
            f"dropped (kept the {kept} {sess['capacity']:,}): raise capacity=",
            width,
        )
    total = sum(k.total_ns for k in kernels) or 1
    rows = [
        [
            k.kernel,
            str(k.launches),
            format_time(k.total_ns),
            f"{100 * k.total_ns / total:.0f}",
            f"{k.programs:,.0f}",
            f"{k.waves:.1f}",
            f"{k.idle_pct:.0f}",
            format_time(k.tail_ns),
            f"{k.imbalance:.2f}",
        ]
        for k in kernels[:top]
    ]
    headers = ["kernel", "launches", "time", "%", "programs", "waves", "idle%", "tail", "imbal"]
    # Inductor's names are long and differ at both ends (triton_per_fused_..._backward_view_7):
    # cut them in the middle to the room the numbers leave, never below 24 characters.
    others = sum(max([len(h)] + [len(r[i]) for r in rows]) + 2 for i, h in enumerate(headers) if i)
    room = max(24, width - others)
    rows = [[_middle(r[0], room)] + r[1:] for r in rows]
    table, dropped = fit_table(headers, rows, width, drop=(8, 3, 1, 7, 4))
    if any(len(line) > width for line in table):  # very narrow: names shorter still
        table, dropped = fit_table(headers, rows, width, drop=(8, 3, 1, 7, 4), shrink=0)
    lines += ["", *table]
    if len(kernels) > top:
        lines.append(f"... {len(kernels) - top} more kernels")
    if dropped:
        lines += wrap(f"({', '.join(dropped)} left out to fit {width} columns)", width)
    lines += [""]
    lines += wrap(
        "time: launches' spans summed (first program start to last end); waves: "
        "programs / (SMs x peak programs per SM); idle%: SM-time with no program "
        "resident; tail: last SM's end after the median SM's; imbal: busiest SM / "
        "mean SM busy time",
        width,
    )
    worst = sorted(launches, key=lambda r: -r.tail_ns)[:3]
    if worst:
        lines += ["", *wrap("longest tails:", width)]
        for r in worst:
            lines += wrap(
                f"  {trace.capture_name(r.capture)}: SM {r.last_sm} ends "
                f"{format_time(r.tail_ns)} after the median SM (span "
                f"{format_time(r.span_ns)}, {r.waves:.1f} waves, idle {r.idle_pct:.0f}%)",
                width,
            )
    return "\n".join(lines) + "\n"


def _middle(name: str, room: int) -> str:
    """`name` cut to `room` characters in the middle: 'triton_per_fused_nat…backward_view_7'."""
    if len(name) <= room:
        return name
    tail = (room - 1) // 2
    return name[: room - 1 - tail] + "…" + name[len(name) - tail :]


def print_report(trace: TraceData, file=None, width: int | None = None) -> None:
    (sys.stdout if file is None else file).write(format_report(trace, width=width))


def is_auto(trace: TraceData) -> bool:
    return bool(trace.kernels) and all(k.metadata.get("auto") for k in trace.kernels)
