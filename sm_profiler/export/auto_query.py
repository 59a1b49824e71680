"""SQL across a job's ranks in bounded memory (`sm-profiler query DIR`, docs/query.md, "A job's
ranks"): each rank file's tables (report/tables.py's events, lanes, launches, unmatched, every
row with its `rank`) written once as Parquet into a cache, then DuckDB over the Parquet of
every rank, read as a query scans it: no rank's records are held whole, however many ranks.

    DIR/auto.parquet/                 the cache (DIR not writable: a folder of our own under the
        events/rank3.parquet          temporary directory, or --cache)
        lanes/rank3.parquet
        launches/rank3.parquet
        unmatched/rank3.parquet
        rank3.json                    what the Parquet was made from: the rank file's name,
                                      size and mtime, its run; the Parquet's own sizes and
                                      mtimes; written last

A rank's Parquet is reused while its rank file keeps its size and modification time (and the
Parquet theirs), and written again (one rank at a time per process) when either changes. Times
are each rank's on the host clock where its file carries clock samples, as `merge DIR` lines
ranks up.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import dataclass

import numpy as np

from ..errors import CaptureError, ConfigError, MissingDependencyError
from ..paths import atomic_output
from ..report.tables import TABLES, run_sql, to_arrow
from ..text import plural
from . import auto_job as jobs

CACHE_NAME = "auto.parquet"
# What a cache entry holds; an entry of another version is written again.
CACHE_VERSION = 1
DEFAULT_MEMORY_MB = 1024
# What a process writing one rank's Parquet holds at its peak, with its libraries (a rank of
# 150,000 programs: 250 MB, measured), and the fewest stale ranks per process worth starting one
# (a process takes about a second to start, a rank 0.2-0.4 s to write).
WRITER_MB = 256
RANKS_PER_WRITER = 4
# A world size past this is not a job's (a damaged session): no rank is said missing from it.
MAX_WORLD_SIZE = 1 << 20


@dataclass(frozen=True)
class RankSource:
    """A rank file as the cache knows it: its rank, path, size and modification time."""

    rank: int
    path: str
    size: int
    mtime_ns: int

    @classmethod
    def of(cls, rank: int, path: str) -> RankSource:
        try:
            st = os.stat(path)
        except OSError as e:
            raise CaptureError(f"cannot read {path!r}: {e.strerror or e}") from e
        return cls(rank, path, st.st_size, st.st_mtime_ns)

    def key(self) -> dict:
        """What the cache entry of this file must say to be reused."""
        return {
            "version": CACHE_VERSION,
            "rank": self.rank,
            "source": os.path.basename(self.path),
            "size": self.size,
            "mtime_ns": self.mtime_ns,
        }


def query_job(
    folder: str,
    sql: str,
    max_rows: int | None = None,
    memory_mb: int = DEFAULT_MEMORY_MB,
    cache: str | None = None,
    workers: int = 1,
) -> tuple[list, list, list[str]]:
    """`sql` over every rank of `folder` (a run's folder): (column names, at most `max_rows`
    rows, notes for the user). DuckDB holds at most `memory_mb` MiB and uses the cores this
    process may run on; the Parquet cache is written first where stale (module doc), by up to
    `workers` processes of their own (the command line's: writers(memory_mb); from a script,
    start them only under `if __name__ == "__main__":`, which they import again)."""
    _need_pyarrow()
    sources = [RankSource.of(r, p) for r, p in jobs.folder_files(folder).items()]
    where, notes = cache_folder(folder, cache)
    keys = refresh(sources, where, workers)
    notes += missing_ranks(sources, keys)
    paths = table_files(sources, where)
    spill = os.path.join(where, "duckdb.tmp")
    try:
        return (*run_sql(paths, sql, max_rows, memory_mb, usable_cores(), spill), notes)
    except ConfigError as e:
        if "Out of Memory" not in str(e):
            raise
        raise ConfigError(f"{e} (--memory-mb {memory_mb}: give more)") from None


def _need_pyarrow() -> None:
    try:
        import pyarrow.parquet  # noqa: F401
    except ImportError as e:
        raise MissingDependencyError("pyarrow", "query DIR", extra="query") from e


def writers(memory_mb: int) -> int:
    """How many processes write ranks' Parquet at once: one per core, each a rank at a time
    (about WRITER_MB at most for a rank of 150,000 programs), as many as `memory_mb` holds."""
    return max(min(usable_cores(), memory_mb // WRITER_MB), 1)


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity, where the system tells it)."""
    try:
        return max(len(os.sched_getaffinity(0)), 1)
    except (AttributeError, OSError):
        return max(os.cpu_count() or 1, 1)


# -- where the cache is ------------------------------------------------------------------------


def cache_folder(folder: str, cache: str | None = None) -> tuple[str, list[str]]:
    """(the cache's folder, notes): `cache` where given (it must be writable), else
    DIR/auto.parquet, else (that cannot be written: a read-only folder, a file in its place) a
    folder of this user's under the temporary directory, kept for the next query of DIR, and a
    note saying so."""
    if cache is not None:
        return _writable_cache(cache, "--cache"), []
    beside = os.path.join(folder, CACHE_NAME)
    try:
        return _made_writable(beside), []
    except OSError as e:
        why = e.strerror or str(e)
    elsewhere = _temporary_cache(folder)
    return elsewhere, [
        f"cannot write the Parquet cache beside the rank files ({beside}: {why}); it is in "
        f"{elsewhere} (--cache DIR puts it elsewhere)"
    ]


def _made_writable(cache: str) -> str:
    """`cache` with its table folders, after a file was written in it and removed (the one
    proof that holds for root and read-only mounts alike); an OSError where it cannot be."""
    for t in TABLES:
        os.makedirs(os.path.join(cache, t), exist_ok=True)
    fd, probe = tempfile.mkstemp(dir=cache, prefix=".probe-")
    os.close(fd)
    os.remove(probe)
    return cache


def _writable_cache(cache: str, what: str) -> str:
    """`cache`, made writable (_made_writable), or a CaptureError naming `what` and the fix."""
    try:
        return _made_writable(cache)
    except OSError as e:
        raise CaptureError(
            f"cannot write the Parquet cache {cache!r} ({what}): {e.strerror or e}; give "
            "--cache DIR, a folder you can write"
        ) from e


def _temporary_cache(folder: str) -> str:
    """A cache of `folder` under the temporary directory, in a folder only this user may use
    (another user's files there could stand for our Parquet)."""
    mine = os.path.join(tempfile.gettempdir(), f"sm-profiler-{os.getuid()}")
    try:
        os.makedirs(mine, mode=0o700, exist_ok=True)
        st = os.lstat(mine)
    except OSError as e:
        raise CaptureError(
            f"cannot write the Parquet cache of {folder} beside its rank files, nor in {mine!r} "
            f"({e.strerror or e}): give --cache DIR, a folder you can write"
        ) from e
    if st.st_uid != os.getuid() or st.st_mode & 0o077 or not os.path.isdir(mine):
        raise CaptureError(
            f"cannot write the Parquet cache of {folder} beside its rank files, and {mine!r} is "
            "not a private folder of yours: give --cache DIR, a folder you can write"
        )
    digest = hashlib.sha256(os.path.realpath(folder).encode()).hexdigest()[:16]
    return _writable_cache(os.path.join(mine, f"parquet-{digest}"), folder)


# -- the cache's entries -----------------------------------------------------------------------


def entry_path(cache: str, rank: int, table: str | None = None) -> str:
    """Rank `rank`'s Parquet of `table` in `cache`, or (None) its key file."""
    if table is None:
        return os.path.join(cache, f"rank{rank}.json")
    return os.path.join(cache, table, f"rank{rank}.parquet")


def refresh(sources: list[RankSource], cache: str, workers: int = 1) -> list[dict]:
    """Each rank's cache key, in the order of `sources`: the entries whose key matches their
    rank file reused, the others written one rank at a time by each of `workers` processes at
    most. The ranks must be of one run: checked from the entries' keys and the stale files'
    metadata before anything is written."""
    keys = [_read_key(cache, src) for src in sources]
    runs = [
        jobs.file_identity(s.path) if k is None else k.get("job")
        for s, k in zip(sources, keys, strict=True)
    ]
    jobs.check_one_run([s.path for s in sources], runs)
    stale = [i for i, k in enumerate(keys) if k is None]
    if stale:
        from ..progress import stage

        with stage(f"writing the Parquet of {len(stale)} of {len(sources)} rank files"):
            workers = min(workers, len(stale) // RANKS_PER_WRITER)
            written = write_ranks([sources[i] for i in stale], cache, workers)
        for i, key in zip(stale, written, strict=True):
            keys[i] = key
    return keys


def table_files(sources: list[RankSource], cache: str) -> dict[str, list[str]]:
    """{table: its Parquet file of each rank}."""
    return {t: [entry_path(cache, s.rank, t) for s in sources] for t in TABLES}


def missing_ranks(sources: list[RankSource], keys: list[dict]) -> list[str]:
    """A note naming the ranks of the job (its world size, as its sessions say) that have no
    file in the folder (left out by `run --ranks`, failed, or not copied in), else none."""
    world = max((k.get("world_size") or 0 for k in keys), default=0)
    missing = sorted(set(range(world)) - {s.rank for s in sources})
    if not missing:
        return []
    shown = ", ".join(map(str, missing[:8])) + (" ..." if len(missing) > 8 else "")
    have = "has" if len(missing) == 1 else "have"
    return [
        f"{plural(len(missing), 'rank')} of the job's {world} {have} no file here ({shown}): "
        f"the tables hold the other {world - len(missing)}"
    ]


def write_ranks(stale: list[RankSource], cache: str, workers: int) -> list[dict]:
    """write_rank for each of `stale` (their keys), in this process or (workers > 1) in as many
    of their own; the first failure, in the ranks' order, is raised and the ranks not begun are
    left."""
    if workers <= 1:
        return [write_rank(src, cache) for src in stale]
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    # Spawned, not forked: pyarrow's and DuckDB's threads in this process do not survive a fork.
    pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"))
    try:
        return list(pool.map(write_rank, stale, [cache] * len(stale)))
    finally:
        pool.shutdown(cancel_futures=True)


def _read_key(cache: str, src: RankSource) -> dict | None:
    """The key of rank `src.rank`'s cache entry where it names this very file and its tables'
    Parquet are as written, else None (written again)."""
    try:
        with open(entry_path(cache, src.rank), encoding="utf-8") as f:
            kept = json.load(f)
    except (OSError, ValueError):
        return None
    if not isinstance(kept, dict) or any(kept.get(k) != v for k, v in src.key().items()):
        return None
    if kept.get("parquet") != _parquet_stamps(cache, src.rank):
        return None  # a table's file gone, or changed since (by hand, by another program)
    return kept


def _parquet_stamps(cache: str, rank: int) -> dict[str, list[int] | None]:
    """{table: [size, mtime_ns] of rank `rank`'s Parquet of it, None where there is none}."""
    out = {}
    for t in TABLES:
        try:
            st = os.stat(entry_path(cache, rank, t))
            out[t] = [st.st_size, st.st_mtime_ns]
        except OSError:
            out[t] = None
    return out


def write_rank(src: RankSource, cache: str) -> dict:
    """Rank `src`'s tables as Parquet in `cache`, then its key (so an entry cut short is never
    taken for a whole one), which it returns."""
    import pyarrow.parquet as pq

    table = _rank_table(src)
    trace = table.on_host_clock().decode()
    for name in TABLES:
        with atomic_output(entry_path(cache, src.rank, name)) as tmp:
            pq.write_table(rank_columns(to_arrow(trace, name), src.rank), tmp, compression="zstd")
    del trace
    key = {**src.key(), "parquet": _parquet_stamps(cache, src.rank)}
    key.update(job=table.metadata.get("job"), world_size=_world_size(table))
    with atomic_output(entry_path(cache, src.rank)) as tmp:
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(key, f)
    return key


def _world_size(table) -> int | None:
    """The job's number of ranks as the table's sessions name it (torchrun's WORLD_SIZE)."""
    sizes = [s.get("world_size") for s in table.sessions]
    sizes = [n for n in sizes if type(n) is int and 0 < n <= MAX_WORLD_SIZE]
    return max(sizes, default=None)


def _rank_table(src: RankSource):
    """The AutoTable of a rank file, whose sessions (where they name one) are of its rank."""
    from ..trace.auto_table import AutoTable
    from ..wire.capture import load

    table = load(src.path)
    if not isinstance(table, AutoTable):
        raise CaptureError(
            f"{src.path!r} is not an auto-mode file (sm-profiler run / prof.save): a run's "
            "folder holds the rank files `sm-profiler run` writes; move it out"
        )
    named = sorted({s["rank"] for s in table.sessions if type(s.get("rank")) is int})
    if named and named != [src.rank]:
        raise CaptureError(
            f"{os.path.basename(src.path)} holds the recording of rank "
            f"{', '.join(map(str, named))}, not of rank {src.rank}: rename it to "
            f"auto.rank{named[0]}.npz (the rank it recorded) or move it out of the folder"
        )
    return table


def rank_columns(tbl, rank: int):
    """A table of one rank as every rank's Parquet holds it: whole numbers in int64 (a rank's
    columns are as narrow as its own values allow; the ranks' files must agree) and its `rank`
    (the file's, which the launches' own column names too) after `capture`."""
    import pyarrow as pa

    cols, names = [], []
    for field, col in zip(tbl.schema, tbl.columns, strict=True):
        if field.name == "rank":
            continue
        if pa.types.is_integer(field.type):
            col = col.cast(pa.int64())
        cols.append(col)
        names.append(field.name)
    at = names.index("capture") + 1 if "capture" in names else 0
    cols.insert(at, pa.array(np.full(tbl.num_rows, rank, np.int64)))
    names.insert(at, "rank")
    return pa.Table.from_arrays(cols, names=names)
