"""What to fix first: the time per step that an auto-mode recording says could be recovered,
ranked, with where and how (issue 45).

From an AutoTable (one rank, or several joined by AutoTable.concat), over its recorded steps
(the steps that compiled left out; without steps, the whole recording is one step):

  partial_wave  a launch of more than one wave whose last wave leaves slots empty: its span
                (less the tail's part) less the same work spread evenly over every slot,
                slots = SMs x resident programs per SM (the most seen on one SM at once, over
                the kernel's launches on that GPU), the work = a program's time at full residency
                (per SM, its full waves' span over their programs, x R; the median SM) x programs (issue 55: work-conserving, where a compute-bound
                last wave's programs run faster than a full wave's)
  tail          the last SM's end after the median SM's end (SMs that ran a program), less the
                last wave's median program where the launch has a partial last wave (that part
                is the wave's), less the long programs' time beyond the median program split
                over every slot; the programs that ran long are the evidence
  idle_sms      fewer programs than SMs: the median SM's end less the programs' work (the
                median program x programs) spread over every SM
  host_gaps     per step and GPU, the step's period (its first launch's start to the next
                step's, as the report's share seen takes it) less the union of its launches:
                time in which no instrumented kernel ran; with several ranks, less each GPU's
                wait for the busiest GPU of the step. With torch.profiler's CUPTI kernel rows
                (`cupti=`, `run --torch`), less the union of every kernel the GPU ran (ours
                and CUPTI's, ours moved onto CUPTI's clock as merge moves them): the GPU idle
                between kernels
  slow_rank     several ranks: the GPU with the most instrumented-kernel time per step (the
                union of its launches), less the mean of every GPU's (what an even split of
                the same work would recover), over the steps two GPUs or more ran (ranks may
                keep different steps), with the kernels that make the difference

The three launch estimates are disjoint within a launch (their sum is at most its span); where
a GPU's launches of a step overlap in time (streams), its launch estimates of that step are
scaled by union / sum of spans, so that with its gaps they add to at most the step. Each
estimate is the mean per step over the steps the GPU recorded; a finding of a kernel is that
kernel's launches summed, on the GPU where it is largest. The kernels CUPTI saw that auto mode
does not instrument (cuBLAS, cuDNN, NCCL) are named with their time per step (Advice.cupti), as a
note (their time is not recoverable as such), and get partial-wave and idle-SM findings from
their launch shape alone (grid, block, registers, shared memory: report/occupancy.py), marked
`"source": "launch shape"`. docs/auto.md, "What to fix first".

Layer: report (it reads an AutoTable and the report's helpers; nothing above).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import NamedTuple

import numpy as np

from ..text import metadata_count, number_runs, plural, printable, wrap
from ..trace.auto_table import cell_bounds, pair_cells
from ..units import format_time
from ..wire.auto_file import jsonable
from .stats import cell_periods, median_after, peak_per_group, union_length

KINDS = ("partial_wave", "tail", "idle_sms", "host_gaps", "slow_rank")
TITLES = {
    "partial_wave": "partial last wave",
    "tail": "tail",
    "idle_sms": "idle SMs",
    "host_gaps": "host gaps",
    "slow_rank": "slowest rank",
}
SCHEMA_VERSION = 1
LONG_PROGRAMS_SHOWN = 8  # program ids a tail finding names
DOC = 'docs/auto.md, "What to fix first"'


@dataclass
class Finding:
    """One line of "what to fix first". kernel: its name (None for host gaps and the slowest
    rank); rank, gpu: where it is largest; estimate_ns_per_step: the mean time per step it
    could recover; share_of_step: that over the mean step of that GPU; evidence: the numbers
    behind it (SMs, programs, launches, ...); detail: the evidence in words; suggestion: what to
    try."""

    kind: str
    kernel: str | None
    rank: int
    gpu: int
    estimate_ns_per_step: float
    share_of_step: float
    evidence: dict
    detail: str
    suggestion: str

    def to_dict(self) -> dict:
        return jsonable(asdict(self))


@dataclass
class Advice:
    """The findings, largest first, and what they were computed over. basis: 'steps' (the
    recorded steps, `steps`; `left_out`: the steps that compiled) or 'recording' (no steps: the
    whole recording as one step) or 'empty'; step_ns: the mean step time (of the GPU where it is
    longest)."""

    findings: list[Finding]
    basis: str
    steps: list[int] = field(default_factory=list)
    left_out: list[int] = field(default_factory=list)
    step_ns: float = 0.0
    gpus: int = 0
    ranks: int = 0
    notes: list[str] = field(default_factory=list)
    cupti: dict | None = None

    @property
    def gaps_from(self) -> str:
        """'cupti' (every GPU's host gaps over every kernel CUPTI saw), 'mixed' (some GPUs'),
        or 'instrumented' (the instrumented kernels only)."""
        used = [g["used"] for g in (self.cupti or {}).get("gpus", [])]
        return "cupti" if used and all(used) else "mixed" if any(used) else "instrumented"

    def to_dict(self, top: int | None = None) -> dict:
        shown = self.findings if top is None else self.findings[: max(top, 0)]
        return jsonable(
            {
                "schema": "sm_profiler.advise",
                "version": SCHEMA_VERSION,
                "basis": self.basis,
                "steps": self.steps,
                "left_out_steps": self.left_out,
                "step_ns": self.step_ns,
                "gpus": self.gpus,
                "ranks": self.ranks,
                "findings": [dict(f.to_dict(), rank_order=i + 1) for i, f in enumerate(shown)],
                "more": len(self.findings) - len(shown),
                "notes": self.notes,
                "gaps_from": self.gaps_from,
                "cupti": self.cupti,
            }
        )

    def to_json(self, top: int | None = None) -> str:
        return json.dumps(self.to_dict(top), indent=2)


# -- the computation ----------------------------------------------------------------------------


def advise(table, cupti=None, peaks=None, measures: LaunchMeasures | None = None) -> Advice:
    """The ranked findings of an AutoTable (or a list of them: several ranks, joined).

    cupti: torch.profiler's kernel rows of the same steps, for host gaps over every kernel the
    GPU ran: a torch trace (its dict, a stopped torch.profiler.profile, a JSON path; `run
    --torch` stores one in each rank file: export/auto_torch_parts.read) or its
    coverage.kernel_table; for several ranks, {rank: either}. A trace that is not of these
    launches (another rank or GPU, other steps, clocks that do not line up) is left out, said
    in the notes: those GPUs' host gaps count the instrumented kernels only. peaks: each
    launch's peak residency (of one table), where the caller has it (the run's report's launch
    table); found here otherwise. measures: launch_measures(table) where they were found already
    (a job's ranks, each from its summary: then the table's rows are not read)."""
    if isinstance(table, (list, tuple)):
        from ..trace.auto_table import AutoTable

        table = AutoTable.concat([t.on_host_clock() for t in table])
    L = table.launches
    n_launch = table.num_launches
    if n_launch == 0:
        return Advice([], "empty", notes=["no launch was recorded: nothing to rank"])
    inputs, input_notes = ({}, []) if cupti is None else cupti_inputs(cupti, table)
    keys = _launch_keys(table)
    uniq_names, n_gpu, rank_of_gpu, gpu_no = keys.names, keys.n_gpu, keys.rank_of_gpu, keys.gpu_no
    several_ranks = len(np.unique(rank_of_gpu)) > 1
    if measures is None:
        measures = launch_measures(table, keys, peaks)
    la = dict(measures.columns)
    la["gpu"], la["name"] = keys.gpu, keys.name
    # Steps: the recorded ones, less those that compiled; else the whole recording as one.
    step = np.asarray(L["step"], np.int64)
    notes: list[str] = []
    left_out: list[int] = []
    if (step >= 0).any():
        basis = "steps"
        compiled = table.compile_steps()
        keep = (step >= 0) & ~np.isin(step, compiled)
        if not keep.any():
            keep = step >= 0
        else:
            left_out = [int(s) for s in compiled]
        steps = np.unique(step[keep])
        step_idx = np.searchsorted(steps, step)
    else:
        basis = "recording"
        keep = np.ones(n_launch, bool)
        steps = np.zeros(1, np.int64)
        step_idx = np.zeros(n_launch, np.int64)
        notes.append(
            "no steps were recorded: the whole recording counts as one step (prof.step(), or "
            "sm-profiler run's optimizer steps, make the estimates per step)"
        )
    n_steps = len(steps)
    cells = _cells(la, keep, step_idx, steps, n_steps, n_gpu, basis)
    every = None
    if cupti is not None:
        where = (rank_of_gpu, gpu_no, table.gpu_ids())
        every = _every_kernel(inputs, table, la, keep, steps, cells, uniq_names, where)
        notes += input_notes + every["notes"]
    findings: list[Finding] = []
    if cells["steps_of_gpu"].max() == 0 or cells["period_mean"].max() <= 0:
        notes.append("the recorded launches took no time: nothing to recover")
        return _done(
            findings, basis, steps, left_out, cells, n_gpu, rank_of_gpu, notes, table, every
        )
    where = (rank_of_gpu, gpu_no)
    findings += _kernel_findings(la, keep, measures.long_programs, uniq_names, cells, where)
    if every is not None:
        findings += _shape_findings(every, inputs, la, cells, where)
    findings += _gap_finding(cells, la, keep, rank_of_gpu, gpu_no, several_ranks, every)
    if several_ranks:
        findings += _rank_finding(cells, la, keep, uniq_names, rank_of_gpu, gpu_no, len(uniq_names))
    findings = [f for f in findings if f.estimate_ns_per_step > 0]
    findings.sort(key=lambda f: (-f.estimate_ns_per_step, KINDS.index(f.kind), f.kernel or ""))
    return _done(findings, basis, steps, left_out, cells, n_gpu, rank_of_gpu, notes, table, every)


class LaunchKeys(NamedTuple):
    """Each launch's GPU and kernel name as advise numbers them: names (sorted, unique), name
    (per launch, its index into names), gpu (per launch, table.gpu_ids()'s number of its (rank,
    GPU)), n_gpu, and per GPU its rank and GPU number (metadata)."""

    names: np.ndarray
    name: np.ndarray
    gpu: np.ndarray
    n_gpu: int
    rank_of_gpu: np.ndarray
    gpu_no: np.ndarray


def _launch_keys(table) -> LaunchKeys:
    L = table.launches
    names = np.array(table.kernel_names() or ["kernel 0"], dtype=object).astype(str)
    uniq_names, name_of_kernel = np.unique(names, return_inverse=True)
    l_name = name_of_kernel.reshape(-1)[np.asarray(L["kernel"], np.int64)]
    gpu_of_session = table.gpu_ids()
    l_gpu = gpu_of_session[np.asarray(L["session"], np.int64)]
    n_gpu = int(gpu_of_session.max()) + 1
    rank_of_gpu = np.zeros(n_gpu, np.int64)
    gpu_no = np.zeros(n_gpu, np.int64)
    ranks = table.ranks()
    for s, g in enumerate(gpu_of_session.tolist()[: len(table.sessions)]):
        rank_of_gpu[g] = ranks[s]
        gpu_no[g] = metadata_count(table.sessions[s].get("gpu")) if table.sessions else 0
    return LaunchKeys(uniq_names, l_name, l_gpu, n_gpu, rank_of_gpu, gpu_no)


@dataclass
class LaunchMeasures:
    """What advise reads of a table's programs: per launch, _launch_columns' columns (programs,
    SMs, waves, the tail, the last wave, the three launch estimates, ...); and the long programs
    (the tail's evidence) of a launch, by its index: from the rows when asked (ProgramsOf), or
    of the launches tail_candidates names (a dict). With these, advise reads the launches alone:
    a job's ranks joined from their summaries (issue 57)."""

    columns: dict[str, np.ndarray]
    long_programs: Mapping[int, list[dict]]


class ProgramsOf(Mapping):
    """The long programs of a table's launch i (_long_programs), read from its rows when asked."""

    def __init__(self, table, la: dict[str, np.ndarray]):
        self.table, self.la = table, la

    def __getitem__(self, i: int) -> list[dict]:
        return _long_programs(self.table, self.la, int(i))

    def __iter__(self):
        return iter(range(self.table.num_launches))

    def __len__(self) -> int:
        return self.table.num_launches


def launch_measures(table, keys: LaunchKeys | None = None, peaks=None) -> LaunchMeasures:
    """The LaunchMeasures of an AutoTable, from its rows (peaks: advise's)."""
    keys = _launch_keys(table) if keys is None else keys
    la = _launch_columns(table, keys.gpu, keys.name, peaks)
    return LaunchMeasures(la, ProgramsOf(table, la))


def tail_candidates(table, la: dict[str, np.ndarray]) -> np.ndarray:
    """The launches a tail finding may take its evidence from, whichever steps are kept: the
    launch of its (GPU, kernel) with the largest estimate over the steps kept (the last of
    equals in launch order). Within a (step, GPU) the estimates are one scale of the launches'
    tails, so that launch is one of the (GPU, kernel, step)'s largest tails (the last of equals
    in the order AutoTable.concat gives a job's launches: by start, then index)."""
    keys = _launch_keys(table)
    tail = la["tail"]
    step = np.asarray(table.launches["step"], np.int64)
    key, _, _ = pair_cells(keys.gpu * (len(keys.names) + 1) + keys.name, step + 1)
    o = np.lexsort((np.arange(len(tail)), la["start"], tail, key))
    last = np.r_[key[o][1:] != key[o][:-1], True] if len(o) else np.zeros(0, bool)
    picks = o[last]
    return np.sort(picks[tail[picks] > 0])


# The note that host gaps are the instrumented kernels' only (the report's fix text says it).
INSTRUMENTED_ONLY = (
    "host gaps count only the kernels auto mode instruments: cuBLAS, cuDNN and NCCL kernels "
    "may run in them (sm-profiler run --torch records every kernel; merge --torch shows them)"
)


def _done(findings, basis, steps, left_out, cells, n_gpu, rank_of_gpu, notes, table, every=None):
    notes = list(notes)
    used = [g["used"] for g in every["gpus"]] if every else []
    if not used or not all(used):
        notes.append(INSTRUMENTED_ONLY)
    if table.counts()["dropped"]:
        notes.append(
            "records were dropped (capacity): launches not kept are not in these estimates"
        )
    return Advice(
        findings,
        basis,
        [int(s) for s in steps] if basis == "steps" else [],
        left_out,
        float(cells["period_mean"].max()) if len(cells["period_mean"]) else 0.0,
        n_gpu,
        len(np.unique(rank_of_gpu)),
        notes,
        None if every is None else {k: every[k] for k in ("source", "gpus", "uninstrumented")},
    )


CHUNK_ROWS = 1 << 16  # rows per chunk of whole launches (temporaries: a few MiB)


def _programs(table, a: int = 0, b: int | None = None) -> dict[str, np.ndarray]:
    """Per program of rows a:b (whole launches; a level="warp" launch's warps merged), in launch
    order: launch, sm, start, end, row (its first row)."""
    r, L = table.rows, table.launches
    b = table.num_rows if b is None else b
    launch = np.asarray(r["launch"][a:b], np.int64)
    sm = np.asarray(r["sm"][a:b], np.int64)
    start = np.asarray(r["start_ns"][a:b], np.int64)
    end = np.asarray(r["end_ns"][a:b], np.int64)
    if not np.asarray(L["per_warp"]).any():
        return {"launch": launch, "sm": sm, "start": start, "end": end, "row": np.arange(a, b)}
    new = np.ones(b - a, bool)
    if b - a > 1:
        same = launch[1:] == launch[:-1]
        for c in ("x", "y", "z"):
            col = np.asarray(r[c][a:b])
            same &= col[1:] == col[:-1]
        new[1:] = ~same
    cuts = np.flatnonzero(new)
    return {
        "launch": launch[cuts],
        "sm": sm[cuts],
        "start": np.minimum.reduceat(start, cuts),
        "end": np.maximum.reduceat(end, cuts),
        "row": cuts + a,
    }


def _launch_chunks(table):
    """(first launch, stop launch, first row, stop row) of consecutive chunks of whole launches,
    about CHUNK_ROWS rows each (one launch alone may be more)."""
    first = np.asarray(table.launches["first_row"], np.int64)
    n, n_rows = len(first), table.num_rows
    k = 0
    while k < n:
        a = int(first[k])
        k2 = max(k + 1, int(np.searchsorted(first, a + CHUNK_ROWS, "left")))
        b = int(first[k2]) if k2 < n else n_rows
        yield k, k2, a, b
        k = k2


def _launch_columns(table, l_gpu, l_name, peaks=None) -> dict[str, np.ndarray]:
    """Per launch: programs, SMs, SMs used, resident, slots, waves, the tail, the last wave and
    the three launch estimates (partial_wave, tail, idle_sms), in ns. A chunk of whole launches
    at a time: the temporaries are a chunk's, whatever the table's size. peaks: advise's."""
    L = table.launches
    start = np.asarray(L["start_ns"], np.int64)
    end = np.asarray(L["end_ns"], np.int64)
    span = (end - start).astype(np.float64)
    sess = np.asarray(L["session"], np.int64)
    n_sess = max(len(table.sessions), int(sess.max()) + 1)
    on = _on_sms(table, start, sess, n_sess, peaks)
    programs, used, median_end = on["programs"], on["used"], on["median_end"]
    tail = np.maximum(span - median_end, 0.0)
    # The GPU's SMs: the session's sm_count, else the highest SM id seen + 1; never fewer than
    # the launch used.
    known = np.array(
        [metadata_count((s or {}).get("sm_count")) for s in table.sessions]
        + [0] * (n_sess - len(table.sessions)),
        np.int64,
    )
    sms = np.maximum(np.where(known > 0, known, on["seen"])[sess], used)
    # Resident programs per SM: the most seen at once on one SM, over the kernel's launches on
    # that GPU.
    key, _, _ = pair_cells(l_gpu, l_name)
    most = np.zeros(int(key.max()) + 1, np.int64)
    np.maximum.at(most, key, on["peak"])
    resident = np.maximum(most[key], 1)
    # Never more than the kernel's registers, warps and shared memory let an SM hold: a program's
    # record ends when its first warp does, and the warps that ended before it may already have
    # made room for the next program (H200: 3 seen at once of a kernel that fits 2, 20 of one
    # that fits 16).
    limit = resident_limit(table)
    resident = np.where(limit > 0, np.minimum(resident, limit), resident)
    slots = sms * resident
    full = programs // slots
    last_n = programs - full * slots
    partial = (full >= 1) & (last_n > 0)
    t_last, t_full = _wave_medians(table, programs, partial, full * slots, resident)
    fill = np.where(partial, last_n / np.maximum(slots, 1), 1.0)
    # Work-conserving estimates (docs/auto.md, "What to fix first"): what the launch's work would
    # take spread evenly over the slots, against the time it took. The tail's part of the span is
    # the time after the median SM's end, less the last wave's own part.
    tail_part = np.maximum(tail - np.where(partial, t_last, 0.0), 0.0)
    # Tail: the long programs' work beyond the median program, split over every slot, would add
    # extra / slots to the median SM's end instead of the tail.
    est_tail = np.maximum(tail_part - on["extra"] / np.maximum(slots, 1), 0.0)
    # Partial wave: the work at full residency (a program slot's time in the full waves x programs) over
    # every slot, never less than one such program, against the span without the tail's part.
    ideal = np.maximum(t_full * programs / np.maximum(slots, 1), t_full)
    est_wave = np.where(partial, np.maximum(span - tail_part - ideal, 0.0), 0.0)
    # Idle SMs: the programs' work (the median program's) spread over every SM.
    few = programs < sms
    spread = on["dur_med"] * programs / np.maximum(sms, 1)
    est_idle = np.where(few, np.maximum(span - tail - spread, 0.0), 0.0)
    return {
        "start": start,
        "end": end,
        "span_ns": span,
        "programs": programs,
        "sms": sms,
        "sm_count_known": (known > 0)[sess],
        "sms_used": used,
        "resident_per_sm": resident,
        "slots": slots,
        "waves": programs / np.maximum(slots, 1),
        "full": full,
        "last_n": last_n,
        "last_wave_fill": fill,
        "last_wave_ns": t_last,
        "full_wave_program_ns": t_full,
        "ideal_ns": np.where(partial, ideal, np.where(few, spread, 0.0)),
        "tail_ns": tail,
        "last_sm": on["last_sm"],
        "median_end": median_end,
        "program_median_ns": on["dur_med"],
        "partial_wave": est_wave,
        "tail": est_tail,
        "idle_sms": est_idle,
    }


def resident_limit(table) -> np.ndarray:
    """Per launch, the programs of its kernel an SM can hold at most, from the kernel's warps,
    registers a thread and shared memory (its metadata; report/occupancy.py with H100/H200's
    limits, which no other GPU's exceed: an upper bound anywhere); 0 where not known."""
    from .occupancy import resident_blocks

    per_kernel = np.zeros(max(len(table.kernels), 1), np.int64)
    for i, k in enumerate(table.kernels):
        if not isinstance(k, dict):
            continue
        warps, regs = metadata_count(k.get("num_warps")), metadata_count(k.get("registers"))
        if warps > 0 and regs > 0:
            smem = max(metadata_count(k.get("shared_bytes")), 0)
            per_kernel[i] = resident_blocks(32 * warps, regs, smem).blocks
    kernel = np.asarray(table.launches["kernel"], np.int64)
    ok = (kernel >= 0) & (kernel < len(per_kernel))
    return np.where(ok, per_kernel[np.clip(kernel, 0, len(per_kernel) - 1)], 0)


def _on_sms(table, start, sess, n_sess, peaks=None) -> dict[str, np.ndarray]:
    """Per launch, what its programs did on the SMs: programs, SMs used, the most programs on
    one SM at once (peak; `peaks` where the caller found them), the median SM's end and the
    last SM, the programs' median duration; and per session the highest SM id + 1 it ran on
    (seen). A chunk of launches at a time."""
    n = table.num_launches
    programs = np.zeros(n, np.int64)
    used = np.zeros(n, np.int64)
    found = peaks is None
    peak = np.zeros(n, np.int64) if found else np.asarray(peaks, np.int64)
    median_end = np.zeros(n, np.float64)  # ns after the launch's start
    last_sm = np.zeros(n, np.int64)
    dur_med = np.zeros(n, np.float64)
    extra = np.zeros(n, np.float64)  # the long programs' time beyond the median program
    seen = np.zeros(n_sess, np.int64)
    for k0, k1, a, b in _launch_chunks(table):
        p = _programs(table, a, b)
        loc = p["launch"] - k0
        m = k1 - k0
        programs[k0:k1] = np.bincount(loc, minlength=m)
        np.maximum.at(seen, sess[p["launch"]], p["sm"] + 1)
        dur = p["end"] - p["start"]
        dur_med[k0:k1] = _group_median(loc, dur, m)
        after_start = p["end"] - start[p["launch"]]  # int64, ns after the launch's start
        p_loc = loc
        # (launch, SM) groups, by start within each.
        o = np.lexsort((p["start"], p["sm"], loc))
        gl, gs, st, en = loc[o], p["sm"][o], p["start"][o], p["end"][o]
        del o, p
        new = _new_group(gl, gs)
        g_first = np.flatnonzero(new)
        g_launch, g_sm = gl[g_first], gs[g_first]
        g_last = np.maximum.reduceat(en, g_first)
        if found:
            g_peak = peak_per_group(np.cumsum(new) - 1, st, en, len(g_first))
            pk = np.zeros(m, np.int64)
            np.maximum.at(pk, g_launch, g_peak)
            peak[k0:k1] = pk
        del gl, gs, st, en, new
        u = np.bincount(g_launch, minlength=m)
        used[k0:k1] = u
        # Each launch's median SM end (SMs that ran), its last SM.
        o3 = np.lexsort((g_last, g_launch))
        gf = np.cumsum(u) - u
        median_end[k0:k1] = median_after(g_last[o3], gf, u, start[k0:k1])
        last_sm[k0:k1] = g_sm[o3][gf + u - 1]
        extra[k0:k1] = _long_extra(p_loc, dur, after_start, dur_med[k0:k1], median_end[k0:k1])
    return {
        "programs": programs,
        "used": used,
        "peak": peak,
        "median_end": median_end,
        "last_sm": last_sm,
        "dur_med": dur_med,
        "extra": extra,
        "seen": seen,
    }


def _long_extra(loc, dur, after_start, dur_med, median_end) -> np.ndarray:
    """Per launch of a chunk, the time its long programs (those that ended after the median SM's
    end and ran longer than the median program: the tail's evidence) ran beyond the median
    program, summed."""
    sel = (after_start > median_end[loc]) & (dur > dur_med[loc])
    over = dur[sel] - dur_med[loc[sel]]
    return np.bincount(loc[sel], weights=over, minlength=len(dur_med))


def _wave_medians(
    table, programs, partial, first_of_last, resident
) -> tuple[np.ndarray, np.ndarray]:
    """Per launch with a partial last wave (`partial`), the median duration of the last wave's
    programs (those from the `first_of_last`-th to start on), and the time a program takes at
    full residency: per SM, the full waves' programs (those before) from the first's start to
    the last's end, per `resident` of them; the median over SMs. Not the median program's
    duration: an SM shares its throughput unfairly (H200, 16 compute-bound programs an SM: four
    end after 90 us, the last four after 330 us; the median program, 200 us, took the wave for
    shorter than it was and the estimate was 4.7x what a fix recovered). Where the programs
    wait alike (latency-bound), the same as the median program. 0 elsewhere."""
    t_last = np.zeros(table.num_launches, np.float64)
    t_full = np.zeros(table.num_launches, np.float64)
    if not partial.any():
        return t_last, t_full
    for k0, k1, a, b in _launch_chunks(table):
        if not partial[k0:k1].any():
            continue
        p = _programs(table, a, b)
        loc = p["launch"] - k0
        m = k1 - k0
        o4 = np.lexsort((p["start"], loc))
        pl = loc[o4]
        cnt = programs[k0:k1]
        pos = np.arange(len(pl)) - (np.cumsum(cnt) - cnt)[pl]
        mine = partial[k0:k1][pl]
        last = pos >= first_of_last[k0:k1][pl]
        dur = (p["end"] - p["start"])[o4]
        sel = mine & last
        t_last[k0:k1] = _group_median(pl[sel], dur[sel], m)
        sm = p["sm"][o4].astype(np.int64)
        cell = pl * (int(sm.max(initial=0)) + 1) + sm  # (launch, SM)
        shared = np.isin(cell, cell[mine & last])  # an SM that also ran last-wave programs
        sel = mine & ~last
        t_full[k0:k1] = _full_residency(
            pl[sel],
            sm[sel],
            p["start"][o4][sel],
            p["end"][o4][sel],
            resident[k0:k1],
            m,
            shared[sel],
        )
    return t_last, t_full


def _new_group(gl: np.ndarray, gs: np.ndarray) -> np.ndarray:
    """Where each (launch, SM) group begins, in programs sorted by launch and SM."""
    new = np.ones(len(gl), bool)
    new[1:] = (gl[1:] != gl[:-1]) | (gs[1:] != gs[:-1])
    return new


def _full_residency(loc, sm, start, end, resident, m, shared=None) -> np.ndarray:
    """Per launch of a chunk, from its full waves' programs: per (launch, SM), the first start
    to the last end times `resident` over the programs; the median over the SMs that ran at
    least `resident` of them (the others: the median program's duration). Where some of those
    SMs ran no last-wave program (`shared` is False for their programs), the median over those
    alone: on the others the last wave's programs share the SM with the full wave's and stretch
    it (H200, fma_wave16: an SM's 16 programs end at 337 us alone, 350-405 us beside 1-3 of the
    last wave; the fix's one wave of 1.1x the work ended at 372 us)."""
    if not len(loc):
        return np.zeros(m, np.float64)
    if shared is None:
        shared = np.zeros(len(loc), bool)
    o = np.lexsort((sm, loc))
    gl, gs = loc[o], sm[o]
    first = np.flatnonzero(_new_group(gl, gs))
    g_loc = gl[first]
    count = np.diff(np.append(first, len(gl)))
    span = (np.maximum.reduceat(end[o], first) - np.minimum.reduceat(start[o], first)).astype(
        np.float64
    )
    g_shared = np.logical_or.reduceat(shared[o], first)
    r = resident[g_loc]
    whole = count >= r
    per = span * r / count
    out = _group_median(g_loc[whole], per[whole], m)
    alone = whole & ~g_shared
    out_alone = _group_median(g_loc[alone], per[alone], m)
    has_alone = np.bincount(g_loc[alone], minlength=m) > 0
    out = np.where(has_alone, out_alone, out)
    fallback = _group_median(loc, (end - start).astype(np.float64), m)
    has = np.bincount(g_loc[whole], minlength=m) > 0
    return np.where(has, out, fallback)


def _cells(la, keep, step_idx, steps, n_steps, n_gpu, basis) -> dict[str, np.ndarray]:
    """Per (step, GPU) cell that ran (those only: sized by the launches, never steps x GPUs):
    its step and GPU, its launches' first start and last end, their union, their spans summed,
    the step's period, the gaps; the launch estimates' scale; per GPU the steps it ran and its
    mean period."""
    k = np.flatnonzero(keep)
    c, of_step, of_gpu = pair_cells(step_idx[k], la["gpu"][k])
    n_cells = len(of_step)
    la["cell"] = np.zeros(len(keep), np.int64)
    la["cell"][k] = c
    s, e = la["start"][k], la["end"][k]
    lo, hi = cell_bounds(c, s, e, n_cells)
    union = union_length(c, s, e, n_cells).astype(np.float64)
    spans = np.bincount(c, weights=(e - s).astype(np.float64), minlength=n_cells)
    scale = np.where(spans > union, union / np.maximum(spans, 1), 1.0)
    span = (hi - lo).astype(np.int64)
    if basis == "steps":
        period = cell_periods(steps[of_step], of_gpu, lo, span).astype(np.float64)
    else:
        period = span.astype(np.float64)
    gaps = period - union
    steps_of_gpu = np.bincount(of_gpu, minlength=n_gpu)
    period_mean = np.bincount(of_gpu, weights=period, minlength=n_gpu) / np.maximum(steps_of_gpu, 1)
    return {
        "step": of_step,
        "gpu": of_gpu,
        "lo": lo,
        "hi": hi,
        "union": union,
        "busy": union.copy(),  # every kernel's union where CUPTI's rows are used (_every_kernel)
        "scale": scale,
        "period": period,
        "gaps": gaps,
        "steps_of_gpu": steps_of_gpu,
        "period_mean": period_mean,
        "n_steps": n_steps,
        "n_gpu": n_gpu,
    }


def _kernel_findings(la, keep, long_programs, uniq_names, cells, where) -> list[Finding]:
    """The partial-wave, tail and idle-SM findings of the kept launches, each launch's
    estimates scaled by its cell's union / sum of spans (streams)."""
    k = np.flatnonzero(keep)
    scale = cells["scale"][la["cell"][k]]
    out = []
    for kind in ("partial_wave", "tail", "idle_sms"):
        est = la[kind][k] * scale
        out += _launch_findings(kind, est, k, la, long_programs, uniq_names, cells, where)
    return out


def _launch_findings(kind, est, k, la, long_programs, uniq_names, cells, where) -> list[Finding]:
    """One finding per kernel name with a positive estimate of `kind`: on the GPU where its mean
    per step is largest; its evidence from the launch of that GPU with the largest estimate.
    where: (rank, GPU number) of each GPU; long_programs: the tail's evidence, by launch
    (LaunchMeasures)."""
    rank_of_gpu, gpu_no = where
    if not len(k):
        return []
    # Per (GPU, kernel) cell that ran (never a grid of every GPU by every kernel): the mean
    # estimate per step of the GPU; each kernel's largest, on the first GPU of equals.
    ck, of_gpu, of_name = pair_cells(la["gpu"][k], la["name"][k])
    n_c = len(of_gpu)
    total = np.bincount(ck, weights=est, minlength=n_c)
    per_step = total / np.maximum(cells["steps_of_gpu"], 1)[of_gpu]
    o = np.lexsort((of_gpu, -per_step, of_name))
    best = o[np.r_[True, of_name[o][1:] != of_name[o][:-1]]]
    best = best[per_step[best] > 0]
    if not len(best):
        return []
    # Each (GPU, name)'s launch of the largest estimate, and its count of launches with one.
    o = np.lexsort((est, ck))
    last = np.r_[ck[o][1:] != ck[o][:-1], True]
    rep = dict(zip(ck[o][last].tolist(), k[o][last].tolist(), strict=True))
    with_est = np.bincount(ck[est > 0], minlength=n_c)
    launches = np.bincount(ck, minlength=n_c)
    gpus_with = np.bincount(of_name[per_step > 0], minlength=len(uniq_names))
    out = []
    for kk in best.tolist():
        g, j = int(of_gpu[kk]), int(of_name[kk])
        i = rep[kk]
        step_ns = float(cells["period_mean"][g])
        v = float(per_step[kk])
        ev = {
            "launches_per_step": launches[kk] / max(int(cells["steps_of_gpu"][g]), 1),
            "launches_with_it": int(with_est[kk]),
            "launches": int(launches[kk]),
            "gpus_with_it": int(gpus_with[j]),
            "launch": int(i),
        }
        ev.update(_launch_evidence(la, i))
        if kind == "tail":
            ev["long_programs"] = long_programs[i]
        out.append(_finding(kind, str(uniq_names[j]), rank_of_gpu[g], gpu_no[g], v, step_ns, ev))
    return out


# The launch columns every launch finding's evidence carries, by type.
_INT_EVIDENCE = ("programs", "sms", "sms_used", "resident_per_sm", "slots", "last_sm")
_FLOAT_EVIDENCE = (
    "waves",
    "last_wave_fill",
    "last_wave_ns",
    "full_wave_program_ns",
    "ideal_ns",
    "span_ns",
    "tail_ns",
)


def _launch_evidence(la, i: int) -> dict:
    ev = {k: int(la[k][i]) for k in _INT_EVIDENCE} | {k: float(la[k][i]) for k in _FLOAT_EVIDENCE}
    ev["sm_count_known"] = bool(la["sm_count_known"][i])
    ev["program_median_ns"] = float(la["program_median_ns"][i])
    ev["last_wave_programs"] = int(la["last_n"][i]) if la["full"][i] >= 1 else 0
    ev["launch_estimate_ns"] = float(la["partial_wave"][i] + la["tail"][i] + la["idle_sms"][i])
    return ev


def _long_programs(table, la, i: int) -> list[dict]:
    """The programs of launch i that ended after its median SM's end and ran longer than its
    median program, longest first (at most LONG_PROGRAMS_SHOWN): id, SM, duration."""
    return _program_dicts(_long_program_rows(table, la, i), la["program_median_ns"][i])


# A long program's columns (ProgramColumns): its id (x, y, z), its SM, its duration.
PROGRAM_COLUMNS = ("x", "y", "z", "sm", "duration_ns")


def _long_program_rows(table, la, i: int) -> dict[str, np.ndarray]:
    """_long_programs of launch i as PROGRAM_COLUMNS (int64), longest first."""
    first = int(table.launches["first_row"][i])
    prog = _programs(table, first, first + int(table.launches["rows"][i]))
    dur = prog["end"] - prog["start"]
    med = la["program_median_ns"][i]
    after = prog["end"] - la["start"][i]  # the median SM end is the launch's own (ns after start)
    sel = np.flatnonzero((after > la["median_end"][i]) & (dur > med))
    sel = sel[np.argsort(-dur[sel], kind="stable")[:LONG_PROGRAMS_SHOWN]]
    rows = prog["row"][sel]
    r = table.rows
    cols = {c: np.asarray(r[c][rows], np.int64) for c in ("x", "y", "z")}
    return dict(cols, sm=np.asarray(prog["sm"][sel], np.int64), duration_ns=dur[sel])


def _program_dicts(cols: dict[str, np.ndarray], med: float) -> list[dict]:
    return [
        {
            "program": [int(x), int(y), int(z)],
            "sm": int(sm),
            "duration_ns": int(d),
            "x_median": float(d / med) if med > 0 else None,
        }
        for x, y, z, sm, d in zip(*(cols[c] for c in PROGRAM_COLUMNS), strict=True)
    ]


def long_program_columns(table, la, launches) -> dict[str, np.ndarray]:
    """The long programs of `launches` (tail_candidates) as columns: "launch" (each program's)
    and PROGRAM_COLUMNS, launch by launch in the order given, each longest first."""
    parts = [_long_program_rows(table, la, int(i)) for i in launches]
    cols = {
        c: np.concatenate([p[c] for p in parts] or [np.zeros(0, np.int64)]) for c in PROGRAM_COLUMNS
    }
    sizes = [len(p["sm"]) for p in parts]
    return dict(cols, launch=np.repeat(np.asarray(launches, np.int64), sizes))


class ProgramColumns(Mapping):
    """The long programs of the launches `launches`, by launch, from long_program_columns'
    columns (a job's launches joined from its ranks' summaries); la: the launch columns (their
    median program)."""

    def __init__(self, launches, cols: dict[str, np.ndarray], la: dict[str, np.ndarray]):
        self.launches = set(np.asarray(launches, np.int64).tolist())
        o = np.argsort(cols["launch"], kind="stable")  # each launch's programs stay in order
        self.cols = {c: np.asarray(v)[o] for c, v in cols.items()}
        self.la = la

    def __getitem__(self, i: int) -> list[dict]:
        if int(i) not in self.launches:
            raise KeyError(i)  # internal: advise asks only for tail_candidates' launches
        at = self.cols["launch"]
        a, b = np.searchsorted(at, i, "left"), np.searchsorted(at, i, "right")
        part = {c: v[a:b] for c, v in self.cols.items()}
        return _program_dicts(part, self.la["program_median_ns"][i])

    def __iter__(self):
        return iter(sorted(self.launches))

    def __len__(self) -> int:
        return len(self.launches)


def _gap_finding(cells, la, keep, rank_of_gpu, gpu_no, several, every=None) -> list[Finding]:
    """Host gaps: per GPU the mean per step of its step period less its launches' union (with
    CUPTI's rows, every kernel's union; with several ranks, less its wait for the step's
    busiest GPU); the GPU where it is largest."""
    of_step, of_gpu = cells["step"], cells["gpu"]
    gaps, busy = cells["gaps"], cells["busy"]
    wait = np.zeros_like(gaps)
    if several:
        # The wait for the busiest GPU: over every kernel where every GPU has CUPTI's rows,
        # else over the instrumented kernels (one measure across the GPUs compared).
        every_gpu = every is not None and all(g["used"] for g in every["gpus"])
        b = busy if every_gpu else cells["union"]
        top = np.full(cells["n_steps"], -np.inf)
        np.maximum.at(top, of_step, b)
        wait = top[of_step] - b
    adj = np.maximum(gaps - wait, 0.0)
    steps_of_gpu = np.maximum(cells["steps_of_gpu"], 1)
    per_gpu = np.bincount(of_gpu, weights=adj, minlength=cells["n_gpu"]) / steps_of_gpu
    g = int(np.argmax(per_gpu))
    v = float(per_gpu[g])
    if v <= 0:
        return []
    # The gaps between the GPU's launches (with CUPTI's rows: its kernels) inside its steps:
    # count, median, largest.
    k = np.flatnonzero(keep & (la["gpu"] == g))
    mine = of_gpu == g  # the cells (steps) the GPU ran
    n_run = int(mine.sum())
    step_ns = float(cells["period_mean"][g])
    seen = (every or {}).get("aligned", {}).get(g)
    if seen is None:
        o = np.lexsort((la["start"][k], la["cell"][k]))
        inner = _inner_gaps(la["cell"][k][o], la["start"][k][o], la["end"][k][o])
        between = cells["period"] - (cells["hi"] - cells["lo"])
    else:
        inner = _inner_gaps(seen["cell"], seen["start"], seen["end"])
        between = gaps - seen["inner_per_cell"]
    ev = {
        "source": "instrumented" if seen is None else "cupti",
        "launches_per_step": len(k) / max(n_run, 1),
        "gaps_per_step": len(inner) / max(n_run, 1),
        "gap_median_ns": float(np.median(inner)) if len(inner) else 0.0,
        "gap_max_ns": float(inner.max()) if len(inner) else 0.0,
        "inside_steps_ns": float(inner.sum()) / max(n_run, 1),
        "between_steps_ns": float(between[mine].sum()) / max(n_run, 1),
        "busy_ns": float(busy[mine].sum()) / max(n_run, 1),
        "wait_for_other_ranks_ns": float(np.minimum(wait, gaps)[mine].sum()) / max(n_run, 1),
        "step_ns": step_ns,
    }
    if seen is not None:
        ev["kernels_per_step"] = seen["kernels"] / max(n_run, 1)
        ev["instrumented_busy_ns"] = float(cells["union"][mine].sum()) / max(n_run, 1)
        ev["cupti_steps"] = f"{seen['steps']} of {n_run}"
    return [_finding("host_gaps", None, rank_of_gpu[g], gpu_no[g], v, step_ns, ev)]


def _inner_gaps(c, s, e, with_cells: bool = False):
    """The gaps between launches sorted by (cell, start): where a launch starts after every
    earlier launch of its cell has ended, the time between (positive ones); with_cells: and
    the cell of each."""
    if len(c) < 2:
        none = np.zeros(0, np.float64)
        return (none, np.zeros(0, np.int64)) if with_cells else none
    run = np.empty(len(e), np.int64)
    # Running maximum of ends within each cell (cells are few and short: a loop over cells
    # would be steps x GPUs; one accumulate over lifted values instead).
    lo = int(min(s.min(), e.min()))
    width = int(max(s.max(), e.max())) - lo + 1
    if width * (int(c.max()) + 2) < 2**62:
        lift = c.astype(np.int64) * width - lo
        run = np.maximum.accumulate(e + lift) - lift
    else:
        for cc in np.unique(c).tolist():
            m = c == cc
            run[m] = np.maximum.accumulate(e[m])
    same = c[1:] == c[:-1]
    g = (s[1:] - run[:-1]).astype(np.float64)
    ok = same & (g > 0)
    return (g[ok], np.asarray(c[1:][ok], np.int64)) if with_cells else g[ok]


def _rank_finding(cells, la, keep, uniq_names, rank_of_gpu, gpu_no, n_names) -> list[Finding]:
    """The slowest rank: over the steps that two GPUs or more ran (ranks may keep different
    steps: ring buffers, dropped records), each GPU's launches' union per step less the mean of
    every GPU's that ran the step; the GPU where that is largest, its excess (the time an even
    split of the same work would recover) and the kernels (launch spans summed per step) that
    make it. Its busy time, the mean and the step are over the same steps, so the estimate is
    their difference and at most the step."""
    n_steps, n_gpu = cells["n_steps"], cells["n_gpu"]
    of_step, of_gpu, busy = cells["step"], cells["gpu"], cells["union"]  # the cells that ran
    n_ran = np.bincount(of_step, minlength=n_steps)
    ref = np.bincount(of_step, weights=busy, minlength=n_steps) / np.maximum(n_ran, 1)
    ref = np.where(n_ran >= 2, ref, 0.0)  # a step's mean
    compared = n_ran[of_step] >= 2  # per cell: its GPU ran a step others ran too
    c_gpu = of_gpu[compared]
    count = np.bincount(c_gpu, minlength=n_gpu)
    if not count.any():
        return []
    per = np.maximum(count, 1)
    mean_busy = np.bincount(c_gpu, weights=busy[compared], minlength=n_gpu) / per
    mean_ref = np.bincount(c_gpu, weights=ref[of_step[compared]], minlength=n_gpu) / per
    excess = np.where(count > 0, mean_busy - mean_ref, -np.inf)
    slow = int(np.argmax(excess))
    v = float(excess[slow])
    if v <= 0:
        return []
    mine = np.flatnonzero(compared & (of_gpu == slow))  # its compared cells, by step
    period = cells["period"][mine]
    step_ns = float(period.sum()) / len(period)
    # Per kernel over the slow GPU's compared steps: its launch spans less the mean over the
    # GPUs that ran the step.
    k = np.flatnonzero(keep)
    step_of = of_step[la["cell"][k]]
    in_mine = np.zeros(n_steps, bool)
    in_mine[of_step[mine]] = True
    k, step_of = k[in_mine[step_of]], step_of[in_mine[step_of]]
    weight = (la["gpu"][k] == slow) - 1.0 / n_ran[step_of]
    kd = np.bincount(la["name"][k], weights=la["span_ns"][k] * weight, minlength=n_names)
    kd /= len(period)
    top = [j for j in np.argsort(-kd, kind="stable").tolist() if kd[j] > 0][:5]
    shown = np.flatnonzero(count > 0)
    second = max((g for g in shown.tolist() if g != slow), key=lambda g: excess[g])
    ev = {
        "busy_ns": float(mean_busy[slow]),
        "mean_busy_ns": float(mean_ref[slow]),
        "step_ns": step_ns,
        "next_slowest": {
            "rank": int(rank_of_gpu[second]),
            "gpu": int(gpu_no[second]),
            "busy_ns": float(mean_busy[second]),
        },
        "steps_compared": int(count[slow]),
        "kernels": [{"kernel": str(uniq_names[j]), "delta_ns_per_step": float(kd[j])} for j in top],
        "per_rank": [
            {
                "rank": int(rank_of_gpu[g]),
                "gpu": int(gpu_no[g]),
                "busy_ns": float(mean_busy[g]),
                "steps_compared": int(count[g]),
            }
            for g in shown.tolist()
        ],
        "rank": int(rank_of_gpu[slow]),
    }
    return [_finding("slow_rank", None, rank_of_gpu[slow], gpu_no[slow], v, step_ns, ev)]


# -- every kernel, from CUPTI (torch.profiler's kernel rows) -----------------------------------

# The instrumented launches must sit this close to their own CUPTI rows once moved (the median
# over launches of the larger of |first stamp - CUPTI start|, |last stamp - CUPTI end|); a
# trace further off is not of these launches, or its clock is not theirs.
ALIGN_TOLERANCE_NS = 5_000
UNINSTRUMENTED_SHOWN = 5  # kernels named of those auto mode does not instrument
CUPTI_SOURCE = "CUPTI: every kernel"
# What a kernel auto mode does not instrument most likely is, by its name (a guess, said so).
LIBRARIES = (
    ("NCCL", ("nccl",)),
    ("cuBLAS/CUTLASS matmul", ("gemm", "nvjet", "cublas", "xmma", "cutlass", "matmul")),
    ("attention", ("flash", "fmha", "attention", "cudnn")),
)


def _is_kernel_table(x) -> bool:
    return isinstance(x, dict) and {"names", "name", "device", "start_ns", "end_ns"} <= x.keys()


def _one_input(x) -> tuple[dict, dict | None]:
    """(kernel table, the doc or None) of one torch trace or kernel table."""
    from .coverage import kernel_table

    if _is_kernel_table(x):
        return x, None
    from ..wire.torch_trace import read_torch_doc

    doc = read_torch_doc(x)
    return kernel_table(doc), doc


def _doc_rank(doc) -> int | None:
    dist = doc.get("distributedInfo") if isinstance(doc, dict) else None
    r = dist.get("rank") if isinstance(dist, dict) else None
    return r if isinstance(r, int) and not isinstance(r, bool) and r >= 0 else None


def cupti_inputs(cupti, table) -> tuple[dict[int, tuple[dict, dict | None]], list[str]]:
    """advise's `cupti` as {rank: (kernel table, torch doc or None)}, and notes on what was
    left out: a single trace goes to the table's one rank (with several, to the rank its
    distributedInfo names); one whose distributedInfo names another rank is left out."""
    ranks = sorted(set(table.ranks().tolist()))
    stated = {
        int(r)
        for r, s in zip(table.ranks().tolist(), table.sessions, strict=False)
        if isinstance(s.get("rank"), int)
    }
    if (
        isinstance(cupti, dict)
        and cupti
        and all(isinstance(k, int) and not isinstance(k, bool) for k in cupti)
    ):
        given = {k: v for k, v in cupti.items() if v is not None}
    else:
        given = {None: cupti}
    out, notes = {}, []
    for key, x in given.items():
        kt, doc = _one_input(x)
        says = _doc_rank(doc)
        if key is None:
            key = says if says is not None and len(ranks) > 1 else ranks[0]
            if len(ranks) > 1 and says is None:
                notes.append(
                    "the torch trace does not say which rank it is (distributedInfo.rank) and "
                    "the table holds several: not used (pass cupti={rank: trace})"
                )
                continue
        if key not in ranks:
            notes.append(f"a torch trace for rank {key}, which the table does not hold: not used")
            continue
        if says is not None and says != key and (key in stated or len(ranks) > 1):
            notes.append(
                f"the torch trace given for rank {key} is rank {says}'s (its distributedInfo): "
                f"not used; rank {key}'s host gaps count the instrumented kernels only"
            )
            continue
        out[key] = (kt, doc)
    return out, notes


def library_of(name: str) -> str | None:
    low = name.lower()
    for lib, keys in LIBRARIES:
        if any(k in low for k in keys):
            return lib
    return None


def _every_kernel(inputs, table, la, keep, steps, cells, uniq_names, where) -> dict:
    """Host gaps over every kernel: per GPU whose rank has CUPTI rows that line up with its
    launches, each of its steps' period less the union of its launches and of the CUPTI rows of
    its device inside the step (clipped), on CUPTI's axis (our launches moved by the offset
    merge takes: report/alignment.py). Updates cells' busy and gaps in place; returns per GPU
    what was used or why not, the combined intervals for the host-gap evidence ("aligned"),
    the uninstrumented kernels per step of the GPU where they take longest, and notes."""
    from .alignment import alignment_error, kernel_fit, rows_by_name
    from .coverage import step_windows

    rank_of_gpu, gpu_no, gpu_of_session = where
    n_gpu = cells["n_gpu"]
    several_ranks = len(np.unique(rank_of_gpu)) > 1
    several = several_ranks or n_gpu > 1
    gpus, notes, aligned, lines = [], [], {}, []
    names = uniq_names.astype(str)
    for g in range(n_gpu):
        r, d = int(rank_of_gpu[g]), int(gpu_no[g])
        who = f"rank {r} (cuda:{d})" if several_ranks else f"cuda:{d}"
        entry: dict = {"rank": r, "gpu": d, "used": False}
        gpus.append(entry)
        if r not in inputs:
            entry["why_not"] = "no torch trace"
            if inputs:
                notes.append(f"{who}: no torch trace: its host gaps count instrumented kernels")
            continue
        kt, doc = inputs[r]
        why = None
        dev = np.asarray(kt["device"]) == d
        mine = np.flatnonzero(la["gpu"] == g)
        if not len(kt["name"]):
            why = "the torch trace has no kernel rows (CUPTI's kernel activity was off?)"
        elif not dev.any():
            devs = ", ".join(f"cuda:{x}" for x in np.unique(kt["device"])[:4].tolist())
            why = f"the torch trace's kernels ran on {devs}, not on cuda:{d}"
        if why is None:
            rows = rows_by_name(kt, dev)
            lnames = names[la["name"][mine]].tolist()
            fit = kernel_fit(lnames, la["start"][mine], la["end"][mine], rows)
            if fit is None:
                why = "none of the instrumented kernels is among its CUPTI rows: not these launches"
        if why is None:
            off = fit["offset_ns"]
            err = alignment_error(lnames, la["start"][mine] - off, la["end"][mine] - off, rows)
            entry.update(device=d, offset_ns=int(off), fit=fit, error=err)
            if fit["median_abs_ns"] > ALIGN_TOLERANCE_NS:
                why = (
                    "its clock does not line up with the launches: moved by the kernels' median "
                    f"offset, they sit {format_time(fit['median_abs_ns'])} from their own CUPTI "
                    f"rows (median; at most {format_time(ALIGN_TOLERANCE_NS)} is taken)"
                )
        if why is None and doc is not None:
            theirs = set(step_windows(doc)["step"].tolist())
            ours = set(steps[cells["step"][cells["gpu"] == g]].tolist())
            if theirs and ours and not ours & theirs:
                why = (
                    "torch.profiler's steps are not the steps recorded: its kernel rows are of "
                    "other steps"
                )
        if why is not None:
            entry["why_not"] = why
            notes.append(
                f"{who}: CUPTI's rows not used, {why}; its host gaps count the instrumented kernels only"
            )
            continue
        got = _gpu_cells(kt, dev, off, g, la, keep, cells, names)
        if got is None:
            entry["why_not"] = "none of its recorded steps lies inside the torch profile"
            notes.append(
                f"{who}: {entry['why_not']}; its host gaps count the instrumented kernels only"
            )
            continue
        entry["used"] = True
        entry["steps"] = got["steps"]
        if got["steps"] < got["of"]:
            notes.append(
                f"{who}: {got['of'] - got['steps']} of {got['of']} steps lie outside the torch "
                "profile: their host gaps count the instrumented kernels only"
            )
        aligned[g] = got
        lines.append(dict(got["uninstrumented"], rank=r, gpu=d))
    uninst = max(lines, key=lambda u: u["ns_per_step"]) if lines else None
    if uninst is not None and not several:
        uninst.pop("rank", None)
    return {
        "source": CUPTI_SOURCE,
        "gpus": gpus,
        "notes": notes,
        "aligned": aligned,
        "uninstrumented": uninst,
    }


def _uninstrumented(kt, per_name, count_name, steps_used, un_ns, inst_ns, step_ns) -> dict:
    """The uninstrumented kernels of one GPU's steps: their time per step against the
    instrumented ones', and the longest UNINSTRUMENTED_SHOWN kernels (per_name: each name's time
    summed over the steps, count_name: its launches)."""
    top = [j for j in np.argsort(-per_name, kind="stable").tolist() if per_name[j] > 0]
    return {
        "ns_per_step": un_ns,
        "share_of_step": un_ns / step_ns if step_ns > 0 else 0.0,
        "instrumented_ns_per_step": inst_ns,
        "step_ns": step_ns,
        "steps": steps_used,
        "dominant": un_ns > inst_ns,
        "kernels": [
            {
                "kernel": str(kt["names"][j]),
                "library": library_of(str(kt["names"][j])),
                "ns_per_step": float(per_name[j]) / steps_used,
                "share_of_step": float(per_name[j]) / steps_used / step_ns if step_ns > 0 else 0.0,
                "launches_per_step": float(count_name[j]) / steps_used,
            }
            for j in top[:UNINSTRUMENTED_SHOWN]
        ],
    }


def _gpu_cells(kt, dev, off, g, la, keep, cells, names) -> dict | None:
    """One GPU's steps over every kernel (see _every_kernel); None where none of its steps lies
    inside the profile's kernel rows."""
    from .coverage import instrumented_mask

    idx = np.flatnonzero(dev)
    o = idx[np.argsort(kt["start_ns"][idx], kind="stable")]
    cs, ce, cn = kt["start_ns"][o], kt["end_ns"][o], kt["name"][o]
    ours_names = sorted(set(names[la["name"][la["gpu"] == g]].tolist()))
    inst = instrumented_mask(kt, ours_names)[o]
    longest = int((ce - cs).max())
    lo_p, hi_p = int(cs.min()) - ALIGN_TOLERANCE_NS, int(ce.max()) + ALIGN_TOLERANCE_NS
    k = np.flatnonzero(keep & (la["gpu"] == g))
    kc = la["cell"][k]
    cells_of_g = np.flatnonzero(cells["gpu"] == g).tolist()
    parts_c, parts_s, parts_e, part_inst = [], [], [], []
    used, kernels = [], 0
    per_name = np.zeros(len(kt["names"]), np.float64)
    count_name = np.zeros(len(kt["names"]), np.int64)
    sh_rows, sh_ns = [], []  # the uninstrumented rows: launch-shape findings
    for c in cells_of_g:
        a = int(cells["lo"][c]) - off
        b = a + int(round(cells["period"][c]))
        m = kc == c
        parts_c.append(np.full(int(m.sum()), c))
        parts_s.append(la["start"][k][m] - off)
        parts_e.append(la["end"][k][m] - off)
        part_inst.append(np.ones(int(m.sum()), bool))
        if a < lo_p or b > hi_p:
            continue  # outside the profile: our launches only
        used.append(c)
        j0 = int(np.searchsorted(cs, a - longest, "left"))
        j1 = int(np.searchsorted(cs, b, "left"))
        j = np.arange(j0, j1)
        j = j[ce[j] > a]
        s, e = np.maximum(cs[j], a), np.minimum(ce[j], b)
        kernels += len(j)
        parts_c.append(np.full(len(j), c))
        parts_s.append(s)
        parts_e.append(e)
        part_inst.append(inst[j])
        un = ~inst[j]
        np.add.at(per_name, cn[j][un], (e - s)[un].astype(np.float64))
        np.add.at(count_name, cn[j][un], 1)
        sh_rows.append(o[j][un])
        sh_ns.append((e - s)[un])
    if not used:
        return None
    c = np.concatenate(parts_c).astype(np.int64)
    s = np.concatenate(parts_s).astype(np.int64)
    e = np.concatenate(parts_e).astype(np.int64)
    is_inst = np.concatenate(part_inst)
    oo = np.lexsort((s, c))
    c, s, e, is_inst = c[oo], s[oo], e[oo], is_inst[oo]
    n_cells = len(cells["gpu"])
    busy = union_length(c, s, e, n_cells).astype(np.float64)
    un_busy = union_length(c[~is_inst], s[~is_inst], e[~is_inst], n_cells).astype(np.float64)
    sel = np.array(used, np.int64)
    cells["busy"][sel] = busy[sel]
    cells["gaps"][sel] = cells["period"][sel] - busy[sel]
    # Per cell, the gaps between its kernels (the rest of its gaps lie before the first or after
    # the last: between steps).
    gap, gap_cell = _inner_gaps(c, s, e, with_cells=True)
    inner = np.bincount(gap_cell, weights=gap, minlength=n_cells)
    steps_used = len(used)
    step_ns = float(cells["period"][sel].sum()) / steps_used
    un_ns = float(un_busy[sel].sum()) / steps_used
    inst_ns = float(cells["union"][sel].sum()) / steps_used
    return {
        "cell": c,
        "start": s,
        "end": e,
        "inner_per_cell": inner,
        "kernels": kernels,
        "steps": steps_used,
        "of": len(cells_of_g),
        "uninstrumented": _uninstrumented(
            kt, per_name, count_name, steps_used, un_ns, inst_ns, step_ns
        ),
        "shape_rows": {"row": np.concatenate(sh_rows), "ns": np.concatenate(sh_ns)},
    }


# -- the kernels auto mode cannot see inside: their launch shape (issue 55) ------------------

SHAPE_SOURCE = "launch shape"
SHAPE_NOTE = "estimated from launch shape alone (CUPTI), never from per-SM records"


def _shape_findings(every, inputs, la, cells, where) -> list[Finding]:
    """Wave and idle-SM findings of the uninstrumented kernels CUPTI saw in the steps used
    (every["aligned"]), from their grid, block, registers per thread and shared memory
    (report/occupancy.py): per kernel name, its estimates per launch summed over the steps of
    the GPU where the mean is largest, the evidence of its launch of the largest estimate."""
    rank_of_gpu, gpu_no = where
    best: dict[str, tuple] = {}
    for g, got in every["aligned"].items():
        kt, doc = inputs[int(rank_of_gpu[g])]
        if doc is None:
            continue  # a kernel table alone: no registers or shared memory
        d = int(gpu_no[g])
        sms_ours = int(la["sms"][la["gpu"] == g].max())
        shape = _gpu_shapes(kt, doc, d, sms_ours, got["shape_rows"])
        for name, (total, count, with_it, ev) in shape.items():
            v = total / got["steps"]
            if v > 0 and (name not in best or v > best[name][0]):
                ev.update(launches=count, launches_with_it=with_it)
                ev["launches_per_step"] = count / got["steps"]
                best[name] = (v, g, ev)
    out = []
    for name, (v, g, ev) in best.items():
        kind = ev.pop("kind")
        step_ns = float(cells["period_mean"][g])
        out.append(_finding(kind, name, rank_of_gpu[g], gpu_no[g], v, step_ns, ev))
    return out


def _gpu_shapes(kt, doc, device: int, sms_ours: int, rows: dict) -> dict:
    """Per uninstrumented kernel name of one GPU: (estimate summed, launches, launches with an
    estimate, the evidence of the largest), from its CUPTI rows `rows` (kernel-table row, its
    time inside the step)."""
    from .coverage import sm_counts
    from .occupancy import SmLimits

    props = _device_properties(doc, device)
    limits, limits_from = SmLimits.of_device_properties(props)
    sms = sm_counts(doc).get(device)
    sms_from = "deviceProperties" if sms else "session"
    sms = sms or sms_ours
    out: dict[str, list] = {}
    for row, ns in zip(rows["row"].tolist(), rows["ns"].tolist(), strict=True):
        name = str(kt["names"][kt["name"][row]])
        ev = _shape_evidence(kt, doc, row, sms, limits)
        acc = out.setdefault(name, [0.0, 0, 0, None, -1.0])
        acc[1] += 1
        if ev is None:
            continue
        est = ev["estimate_share"] * ns
        acc[0] += est
        acc[2] += est > 0
        if est > acc[4]:
            ev.update(duration_ns=int(ns), sms_from=sms_from, limits_from=limits_from)
            acc[3], acc[4] = ev, est
    return {n: (a[0], a[1], a[2], a[3]) for n, a in out.items() if a[3] is not None}


def _device_properties(doc, device: int) -> dict | None:
    """The trace's deviceProperties entry of `device`, None where the trace holds none (or not
    a list of objects: a hand-edited or damaged trace, as the fuzz test makes)."""
    props = doc.get("deviceProperties")
    for k, p in enumerate(props if isinstance(props, list) else []):
        if isinstance(p, dict) and p.get("id", k) == device:
            return p
    return None


def _arg_count(args: dict, key: str) -> int | None:
    v = args.get(key)
    return v if isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 2**31 else None


def _shape_evidence(kt, doc, row: int, sms: int, limits) -> dict | None:
    """One CUPTI row's launch shape, residency and waves, and the share of its time a fix of
    its grid would recover (`estimate_share`): for a partial last wave (1 - fill) / ceil(waves),
    for fewer blocks than SMs (1 - blocks / SMs); None where the row does not say its shape."""
    from .occupancy import resident_blocks, waves

    grid, block = kt["grid"][row], kt["block"][row]
    args = doc["traceEvents"][int(kt["event"][row])].get("args") or {}
    regs, smem = _arg_count(args, "registers per thread"), _arg_count(args, "shared memory")
    if (grid <= 0).any() or (block <= 0).any() or regs is None or smem is None or sms <= 0:
        return None
    blocks, threads = int(grid.prod()), int(block.prod())
    res = resident_blocks(threads, regs, smem, limits)
    if res.blocks == 0:
        return None
    w = waves(blocks, sms, res.blocks)
    n = math.ceil(w)
    fill = w - (n - 1)
    per_sm = math.ceil(blocks / sms)  # the busiest SMs' blocks
    if blocks < sms:
        kind, share = "idle_sms", 1.0 - blocks / sms
    elif n == 1:
        # One wave: every block resides at once, so no wave waits for another; what is uneven
        # is the SMs' blocks (per_sm on the busiest, blocks / SMs on the mean): with the SM's
        # throughput shared by its blocks, the busiest SMs set the time.
        kind, share = "partial_wave", 1.0 - blocks / sms / per_sm
    else:
        kind, share = "partial_wave", (1.0 - fill) / n
    ev = {
        "kind": kind,
        "source": SHAPE_SOURCE,
        "estimated_from": SHAPE_NOTE,
        "library": library_of(str(kt["names"][kt["name"][row]])),
        "grid": grid.tolist(),
        "block": block.tolist(),
        "blocks": blocks,
        "threads_per_block": threads,
        "registers_per_thread": regs,
        "shared_memory_bytes": smem,
        "resident_per_sm": res.blocks,
        "limit_binds": res.binds,
        "resident_by_limit": dict(res.by_limit),
        "theoretical_occupancy": res.occupancy(threads, limits),
        "sms": sms,
        "slots": sms * res.blocks,
        "waves": w,
        "last_wave_fill": fill,
        "blocks_on_busiest_sm": per_sm,
        "estimate_share": share,
    }
    occ = args.get("est. achieved occupancy %")
    if isinstance(occ, (int, float)) and not isinstance(occ, bool) and math.isfinite(occ):
        ev["achieved_occupancy_pct_torch"] = float(occ)
    return ev


# -- words ------------------------------------------------------------------------------------


def grid_options(programs: int, slots: int) -> list[tuple[int, int, float]]:
    """Grids that fill whole waves: (programs, waves, work per program relative to now) for the
    whole waves just below and above (below only where it is at least one wave)."""
    waves = programs / max(slots, 1)
    out = []
    for w in sorted({math.floor(waves), math.ceil(waves)}):
        if w >= 1:
            out.append((w * slots, w, programs / (w * slots)))
    return out


def _finding(kind, kernel, rank, gpu, v: float, step_ns: float, ev: dict) -> Finding:
    """A Finding of `v` ns a step, its share of `step_ns` and its evidence put in words."""
    detail, suggestion = _words(kind, ev)
    share = v / step_ns if step_ns > 0 else 0.0
    return Finding(kind, kernel, int(rank), int(gpu), v, share, ev, detail, suggestion)


def _words(kind: str, ev: dict) -> tuple[str, str]:
    """(the evidence in words, the suggestion) of a finding."""
    return _WORDS[kind](ev)


def _shape_words(ev: dict) -> tuple[str, str]:
    """A launch-shape finding's words (a kernel auto mode cannot see inside)."""
    t = format_time
    torch_occ = ev.get("achieved_occupancy_pct_torch")
    occ = f"{100 * ev['theoretical_occupancy']:.0f}% occupancy" + (
        f" (torch's estimate achieved: {torch_occ:.0f}%)" if torch_occ is not None else ""
    )
    shape = (
        f"grid {'x'.join(map(str, ev['grid']))} = {plural(ev['blocks'], 'block')} of "
        f"{ev['threads_per_block']} threads, {ev['registers_per_thread']} registers a thread, "
        f"{ev['shared_memory_bytes']:,} B shared: {ev['resident_per_sm']} resident a SM "
        f"({ev['limit_binds']} bind; {occ}), {ev['waves']:.2f} waves of {ev['sms']} SMs x "
        f"{ev['resident_per_sm']} ({ev['slots']:,} slots)"
    )
    fix = (
        "a shape whose blocks fill whole waves (pad or split the matmul's M/N, another "
        "tile or split-K: torch.backends.cuda.matmul settings, a Triton template via "
        "--via-triton)"
    )
    if ev["blocks"] < ev["sms"]:  # idle SMs
        what = f"{ev['sms'] - ev['blocks']} SMs ran nothing for its {t(ev['duration_ns'])}"
        fix = "more, smaller blocks (split-K, a smaller tile): another algorithm or shape"
    elif ev["waves"] <= 1:
        what = (
            f"one wave: the busiest SMs hold {ev['blocks_on_busiest_sm']} blocks, the mean "
            f"{ev['blocks'] / ev['sms']:.2f}, of its {t(ev['duration_ns'])}"
        )
    else:
        what = (
            f"the last of {math.ceil(ev['waves'])} waves fills {100 * ev['last_wave_fill']:.0f}% "
            f"of the slots, a wave {t(ev['duration_ns'] / math.ceil(ev['waves']))}"
        )
    detail = (
        f"{shape}; {what}; {ev['launches_with_it']:,} of {ev['launches']:,} launches; {SHAPE_NOTE}"
    )
    return detail, fix


def _partial_wave_words(ev: dict) -> tuple[str, str]:
    if ev.get("source") == SHAPE_SOURCE:
        return _shape_words(ev)
    t = format_time
    opts = grid_options(ev["programs"], ev["slots"])
    choices = " or ".join(
        f"{n:,} programs ({plural(w, 'wave')}) with {x:.2f}x the work each" for n, w, x in opts
    )
    fills = "fills" if ev["last_wave_programs"] == 1 else "fill"
    detail = (
        f"{ev['programs']:,} programs = {ev['waves']:.2f} waves of {ev['sms']} SMs x "
        f"{ev['resident_per_sm']} resident ({ev['slots']:,} slots): the last wave's "
        f"{plural(ev['last_wave_programs'], 'program')} {fills} {100 * ev['last_wave_fill']:.0f}% "
        f"of the slots for {t(ev['last_wave_ns'])}; spread over every slot at full residency "
        f"({t(ev['full_wave_program_ns'])} a program) the work takes {t(ev['ideal_ns'])} of "
        f"the {t(ev['span_ns'])} span; {ev['launches_with_it']:,} of {ev['launches']:,} launches"
    )
    suggestion = (
        f"a grid of {choices} (block size scaled by that factor), or a persistent grid of "
        f"{ev['slots']:,} programs looping over the work"
    )
    return detail, suggestion


def _tail_words(ev: dict) -> tuple[str, str]:
    t = format_time
    longs = ev.get("long_programs") or []
    who = ", ".join(
        f"({p['program'][0]},{p['program'][1]},{p['program'][2]})"
        if p["program"][1] or p["program"][2]
        else str(p["program"][0])
        for p in longs[:4]
    )
    ran = ""
    if longs and longs[0]["x_median"]:
        ran = (
            f"; program{'s' if len(longs) > 1 else ''} {who} ran up to "
            f"{longs[0]['x_median']:.1f}x the median program ({t(ev['program_median_ns'])})"
        )
    detail = (
        f"SM {ev['last_sm']} ends {t(ev['tail_ns'])} after the median SM "
        f"(span {t(ev['span_ns'])}, {ev['programs']:,} programs on {ev['sms_used']} SMs)"
        f"{ran}; {ev['launches_with_it']:,} of {ev['launches']:,} launches"
    )
    suggestion = (
        "even out the work per program: split the long programs' work over more programs "
        "(or smaller tiles), start the longest first, or a persistent kernel that takes "
        "work from a queue"
    )
    return detail, suggestion


def _idle_sms_words(ev: dict) -> tuple[str, str]:
    if ev.get("source") == SHAPE_SOURCE:
        return _shape_words(ev)
    k = max(2, math.ceil(ev["sms"] / max(ev["programs"], 1)))  # the split that fills them
    suggestion = (
        f"split each program's work {k} ways (split-K, or a split reduction and a small "
        f"combining pass) to run at least {ev['sms']} programs, or smaller tiles"
    )
    idle = ev["sms"] - ev["sms_used"]
    return (
        f"{ev['programs']:,} programs on {ev['sms']} SMs: {idle} SMs ran nothing for the "
        f"launch's {format_time(ev['span_ns'])}; {ev['launches_with_it']:,} of "
        f"{ev['launches']:,} launches"
    ), suggestion


def _host_gaps_words(ev: dict) -> tuple[str, str]:
    t = format_time
    cupti = ev.get("source") == "cupti"  # CUPTI's rows: the gaps between every kernel
    what = (
        f"GPU idle between kernels (CUPTI: every kernel): {ev['kernels_per_step']:.0f} "
        f"kernels a step ({ev['launches_per_step']:.0f} instrumented), "
        if cupti
        else f"{ev['launches_per_step']:.0f} instrumented launches a step, "
    )
    ran = (
        f"the GPU ran kernels {t(ev['busy_ns'])} of a {t(ev['step_ns'])} step "
        f"(instrumented ones {t(ev['instrumented_busy_ns'])})"
        if cupti
        else f"the GPU ran them {t(ev['busy_ns'])} of a {t(ev['step_ns'])} step"
    )
    wait = ev["wait_for_other_ranks_ns"]
    detail = (
        f"{what}{ev['gaps_per_step']:.0f} gaps between them (median {t(ev['gap_median_ns'])}, "
        f"largest {t(ev['gap_max_ns'])}) and {t(ev['between_steps_ns'])} between steps; {ran}"
        + (f" (waiting {t(wait)} for other ranks, not counted)" if wait > 0 else "")
    )
    suggestion = (
        "the host sets the pace: capture the step in a CUDA graph (torch.compile "
        "mode='reduce-overhead', torch.cuda.graph) or fuse launches into fewer, larger kernels"
    )
    if not cupti:
        suggestion += "; kernels auto mode does not see (cuBLAS, NCCL) may fill some gaps"
    return detail, suggestion


def _slow_rank_words(ev: dict) -> tuple[str, str]:
    t = format_time
    ks = ", ".join(
        f"{printable(k['kernel'])} +{t(k['delta_ns_per_step'])}" for k in ev["kernels"][:3]
    )
    nxt = ev["next_slowest"]
    detail = (
        f"rank {ev['rank']} ran instrumented kernels {t(ev['busy_ns'])} a step, the mean rank "
        f"{t(ev['mean_busy_ns'])} (next slowest: rank {nxt['rank']}, {t(nxt['busy_ns'])})"
        + (f"; most of the difference: {ks}" if ks else "")
    )
    suggestion = (
        "the other ranks wait for it at each collective: split the work evenly across ranks "
        "(uneven inputs: lengths, routing), move work only that rank does, or check its GPU "
        "(clocks, thermals)"
    )
    return detail, suggestion


# The words of each kind of finding.
_WORDS = {
    "partial_wave": _partial_wave_words,
    "tail": _tail_words,
    "idle_sms": _idle_sms_words,
    "host_gaps": _host_gaps_words,
    "slow_rank": _slow_rank_words,
}


# -- the report's section ------------------------------------------------------------------------

TOP = 5


def advise_lines(advice: Advice, width: int = 80, top: int = TOP) -> list[str]:
    """The "What to fix first" section: the `top` findings, each one line of estimate, share and
    kind, then its evidence and suggestion wrapped at `width`."""
    width = max(width, 40)
    if advice.basis == "steps":
        which = number_runs(advice.steps, most=4)
        over = f"mean over {plural(len(advice.steps), 'step')} ({which})"
    elif advice.basis == "recording":
        over = "the whole recording as one step"
    else:
        over = "nothing recorded"
    src = ""
    if advice.gaps_from != "instrumented":
        used = [g["used"] for g in advice.cupti["gpus"]]
        src = f"; {CUPTI_SOURCE}"
        src += "" if all(used) else f" on {sum(used)} of {len(used)} GPUs"
    head = f"What to fix first (time per step, {over}; a step {format_time(advice.step_ns)}{src}):"
    lines = ["", *wrap(head, width)]
    if not advice.findings:
        lines += wrap("  nothing found to recover", width, indent="    ")
    several = advice.gpus > 1
    for i, f in enumerate(advice.findings[:top]):
        where = ""
        if several:
            where = f" (rank {f.rank})" if advice.ranks > 1 else f" (GPU {f.gpu})"
        what = f": {printable(f.kernel)}" if f.kernel else ""
        lines += wrap(
            f"{i + 1:>2}. {format_time(f.estimate_ns_per_step)} ({100 * f.share_of_step:.0f}%) "
            f"{TITLES[f.kind]}{what}{where}",
            width,
            indent="      ",
        )
        lines += wrap(f"    {f.detail}", width, indent="    ")
        lines += wrap(f"    fix: {f.suggestion}", width, indent="    ")
    if len(advice.findings) > top:
        lines.append(f"    ... {len(advice.findings) - top} more (sm-profiler advise FILE --top N)")
    lines += uninstrumented_lines(advice, width)
    lines += wrap(
        f"How each estimate is made and what it cannot see: {DOC}; the kernel lines of one GPU "
        "and its host gaps add up to at most the step; the slowest-rank line overlaps them.",
        width,
    )
    for note in advice.notes:
        if note != INSTRUMENTED_ONLY:  # the host-gap line's fix text says it
            lines += wrap(f"note: {note}", width)
    return lines


def uninstrumented_lines(advice: Advice, width: int) -> list[str]:
    """Where CUPTI saw kernels auto mode does not instrument take longer per step than the
    instrumented ones: one note naming the largest (not a finding: their time is not an
    estimate of what could be recovered)."""
    u = (advice.cupti or {}).get("uninstrumented")
    if not u or not u["dominant"] or not u["kernels"]:
        return []
    t = format_time
    ks = ", ".join(
        printable(k["kernel"])
        + (f" ({k['library']})" if k["library"] else "")
        + f" {t(k['ns_per_step'])}"
        for k in u["kernels"][:3]
    )
    where = f" on rank {u['rank']}" if "rank" in u and advice.ranks > 1 else ""
    text = (
        f"not instrumented{where} (CUPTI): kernels auto mode cannot see inside ran "
        f"{t(u['ns_per_step'])} a step ({100 * u['share_of_step']:.0f}%), the instrumented ones "
        f"{t(u['instrumented_ns_per_step'])}: {ks}. Not counted as recoverable"
    )
    libs = {k["library"] for k in u["kernels"][:3]}
    if libs & {"cuBLAS/CUTLASS matmul", "attention"}:
        text += (
            "; via_triton=True (sm-profiler run --via-triton) runs torch.compile'd matmuls and "
            "attention as Triton templates that auto mode sees inside"
        )
    return wrap(f"    {text}", width, indent="    ")


# -- helpers ----------------------------------------------------------------------------------


def _group_median(group: np.ndarray, values: np.ndarray, n: int) -> np.ndarray:
    """Per group 0..n-1 the median of its values (0 where it has none)."""
    out = np.zeros(n, np.float64)
    if not len(group):
        return out
    o = np.lexsort((values, group))
    g, v = group[o], values[o].astype(np.float64)
    count = np.bincount(g, minlength=n)
    first = np.cumsum(count) - count
    has = np.flatnonzero(count)
    c, f = count[has], first[has]
    out[has] = (v[f + (c - 1) // 2] + v[f + c // 2]) / 2
    return out


__all__ = ["Advice", "Finding", "advise", "advise_lines", "grid_options", "KINDS"]
