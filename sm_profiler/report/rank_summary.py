"""A rank's summary (issue 57, item 1): what the job's report (`stats DIR`) and advisor
(`advise DIR`) read of one rank, so that a job of thousands of ranks is answered from kilobytes a
rank instead of every rank's programs held at once.

What a rank's programs say, they say per launch: the report's launch table (auto_report.
launch_table: programs, SMs used, waves, idle %, tail, imbalance) and the advisor's launch
measures (advise.launch_measures: slots, the last wave, the three launch estimates, ...), and
the long programs of the launches a tail finding may name. Everything the job's answer computes
beyond these reads launches alone (their GPU, kernel, step, start and end): the steps, the
ranks side by side, the host gaps, the slowest rank. A summary holds those per launch, on the
host's clock (each session's clock sample applied, as merged_table moves them); join_ranks
joins the ranks' summaries into the AutoTable of the job's launches, in the order
AutoTable.concat gives them, with their measures, from which the report and the advisor say
what they say of every rank's records loaded and joined, number for number. For a reader it
also holds the rank's own steps, kernels and findings.

Layer: report. Its file: wire/summary_file.py; a job's folder of them: export/job_summaries.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..errors import CaptureError, SmProfilerError
from ..trace.auto_table import AutoTable, launch_order
from ..wire.auto_file import LAUNCH_DTYPES, check_times, jsonable, time_bounds
from ..wire.capture import shortened
from ..wire.torch_trace import check_torch_doc
from .advise import (
    PROGRAM_COLUMNS,
    LaunchMeasures,
    ProgramColumns,
    advise,
    launch_measures,
    long_program_columns,
    tail_candidates,
)
from .auto_report import launch_table, report_parts, step_shares
from .coverage import kernel_rows_doc

# A launch's columns in a summary (its first row follows from the rows before it).
LAUNCH_COLUMNS = tuple(k for k in LAUNCH_DTYPES if k != "first_row")
# The report's launch table per launch (its start and span follow from the launch's).
REPORT_COLUMNS = {
    "programs": np.int64,
    "sms_used": np.int64,
    "waves": np.float64,
    "per_sm": np.float64,
    "idle_pct": np.float64,
    "last_sm": np.int64,
    "tail_ns": np.int64,
    "imbalance": np.float64,
    "peak": np.int64,
}
# advise's launch measures per launch (its start, end and span follow from the launch's).
ADVICE_COLUMNS = {
    "programs": np.int64,
    "sms": np.int64,
    "sm_count_known": np.bool_,
    "sms_used": np.int64,
    "resident_per_sm": np.int64,
    "slots": np.int64,
    "waves": np.float64,
    "full": np.int64,
    "last_n": np.int64,
    "last_wave_fill": np.float64,
    "last_wave_ns": np.float64,
    "full_wave_program_ns": np.float64,
    "ideal_ns": np.float64,
    "tail_ns": np.float64,
    "last_sm": np.int64,
    "median_end": np.float64,
    "program_median_ns": np.float64,
    "partial_wave": np.float64,
    "tail": np.float64,
    "idle_sms": np.float64,
}
FINDINGS_KEPT = 10  # the rank's own findings a summary lists, for a reader


def summarize(table: AutoTable, torch_doc: dict | None = None, reader: bool = True) -> dict:
    """The summary of one rank's AutoTable (its torch trace, `run --torch`'s, for its own
    findings): a JSON-able dict (docs/format.md, "Rank summaries"); wire/summary_file.py writes
    it beside the rank file. reader=False leaves out what only a reader reads (the rank's own
    steps, kernels and findings: a job read from records needs its launches alone)."""
    table = table.on_host_clock()
    trace = table.decode()
    t = launch_table(trace)
    L, n = table.launches, table.num_launches
    if n:
        measures = launch_measures(table, peaks=t["peak"])  # each launch's, as the report found
        picks = tail_candidates(table, measures.columns).tolist()
    else:
        measures = LaunchMeasures({k: np.zeros(0, v) for k, v in ADVICE_COLUMNS.items()}, {})
        picks = []
    step = np.asarray(L["step"], np.int64)
    return {
        "rank": _rank(table),
        "steps": [int(s) for s in np.unique(step[step >= 0])],
        "metadata": jsonable(table.metadata),
        "kernels": jsonable(table.kernels),
        "sessions": jsonable(table.sessions),
        "launches": {k: np.asarray(L[k]).tolist() for k in LAUNCH_COLUMNS},
        "report": {k: np.asarray(t[k]).tolist() for k in REPORT_COLUMNS},
        "advice": {k: np.asarray(measures.columns[k]).tolist() for k in ADVICE_COLUMNS},
        "long_programs": _long_programs(table, measures, picks),
        # What the report and the advisor read of its torch trace (`run --torch`): its kernel rows.
        "torch_trace": None if torch_doc is None else kernel_rows_doc(torch_doc),
        **(_for_a_reader(table, trace, t, measures, torch_doc) if reader else {}),
    }


def _long_programs(table, measures, picks: list[int]) -> dict:
    """The long programs of the launches a tail finding may name (advise.tail_candidates), as
    columns: "launches" (those launches), then per program its launch, id, SM and duration."""
    cols = long_program_columns(table, measures.columns, picks) if picks else {}
    empty = {c: [] for c in ("launch", *PROGRAM_COLUMNS)}
    return {"launches": picks, **empty, **{c: v.tolist() for c, v in cols.items()}}


def _rank(table: AutoTable) -> int | None:
    ranks = {s.get("rank") for s in table.sessions if type(s.get("rank")) is int}
    return ranks.pop() if len(ranks) == 1 else None


def _for_a_reader(table, trace, t, measures, torch_doc) -> dict:
    """The rank's own steps (GPU time and share seen per step), kernels (the report's table)
    and findings (advise's first FINDINGS_KEPT), as its report says them."""
    got = step_shares(trace, t) if table.num_launches else None
    steps = (
        {
            "step": got["steps"].tolist(),
            "span_ns": got["span_ns"].tolist(),
            "share": got["share"].tolist(),
            "compiled": table.compile_steps().tolist(),
        }
        if got is not None
        else None
    )
    kernels = [vars(k) for k in report_parts(trace, chunks=[t]).kernels]
    try:
        own = advise(table, cupti=torch_doc, measures=measures)
    except SmProfilerError:  # a torch trace whose rows cannot be read: without it
        own = advise(table, measures=measures)
    return {"per_step": steps, "per_kernel": kernels, "findings": own.to_dict(FINDINGS_KEPT)}


# -- reading summaries back, and a job of them -------------------------------------------------


@dataclass
class RankPart:
    """One rank's summary, read: its launches' columns (on the host's clock), its kernels,
    sessions and metadata, the report's and the advisor's columns per launch, the long programs
    of the launches a tail finding may name, and its torch trace's kernel rows
    (coverage.kernel_rows_doc), or None; torch_error: why its rank file's torch trace could not
    be read (then None); notes: what was left out of it (one too large to read). JobBuilder.add
    takes its columns (launches, report, advice, long programs), leaving the rest."""

    name: str
    launches: dict[str, np.ndarray]
    kernels: list[dict]
    sessions: list[dict]
    metadata: dict
    report: dict[str, np.ndarray]
    advice: dict[str, np.ndarray]
    long_launches: np.ndarray
    long_programs: dict[str, np.ndarray]
    torch_doc: dict | None
    torch_error: str | None = None
    notes: list[str] = field(default_factory=list)
    num_launches: int = 0


def rank_part(doc: dict, name: str, fix: str) -> RankPart:
    """The RankPart of a summary `doc` read from `name`; a CaptureError naming what is damaged
    and `fix` (how to rebuild it) for one that is not as summarize writes them."""
    try:
        return _rank_part(doc, name)
    except (KeyError, TypeError, ValueError, IndexError, OverflowError, AttributeError) as e:
        what = f"{type(e).__name__}: {shortened(str(e), 80)}"
        raise CaptureError(f"{name} is damaged ({what}); {fix}") from e
    except CaptureError as e:
        raise CaptureError(f"{name} is damaged ({e}); {fix}") from e


def _rank_part(doc: dict, name: str) -> RankPart:
    kernels, sessions = doc["kernels"], doc["sessions"]
    if not all(isinstance(x, dict) for x in [*kernels, *sessions]) or not isinstance(
        doc["metadata"], dict
    ):
        raise CaptureError("its kernels, sessions and metadata are not tables")
    L = {k: _column(doc["launches"], k, LAUNCH_DTYPES[k]) for k in LAUNCH_COLUMNS}
    n = len(L["start_ns"])
    report = {k: _column(doc["report"], k, t, n) for k, t in REPORT_COLUMNS.items()}
    adv = {k: _column(doc["advice"], k, t, n) for k, t in ADVICE_COLUMNS.items()}
    for k in LAUNCH_COLUMNS:
        if len(L[k]) != n:
            raise CaptureError(f"its launch column {k} has {len(L[k])} values, not {n}")
    _in_range(L["kernel"], len(kernels), "kernel")
    _in_range(L["session"], len(sessions), "session")
    if n and ((L["rows"] < 1).any() or (L["end_ns"] < L["start_ns"]).any()):
        raise CaptureError("a launch has no program or ends before it starts")
    check_times(*time_bounds(L["start_ns"], L["end_ns"]), "its launches")
    step = L["step"]
    if [int(s) for s in np.unique(step[step >= 0])] != doc["steps"]:
        raise CaptureError("its steps are not its launches' steps")
    longs = doc["long_programs"]
    picks = _column(longs, "launches", np.int64)
    m = len(longs["launch"])
    cols = {c: _column(longs, c, np.int64, m) for c in ("launch", *PROGRAM_COLUMNS)}
    _in_range(picks, n, "long-program launch")
    if not np.isin(cols["launch"], picks).all():
        raise CaptureError("a long program's launch is not one of its launches")
    torch_doc = doc["torch_trace"]
    if torch_doc is not None:
        torch_doc = check_torch_doc(torch_doc, "its torch trace")
    meta = doc["metadata"]
    return RankPart(
        name, L, kernels, sessions, meta, report, adv, picks, cols, torch_doc, num_launches=n
    )


def _column(cols: dict, key: str, dtype, n: int | None = None) -> np.ndarray:
    """A summary's column `key` as a 1-D array of `dtype` (of n values, where given); a
    CaptureError where its values are not such numbers (integers, for an integer column)."""
    v = cols[key]
    if not isinstance(v, list):
        raise CaptureError(f"its column {key} is not a list of numbers")
    a = np.array(v) if v else np.zeros(0, dtype)  # strings, None, nesting: not numbers
    kinds = "ib" if np.dtype(dtype).kind in "ib" else "ifb"
    if a.ndim != 1 or a.dtype.kind not in kinds:
        raise CaptureError(f"its column {key} is not a list of numbers ({a.dtype} values)")
    if n is not None and len(a) != n:
        raise CaptureError(f"its column {key} has {len(a)} values, not {n}")
    return a.astype(dtype, copy=False)


def _in_range(v: np.ndarray, n: int, what: str) -> None:
    if len(v) and (int(v.min()) < 0 or int(v.max()) >= n):
        raise CaptureError(f"a {what} number lies outside 0..{n - 1}")


@dataclass
class JobLaunches:
    """A job's launches joined from its ranks' summaries: the AutoTable of them (no rows;
    launches in AutoTable.concat's order), advise's LaunchMeasures and the report's launch
    table (auto_report.launch_table) of them."""

    job_table: AutoTable
    measures: LaunchMeasures
    report: dict[str, np.ndarray]


# Ranks whose columns JobBuilder gathers before joining them into one block each: a block of a
# few MiB, so that a job's columns are held once, in few pieces, however many ranks it has.
RANKS_A_BLOCK = 64


class JobBuilder:
    """The JobLaunches of ranks' parts given one at a time, by rank (add), as AutoTable.concat
    joins the ranks' tables (finish): each part's columns taken as it comes, the part's own
    arrays then let go."""

    def __init__(self):
        self.blocks: dict[str, list[np.ndarray]] = {}  # per column: its blocks, in rank order
        self.cols: dict[str, list[np.ndarray]] = {}  # per column: the ranks' since the last block
        self.pending = 0
        self.kernels: list[dict] = []
        self.sessions: list[dict] = []
        self.metadata: dict | None = None
        self.n = 0
        self.long_launches: list[np.ndarray] = []

    def add(self, part: RankPart) -> None:
        L = part.launches
        L["kernel"] = L["kernel"].astype(np.int64) + len(self.kernels)
        L["session"] = L["session"].astype(np.int64) + len(self.sessions)
        part.long_programs["launch"] = part.long_programs["launch"] + self.n
        self.long_launches.append(part.long_launches + self.n)
        for prefix, cols in (
            ("L", L),
            ("la", part.advice),
            ("t", part.report),
            ("lp", part.long_programs),
        ):
            for k, v in cols.items():
                self.cols.setdefault(f"{prefix}.{k}", []).append(v)
            cols.clear()
        self.kernels += part.kernels
        part.kernels = []  # concat keeps one entry per kernel of the job
        self.sessions += part.sessions
        if self.metadata is None:
            self.metadata = part.metadata
        self.n += part.num_launches
        self.pending += 1
        if self.pending >= RANKS_A_BLOCK:
            self._block()

    def _block(self) -> None:
        for k, parts in self.cols.items():
            self.blocks.setdefault(k, []).append(np.concatenate(parts))
        self.cols = {}
        self.pending = 0

    def _take(self, key: str) -> np.ndarray:
        if self.pending:
            self._block()
        return np.concatenate(self.blocks.pop(key))

    def finish(self) -> JobLaunches:
        """The JobLaunches of the parts added."""
        L = {k: self._take(f"L.{k}") for k in LAUNCH_COLUMNS}
        table = AutoTable.of_launches(L, self.kernels, self.sessions, self.metadata or {})
        table = AutoTable.concat([table])  # kernels of one name and level made one; by start
        order = launch_order(L["start_ns"])  # as concat ordered them: position -> launch given
        del L
        new_id = np.empty(len(order), np.int64)
        new_id[order] = np.arange(len(order))
        start = np.asarray(table.launches["start_ns"], np.int64)
        end = np.asarray(table.launches["end_ns"], np.int64)
        la = {k: self._take(f"la.{k}")[order] for k in ADVICE_COLUMNS}
        la.update(start=start, end=end, span_ns=(end - start).astype(np.float64))
        t = {k: self._take(f"t.{k}")[order] for k in REPORT_COLUMNS}
        t = {"capture": np.arange(len(order), dtype=np.int64), "start_ns": start, **t}
        t["span_ns"] = np.maximum(end - start, 1)
        t = {k: t[k] for k in ("capture", "start_ns", "span_ns", *REPORT_COLUMNS)}
        picks = new_id[np.concatenate(self.long_launches)]
        cols = {c: self._take(f"lp.{c}") for c in ("launch", *PROGRAM_COLUMNS)}
        cols["launch"] = new_id[cols["launch"]]
        return JobLaunches(table, LaunchMeasures(la, ProgramColumns(picks, cols, la)), t)
