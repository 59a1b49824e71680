"""Statistics of a decoded trace: per-event durations, per-SM occupancy, load imbalance, warnings.

`compute_stats` turns a TraceData into a `Stats` (plain data: dataclasses and numpy arrays, in
stats_data.py); `format_stats` (sm_profiler.report.stats_table) renders it as an aligned
plain-text table; `print_stats` does both. All are importable from here.

Everything is vectorized over events, lanes and blocks. The only Python loops run over distinct
event ids, captures and the handful of worst lanes named in a warning.
"""

from __future__ import annotations

import sys
from typing import TextIO

import numpy as np

from ..errors import ConfigError
from ..text import plural, printable
from ..trace.model import INSTANT, RANGE, UNMATCHED_BEGIN, UNMATCHED_END, KernelInfo, TraceData
from ..trace.nesting import range_tree, waits
from ..trace.timeline import block_intervals
from ..wire.format import EMULATED_SM_COUNT
from .stats_data import (  # noqa: F401 (importable from here, as before)
    BreakdownRow,
    EventStat,
    Imbalance,
    KernelLaunches,
    SmTable,
    Span,
    Stats,
    WaitStat,
)
from .stats_table import (  # noqa: F401 (the rendering, importable from sm_profiler.stats)
    MAX_CAPTURE_SECTIONS,
    MAX_WAIT_ROWS,
    breakdown_lines,
    format_stats,
    format_time,
    format_times,
    table_unit,
    time_unit,
)

PERCENTILES = (50.0, 90.0, 99.0)

# How many offenders a warning names before it says "and N more".
_WORST = 3


# -- computing --------------------------------------------------------------------------------


def compute_stats(trace: TraceData) -> Stats:
    """Statistics of `trace`, with a per-capture breakdown when it holds several captures."""
    n_caps = len(trace.kernels)
    label = "all captures" if n_caps > 1 else _capture_label(trace, 0, several=False)
    stats = _section(trace, label)
    stats.warnings = _warnings(trace)
    if n_caps > 1:
        # Launches are separated by host time: occupancy and imbalance are per capture only.
        stats.imbalance = None
        stats.captures = [
            _section(trace.select_capture(c), _capture_label(trace, c, several=True))
            for c in range(n_caps)
        ]
        stats.launches = _launches(trace, stats.captures)
    return stats


def _launches(trace: TraceData, per_capture: list[Stats]) -> list[KernelLaunches]:
    """Launches grouped by kernel name, in order of first launch; [] when no name repeats."""
    by_name: dict[str, KernelLaunches] = {}
    for c, (k, sub) in enumerate(zip(trace.kernels, per_capture, strict=True)):
        meta = k.metadata if isinstance(k.metadata, dict) else {}
        row = by_name.setdefault(k.name, KernelLaunches(k.name, [], [], [], []))
        row.captures.append(c)
        if sub.mixed:
            row.mixed += 1
        else:
            row.span_ns.append(sub.span.duration_ns)
        grid = meta.get("grid")
        if isinstance(grid, list) and grid:
            row.grids.append(printable("x".join(str(g) for g in grid)))
        site = meta.get("call_site")
        if isinstance(site, str) and site:
            row.call_sites.append(printable(site))  # from a file: no escape sequences out
    rows = list(by_name.values())
    if all(r.count == 1 for r in rows):
        return []
    for r in rows:
        part = TraceData.concat([trace.select_capture(c) for c in r.captures])
        r.section = _section(part, f"{r.kernel}: {plural(r.count, 'launch', 'launches')}")
        r.section.imbalance = None  # launches are separated by host time
    return rows


def _capture_label(trace: TraceData, c: int, several: bool) -> str:
    k = trace.kernels[c]
    shape = plural(k.num_blocks, "block")
    if k.num_groups > 1:
        shape += f" x {k.num_groups} groups"
    prefix = f"capture {c}: " if several else ""
    if isinstance(k.metadata, dict) and k.metadata.get("unnamed") is True:
        return prefix + shape  # SmProfiler without kernel_name: no placeholder "kernel"
    return f"{prefix}{k.name} ({shape})"


def _section(trace: TraceData, label: str) -> Stats:
    blocks = block_intervals(trace)
    # A block that ran but recorded nothing still occupied its SM: its anchor counts for the span.
    start, end = trace.start_ns, trace.end_ns
    if len(blocks["sm"]):
        start = min(start, int(blocks["start_ns"].min()))
        end = max(end, int(blocks["end_ns"].max()))
    span = Span(start, end)
    sms = _sm_table(blocks, span)
    um_kind = trace.unmatched["kind"]
    tree = range_tree(trace)
    return Stats(
        label=label,
        kernels=list(trace.kernels),
        span=span,
        events=_event_stats(trace, tree),
        waits=_wait_stats(trace, tree),
        by_group=(
            breakdown(trace, "group", tree) if any(k.num_groups > 1 for k in trace.kernels) else []
        ),
        sms=sms,
        imbalance=_imbalance(sms, span),
        lanes_total=len(trace.lanes["lane"]),
        lanes_initialized=int(trace.lanes["initialized"].sum()),
        dropped_total=trace.dropped_total,
        unmatched_begins=int((um_kind == UNMATCHED_BEGIN).sum()),
        unmatched_ends=int((um_kind == UNMATCHED_END).sum()),
        emulated=trace.emulated,
        mixed=any(mixes_launches(k) for k in trace.kernels),
    )


def mixes_launches(k: KernelInfo) -> bool:
    """Whether a capture is known to hold records of more than one launch: stale records, a lane
    opened twice (interpreter), or the buffer handed out for several launches."""
    handouts = k.metadata.get("buffer_handouts", 1) if isinstance(k.metadata, dict) else 1
    return bool(k.stale_lanes) or k.reopened_lanes or (isinstance(handouts, int) and handouts > 1)


def grouped_percentile(
    sorted_values: np.ndarray, starts: np.ndarray, counts: np.ndarray, q: float
) -> np.ndarray:
    """np.percentile(..., method='linear') of each group of a group-contiguous, within-group
    sorted array, for all groups at once (groups given by their start index and size > 0)."""
    pos = (q / 100.0) * (counts - 1)
    lo = np.floor(pos).astype(np.int64)
    hi = np.minimum(lo + 1, counts - 1)
    frac = pos - lo
    a = sorted_values[starts + lo].astype(np.float64)
    b = sorted_values[starts + hi].astype(np.float64)
    # numpy's own lerp form: exact at both ends, monotone in frac.
    return np.where(frac >= 0.5, b - (b - a) * (1 - frac), a + (b - a) * frac)


def median_after(
    sorted_ns: np.ndarray, first: np.ndarray, count: np.ndarray, origin_ns: np.ndarray
) -> np.ndarray:
    """The median of each group of times (int64 ns, sorted within each group; group k's `count[k]`
    > 0 values from index `first[k]`) in ns after the group's `origin_ns` (its launch's start):
    the two middle values are made relative in int64 before their exact half is taken, so the
    figure does not depend on the clock's origin (%globaltimer reads about 1.7e18 ns, where a
    float64 steps by 256 ns)."""
    lo = sorted_ns[first + (count - 1) // 2] - origin_ns
    hi = sorted_ns[first + count // 2] - origin_ns
    return (lo + hi) / 2


def _event_stats(trace: TraceData, tree: dict[str, np.ndarray]) -> list[EventStat]:
    ev = trace.events
    top_id = int(ev["event"].max()) + 1 if len(ev["event"]) else 1
    self_by_id = np.bincount(tree["event"], weights=tree["self_ns"], minlength=top_id)
    is_range = ev["kind"] == RANGE
    r_ids = ev["event"][is_range].astype(np.int64)
    dur = (ev["end_ns"] - ev["start_ns"])[is_range]
    i_ids = ev["event"][ev["kind"] == INSTANT].astype(np.int64)

    ids = np.unique(np.concatenate([r_ids, i_ids]))
    if len(ids) == 0:
        return []
    # Sort ranges by (event, duration): each event's durations are then one sorted run.
    order = np.lexsort((dur, r_ids))
    s_ids, s_dur = r_ids[order], dur[order]
    r_uniq, starts, counts = np.unique(s_ids, return_index=True, return_counts=True)
    if len(r_uniq):
        totals = np.add.reduceat(s_dur, starts)
        mins = s_dur[starts]
        maxs = s_dur[starts + counts - 1]
        pct = [grouped_percentile(s_dur, starts, counts, q) for q in PERCENTILES]
    inst_uniq, inst_counts = np.unique(i_ids, return_counts=True)
    inst = dict(zip(inst_uniq.tolist(), inst_counts.tolist(), strict=True))

    out: list[EventStat] = []
    row = {int(e): i for i, e in enumerate(r_uniq.tolist())}
    for e in ids.tolist():  # one iteration per distinct event id
        i = row.get(e)
        if i is None:
            out.append(
                EventStat(e, trace.event_name(e), 0, 0, 0.0, 0, 0.0, 0.0, 0.0, 0, inst.get(e, 0))
            )
            continue
        n = int(counts[i])
        total = int(totals[i])
        out.append(
            EventStat(
                event=e,
                name=trace.event_name(e),
                count=n,
                total_ns=total,
                mean_ns=total / n,
                min_ns=int(mins[i]),
                p50_ns=float(pct[0][i]),
                p90_ns=float(pct[1][i]),
                p99_ns=float(pct[2][i]),
                max_ns=int(maxs[i]),
                instants=inst.get(e, 0),
                self_ns=int(self_by_id[e]),
            )
        )
    out.sort(key=lambda s: (s.count == 0, -s.total_ns, s.event))
    return out


def _wait_stats(trace: TraceData, tree: dict[str, np.ndarray]) -> list[WaitStat]:
    w = waits(trace, tree)
    if len(w["gap_ns"]) == 0:
        return []
    top = int(max(w["before"].max(), w["after"].max())) + 1
    key = w["before"].astype(np.int64) * top + w["after"]
    uniq, inv, counts = np.unique(key, return_inverse=True, return_counts=True)
    totals = np.bincount(inv, weights=w["gap_ns"]).astype(np.int64)
    maxs = np.full(len(uniq), 0, np.int64)
    np.maximum.at(maxs, inv, w["gap_ns"])
    out = [
        WaitStat(
            trace.event_name(k // top), trace.event_name(k % top), int(c), int(t), t / c, int(m)
        )
        for k, c, t, m in zip(
            uniq.tolist(), counts.tolist(), totals.tolist(), maxs.tolist(), strict=True
        )
    ]
    out.sort(key=lambda x: -x.total_ns)
    return out


BREAKDOWNS = ("group", "sm", "launch")


def breakdown(
    trace: TraceData, by: str, tree: dict[str, np.ndarray] | None = None
) -> list[BreakdownRow]:
    """Count, total, self and mean time of each event's ranges per group ('producer', or
    'group 2'), per SM ('SM 17') or per launch ('gemm (launch 2)'); in key order, then by total
    time, largest first."""
    if by not in BREAKDOWNS:
        raise ConfigError(f"breakdown by {by!r}: use one of {', '.join(BREAKDOWNS)}")
    t = range_tree(trace) if tree is None else tree
    ev = trace.events
    rows = t["row"]
    if by == "group":
        # Groups of one number share a name only when every capture names it alike.
        cap, grp = ev["capture"][rows].astype(np.int64), ev["group"][rows].astype(np.int64)
        labels = {}
        for c, g in sorted(set(zip(cap.tolist(), grp.tolist(), strict=True))):
            labels[g] = labels.get(g) or trace.group_name(c, g) or f"group {g}"
        key = grp
    elif by == "sm":
        key = ev["sm"][rows].astype(np.int64)
        labels = {int(k): f"SM {int(k)}" for k in np.unique(key)}
    else:
        key = ev["capture"][rows].astype(np.int64)
        labels = {int(k): trace.capture_name(int(k)) for k in np.unique(key)}
    if len(rows) == 0:
        return []
    top = int(t["event"].max()) + 1
    k2 = (key - int(key.min())) * top + t["event"]
    uniq, inv, counts = np.unique(k2, return_inverse=True, return_counts=True)
    dur = t["end_ns"] - t["start_ns"]
    totals = np.bincount(inv, weights=dur).astype(np.int64)
    selfs = np.bincount(inv, weights=t["self_ns"]).astype(np.int64)
    out = []
    for k, c, tot, sf in zip(
        uniq.tolist(), counts.tolist(), totals.tolist(), selfs.tolist(), strict=True
    ):
        kk, e = divmod(k, top)
        out.append(
            (
                kk,
                BreakdownRow(labels[kk + int(key.min())], trace.event_name(e), c, tot, sf, tot / c),
            )
        )
    out.sort(key=lambda x: (x[0], -x[1].total_ns))
    return [r for _, r in out]


def union_length(
    group: np.ndarray, start: np.ndarray, end: np.ndarray, n_groups: int
) -> np.ndarray:
    """Per group, the total length covered by the union of [start, end) intervals.

    Sweep over the intervals sorted by (group, start): each adds what sticks out past the
    furthest end seen so far in its group; that running maximum is found for all groups in one
    np.maximum.accumulate by lifting each group above the previous one. Input already in that
    order is used as it is; other input is sorted first (a copy).
    """
    if len(group) == 0:
        return np.zeros(n_groups, np.int64)
    if not _sorted_by(group, start):
        order = np.lexsort((start, group))
        group, start, end = group[order], start[order], end[order]
        del order
    lo = int(min(start.min(), end.min()))
    width = int(max(start.max(), end.max())) - lo + 1
    if width * (n_groups + 1) >= 2**62:
        # Lifting would overflow int64: one group at a time, unlifted (times are < 2**63).
        out = np.zeros(n_groups, np.int64)
        for g in np.unique(group).tolist():
            m = group == g
            out[g] = _union_one(start[m], end[m])
        return out
    # In place where it can be: a report over a million launches holds three arrays here, not
    # seven (issue 30: host memory at exit).
    lift = group.astype(np.int64)
    lift *= width
    lift -= lo
    run = np.add(end, lift)
    np.maximum.accumulate(run, out=run)
    prev = np.empty_like(run)
    prev[0] = np.iinfo(np.int64).min
    prev[1:] = run[:-1]
    del run
    prev -= lift  # unlift
    del lift
    new_group = np.ones(len(group), bool)
    new_group[1:] = group[1:] != group[:-1]
    prev[new_group] = start[new_group]  # a group's first interval has nothing before it
    del new_group
    np.maximum(start, prev, out=prev)
    np.subtract(end, prev, out=prev)
    np.maximum(prev, 0, out=prev)
    return np.bincount(group, weights=prev, minlength=n_groups).astype(np.int64)


def _sorted_by(group: np.ndarray, start: np.ndarray) -> bool:
    """Whether rows are in (group, start) order, checked a chunk at a time (no n-long
    temporaries)."""
    n, part = len(group), 1 << 16
    for a in range(0, n - 1, part):
        b = min(a + part + 1, n)
        g, s = group[a:b], start[a:b]
        dg = g[1:] != g[:-1]
        if (g[1:] < g[:-1]).any() or ((~dg) & (s[1:] < s[:-1])).any():
            return False
    return True


def step_periods(
    steps: np.ndarray, first_ns: np.ndarray, span_ns: np.ndarray, group: np.ndarray | None = None
) -> np.ndarray:
    """Each step's period, the time a coverage share is taken over: from its first start to the
    next step's first start where that step follows at once (the GPU time between is this
    step's, idle or not), never shorter than its own span; the last step's, and one whose next
    recorded step does not follow at once, is its span. steps: the step numbers, sorted; the
    auto report (records) and torch_coverage (CUPTI rows) share it, so their figures compare.
    group: each step's GPU, the steps sorted by (group, step): a step is followed by the next
    of its own GPU only."""
    period = np.array(span_ns, copy=True)
    follows = np.diff(steps) == 1
    if group is not None:
        follows &= np.diff(group) == 0
    period[:-1][follows] = np.maximum(
        first_ns[1:][follows] - first_ns[:-1][follows], span_ns[:-1][follows]
    )
    return period


def cell_periods(
    steps: np.ndarray, gpus: np.ndarray, first_ns: np.ndarray, span_ns: np.ndarray
) -> np.ndarray:
    """step_periods of (step, GPU) cells in any order, each over the steps of its own GPU."""
    o = np.lexsort((steps, gpus))
    period = np.empty(len(o), np.asarray(span_ns).dtype)
    period[o] = step_periods(steps[o], first_ns[o], span_ns[o], gpus[o])
    return period


def _union_one(start: np.ndarray, end: np.ndarray) -> int:
    """union_length of one group (sorted by start) without lifting, so no sum can overflow."""
    run = np.maximum.accumulate(end)
    prev_end = np.empty_like(run)
    prev_end[0] = start[0]
    prev_end[1:] = run[:-1]
    return int(np.maximum(end - np.maximum(start, prev_end), 0).sum())


def _sm_table(b: dict[str, np.ndarray], span: Span) -> SmTable:
    sm_ids, g_start, blocks = np.unique(b["sm"], return_index=True, return_counts=True)
    sm_idx = np.repeat(np.arange(len(sm_ids)), blocks)
    busy = union_length(sm_idx, b["start_ns"], b["end_ns"], len(sm_ids))
    if len(sm_ids):
        first = np.minimum.reduceat(b["start_ns"], g_start)
        last = np.maximum.reduceat(b["end_ns"], g_start)
    else:
        first = last = np.zeros(0, np.int64)
    dur = span.duration_ns
    pct = busy * (100.0 / dur) if dur > 0 else np.zeros(len(busy))
    return SmTable(sm_ids.astype(np.int32), blocks.astype(np.int64), busy, pct, first, last)


def _imbalance(sms: SmTable, span: Span) -> Imbalance | None:
    if len(sms) == 0:
        return None
    i = int(np.argmax(sms.last_end_ns))
    # After the span's start (int64) before any float: at real clock readings (about 1.7e18 ns)
    # a float64 of the absolute time steps by 256 ns.
    after = sms.last_end_ns - span.start_ns
    mean_after = float(np.mean(after))
    excess = float(after[i]) - mean_after
    dur = span.duration_ns
    return Imbalance(
        last_sm=int(sms.sm[i]),
        max_end_ns=int(sms.last_end_ns[i]),
        mean_end_ns=span.start_ns + mean_after,
        excess_ns=excess,
        pct_of_span=excess * 100.0 / dur if dur > 0 else 0.0,
    )


# -- warnings ---------------------------------------------------------------------------------

_SNAPSHOT_FIX = "call prof.snapshot() (or init_buffer()) after each launch"


def _relaunch_warnings(trace: TraceData, several: bool) -> list[str]:
    """Launches that shared one buffer, and programs that ran outside the buffer's shape."""
    out = []
    for c, k in enumerate(trace.kernels):
        where = f"capture {c} ({k.name}): " if several else ""
        handouts = k.metadata.get("buffer_handouts", 1) if isinstance(k.metadata, dict) else 1
        if isinstance(handouts, int) and handouts > 1:
            out.append(
                f"{where}the buffer was handed out {handouts} times (get_buffer()) without a "
                f"snapshot in between: if each was a launch, their records are mixed; {_SNAPSHOT_FIX}"
            )
        if k.stale_lanes:
            g = k.num_groups
            names = ", ".join(f"block {i // g} group {i % g}" for i in k.stale_lanes[:_WORST])
            more = f" and {len(k.stale_lanes) - _WORST} more" if len(k.stale_lanes) > _WORST else ""
            out.append(
                f"{where}{len(k.stale_lanes)} lanes hold records older than the ones before them "
                f"({names}{more}): left by an earlier launch into the same buffer, so those lanes "
                f"mix launches; {_SNAPSHOT_FIX}"
            )
        missed = k.metadata.get("launches_without_slot", 0) if isinstance(k.metadata, dict) else 0
        if isinstance(missed, int) and missed > 0:
            out.append(
                f"{missed} launches after this one found every launch slot "
                f"({printable(str(k.metadata.get('slots')))}) used and recorded nothing: raise SmProfiler(slots=) "
                "or snapshot() more often"
            )
        if k.reopened_lanes:
            out.append(
                f"{where}lanes were opened twice: a second launch into the same buffer (or two "
                "programs given one lane), so the trace mixes launches and no span is shown; "
                f"{_SNAPSHOT_FIX}"
            )
        if k.out_of_shape_writes:
            out.append(
                f"{where}programs outside the buffer's shape ({k.num_blocks} blocks x "
                f"{k.num_groups} groups) ran the ops and recorded nothing: make num_blocks the "
                "grid size and num_groups cover every group (and warp, with PER_WARP)"
            )
    return out


def _warnings(trace: TraceData) -> list[str]:
    out: list[str] = []
    several = len(trace.kernels) > 1
    if trace.emulated:
        out.append(
            "emulated trace (CPU interpreter): times are the host clock and SM ids are emulated "
            f"(program id modulo {EMULATED_SM_COUNT}); they say nothing about GPU timing"
        )
    # Lanes whose ring wrapped lost their oldest records; any other lane its newest.
    ring = trace.lanes_overwritten()
    out += _ring_warnings(trace, several, ring)
    out += _dropped_warnings(trace, several, ring)
    out += _relaunch_warnings(trace, several)
    out += _unmatched_warnings(trace)
    out += _unnamed_warnings(trace)
    out += _uninitialised_warnings(trace, several)
    return out


def _ring_warnings(trace: TraceData, several: bool, ring: np.ndarray) -> list[str]:
    """Ring lanes that overwrote their oldest records (`ring`), and rings never closed."""
    out: list[str] = []
    lanes = trace.lanes
    dropped = lanes["dropped"]
    over = np.flatnonzero((dropped > 0) & ring)
    if len(over):
        names, more = _worst_lanes(
            over,
            dropped,
            lambda i: (
                f"{_lane_name(trace, i, several)}: {int(dropped[i])} of "
                f"{int(lanes['attempted'][i])}"
            ),
        )
        out.append(
            f"ring buffer: {int(dropped[over].sum())} older records overwritten in {len(over)} "
            f"lanes (each keeps its newest {trace.kernels[int(lanes['capture'][over[0]])].capacity}"
            f"): {names}{more}. Ends whose begins were overwritten are listed as unmatched"
        )
    for c, k in enumerate(trace.kernels):
        if k.ring_unclosed_lanes:
            n = len(k.ring_unclosed_lanes)
            out.append(
                f"ring buffer{f' (capture {c})' if several else ''}: {n} full lanes were not "
                "closed by profiler_flush(ctx), so whether they wrapped is unknown; they are "
                "decoded as holding their first records. Compile the ops with "
                "profiler_init(..., RING=True) and call profiler_flush(ctx) after the last event"
            )
    return out


def _dropped_warnings(trace: TraceData, several: bool, ring: np.ndarray) -> list[str]:
    """Lanes (not a wrapped ring's) that filled up and dropped their newest records."""
    lanes = trace.lanes
    dropped = np.where(ring, 0, lanes["dropped"])
    bad = np.flatnonzero(dropped > 0)
    if not len(bad):
        return []
    caps = np.array([trace.kernels[c].capacity for c in lanes["capture"][bad].tolist()])
    need = int(lanes["attempted"][bad].max())
    names, more = _worst_lanes(
        bad,
        dropped,
        lambda i: (
            f"{_lane_name(trace, i, several)}: {int(lanes['attempted'][i])} records for "
            f"capacity {trace.kernels[int(lanes['capture'][i])].capacity} ({int(dropped[i])} "
            "dropped)"
        ),
    )
    return [
        f"{int(dropped.sum())} records dropped in {len(bad)} lanes (capacity "
        f"{int(caps.max())}): {names}{more}. Raise max_events_per_group to at least {need}"
    ]


def _unmatched_warnings(trace: TraceData) -> list[str]:
    """Begins without an end and ends without a begin, by event, the most frequent first."""
    out = []
    um = trace.unmatched
    for kind, what, fix in (
        (UNMATCHED_BEGIN, "begins without an end", "a range_begin whose range_end never ran"),
        (UNMATCHED_END, "ends without a begin", "a range_end whose range_begin never ran"),
    ):
        m = um["kind"] == kind
        n = int(m.sum())
        if not n:
            continue
        ids, counts = np.unique(um["event"][m], return_counts=True)
        order = np.argsort(-counts, kind="stable")
        parts = ", ".join(
            f"{trace.event_name(e)} x{c}"
            for e, c in zip(ids[order].tolist(), counts[order].tolist(), strict=True)
        )
        hint = " (or the matching record was dropped)" if trace.dropped_total else ""
        out.append(
            f"{n} range {what} ({parts}): {fix} on that lane{hint}; pair every begin with an end "
            "on the same lane, on every path (early exits, masked branches)"
        )
    return out


def _unnamed_warnings(trace: TraceData) -> list[str]:
    """The event ids recorded that no name was given."""
    um = trace.unmatched
    recorded = set(np.unique(trace.events["event"]).tolist()) | set(np.unique(um["event"]).tolist())
    unnamed = sorted(recorded - set(trace.event_names))
    if not unnamed:
        return []
    ids = ", ".join(str(e) for e in unnamed[:8]) + (", ..." if len(unnamed) > 8 else "")
    e0 = unnamed[0]
    return [
        f'{plural(len(unnamed), "event id")} without a name ({ids}; shown as "event {e0}"): '
        f'name each id the kernel records, e.g. prof.register_event({e0}, "load")'
    ]


def _uninitialised_warnings(trace: TraceData, several: bool) -> list[str]:
    """Captures some or all of whose lanes never ran profiler_init; launches of one kernel
    that miss the same lanes share one warning."""
    lanes = trace.lanes
    init = lanes["initialized"]
    same: dict[tuple[str, str], list[int]] = {}  # (kernel, text) -> captures
    for c in range(len(trace.kernels)):
        m = lanes["capture"] == c
        n_init, n = int(init[m].sum()), int(m.sum())
        if n_init == 0:
            text = (
                "no lane was initialised: the kernel recorded nothing (was PROFILE on, "
                "the profiler's buffer passed to this launch, and, with STAGE, "
                "profiler_flush(ctx) called after the last event?)"
            )
        elif n_init < n:
            never = np.flatnonzero(m & ~init)
            blocks = np.unique(lanes["block"][never])
            shown = ", ".join(str(b) for b in blocks[:8].tolist())
            more = ", ..." if len(blocks) > 8 else ""
            text = (
                f"{n - n_init} of {n} lanes were never initialised (blocks {shown}{more}): "
                "the grid is smaller than num_blocks x num_groups, or some blocks or groups skip "
                "profiler_init"
            )
        else:
            continue
        same.setdefault((trace.kernels[c].name, text), []).append(c)
    out = []
    for (name, text), caps in same.items():
        where = ""
        if several:
            ids = ", ".join(str(c) for c in caps[:8]) + (", ..." if len(caps) > 8 else "")
            where = f"capture{'s' if len(caps) > 1 else ''} {ids} ({name}): "
        out.append(where + text)
    return out


def _worst_lanes(lanes: np.ndarray, dropped: np.ndarray, describe) -> tuple[str, str]:
    """("lane: what it lost; ..." for the _WORST lanes of `lanes` that dropped the most, "; and N
    more lanes" or "")."""
    worst = lanes[np.argsort(-dropped[lanes], kind="stable")][:_WORST]
    names = "; ".join(describe(i) for i in worst.tolist())
    more = (
        f"; and {plural(len(lanes) - len(worst), 'more lane')}" if len(lanes) > len(worst) else ""
    )
    return names, more


def _lane_name(trace: TraceData, row: int, several: bool) -> str:
    lanes = trace.lanes
    c, b, g = (int(lanes[k][row]) for k in ("capture", "block", "group"))
    label = trace.lane_label(c, b, g)
    return f"capture {c} {label}" if several else label


def print_stats(trace: TraceData, file: TextIO | None = None, width: int | None = None) -> None:
    """Compute and print the statistics of `trace` (to stdout unless `file` is given)."""
    out = sys.stdout if file is None else file
    out.write(format_stats(compute_stats(trace), width=width))


def peak_per_group(group, start, end, n_groups: int) -> np.ndarray:
    """Most intervals open at once in each group (an end and a start at one time do not
    overlap): +1 / -1 steps sorted by (group, time, ends first), one cumulative sum (each group
    nets zero, so the sum needs no reset between groups)."""
    if n_groups == 0:
        return np.zeros(0, np.int64)
    g = np.concatenate([group, group])
    t = np.concatenate([start, end])
    d = np.concatenate([np.ones(len(start), np.int64), -np.ones(len(end), np.int64)])
    o = np.lexsort((d, t, g))
    run = np.cumsum(d[o])
    peak = np.zeros(n_groups, np.int64)
    np.maximum.at(peak, g[o], run)
    return peak
