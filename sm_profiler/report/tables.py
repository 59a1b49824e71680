"""A trace as tables for your own questions: pandas, Arrow, and SQL through DuckDB.

    events     one row per range or instant: capture, lane, sm, block, group, event (id), name,
               kind ('range' / 'instant'), start_ns, end_ns, duration_ns, self_ns (a range's
               time less the ranges nested directly inside; 0 for instants)
    lanes      one row per lane: capture, lane, sm, block, group, group_name, anchor_ns,
               written, attempted, dropped, initialized
    launches   one row per capture (auto mode adds gpu, rank, step, programs): capture, name (as the trace names it: 'gemm (launch 2)'),
               kernel, num_blocks, num_groups, capacity, emulated, start_ns, end_ns
    unmatched  begins without an end and ends without a begin: capture, lane, sm, block, group,
               event, name, kind ('begin' / 'end'), time_ns

Times are absolute %globaltimer ns. pandas, pyarrow and duckdb are optional and imported here
only (`pip install -e '.[query]'`).
"""

from __future__ import annotations

import numpy as np

from ..errors import ConfigError, MissingDependencyError
from ..trace.model import TABLE_VIEWS, UNMATCHED_BEGIN, TraceData
from ..trace.nesting import self_time
from ..trace.timeline import lane_extent, lane_row_of, launch_spans

TABLES = ("events", "lanes", "launches", "unmatched")


def columns(trace: TraceData, table: str) -> dict[str, np.ndarray | tuple]:
    """The numpy columns of one table; a string column is (codes, categories)."""
    if table == "events":
        ev = trace.events
        return {
            **{k: ev[k] for k in ("capture", "lane", "sm", "block", "group", "event")},
            "name": _names(trace, ev["event"]),
            "kind": (ev["kind"].astype(np.int8), ["range", "instant"]),
            "start_ns": ev["start_ns"],
            "end_ns": ev["end_ns"],
            "duration_ns": ev["end_ns"] - ev["start_ns"],
            "self_ns": self_time(trace),
        }
    if table == "lanes":
        ln = trace.lanes
        out = {k: ln[k] for k in ("capture", "lane", "sm", "block", "group")}
        out["group_name"] = _group_names(trace, ln["capture"], ln["group"])
        out.update(
            {k: ln[k] for k in ("anchor_ns", "written", "attempted", "dropped", "initialized")}
        )
        return out
    if table == "launches":
        lo, hi = lane_extent(trace, lane_row_of(trace, trace.events))
        used = trace.lanes["initialized"].astype(bool) | (hi > 0)
        k_lo, k_hi = launch_spans(trace, lo, hi, used)
        n = len(trace.kernels)
        cols = trace.table.launch_columns()  # the recording's own columns follow the times
        shape = ("kernel", "num_blocks", "num_groups", "capacity", "emulated")
        return {
            "capture": np.arange(n, dtype=np.int32),
            "name": (np.arange(n, dtype=np.int32), [trace.capture_name(c) for c in range(n)]),
            **{k: cols.pop(k) for k in shape},
            "start_ns": k_lo,
            "end_ns": k_hi,
            **cols,
        }
    if table == "unmatched":
        um = trace.unmatched
        return {
            **{k: um[k] for k in ("capture", "lane", "sm", "block", "group", "event")},
            "name": _names(trace, um["event"]),
            "kind": ((um["kind"] != UNMATCHED_BEGIN).astype(np.int8), ["begin", "end"]),
            "time_ns": um["time_ns"],
        }
    raise ConfigError(f"no table {table!r}; tables: {', '.join(TABLES)}")


def _group_names(trace: TraceData, capture: np.ndarray, group: np.ndarray):
    """Each lane's group name as (codes, names), each (capture, group) pair named once (a
    million lanes of a few pairs: no Python object per lane)."""
    # A pair as one int64 (captures and groups are below 2**31): one sort of numbers.
    key = (capture.astype(np.int64) << 32) | group.astype(np.int64)
    pairs, of_lane = np.unique(key, return_inverse=True)
    labels = [
        trace.group_name(k >> 32, k & 0xFFFFFFFF) or f"group {k & 0xFFFFFFFF}"
        for k in pairs.tolist()
    ]
    cats, of_pair = np.unique(np.array(labels, object), return_inverse=True)
    codes = of_pair.reshape(-1).astype(np.int32)[of_lane.reshape(-1)]
    return codes, list(cats)


def _names(trace: TraceData, ids: np.ndarray):
    uniq, inv = np.unique(ids, return_inverse=True)
    return inv.reshape(-1).astype(np.int32), [trace.event_name(e) for e in uniq.tolist()]


def to_pandas(trace: TraceData, table: str = "events"):
    """One table as a pandas DataFrame (string columns are categoricals)."""
    try:
        import pandas as pd
    except ImportError as e:
        raise MissingDependencyError("pandas", "TraceData.to_pandas()", extra="query") from e
    cols = {}
    for k, v in columns(trace, table).items():
        if isinstance(v, tuple):
            cols[k] = pd.Categorical.from_codes(v[0], categories=v[1])
        else:
            cols[k] = v
    return pd.DataFrame(cols)


def to_arrow(trace: TraceData, table: str = "events"):
    """One table as a pyarrow Table (string columns are dictionary-encoded)."""
    try:
        import pyarrow as pa
    except ImportError as e:
        raise MissingDependencyError("pyarrow", "TraceData.to_arrow()", extra="query") from e
    arrays, names = [], []
    for k, v in columns(trace, table).items():
        if isinstance(v, tuple):
            arrays.append(
                pa.DictionaryArray.from_arrays(
                    pa.array(v[0], pa.int32()), pa.array(v[1], pa.string())
                )
            )
        else:
            arrays.append(pa.array(v))
        names.append(k)
    return pa.Table.from_arrays(arrays, names=names)


def query(trace: TraceData, sql: str, max_rows: int | None = None):
    """Run `sql` over the events, lanes, launches and unmatched tables with DuckDB; returns
    (column names, list of row tuples), at most `max_rows` rows when given (only those are
    fetched).

    The SQL sees the trace's tables only: DuckDB runs with external access off (no files, no
    extensions, no network: `COPY ... TO`, `read_csv`, `ATTACH` fail) and its configuration
    locked, and the tables are read-only views of the trace. For more, connect DuckDB yourself
    and register `trace.to_arrow(name)` for each table (docs/query.md).
    """
    return run_sql({name: to_arrow(trace, name) for name in TABLES}, sql, max_rows)


def run_sql(
    sources: dict,
    sql: str,
    max_rows: int | None = None,
    memory_mb: int | None = None,
    threads: int | None = None,
    temp_dir: str | None = None,
):
    """`sql` over `sources` as `query` runs it: (column names, at most `max_rows` rows), DuckDB
    shut off from files, extensions and its own settings. A source is a pyarrow Table
    (registered), or a list of Parquet files: a view over them, read as the query scans them,
    the only files DuckDB may open; the SQL may then only read (SELECT, EXPLAIN: no COPY over
    them). `memory_mb`, `threads` and `temp_dir` (where DuckDB spills what does not fit) where
    given, DuckDB's defaults elsewhere."""
    try:
        import duckdb
    except ImportError as e:
        raise MissingDependencyError("duckdb", "query", extra="query") from e
    con = duckdb.connect(config=_config(memory_mb, threads))
    try:
        files = {n: v for n, v in sources.items() if isinstance(v, list)}
        if files:
            _allow_reading(con, [p for v in files.values() for p in v], temp_dir)
        con.execute("SET enable_external_access = false")
        for name, src in sources.items():
            if name in files:
                con.execute(f'CREATE VIEW "{name}" AS SELECT * FROM read_parquet({_list(src)})')
            else:
                con.register(name, src)
        con.execute("SET lock_configuration = true")
        try:
            if files:
                _only_reading(con, sql)
            rel = con.sql(sql)
            if rel is None:  # a statement with no result
                return [], []
            if max_rows is not None:
                rel = rel.limit(max(int(max_rows), 0))
            return list(rel.columns), rel.fetchall()
        except duckdb.Error as e:
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            raise ConfigError(
                f"query failed: {first}; tables: {', '.join(sources)} (columns: docs/query.md)"
            ) from None
    finally:
        con.close()


def _config(memory_mb: int | None, threads: int | None) -> dict:
    """DuckDB's configuration at connection: no extension installed or loaded behind our back,
    and the bounds asked for."""
    config = {"autoinstall_known_extensions": False, "autoload_known_extensions": False}
    if memory_mb is not None:
        config["memory_limit"] = f"{int(memory_mb)}MB"
    if threads is not None:
        config["threads"] = int(threads)
    return config


def _allow_reading(con, paths: list[str], temp_dir: str | None) -> None:
    """Let DuckDB read the folders of `paths` once external access is off (DuckDB 1.2's
    allowed_directories), and spill to `temp_dir`."""
    import os

    dirs = sorted({os.path.join(os.path.dirname(os.path.abspath(p)), "") for p in paths})
    try:
        con.execute(f"SET allowed_directories = {_list(dirs)}")
    except Exception as e:  # noqa: BLE001 - an older DuckDB names no such setting
        raise MissingDependencyError("duckdb>=1.2", "query DIR", extra="query") from e
    if temp_dir is not None:
        con.execute(f"SET temp_directory = {_literal(temp_dir)}")


def _only_reading(con, sql: str) -> None:
    """A ConfigError unless every statement of `sql` only reads (the SQL may open our Parquet
    files: no COPY, INSERT or CREATE may write them)."""
    import duckdb

    reading = (duckdb.StatementType.SELECT, duckdb.StatementType.EXPLAIN)
    for stmt in con.extract_statements(sql):
        if stmt.type not in reading:
            kind = str(stmt.type).rsplit(".", 1)[-1]
            raise ConfigError(
                f"query failed: a {kind} statement; a folder's query runs SELECT (and EXPLAIN) "
                "statements only"
            )


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _list(texts: list[str]) -> str:
    return "[" + ", ".join(_literal(t) for t in texts) + "]"


__all__ = ["TABLES", "columns", "to_pandas", "to_arrow", "query", "run_sql"]


# TraceData.to_pandas() and .to_arrow() (trace.py imports nothing above it: these register here).
TABLE_VIEWS.update(pandas=to_pandas, arrow=to_arrow)
