"""The timeline model: what a trace viewer shows, decided once from a TraceData.

The Perfetto writer, the Chrome writer and the PNG plot each render one `Timeline`; none of them
decides track order, names, block residency or launch spans on its own. The model is::

    root        one group holding everything, children in explicit order:
      launches  one track per capture (kernel launch): a slice over the launch's span, named
                after it (so the UI's search finds it), and, when host gaps are cut, a marker
                where each cut was made
      SM tracks one per SM, in SM-id order ('SM 0', 'SM 1', ..., 'unknown SM' first); each holds
        resident blocks   a counter: blocks of any launch resident on the SM
        lane tracks       one per (capture, block, group) lane that ran on the SM, in
                          capture, block, group order; ranges that partially overlap others of
                          their lane go to '(overlap)' tracks under their lane

Times stay absolute %globaltimer ns unless host gaps are cut (`cut_gaps=True`): then each launch
is moved back so that it starts `gap_kept_ns` after the previous one ends; the trace's tables are
shifted per capture and `cuts` says where and how much.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .trace import TraceData

# What is left of a cut host gap: enough to see the launches apart at any zoom that shows both.
GAP_KEPT_FRACTION = 0.02  # of the longest launch
GAP_KEPT_MIN_NS = 1_000
# Only gaps this much longer than what is kept are cut (a back-to-back launch stays as it is).
CUT_FACTOR = 4


@dataclass
class Timeline:
    trace: TraceData  # the trace shown (its times shifted when host gaps were cut)
    ev_lane: np.ndarray  # lanes-table row of each event row
    um_lane: np.ndarray  # lanes-table row of each unmatched row
    lane_lo: np.ndarray  # earliest time of each lane (anchor, events, unmatched)
    lane_hi: np.ndarray  # latest time of each lane
    lane_used: np.ndarray  # bool: the lane ran (initialised) or recorded something
    sms: np.ndarray  # SM ids shown, ascending (SM -1 = unknown first)
    lane_sm_index: np.ndarray  # index into `sms` of each lane (meaningful where lane_used)
    blocks: dict[str, np.ndarray]  # residency per (capture, block, sm); see block_intervals
    occupancy: dict[str, np.ndarray]  # sm_index, time_ns, value: 'resident blocks' steps
    launches: dict[str, np.ndarray]  # capture, start_ns, end_ns of captures with a span
    cuts: list[tuple[int, int]] = field(default_factory=list)  # (time_ns after cut, cut ns)
    notes: list[str] = field(default_factory=list)  # what the viewer should be told

    # -- names ------------------------------------------------------------------------------

    @property
    def root_name(self) -> str:
        names = list(dict.fromkeys(k.name for k in self.trace.kernels))
        return "GPU: " + ", ".join(names) if names else "GPU"

    def sm_name(self, i: int) -> str:
        sm = int(self.sms[i])
        name = f"SM {sm}" if sm >= 0 else "unknown SM"
        # Under the CPU interpreter SM ids are program id modulo a constant and times are host
        # clock: say so where the reader looks first.
        return f"{name} (emulated)" if self.trace.emulated else name

    def lane_name(self, row: int, level: int = 0) -> str:
        """'block 3 · producer'; with several captures the launch comes first, since an SM's
        track holds the lanes of every launch: 'gemm · block 3', 'gemm (launch 2) · block 3'."""
        lanes, t = self.trace.lanes, self.trace
        cap, blk, grp = (int(lanes[c][row]) for c in ("capture", "block", "group"))
        label = t.lane_label(cap, blk, grp)
        if len(t.kernels) > 1:
            label = f"{t.capture_name(cap)} · {label}"
        if level == 1:
            label += " (overlap)"
        elif level > 1:
            label += f" (overlap {level})"
        return label

    def launch_name(self, capture: int) -> str:
        return self.trace.capture_name(capture)

    # -- order ------------------------------------------------------------------------------

    def lane_rank(self, row: int) -> int:
        """Rank of a lane among its SM's tracks: lanes-table order, which is capture, block,
        group; 0 is the 'resident blocks' counter."""
        return 1 + int(row)


def build(trace: TraceData, cut_gaps: bool = False) -> Timeline:
    """The timeline of `trace`; `cut_gaps` lays launches end to end (see the module doc)."""
    cuts: list[tuple[int, int]] = []
    if cut_gaps and len(trace.kernels) > 1:
        trace, cuts = _cut_host_gaps(trace)
    ev_lane = lane_row_of(trace, trace.events)
    um_lane = lane_row_of(trace, trace.unmatched)
    lo, hi = lane_extent(trace, ev_lane, um_lane)
    lanes = trace.lanes
    nl = len(lanes["lane"])
    has_rows = (np.bincount(ev_lane, minlength=nl) + np.bincount(um_lane, minlength=nl)) > 0
    used = lanes["initialized"].astype(bool) | has_rows
    lane_sm = lanes["sm"].astype(np.int64)
    sms = np.unique(lane_sm[used])
    blocks = block_intervals(trace, lo, hi, used)
    occ = resident_blocks(blocks)
    occ["sm_index"] = np.searchsorted(sms, occ.pop("sm"))
    k_lo, k_hi = launch_spans(trace, lo, hi, used)
    has = ~((k_lo == 0) & (k_hi == 0))
    caps = np.flatnonzero(has)
    launches = {"capture": caps, "start_ns": k_lo[caps], "end_ns": k_hi[caps]}
    notes = []
    if cuts:
        total = sum(c for _, c in cuts)
        notes.append(f"host gaps cut: {len(cuts)} gaps, {total / 1e6:.3f} ms in all; times "
                     "after a cut are moved back by what was cut")  # fmt: skip
    return Timeline(trace, ev_lane, um_lane, lo, hi, used, sms, np.searchsorted(sms, lane_sm),
                    blocks, occ, launches, cuts, notes)  # fmt: skip


# -- lanes -----------------------------------------------------------------------------------------


def capture_base(trace: TraceData) -> np.ndarray:
    """Row in the lanes table of each capture's lane 0 (captures are stored one after another)."""
    lanes = trace.lanes
    cap = lanes["capture"]
    n_caps = max(len(trace.kernels), int(cap.max()) + 1 if len(cap) else 0)
    base = np.zeros(n_caps, np.int64)
    if len(cap):
        first = np.ones(len(cap), bool)
        first[1:] = cap[1:] != cap[:-1]
        rows = np.flatnonzero(first)
        base[cap[rows]] = rows - lanes["lane"][rows]
    return base


def lane_row_of(trace: TraceData, table: dict[str, np.ndarray]) -> np.ndarray:
    """Row in `trace.lanes` of each row of `table` (events or unmatched).

    int32 while the lanes table allows: this column is as long as the events table.
    """
    base = capture_base(trace)
    if len(trace.lanes["lane"]) < 2**31:
        return base.astype(np.int32)[table["capture"]] + table["lane"].astype(np.int32)
    return base[table["capture"]] + table["lane"].astype(np.int64)


def lane_extent(trace: TraceData, ev_lane: np.ndarray, um_lane: np.ndarray | None = None):
    """(earliest, latest) time of each lane: anchor, events and unmatched records.

    Lanes with nothing at all get (anchor, anchor); uninitialised empty lanes (0, 0).
    """
    lanes = trace.lanes
    big = np.iinfo(np.int64).max
    anchor = lanes["anchor_ns"].astype(np.int64)
    init = lanes["initialized"].astype(bool)
    lo = np.where(init, anchor, big)
    hi = np.where(init, anchor, np.iinfo(np.int64).min)
    ev = trace.events
    if len(ev_lane):
        seg = _segments(ev_lane)
        if seg is not None:
            lane_ids = ev_lane[seg]
            lo[lane_ids] = np.minimum(lo[lane_ids], np.minimum.reduceat(ev["start_ns"], seg))
            hi[lane_ids] = np.maximum(hi[lane_ids], np.maximum.reduceat(ev["end_ns"], seg))
        else:
            np.minimum.at(lo, ev_lane, ev["start_ns"])
            np.maximum.at(hi, ev_lane, ev["end_ns"])
    um = trace.unmatched
    if len(um["time_ns"]):
        rows = lane_row_of(trace, um) if um_lane is None else um_lane
        np.minimum.at(lo, rows, um["time_ns"])
        np.maximum.at(hi, rows, um["time_ns"])
    empty = lo == big
    lo[empty] = 0
    hi[empty] = 0
    return lo, hi


def _segments(keys: np.ndarray):
    """Start index of each run of equal keys if `keys` is sorted, else None."""
    if len(keys) > 1 and bool((keys[1:] < keys[:-1]).any()):
        return None
    first = np.ones(len(keys), bool)
    first[1:] = keys[1:] != keys[:-1]
    return np.flatnonzero(first)


# -- blocks, occupancy, launches ---------------------------------------------------------------------


def block_intervals(trace: TraceData, lane_lo=None, lane_hi=None, used=None) -> dict:
    """Residency of each block on each SM: one row per distinct (capture, block, sm) among the
    lanes that ran, from its lanes' earliest time (the anchor) to their latest record. Returns
    capture, block, sm, start_ns, end_ns; sorted by (sm, start_ns)."""
    lanes = trace.lanes
    if lane_lo is None:
        lane_lo, lane_hi = lane_extent(trace, lane_row_of(trace, trace.events))
    if used is None:
        used = lanes["initialized"].astype(bool)
    cap = lanes["capture"][used].astype(np.int64)
    blk = lanes["block"][used].astype(np.int64)
    sm = lanes["sm"][used].astype(np.int64)
    start, end = lane_lo[used], lane_hi[used]
    if len(cap) == 0:
        z = np.zeros(0, np.int64)
        return {"capture": z, "block": z, "sm": z, "start_ns": z, "end_ns": z}
    # One interval per (capture, block, sm): groups of a block share its residency.
    order = np.lexsort((blk, cap, sm))
    cap, blk, sm, start, end = cap[order], blk[order], sm[order], start[order], end[order]
    first = np.ones(len(cap), bool)
    first[1:] = (cap[1:] != cap[:-1]) | (blk[1:] != blk[:-1]) | (sm[1:] != sm[:-1])
    g = np.flatnonzero(first)
    out = {
        "capture": cap[g],
        "block": blk[g],
        "sm": sm[g],
        "start_ns": np.minimum.reduceat(start, g),
        "end_ns": np.maximum.reduceat(end, g),
    }
    order = np.lexsort((out["start_ns"], out["sm"]))
    return {k: v[order] for k, v in out.items()}


def resident_blocks(blocks: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Each SM's "resident blocks" counter after each change, from `block_intervals`.

    Returns sm, time_ns, value; sorted by (sm, time_ns); one row per distinct time.
    """
    n = len(blocks["sm"])
    if n == 0:
        z = np.zeros(0, np.int64)
        return {"sm": z, "time_ns": z, "value": z}
    # +1 when a block arrives, -1 when it leaves; net change per (sm, time), then a running sum.
    s = np.concatenate([blocks["sm"], blocks["sm"]])
    t = np.concatenate([blocks["start_ns"], blocks["end_ns"]])
    d = np.concatenate([np.ones(n, np.int64), -np.ones(n, np.int64)])
    order = np.lexsort((t, s))
    s, t, d = s[order], t[order], d[order]
    last = np.ones(len(s), bool)
    last[:-1] = (s[1:] != s[:-1]) | (t[1:] != t[:-1])
    cs = np.cumsum(d)
    sm_first = np.ones(len(s), bool)
    sm_first[1:] = s[1:] != s[:-1]
    starts = np.flatnonzero(sm_first)
    before = (cs - d)[starts]
    value = cs - np.repeat(before, np.diff(np.append(starts, len(s))))
    return {"sm": s[last], "time_ns": t[last], "value": value[last]}


def launch_spans(trace: TraceData, lane_lo, lane_hi, used):
    """(start_ns, end_ns) of each capture over its lanes; (0, 0) for a capture with nothing."""
    n = len(trace.kernels)
    lo = np.full(n, np.iinfo(np.int64).max, np.int64)
    hi = np.full(n, np.iinfo(np.int64).min, np.int64)
    cap = trace.lanes["capture"][used].astype(np.int64)
    np.minimum.at(lo, cap, lane_lo[used])
    np.maximum.at(hi, cap, lane_hi[used])
    empty = lo > hi
    lo[empty] = 0
    hi[empty] = 0
    return lo, hi


# -- launches end to end ------------------------------------------------------------------------------


def _cut_host_gaps(trace: TraceData) -> tuple[TraceData, list[tuple[int, int]]]:
    """`trace` with each capture moved back so that launches follow each other closely.

    Launches are taken in start order; a launch that overlaps or nearly touches what came before
    stays where it is relative to it. Returns the shifted trace and (time after the cut, ns cut).
    """
    ev_lane = lane_row_of(trace, trace.events)
    lo, hi = lane_extent(trace, ev_lane)
    used = trace.lanes["initialized"].astype(bool) | (hi > 0)
    k_lo, k_hi = launch_spans(trace, lo, hi, used)
    has = ~((k_lo == 0) & (k_hi == 0))
    spans = (k_hi - k_lo)[has]
    keep = max(GAP_KEPT_MIN_NS, int(GAP_KEPT_FRACTION * int(spans.max()))) if len(spans) else 0
    shift = np.zeros(len(trace.kernels), np.int64)
    cuts: list[tuple[int, int]] = []
    end_so_far, moved = None, 0
    for c in sorted(np.flatnonzero(has).tolist(), key=lambda c: (int(k_lo[c]), c)):
        if end_so_far is not None:
            gap = int(k_lo[c]) - moved - end_so_far
            if gap > CUT_FACTOR * keep:
                moved += gap - keep
                cuts.append((int(k_lo[c]) - moved, gap - keep))
        shift[c] = moved
        end = int(k_hi[c]) - moved
        end_so_far = end if end_so_far is None else max(end_so_far, end)
    if not cuts:
        return trace, []

    def moved_table(table: dict[str, np.ndarray], cols: tuple[str, ...]) -> dict:
        out = dict(table)
        d = shift[table["capture"]]
        for col in cols:
            out[col] = table[col] - d
        return out

    lanes = moved_table(trace.lanes, ("anchor_ns",))
    # An uninitialised lane keeps anchor 0 (it has no time to move).
    lanes["anchor_ns"] = np.where(trace.lanes["initialized"], lanes["anchor_ns"],
                                  trace.lanes["anchor_ns"])  # fmt: skip
    shifted = TraceData(
        moved_table(trace.events, ("start_ns", "end_ns")),
        lanes,
        moved_table(trace.unmatched, ("time_ns",)),
        trace.kernels,
        trace.event_names,
    )
    return shifted, cuts
