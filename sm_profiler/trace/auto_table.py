"""AutoTable: what an auto-mode region recorded, as tables: rows (one per program), launches,
kernels and sessions (their columns and file: wire/auto_file.py's AutoColumns).

Everything is sized by the records, never by a grid. An AutoTable is the LaunchTable of its trace
(trace/launches.py): `decode()` gives the TraceData every reader takes (one capture per launch,
one lane per row), whose `table` is this table and whose `kernels` a LaunchList that builds
each launch's KernelInfo on demand. An AutoTable is also a sequence of per-launch Captures
(built on demand), so code written for `sm_profiler.load`'s lists of captures reads it too.
"""

from __future__ import annotations

import json

import numpy as np

from ..errors import ConfigError
from ..text import metadata_count
from ..wire import format as fmt
from ..wire.auto_file import (
    AUTO_FILE_VERSION,
    LAUNCH_DTYPES,
    NARROW_DTYPES,
    ROW_DTYPES,
    SESSION_COUNTS,
    AutoColumns,
    check_times,
    compact,
    constant_column,
    jsonable,
    narrow,
    num_warps_of,
    reduce_launches,
    time_bounds,
)
from ..wire.auto_records import concat_rows, read_buffer, split_launches
from ..wire.capture import FILE_READERS, Capture
from .launches import KernelInfo, LaunchList, LaunchTable
from .model import RANGE, TraceData

# Block ids of a launch are linear program ids while the grid numbers them in int64 comfortably.
_MAX_LINEAR_BLOCKS = 1 << 53


# A step that runs a kernel for the first time and takes more than this many times the median
# step compiled it (AutoTable.compile_steps): the report and the trace set it apart.
COMPILE_STEP_FACTOR = 3.0


class AutoTable(AutoColumns, LaunchTable):
    """An auto-mode recording's columns (AutoColumns) as the launch table of its trace."""

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
        launches["start_ns"] = reduce_launches(np.minimum, r["start_ns"], first)
        launches["end_ns"] = reduce_launches(np.maximum, r["end_ns"], first)
        for c, k in (("x", "grid_x"), ("y", "grid_y"), ("z", "grid_z")):
            g = reduce_launches(np.maximum, r[c], first)
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
        order = launch_order(L["start_ns"])
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

    @classmethod
    def of_launches(cls, launches, kernels, sessions, metadata) -> AutoTable:
        """A table of launches without their programs' rows: a rank's launches as its summary
        holds them (report/rank_summary.py). What reads launches alone reads it (concat,
        compile_steps, gpu_ids; advise given its LaunchMeasures, the report given its launch
        table); it has no row to decode or draw."""
        L = {
            k: np.asarray(launches[k], LAUNCH_DTYPES[k]) for k in LAUNCH_DTYPES if k != "first_row"
        }
        L["first_row"] = np.cumsum(L["rows"]) - L["rows"]
        rows = {k: np.zeros(0, t) for k, t in ROW_DTYPES.items()}
        return cls(rows, L, kernels, sessions, metadata)

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
        if len(self.rows["launch"]) or not int(np.sum(self.launches["rows"])):
            rows_keep = np.repeat(keep, self.launches["rows"])
            rows = {k: v[rows_keep] for k, v in self.rows.items()}
            rows["launch"] = np.repeat(np.arange(int(keep.sum())), L["rows"])
        else:  # a table of launches alone (of_launches): no row to keep
            rows = dict(self.rows)
        L["first_row"] = np.cumsum(L["rows"]) - L["rows"]
        return AutoTable(rows, L, self.kernels, self.sessions, self.metadata)

    def select_steps(self, schedule) -> AutoTable:
        """The launches of the steps a Schedule (or '1000-1005') records."""
        from ..wire.auto_schedule import Schedule

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

    # -- reading -------------------------------------------------------------------------------

    # -- the launch table every trace has (trace/launches.py) ------------------------------------

    @property
    def auto(self) -> bool:
        return True

    @property
    def emulated(self) -> bool:
        return False  # auto mode runs on a GPU only

    def sm_counts(self, launches: np.ndarray) -> np.ndarray:
        # Per session, not per launch.
        per = np.array([metadata_count(s.get("sm_count")) for s in self.sessions] or [0], np.int64)
        return per[self.launches["session"][launches]]

    def wrapped_lanes(self) -> dict[int, list[int]]:
        return {}  # a program's record is written once: no lane overwrites another's

    def representatives(self) -> list[int]:
        """One launch of each (kernel, level) pair: launches that differ in nothing else share
        their KernelInfo's names and shape."""
        L = self.launches
        n, part = len(L["kernel"]), 1 << 16  # a part at a time: no copy of a million launches
        first: dict[int, int] = {}
        for a in range(0, n, part):
            key = L["kernel"][a : a + part].astype(np.int64) * 2 + L["per_warp"][a : a + part]
            u, idx = np.unique(key, return_index=True)
            for k, i in zip(u.tolist(), (idx + a).tolist(), strict=True):
                first.setdefault(k, i)
        return [first[k] for k in sorted(first)]

    def launch_columns(self) -> dict[str, np.ndarray | tuple]:
        # The launch table's columns, no KernelInfo per launch.
        L, n = self.launches, self.num_launches
        return {
            "kernel": (L["kernel"].astype(np.int32), self.kernel_names()),
            "num_blocks": L["grid_x"] * L["grid_y"] * L["grid_z"],
            "num_groups": np.ones(n, np.int64),
            "capacity": np.full(n, 2, np.int64),
            "emulated": np.zeros(n, bool),
            "gpu": L["gpu"].astype(np.int32),
            "rank": self.ranks()[L["session"]].astype(np.int32),
            "step": L["step"].astype(np.int64),
            "programs": L["rows"].astype(np.int64),
        }

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
            "kind": constant_column(RANGE, np.int8, n),
            "start_ns": r["start_ns"],
            "end_ns": r["end_ns"],
        }
        two = constant_column(2, np.int64, n)
        lanes = {
            "capture": cap,
            "lane": lane,
            "sm": r["sm"],
            "block": block,
            "group": group,
            "anchor_ns": r["start_ns"],
            "written": two,
            "attempted": two,
            "dropped": constant_column(0, np.int64, n),
            "initialized": constant_column(True, np.bool_, n),
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


def launch_order(start_ns: np.ndarray) -> np.ndarray:
    """The order AutoTable.concat gives launches: by their first start, then as given."""
    return np.lexsort((np.arange(len(start_ns)), start_ns))


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


# Rows per chunk where a column is computed a chunk at a time (its temporaries: a few MiB).
CHUNK_ROWS = 1 << 16


def _chunks(n: int, size: int | None = None):
    """(start, stop) of consecutive chunks of range(n), CHUNK_ROWS rows each (the last fewer)."""
    size = size or CHUNK_ROWS
    return ((a, min(a + size, n)) for a in range(0, n, size))


def _take(lut: np.ndarray, index: np.ndarray) -> np.ndarray:
    """lut[index], one element where `index` holds one value."""
    if len(index) and index.strides == (0,):
        return constant_column(lut[index[0]], lut.dtype, len(index))
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


# sm_profiler.load reads auto files through this (capture.py imports nothing of auto mode).
FILE_READERS["auto"] = AutoTable.read

__all__ = ["AutoTable", "LaunchList", "AUTO_FILE_VERSION"]
