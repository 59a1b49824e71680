"""The auto-mode report, the run's report: per launch, how the grid filled the GPU; per kernel,
the launches summed, sorted by time; the steps, the ranks, the longest tails, what to fix first.

The report is its SECTIONS, in order (a flight-recorder dump's opening, the head, the kernels,
the steps, the ranks, the longest tails, what to fix first, then any register_section added):
`run_report` computes each section's numbers once from the trace, and `RunReport.text` draws
them at a width, as often as asked (`run` prints its report and writes auto_stats.txt from one
pass). A section reads the trace's launches through `trace.table`; "What to fix first" takes
each launch's peak residency from the launch table rather than finding it again.

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
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..errors import ConfigError, SmProfilerError
from ..text import fit_table, metadata_count, middle, number_runs, plural, printable, wrap
from ..trace import auto_table
from ..trace.auto_table import COMPILE_STEP_FACTOR, cell_bounds, pair_cells
from ..trace.model import RANGE, TraceData
from ..units import format_time
from ..wire.auto_file import session_count
from ..wire.auto_records import dense_ids
from .advise import advise, advise_lines
from .dump import DumpOpening, dump_lines, dump_opening, opening_lines
from .stats import cell_periods, median_after, peak_per_group, union_length


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


def launch_table(trace: TraceData, sm_count: int | None = None) -> dict[str, np.ndarray]:
    """Per launch with any program, as columns (capture, start_ns, span_ns, programs, sms_used,
    waves, per_sm, idle_pct, last_sm, tail_ns, imbalance), all launches at once: a program is
    its warps' union (level="warp" counts programs, not warps)."""
    parts = list(launch_chunks(trace, sm_count))
    if len(parts) == 1:
        return parts[0]
    return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}


def launch_chunks(trace: TraceData, sm_count: int | None = None):
    """launch_table a chunk of whole launches at a time (about CHUNK_ROWS programs each, in
    capture order; concatenated, they are launch_table). Memory: a few columns per program,
    and per group ((launch, SM)) and launch only the chunk's."""
    p_cap, p_sm, p_start, p_end = _programs(trace.events)
    # (launch, SM) groups, sorted by start within each.
    order = np.lexsort((p_start, p_sm, p_cap))
    c = p_cap[order]
    del p_cap
    sm = p_sm[order]
    del p_sm
    st = p_start[order]
    del p_start
    en = p_end[order]
    del p_end, order
    n = len(c)
    if n == 0:
        yield _launch_rows(trace, c, sm, st, en, sm_count)
        return
    l_rows = np.flatnonzero(np.r_[True, c[1:] != c[:-1]])  # each launch's first program
    # Where union_length could not lift every group's times at once, it takes its exact path
    # for all of them: then one chunk, as it was.
    n_g = 1 + int(np.count_nonzero((c[1:] != c[:-1]) | (sm[1:] != sm[:-1])))
    width = int(max(st.max(), en.max())) - int(min(st.min(), en.min())) + 1
    whole = width * (n_g + 1) >= 2**62
    # A launch's columns cost about eight times a program's: at most CHUNK_ROWS / 8 a chunk.
    for _, _, a, b in _whole_runs(l_rows, n, whole, runs_per_row=8):
        yield _launch_rows(trace, c[a:b], sm[a:b], st[a:b], en[a:b], sm_count, whole)


def _whole_runs(first: np.ndarray, n: int, whole: bool = False, runs_per_row: int = 1):
    """(first run, stop run, start row, stop row) of consecutive chunks of whole runs of n rows
    (run k starts at row first[k]), each at most CHUNK_ROWS rows and CHUNK_ROWS / runs_per_row
    runs unless one run alone is longer (whole: one chunk)."""
    k, n_runs = 0, len(first)
    most = max(1, auto_table.CHUNK_ROWS // runs_per_row)
    while k < n_runs:
        a = int(first[k])
        if whole or (n - a <= auto_table.CHUNK_ROWS and n_runs - k <= most):
            k2 = n_runs
        else:  # the runs that end within CHUNK_ROWS rows (at least one)
            k2 = int(np.searchsorted(first, a + auto_table.CHUNK_ROWS, "right")) - 1
            k2 = max(k + 1, min(k2, k + most))
        b = int(first[k2]) if k2 < n_runs else n
        yield k, k2, a, b
        k = k2


def _launch_rows(trace, c, sm, st, en, sm_count, whole=False) -> dict[str, np.ndarray]:
    """launch_table of whole launches' programs (c, sm, st, en), sorted by (capture, SM,
    start)."""
    g_new = np.r_[True, (c[1:] != c[:-1]) | (sm[1:] != sm[:-1])] if len(c) else np.zeros(0, bool)
    g_first = np.flatnonzero(g_new)
    del g_new
    n_g = len(g_first)
    g_cap, g_sm = c[g_first].astype(np.int64), sm[g_first].astype(np.int64)
    g_last = np.maximum.reduceat(en, g_first) if n_g else en[:0]
    busy, g_peak = _group_busy_and_peak(g_first, st, en, whole)
    # Launches.
    l_new = np.r_[True, g_cap[1:] != g_cap[:-1]] if n_g else np.zeros(0, bool)
    l_first = np.flatnonzero(l_new)
    caps = g_cap[l_first]
    sms_used = np.diff(np.r_[l_first, n_g])
    launch_of_g = np.cumsum(l_new) - 1
    p_first = g_first[l_first]  # a launch's first program: its first group's
    programs = np.diff(np.r_[p_first, len(st)])
    lo = np.minimum.reduceat(st, p_first) if len(caps) else st[:0]
    hi = np.maximum.reduceat(en, p_first) if len(caps) else en[:0]
    del st, en
    span = np.maximum(hi - lo, 1)
    peak = np.maximum.reduceat(g_peak, l_first) if len(caps) else g_peak[:0]
    gpu_sms = np.maximum(_sm_counts(trace, caps, sm_count), sms_used)
    busy_sum = np.add.reduceat(busy, l_first) if len(caps) else busy[:0]
    busy_max = np.maximum.reduceat(busy, l_first) if len(caps) else busy[:0]
    # Tail: the last SM's end after the median SM's last end (first of equals: lowest SM id).
    o2 = np.lexsort((g_sm, -g_last, launch_of_g))
    last_sm = g_sm[o2][l_first]
    last_end = g_last[o2][l_first]
    o3 = np.lexsort((g_last, launch_of_g))
    median = median_after(g_last[o3], l_first, sms_used, lo)  # ns after the launch start
    return {
        "capture": caps,
        "start_ns": lo,
        "span_ns": span,
        "programs": programs,
        "sms_used": sms_used,
        "waves": programs / np.maximum(gpu_sms * peak, 1),
        "per_sm": programs / np.maximum(sms_used, 1),
        # SM-time in float64: SMs x a span of years passes int64
        "idle_pct": np.maximum(100.0 * (1.0 - busy_sum / (gpu_sms * span.astype(np.float64))), 0.0),
        "last_sm": last_sm,
        "tail_ns": ((last_end - lo) - median).astype(np.int64),
        "imbalance": busy_max / np.maximum(busy_sum / np.maximum(sms_used, 1), 1),
        "peak": peak,
    }


def _programs(ev: dict[str, np.ndarray]):
    """(capture, sm, start_ns, end_ns) of each program: one interval per (capture, block) of
    the range rows, its warps merged, programs in (capture, block) order; sm: its first row's.
    Rows already in that order (an auto table's are) are read in place, without a sort."""
    rng = ev["kind"] == RANGE
    every = bool(rng.all())

    def ranges(col: str) -> np.ndarray:
        return ev[col] if every else ev[col][rng]

    cap = ranges("capture")
    blk = ranges("block").astype(np.int64, copy=False)
    start = ranges("start_ns").astype(np.int64, copy=False)
    end = ranges("end_ns").astype(np.int64, copy=False)
    sm = ranges("sm")
    if not len(cap):
        return cap, sm.astype(np.int64), start, end
    same_cap = cap[1:] == cap[:-1]
    ordered = bool(((cap[1:] > cap[:-1]) | (same_cap & (blk[1:] >= blk[:-1]))).all())
    if ordered:  # (capture, block) sorted: a program's rows are one run
        first = np.ones(len(cap), bool)
        first[1:] = ~same_cap | (blk[1:] != blk[:-1])
        del same_cap
        if first.all():  # one row per program: the columns are the programs
            return cap, sm, start, end
        cuts = np.flatnonzero(first)
        del first
        return (
            cap[cuts],
            sm[cuts],
            np.minimum.reduceat(start, cuts),
            np.maximum.reduceat(end, cuts),
        )
    del same_cap
    prog = dense_ids((blk, cap))
    o = np.argsort(prog, kind="stable")
    cuts = np.flatnonzero(np.r_[True, prog[o][1:] != prog[o][:-1]])
    del prog
    p_cap = cap[o][cuts]
    del cap
    p_sm = sm[o][cuts]
    p_start = np.minimum.reduceat(start[o], cuts)
    p_end = np.maximum.reduceat(end[o], cuts)
    return p_cap, p_sm, p_start, p_end


def _group_busy_and_peak(g_first: np.ndarray, st: np.ndarray, en: np.ndarray, whole: bool):
    """(busy time as float64, most programs resident at once) of each group of rows (sorted by
    group, then start; group k's rows start at g_first[k]), a chunk of whole groups at a time
    (whole: all at once): each chunk's temporaries are a few times CHUNK_ROWS rows, whatever
    the groups' count."""
    n, n_g = len(st), len(g_first)
    busy = np.zeros(n_g, np.float64)
    peak = np.zeros(n_g, np.int64)
    if n_g == 0:
        return busy, peak
    for k, k2, a, b in _whole_runs(g_first, n, whole):
        sizes = np.diff(np.r_[g_first[k:k2], b])
        group = np.repeat(np.arange(k2 - k), sizes)
        busy[k:k2] = union_length(group, st[a:b], en[a:b], k2 - k)
        peak[k:k2] = peak_per_group(group, st[a:b], en[a:b], k2 - k)
    return busy, peak


def launch_reports(trace: TraceData, sm_count: int | None = None) -> list[LaunchReport]:
    """One LaunchReport per capture with any program (see launch_table)."""
    t = launch_table(trace, sm_count)
    names = trace.table.launch_names()
    cols = [t[k].tolist() for k in _LAUNCH_FIELDS]
    return [
        LaunchReport(c, names[c], *rest)
        for c, *rest in zip(t["capture"].tolist(), *cols, strict=True)
    ]


_LAUNCH_FIELDS = (
    "start_ns",
    "span_ns",
    "programs",
    "sms_used",
    "waves",
    "per_sm",
    "idle_pct",
    "last_sm",
    "tail_ns",
    "imbalance",
)


def kernel_reports(launches) -> list[KernelReport]:
    """Launches of one kernel name summed, by total time (largest first). `launches`: a list of
    LaunchReport, or (trace, launch_table(trace))."""
    if isinstance(launches, tuple):
        trace, t = launches
        sums = KernelSums(trace)
        sums.add(t)
        return sums.reports()
    t = {k: np.array([getattr(r, k) for r in launches]) for k in _LAUNCH_FIELDS}
    names = np.array([r.kernel for r in launches], dtype=object)
    if not len(names):
        return []
    uniq, inv = np.unique(names.astype(str), return_inverse=True)
    sums = KernelSums(None, uniq)
    sums.add(t, inv.reshape(-1))
    return sums.reports()


class KernelSums:
    """kernel_reports of launch tables given a chunk of launches at a time: per kernel name,
    the launches' sums, each added in launch order (as one np.bincount over all of them adds
    them, so the floats come out the same)."""

    _COLS = ("programs", "waves", "tail_ns", "imbalance")

    def __init__(self, trace: TraceData | None, names: np.ndarray | None = None):
        if names is None:
            names, self._ids = _name_ids_of(trace)
        self.names = names
        n = len(names)
        self.count = np.zeros(n, np.int64)
        self.total = np.zeros(n, np.float64)
        self.idle = np.zeros(n, np.float64)
        self.sums = {c: np.zeros(n, np.float64) for c in self._COLS}

    def add(self, t: dict[str, np.ndarray], ids: np.ndarray | None = None) -> None:
        inv = self._ids(t["capture"]) if ids is None else ids
        np.add.at(self.count, inv, 1)
        span = t["span_ns"].astype(np.float64)
        np.add.at(self.total, inv, span)
        np.add.at(self.idle, inv, span * t["idle_pct"])
        for c in self._COLS:
            np.add.at(self.sums[c], inv, np.asarray(t[c], np.float64))

    def reports(self) -> list[KernelReport]:
        """One KernelReport per kernel name with a launch, by total time (largest first)."""
        i = np.flatnonzero(self.count)
        count, total = self.count[i], self.total[i]

        def mean(col):
            return self.sums[col][i] / count

        idle = self.idle[i] / np.maximum(total, 1)
        out = [
            KernelReport(str(name), int(c), int(tot), float(tot / c), *v)
            for name, c, tot, *v in zip(
                self.names[i].tolist(),
                count,
                total,
                mean("programs").tolist(),
                mean("waves").tolist(),
                idle.tolist(),
                mean("tail_ns").tolist(),
                mean("imbalance").tolist(),
                strict=True,
            )
        ]
        out.sort(key=lambda k: (-k.total_ns, k.kernel))
        return out


def _name_ids_of(trace: TraceData):
    """(every kernel name of `trace`, sorted and unique; a function: captures -> their names'
    indices), found per kernel of its table, not per launch."""
    table = trace.table
    k_names = np.array(table.kernel_names() or [""], dtype=object).astype(str)
    k_uniq, k_inv = np.unique(k_names, return_inverse=True)
    k_inv = k_inv.reshape(-1)
    return k_uniq, lambda caps: k_inv[table.launches["kernel"][caps]]


def kernel_name_ids(trace: TraceData, caps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the kernel names of the captures `caps`, sorted and unique; each capture's index into
    them), as np.unique of the captures' names gives them."""
    uniq, ids_of = _name_ids_of(trace)
    ids = ids_of(caps)
    present = np.unique(ids)
    return uniq[present], np.searchsorted(present, ids)


def _sm_counts(trace: TraceData, caps: np.ndarray, sm_count: int | None) -> np.ndarray:
    """The GPU's SM count of each launch (0 where unknown): `sm_count`, else its metadata's."""
    if sm_count:
        return np.full(len(caps), int(sm_count), np.int64)
    return trace.table.sm_counts(caps)


@dataclass
class ReportParts:
    """What the report is written from: each launch's capture, start and span (for the steps
    and ranks), the kernels summed, the launches of the longest tails, the programs."""

    launches: dict[str, np.ndarray]
    kernels: list[KernelReport]
    worst: dict[str, np.ndarray]
    programs: int


_WORST = 3  # launches of the longest tails the report names
_KEPT = ("capture", "start_ns", "span_ns", "peak")


def report_parts(trace: TraceData, chunks=None) -> ReportParts:
    """ReportParts of `trace`, from launch_table a chunk of launches at a time: what the
    report keeps of each launch is three columns, not the table's eleven. chunks: the launch
    table's chunks where they were found already (a job's ranks, from their summaries: then the
    trace's programs are not read)."""
    sums = KernelSums(trace)
    kept = {k: [] for k in _KEPT}
    worst: dict[str, np.ndarray] | None = None
    programs, base = 0, 0
    for t in launch_chunks(trace) if chunks is None else chunks:
        sums.add(t)
        programs += int(t["programs"].sum())
        for k in _KEPT:
            kept[k].append(t[k])
        # The longest tails (first of equals: the earliest launch), merged chunk by chunk.
        top = np.argsort(-t["tail_ns"], kind="stable")[:_WORST]
        cand = {k: v[top] for k, v in t.items()}
        cand["row"] = top + base
        base += len(t["capture"])
        if worst is not None:
            cand = {k: np.concatenate([worst[k], cand[k]]) for k in cand}
        pick = np.lexsort((cand["row"], -cand["tail_ns"]))[:_WORST]
        worst = {k: v[pick] for k, v in cand.items()}
    launches = {k: np.concatenate(v) if len(v) > 1 else v[0] for k, v in kept.items()}
    return ReportParts(launches, sums.reports(), worst, programs)


# -- the run's report: its sections, each computed once and drawn at any width ---------------


@dataclass
class ReportInputs:
    """What every section of the run's report is computed from, once: the trace (its launches
    through `trace.table`, whatever recorded them), the launch table's parts, CUPTI's share of
    the steps (coverage.report_share) and torch.profiler's trace of them (advise's `cupti`),
    and how many kernels the kernel table shows; advise's launch measures where they were
    found already (a job's ranks, from their summaries)."""

    trace: TraceData
    parts: ReportParts
    cupti: dict | None = None
    torch_trace: object = None
    top: int = 20
    measures: object = None


@dataclass(frozen=True)
class Section:
    """A section of the run's report: `numbers(inputs)` computes what it says, once per report
    (None: the section is left out); `lines(numbers, width)` draws it at `width` columns (its
    lines, the blank line that opens it included)."""

    name: str
    numbers: Callable[[ReportInputs], object]
    lines: Callable[[object, int], list[str]]


@dataclass
class RunReport:
    """The run's report of a trace: each section's numbers, computed once (`run_report`);
    `text(width)` draws them at a width, as often as asked (a terminal's and a file's)."""

    sections: list[tuple[Section, object]]

    def text(self, width: int | None = None) -> str:
        if width is None:
            width = shutil.get_terminal_size((100, 24)).columns
        width = max(width, 40)
        lines: list[str] = []
        for section, numbers in self.sections:
            lines += section.lines(numbers, width)
        return "\n".join(lines) + "\n"


def run_report(
    trace: TraceData,
    top: int = 20,
    parts: ReportParts | None = None,
    cupti: dict | None = None,
    torch_trace=None,
    measures=None,
) -> RunReport:
    """The run's report of `trace`: every section of SECTIONS computed once, in order (format_
    report's arguments say what each input is)."""
    parts = report_parts(trace) if parts is None else parts
    inputs = ReportInputs(trace, parts, cupti, torch_trace, top, measures)
    computed = ((s, s.numbers(inputs)) for s in SECTIONS)
    return RunReport([(s, n) for s, n in computed if n is not None])


def format_report(trace: TraceData, width: int | None = None, top: int = 20, **inputs) -> str:
    """The auto-mode report of `trace` at `width` columns (default: the terminal's); `parts`:
    report_parts(trace) when it was found already; `cupti`: the share seen from torch.profiler's
    CUPTI rows (coverage.report_share), which then replaces the records' own estimate and names
    the largest kernels not seen inside; `torch_trace`: torch.profiler's trace of the steps (or
    {rank: trace}), whose kernel rows "What to fix first" takes its host gaps over (advise's
    `cupti`); `measures`: advise's launch measures where they were found already (`inputs`:
    these by keyword, run_report's). One report at several widths: run_report once, then its
    text at each."""
    return run_report(trace, top, **inputs).text(width)


def print_report(
    trace: TraceData,
    file=None,
    width: int | None = None,
    cupti: dict | None = None,
    torch_trace=None,
) -> None:
    (sys.stdout if file is None else file).write(
        format_report(trace, width=width, cupti=cupti, torch_trace=torch_trace)
    )


def dump_report(table, width: int = 100) -> str:
    """A flight-recorder dump's report (its _stats.txt): the run's report of its table, which
    opens with what the dump says (report/dump.py); a dump without a launch says so instead."""
    if not table.num_launches:
        opening = "\n".join(dump_lines(table, width))
        return opening + "\n\nNo launch of the kept steps is in the ring.\n"
    return format_report(table.decode(), width=width)


# The flight recorder's opening: why the dump was written, what each GPU was doing.


def _opening_lines(opening: DumpOpening, width: int) -> list[str]:
    return [*opening_lines(opening, width), ""]


# The head: launches, kernels, programs, where; dropped records; via_triton.


@dataclass(frozen=True)
class Head:
    launches: int
    kernels: int
    programs: int
    where: str
    counts: dict[str, int]
    ring: bool
    via_triton: bool


def _head(inputs: ReportInputs) -> Head:
    sessions = _sessions(inputs.trace)
    counts = {
        k: sum(session_count(s.get(k)) for s in sessions)
        for k in ("claimed", "kept", "dropped", "capacity")
    }
    return Head(
        len(inputs.parts.launches["capture"]),
        len(inputs.parts.kernels),
        inputs.parts.programs,
        _where(sessions),
        counts,
        any(s.get("ring") is True for s in sessions),
        bool(inputs.trace.table.metadata.get("via_triton")),
    )


def _head_lines(h: Head, width: int) -> list[str]:
    lines = wrap(
        f"sm_profiler auto: {plural(h.launches, 'launch', 'launches')} of "
        f"{plural(h.kernels, 'kernel')}, {h.programs:,} programs on {h.where}",
        width,
    )
    c = h.counts
    if c["dropped"]:
        kept = "newest" if h.ring else "first"
        lines += wrap(
            f"warning: {c['dropped']:,} of {c['claimed']:,} program records "
            f"dropped (kept the {kept} {c['kept'] or c['claimed'] - c['dropped']:,} "
            f"of capacity {c['capacity']:,}): raise capacity=",
            width,
        )
    if h.via_triton:
        lines += wrap(
            "via_triton: matmuls and attention ran as Triton kernels (Inductor's templates, "
            "FlexAttention) in place of cuBLAS/cuDNN; their times are the Triton kernels', not "
            "the production ones'",
            width,
        )
    return lines


# The kernel table: per kernel, its launches summed, largest first.


def _kernels(inputs: ReportInputs) -> tuple[list[KernelReport], int]:
    return inputs.parts.kernels, inputs.top


def _kernel_lines(numbers: tuple[list[KernelReport], int], width: int) -> list[str]:
    kernels, top = numbers
    total = sum(k.total_ns for k in kernels) or 1
    rows = [
        [
            printable(k.kernel),  # a file's names reach the terminal escaped
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
    rows = [[middle(r[0], room)] + r[1:] for r in rows]
    table, dropped = fit_table(headers, rows, width, drop=(8, 3, 1, 7, 4))
    if any(len(line) > width for line in table):  # very narrow: names shorter still
        table, dropped = fit_table(headers, rows, width, drop=(8, 3, 1, 7, 4), shrink=0)
    lines = ["", *table]
    if len(kernels) > top:
        lines.append(f"... {len(kernels) - top} more kernels")
    if dropped:
        lines += wrap(f"({', '.join(dropped)} left out to fit {width} columns)", width)
    lines += [""]
    lines += wrap(
        "time: launches' spans summed (first program start to last end), % of the "
        "instrumented kernels' time; programs, waves, idle%, tail, imbal: per launch, the "
        "mean over the kernel's launches; waves: "
        "programs / (SMs x peak programs per SM); idle%: SM-time with no program "
        "resident; tail: last SM's end after the median SM's; imbal: busiest SM / "
        "mean SM busy time",
        width,
    )
    return lines


# The longest tails.


def _tails(inputs: ReportInputs) -> tuple[dict, list[str]] | None:
    worst = inputs.parts.worst
    if not len(worst["capture"]):
        return None
    names = [printable(inputs.trace.capture_name(int(c))) for c in worst["capture"]]
    return worst, names


def _tail_lines(numbers: tuple[dict, list[str]], width: int) -> list[str]:
    t, names = numbers
    lines = ["", *wrap("longest tails:", width)]
    for i, name in enumerate(names):
        lines += wrap(
            f"  {name}: SM {int(t['last_sm'][i])} ends {format_time(int(t['tail_ns'][i]))} "
            f"after the median SM (span {format_time(int(t['span_ns'][i]))}, "
            f"{float(t['waves'][i]):.1f} waves, idle {float(t['idle_pct'][i]):.0f}%)",
            width,
        )
    return lines


# What to fix first (report/advise.py), from the launch table's peaks.


def _fix_first(inputs: ReportInputs):
    """The advice of an auto trace whose table recorded steps, its host gaps over every kernel
    where the torch trace holds CUPTI's rows; None otherwise. A torch trace that cannot be read
    is said, and left out. Each launch's peak residency is the launch table's (found once)."""
    table = inputs.trace.table
    if not table.num_launches or not (table.launches["step"] >= 0).any():
        return None  # only auto mode's AutoTable records steps
    t = inputs.parts.launches
    peaks = np.zeros(table.num_launches, np.int64)
    peaks[t["capture"]] = t["peak"]
    measures = inputs.measures
    try:
        advice = advise(table, cupti=inputs.torch_trace, peaks=peaks, measures=measures)
    except SmProfilerError as e:
        advice = advise(table, peaks=peaks, measures=measures)
        advice.notes.insert(0, f"the torch trace was left out: {e}")
    return advice


def launch_ranks(trace: TraceData, caps: np.ndarray) -> np.ndarray | None:
    """The rank of each launch in `caps` (its session's), or None for one rank."""
    table = trace.table
    ranks = table.ranks()[table.launches["session"][caps]]
    return ranks if len(np.unique(ranks)) > 1 else None


def step_shares(trace: TraceData, t: dict | None = None) -> dict | None:
    """Per recorded step, from the records alone: {"steps", "span_ns" (first launch's start to
    last launch's end, on the GPU where that is longest), "share"} where share is the
    instrumented kernels' share of the step: on each GPU their launches' union over the step's
    period (its first launch to the next recorded step's first, when that follows at once),
    summed over the GPUs. None without steps. t: launch_table(trace), if made."""
    table = trace.table
    if not (table.launches["step"] >= 0).any():
        return None
    t = launch_table(trace) if t is None else t
    if not len(t["capture"]):
        return None
    step = table.launches["step"][t["capture"]]
    keep = step >= 0
    whole = bool(keep.all())  # then no copies of the launch columns (host memory, issue 30)
    start = t["start_ns"] if whole else t["start_ns"][keep]
    end = start + (t["span_ns"] if whole else t["span_ns"][keep])
    # A GPU is a (rank, GPU) pair: tables of one GPU joined by concat are one GPU.
    gpu_of = table.gpu_ids()
    session = gpu_of[table.launches["session"][t["capture"]]]
    if not whole:
        step, session = step[keep], session[keep]
    steps = np.unique(step).astype(np.int64)  # the table holds steps narrow
    if not len(steps):
        return {"steps": steps, "span_ns": np.zeros(0, np.int64), "share": np.zeros(0)}
    # Each GPU's (session's) step on its own clock and period, then summed over the GPUs: ranks
    # that lag each other, or launches in any order, give a step the share each GPU saw. Only
    # the (step, GPU) cells that ran are held: never a grid of every step by every GPU.
    cell, of_step, of_gpu = pair_cells(np.searchsorted(steps, step), session)
    del step, session
    n = len(of_step)
    lo, hi = cell_bounds(cell, start, end, n)
    busy = union_length(cell, start, end, n)
    del cell, start, end
    span = hi - lo
    period = cell_periods(steps[of_step], of_gpu, lo, span)
    # summed over GPUs in float64: several GPUs' years pass int64
    n_steps = len(steps)
    busy_of_step = np.bincount(of_step, weights=busy.astype(np.float64), minlength=n_steps)
    period_of_step = np.bincount(of_step, weights=period.astype(np.float64), minlength=n_steps)
    span_of_step = np.zeros(n_steps, np.int64)
    np.maximum.at(span_of_step, of_step, span)
    share = busy_of_step / np.maximum(period_of_step, 1)
    return {"steps": steps, "span_ns": span_of_step, "share": share}


# The steps recorded: their GPU time, the share seen, the slowest side by side.


@dataclass(frozen=True)
class StepFigures:
    """What the steps section says: each recorded step (`steps`) with its GPU time, the share
    of it seen (CUPTI's where it holds the step; `records_share` the records' own), which
    compiled, the recording's schedule, and the slowest steps side by side (`slowest`: (step
    index, the kernel most above its median step or None, by how much in ns); None with fewer
    than two steady steps). `steps` None: no steps to show, only CUPTI's share (`cupti`)."""

    steps: np.ndarray | None
    span_ns: np.ndarray | None = None
    share: np.ndarray | None = None
    records_share: np.ndarray | None = None
    compiled: np.ndarray | None = None
    schedule: object = None
    cupti: dict | None = None
    slowest: list[tuple[int, str | None, int]] | None = None


def _steps(inputs: ReportInputs) -> StepFigures | None:
    """The steps recorded (prof.step(), or the optimizer's under `sm-profiler run`): which, and
    how long each took on the GPU (its first launch's start to its last launch's end). Steps
    that compiled (AutoTable.compile_steps: a first step of seconds where a steady one takes
    milliseconds) are named and left out of the median, the longest step and the slowest
    steps. Without two steps (or a schedule), CUPTI's share alone where there is one."""
    trace, t, cupti = inputs.trace, inputs.parts.launches, inputs.cupti
    table = trace.table
    got = step_shares(trace, t)
    if got is None or (len(got["steps"]) < 2 and not table.metadata.get("schedule")):
        return None if cupti is None else StepFigures(None, cupti=cupti)
    steps, span, share = got["steps"], got["span_ns"], got["share"]
    records_share = share
    if cupti is not None and cupti.get("per_step"):  # CUPTI's share of each step it holds
        exact = cupti["per_step"]
        share = np.array([exact.get(int(k), float(v)) for k, v in zip(steps, share, strict=True)])
    compiled = np.isin(steps, table.compile_steps())
    slowest = _slowest_steps(table, t, steps, span, ~compiled) if len(steps) else None
    schedule = table.metadata.get("schedule")
    return StepFigures(steps, span, share, records_share, compiled, schedule, cupti, slowest)


def _step_lines(f: StepFigures, width: int) -> list[str]:
    if f.steps is None:
        return ["", *cupti_lines(f.cupti, None, width)]
    steps, span, share = f.steps, f.span_ns, f.share
    which = number_runs(steps.tolist())
    sched = f.schedule
    head = f"steps: {len(steps)} recorded ({which})" + (
        f" by {printable(str(sched))}" if sched else ""
    )
    if not len(steps):
        return ["", *wrap(head, width)]
    compiled = f.compiled
    steady = ~compiled
    j = int(np.flatnonzero(steady)[np.argmax(span[steady])])
    median = np.median(span[steady])
    lines = [
        "",
        *wrap(
            f"{head}; GPU time per step (first launch to last end): median "
            f"{format_time(int(median))}, longest step {int(steps[j])} "
            f"({format_time(int(span[j]))})",  # parenthesised: 'step 10 990 ns' read as one number
            width,
        ),
    ]
    if compiled.any():
        which = ", ".join(
            f"{int(k)} ({format_time(int(v))})"
            for k, v in zip(steps[compiled], span[compiled], strict=True)
        )
        lines += wrap(
            f"compiling: step{'s' if compiled.sum() > 1 else ''} {which} ran kernels for the "
            f"first time, more than {COMPILE_STEP_FACTOR:g}x the median step; left out of the "
            "median, the longest step, the share seen and the slowest steps",
            width,
        )
    if f.cupti is not None:
        lines += cupti_lines(f.cupti, float(np.median(f.records_share[steady])), width)
    else:
        lines += wrap(
            f"seen: instrumented kernels ran {100 * float(np.median(share[steady])):.0f}% of a step "
            "(median; their launches' union over the step's period); the rest ran kernels "
            "auto mode cannot see inside (cuBLAS, cuDNN, NCCL, ...) or left the GPU idle "
            '(docs/auto.md, "What auto mode sees"; --via-triton routes torch.compile\'d '
            "matmuls and attention through Triton)",
            width,
        )
    return lines + _side_by_side_lines(f, width)


UNSEEN_SHOWN = 5  # the largest kernels not seen inside, of a CUPTI share


def cupti_lines(cupti: dict, records: float | None, width: int) -> list[str]:
    """The share seen from CUPTI's kernel rows (coverage.report_share) and the largest kernels
    auto mode did not see inside; `records`: the records' own estimate, said beside it."""
    n, gpus = int(cupti["steps"]), int(cupti.get("gpus", 1))
    over = f"median of {plural(n, 'step')}" + (f" over {gpus} GPUs" if gpus > 1 else "")
    also = f"; by the records alone {100 * records:.0f}%" if records is not None else ""
    lines = wrap(
        f"seen, from CUPTI (torch.profiler, {over}): instrumented kernels ran "
        f"{100 * float(cupti['share']):.1f}% of a step ({100 * float(cupti['share_of_busy']):.1f}% "
        f"of the GPU's busy time; idle {100 * float(cupti['idle_share']):.1f}%{also})",
        width,
    )
    unseen = cupti.get("unseen") or []
    if unseen:
        lines.append("not seen inside (share of a step, launches, kernel):")
    for u in unseen[:UNSEEN_SHOWN]:
        head = f"  {100 * float(u['share']):5.1f}%  {int(u['launches']):>7,}x  "
        lines.append(head + middle(printable(str(u["name"])), max(width - len(head), 8)))
    return lines


STEPS_SHOWN = 6  # the slowest steps the report sets side by side
MAX_STEP_KERNEL_CELLS = 10_000_000  # steps x kernels summed for "which kernel made it slow"


def _slowest_steps(table, t: dict, steps, span, steady) -> list[tuple[int, str | None, int]] | None:
    """The slowest steady steps (`steady`: a mask of `steps`; in step order) with the kernel
    whose time in that step stands furthest above its median steady step's, and by how much
    (None and 0 where none stands above); None with fewer than two steady steps."""
    if steady.sum() < 2:
        return None
    step = table.launches["step"][t["capture"]]
    keep = step >= 0
    kernel = table.launches["kernel"][t["capture"]][keep].astype(np.int64)
    n_k = int(kernel.max()) + 1 if len(kernel) else 0
    above = None
    if 0 < len(steps) * n_k <= MAX_STEP_KERNEL_CELLS:
        i = np.searchsorted(steps, step[keep])
        per = np.bincount(
            i * n_k + kernel, weights=t["span_ns"][keep], minlength=len(steps) * n_k
        ).reshape(len(steps), n_k)
        above = per - np.median(per[steady], axis=0)
    names = table.kernel_names()
    candidates = np.flatnonzero(steady)
    shown = np.sort(candidates[np.argsort(-span[candidates], kind="stable")[:STEPS_SHOWN]])
    out = []
    for j in shown.tolist():
        k = int(np.argmax(above[j])) if above is not None else 0
        if above is not None and above[j, k] > 0:
            out.append((j, names[k] if k < len(names) else f"kernel {k}", int(above[j, k])))
        else:
            out.append((j, None, 0))
    return out


def _side_by_side_lines(f: StepFigures, width: int) -> list[str]:
    """The slowest steps side by side: GPU time, the share seen, and the kernel most above its
    median step."""
    if f.slowest is None:
        return []
    out = ["", f"{'step':>8}  {'GPU time':>10}  {'seen':>5}  kernel most above its median step"]
    for j, name, above_ns in f.slowest:
        head = (
            f"{int(f.steps[j]):>8}  {format_time(int(f.span_ns[j])):>10}  "
            f"{100 * f.share[j]:>4.0f}%  "
        )
        tail = "-"
        if name is not None:
            delta = f" +{format_time(above_ns)}"
            tail = middle(printable(name), max(8, width - len(head) - len(delta))) + delta
        out.append(head + tail)
    return out


# The ranks of a job side by side: the straggler, and the kernels that make its difference.

RANK_KERNELS = 8  # the largest kernels whose time on each rank the table shows


@dataclass(frozen=True)
class RankFigures:
    """What the per-rank section says: the ranks, each one's time (per step over the steps
    every rank kept, `shared`; else its launches' spans summed), the slowest, the median, the
    kernels that make its difference (`why`, in words) and the largest kernels as (name, time
    on each rank, the slowest rank's index, the median over the ranks)."""

    ranks: np.ndarray
    total_ns: np.ndarray
    slow: int
    median_ns: float
    shared: int
    why: str
    kernels: list[tuple[str, np.ndarray, int, float]]


def _ranks(inputs: ReportInputs) -> RankFigures | None:
    """The per-rank view of a job (None for one rank)."""
    trace, t = inputs.trace, inputs.parts.launches
    ranks = launch_ranks(trace, t["capture"])
    if ranks is None:
        return None
    uniq_r = np.unique(ranks)
    uniq_k, kinv = kernel_name_ids(trace, t["capture"])
    keep, shared = _shared_steps(trace, t, ranks, len(uniq_r))
    # Per (kernel, rank) that ran: the launches' spans summed; only the cells that ran are held,
    # never a grid of every kernel by every rank (issue 52).
    rinv = np.searchsorted(uniq_r, ranks)
    cell, of_k, of_r = pair_cells(kinv.reshape(-1)[keep], rinv[keep])
    per = np.zeros(len(of_k))
    np.add.at(per, cell, t["span_ns"][keep].astype(np.float64))
    del cell
    if shared:
        per /= shared  # time per step, over the steps every rank kept
    rank_total = np.bincount(of_r, weights=per, minlength=len(uniq_r))
    slow = int(np.argmax(rank_total))
    at_slow = np.zeros(len(uniq_k))
    at_slow[of_k[of_r == slow]] = per[of_r == slow]
    diff = at_slow - median_with_zeros(of_k, per, len(uniq_k), len(uniq_r))
    worst = [i for i in np.argsort(-diff).tolist() if diff[i] > 0][:3]
    why = (
        ", ".join(f"{printable(str(uniq_k[i]))} +{format_time(int(diff[i]))}" for i in worst)
        or "no kernel stands out"
    )
    kernels = []
    for i in np.argsort(-np.bincount(of_k, weights=per, minlength=len(uniq_k)))[:RANK_KERNELS]:
        row = np.zeros(len(uniq_r))
        row[of_r[of_k == i]] = per[of_k == i]
        kernels.append((str(uniq_k[i]), row, int(np.argmax(row)), float(np.median(row))))
    median = float(np.median(rank_total))
    return RankFigures(uniq_r, rank_total, slow, median, shared, why, kernels)


def _rank_lines(f: RankFigures, width: int) -> list[str]:
    what = (
        f"launches' spans summed per step, over the {plural(f.shared, 'step')} every rank kept"
        if f.shared
        else "launches' spans summed"
    )
    lines = ["", *wrap(f"per rank ({len(f.ranks)} ranks; time: {what}):", width)]
    lines += wrap(
        "  "
        + ", ".join(
            f"rank {int(r)} {format_time(int(v))}" for r, v in zip(f.ranks, f.total_ns, strict=True)
        ),
        width,
    )
    slow_ns = f.total_ns[f.slow]
    lines += wrap(
        f"  slowest: rank {int(f.ranks[f.slow])}, {format_time(int(slow_ns))} "
        f"({100 * (slow_ns / max(f.median_ns, 1) - 1):+.1f} % over the median rank); "
        f"most of the difference: {f.why}",
        width,
    )
    # A rank column is at least "rank N" and its gap wide: those past width // 8 never fit.
    shown_r = f.ranks[: max(width // 8, 1)]
    headers = ["kernel", *[f"rank {int(r)}" for r in shown_r], "slowest"]
    rows = [
        [
            middle(printable(name), 32),
            *[format_time(int(v)) for v in row[: len(shown_r)]],
            f"rank {int(f.ranks[j])} ({100 * (row[j] / max(lo, 1) - 1):+.0f}%)",
        ]
        for name, row, j, lo in f.kernels
    ]
    table, _ = fit_table(headers, rows, width, drop=tuple(range(len(headers) - 2, 0, -1)))
    return lines + ["", *table]


# The run's report, in order; register_section adds to it.
SECTIONS: list[Section] = [
    Section("flight recorder", lambda inputs: dump_opening(inputs.trace.table), _opening_lines),
    Section("head", _head, _head_lines),
    Section("kernels", _kernels, _kernel_lines),
    Section("steps", _steps, _step_lines),
    Section("ranks", _ranks, _rank_lines),
    Section("longest tails", _tails, _tail_lines),
    Section("what to fix first", _fix_first, advise_lines),
]


def register_section(section: Section) -> None:
    """Add `section` to the run's report, after those before it (docs/architecture.md, "Adding
    a report"): `sm-profiler stats` of an auto file, `run`'s report and a dump's show it."""
    if any(s.name == section.name for s in SECTIONS):
        raise ConfigError(
            f"a report section named {section.name!r} is there already: pick another name"
        )
    SECTIONS.append(section)


def median_with_zeros(group: np.ndarray, values: np.ndarray, n_groups: int, n: int) -> np.ndarray:
    """Per group 0..n_groups-1, the median of its `values` (none negative) and zeros up to `n`
    values in all: the median over every rank of a kernel whose cells hold only the ranks that
    ran it."""
    o = np.lexsort((values, group))
    g, v = group[o], values[o]
    count = np.bincount(g, minlength=n_groups)
    first = np.cumsum(count) - count

    def at(pos: int) -> np.ndarray:
        # The pos-th of each group's n values sorted: its n - count zeros come first.
        k = pos - (n - count)
        ok = k >= 0
        out = np.zeros(n_groups, v.dtype if len(v) else np.float64)
        out[ok] = v[first[ok] + k[ok]]
        return out

    return (at((n - 1) // 2) + at(n // 2)) / 2


def _shared_steps(trace: TraceData, t: dict, ranks: np.ndarray, n_ranks: int):
    """(which launches to compare the ranks over, how many steps that is): with recorded steps,
    the launches of the steps that every rank kept (ranks that kept different steps, with a
    ring or dropped records, are compared over the same work); else every launch and 0."""
    step = trace.table.launches["step"][t["capture"]]
    if not (step >= 0).any():
        return slice(None), 0
    pairs = np.unique(np.stack([step, ranks])[:, step >= 0], axis=1)
    steps, kept_by = np.unique(pairs[0], return_counts=True)
    common = steps[kept_by == n_ranks]
    if not len(common):
        return slice(None), 0
    return np.isin(step, common), len(common)


def _sessions(trace: TraceData) -> list[dict]:
    """The GPU buffers behind a trace (LaunchTable.sessions). Entries are dicts; values may be
    anything."""
    return [s if isinstance(s, dict) else {} for s in trace.table.sessions]


def _where(sessions: list[dict]) -> str:
    """'NVIDIA H100 (132 SMs)', or '2 GPUs of 2 ranks: ...': names printable, counts checked."""
    names = []
    for s in sessions:
        name = s.get("device_name")
        name = printable(name) if isinstance(name, str) and name else "a GPU"
        sms = metadata_count(s.get("sm_count"))
        names.append(f"{name} ({sms} SMs)" if sms else f"{name} (? SMs)")
    uniq = list(dict.fromkeys(names)) or ["a GPU (? SMs)"]
    if len(sessions) <= 1:
        return uniq[0]
    ranks = {s.get("rank") for s in sessions if isinstance(s.get("rank"), int)}
    of = f" of {len(ranks)} ranks" if len(ranks) > 1 else ""
    return f"{len(sessions)} GPUs{of}: " + ", ".join(uniq)


def is_auto(trace: TraceData) -> bool:
    """Whether the report of `trace` is this one (auto mode's recording), not the statistics'."""
    return trace.table.auto
