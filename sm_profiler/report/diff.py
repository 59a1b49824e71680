"""What changed between two auto-mode recordings of one job, BEFORE and AFTER a fix, and what
BEFORE's advice recovered (`sm-profiler diff`, issue 55).

Each recording (an AutoTable: one file, or a run's folder of rank files joined) is summed per
kernel name over its steps, the recorded steps less those that compiled, as the advisor takes
them; where either recording has no steps, each whole recording counts as one step and the
figures are per recording. Per kernel, from the auto report's per-launch table (launch_table):

  time        its launches' spans summed, every GPU's, over the steps: time per step
  launches    per step
  programs, waves, tail, idle%
              per launch, the mean over the kernel's launches (idle%: weighted by span), as
              the auto report's kernel table has them
  grid        its most frequent grid (x, y, z); num_warps: its compiled variants'

Kernels are matched by name. A kernel that went and one that appeared are said to be probably
one renamed where their names are alike (difflib's ratio >= RENAME_RATIO) or their grid and
launches per step are the same; a kernel of both whose grid or num_warps changed, re-tuned.

For each finding of BEFORE's advice (report/advise.py), recovered is the measured change per
step, BEFORE less AFTER, on the finding's GPU (its rank and GPU number): of the finding's kernel
(its probable new name where it was renamed) for partial waves, tails and idle SMs; of the step
time (the mean step period, as the advisor takes it) for host gaps and the slowest rank; and
recovered / estimate.

Layer: report (it reads AutoTables, the auto report's launch table and the advisor).
"""

from __future__ import annotations

import difflib
import json
from dataclasses import asdict, dataclass, field

import numpy as np

from ..errors import ConfigError, SmProfilerError
from ..text import fit_table, middle, number_runs, plural, printable, wrap
from ..trace.auto_table import AutoTable, cell_bounds, pair_cells
from ..units import report_unit
from ..wire.auto_file import jsonable
from .advise import INSTRUMENTED_ONLY, TITLES, Advice, advise
from .auto_report import kernel_reports, launch_table
from .stats import cell_periods
from .stats_table import format_times

DIFF_VERSION = 1
SCHEMA = "sm_profiler.diff"
RENAME_RATIO = 0.8  # difflib's ratio of two names said to be one kernel renamed
TOP = 10  # findings of BEFORE's advice shown
KERNELS_SHOWN = 20  # kernels of both recordings shown, largest change first
STEP_KINDS = ("host_gaps", "slow_rank")  # findings measured against the step time
ARROW = " → "


@dataclass
class KernelFigures:
    """One kernel name in one recording: time_ns and launches per step (per recording where
    the diff's basis is 'recording'); per launch, the mean over its launches: programs, waves,
    tail_ns, idle_pct; grid, its most frequent [x, y, z]; num_warps, its compiled variants'
    (empty where the file names none)."""

    time_ns: float
    launches: float
    programs: float
    waves: float
    tail_ns: float
    idle_pct: float
    grid: list[int]
    num_warps: list[int]


@dataclass
class GpuFigures:
    """One GPU (rank, GPU number) of a recording: its mean step time (period) over the steps
    it ran, how many, where it ran, and each kernel's time per step on it."""

    rank: int
    gpu: int
    step_ns: float
    steps: int
    device_name: str
    sm_count: int
    kernel_ns: dict[str, float] = field(default_factory=dict)


@dataclass
class Recording:
    """What the diff reads of one recording: `label` ('BEFORE', 'AFTER'), `name` (its path);
    basis 'steps' (the mean over `steps`, those in `left_out` compiled) or 'recording';
    step_ns: the mean step time of the GPU where it is longest."""

    label: str
    name: str
    basis: str
    steps: list[int]
    left_out: list[int]
    launches: int
    step_ns: float
    kernels: dict[str, KernelFigures]
    gpus: dict[tuple[int, int], GpuFigures]
    dropped: int

    def to_dict(self) -> dict:
        return {
            "file": self.name,
            "basis": self.basis,
            "steps": self.steps,
            "left_out_steps": self.left_out,
            "launches": self.launches,
            "step_ns": self.step_ns,
            "gpus": [
                {k: v for k, v in asdict(g).items() if k != "kernel_ns"} for g in self.gpus.values()
            ],
            "dropped_records": self.dropped,
        }


@dataclass
class Recovered:
    """One finding of BEFORE's advice against AFTER: what it estimated per step, what was
    measured (the kernel's time, `kernel_after` being its name in AFTER, or the step time) on
    its GPU in each recording, and recovered = before_ns - after_ns (None where AFTER has no
    such GPU)."""

    kind: str
    kernel: str | None
    rank: int
    gpu: int
    estimate_ns: float
    measured: str
    kernel_after: str | None
    before_ns: float
    after_ns: float | None
    recovered_ns: float | None
    recovered_over_estimate: float | None
    note: str


@dataclass
class Diff:
    """The comparison: per kernel of both (`kernels`: name, BEFORE's and AFTER's figures, the
    change of time per step and what was re-tuned), the kernels that went and appeared, the
    probable renames, BEFORE's advice against AFTER (`findings`) and the notes."""

    before: Recording
    after: Recording
    basis: str
    kernels: list[dict]
    went: list[str]
    appeared: list[str]
    renamed: list[dict]
    findings: list[Recovered]
    more_findings: int
    notes: list[str]

    def to_dict(self) -> dict:
        def figures(rec: Recording, name: str) -> dict:
            return asdict(rec.kernels[name])

        return jsonable(
            {
                "schema": SCHEMA,
                "diff_version": DIFF_VERSION,
                "basis": self.basis,
                "before": self.before.to_dict(),
                "after": self.after.to_dict(),
                "step_change_ns": self.after.step_ns - self.before.step_ns,
                "kernels": self.kernels,
                "went": [{"kernel": k, "before": figures(self.before, k)} for k in self.went],
                "appeared": [{"kernel": k, "after": figures(self.after, k)} for k in self.appeared],
                "renamed": self.renamed,
                "findings": [
                    dict(asdict(f), rank_order=i + 1) for i, f in enumerate(self.findings)
                ],
                "more_findings": self.more_findings,
                "notes": self.notes,
            }
        )

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)


# -- the inputs ----------------------------------------------------------------------------------


def check_auto(table, name: str) -> None:
    """A ConfigError unless `table` is an auto-mode recording (a list of manual captures is
    not: diff compares kernels, launches and steps, which only auto mode records) that holds
    a launch."""
    if not isinstance(table, AutoTable):
        raise ConfigError(
            f"diff compares auto-mode recordings; {name!r} holds captures of the manual ops: "
            "record both runs with sm-profiler run (or sm_profiler.auto() and prof.save()), "
            "or read each capture with sm-profiler stats"
        )
    if not table.num_launches:
        raise ConfigError(
            f"{name!r} recorded no launch: nothing to compare (sm-profiler info says what it "
            "holds; a kernel compiled before auto mode started runs plain: sm-profiler run "
            "profiles the whole script)"
        )


def job_differences(before: AutoTable, after: AutoTable) -> list[str]:
    """How the two recordings' jobs differ, in words: their ranks (world size) and each GPU's
    device and SM count. Run ids are not compared: a fix is measured in a new run, which
    torchrun gives an id of its own."""
    out = []
    rb, ra = _ranks(before), _ranks(after)
    if rb != ra:
        out.append(f"BEFORE has {_ranks_text(rb)}, AFTER {_ranks_text(ra)}")
    gb, ga = _devices(before), _devices(after)
    changed: dict[tuple, list] = {}  # (BEFORE's device, AFTER's) -> the GPUs
    for key in sorted(set(gb) & set(ga)):
        if gb[key] != ga[key]:
            changed.setdefault((gb[key], ga[key]), []).append(key)
    for (db, da), keys in changed.items():
        which = ", ".join(f"rank {r} GPU {g}" for r, g in keys[:3])
        which += f" and {len(keys) - 3} more" if len(keys) > 3 else ""
        out.append(f"{which}: {_device(db)} in BEFORE, {_device(da)} in AFTER")
    if rb == ra and set(gb) != set(ga):
        out.append(f"BEFORE has GPUs {_keys_text(sorted(gb))}, AFTER {_keys_text(sorted(ga))}")
    return out


def _ranks_text(r: tuple[frozenset, int]) -> str:
    ranks, world = r
    text = f"{plural(len(ranks), 'rank')} ({number_runs(sorted(ranks))})"
    return text + (f" of a job of {world}" if world != len(ranks) else "")


def _ranks(table: AutoTable) -> tuple[frozenset, int]:
    """(the ranks recorded, the job's world size: the largest its sessions name, else the
    ranks' count)."""
    ranks = frozenset(int(r) for r in table.ranks()[: max(len(table.sessions), 1)])
    sizes = [s.get("world_size") for s in table.sessions]
    sizes = [int(w) for w in sizes if type(w) is int and 0 < w < 1 << 20]
    return ranks, max(sizes, default=len(ranks))


def _devices(table: AutoTable) -> dict[tuple[int, int], tuple[str, int]]:
    """{(rank, GPU number): (device name, SM count)} of a table's sessions."""
    ranks = table.ranks()
    return {
        (int(ranks[i]), _gpu_no(s)): (_device_name(s), _whole(s.get("sm_count")))
        for i, s in enumerate(table.sessions)
    }


def _device(d: tuple[str, int]) -> str:
    return f"{printable(d[0])} ({d[1]} SMs)" if d[1] else f"{printable(d[0])} (? SMs)"


def _keys_text(keys) -> str:
    """'0:0, 0:1 (rank:GPU)', at most 4 named."""
    more = f" and {len(keys) - 4} more" if len(keys) > 4 else ""
    return ", ".join(f"{r}:{g}" for r, g in keys[:4]) + more + " (rank:GPU)"


def _device_name(s: dict) -> str:
    name = s.get("device_name")
    return name if isinstance(name, str) and name else "a GPU"


def _whole(v) -> int:
    """A count from metadata (a file may say anything), else 0."""
    return int(v) if type(v) is int and 0 <= v < 1 << 20 else 0


def _gpu_no(s: dict) -> int:
    return _whole(s.get("gpu"))


def has_steps(table: AutoTable) -> bool:
    return bool(table.num_launches) and bool((np.asarray(table.launches["step"]) >= 0).any())


def without_steps(table: AutoTable) -> AutoTable:
    """`table` with no launch in a step: the advisor then takes the whole recording as one."""
    launches = dict(table.launches, step=np.full(table.num_launches, -1, np.int64))
    return AutoTable(table.rows, launches, table.kernels, table.sessions, table.metadata)


# -- one recording ---------------------------------------------------------------------------------


def kept_launches(table: AutoTable, per_recording: bool):
    """(which launches count, the steps they are averaged over, the steps left out as
    compiling): the advisor's steps (recorded, less those that compiled, all of them where
    every one did), or every launch as one step."""
    step = np.asarray(table.launches["step"], np.int64)
    if per_recording:
        return np.ones(len(step), bool), [], []
    compiled = table.compile_steps()
    keep = (step >= 0) & ~np.isin(step, compiled)
    if not keep.any():
        keep, compiled = step >= 0, compiled[:0]
    return keep, sorted(int(s) for s in np.unique(step[keep])), [int(s) for s in compiled]


@dataclass
class Summarized:
    """A recording's per-launch figures computed before (a run folder's rank summaries,
    export/job_summaries.py): the report's launch table of its table's launches (report,
    auto_report.launch_table's columns, every launch in order) and advise's measures. With
    them the diff reads no program: a job of thousands of ranks is compared from kilobytes a
    rank."""

    report: dict
    measures: object  # advise.LaunchMeasures


def recording(
    table: AutoTable, label: str, name: str, per_recording: bool, given: Summarized | None = None
) -> Recording:
    """What the diff reads of `table` (see the module's docstring); `given`: its launches'
    report figures, computed before (the launch table is then not computed from programs)."""
    keep, steps, left_out = kept_launches(table, per_recording)
    table = table.select(keep)
    trace = table.decode()
    if given is None:
        t = launch_table(trace)
    else:  # the kept launches' rows, numbered as select numbers the launches it keeps
        kept = np.flatnonzero(keep)
        caps = np.asarray(given.report["capture"], np.int64)
        mine = np.isin(caps, kept)
        t = {k: np.asarray(v)[mine] for k, v in given.report.items()}
        t["capture"] = np.searchsorted(kept, caps[mine])
    n_steps = max(len(steps), 1)
    L = table.launches
    caps = np.asarray(t["capture"], np.int64)
    names = np.array(table.kernel_names() or ["kernel 0"], dtype=object).astype(str)
    l_name = names[np.asarray(L["kernel"], np.int64)[caps]]
    grids = _grids(L, caps, l_name)
    warps = _num_warps(table)
    kernels = {
        k.kernel: KernelFigures(
            k.total_ns / n_steps,
            k.launches / n_steps,
            k.programs,
            k.waves,
            k.tail_ns,
            k.idle_pct,
            grids[k.kernel],
            warps.get(k.kernel, []),
        )
        for k in kernel_reports((trace, t))
    }
    gpus = _gpus(table, t, l_name, per_recording)
    return Recording(
        label,
        name,
        "recording" if per_recording else "steps",
        steps,
        left_out,
        len(caps),
        max((g.step_ns for g in gpus.values()), default=0.0),
        kernels,
        gpus,
        int(table.counts()["dropped"]),
    )


def _grids(L, caps: np.ndarray, l_name: np.ndarray) -> dict[str, list[int]]:
    """Each kernel name's most frequent grid [x, y, z] over its launches (the first of equals:
    the smallest)."""
    if not len(caps):
        return {}
    cols = [np.asarray(L[c], np.int64)[caps] for c in ("grid_x", "grid_y", "grid_z")]
    uniq, name_id = np.unique(l_name, return_inverse=True)
    keys, count = np.unique(np.stack([name_id.reshape(-1), *cols], 1), axis=0, return_counts=True)
    o = np.lexsort((keys[:, 3], keys[:, 2], keys[:, 1], -count, keys[:, 0]))
    first = o[np.r_[True, keys[o, 0][1:] != keys[o, 0][:-1]]]
    return {str(uniq[keys[i, 0]]): [int(v) for v in keys[i, 1:]] for i in first.tolist()}


def _num_warps(table: AutoTable) -> dict[str, list[int]]:
    """Each kernel name's num_warps, over its compiled variants that name one."""
    out: dict[str, set[int]] = {}
    for name, k in zip(table.kernel_names(), table.kernels, strict=False):
        w = k.get("num_warps") if isinstance(k, dict) else None
        if type(w) is int and 0 < w <= 1024:
            out.setdefault(name, set()).add(w)
    return {name: sorted(ws) for name, ws in out.items()}


def _gpus(table: AutoTable, t: dict, l_name: np.ndarray, per_recording: bool) -> dict:
    """GpuFigures per (rank, GPU number): each GPU's mean step period over the steps it ran
    (first launch's start to the next recorded step's, as the advisor takes it; per recording:
    first start to last end), and its kernels' time per step."""
    L = table.launches
    caps = np.asarray(t["capture"], np.int64)
    gpu_of_session = table.gpu_ids()
    gid = gpu_of_session[np.asarray(L["session"], np.int64)[caps]]
    start = np.asarray(L["start_ns"], np.int64)[caps]
    end = np.asarray(L["end_ns"], np.int64)[caps]
    step = np.zeros(len(caps), np.int64)
    if not per_recording:
        step = np.asarray(L["step"], np.int64)[caps]
    uniq_steps = np.unique(step)
    cell, of_step, of_gpu = pair_cells(np.searchsorted(uniq_steps, step), gid)
    n = len(of_step)
    lo, hi = cell_bounds(cell, start, end, n)
    span = hi - lo
    period = span if per_recording else cell_periods(uniq_steps[of_step], of_gpu, lo, span)
    n_gpu = int(gpu_of_session.max()) + 1
    steps_of = np.bincount(of_gpu, minlength=n_gpu)
    mean = np.bincount(of_gpu, weights=period.astype(np.float64), minlength=n_gpu).astype(float)
    mean /= np.maximum(steps_of, 1)
    ranks = table.ranks()
    out: dict[tuple[int, int], GpuFigures] = {}
    for s, sess in enumerate(table.sessions):
        g = int(gpu_of_session[s])
        key = (int(ranks[s]), _gpu_no(sess))
        if key not in out:
            out[key] = GpuFigures(
                *key,
                float(mean[g]),
                int(steps_of[g]),
                _device_name(sess),
                _whole(sess.get("sm_count")),
            )
        mine = gid == g
        if not mine.any():
            continue
        names, inv = np.unique(l_name[mine], return_inverse=True)
        spans = np.bincount(inv.reshape(-1), weights=t["span_ns"][mine].astype(np.float64))
        per = max(int(steps_of[g]), 1)
        out[key].kernel_ns = {str(k): float(v) / per for k, v in zip(names, spans, strict=True)}
    return out


# -- the comparison --------------------------------------------------------------------------------


def diff(
    before: AutoTable,
    after: AutoTable,
    names: tuple[str, str] = ("BEFORE", "AFTER"),
    different_jobs: bool = False,
    cupti=None,
    top: int | None = TOP,
    given: tuple[Summarized | None, Summarized | None] = (None, None),
) -> Diff:
    """The Diff of two auto-mode recordings (AutoTables) of one job, `names` their files (said
    in messages); `cupti`: the torch trace BEFORE carries (the advisor's `cupti=`, as
    `sm-profiler advise` takes it); `top`: the findings of BEFORE's advice compared (None: all);
    `given`: each recording's per-launch figures where they were computed before (a run
    folder's summaries; its table then holds launches alone). Recordings of different jobs
    (ranks, GPUs) are a ConfigError naming what differs, unless `different_jobs`."""
    check_auto(before, names[0])
    check_auto(after, names[1])
    notes: list[str] = []
    differs = job_differences(before, after)
    if differs and not different_jobs:
        raise ConfigError(
            f"{names[0]!r} and {names[1]!r} are recordings of different jobs: "
            f"{'; '.join(differs)}. diff compares two runs of one job on the same GPUs (the "
            "run before a fix and the run after it); pass --different-jobs to compare them anyway"
        )
    if differs:
        notes.append(f"different jobs, compared anyway: {'; '.join(differs)}")
    per_recording = not (has_steps(before) and has_steps(after))
    b = recording(before, "BEFORE", names[0], per_recording, given[0])
    a = recording(after, "AFTER", names[1], per_recording, given[1])
    if per_recording:
        notes.append(_per_recording_note(b, a, before, after))
        before, cupti = without_steps(before), None
    advice = _advice(before, cupti, notes, given[0].measures if given[0] else None)
    common = [k for k in b.kernels if k in a.kernels]
    went = sorted((k for k in b.kernels if k not in a.kernels), key=lambda k: -b.kernels[k].time_ns)
    appeared = sorted(
        (k for k in a.kernels if k not in b.kernels), key=lambda k: -a.kernels[k].time_ns
    )
    if b.kernels and a.kernels and not common:
        notes.append(
            "no kernel name of BEFORE is in AFTER: nothing matched (the kernels that went and "
            "appeared are listed; a probable rename is guessed from names and grids)"
        )
    renamed = _renames(b, a, went, appeared)
    renamed_to = {r["before"]: r["after"] for r in renamed}
    shown = advice.findings if top is None else advice.findings[: max(top, 0)]
    for rec in (b, a):
        if rec.dropped:
            notes.append(
                f"{rec.label} dropped {rec.dropped:,} records (capacity): its launches not kept "
                "are not in its figures"
            )
    return Diff(
        b,
        a,
        b.basis,
        _kernel_rows(b, a, common),
        went,
        appeared,
        renamed,
        [_recovered(f, b, a, renamed_to) for f in shown],
        len(advice.findings) - len(shown),
        notes + _advice_notes(advice, shown),
    )


def _advice_notes(advice: Advice, shown) -> list[str]:
    """The advice's notes that bear on the findings compared: that host gaps count only the
    instrumented kernels, only where a host-gap finding is among them."""
    gaps = any(f.kind == "host_gaps" for f in shown)
    notes = [n for n in advice.notes if gaps or n != INSTRUMENTED_ONLY]
    # diff's own note says a recording without steps counts as one step (_per_recording_note)
    return [n for n in notes if not n.startswith("no steps were recorded")]


def _per_recording_note(b: Recording, a: Recording, before, after) -> str:
    which = [r.label for r, t in ((b, before), (a, after)) if not has_steps(t)]
    return (
        f"{' and '.join(which)} recorded no steps: each whole recording counts as one step, and "
        "every figure is per recording (totals; per launch: the mean over the launches), "
        "BEFORE's advice too; they compare where both recorded the same work (prof.step(), or "
        "sm-profiler run's optimizer steps, make them per step)"
    )


def _advice(table: AutoTable, cupti, notes: list[str], measures=None) -> Advice:
    """BEFORE's advice, as `sm-profiler advise` gives it (a torch trace that cannot be read is
    left out, and said); `measures`: its launches' (advise's), computed before."""
    try:
        return advise(table, cupti=cupti, measures=measures)
    except SmProfilerError as e:
        notes.append(f"BEFORE's torch trace was left out: {e}")
        return advise(table, measures=measures)


def _kernel_rows(b: Recording, a: Recording, common: list[str]) -> list[dict]:
    """Per kernel of both: its figures in each, the change of its time per step (and over
    BEFORE's), what was re-tuned; largest change first."""
    rows = []
    for k in common:
        fb, fa = b.kernels[k], a.kernels[k]
        change = fa.time_ns - fb.time_ns
        rows.append(
            {
                "kernel": k,
                "before": asdict(fb),
                "after": asdict(fa),
                "change_ns": change,
                "change_share": change / fb.time_ns if fb.time_ns > 0 else None,
                "retuned": _retuned(fb, fa),
            }
        )
    rows.sort(key=lambda r: (-abs(r["change_ns"]), -r["before"]["time_ns"], r["kernel"]))
    return rows


def _retuned(fb: KernelFigures, fa: KernelFigures) -> dict | None:
    """{'grid': [before, after], 'num_warps': [before, after]} of what changed (None where
    neither did; num_warps only where both files name it)."""
    out = {}
    if fb.grid != fa.grid:
        out["grid"] = [fb.grid, fa.grid]
    if fb.num_warps and fa.num_warps and fb.num_warps != fa.num_warps:
        out["num_warps"] = [fb.num_warps, fa.num_warps]
    return out or None


def _renames(b: Recording, a: Recording, went: list[str], appeared: list[str]) -> list[dict]:
    """Pairs of a kernel that went and one that appeared, each used once, best first: names
    alike (difflib's ratio >= RENAME_RATIO), or the same grid and launches per step."""
    pairs = []
    for w in went:
        for n in appeared:
            ratio = difflib.SequenceMatcher(None, w, n).ratio()
            fw, fn = b.kernels[w], a.kernels[n]
            same = fw.grid == fn.grid and round(fw.launches, 6) == round(fn.launches, 6)
            why = (["similar name"] if ratio >= RENAME_RATIO else []) + (
                ["same grid and launches"] if same else []
            )
            if why:
                pairs.append((-len(why), -ratio, w, n, why))
    pairs.sort(key=lambda p: p[:4])
    out, used = [], set()
    for _, neg_ratio, w, n, why in pairs:
        if w in used or n in used:
            continue
        used |= {w, n}
        fw, fn = b.kernels[w], a.kernels[n]
        out.append(
            {
                "before": w,
                "after": n,
                "why": why,
                "name_similarity": -neg_ratio,
                "before_ns": fw.time_ns,
                "after_ns": fn.time_ns,
            }
        )
    return out


def _recovered(f, b: Recording, a: Recording, renamed_to: dict[str, str]) -> Recovered:
    """A finding of BEFORE's advice against AFTER (see the module's docstring)."""
    key = (f.rank, f.gpu)
    gb, ga = b.gpus.get(key), a.gpus.get(key)
    name_after, note = None, ""
    if f.kind in STEP_KINDS:
        measured = "step_time"
        before_ns = gb.step_ns if gb else 0.0
        after_ns = ga.step_ns if ga else None
    else:
        measured = "kernel_time"
        name_after = renamed_to.get(f.kernel, f.kernel)
        before_ns = gb.kernel_ns.get(f.kernel, 0.0) if gb else 0.0
        after_ns = ga.kernel_ns.get(name_after, 0.0) if ga else None
        if name_after != f.kernel:
            note = f"probably renamed {name_after}"
        elif f.kernel not in a.kernels:
            note = "not in AFTER: all its time counts as recovered"
        elif ga is not None and f.kernel not in ga.kernel_ns:
            note = f"not run on rank {f.rank} GPU {f.gpu} in AFTER: all its time there counts"
    if ga is None:
        note = f"AFTER has no rank {f.rank} GPU {f.gpu}"
    recovered = None if after_ns is None else before_ns - after_ns
    ratio = None
    if recovered is not None and f.estimate_ns_per_step > 0:
        ratio = recovered / f.estimate_ns_per_step
    return Recovered(
        f.kind,
        f.kernel,
        f.rank,
        f.gpu,
        f.estimate_ns_per_step,
        measured,
        name_after,
        before_ns,
        after_ns,
        recovered,
        ratio,
        note,
    )


# -- words -------------------------------------------------------------------------------------------


def diff_lines(d: Diff, width: int = 80, kernels_shown: int = KERNELS_SHOWN) -> list[str]:
    """The diff as text at `width` columns: what each recording holds, the kernels of both
    (time per step, launches), what changed per launch, the kernels that went, appeared or
    were renamed, and BEFORE's advice against what AFTER recovered."""
    width = max(width, 40)
    tops = [abs(v) for r in d.kernels for v in (r["before"]["time_ns"], r["after"]["time_ns"])]
    tops = [max(tops, default=0.0), max((f.estimate_ns for f in d.findings), default=0.0)]
    unit = report_unit(tops + [d.before.step_ns, d.after.step_ns])

    def t(v: float, signed: bool = False) -> str:
        text = format_times([v], unit)[0]
        if not text.strip("-0. " + unit[0]):  # rounds to none: no sign, no decimals
            return f"0 {unit[0]}"
        return ("+" if signed and v > 0 else "") + text

    per = "a step" if d.basis == "steps" else "recorded"
    lines = []
    if (d.before.name, d.after.name) != (d.before.label, d.after.label):
        names = f"BEFORE {printable(d.before.name)}, AFTER {printable(d.after.name)}"
        lines += wrap(f"sm-profiler diff: {names}", width)
    for rec in (d.before, d.after):
        change = ""
        if rec is d.after and d.before.step_ns > 0:
            dv = d.after.step_ns - d.before.step_ns
            share = _percent(dv / d.before.step_ns)
            change = " (no change)" if t(dv) == t(0) else f" ({t(dv, True)}, {share})"
        lines += wrap(f"  {_recording_text(rec)}, {per} {t(rec.step_ns)}{change}", width, "    ")
    lines += _kernel_table(d, width, t, kernels_shown)
    lines += _shape_lines(d, width, t, kernels_shown)
    lines += _came_and_went(d, width, t)
    lines += _finding_lines(d, width, t)
    for note in d.notes:
        lines += wrap(f"note: {note}", width)
    return lines


def _recording_text(rec: Recording) -> str:
    gpus = list(rec.gpus.values())
    devices = list(dict.fromkeys(_device((g.device_name, g.sm_count)) for g in gpus))
    where = f"{plural(len(gpus), 'GPU')}: {', '.join(devices)}" if len(gpus) > 1 else devices[0]
    if rec.basis == "steps":
        what = f"{plural(len(rec.steps), 'step')} ({number_runs(rec.steps, most=4)})"
        if rec.left_out:
            what += f", {plural(len(rec.left_out), 'step')} that compiled left out"
    else:
        what = f"no steps ({rec.launches:,} launch{'' if rec.launches == 1 else 'es'})"
    return f"{rec.label}: {what} on {where}"


def _kernel_table(d: Diff, width: int, t, shown: int) -> list[str]:
    if not d.kernels:
        return []
    what = (
        "time per step (mean over each file's steps"
        if d.basis == "steps"
        else "time in each recording (totals over the whole recording"
    )
    lines = ["", *wrap(f"kernels of both, {what}, every GPU summed):", width)]
    rows = []
    for r in d.kernels[:shown]:
        fb, fa = r["before"], r["after"]
        share = r["change_share"]
        rows.append(
            [
                printable(r["kernel"]),
                t(fb["time_ns"]),
                t(fa["time_ns"]),
                t(r["change_ns"], True),
                "-" if share is None else _percent(share),
                _pair(fb["launches"], fa["launches"], "{:.0f}" if _whole_counts(r) else "{:.1f}"),
            ]
        )
    headers = ["kernel", "BEFORE", "AFTER", "change", "%", "launches"]
    others = sum(max([len(h)] + [len(x[i]) for x in rows]) + 2 for i, h in enumerate(headers) if i)
    rows = [[middle(x[0], max(24, width - others))] + x[1:] for x in rows]
    table, dropped = fit_table(headers, rows, width, drop=(5, 4), shrink=0)
    lines += table
    if len(d.kernels) > shown:
        lines.append(f"... {len(d.kernels) - shown} more kernels (--json lists every one)")
    if dropped:
        lines += wrap(f"({', '.join(dropped)} left out to fit {width} columns)", width)
    return lines


def _percent(share: float) -> str:
    """'+12%', '-40%', '0%' (a change that rounds to none has no sign)."""
    text = f"{100 * share:+.0f}%"
    return "0%" if text in ("+0%", "-0%") else text


def _whole_counts(r: dict) -> bool:
    return all(float(r[s]["launches"]).is_integer() for s in ("before", "after"))


def _pair(before: float, after: float, fmt: str) -> str:
    a, b = fmt.format(before), fmt.format(after)
    return a if a == b else a + ARROW + b


def _shape_lines(d: Diff, width: int, t, shown: int) -> list[str]:
    """Per kernel of both shown whose launches changed shape: programs, waves, tail, idle% (as
    printed: a change too small to print is none), and what was re-tuned."""
    out = []
    for r in d.kernels[:shown]:
        fb, fa = r["before"], r["after"]
        parts = []
        for key, label, fmt in (
            ("programs", "programs", "{:,.0f}"),
            ("waves", "waves", "{:.2f}"),
            ("idle_pct", "idle%", "{:.0f}"),
        ):
            pair = _pair(fb[key], fa[key], fmt)
            if ARROW in pair:
                parts.append(f"{label} {pair}")
        if t(fb["tail_ns"]) != t(fa["tail_ns"]):
            parts.append(f"tail {t(fb['tail_ns'])}{ARROW}{t(fa['tail_ns'])}")
        changed = r["retuned"] or {}
        tuned = []
        if "grid" in changed:
            tuned.append("grid " + ARROW.join("x".join(map(str, g)) for g in changed["grid"]))
        if "num_warps" in changed:
            warps = ("/".join(map(str, w)) for w in changed["num_warps"])
            tuned.append("num_warps " + ARROW.join(warps))
        if tuned:
            parts.append("re-tuned: " + ", ".join(tuned))
        if parts:
            out += wrap(f"  {printable(r['kernel'])}: {'; '.join(parts)}", width, "    ")
    if not out:
        return []
    return [
        "",
        *wrap("per launch, where it changed (the mean over the kernel's launches):", width),
    ] + out


def _came_and_went(d: Diff, width: int, t) -> list[str]:
    per = "a step" if d.basis == "steps" else "in the recording"
    renamed = {r["before"] for r in d.renamed} | {r["after"] for r in d.renamed}
    out = []
    for label, names, rec in (("went", d.went, d.before), ("appeared", d.appeared, d.after)):
        names = [k for k in names if k not in renamed]
        if names:
            items = ", ".join(
                f"{printable(k)} ({t(rec.kernels[k].time_ns)} {per})" for k in names[:8]
            )
            more = f" and {len(names) - 8} more" if len(names) > 8 else ""
            out += wrap(f"{label}: {items}{more}", width)
    for r in d.renamed:
        out += wrap(
            f"probably renamed: {printable(r['before'])}{ARROW}{printable(r['after'])} "
            f"({' and '.join(r['why'])}; {t(r['before_ns'])}{ARROW}{t(r['after_ns'])} {per})",
            width,
        )
    return ["", *out] if out else []


def _finding_lines(d: Diff, width: int, t) -> list[str]:
    """BEFORE's findings, each as `advise` heads it, then its estimate beside what AFTER
    recovered and the time measured in each."""
    head = (
        f"BEFORE's advice against AFTER ({'per step' if d.basis == 'steps' else 'per recording'}"
        "; recovered: BEFORE less AFTER on the finding's GPU):"
    )
    lines = ["", *wrap(head, width)]
    if not d.findings:
        return lines + ["  BEFORE's advice found nothing to recover"]
    ranks = len({k[0] for k in d.before.gpus})
    for i, f in enumerate(d.findings):
        where = ""
        if len(d.before.gpus) > 1:
            where = f" (rank {f.rank})" if ranks > 1 else f" (GPU {f.gpu})"
        what = f": {printable(f.kernel)}" if f.kernel else ""
        lines += wrap(f"{i + 1:>2}. {TITLES[f.kind]}{what}{where}", width, "      ")
        if f.measured == "step_time":
            of = "step time" if d.basis == "steps" else "the recording's time"
        else:
            of = "its time per step" if d.basis == "steps" else "its time in the recording"
        if f.recovered_ns is None:
            got = f"not measured: {printable(f.note)}"
        else:
            ratio = f.recovered_over_estimate
            share = "" if ratio is None else f", {100 * ratio:.0f}% of it"
            got = f"recovered {t(f.recovered_ns)}{share} ({of} {t(f.before_ns)}{ARROW}{t(f.after_ns)})"
            got += f"; {printable(f.note)}" if f.note else ""
        lines += wrap(f"    estimate {t(f.estimate_ns)}, {got}", width, "    ")
    if d.more_findings:
        lines.append(f"    ... {d.more_findings} more (sm-profiler diff --top N)")
    return lines


__all__ = ["Diff", "DIFF_VERSION", "diff", "diff_lines", "job_differences"]
