"""Decoded trace data: columnar numpy tables that stats, exporters and plots read.

Data flows one way: format -> decode -> TraceData -> stats / exporters / CLI. Nothing here touches
a device or a raw buffer. What is known of the launches, whatever recorded them, is
`TraceData.table` (launches.py); this module imports nothing else of the package.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .launches import KernelInfo, LaunchTable, table_of

# Values of TraceData.events["kind"].
RANGE = 0
INSTANT = 1

# Values of TraceData.unmatched["kind"] (the wire kinds, for readability).
UNMATCHED_BEGIN = 1
UNMATCHED_END = 2

EVENT_COLUMNS = ("capture", "lane", "sm", "block", "group", "event", "kind", "start_ns", "end_ns")
LANE_COLUMNS = (
    "capture",
    "lane",
    "sm",
    "block",
    "group",
    "anchor_ns",
    "written",
    "attempted",
    "dropped",
    "initialized",
)
UNMATCHED_COLUMNS = ("capture", "lane", "sm", "block", "group", "event", "kind", "time_ns")


# TraceData.to_pandas / to_arrow: sm_profiler/report/tables.py, a layer above this one, registers its
# views here (sm_profiler/__init__ imports it), so that this module imports nothing of the package.
TABLE_VIEWS: dict = {}


@dataclass
class TraceData:
    """Decoded events of one or more captures, on one `%globaltimer` time axis (ns).

    events     one row per range (begin/end paired) or instant, ordered by lane then start:
               capture, lane, sm, block, group, event, kind (RANGE/INSTANT), start_ns, end_ns
    lanes      one row per lane: capture, lane, sm, block, group, anchor_ns, written, attempted,
               dropped, initialized (False: the lane never ran profiler_init)
    unmatched  begins with no end and ends with no begin: capture, lane, sm, block, group,
               event, kind (UNMATCHED_BEGIN/END), time_ns
    kernels    one KernelInfo per capture (auto mode's: a LaunchList, built when asked)
    table      the captures as launches: kernels, sessions, steps (launches.LaunchTable), the
               same questions whatever recorded them
    """

    events: dict[str, np.ndarray]
    lanes: dict[str, np.ndarray]
    unmatched: dict[str, np.ndarray]
    kernels: Sequence[KernelInfo]
    event_names: dict[int, str]
    # Records dropped that belong to no lane of `lanes`: auto mode's (a program whose record did
    # not fit has no row at all). dropped_total counts them.
    unattributed_dropped: int = 0

    # -- convenience views -----------------------------------------------------------------

    def __len__(self) -> int:
        return len(self.events["kind"])

    @property
    def num_events(self) -> int:
        return len(self)

    @property
    def duration_ns(self) -> np.ndarray:
        return self.events["end_ns"] - self.events["start_ns"]

    @property
    def ranges(self) -> dict[str, np.ndarray]:
        m = self.events["kind"] == RANGE
        return {k: v[m] for k, v in self.events.items()}

    @property
    def instants(self) -> dict[str, np.ndarray]:
        m = self.events["kind"] == INSTANT
        return {k: v[m] for k, v in self.events.items()}

    @property
    def dropped_total(self) -> int:
        return int(self.lanes["dropped"].sum()) + int(self.unattributed_dropped)

    @property
    def table(self) -> LaunchTable:
        """The launches as one table (launches.py), whatever recorded them."""
        return table_of(self.kernels)

    @property
    def emulated(self) -> bool:
        return self.table.emulated

    @property
    def start_ns(self) -> int:
        """Earliest timestamp of the trace (lane anchors included); 0 when empty."""
        cands = [self.events["start_ns"], self.unmatched["time_ns"]]
        init = self.lanes["initialized"]
        cands.append(self.lanes["anchor_ns"][init])
        mins = [int(c.min()) for c in cands if len(c)]
        return min(mins) if mins else 0

    @property
    def end_ns(self) -> int:
        cands = [self.events["end_ns"], self.unmatched["time_ns"]]
        maxs = [int(c.max()) for c in cands if len(c)]
        return max(maxs) if maxs else self.start_ns

    def event_name(self, event_id: int) -> str:
        return self.event_names.get(int(event_id), f"event {int(event_id)}")

    def lanes_overwritten(self) -> np.ndarray:
        """Per lane (row of `lanes`): whether its drops are its oldest records, overwritten by
        a ring that wrapped (else they are its newest, dropped because the lane was full)."""
        out = np.zeros(len(self.lanes["lane"]), bool)
        cap, lane = self.lanes["capture"], self.lanes["lane"]
        for c, wrapped in self.table.wrapped_lanes().items():
            out |= (cap == c) & np.isin(lane, wrapped)
        return out

    def group_name(self, capture: int, group: int) -> str | None:
        return self.kernels[int(capture)].group_names.get(int(group))

    def capture_name(self, capture: int) -> str:
        """The capture's kernel name, with '(launch N)' (N: the capture's index) when another
        capture of this trace has the same name: 'persistent (launch 1)', 'one_per_tile'."""
        cached = self.__dict__.get("_names")
        if cached is None or cached[0] != len(self.kernels):  # exporters ask once per lane
            cached = self.__dict__["_names"] = (len(self.kernels), *_name_lookup(self.table))
        name = cached[1](int(capture))
        if cached[2][name] > 1:
            return f"{name} (launch {int(capture)})"
        return name

    def lane_label(self, capture: int, block: int, group: int) -> str:
        """'block 3 · producer', 'block 3 · group 2', or 'block 3' when blocks have one group."""
        return f"block {block}{self.group_suffix(capture, group)}"

    def group_suffix(self, capture: int, group: int) -> str:
        """What lane_label puts after the block: ' · producer', ' · group 2', or '' when blocks
        have one group."""
        name = self.group_name(capture, group)
        if name is not None:
            return f" · {name}"
        if self.kernels[int(capture)].num_groups == 1:
            return ""
        return f" · group {group}"

    def to_pandas(self, table: str = "events"):
        """One table (events, lanes, launches, unmatched) as a pandas DataFrame; columns in
        sm_profiler.report.tables (pandas is optional: `pip install -e '.[query]'`)."""
        return TABLE_VIEWS["pandas"](self, table)

    def to_arrow(self, table: str = "events"):
        """One table as a pyarrow Table (pyarrow is optional); see to_pandas."""
        return TABLE_VIEWS["arrow"](self, table)

    def select_capture(self, capture: int) -> TraceData:
        """The part of this trace that came from one capture, renumbered as capture 0."""
        if not 0 <= capture < len(self.kernels):
            raise IndexError(f"capture {capture} out of range: this trace has {len(self.kernels)}")

        def pick(table: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
            m = table["capture"] == capture
            out = {k: v[m] for k, v in table.items()}
            out["capture"] = np.zeros(int(m.sum()), np.int32)
            return out

        return TraceData(
            pick(self.events),
            pick(self.lanes),
            pick(self.unmatched),
            [self.kernels[capture]],
            dict(self.event_names),
        )

    @staticmethod
    def concat(parts: list[TraceData]) -> TraceData:
        """One trace from several (several kernels, or several launches of one kernel).

        Capture indices are renumbered in order; times stay on the shared %globaltimer axis.
        Event names are merged: where two parts use one event id for different names (or a later
        part names an id that an earlier part used unnamed), the later part's id is renumbered
        (past the largest id in use) so that no name is lost and no two names share an id.
        """
        if not parts:
            from ..errors import ConfigError

            raise ConfigError("TraceData.concat needs at least one TraceData; give a list of them")
        events, lanes, unmatched, kernels = [], [], [], []
        unattributed = sum(int(p.unattributed_dropped) for p in parts)
        event_names: dict[int, str] = {}
        used: set[int] = set()
        offset = 0
        for p in parts:
            remap = _merge_names(event_names, p.event_names, used, p)
            for src, dst in ((p.events, events), (p.lanes, lanes), (p.unmatched, unmatched)):
                t = dict(src)
                t["capture"] = (t["capture"] + offset).astype(np.int32)
                if "event" in t and remap:
                    t["event"] = _apply_remap(t["event"], remap)
                dst.append(t)
            kernels.extend(p.kernels)
            offset += len(p.kernels)

        def cat(tables):
            return {k: np.concatenate([t[k] for t in tables]) for k in tables[0]}

        return TraceData(
            cat(events), cat(lanes), cat(unmatched), kernels, event_names, unattributed
        )


def _name_lookup(table: LaunchTable):
    """(capture -> its kernel name, name -> how many captures have it), found per kernel of the
    table, not per launch."""
    from collections import Counter

    knames, launch_kernel = table.kernel_names(), table.launches["kernel"]
    per_kernel = np.bincount(launch_kernel, minlength=len(knames)).tolist()
    counts: Counter = Counter()
    for name, c in zip(knames, per_kernel, strict=False):
        counts[name] += c
    return (lambda c: knames[int(launch_kernel[c])]), counts


def _ids_in(part: TraceData) -> set[int]:
    ids = set(part.event_names)
    for col in (part.events["event"], part.unmatched["event"]):
        ids.update(np.unique(col).tolist())
    return ids


def _merge_names(
    merged: dict[int, str], names: dict[int, str], used: set[int], part: TraceData
) -> dict[int, int]:
    """Add `names` into `merged`; return {old id: new id} for ids of `part` that had to move.

    `used` holds every id that earlier parts use, named or not; it is updated with this part's
    ids after the move. An id keeps its number when that number means the same name (or nothing)
    so far; a name already known under another id joins that id when this part does not use it;
    anything else gets a fresh id past every id in use, so two names never share an id.
    """
    part_ids = _ids_in(part)
    by_name = {v: k for k, v in merged.items()}
    taken = used | part_ids | set(merged)
    remap: dict[int, int] = {}
    for k, v in sorted(names.items()):
        j = by_name.get(v)
        if merged.get(k) == v:
            continue
        if j is not None and j not in part_ids - remap.keys():
            remap[k] = j
            continue
        if j is None and k not in merged and k not in used:
            merged[k] = v
            by_name[v] = k
            continue
        new = max(taken) + 1
        taken.add(new)
        merged[new] = v
        by_name.setdefault(v, new)
        remap[k] = new
    used.update(remap.get(k, k) for k in part_ids)
    return remap


def _apply_remap(col: np.ndarray, remap: dict[int, int]) -> np.ndarray:
    out = col.astype(np.int32, copy=True)
    for old, new in remap.items():
        out[col == old] = new
    return out
