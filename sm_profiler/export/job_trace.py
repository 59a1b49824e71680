"""A job's trace that opens: `sm-profiler merge DIR` of many ranks (issue 57, item 3).

Every rank drawn in full costs about 10 MB of trace (the rank's default timeline: 100,000
programs in full and its summary counters), so a job of 128 ranks made 1 GB and one of 1,024
ranks 8 GB, which no browser opens. The job's trace holds instead, within a size budget
(`max_mb`, DEFAULT_MAX_MB; what the Perfetto UI opens: BENCHMARKS.md, "A job's trace in the
Perfetto UI"):

    in full     the ranks that matter (choose_ranks): the slowest, the fastest and a median
                one by their time per step, and those where the advisor's first findings are
                largest; or the ranks asked for (`ranks`), or every rank (`all_ranks`); each
                drawn as `merge` draws a rank ('GPU r  · kernels', 'GPU r · SM s')
    counters    every other rank: one 'busy SMs' counter per GPU, the mean over equal bins of
                the job's span (as many bins as the budget leaves, at most JOB_BINS), under one
                top-level track, COUNTER_GROUP

It says what it left out and the command that draws it, in every root's description and the
counters' (and returns it, for the command line to print).

Nothing holds more than one rank's records at a time: a first pass reads each rank file for its
facts (RankFacts: its sessions, span, time per step, its own advice's findings), then the ranks
in full are loaded, drawn and written one at a time, then every other rank's counters computed a
rank at a time (on several cores where the machine has them). The first pass is what per-rank
summaries can replace (rank_facts is the one function to point at them).
"""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import NamedTuple

import numpy as np

from ..errors import CaptureError, ConfigError
from ..text import number_runs, plural
from ..units import format_time

# The budget by default, in MB (10**6 bytes). The Perfetto UI (v52, headless Chromium 156)
# opened a job's trace of 83 MB of ranks in full in 25 s, the browser's memory 2.5 GB and
# growing 22 bytes for each byte of such a trace (6.6 for the counters'): about 2.9 GB at 100 MB,
# and the in-browser trace processor's 4 GB (wasm32) at about 150 MB (BENCHMARKS.md, "A job's
# trace in the Perfetto UI").
DEFAULT_MAX_MB = 100
MB = 1_000_000
# The counters' bins: at most this many over the job's span (about a pixel each on a wide
# screen, twice over), at least MIN_JOB_BINS (coarser than that says nothing of a step).
JOB_BINS = 4096
MIN_JOB_BINS = 64
# The advisor's first findings whose ranks are drawn in full.
ADVISED_FINDINGS = 3
# The top-level track that holds the other ranks' counters: after every 'GPU r' track in the
# UI's order (by name), and what its counters' y-axis is shared by.
COUNTER_GROUP = "other ranks · busy SMs"
BUSY_SMS = "busy SMs"
# Bytes of one counter sample but its time delta (TracePacket: length, timestamp tag, sequence
# id, TrackEvent of its type and double_counter_value), and of a counter track's header at most
# but its name (clock snapshot, descriptor, defaults).
SAMPLE_BYTES = 19
TRACK_BYTES = 120
GROUP_BYTES = 4096  # the counters' group track and its description, at most
# Ranks whose dropped records the descriptions list by rank, at most.
DROPS_LISTED = 16
# Ranks from which the passes over every rank run on several cores.
POOL_MIN_RANKS = 8


class RankFacts(NamedTuple):
    """What the job's trace needs of one rank before drawing any: read from its file, held
    for every rank (a few hundred bytes each)."""

    rank: int  # its sessions' (the file name's where they name none)
    named_ranks: list[int]  # the ranks its sessions name
    path: str
    gpus: list[str]  # a label per session (GPU): its counter's name
    world_size: int  # the job's size its sessions name (0: none)
    offsets_ns: list[int | None]  # per session, %globaltimer - host clock (None: no samples)
    lo_ns: list[int]  # per session, its first start (on its GPU's clock)
    hi_ns: list[int]  # per session, its last end
    step_ns: dict[int, int]  # per recorded step, the GPU time (launches' union; slowest GPU)
    whole_ns: int  # the same over the whole recording
    dropped: int  # records its buffers dropped
    launches: int  # launches recorded (none: no time to rank it by)
    findings: list[tuple[str, str | None, float]]  # its own advice: kind, kernel, ns per step
    job: object  # its run's identity (metadata "job"), for export/auto_job's checks

    # What auto_job.check_a_rank_each reads of a table.
    @property
    def sessions(self) -> list[dict]:
        return [{"rank": r} for r in self.named_ranks]


def rank_facts(path: str, advised: bool = True, file_rank: int = 0) -> RankFacts:
    """The facts of the rank file at `path` (its whole table read and checked; its advice where
    `advised`); `file_rank`: its rank where its sessions name none (its file name's)."""
    from ..report.stats import union_length
    from ..trace.auto_table import AutoTable, clock_offset_ns
    from ..wire.capture import load

    table = load(path)
    if not isinstance(table, AutoTable):
        raise CaptureError(f"{path!r} is not an auto-mode file (sm-profiler run / prof.save)")
    L = table.launches
    n_s = len(table.sessions)
    sess = np.asarray(L["session"], np.int64)
    step = np.asarray(L["step"], np.int64)
    start, end = np.asarray(L["start_ns"], np.int64), np.asarray(L["end_ns"], np.int64)
    lo = np.full(n_s, np.iinfo(np.int64).max)
    hi = np.full(n_s, np.iinfo(np.int64).min)
    np.minimum.at(lo, sess, start)
    np.maximum.at(hi, sess, end)
    # Per (step, session) the union of its launches, the step's time its slowest GPU's.
    steps = np.unique(step[step >= 0])
    cell = np.searchsorted(steps, step) * n_s + sess
    recorded = step >= 0
    busy = union_length(cell[recorded], start[recorded], end[recorded], len(steps) * n_s)
    whole = union_length(sess, start, end, n_s)
    named = [s["rank"] for s in table.sessions if type(s.get("rank")) is int]
    worlds = [s.get("world_size") for s in table.sessions]
    findings = []
    if advised:
        from ..report.advise import advise

        a = advise(table)
        findings = [(f.kind, f.kernel, float(f.estimate_ns_per_step)) for f in a.findings]
    return RankFacts(
        rank=named[0] if named else file_rank,
        named_ranks=sorted(set(named)),
        path=path,
        gpus=[str(s.get("gpu", i)) for i, s in enumerate(table.sessions)],
        world_size=max([w for w in worlds if type(w) is int and 0 < w < 1 << 20], default=0),
        offsets_ns=[clock_offset_ns(s) for s in table.sessions],
        lo_ns=[int(v) for v in lo],
        hi_ns=[int(v) for v in hi],
        step_ns={
            int(s): int(b.max()) for s, b in zip(steps, busy.reshape(-1, max(n_s, 1)), strict=True)
        },
        whole_ns=int(whole.max(initial=0)),
        dropped=int(table.counts()["dropped"]),
        launches=table.num_launches,
        findings=findings,
        job=table.metadata.get("job"),
    )


# -- which ranks are drawn in full ---------------------------------------------------------------


def rank_times(facts: list[RankFacts]) -> tuple[dict[int, float], str]:
    """Each rank's time per step: its GPU time (the union of its launches, its slowest GPU's)
    per step over the steps every rank recorded, else over its whole recording; and what that
    is, in words. Ranks that recorded no launch have no time."""
    facts = [f for f in facts if f.launches]
    shared = set.intersection(*(set(f.step_ns) for f in facts)) if facts else set()
    if shared:
        what = f"GPU time per step, over the {plural(len(shared), 'step')} every rank recorded"
        return {f.rank: sum(f.step_ns[s] for s in shared) / len(shared) for f in facts}, what
    return {f.rank: float(f.whole_ns) for f in facts}, "GPU time over the whole recording"


def advised_ranks(
    findings: Iterable[tuple[int, str, str | None, float]], top: int = ADVISED_FINDINGS
) -> dict[int, str]:
    """{rank: why} of the ranks where the advisor's `top` first findings are largest, from
    (rank, kind, kernel, estimate per step) of each rank's own findings (or of a job's advice:
    one per kind and kernel, on its rank)."""
    from ..report.advise import TITLES

    best: dict[tuple[str, str | None], tuple[float, int]] = {}
    for rank, kind, kernel, est in findings:
        if est > best.get((kind, kernel), (-math.inf, 0))[0]:
            best[(kind, kernel)] = (est, rank)
    ranked = sorted(best.items(), key=lambda kv: (-kv[1][0], kv[1][1], str(kv[0])))[:top]
    out: dict[int, str] = {}
    for (kind, kernel), (est, rank) in ranked:
        what = TITLES.get(kind, kind) + (f" of {kernel}" if kernel else "")
        out.setdefault(rank, f"advisor: {what}, {format_time(est)} a step")
    return out


def choose_ranks(
    times: dict[int, float], advised: dict[int, str] | None = None
) -> dict[int, list[str]]:
    """{rank: why} of the ranks drawn in full by default, the slowest first: the slowest, the
    fastest and the median rank by `times` (a median of an even count: the lower one), then
    those the advisor names (`advised`: {rank: why})."""
    order = sorted(times, key=lambda r: (times[r], r))
    out: dict[int, list[str]] = {}
    if order:
        for r, why in (
            (order[-1], "slowest"),
            (order[0], "fastest"),
            (order[(len(order) - 1) // 2], "median"),
        ):
            out.setdefault(r, []).append(why)
    for r, why in (advised or {}).items():
        if r in times:
            out.setdefault(r, []).append(why)
    return out


def picked_ranks(text: str, present: list[int], folder: str) -> dict[int, list[str]]:
    """`--ranks` checked against the ranks whose files are in `folder`."""
    from .auto_job import rank_numbers

    ranks = rank_numbers(text)
    absent = [r for r in ranks if r not in present]
    if absent:
        raise ConfigError(
            f"--ranks {text}: {folder!r} holds no file of rank {number_runs(absent)}; its "
            f"ranks are {number_runs(present)}: name those"
        )
    return {r: ["asked for"] for r in ranks}


# -- the passes over the ranks ---------------------------------------------------------------------


def _each(fn: Callable, args: list[tuple]) -> Iterator:
    """fn(*a) for each of `args`, in order: on a pool of processes (one per core) where the
    machine has several cores and there are POOL_MIN_RANKS ranks or more, else here. A forked
    pool only where this process runs no other thread (a fork copies no thread but the
    caller's: a lock another holds would stay held)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    if (cores or 1) < 2 or len(args) < POOL_MIN_RANKS or threading.active_count() > 1:
        yield from (fn(*a) for a in args)
        return
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(cores, mp_context=multiprocessing.get_context("fork")) as pool:
        yield from pool.map(fn, *zip(*args, strict=True), chunksize=4)


def _counters(path: str, shift: bool, lo_ns: int, hi_ns: int, bins: int) -> dict:
    """busy_sms_binned of the rank file at `path`, one track per session (moved onto the host
    clock where `shift`)."""
    from ..trace.summary import busy_sms_binned
    from ..wire.capture import load

    table = load(path)
    if shift:
        table = table.on_host_clock()
    L, rows = table.launches, table.rows
    session = np.repeat(np.asarray(L["session"], np.int64), np.asarray(L["rows"], np.int64))
    n = len(table.sessions)
    return busy_sms_binned(
        session, rows["sm"], rows["start_ns"], rows["end_ns"], n, lo_ns, hi_ns, bins
    )


class _Output:
    """The trace file being written, and its bytes so far against the budget."""

    def __init__(self, f, cap: int):
        self.f, self.cap, self.size = f, cap, 0

    def write(self, data: bytes) -> bool:
        """Write `data` if it fits under the cap (False, nothing written, where it does not)."""
        if self.size + len(data) > self.cap:
            return False
        self.f.write(data)
        self.size += len(data)
        return True


# -- the job's trace -----------------------------------------------------------------------------


def write_job_trace(
    files: dict[int, str],
    out,
    *,
    max_mb: float = DEFAULT_MAX_MB,
    ranks: str | None = None,
    all_ranks: bool = False,
    command: str = "sm-profiler merge DIR",
    folder: str = "the folder",
    align: str = "auto",
) -> dict:
    """Write the job's trace of the rank files `files` ({rank: path}) to `out` (a
    .perfetto-trace) within `max_mb` MB; see the module doc. ranks: '0,5,17', the ranks drawn in
    full (each must have a file); all_ranks: every rank in full. command: how the user merged,
    for the commands the trace and the result name. align: 'auto' (each rank on the host clock
    where every rank has clock samples), 'clock' or 'none', as merge's. Returns what was written
    (job_lines say it).
    A ConfigError where the ranks in full do not fit, raised before `out` is touched."""
    from ..paths import atomic_output, check_writable

    check_writable(out)
    if not (isinstance(max_mb, (int, float)) and math.isfinite(max_mb) and max_mb > 0):
        raise ConfigError(
            f"--max-mb {max_mb}: give a size in MB above 0, e.g. {DEFAULT_MAX_MB} (the default)"
        )
    if align not in ("auto", "clock", "none"):
        raise ConfigError(f"--align {align}: a run's folder is aligned by 'clock' or 'none'")
    info, by_rank = _plan(files, ranks, all_ranks, folder, align)
    info.update(max_bytes=int(max_mb * MB), command=command)
    counters = _CounterSizes(info, by_rank)
    room = counters.bytes(MIN_JOB_BINS)  # kept for the counters at their coarsest
    info["counters_room"] = room
    if room >= info["max_bytes"]:
        raise ConfigError(
            f"the other {plural(len(info['counters']), 'rank')}' busy-SM counters need "
            f"{size_text(room)} at their coarsest ({MIN_JOB_BINS} bins), more than --max-mb "
            f"{max_mb:g}: raise --max-mb to {math.ceil(room / MB) + 1} or more"
        )
    # The slowest rank first: the trace opens on its span.
    order = sorted(info["full"], key=lambda r: (-info["times_ns"].get(r, 0), r))
    with atomic_output(out) as tmp, open(tmp, "wb") as f:
        sink = _Output(f, info["max_bytes"] - room)
        info["full_bytes"] = _write_full(sink, order, by_rank, info)
        sink.cap = info["max_bytes"]
        if info["counters"]:
            bins = counters.bins(sink.cap - sink.size)
            info["bins"], info["bin_ns"] = bins, counters.span_ns / bins
            _write_counters(sink, by_rank, bins, len(order), info)
        info["bytes"] = sink.size
    return info


def _plan(files: dict[int, str], ranks: str | None, all_ranks: bool, folder: str, align: str):
    """(what write_job_trace writes, {rank: RankFacts}): every rank's facts (checked as one
    run, a file a rank), the ranks drawn in full and why, the others, the ranks missing, the
    time axis."""
    from .auto_job import check_a_rank_each, check_one_run

    paths = list(files.values())
    advised = ranks is None and not all_ranks
    facts = list(_each(rank_facts, [(p, advised, r) for r, p in files.items()]))
    check_one_run(paths, [f.job for f in facts])
    check_a_rank_each(paths, facts)
    by_rank: dict[int, RankFacts] = {}
    for f in sorted(facts, key=lambda f: f.rank):
        if f.rank in by_rank:  # a file whose sessions name no rank, numbered as another's
            a, b = (os.path.basename(x.path) for x in (by_rank[f.rank], f))
            raise CaptureError(
                f"{a} and {b} are both rank {f.rank} (one names no rank, its file name says "
                f"{f.rank}): move one out of the folder"
            )
        by_rank[f.rank] = f
    present = list(by_rank)
    times, time_basis = rank_times(facts)
    if all_ranks:
        full = {r: ["every rank"] for r in present}
    elif ranks is not None:
        full = picked_ranks(ranks, present, folder)
    else:
        named = advised_ranks((f.rank, *x) for f in facts for x in f.findings)
        full = choose_ranks(times, named)
    clocked = all(o is not None for f in facts for o in f.offsets_ns)
    if align == "clock" and not clocked:
        raise ConfigError("--align clock: a rank's file has no clock samples; use --align none")
    shift = clocked and align != "none"
    world = max([f.world_size for f in facts], default=0)
    info = {
        "method": "clock" if shift else "none",
        "span": _job_span(facts, shift),
        "ranks": present,
        "missing": [r for r in range(max(world, max(present) + 1)) if r not in by_rank],
        "full": full,
        "counters": [r for r in present if r not in full],
        "times_ns": times,
        "time_basis": time_basis,
        "asked": not advised,
        "dropped": {f.rank: f.dropped for f in facts},
    }
    return info, by_rank


class _CounterSizes:
    """The most bytes the other ranks' counters take at a number of bins, and the bins that
    fit in a number of bytes: a track's header and name, and a sample (SAMPLE_BYTES and its
    time delta, at most the job's span) per bin and two more (the first, the last at 0)."""

    def __init__(self, info: dict, by_rank: dict[int, RankFacts]):
        lo, hi = info["span"]
        self.span_ns = max(hi - lo, 1)
        self.tracks = sum(len(by_rank[r].gpus) for r in info["counters"])
        self.per_track = TRACK_BYTES + len(COUNTER_GROUP) + 40  # the longest name, its rank's
        self.sample = SAMPLE_BYTES + _varint_len(self.span_ns)

    def bytes(self, bins: int) -> int:
        if not self.tracks:
            return 0
        return self.tracks * (self.per_track + (bins + 2) * self.sample) + GROUP_BYTES

    def bins(self, room: int) -> int:
        per_track = (room - GROUP_BYTES) // self.tracks - self.per_track
        return int(min(JOB_BINS, self.span_ns, per_track // self.sample - 2))


def _job_span(facts: list[RankFacts], shift: bool) -> tuple[int, int]:
    """The first start and last end of every rank's programs (on the host clock where
    `shift`): the trace's origin and the counters' span."""
    los, his = [], []
    for f in facts:
        for a, b, off in zip(f.lo_ns, f.hi_ns, f.offsets_ns, strict=True):
            d = -off if shift and off is not None else 0
            if a <= b:  # a session that launched nothing has no span
                los.append(a + d)
                his.append(b + d)
    return (min(los), max(his)) if los else (0, 1)


def size_text(n_bytes: float) -> str:
    """'12.3 MB', or '4.1 kB' below a tenth of a MB."""
    return f"{n_bytes / MB:.1f} MB" if n_bytes >= MB / 10 else f"{n_bytes / 1000:.1f} kB"


def _varint_len(v: int) -> int:
    return max(1, -(-int(v).bit_length() // 7))


def _write_full(sink: _Output, order, by_rank, info: dict):
    """The ranks of `order` drawn in full, one at a time, as `merge` draws a rank; {rank: its
    bytes}. A ConfigError where they do not fit under the sink's cap (what each takes said)."""
    from ..trace.drawing import drawing_of
    from ..trace.timeline import build
    from ..wire.capture import load
    from .perfetto import join, rank_writer

    width = len(str(max(info["ranks"])))
    about = _about(info)
    shift, lo = info["method"] == "clock", info["span"][0]
    sizes: dict[int, int] = {}
    opened = False
    for i, r in enumerate(order):
        table = load(by_rank[r].path)
        if shift:
            table = table.on_host_clock()
        w = rank_writer(r, drawing_of(build(table.decode())), i, width)
        # An internal invariant: every rank's start is in its facts (one that recorded nothing
        # has no time to write).
        if w.origin < lo and table.num_rows:
            raise ValueError(f"rank {r} starts at {w.origin} ns, before the job's {lo} ns")
        del table
        opens = not opened and w.focus is not None
        opened |= opens
        chunks = join(w, lo, opens, about).chunks()
        sizes[r] = 0
        for chunk in chunks:
            if not sink.write(chunk):
                sizes[r] += len(chunk) + sum(len(c) for c in chunks)
                raise ConfigError(_too_big(sizes, order, info))
            sizes[r] += len(chunk)
    return sizes


def _too_big(sizes: dict[int, int], order: list[int], info: dict) -> str:
    """Why the ranks in full do not fit (the last of `sizes` went past), and what to do."""
    reserve = info["counters_room"]
    *fit, last = list(sizes)
    limit = f"--max-mb {info['max_bytes'] / MB:g}"
    counters = f" with {size_text(reserve)} kept for the other ranks' counters" if reserve else ""
    if not fit:
        need = sizes[last] + reserve
        return (
            f"rank {last} alone takes {size_text(sizes[last])} drawn in full, more than "
            f"{limit} allows{counters}: raise --max-mb to {math.ceil(need / MB) + 1} or more"
        )
    done = sum(sizes[r] for r in fit)
    mean = (done + sizes[last]) / len(sizes)
    need = done + sizes[last] + mean * (len(order) - len(sizes)) + reserve
    return (
        f"the {len(order)} ranks drawn in full do not fit in {limit}{counters}: "
        f"{'rank' if len(fit) == 1 else 'ranks'} {', '.join(map(str, fit))} "
        f"take{'s' if len(fit) == 1 else ''} {size_text(done)}, rank {last} "
        f"{size_text(sizes[last])} more; draw fewer (--ranks {','.join(map(str, fit))}) or "
        f"raise --max-mb to about {math.ceil(need / MB * 1.05) + 1}"
    )


def _write_counters(sink: _Output, by_rank, bins: int, n_full: int, info: dict):
    """The busy-SM counters of the ranks not drawn in full, a rank at a time, in `bins` bins,
    under COUNTER_GROUP (after the `n_full` ranks' uuids)."""
    from .perfetto import counter_group, counter_tracks

    group = (n_full + 1) << 40
    if not sink.write(counter_group(group, COUNTER_GROUP, _counter_about(info))):
        raise ValueError("the counters' group does not fit the room kept for it")
    uuid = group + 1
    others, (lo, hi) = info["counters"], info["span"]
    args = [(by_rank[r].path, info["method"] == "clock", lo, hi, bins) for r in others]
    for r, table in zip(others, _each(_counters, args), strict=True):
        gpus = by_rank[r].gpus
        at = np.searchsorted(table["group"], np.arange(len(gpus) + 1))
        tracks = [
            (
                f"GPU {r} · {BUSY_SMS}" if len(gpus) == 1 else f"GPU {r} (device {g}) · {BUSY_SMS}",
                table["time_ns"][at[k] : at[k + 1]],
                table["value"][at[k] : at[k + 1]],
            )
            for k, g in enumerate(gpus)
        ]
        # An internal invariant: the bins were chosen so that every track fits.
        if not sink.write(counter_tracks(group, uuid, tracks, lo, BUSY_SMS)):
            raise ValueError(f"rank {r}'s counters do not fit the room kept for them")
        uuid += len(tracks)


def _drawn(info: dict) -> str:
    """'rank 5 (slowest), rank 0 (fastest), ...' of the ranks drawn in full."""
    return ", ".join(f"rank {r} ({'; '.join(why)})" for r, why in info["full"].items())


def _basis(info: dict) -> str:
    """How the default choice timed the ranks, or nothing where the ranks were asked for."""
    return "" if info["asked"] else f"; slowest, fastest and median by {info['time_basis']}"


def _others_command(info: dict) -> str:
    """The command that draws left-out ranks in full (two of them as the example)."""
    example = ",".join(map(str, info["counters"][:2]))
    return f"{info['command']} --ranks {example} (any ranks)"


def _about(info: dict) -> list[str]:
    """The lines every root's description carries: the job, what is drawn in full and why,
    what is not and how to draw it."""
    n = len(info["ranks"])
    lines = [
        f"{plural(n, 'rank')} on one time axis, aligned by {info['method']}; drawn in full: "
        f"{_drawn(info)}{_basis(info)}",
        _dropped_line(info),
    ]
    if info["counters"]:
        lines.append(
            f"the other {plural(len(info['counters']), 'rank')} "
            f"({number_runs(info['counters'])}) as their GPUs' busy SMs under "
            f"'{COUNTER_GROUP}'; to draw them in full: {_others_command(info)}"
        )
    if info["missing"]:
        lines.append(missing_note(info))
    return lines


def _dropped_line(info: dict) -> str:
    """'records dropped: 4 (rank 0: 0, rank 1: 4)': every rank's count in a job of a few
    (DROPS_LISTED), else those of the ranks that dropped any, the first DROPS_LISTED."""
    per = info["dropped"]
    shown = [(r, n) for r, n in per.items() if n or len(per) <= DROPS_LISTED]
    more = " ..." if len(shown) > DROPS_LISTED else ""
    listed = ", ".join(f"rank {r}: {n:,}" for r, n in shown[:DROPS_LISTED])
    return f"records dropped: {sum(per.values()):,}" + (f" ({listed}{more})" if shown else "")


def _counter_about(info: dict) -> list[str]:
    """The counters' description: what each is, what is left out and how to draw it."""
    full = sum(info["full_bytes"].values())
    every = math.ceil(full / max(len(info["full_bytes"]), 1) * len(info["ranks"]) * 1.05 / MB) + 1
    return [
        f"busy SMs of each GPU of the {plural(len(info['counters']), 'rank')} not drawn in "
        f"full: the SMs running at least one of its programs, the mean over each of "
        f"{info['bins']:,} bins of {format_time(info['bin_ns'])} of the job's span",
        f"drawn in full: {_drawn(info)}{_basis(info)}",
        f"to draw others in full: {_others_command(info)}; every rank: {info['command']} "
        f"--all-ranks --max-mb {every}",
    ]


def missing_note(info: dict) -> str:
    """The line that names the ranks of the job with no file in the folder."""
    missing = info["missing"]
    return (
        f"no file of rank {number_runs(missing)} (a job of {len(info['ranks']) + len(missing)} "
        f"ranks): the trace holds the {len(info['ranks'])} there; copy the missing "
        "auto.rankN.npz files into the folder and merge again"
    )


def job_lines(info: dict, path: str) -> list[str]:
    """What write_job_trace wrote, for the command line: the file, the ranks in full and why,
    those left out as counters and the command that draws them."""
    lines = [
        f"wrote {path} ({size_text(info['bytes'])} of the {info['max_bytes'] / MB:g} MB "
        f"budget): {plural(len(info['ranks']), 'rank')}, aligned by {info['method']}",
        f"  in full: {_drawn(info)}",
    ]
    if info["counters"]:
        lines.append(
            f"  as busy-SM counters (a track per GPU, mean per {format_time(info['bin_ns'])}): "
            f"{plural(len(info['counters']), 'rank')} ({number_runs(info['counters'])})"
        )
        lines.append("  " + _counter_about(info)[-1])
    return lines
