"""Auto mode's file: an AutoTable's columns as a file holds them (docs/format.md, "Auto-mode
files"), written and read back checked.

    rows       one per program (per warp at level="warp"), sorted by launch, then program
               id and warp:
               launch, sm, start_ns, end_ns, x, y, z (the program id), warp
    launches   one per launch, a grouping of rows (first_row, rows): gpu, session, kernel,
               grid_id, step (-1: none), tag, per_warp, start_ns, end_ns, grid_x/y/z (the
               largest program id seen + 1; a launch is kept whole or dropped whole)
    kernels    one entry per kernel (name and what the binding knew), stored once
    sessions   one per (rank, GPU) buffer: its counts (claimed, kept, dropped, capacity, ...)
               and where it ran (device name, SM count, rank, host)

`AutoColumns` holds them (each column in the narrowest dtype its values fit) and is a sequence of
per-launch Captures, built when asked, so that code written for `sm_profiler.load`'s lists of
captures reads it too; what the table means (building it from buffers, joining, selecting,
decoding) is trace/auto_table.py's AutoTable, which `load` returns.
"""

from __future__ import annotations

import json
import zipfile
from abc import abstractmethod
from dataclasses import dataclass, field

import numpy as np

from ..errors import CaptureError
from . import format as fmt
from .capture import AUTO_FILE_VERSION, Capture, CaptureSequence, read_column, shortened

# Per row: its launch, then the device's columns that vary within a launch.
ROW_DTYPES = {
    "launch": np.int64,
    "sm": np.int32,
    "start_ns": np.int64,
    "end_ns": np.int64,
    "x": np.int64,
    "y": np.int32,
    "z": np.int32,
    "warp": np.int32,
}
LAUNCH_DTYPES = {
    "gpu": np.int32,
    "session": np.int32,
    "kernel": np.int32,
    "grid_id": np.int64,
    "step": np.int64,
    "tag": np.int32,
    "per_warp": np.bool_,
    "first_row": np.int64,
    "rows": np.int64,
    "start_ns": np.int64,
    "end_ns": np.int64,
    "grid_x": np.int64,
    "grid_y": np.int64,
    "grid_z": np.int64,
}
# In memory a column is held in the narrowest of these its values fit (ids a record holds in
# 16 or 32 bits, launch numbers below 2**31), else in its file dtype above (a file may hold
# anything): the same values, a third less memory. Files keep the dtypes above.
NARROW_DTYPES = {
    "launch": np.int32,
    "x": np.uint32,
    "y": np.uint16,
    "z": np.uint16,
    "warp": np.uint8,
    "grid_id": np.uint32,
    "tag": np.uint8,
    "grid_y": np.int32,
    "grid_z": np.int32,
    # Per launch: a session's and a kernel's number, the step, the launch's rows.
    "gpu": np.int16,
    "session": np.int16,
    "kernel": np.int16,
    "step": np.int32,
    "first_row": np.int32,
    "rows": np.int32,
}
SESSION_COUNTS = ("claimed", "kept", "dropped", "unwritten", "capacity")
# A table's times lie in 0..fmt.MAX_TIME_NS (what %globaltimer's unsigned 64 bits hold in int64)
# and span less than this (146 years): any difference of two times, and a sum of two such, is
# an int64 (check_times).
MAX_SPAN_NS = 1 << 62


@dataclass
class AutoColumns(CaptureSequence):
    """The columns of an auto-mode recording (see the module doc)."""

    rows: dict[str, np.ndarray]
    launches: dict[str, np.ndarray]
    kernels: list[dict]
    sessions: list[dict]
    metadata: dict = field(default_factory=dict)

    def __post_init__(self):
        for cols in (self.rows, self.launches):
            for k, v in cols.items():
                cols[k] = compact(k, v)

    @property
    def num_launches(self) -> int:
        return len(self.launches["rows"])

    @property
    def num_rows(self) -> int:
        return len(self.rows["start_ns"])

    def counts(self) -> dict:
        """Claimed, kept, dropped, unwritten records and capacity, summed over the sessions."""
        return {k: sum(session_count(s.get(k)) for s in self.sessions) for k in SESSION_COUNTS}

    # -- as captures (for code written for lists of captures) -----------------------------------

    def __len__(self) -> int:
        return self.num_launches

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        return self.capture(int(i))

    def __iter__(self):
        return (self.capture(i) for i in range(len(self)))

    @abstractmethod
    def capture(self, i: int) -> Capture:
        """Launch i as an ordinary Capture."""

    # -- files ---------------------------------------------------------------------------------

    def save(self, path, members: dict[str, bytes] | None = None) -> None:
        """Write the table to one .npz file: columns as arrays, kernels and sessions as JSON once.
        members: more byte strings stored beside them as uint8 columns (a torch.profiler trace:
        export/auto_torch_parts.py), which the table's reader leaves alone."""
        from ..paths import atomic_output, check_writable

        meta = {
            "capture_file_version": AUTO_FILE_VERSION,
            "kind": "auto",
            "kernels": self.kernels,
            "sessions": self.sessions,
            "metadata": self.metadata,
        }
        try:
            blob = np.frombuffer(json.dumps(jsonable(meta)).encode(), np.uint8)
        except (TypeError, ValueError, RecursionError) as e:
            raise CaptureError(
                f"cannot save {str(path)!r}: metadata must be JSON-serialisable ({shortened(str(e), 120)})"
            ) from e
        check_writable(path)
        columns = [("meta", blob, np.uint8)]
        columns += [(f"row_{k}", self.rows[k], t) for k, t in ROW_DTYPES.items()]
        columns += [(f"launch_{k}", self.launches[k], t) for k, t in LAUNCH_DTYPES.items()]
        columns += [(k, np.frombuffer(v, np.uint8), np.uint8) for k, v in (members or {}).items()]
        with atomic_output(path) as tmp, open(tmp, "wb") as f:
            _savez(f, columns)

    @classmethod
    def read(cls, z: zipfile.ZipFile, meta: dict, name: str) -> AutoColumns:
        """The table of an open auto file whose JSON `meta` was read (capture.load calls this)."""

        def need(what, cond):
            if not cond:
                raise CaptureError(f"{name}: {what}: damaged auto file")

        need("no kernels or sessions table", isinstance(meta.get("kernels"), list))
        need("no sessions table", isinstance(meta.get("sessions"), list))
        kernels, sessions = meta["kernels"], meta["sessions"]
        need("a kernel entry is not a table", all(isinstance(k, dict) for k in kernels))
        need("a session entry is not a table", all(isinstance(s, dict) for s in sessions))
        rows = {k: compact(k, read_column(z, f"row_{k}", name, t)) for k, t in ROW_DTYPES.items()}
        launches = {
            k: compact(k, read_column(z, f"launch_{k}", name, t)) for k, t in LAUNCH_DTYPES.items()
        }
        n, m = len(rows["start_ns"]), len(launches["rows"])
        need("row columns differ in length", all(len(v) == n for v in rows.values()))
        need("launch columns differ in length", all(len(v) == m for v in launches.values()))
        count = launches["rows"]
        # Each launch holds 1..n rows, so the running sum reaches past n (if it does) before it
        # could wrap: a sum that wraps round to n is refused here, before any np.repeat by it.
        need("a launch holds no rows, or more than the file", ((count >= 1) & (count <= n)).all())
        ends = np.cumsum(count, dtype=np.int64)
        need("launch rows do not add up", (ends <= n).all() and (m == 0 or int(ends[-1]) == n))
        need(
            "launches do not follow their rows",
            (launches["first_row"] == ends - count).all()
            and (m == 0 or (rows["launch"] == np.repeat(np.arange(m), count)).all()),
        )
        for k, top in (
            ("x", 2**32 - 1),
            ("y", 2**16 - 1),
            ("z", 2**16 - 1),
            ("warp", fmt.AUTO_MAX_WARP),
        ):
            need(f"a row's {k} is outside 0..{top}", ((rows[k] >= 0) & (rows[k] <= top)).all())
        need("a row's SM is negative", (rows["sm"] >= 0).all())
        for i, k in enumerate(kernels):
            w = k.get("num_warps")
            need(
                f"kernel {i}'s num_warps {shortened(w)} is not a whole number in 1..{fmt.AUTO_MAX_WARP + 1}",
                w is None or _warps_ok(w),
            )
        need(
            "a launch names no known kernel",
            ((launches["kernel"] >= 0) & (launches["kernel"] < len(kernels))).all(),
        )
        need(
            "a launch names no known session",
            ((launches["session"] >= 0) & (launches["session"] < len(sessions))).all(),
        )
        need("a record ends before it starts", (rows["end_ns"] >= rows["start_ns"]).all())
        check_times(*time_bounds(rows["start_ns"], rows["end_ns"]), name)
        # What a launch says of its rows is what its rows say (the writers draw both).
        first = launches["first_row"]
        for k, ufunc, col in (
            ("start_ns", np.minimum, "start_ns"),
            ("end_ns", np.maximum, "end_ns"),
            ("grid_x", np.maximum, "x"),
            ("grid_y", np.maximum, "y"),
            ("grid_z", np.maximum, "z"),
        ):
            got = reduce_launches(ufunc, rows[col], first) + (1 if k.startswith("grid") else 0)
            need(f"a launch's {k} disagrees with its rows", (launches[k] == got).all())
        gpus = np.array([s.get("gpu") if _int(s.get("gpu")) else -1 for s in sessions], np.int64)
        at = gpus[launches["session"]] if m else gpus[:0]
        need("a launch's gpu is not its session's", ((at < 0) | (at == launches["gpu"])).all())
        md = meta.get("metadata") if isinstance(meta.get("metadata"), dict) else {}
        return cls(rows, launches, kernels, sessions, md)


def check_times(lo_ns: int, hi_ns: int, what: str) -> None:
    """Refuse a table's times (its first start and last end) outside 0..fmt.MAX_TIME_NS or
    spanning MAX_SPAN_NS or more: the differences and sums computed from them would wrap in
    int64 (a step of -4611686018 s, a launch that "took no time"). `what`: their source, for the
    message."""
    if 0 <= lo_ns and hi_ns <= fmt.MAX_TIME_NS and hi_ns - lo_ns < MAX_SPAN_NS:
        return
    raise CaptureError(
        f"{what}: its times run from {lo_ns:,} to {hi_ns:,} ns, a span that int64 nanoseconds "
        "cannot hold (times lie in 0..2**63 - 1 ns and span less than 2**62 ns, 146 years): a "
        "damaged or hand-edited file; record again"
    )


def time_bounds(start_ns: np.ndarray, end_ns: np.ndarray) -> tuple[int, int]:
    """(the earliest, the latest) of starts and ends, as Python ints ((0, 0) for none)."""
    if not len(start_ns):
        return 0, 0
    both = (np.min(start_ns), np.max(start_ns), np.min(end_ns), np.max(end_ns))
    return min(int(v) for v in both), max(int(v) for v in both)


def _int(v) -> bool:
    """Whether v is an integer (a bool is not) of 64 bits."""
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool) and -(2**63) <= v < 2**63


def _warps_ok(w) -> bool:
    """Whether a kernel entry's num_warps is one a launch can have (a record's warp has 7 bits)."""
    return _int(w) and 1 <= w <= fmt.AUTO_MAX_WARP + 1


def num_warps_of(k: dict) -> int:
    """A kernel entry's num_warps (1 where it names none that a launch can have)."""
    w = k.get("num_warps")
    return int(w) if _warps_ok(w) else 1


def session_count(v) -> int:
    """A non-negative count from a session's metadata (a file may hold anything), else 0."""
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
        return 0
    return max(int(v), 0)


def narrow(name: str, v: np.ndarray) -> np.ndarray:
    """Column `name` in its NARROW_DTYPES dtype where every value fits it, else as it is."""
    t = NARROW_DTYPES.get(name)
    v = np.asarray(v)
    if t is None or v.dtype == t or v.dtype.kind not in "iu":
        return v
    info = np.iinfo(t)
    if len(v) and (int(v.min()) < info.min or int(v.max()) > info.max):
        return v
    return v.astype(t)


def compact(name: str, v: np.ndarray) -> np.ndarray:
    """Column `name` narrowed (`narrow`), and where all its values are one value, a read-only
    view of that value (one element of memory: a table's GPU, session, level, tag, a one-program
    launch's program id, ...)."""
    v = narrow(name, v)
    if v.ndim == 1 and len(v) > 1 and v.strides[0] != 0 and v.dtype.kind in "iub":
        if v.min() == v.max():
            return constant_column(v[0], v.dtype, len(v))
    return v


def _savez(f, columns) -> None:
    """np.savez of (name, column, file dtype) triples, each column widened to its file dtype
    only while it is written (np.savez would hold them all widened at once)."""
    from numpy.lib import format as npy

    with zipfile.ZipFile(f, mode="w", compression=zipfile.ZIP_STORED, allowZip64=True) as zf:
        for name, v, t in columns:
            with zf.open(f"{name}.npy", "w", force_zip64=True) as m:
                npy.write_array(m, np.asarray(v).astype(t, copy=False), allow_pickle=False)


def constant_column(value, dtype, n: int) -> np.ndarray:
    """A read-only column of `n` rows that all hold `value` (one element of memory)."""
    return np.broadcast_to(np.array(value, dtype), (n,))


def reduce_launches(ufunc, values: np.ndarray, first: np.ndarray) -> np.ndarray:
    """Each launch's reduction of a row column (rows sorted by launch, `first` row of each), in
    int64; a column of one value gives one."""
    if len(first) == 0:
        return np.zeros(0, np.int64)
    if values.strides == (0,):
        return constant_column(values[0], np.int64, len(first))
    return ufunc.reduceat(values, first).astype(np.int64, copy=False)


def jsonable(v):
    """v with numpy scalars as Python numbers (json.dumps refuses them)."""
    if isinstance(v, dict):
        return {str(k): jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [jsonable(x) for x in v]
    if isinstance(v, np.generic):
        return v.item()
    return v
