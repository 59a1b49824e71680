"""The timeline as data: everything a writer draws, taken from a `Timeline` in one pass.

The Perfetto writer, the Chrome writer, the PNG plot and the rank merges each read a `Drawing`:
plain data (names as strings, columns as numpy arrays) that `drawing_of` builds once from a
Timeline, asking it each name once. A writer never calls back into the Timeline or reads its
TraceData; whatever it needs and does not find here belongs in the Timeline, then here::

    root        root_name, notes, focus (the span the viewer opens on), start_ns, end_ns
    SM tracks   sms (ids, in track order), sm_names; under each: its 'resident blocks' counter
                (occupancy), its summary counters (summary, summary_names), its lanes
    lanes       one lane track per row of the shown trace's lanes table (Lanes): SM track,
                rank, name, earliest time; overlap tracks named by Lanes.track_name
    slices      the ranges and instants drawn (slices: lane, start_ns, end_ns, kind, event),
                their names (slice_names, by event id), their overlap levels (levels, on use)
    marks       instants that say what a lane lost or could not pair: unmatched records and
                dropped records (marks: lane, time_ns, name into mark_names, drop)
    launches    launch tracks (launch_tracks: name, rows in start order), each launch's span,
                name and host-gap cut mark (launches, launch_names, launch_cuts)
    GPU         busy SMs (busy), block residency (blocks, block_slots on use), groups per
                block of each launch (groups)

The layout rules run here, once, and writers read their results: the overlap level of each
slice (levels), the order a viewer must read a lane's rows in (lane_rows: timeline.order_rows),
the slot of each resident block (block_slots: timeline.assign_slots) and the ranges no other
range of their lane encloses (top_level). `launch_drawings` draws each launch on its own, named
as the whole trace names it (the picture's panels).

Columns are the Timeline's own arrays, not copies: building a drawing costs its names (one per
SM, per launch drawn, per (launch, group) of the lanes that show something: a lane's name is
made from those parts when a writer asks, so millions of lanes hold a word each) and a few
reductions over the rows.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from ..errors import ConfigError
from ..text import plural
from .model import RANGE, TraceData
from .timeline import (  # noqa: F401 (what writers take with a drawing: its constants)
    LEVELS,
    OCCUPANCY_RANK,
    SUMMARY_RANK0,
    LaneNames,
    Timeline,
    block_slots,
    build,
    order_rows,
    overlap_name,
)

__all__ = [
    "Drawing",
    "Focus",
    "LaneNames",
    "LaneRows",
    "Lanes",
    "drawing_of",
    "as_drawing",
    "launch_drawings",
    "picture_drawing",
]


@dataclass(frozen=True)
class Focus:
    """The span a viewer opens on, and what it is: `label` ('step 3', 'gemm, the longest
    launch'); `rest`: what zooming out shows ('the rest', 'the others')."""

    start_ns: int
    end_ns: int
    label: str
    rest: str


@dataclass(frozen=True, eq=False)
class Lanes:
    """The lane tracks: one per row of the shown trace's lanes table (rows that show nothing
    too, so that a lane's number is its row everywhere)."""

    sm: np.ndarray  # index into Drawing.sms of each lane's SM track (meaningful where shown)
    lo: np.ndarray  # earliest time of each lane (its anchor, records and marks)
    hi: np.ndarray  # latest time of each lane
    initialized: np.ndarray  # bool: the lane ran
    rank: np.ndarray  # order among its SM's tracks (counters: OCCUPANCY_RANK, SUMMARY_RANK0 + id)
    names: LaneNames  # names[g]: lane g's name, for each lane with a slice or a mark
    packed: bool  # the lanes are packed slots ('slot 3'): their overlap tracks are numbered
    # Each lane's key in the trace: its launch (capture), block, group and SM id.
    capture: np.ndarray
    block: np.ndarray
    group: np.ndarray
    sm_id: np.ndarray

    def __len__(self) -> int:
        return len(self.sm)

    def track_name(self, lane: int, level: int) -> str:
        """The name of lane `lane`'s track at overlap `level` (0: the lane's own)."""
        return overlap_name(self.names[lane], level, self.packed)


@dataclass(frozen=True, eq=False)
class Drawing:
    """What a writer draws; see the module doc."""

    root_name: str
    notes: list[str]
    focus: Focus | None
    start_ns: int  # the trace's earliest time (lane anchors included): time origin of the files
    end_ns: int  # its latest record
    emulated: bool
    dropped_total: int
    kernel_names: list[str]
    sms: np.ndarray
    sm_names: list[str]
    lanes: Lanes
    slices: dict[str, np.ndarray]
    slice_names: dict[int, str]  # event id -> name, ids ascending
    marks: dict[str, np.ndarray]
    mark_names: list[str]
    occupancy: dict[str, np.ndarray]  # sm_index, time_ns, value
    busy: dict[str, np.ndarray]  # time_ns, value
    summary: dict[str, np.ndarray] | None  # sm_index, event, time_ns, value; None: no summary
    summary_names: dict[int, str]  # event id of `summary` -> its counter's name
    launches: dict[str, np.ndarray]  # start_ns, end_ns, track: one row per launch drawn
    launch_names: list[str]  # per row of `launches`
    launch_cuts: dict[int, str]  # row of `launches` -> 'host gap cut: 1.250 ms' before it
    launch_tracks: list[tuple[str, np.ndarray]]  # (name, rows of `launches` in start order)
    blocks: dict[str, np.ndarray]  # capture, block, sm, start_ns, end_ns (block_intervals)
    groups: np.ndarray  # groups per block of each capture (launch): a block's bands

    @functools.cached_property
    def levels(self) -> np.ndarray:
        """The overlap level of each slice on its lane (timeline.order_rows): 0 on the lane's
        own track, k on its k-th '(overlap)' track. Made on first use: the Perfetto writer
        finds them a chunk of lanes at a time, with the order it writes the rows in."""
        s = self.slices
        if len(s["lane"]) == 0:
            return np.zeros(0, np.int64)
        is_range = s["kind"] == RANGE
        rows = order_rows(
            s["start_ns"], s["end_ns"], is_range, s["lane"], self.lanes.lo, s["event"]
        )
        return rows["level"]

    @functools.cached_property
    def block_slots(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(index into `sms`, slot, slots of that SM) of each row of `blocks`."""
        return block_slots(self.sms, self.blocks)

    @functools.cached_property
    def top_level(self) -> np.ndarray:
        """Rows of `slices` that are ranges no earlier-starting range of their lane encloses
        (what a picture draws of a lane), ascending."""
        return _top_level_ranges(self.slices)

    @functools.cached_property
    def rows_per_lane(self) -> np.ndarray:
        """Slices and marks of each lane: a writer's chunks of lanes are sized by them."""
        return self._by_lane[1] + self._by_lane[4]

    @functools.cached_property
    def _by_lane(self):
        """The slices and marks grouped by lane: (slice order or None where the slices are in
        lane order already, slices per lane, first of each lane in that order, marks in lane
        order, marks per lane, first of each lane in that order)."""
        nl = len(self.lanes)
        ev_lane = self.slices["lane"]
        ev_order = None
        if len(ev_lane) > 1 and bool((ev_lane[1:] < ev_lane[:-1]).any()):
            ev_order = np.argsort(ev_lane, kind="stable")
        ev_count = np.bincount(ev_lane, minlength=nl)
        mark_order = np.argsort(self.marks["lane"], kind="stable")
        x_count = np.bincount(self.marks["lane"][mark_order], minlength=nl)
        ev_first = np.cumsum(ev_count) - ev_count
        x_first = np.cumsum(x_count) - x_count
        return ev_order, ev_count, ev_first, mark_order, x_count, x_first

    def lane_rows(self, lanes: np.ndarray, ref: np.ndarray) -> LaneRows:
        """The slices and marks of `lanes` (rows of the lanes table), lane after lane, each on
        its overlap track, and the order a viewer must read them in (timeline.order_rows: at
        one time the ends of ranges begun earlier, innermost first, then begins in row order);
        `ref` per lane: a time at or before each of its rows."""
        ev_order, ev_count, ev_first, mark_order, x_count, x_first = self._by_lane
        ev, m = self.slices, self.marks
        idx = _ranges(ev_first[lanes], ev_count[lanes])
        if ev_order is not None:
            idx = ev_order[idx]
        mark = mark_order[_ranges(x_first[lanes], x_count[lanes])]
        lane_pos = np.concatenate(
            [
                np.repeat(np.arange(len(lanes)), ev_count[lanes]),
                np.repeat(np.arange(len(lanes)), x_count[lanes]),
            ]
        )
        start = np.concatenate([ev["start_ns"][idx], m["time_ns"][mark]])
        end = np.concatenate([ev["end_ns"][idx], m["time_ns"][mark]])
        is_range = np.concatenate([ev["kind"][idx] == RANGE, np.zeros(len(mark), bool)])
        event = np.concatenate([ev["event"][idx], np.zeros(len(mark), np.int32)])
        packets = order_rows(start, end, is_range, lane_pos, ref, event)
        return LaneRows(idx, mark, is_range, packets)


@dataclass(frozen=True, eq=False)
class LaneRows:
    """Drawing.lane_rows: a chunk of lanes' rows, the slices' then the marks', and their order.

    Row i is slice `slice[i]` for i < len(slice), else mark `mark[i - len(slice)]`; `packets`
    holds, per begin, end or instant in the order to write them: row, is_end, block (the lane's
    position in the chunk * LEVELS + its overlap level) and time_ns."""

    slice: np.ndarray  # rows of Drawing.slices
    mark: np.ndarray  # rows of Drawing.marks
    is_range: np.ndarray  # per row
    packets: dict[str, np.ndarray]


def as_drawing(tl, writer: str, facade: str) -> Drawing:
    """The drawing a writer reads: `tl` itself, or a Timeline's; anything else (a TraceData) is
    refused with the fix: writers decide no layout."""
    if isinstance(tl, Drawing):
        return tl
    if isinstance(tl, Timeline):
        return drawing_of(tl)
    raise ConfigError(
        f"the {writer} writer takes a Timeline, not a {type(tl).__name__}: call "
        f"sm_profiler.export.{facade}(trace, **options) or export(trace, path), which build "
        "it, or build one with sm_profiler.export.timeline(trace, **options)"
    )


def drawing_of(tl: Timeline) -> Drawing:
    """The drawing of `tl`: every name asked of it once."""
    t = tl.trace
    ev = t.events

    # Slices: the events table's own columns; their names by event id, ascending.
    slices = {
        "lane": tl.ev_lane,
        "start_ns": ev["start_ns"],
        "end_ns": ev["end_ns"],
        "kind": ev["kind"],
        "event": ev["event"],
    }
    ids = np.flatnonzero(np.bincount(ev["event"], minlength=1)) if len(ev["event"]) else []
    slice_names = {int(e): t.event_name(e) for e in ids}

    marks, mark_names = _marks(tl)

    lane_data = _lanes(tl, marks)

    summary_names = {}
    if tl.summary is not None and len(tl.summary["event"]):
        summary_names = {int(e): tl.summary_name(e) for e in np.unique(tl.summary["event"])}

    L = tl.launches
    launch_names = [tl.launch_name(c) for c in L["capture"].tolist()]
    launch_cuts = {}
    if tl.cuts:
        for r in range(len(launch_names)):
            cut = tl.cut_name(r)
            if cut is not None:
                launch_cuts[r] = cut

    return Drawing(
        root_name=tl.root_name,
        notes=list(tl.notes),
        focus=_focus(tl, launch_names),
        start_ns=int(t.start_ns),
        end_ns=int(t.end_ns),
        emulated=bool(t.emulated),
        dropped_total=int(t.dropped_total),
        kernel_names=t.table.launch_names(),
        sms=tl.sms,
        sm_names=[tl.sm_name(i) for i in range(len(tl.sms))],
        lanes=lane_data,
        slices=slices,
        slice_names=slice_names,
        marks=marks,
        mark_names=mark_names,
        occupancy=tl.occupancy,
        busy=tl.busy,
        summary=tl.summary,
        summary_names=summary_names,
        launches={
            "start_ns": L["start_ns"],
            "end_ns": L["end_ns"],
            "track": np.asarray(tl.launch_track, np.int64),
        },
        launch_names=launch_names,
        launch_cuts=launch_cuts,
        launch_tracks=tl.launch_tracks(),
        blocks=tl.blocks,
        groups=np.array([k.num_groups for k in t.kernels], np.int64),
    )


def _lanes(tl: Timeline, marks: dict[str, np.ndarray]) -> Lanes:
    """The lane tracks, a name for each lane with a slice or a mark (made when a writer asks)."""
    lanes = tl.trace.lanes
    nl = len(lanes["lane"])
    shows = np.bincount(tl.ev_lane, minlength=nl) + np.bincount(marks["lane"], minlength=nl)
    return Lanes(
        sm=tl.lane_sm_index,
        lo=tl.lane_lo,
        hi=tl.lane_hi,
        initialized=lanes["initialized"].astype(bool),
        rank=np.arange(nl, dtype=np.int64),  # tl.lane_rank: lanes-table order
        names=tl.lane_names(np.flatnonzero(shows)),
        packed=tl.lane_labels is not None,
        capture=lanes["capture"],
        block=lanes["block"],
        group=lanes["group"],
        sm_id=lanes["sm"],
    )


def _marks(tl: Timeline) -> tuple[dict[str, np.ndarray], list[str]]:
    """(marks, their names): unmatched records (their names by (kind, event), in that order),
    then dropped records (on their lane's first or last time)."""
    um = tl.trace.unmatched
    mark_names: list[str] = []
    um_kind, um_event = um["kind"].astype(np.int64), um["event"].astype(np.int64)
    um_name = np.zeros(len(um_kind), np.int64)
    if len(um_kind):
        top = int(um_event.max()) + 1
        keys, um_name = np.unique(um_kind * top + um_event, return_inverse=True)
        um_name = um_name.reshape(-1)
        for k in keys.tolist():
            kind, e = divmod(k, top)
            mark_names.append(tl.unmatched_name(kind, e))
    d_lane, d_at, d_labels = tl.drop_marks()
    label_id: dict[str, int] = {}
    d_name = [label_id.setdefault(x, len(mark_names) + len(label_id)) for x in d_labels]
    mark_names += list(label_id)
    marks = {
        "lane": np.concatenate([tl.um_lane, d_lane]),
        "time_ns": np.concatenate([um["time_ns"].astype(np.int64), d_at]),
        "name": np.concatenate([um_name, np.asarray(d_name, np.int64)]),
        "drop": np.concatenate([np.zeros(len(tl.um_lane), bool), np.ones(len(d_lane), bool)]),
    }
    return marks, mark_names


def _focus(tl: Timeline, launch_names: list[str]) -> Focus | None:
    """The span the viewer opens on: the timeline's (auto mode: the first step drawn in full),
    else the longest launch where there are several."""
    if tl.focus_ns is not None:
        lo, hi = tl.focus_ns
        return Focus(int(lo), int(hi), tl.focus_label, "the rest")
    L = tl.launches
    if tl.focus is None or len(L["capture"]) < 2:
        return None
    f = tl.focus
    name = f"{launch_names[f]}, the longest launch"
    return Focus(int(L["start_ns"][f]), int(L["end_ns"][f]), name, "the others")


def picture_drawing(trace: TraceData) -> Drawing:
    """The drawing of `trace` as a picture of its SMs takes it: every range (no summary), each
    lane its own (no packing: a range's block is its lane's)."""
    return drawing_of(build(trace, summary=False, pack=False))


def launch_drawings(trace: TraceData, capture: int | None = None) -> list[tuple[str, Drawing]]:
    """(title, picture_drawing) of each launch (capture) of `trace`, or of `capture` alone: a
    picture's panels, each on its own time axis, titled as the whole trace names the launch
    ('gemm (launch 1) · 132 blocks')."""
    caps = list(range(len(trace.kernels))) if capture is None else [capture]
    out = []
    for c in caps:
        blocks = plural(trace.kernels[c].num_blocks, "block")
        part = picture_drawing(trace.select_capture(c))
        out.append((f"{trace.capture_name(c)} · {blocks}", part))
    return out


def _top_level_ranges(ev: dict[str, np.ndarray]) -> np.ndarray:
    """Indices of ranges not contained in an earlier-starting range of the same lane."""
    idx = np.flatnonzero(ev["kind"] == RANGE)
    if len(idx) == 0:
        return idx
    lane = ev["lane"][idx].astype(np.int64)
    s, e = ev["start_ns"][idx], ev["end_ns"][idx]
    order = np.lexsort((-e, s, lane))  # outer range first when two start together
    idx, lane, s, e = idx[order], lane[order], s[order], e[order]
    _, lane_rank = np.unique(lane, return_inverse=True)
    # Running max of ends within each lane, in one accumulate: lift each lane above the last.
    lo = int(min(s.min(), e.min()))
    width = int(e.max()) - lo + 1
    lift = lane_rank.astype(np.int64) * width - lo
    run = np.maximum.accumulate(e + lift)
    first = np.ones(len(idx), bool)
    first[1:] = lane[1:] != lane[:-1]
    prev_end = np.empty_like(run)
    prev_end[1:] = run[:-1] - lift[1:]
    top = first.copy()
    top[~first] = e[~first] > prev_end[~first]
    return np.sort(idx[top])


def _ranges(first: np.ndarray, count: np.ndarray) -> np.ndarray:
    """Concatenation of arange(first[i], first[i] + count[i]) for all i."""
    total = int(count.sum())
    if total == 0:
        return np.zeros(0, np.int64)
    starts = np.cumsum(count) - count
    return np.arange(total) - np.repeat(starts - first, count)
