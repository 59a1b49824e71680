"""AutoTable: what an auto-mode region recorded, as tables.

    rows       one per program (per warp at level="warp"), sorted by launch, then program
               id and warp:
               launch, sm, start_ns, end_ns, x, y, z (the program id), warp
    launches   one per launch, a grouping of rows (first_row, rows): gpu, session, kernel,
               grid_id, step (-1: none), tag, per_warp, start_ns, end_ns, grid_x/y/z (the
               largest program id seen + 1; a launch is kept whole or dropped whole)
    kernels    one entry per kernel (name and what the binding knew), stored once
    sessions   one per (rank, GPU) buffer: its counts (claimed, kept, dropped, capacity, ...)
               and where it ran (device name, SM count, rank, host)

Everything is sized by the records, never by a grid. `decode()` gives the TraceData every reader
takes (one capture per launch, one lane per row); its `kernels` is a LaunchList that builds each
launch's KernelInfo on demand. An AutoTable is also a sequence of per-launch Captures (built on
demand), so code written for `sm_profiler.load`'s lists of captures reads it too.
"""

from __future__ import annotations

import json
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ..errors import CaptureError, ConfigError
from ..trace.model import RANGE, KernelInfo, TraceData
from ..wire import format as fmt
from ..wire.capture import AUTO_FILE_VERSION, FILE_READERS, Capture, _read_column, _short
from .records import concat_rows, read_buffer, split_launches

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
# Block ids of a launch are linear program ids while the grid numbers them in int64 comfortably.
_MAX_LINEAR_BLOCKS = 1 << 53


# A step that runs a kernel for the first time and takes more than this many times the median
# step compiled it (AutoTable.compile_steps): the report and the trace set it apart.
COMPILE_STEP_FACTOR = 3.0
# A table's times lie in 0..fmt.MAX_TIME_NS (what %globaltimer's unsigned 64 bits hold in int64)
# and span less than this (146 years): any difference of two times, and a sum of two such, is
# an int64 (check_times).
MAX_SPAN_NS = 1 << 62


@dataclass
class AutoTable:
    rows: dict[str, np.ndarray]
    launches: dict[str, np.ndarray]
    kernels: list[dict]
    sessions: list[dict]
    metadata: dict = field(default_factory=dict)
    is_auto_table = True  # decode() and the CLI tell it from a list of captures by this

    def __post_init__(self):
        for cols in (self.rows, self.launches):
            for k, v in cols.items():
                cols[k] = compact(k, v)

    # -- building ------------------------------------------------------------------------------

    @classmethod
    def from_buffers(
        cls, buffers: list[tuple[dict, np.ndarray]], kernels: dict[int, dict], metadata=None
    ) -> AutoTable:
        """One table from GPU buffers: (session metadata with at least 'gpu', buffer words) each;
        kernels: kernel id -> {'name', ...} as the binding knew them (ids shared by the buffers)."""
        parts, sessions = [], []
        tags = {int(k.get("kernel_tag", kid)): kid for kid, k in kernels.items()}
        for s, (meta, words) in enumerate(buffers):
            rows, info = read_buffer(words, int(meta.get("gpu", 0)), tags)
            rows["gpu"][:] = s  # session index for now; the GPU is the session's
            parts.append(rows)
            sessions.append({**meta, **info})
        rows = concat_rows(parts)
        kids = sorted(set(kernels) | set(np.unique(rows["kernel"]).tolist()))
        index = {k: i for i, k in enumerate(kids)}
        table_kernels = [
            {"name": f"kernel {k}", **kernels.get(k, {}), "kernel_id": k} for k in kids
        ]
        lut = np.zeros(max(kids, default=0) + 1, np.int32)
        for k, i in index.items():
            lut[k] = i
        return cls._from_rows(rows, lut[rows["kernel"]], table_kernels, sessions, metadata or {})

    @classmethod
    def _from_rows(cls, rows, kernel_index, kernels, sessions, metadata) -> AutoTable:
        """The table of device rows (records.ROW_COLUMNS; 'gpu' holds the session index).
        Consumes `rows`: each column leaves the dict once the table's own is gathered from it,
        so that the rows and the table are not held whole at once."""
        rows["kernel"] = kernel_index
        del kernel_index
        order, launch = split_launches(rows)
        n = len(launch)
        idt = np.int32 if n < 2**31 else np.int64  # row numbers
        order = order.astype(idt, copy=False)
        launch = narrow("launch", launch)
        # Each launch's first row and row count (rows sorted by launch), in row-number dtype.
        new = np.ones(n, bool)
        new[1:] = launch[1:] != launch[:-1]
        first = np.flatnonzero(new).astype(idt)
        del new
        n_launch = len(first)
        count = np.diff(first, append=idt(n)).astype(idt, copy=False)
        at = order[first]  # each launch's first row, in the rows as given
        # Per-launch columns, each gathered and made compact (a column of one value is one
        # element) before the next, and their row columns dropped.
        session = compact("session", rows.pop("gpu")[at])
        launches = {"session": session}
        for k in ("kernel", "grid_id", "tag", "per_warp"):
            launches[k] = compact(k, rows.pop(k)[at])
        del at
        tags = rows.pop("step_tag")[order]
        launches["step"] = _launch_steps(
            np.minimum.reduceat(tags, first) if n_launch else tags, session, sessions
        )
        del tags
        gpus = np.array([int(s.get("gpu", 0)) for s in sessions] or [0], np.int32)
        launches["gpu"] = _take(gpus, session)
        launches["first_row"], launches["rows"] = (
            compact("first_row", first),
            compact("rows", count),
        )
        del count
        # The table's row columns, one at a time, each in its own dtype; what it was gathered
        # from goes as it is done.
        table_rows = {"launch": compact("launch", launch)}
        del launch
        for k, t in ROW_DTYPES.items():
            if k != "launch":
                v = compact(k, rows.pop(k).astype(NARROW_DTYPES.get(k, t), copy=False))
                table_rows[k] = v if v.strides == (0,) else v[order]  # one value: in any order
        del order
        r = table_rows
        launches["start_ns"] = _reduce(np.minimum, r["start_ns"], first)
        launches["end_ns"] = _reduce(np.maximum, r["end_ns"], first)
        for c, k in (("x", "grid_x"), ("y", "grid_y"), ("z", "grid_z")):
            g = _reduce(np.maximum, r[c], first)
            launches[k] = compact(k, g + 1 if g.strides == (0,) else np.add(g, 1, out=g))
            del g
        launches = {
            k: compact(k, launches[k].astype(t, copy=False)) for k, t in LAUNCH_DTYPES.items()
        }
        return cls(table_rows, launches, kernels, sessions, metadata)

    @staticmethod
    def concat(tables: list[AutoTable]) -> AutoTable:
        """Tables of several ranks as one: kernels and sessions renumbered, launches in order of
        their first start (each launch stays as it was split)."""
        if not tables:
            raise ConfigError("AutoTable.concat needs at least one table; give a list of them")
        n_l = [t.num_launches for t in tables]

        def offsets(sizes):
            return np.repeat(np.cumsum([0] + sizes[:-1]), n_l).astype(np.int64)

        L = {k: np.concatenate([t.launches[k] for t in tables]) for k in LAUNCH_DTYPES}
        # One entry per kernel: the same kernel on several ranks is one row of the report.
        kernels, index, remap = [], {}, []
        for t in tables:
            for k in t.kernels:
                key = _kernel_key(k)
                if key not in index:
                    index[key] = len(kernels)
                    kernels.append(k)
                remap.append(index[key])
        remap = np.array(remap or [0], np.int32)
        L["kernel"] = remap[L["kernel"] + offsets([len(t.kernels) for t in tables])]
        L["session"] = (L["session"] + offsets([len(t.sessions) for t in tables])).astype(np.int32)
        rows = {k: np.concatenate([t.rows[k] for t in tables]) for k in ROW_DTYPES}
        launch_base = np.cumsum([0] + n_l[:-1])
        rows["launch"] = rows["launch"] + np.repeat(launch_base, [t.num_rows for t in tables])
        order = np.lexsort((np.arange(len(L["start_ns"])), L["start_ns"]))
        new_id = np.empty(len(order), np.int64)
        new_id[order] = np.arange(len(order))
        row_launch = new_id[rows["launch"]]
        ro = np.argsort(row_launch, kind="stable")  # a launch's rows stay in their order
        rows = {k: v[ro] for k, v in rows.items()}
        rows["launch"] = row_launch[ro]
        L = {k: v[order] for k, v in L.items()}
        L["first_row"] = np.cumsum(L["rows"]) - L["rows"]
        sessions = [dict(s) for t in tables for s in t.sessions]
        check_times(*time_bounds(L["start_ns"], L["end_ns"]), f"{len(tables)} tables joined")
        return AutoTable(rows, L, kernels, sessions, dict(tables[0].metadata))

    def on_host_clock(self) -> AutoTable:
        """The table with each session's times moved onto the host's CLOCK_REALTIME, where the
        session carries clock samples (AutoProfiler measures one per GPU when the region ends:
        sm_profiler.record.clock); sessions without samples stay as they are."""
        shift = np.zeros(len(self.sessions), np.int64)
        for i, s in enumerate(self.sessions):
            off = clock_offset_ns(s)
            if off is not None:
                shift[i] = -off
        if not shift.any():
            return self
        L = dict(self.launches)
        for i in np.flatnonzero(shift).tolist():  # moved in Python ints: nothing wraps
            mine = L["session"] == i
            if mine.any():
                lo, hi = time_bounds(L["start_ns"][mine], L["end_ns"][mine])
                d = int(shift[i])
                check_times(lo + d, hi + d, f"session {i} moved by its clock sample")
        d = shift[L["session"]]
        L["start_ns"], L["end_ns"] = L["start_ns"] + d, L["end_ns"] + d
        rows = dict(self.rows)
        dr = np.repeat(d, L["rows"])
        rows["start_ns"], rows["end_ns"] = rows["start_ns"] + dr, rows["end_ns"] + dr
        sessions = [
            dict(s, clock_applied=True) if shift[i] else s for i, s in enumerate(self.sessions)
        ]
        return AutoTable(rows, L, self.kernels, sessions, self.metadata)

    def select(self, launches: np.ndarray) -> AutoTable:
        """The table of the launches where `launches` (a bool per launch) is True, renumbered."""
        keep = np.asarray(launches, bool)
        L = {k: v[keep] for k, v in self.launches.items()}
        rows_keep = np.repeat(keep, self.launches["rows"])
        rows = {k: v[rows_keep] for k, v in self.rows.items()}
        rows["launch"] = np.repeat(np.arange(int(keep.sum())), L["rows"])
        L["first_row"] = np.cumsum(L["rows"]) - L["rows"]
        return AutoTable(rows, L, self.kernels, self.sessions, self.metadata)

    def select_steps(self, schedule) -> AutoTable:
        """The launches of the steps a Schedule (or '1000-1005') records."""
        from .schedule import Schedule

        if isinstance(schedule, str):
            schedule = Schedule.parse(schedule)
        steps = np.unique(self.launches["step"])
        wanted = [int(x) for x in steps if x >= 0 and schedule.records(int(x))]
        if not wanted:
            have = ", ".join(str(int(x)) for x in steps[steps >= 0][:10]) or "none"
            raise ConfigError(
                f"no launch of this file is in {schedule.describe()}; its steps: {have}"
            )
        return self.select(np.isin(self.launches["step"], wanted))

    def gpu_ids(self) -> np.ndarray:
        """Per session, a number for its (rank, GPU): sessions of one GPU (tables joined by
        concat) are one GPU."""
        ranks = self.ranks().tolist()[: len(self.sessions)]  # [0] for a table of no session
        keys = [(r, str(s.get("gpu"))) for r, s in zip(ranks, self.sessions, strict=True)]
        index = {k: i for i, k in enumerate(sorted(set(keys)))}
        return np.array([index[k] for k in keys] or [0], np.int64)

    def compile_steps(self) -> np.ndarray:
        """The recorded steps that compiled: each ran a kernel for the first time on some GPU (in
        the table) and took more than COMPILE_STEP_FACTOR times the median GPU time of the steps
        that ran none for the first time (a step's GPU time: its first launch's start to its last
        launch's end, on the GPU where that is longest). A first recorded step of a schedule
        that starts later runs every kernel for the first time in the table but takes as long as
        the others: not one of them. Sorted; empty where no step stands out so."""
        L = self.launches
        keep = L["step"] >= 0
        none = np.zeros(0, np.int64)
        if not keep.any():
            return none
        whole = bool(keep.all())  # then no copies of the launch columns (host memory)

        def col(name: str) -> np.ndarray:
            return L[name] if whole else L[name][keep]

        gpu = self.gpu_ids()[col("session")]
        step, start, end = col("step"), col("start_ns"), col("end_ns")
        steps = np.unique(step)
        # Each (GPU, kernel)'s first start, and the steps of the launches that start then.
        gk, _, _ = pair_cells(gpu, col("kernel"))
        first = np.full(int(gk.max()) + 1, np.iinfo(np.int64).max)
        np.minimum.at(first, gk, start)
        new = np.isin(steps, step[first[gk] == start])
        del gk, first
        # Each step's GPU time: per (step, GPU) first start to last end, the longest GPU's.
        sg, of_step, _ = pair_cells(np.searchsorted(steps, step), gpu)
        lo, hi = cell_bounds(sg, start, end, len(of_step))
        span = np.zeros(len(steps), np.int64)
        np.maximum.at(span, of_step, hi - lo)
        if new.all():
            return none
        median = float(np.median(span[~new]))
        return steps[new & (span > COMPILE_STEP_FACTOR * median)].astype(np.int64)

    def ranks(self) -> np.ndarray:
        """Each session's rank (0 where it says none)."""
        return np.array([_rank(s) for s in self.sessions] or [0], np.int64)

    # -- reading -------------------------------------------------------------------------------

    @property
    def num_launches(self) -> int:
        return len(self.launches["rows"])

    @property
    def num_rows(self) -> int:
        return len(self.rows["start_ns"])

    def counts(self) -> dict:
        """Claimed, kept, dropped, unwritten records and capacity, summed over the sessions."""
        return {k: sum(session_count(s.get(k)) for s in self.sessions) for k in SESSION_COUNTS}

    def kernel_names(self) -> list[str]:
        """Each kernel's name, as CUPTI and Inductor name it (kernels of one name, compiled
        apart, keep it: the report sums a name's launches)."""
        cached = self.__dict__.get("_names")
        if cached is not None and cached[0] == len(self.kernels):
            return cached[1]
        out = [str(k.get("name") or f"kernel {k.get('kernel_id', '?')}") for k in self.kernels]
        self.__dict__["_names"] = (len(self.kernels), out)
        return out

    def blocks(self) -> np.ndarray:
        """Each row's block id: its linear program id x + gx * (y + gy * z) within its launch, or
        (grids too large to number so) its rank among the launches' programs. Computed a chunk
        of rows at a time (its int64 temporaries stay small)."""
        L, r = self.launches, self.rows
        out = np.empty(self.num_rows, np.int64)
        for a, b in _chunks(self.num_rows):
            launch = r["launch"][a:b]
            gx, gy, gz = (L[c][launch] for c in ("grid_x", "grid_y", "grid_z"))
            big = gx.astype(float) * gy * gz >= _MAX_LINEAR_BLOCKS
            block = r["x"][a:b] + gx * (r["y"][a:b] + gy * r["z"][a:b].astype(np.int64))
            if big.any():
                first = L["first_row"][launch]
                block = np.where(big, np.arange(a, b) - first, block)
            out[a:b] = block
        return out

    def decode(self) -> TraceData:
        """The TraceData every reader takes: capture = launch, one lane (and one range of the
        kernel's event) per row. Columns of one value (events' kind; lanes' written, attempted,
        dropped, initialized) are read-only views of it: a reader's selection is its own."""
        r, L = self.rows, self.launches
        n = self.num_rows
        # One event per kernel name (kernels of one name compiled apart share it).
        names, event_of_kernel = np.unique(
            np.array(self.kernel_names() or [""], dtype=object).astype(str), return_inverse=True
        )
        event_of_kernel = event_of_kernel.reshape(-1).astype(np.int32)
        # Per-row columns a chunk of rows at a time; columns that hold one value for every row
        # (kind, written, attempted, dropped, initialized) are read-only views of that value.
        lane = np.empty(n, np.int64)
        group = np.empty(n, np.int32)
        own = r["launch"].dtype == np.int32  # the capture column is the launch column
        cap = r["launch"] if own else np.empty(n, np.int32)
        event = np.empty(n, np.int32)
        for a, b in _chunks(n):
            launch = r["launch"][a:b]
            lane[a:b] = np.arange(a, b, dtype=np.int64) - L["first_row"][launch]
            group[a:b] = np.where(L["per_warp"][launch], r["warp"][a:b], 0)
            if not own:
                cap[a:b] = launch
            event[a:b] = event_of_kernel[L["kernel"][launch]]
        block = self.blocks()
        events = {
            "capture": cap,
            "lane": lane,
            "sm": r["sm"],
            "block": block,
            "group": group,
            "event": event,
            "kind": _constant(RANGE, np.int8, n),
            "start_ns": r["start_ns"],
            "end_ns": r["end_ns"],
        }
        two = _constant(2, np.int64, n)
        lanes = {
            "capture": cap,
            "lane": lane,
            "sm": r["sm"],
            "block": block,
            "group": group,
            "anchor_ns": r["start_ns"],
            "written": two,
            "attempted": two,
            "dropped": _constant(0, np.int64, n),
            "initialized": _constant(True, np.bool_, n),
        }
        z = np.zeros(0, np.int64)
        unmatched = {
            "capture": z.astype(np.int32),
            "lane": z,
            "sm": z.astype(np.int32),
            "block": z,
            "group": z.astype(np.int32),
            "event": z.astype(np.int32),
            "kind": z.astype(np.int8),
            "time_ns": z,
        }
        names = dict(enumerate(names.tolist())) if self.kernels else {}
        return TraceData(
            events,
            lanes,
            unmatched,
            LaunchList(self),
            names,
            unattributed_dropped=self.counts()["dropped"],
        )

    # -- as captures (for code written for lists of captures) -----------------------------------

    def __len__(self) -> int:
        return self.num_launches

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        return self.capture(int(i))

    def __iter__(self):
        return (self.capture(i) for i in range(len(self)))

    def capture(self, i: int):
        """Launch i as an ordinary Capture (one lane per recorded program, two records each)."""
        n = self.num_launches
        if not -n <= i < n:
            raise IndexError(f"launch {i} out of range: this table has {n}")
        i %= n
        L = self.launches
        a, c = int(L["first_row"][i]), int(L["rows"][i])
        info = self.launch_info(i)
        words = np.zeros(fmt.buffer_words(c, 1, 2), np.uint64)
        words[: fmt.HEADER_WORDS] = fmt.encode_header(c, 1, 2)
        lanes = words[fmt.HEADER_WORDS :].reshape(c, fmt.LANE_HEADER_WORDS + 2)
        start = self.rows["start_ns"][a : a + c].astype(np.uint64)
        end = self.rows["end_ns"][a : a + c].astype(np.uint64)
        lanes[:, 0] = start
        lanes[:, 1] = self.rows["sm"][a : a + c].astype(np.uint64)
        tag_b = np.uint64(fmt.make_tag(0, fmt.KIND_BEGIN) << fmt.TAG_SHIFT)
        tag_e = np.uint64(fmt.make_tag(0, fmt.KIND_END) << fmt.TAG_SHIFT)
        lanes[:, 2] = tag_b | (start & np.uint64(fmt.LOW32))
        lanes[:, 3] = tag_e | (end & np.uint64(fmt.LOW32))
        meta = dict(info.metadata)
        meta["blocks"] = self.blocks()[a : a + c].tolist() if c <= 4096 else "not listed"
        return Capture(
            words=words,
            event_names={0: info.name},
            kernel_name=info.name,
            metadata=jsonable(meta),
        )

    def launch_info(self, i: int) -> KernelInfo:
        L = self.launches
        k = self.kernels[int(L["kernel"][i])]
        s = self.sessions[int(L["session"][i])]
        per_warp = bool(L["per_warp"][i])
        grid = [int(L["grid_x"][i]), int(L["grid_y"][i]), int(L["grid_z"][i])]
        ng = num_warps_of(k) if per_warp else 1
        meta = {key: v for key, v in s.items() if key not in SESSION_COUNTS}
        meta.update({key: v for key, v in k.items() if key != "name"})
        meta.update(
            auto=True,
            launch=i,
            gpu=int(L["gpu"][i]),
            grid=grid,
            grid_id=int(L["grid_id"][i]),
            programs=int(L["rows"][i]),
            auto_session={key: s.get(key) for key in SESSION_COUNTS + ("ring",)},
        )
        if L["step"][i] >= 0:
            meta["step"] = int(L["step"][i])
        if L["tag"][i]:
            meta["tag"] = int(L["tag"][i])
        groups = _warp_names(ng, k.get("partitions")) if per_warp else {}
        return KernelInfo(
            name=self.kernel_names()[int(L["kernel"][i])],
            num_blocks=grid[0] * grid[1] * grid[2],
            num_groups=ng,
            capacity=2,
            emulated=False,
            group_names=groups,
            metadata=meta,
        )

    # -- files ---------------------------------------------------------------------------------

    def save(self, path, members: dict[str, bytes] | None = None) -> None:
        """Write the table to one .npz file: columns as arrays, kernels and sessions as JSON once.
        members: more byte strings stored beside them as uint8 columns (a torch.profiler trace:
        auto_mode/torch_parts.py), which the table's reader leaves alone."""
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
                f"cannot save {str(path)!r}: metadata must be JSON-serialisable ({_short(str(e), 120)})"
            ) from e
        check_writable(path)
        columns = [("meta", blob, np.uint8)]
        columns += [(f"row_{k}", self.rows[k], t) for k, t in ROW_DTYPES.items()]
        columns += [(f"launch_{k}", self.launches[k], t) for k, t in LAUNCH_DTYPES.items()]
        columns += [(k, np.frombuffer(v, np.uint8), np.uint8) for k, v in (members or {}).items()]
        with atomic_output(path) as tmp, open(tmp, "wb") as f:
            _savez(f, columns)

    @classmethod
    def read(cls, z: zipfile.ZipFile, meta: dict, name: str) -> AutoTable:
        """The table of an open auto file whose JSON `meta` was read (capture.load calls this)."""

        def need(what, cond):
            if not cond:
                raise CaptureError(f"{name}: {what}: damaged auto file")

        need("no kernels or sessions table", isinstance(meta.get("kernels"), list))
        need("no sessions table", isinstance(meta.get("sessions"), list))
        kernels, sessions = meta["kernels"], meta["sessions"]
        need("a kernel entry is not a table", all(isinstance(k, dict) for k in kernels))
        need("a session entry is not a table", all(isinstance(s, dict) for s in sessions))
        rows = {k: compact(k, _read_column(z, f"row_{k}", name, t)) for k, t in ROW_DTYPES.items()}
        launches = {
            k: compact(k, _read_column(z, f"launch_{k}", name, t)) for k, t in LAUNCH_DTYPES.items()
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
                f"kernel {i}'s num_warps {_short(w)} is not a whole number in 1..{fmt.AUTO_MAX_WARP + 1}",
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
            got = _reduce(ufunc, rows[col], first) + (1 if k.startswith("grid") else 0)
            need(f"a launch's {k} disagrees with its rows", (launches[k] == got).all())
        gpus = np.array([s.get("gpu") if _int(s.get("gpu")) else -1 for s in sessions], np.int64)
        at = gpus[launches["session"]] if m else gpus[:0]
        need("a launch's gpu is not its session's", ((at < 0) | (at == launches["gpu"])).all())
        md = meta.get("metadata") if isinstance(meta.get("metadata"), dict) else {}
        return cls(rows, launches, kernels, sessions, md)


class LaunchList(Sequence):
    """The KernelInfo of each launch of an AutoTable, built when asked for (a million launches
    cost their columns, not a million objects)."""

    auto = True

    def __init__(self, table: AutoTable):
        self.table = table

    def __len__(self) -> int:
        return self.table.num_launches

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        n = len(self)
        if not -n <= i < n:
            raise IndexError(f"capture {i} out of range: this trace has {n}")
        return self.table.launch_info(int(i) % n)

    def representatives(self) -> list[int]:
        """One launch of each (kernel, level) pair: launches that differ in nothing else share
        their KernelInfo's names and shape."""
        L = self.table.launches
        n, part = len(L["kernel"]), 1 << 16  # a part at a time: no copy of a million launches
        first: dict[int, int] = {}
        for a in range(0, n, part):
            key = L["kernel"][a : a + part].astype(np.int64) * 2 + L["per_warp"][a : a + part]
            u, idx = np.unique(key, return_index=True)
            for k, i in zip(u.tolist(), (idx + a).tolist(), strict=True):
                first.setdefault(k, i)
        return [first[k] for k in sorted(first)]

    def names(self) -> list[str]:
        """Each launch's kernel name, without building the launches."""
        names = self.table.kernel_names()
        return [names[k] for k in self.table.launches["kernel"].tolist()]

    def __add__(self, other):
        return list(self) + list(other)


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


def _rank(s: dict) -> int:
    r = s.get("rank") if isinstance(s, dict) else None
    return int(r) if isinstance(r, int) and not isinstance(r, bool) and 0 <= r < 2**31 else 0


def clock_offset_ns(session: dict) -> int | None:
    """%globaltimer - CLOCK_REALTIME of a session's GPU, from its tightest clock sample; None
    when it has none (or the samples are not numbers)."""
    if not isinstance(session, dict) or session.get("clock_applied"):
        return None
    best = None
    for c in session.get("clock") or []:
        if not isinstance(c, dict):
            continue
        off, err = c.get("offset_ns"), c.get("error_ns", 0)
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in (off, err)):
            continue
        if abs(off) < 2**62 and (best is None or err < best[1]):
            best = (off, err)
    return None if best is None else best[0]


def _kernel_key(k: dict) -> str:
    """What makes two ranks' kernel entries one kernel of the report: its name and level (each
    rank compiles its own copy, under its own paths)."""
    return json.dumps([k.get(f) for f in ("name", "level")], default=str)


def _step_map(session: dict) -> dict[int, int]:
    """Step tag -> step number of a session's schedule (none: the tag is the step)."""
    m = session.get("step_tags")
    if isinstance(m, dict):
        try:
            return {int(k): int(v) for k, v in m.items()}
        except (TypeError, ValueError):
            return {}
    return {}


def _map_steps(tags: np.ndarray, m: dict[int, int]) -> np.ndarray:
    if not m:
        return tags.astype(np.int64)
    keys = np.array(sorted(m), np.int64)
    vals = np.array([m[k] for k in sorted(m)], np.int64)
    pos = np.clip(np.searchsorted(keys, tags), 0, len(keys) - 1)
    return np.where(keys[pos] == tags, vals[pos], tags.astype(np.int64))


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
            return _constant(v[0], v.dtype, len(v))
    return v


def _savez(f, columns) -> None:
    """np.savez of (name, column, file dtype) triples, each column widened to its file dtype
    only while it is written (np.savez would hold them all widened at once)."""
    from numpy.lib import format as npy

    with zipfile.ZipFile(f, mode="w", compression=zipfile.ZIP_STORED, allowZip64=True) as zf:
        for name, v, t in columns:
            with zf.open(f"{name}.npy", "w", force_zip64=True) as m:
                npy.write_array(m, np.asarray(v).astype(t, copy=False), allow_pickle=False)


# Rows per chunk where a column is computed a chunk at a time (its temporaries: a few MiB).
CHUNK_ROWS = 1 << 16


def _chunks(n: int, size: int | None = None):
    """(start, stop) of consecutive chunks of range(n), CHUNK_ROWS rows each (the last fewer)."""
    size = size or CHUNK_ROWS
    return ((a, min(a + size, n)) for a in range(0, n, size))


def _constant(value, dtype, n: int) -> np.ndarray:
    """A read-only column of `n` rows that all hold `value` (one element of memory)."""
    return np.broadcast_to(np.array(value, dtype), (n,))


def _reduce(ufunc, values: np.ndarray, first: np.ndarray) -> np.ndarray:
    """Each launch's reduction of a row column (rows sorted by launch, `first` row of each), in
    int64; a column of one value gives one."""
    if len(first) == 0:
        return np.zeros(0, np.int64)
    if values.strides == (0,):
        return _constant(values[0], np.int64, len(first))
    return ufunc.reduceat(values, first).astype(np.int64, copy=False)


def _take(lut: np.ndarray, index: np.ndarray) -> np.ndarray:
    """lut[index], one element where `index` holds one value."""
    if len(index) and index.strides == (0,):
        return _constant(lut[index[0]], lut.dtype, len(index))
    return lut[index]


def pair_cells(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The (a, b) pairs of indices that occur (a step's and a GPU's, a GPU's and a kernel's):
    (each element's cell, each cell's a, each cell's b), cells in (a, b) order. Sized by the
    elements, never by a dense grid of every a by every b, which a file of 20,000 steps on
    20,000 GPUs makes 400 M cells of (issue 52)."""
    a, b = np.asarray(a, np.int64), np.asarray(b, np.int64)
    if not len(a):
        none = np.zeros(0, np.int64)
        return none, none, none
    width = int(b.max()) + 1
    # Indices of arrays in memory (below 2**31 each): the key stays inside int64.
    uniq, cell = np.unique(a * width + b, return_inverse=True)
    return cell.reshape(-1), uniq // width, uniq % width


def cell_bounds(cell: np.ndarray, start: np.ndarray, end: np.ndarray, n: int):
    """(first start, last end) of each of `n` cells, of the intervals in `cell`."""
    lo = np.full(n, np.iinfo(np.int64).max)
    hi = np.full(n, np.iinfo(np.int64).min)
    np.minimum.at(lo, cell, start)
    np.maximum.at(hi, cell, end)
    return lo, hi


def _launch_steps(tags: np.ndarray, session: np.ndarray, sessions: list[dict]) -> np.ndarray:
    """Each launch's step from its smallest step tag: the session's step_tags map (a tag it
    does not name is the step), -1 for tag 0 (none). Tags of 16 bits (a record's) go through
    a table per session of 65,536 steps, in int32 where the steps fit."""
    if tags.dtype.kind != "u" or tags.dtype.itemsize > 2:  # not a record's: as it always was
        step = np.full(len(tags), -1, np.int64)
        for si, s in enumerate(sessions):
            sel = session == si
            t = tags[sel].astype(np.int64)
            step[sel] = np.where(t > 0, _map_steps(t, _step_map(s)), -1)
        return step
    luts = []
    for s in sessions:
        lut = np.arange(1 << 16, dtype=np.int64)
        lut[0] = -1
        for k, v in _step_map(s).items():
            if 0 < k < 1 << 16:
                lut[k] = v
        luts.append(narrow("step", lut))
    if not luts or len(session) == 0:
        return np.full(len(tags), -1, np.int64)
    if session.strides == (0,):
        return luts[int(session[0])][tags]
    dt = np.result_type(*luts)
    step = np.full(len(tags), -1, dt)
    for si, lut in enumerate(luts):
        sel = session == si
        step[sel] = lut[tags[sel]]
    return step


def _warp_names(num_warps: int, partitions) -> dict[int, str]:
    """'warp 5', or 'worker 0 · warp 5' in a warp-specialized kernel's partition."""
    names = {w: f"warp {w}" for w in range(num_warps)}
    for p in partitions or []:
        try:
            name, first, n = p
            for w in range(int(first), min(int(first) + int(n), num_warps)):
                names[w] = f"{name} · warp {w}"
        except (TypeError, ValueError):
            continue
    return names


def jsonable(v):
    """v with numpy scalars as Python numbers (json.dumps refuses them)."""
    if isinstance(v, dict):
        return {str(k): jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [jsonable(x) for x in v]
    if isinstance(v, np.generic):
        return v.item()
    return v


# sm_profiler.load reads auto files through this (capture.py imports nothing of auto mode).
FILE_READERS["auto"] = AutoTable.read

__all__ = ["AutoTable", "LaunchList", "AUTO_FILE_VERSION"]
