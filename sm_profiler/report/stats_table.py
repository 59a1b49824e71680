"""How a `Stats` is drawn: the plain-text report of `sm_profiler.report.stats` (`format_stats`), its
tables and the time units they use; the text helpers that fit it all to a line width are
sm_profiler/text.py's (importable from here as before).

`sm_profiler.report.stats` computes the numbers; nothing here computes a statistic. Every line fits
the width asked for: prose is wrapped, and tables leave out their least important columns,
saying which, before names are cut.
"""

from __future__ import annotations

import shutil

import numpy as np

from ..text import (  # noqa: F401 (importable from here as before)
    fit,
    fit_table,
    join_wrapped,
    middle,
    number_runs,
    plural,
    printable,
    wrap,
)
from ..units import (  # noqa: F401 (as before)
    UNITS,
    format_time,
    report_unit,
    table_unit,
    time_unit,
)
from .stats_data import BreakdownRow, KernelLaunches, Stats, WaitStat


def format_times(values: list[float], unit: tuple[str, float] | None = None) -> list[str]:
    """Several values side by side, all in one unit (`unit`, else `table_unit`'s): '2000 ns',
    '479 ns'."""
    name, scale = unit or table_unit(max((abs(v) for v in values), default=0.0))
    return [f"{c} {name}" for c in _cells(values, name, scale)]


def _cells(values: list[float], unit: str, scale: float, top_ns: float | None = None) -> list[str]:
    """`values` (ns) in `unit`, with one number of decimals for all of them (so that they line
    up): none for ns, else as many as keep three or four significant digits of `top_ns` (the
    table's largest figure; default the largest of `values`), the same for a whole table. In
    a report's unit a table's largest may be under 1 (report_unit): three decimals then."""
    if unit == "ns":
        return [f"{v:.0f}" for v in values]
    if top_ns is None:
        top_ns = max((abs(v) for v in values), default=0.0)
    top = top_ns / scale
    digits = 3 if top < 1 else 2 if top < 100 else 1 if top < 1000 else 0
    return [f"{v / scale:.{digits}f}" for v in values]


def _left_out(dropped: list[str], width: int) -> list[str]:
    if not dropped:
        return []
    return wrap(f"({', '.join(dropped)} left out to fit {width} columns)", width)


def format_stats(
    stats: Stats,
    width: int | None = None,
    max_sm_rows: int = 16,
    *,
    by: tuple[str, list[BreakdownRow]] | None = None,
    sections: bool = True,
) -> str:
    """Plain-text report: header, warnings, event table, SM table (or a summary of it when there
    are more than `max_sm_rows` SMs), load imbalance; then one section per capture if several.

    by: ('sm', breakdown(trace, 'sm')): that breakdown, printed right after the event table it
    breaks down. sections=False: the overview only, without the sections per capture (or per
    kernel); the caller says where they are.

    Every line fits `width` (default: the terminal's; at least 40): prose is wrapped, and tables
    leave out their least important columns, saying which, before names are cut."""
    if width is None:
        width = shutil.get_terminal_size((100, 24)).columns
    width = max(width, 40)
    lines: list[str] = []
    n_caps = len(stats.kernels)
    title = f"sm_profiler stats: {stats.label}"
    if n_caps > 1:
        title += f" ({n_caps} captures)"
    lines.extend(wrap(title, width))
    for w in stats.warnings:
        lines.extend(wrap("warning: " + w, width))
    by_rows = by[1] if by is not None and not (by[0] == "group" and stats.by_group) else None
    # One unit for every table of a section (issue 56: events in ms beside waits in µs); the
    # sections per capture below have theirs (a launch of seconds beside one of microseconds).
    tops = _section_tops(stats, sm_table=not stats.captures)
    unit = report_unit(tops + [_breakdown_top(by_rows or []), _launch_top(stats.launches)])
    extra = [] if by_rows is None else breakdown_lines(by_rows, by[0], width, unit) + [""]
    lines.extend(_section_lines(stats, width, max_sm_rows, unit, not stats.captures, extra))
    if stats.launches:
        if lines[-1] != "":
            lines.append("")
        lines.extend(_launch_lines(stats.launches, width, unit))
        lines.append("")
    if not sections:
        return "\n".join(lines).rstrip("\n") + "\n"
    if stats.launches and len(stats.captures) > MAX_CAPTURE_SECTIONS:
        for row in stats.launches:
            if lines[-1] != "":
                lines.append("")
            lines.extend(_rule(row.section.label, width))
            lines.extend(_section_lines(row.section, width, max_sm_rows, sm_table=False))
        return "\n".join(lines) + "\n"
    if stats.captures:
        lines.extend(
            wrap(
                "SM occupancy and load imbalance: per capture, below (launches are separated by "
                "host time, which a combined span would count as idle)",
                width,
                indent="",
            )
        )
    for sub in stats.captures:
        lines.append("")
        lines.extend(_rule(sub.label, width))
        lines.extend(_section_lines(sub, width, max_sm_rows))
    return "\n".join(lines) + "\n"


# Up to this many captures, format_stats prints a section per capture; past it, per kernel.
MAX_CAPTURE_SECTIONS = 8


def _section_tops(stats: Stats, sm_table: bool) -> list[float]:
    """The largest figure of each table of a section (each table's unit, in a table alone)."""
    tops = [_event_top(stats.events)]
    if stats.by_group:
        tops.append(_breakdown_top(stats.by_group))
    if stats.waits and not stats.mixed:
        tops.append(_wait_top(stats.waits))
    if sm_table and not stats.mixed and len(stats.sms):
        tops.append(float((stats.sms.last_end_ns - stats.span.start_ns).max()))
    return tops


def _launch_top(rows: list[KernelLaunches]) -> float:
    return max((float(s) for r in rows for s in r.span_ns), default=0.0)


def _launch_lines(rows: list[KernelLaunches], width: int, report: tuple[str, float]) -> list[str]:
    """The launches table: one row per kernel, spans from each launch's first to last stamp."""
    unit, scale = report
    top = _launch_top(rows)
    headers = ["kernel", "launches", "mean", "min", "max", "grid", "call site"]
    table_rows = []
    for r in rows:
        cells = (
            _cells(
                [float(np.mean(r.span_ns)), float(min(r.span_ns)), float(max(r.span_ns))],
                unit,
                scale,
                top,
            )
            if r.span_ns
            else ["-"] * 3
        )
        grids = sorted(set(r.grids))
        sites = sorted(set(r.call_sites))
        table_rows.append(
            [
                r.kernel,
                str(r.count) + (f" ({r.mixed} mixed)" if r.mixed else ""),
                *cells,
                grids[0] if len(grids) == 1 else f"{len(grids)} grids" if grids else "-",
                sites[0] if len(sites) == 1 else f"{len(sites)} sites" if sites else "-",
            ]
        )
    # Snapshots of an unslotted profiler carry no grid or call site: no column of dashes.
    for name, have in (
        ("call site", any(r.call_sites for r in rows)),
        ("grid", any(r.grids for r in rows)),
    ):
        if not have:
            i = headers.index(name)
            del headers[i]
            for row in table_rows:
                del row[i]
    drop = tuple(headers.index(h) for h in ("min", "max", "call site") if h in headers)
    table, dropped = fit_table(headers, table_rows, width, drop=drop, shrink=0)
    return [f"launches by kernel (span per launch, in {unit})"] + table + _left_out(dropped, width)


def _rule(label: str, width: int) -> list[str]:
    """'-- label -----' filling `width`; a label too long for one line continues below."""
    first, *rest = wrap(label, width - 7, indent="") or [""]
    return [f"-- {first} ".ljust(width, "-")] + ["   " + r for r in rest]


def _section_lines(
    stats: Stats,
    width: int,
    max_sm_rows: int,
    unit: tuple[str, float] | None = None,
    sm_table: bool = True,
    extra: list[str] = (),
) -> list[str]:
    """A section's lines: its prose, then its tables, all in `unit` (default: the section's
    own, report_unit of its tables' largest figures)."""
    unit = unit or report_unit(_section_tops(stats, sm_table))
    span = stats.span
    parts = [
        "span not shown (launches mixed)"
        if stats.mixed
        else f"span {format_time(span.duration_ns)}",
        f"{len(stats.sms)} SMs",
        f"{stats.lanes_initialized}/{stats.lanes_total} lanes initialised",
        plural(sum(e.count for e in stats.events), "range"),
        plural(sum(e.instants for e in stats.events), "instant"),
    ] + (["EMULATED"] if stats.emulated else [])
    lines = join_wrapped(parts, width)
    lines.append("")
    lines.extend(_event_lines(stats, width, unit))
    lines.append("")
    lines.extend(extra)
    if stats.by_group:
        lines.extend(breakdown_lines(stats.by_group, "group", width, unit))
        lines.append("")
    if stats.waits and not stats.mixed:
        lines.extend(_wait_lines(stats.waits, width, unit))
        lines.append("")
    if sm_table and stats.mixed:
        lines.extend(
            wrap(
                "SM times not shown: they would count the time between the launches "
                "this capture mixes",
                width,
                indent="",
            )
        )
    elif sm_table:
        lines.extend(_sm_lines(stats, width, max_sm_rows, unit))
    imb = stats.imbalance
    if imb is not None and not stats.mixed:
        lines.extend(
            wrap(
                f"load imbalance: last SM ({imb.last_sm}) finishes {format_time(imb.excess_ns)} "
                f"after the mean SM ({imb.pct_of_span:.1f}% of span)",
                width,
            )
        )
    return lines


# Event table columns; the first ones named here are left out first when the width is short.
_EVENT_FIELDS = ("total_ns", "self_ns", "mean_ns", "min_ns", "p50_ns", "p90_ns", "p99_ns", "max_ns")
_EVENT_DROP = ("p90", "p99", "min", "p50", "instants", "mean")


def _event_top(evs) -> float:
    """The largest single range (totals are sums: they just get more digits)."""
    return max(
        (float(getattr(e, f)) for e in evs if e.count for f in _EVENT_FIELDS[2:]), default=0.0
    )


def _event_lines(stats: Stats, width: int, report: tuple[str, float]) -> list[str]:
    if not stats.events:
        return ["no events recorded"]
    evs = stats.events
    has_range = [e.count > 0 for e in evs]
    # The report's unit: a row, a column or two tables never mix units.
    top = _event_top(evs)
    unit, scale = report
    cols = []
    for f in _EVENT_FIELDS:
        cells = iter(_cells([float(getattr(e, f)) for e in evs if e.count], unit, scale, top))
        cols.append([next(cells) if r else "-" for r in has_range])
    headers = ["event", "count"] + [f.removesuffix("_ns") for f in _EVENT_FIELDS]
    rows = [[e.name, str(e.count)] + [c[i] for c in cols] for i, e in enumerate(evs)]
    if any(e.instants for e in evs):  # else the span line's "0 instants" says it
        headers.append("instants")
        for r, e in zip(rows, evs, strict=True):
            r.append(str(e.instants))
    drop = tuple(headers.index(h) for h in _EVENT_DROP if h in headers)
    table, dropped = fit_table(headers, rows, width, drop=drop, shrink=0)
    head = f"events (times in {unit}"
    if "self" in table[0].split() and any(e.self_ns != e.total_ns for e in evs):
        head += f"; {SELF_MEANS}"
    return wrap(head + ")", width, indent="") + table + _left_out(dropped, width)


# What the `self` column is, said where it differs from `total`.
SELF_MEANS = "self: total less the ranges nested inside"


# Rows of the waits table: the pairs with the most waiting.
MAX_WAIT_ROWS = 8


def _wait_top(ws: list[WaitStat]) -> float:
    """The largest single gap of the pairs shown (totals just get more digits)."""
    return max(float(w.max_ns) for w in ws[:MAX_WAIT_ROWS])


def _wait_lines(ws: list[WaitStat], width: int, report: tuple[str, float]) -> list[str]:
    shown = ws[:MAX_WAIT_ROWS]
    top = _wait_top(ws)
    unit, scale = report
    cols = [
        _cells([float(getattr(w, f)) for w in shown], unit, scale, top)
        for f in ("total_ns", "mean_ns", "max_ns")
    ]
    rows = [
        [f"{w.before} → {w.after}", str(w.count)] + [c[i] for c in cols]
        for i, w in enumerate(shown)
    ]
    table, dropped = fit_table(
        ["gap", "count", "total", "mean", "max"], rows, width, drop=(4,), shrink=0
    )
    more = [f"  ({len(ws) - len(shown)} more pairs)"] if len(ws) > len(shown) else []
    head = f"waits: gaps between consecutive ranges of a lane (times in {unit})"
    return wrap(head, width, indent="") + table + more + _left_out(dropped, width)


def _breakdown_top(rows: list[BreakdownRow]) -> float:
    return max((float(r.mean_ns) for r in rows), default=0.0)


def breakdown_lines(
    rows: list[BreakdownRow], by: str, width: int, unit: tuple[str, float] | None = None
) -> list[str]:
    """The table of `breakdown(trace, by)`: one row per (key, event), times in one unit: the
    report's `unit` (format_stats), else its own from its largest mean."""
    if not rows:
        return [f"by {by}: no ranges"]
    top = _breakdown_top(rows)
    unit, scale = unit or table_unit(top)
    cols = [
        _cells([float(getattr(r, f)) for r in rows], unit, scale, top)
        for f in ("total_ns", "self_ns", "mean_ns")
    ]
    cells = [[r.key, r.event, str(r.count)] + [c[i] for c in cols] for i, r in enumerate(rows)]
    table, dropped = fit_table(
        [by, "event", "count", "total", "self", "mean"], cells, width, left=2, drop=(5,), shrink=1
    )
    head = f"by {by} (times in {unit}"
    if any(r.self_ns != r.total_ns for r in rows):
        head += f"; {SELF_MEANS}"
    return wrap(head + ")", width, indent="") + table + _left_out(dropped, width)


def _sm_lines(stats: Stats, width: int, max_rows: int, report: tuple[str, float]) -> list[str]:
    sms = stats.sms
    if len(sms) == 0:
        return ["no SM ran an initialised lane"]
    t0 = stats.span.start_ns
    first = (sms.first_start_ns - t0).astype(float).tolist()
    last = (sms.last_end_ns - t0).astype(float).tolist()
    busy = sms.busy_ns.astype(float).tolist()

    if len(sms) <= max_rows:
        # The report's unit; the last finish (the largest time here) gives the decimals.
        top = max(last, default=0.0)
        unit, scale = report
        rows = [
            [str(s), str(b), cb, f"{p:.1f}", f, ll]
            for s, b, cb, p, f, ll in zip(
                sms.sm.tolist(),
                sms.blocks.tolist(),
                _cells(busy, unit, scale, top),
                sms.busy_pct.tolist(),
                _cells(first, unit, scale, top),
                _cells(last, unit, scale, top),
                strict=True,
            )
        ]
        headers = ["sm", "blocks", "busy", "busy %", "first", "last"]
        table, dropped = fit_table(headers, rows, width, left=0, drop=(4, 2, 1))
        return [f"SMs (times in {unit} from kernel start)"] + table + _left_out(dropped, width)

    # Many SMs: summarize, then name the SMs that finish last (they set the kernel's end).
    pct = sms.busy_pct
    parts = [
        f"SMs: {len(sms)}",
        f"blocks per SM {int(sms.blocks.min())}..{int(sms.blocks.max())}",
        f"busy % min {pct.min():.1f} / mean {pct.mean():.1f} / max {pct.max():.1f}",
    ]
    lines = join_wrapped(parts, width)
    late = np.argsort(-sms.last_end_ns, kind="stable")[:5].tolist()
    times = format_times([last[i] for i in late], report)
    lines.extend(
        wrap(
            "last to finish (from kernel start): "
            + ", ".join(f"SM {int(sms.sm[i])} at {t}" for i, t in zip(late, times, strict=True)),
            width,
        )
    )
    return lines
