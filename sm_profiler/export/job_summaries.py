"""A job's answer from its ranks' summaries (issue 57, item 2): what `stats DIR` and `advise DIR`
read of a run's folder.

Each rank file's summary (auto.rank3.npz.summary.json: wire/summary_file.py, written by `run`
and by `sm-profiler summarize FILE`) is read and checked against the file beside it; a rank
file without one is summarized from its records in a worker process, whose records are dropped
once it is done (its summary is not written: `sm-profiler summarize` writes it). The ranks go
through a pool of one process per core this process may run on (os.sched_getaffinity), a rank
at a time in each: at most that many ranks' records are ever held, however many ranks the job
has. What is kept of a rank is its launches and what its programs said of each
(report/rank_summary.py), joined into one table of the job's launches from which the report and
the advisor say what they say of every rank's records loaded and joined (AutoTable.concat).
"""

from __future__ import annotations

import glob
import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from itertools import repeat

from ..errors import CaptureError, ConfigError, SmProfilerError
from ..report.rank_summary import JobBuilder, JobLaunches, RankPart, rank_part, summarize
from ..text import number_runs, plural
from ..wire.auto_schedule import whole_number
from ..wire.summary_file import SUFFIX, read_summary, rebuild, summary_path, write_summary
from . import auto_torch_parts as torch_parts
from .auto_job import (
    PROFILED_RANKS,
    RANK_FILE,
    check_a_rank_each,
    check_one_run,
    folder_files,
    rank_files,
)

WORKERS_ENV = "SM_PROFILER_WORKERS"


@dataclass
class JobInputs:
    """A run folder's ranks, joined: their launches (JobLaunches), their files, those read from
    records (no summary), notes (ranks missing); their torch traces' kernel rows as advise's
    `cupti` takes them ({rank: doc}, one process's folder its doc; None without), and notes on
    those (a trace left out, and why)."""

    launches: JobLaunches
    paths: list[str]
    from_records: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    torch_docs: dict | None = None
    torch_notes: list[str] = field(default_factory=list)


def summary_folder(folder: str) -> bool:
    """Whether `folder` is a run's folder of rank files (or its one auto.npz), or of their
    summaries alone, which the job's answer reads from summaries; a folder of flight-recorder
    dumps is not (read as it was)."""
    if _summaries_alone(folder):
        return True
    found = folder_files(folder)
    return all(
        RANK_FILE.match(os.path.basename(p)) or os.path.basename(p) == "auto.npz"
        for p in found.values()
    )


def rank_entries(folder: str) -> dict[int, str]:
    """{rank: its rank file's path} of a run's folder (folder_files), and of the ranks whose
    summary alone was copied there (auto.rank3.npz.summary.json without auto.rank3.npz: a job's
    answer needs no rank's records), the path their records would have."""
    alone = _summaries_alone(folder)
    if not alone:
        return folder_files(folder)
    found = rank_files(folder, strict=True)
    found.update({r: p for r, p in alone.items() if r not in found})
    return dict(sorted(found.items()))


def _summaries_alone(folder: str) -> dict[int, str]:
    """{rank: the records' path} of the rank summaries in `folder` whose rank file is not."""
    out = {}
    for path in glob.glob(os.path.join(glob.escape(folder), "auto.rank*.npz" + SUFFIX)):
        records = path[: -len(SUFFIX)]
        m = RANK_FILE.match(os.path.basename(records))
        if m and not os.path.exists(records):
            out[int(m.group(1))] = records
    return out


def load_job(folder: str, steps: str | None = None, workers: int | None = None) -> JobInputs:
    """The JobInputs of a run's folder: each rank's summary, or (none, or `steps` given: these
    steps only) its records summarized in a worker; `workers` processes (default: the cores this
    process may run on). A CaptureError where a summary disagrees with its records, is damaged
    or of a newer version, where the files are of several runs or two hold one rank."""
    entries = rank_entries(folder)
    return load_ranks_of(entries, folder, steps, workers)


def load_ranks_of(
    entries: dict[int, str], folder: str, steps: str | None = None, workers: int | None = None
) -> JobInputs:
    """load_job of the rank files `entries` ({rank: path}) of the run folder `folder`."""
    paths = list(entries.values())
    job, parts, from_records = JobBuilder(), [], []
    for part, read in _parts(paths, steps, workers):
        job.add(part)  # its columns taken: what is kept of it is its sessions and metadata
        parts.append(part)
        if read:
            from_records.append(part.name)
    if steps is not None and not any(p.num_launches for p in parts):
        raise ConfigError(f"no launch of {folder!r} is in steps {steps}")
    check_one_run(paths, [p.metadata.get("job") for p in parts])
    check_a_rank_each(paths, parts)
    notes = missing_ranks(parts, folder)
    docs, torch_notes = _torch_docs(list(entries), parts)
    return JobInputs(job.finish(), paths, from_records, notes, docs, torch_notes)


def carry_torch_traces(paths: list[str]) -> bool:
    """Whether any of these rank files carries a torch trace (`run --torch`), read from their
    zip directories alone."""
    import zipfile

    for path in paths:
        try:
            with zipfile.ZipFile(path) as z:
                if f"{torch_parts.MEMBER}.npy" in z.namelist():
                    return True
        except (OSError, zipfile.BadZipFile):
            continue
    return False


def _torch_docs(ranks: list[int], parts: list[RankPart]):
    """(advise's `cupti` of the ranks' torch traces, notes), as the rank files' traces read whole
    give it (auto_torch_parts.stored): {rank: doc} of those that carry one, one process's folder
    its doc, None without; where one could not be read, none (as then), and a note why."""
    notes = [n for p in parts for n in p.notes]
    errors = [p.torch_error for p in parts if p.torch_error]
    if errors:
        return None, [*notes, f"the torch trace was left out: {errors[0]}"]
    docs = {r: p.torch_doc for r, p in zip(ranks, parts, strict=True) if p.torch_doc is not None}
    if not docs:
        return None, notes
    if len(parts) == 1 and os.path.basename(parts[0].name).startswith("auto.npz"):
        return docs[ranks[0]], notes
    return docs, notes


def missing_ranks(tables: list, folder: str) -> list[str]:
    """A note naming the ranks of the job that have no file in `folder` (those `run --ranks`
    profiled, as the files' metadata says; else every rank of WORLD_SIZE, as the sessions say
    it) and what the answer is then over; none where every rank is there."""
    world, present, profiled = 0, set(), set()
    for t in tables:
        for s in t.sessions:
            w, r = s.get("world_size"), s.get("rank")
            if type(w) is int and 0 < w <= 1 << 24:
                world = max(world, w)
            if type(r) is int:
                present.add(r)
        got = t.metadata.get(PROFILED_RANKS)
        if isinstance(got, list) and all(type(r) is int for r in got):
            profiled.update(got)
    expected = profiled or set(range(world))
    missing = sorted(expected - present)
    if not missing:
        return []
    of = (
        f"the {len(expected)} profiled (run --ranks {number_runs(sorted(expected))})"
        if profiled
        else f"the job's {world} (WORLD_SIZE)"
    )
    return [
        f"rank{'s' if len(missing) > 1 else ''} {number_runs(missing)} of {of} "
        f"{'have' if len(missing) > 1 else 'has'} no file in {folder}: this is the answer of "
        f"the {plural(len(present), 'rank')} found; copy the missing ranks' auto.rankN.npz (or "
        "their .summary.json) here for the whole job"
    ]


def _parts(paths: list[str], steps: str | None, workers: int | None):
    """(RankPart, whether it was read from records) of each rank file, in order."""
    return _each(rank_of_file, paths, workers, steps)


def _each(fn, paths: list[str], workers: int | None, *args):
    """fn(path, *args) of each path, in order: in a pool of `workers` processes (default: one
    per core this process may run on) where there are several paths and cores, a path at a
    time in each for what is slow (records), a few for what is quick (summaries)."""
    n = workers if workers is not None else default_workers()
    n = max(1, min(n, len(paths)))
    if n == 1:
        yield from map(fn, paths, *(repeat(a) for a in args))
        return
    chunk = max(1, min(16, len(paths) // (8 * n)))
    # Started from a clean server process, not forked from this one (its threads, its state).
    pool = ProcessPoolExecutor(n, mp_context=multiprocessing.get_context("forkserver"))
    try:
        yield from pool.map(fn, paths, *(repeat(a) for a in args), chunksize=chunk)
    finally:
        # On an error, the paths not begun are not read (a summary that disagrees stops all).
        pool.shutdown(wait=True, cancel_futures=True)


def default_workers() -> int:
    """The processes that read a job's ranks: SM_PROFILER_WORKERS where set (1: in this process),
    else one per core this process may run on."""
    v = os.environ.get(WORKERS_ENV, "")
    if not v:
        return len(os.sched_getaffinity(0))
    n = whole_number(v)
    if n is None or n < 1:
        raise ConfigError(
            f"{WORKERS_ENV}={v!r} is not a number of processes: give 1 or more, or unset it "
            "(one per core)"
        )
    return n


def write_summaries(paths, workers: int | None = None):
    """Write the summary of each auto-mode file in `paths` (a run folder: each of its rank
    files) beside it; yields (its path, its size in bytes) as each is written."""
    files: list[str] = []
    for p in paths:
        p = os.fspath(p)
        files += list(folder_files(p).values()) if os.path.isdir(p) else [p]
    yield from _each(summary_of_file, files, workers)


def summary_of_file(path: str) -> tuple[str, int]:
    """Write the summary of the auto-mode file `path` beside it (with its torch trace, its own
    findings over every kernel CUPTI saw); returns (the summary's path, its size)."""
    from .auto_torch_parts import read

    table = _auto_table(path)
    notes: list[str] = []
    doc = summarize(table, read(path, notes))
    spath = write_summary(path, doc)
    return spath, os.path.getsize(spath)


def _auto_table(path: str):
    from ..trace.auto_table import AutoTable
    from ..wire.capture import load

    table = load(path)
    if not isinstance(table, AutoTable):
        raise CaptureError(
            f"{path!r} holds captures of the manual ops, not an auto-mode recording: only "
            "sm-profiler run's files (auto.npz, auto.rankN.npz) have a summary"
        )
    return table


def rank_of_file(path: str, steps: str | None = None) -> tuple[RankPart, bool]:
    """A rank file's RankPart: from its summary where it has one (and no `steps` are asked for),
    checked against it; else from its records (those steps only), which are then dropped.
    Returns (the part, whether it was read from records)."""
    spath = summary_path(path)
    alone = not os.path.exists(path)  # its summary copied without it
    if alone and steps is not None:
        raise CaptureError(
            f"--steps reads each rank's records, and {path} is not there (only its summary): "
            "copy it there, or leave --steps out"
        )
    if alone or (steps is None and os.path.exists(spath)):
        fix = f"rebuild it with `{rebuild(path)}`"
        return rank_part(read_summary(spath, path), spath, fix), False
    table = _auto_table(path)
    if steps is not None:
        table = _steps_of(table, steps)
    doc, error, notes = None, None, []
    try:
        doc = torch_parts.read(path, notes)
    except SmProfilerError as e:
        error = str(e)
    part = rank_part(summarize(table, doc, reader=False), path, "record it again")
    part.torch_error, part.notes = error, notes
    return part, True


def _steps_of(table, steps: str):
    """The launches of `steps` of one rank's table: none (its sessions kept) where it has none
    of them, as a job's table joined and then selected keeps every rank's sessions."""
    try:
        return table.select_steps(steps)
    except ConfigError:
        import numpy as np

        return table.select(np.zeros(table.num_launches, bool))
