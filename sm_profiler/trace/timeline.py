"""The timeline model: what a trace viewer shows, decided once from a TraceData.

The Perfetto writer, the Chrome writer and the PNG plot each render one `Timeline`, through its
`Drawing` (sm_profiler.trace.drawing: the same as plain data, taken once); none of them decides
track order, names, block residency or launch spans on its own. The model is::

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

import functools
from dataclasses import dataclass, field, replace
from typing import NamedTuple

import numpy as np

from ..errors import ConfigError
from ..text import plural
from ..units import format_time
from ..wire.format import MAX_EVENT_ID
from .model import RANGE, UNMATCHED_BEGIN, TraceData
from .summary import SUMMARY_BINS, ActiveRanges, drop_repeats

# What is left of a cut host gap: enough to see the launches apart at any zoom that shows both.
GAP_KEPT_FRACTION = 0.02  # of the longest launch
GAP_KEPT_MIN_NS = 1_000
# Only gaps this much longer than what is kept are cut (a back-to-back launch stays as it is).
CUT_FACTOR = 4
# Above this many trace rows (ranges + instants) exports are summarised unless told otherwise:
# past it the Perfetto UI takes too long to open a trace (BENCHMARKS.md, "Perfetto UI load
# time", measured with benchmarks/ui_load.py; SUMMARY_UI_SECONDS is what the note quotes).
SUMMARY_ROWS = 1_000_000
SUMMARY_UI_SECONDS = 14
# Auto mode's default trace, whatever the run's length: at most this many programs drawn in
# full (the first recorded steps that fit, where steps were recorded) and at most this many
# counter samples for the rest, so that the file stays far under the 64 MiB the Perfetto UI opens
# in seconds (BENCHMARKS.md, "A trace that opens").
AUTO_DETAIL_ROWS = 100_000
SUMMARY_POINTS = 300_000
# Rows per chunk where the default trace of a long run reads every row (its temporaries: a few
# MiB a chunk).
CHUNK_ROWS = 1 << 18
SUMMARY_PART_ROWS = 1 << 16
# Launches drawn on the launches track of such a trace, at most (beyond: those drawn in full).
MAX_LAUNCH_SLICES = 50_000
# A summary draws each launch in this many bins at least; below that it draws each SM's
# programs of all kernels in bins of the whole run.
MIN_LAUNCH_BINS = 16
# Ranks (int32) under an SM: its occupancy, its summary counters by event id, then its lanes (0..).
OCCUPANCY_RANK = -(1 << 30)
SUMMARY_RANK0 = -(1 << 29)
# The summary counter of every kernel at once: an id no event of a trace has (ids are < 2**16).
ALL_KERNELS_EVENT = 1 << 28
# One lane's tracks: the lane itself plus overlap tracks, at most one per event id of a capture.
LEVELS = 1 << 12
# Passes that move partially overlapping ranges up a level before the one-level-per-id rule.
_MOVE_PASSES = 4


@dataclass(frozen=True, kw_only=True, eq=False)
class Timeline:
    """Made whole by `build`, by keyword, and never changed after: a step that changes what is
    shown (packing, summarising, more SMs) makes a new one (dataclasses.replace)."""

    trace: TraceData  # the trace shown (its times shifted when host gaps were cut)
    ev_lane: np.ndarray  # lanes-table row of each event row
    um_lane: np.ndarray  # lanes-table row of each unmatched row
    lane_lo: np.ndarray  # earliest time of each lane (anchor, events, unmatched)
    lane_hi: np.ndarray  # latest time of each lane
    lane_used: np.ndarray  # bool: the lane ran (initialised) or recorded something
    # Lanes that get their own tracks: lane_used less the summarised SMs' lanes.
    lane_shown: np.ndarray
    sms: np.ndarray  # SM ids shown, ascending (SM -1 = unknown first)
    lane_sm_index: np.ndarray  # index into `sms` of each lane (meaningful where lane_used)
    blocks: dict[str, np.ndarray]  # residency per (capture, block, sm); see block_intervals
    occupancy: dict[str, np.ndarray]  # sm_index, time_ns, value: 'resident blocks' steps
    # GPU-wide 'busy SMs' steps (time_ns, value: SMs with a resident block).
    busy: dict[str, np.ndarray]
    launches: dict[str, np.ndarray]  # capture, start_ns, end_ns of captures with a span
    # The launch track of each `launches` row, and the tracks' names: one track per launch, or
    # (packed) launches share as few tracks as do not overlap.
    launch_track: np.ndarray
    launch_track_names: list[str]
    # The launch the viewer opens on (row of `launches`: the longest; None without launches).
    focus: int | None
    cuts: list[tuple[int, int]] = field(default_factory=list)  # (time_ns after cut, cut ns)
    notes: list[str] = field(default_factory=list)  # what the viewer should be told
    # Summary counters (None: no summary): sm_index, event, time_ns, value (mean active ranges).
    summary: dict[str, np.ndarray] | None = None
    # Packed lanes (auto mode: a lane per program, far too many for a track each): the lanes
    # table of `trace` is then one row per track, 'slot k' of an SM, and these are its names.
    lane_labels: list[str] | None = None
    # The span the trace opens on, when not the focus launch's (auto mode: the first step drawn
    # in full), and what to call it.
    focus_ns: tuple[int, int] | None = None
    focus_label: str = ""

    # -- names ------------------------------------------------------------------------------

    @property
    def root_name(self) -> str:
        names = list(dict.fromkeys(self.trace.table.launch_names()))
        return "GPU: " + ", ".join(names) if names else "GPU"

    def sm_name(self, i: int) -> str:
        sm = int(self.sms[i])
        name = f"SM {sm}" if sm >= 0 else "unknown SM"
        # Under the CPU interpreter SM ids are program id modulo a constant and times are host
        # clock: say so where the reader looks first.
        return f"{name} (emulated)" if self.trace.emulated else name

    def lane_name(self, row: int, level: int = 0) -> str:
        """'block 3 · producer'; with several captures the launch comes first, since an SM's
        track holds the lanes of every launch: 'gemm · block 3', 'gemm (launch 2) · block 3'.
        Level k > 0: the lane's k-th '(overlap)' track (overlap_name)."""
        return overlap_name(self.lane_names([row])[row], level, self.lane_labels is not None)

    def lane_names(self, rows) -> LaneNames:
        """The names of the lanes `rows` (lanes-table rows), in one pass: a launch's name and a
        (launch, group)'s label are made once, however many lanes share them."""
        rows = np.asarray(rows, np.int64)
        nl = len(self.trace.lanes["lane"])
        part = np.full(nl, -1, np.int32 if nl < 2**31 else np.int64)
        if self.lane_labels is not None:
            part[rows] = rows
            return LaneNames(self.lane_labels, [], part, None)
        t, lanes = self.trace, self.trace.lanes
        cap = lanes["capture"][rows].astype(np.int64)
        grp = lanes["group"][rows].astype(np.int64)
        width = int(grp.max(initial=0)) + 1
        pairs, which = np.unique(cap * width + grp, return_inverse=True)
        part[rows] = which.reshape(-1)
        several = len(t.kernels) > 1
        heads, tails = [], []
        for k in pairs.tolist():
            c, g = divmod(k, width)
            heads.append(f"{t.capture_name(c)} · block " if several else "block ")
            tails.append(t.group_suffix(c, g))
        return LaneNames(heads, tails, part, lanes["block"])

    def launch_name(self, capture: int) -> str:
        return self.trace.capture_name(capture)

    def unmatched_name(self, kind: int, event: int) -> str:
        """'unmatched begin: load': the instant that marks an unmatched record."""
        what = "begin" if kind == UNMATCHED_BEGIN else "end"
        return f"unmatched {what}: {self.trace.event_name(event)}"

    def summary_name(self, event: int) -> str:
        """The name of an SM's summary counter of `event` ('load (active ranges)')."""
        if event == ALL_KERNELS_EVENT:
            return "programs of all kernels (mean resident)"
        return f"{self.trace.event_name(event)} (active ranges)"

    def cut_name(self, row: int) -> str | None:
        """'host gap cut: 1.250 ms' where the host gap before launch `row` (of `launches`) was
        cut, else None."""
        cut_ns = self._cut_at.get(int(self.launches["start_ns"][row]))
        return None if cut_ns is None else f"host gap cut: {cut_ns / 1e6:.3f} ms"

    @functools.cached_property
    def _cut_at(self) -> dict[int, int]:
        """ns cut before each launch start that follows a cut (cuts are final once built)."""
        return dict(self.cuts)

    # -- what goes on which track -----------------------------------------------------------

    def launch_tracks(self) -> list[tuple[str, np.ndarray]]:
        """(name, rows of `launches` in start order) of each launch track, in track order: a
        track per launch, or, packed, as few shared tracks as do not overlap."""
        track = np.asarray(self.launch_track, np.int64)
        rows = np.lexsort((self.launches["start_ns"], track))  # stable: equal starts by row
        n = len(self.launch_track_names)
        if n == 0:
            return []
        parts = np.split(rows, np.cumsum(np.bincount(track, minlength=n))[:-1])
        return list(zip(self.launch_track_names, parts, strict=True))

    def block_slots(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(index into `sms`, slot, slots of that SM) of each row of `blocks`: a block takes the
        lowest slot of its SM free when it arrives (assign_slots)."""
        return block_slots(self.sms, self.blocks)

    def event_levels(self) -> np.ndarray:
        """The track level of each row of `trace.events` on its lane (0: the lane's own track,
        k: its k-th '(overlap)' track); see order_rows."""
        ev = self.trace.events
        if len(self.ev_lane) == 0:
            return np.zeros(0, np.int64)
        start, end, is_range = ev["start_ns"], ev["end_ns"], ev["kind"] == RANGE
        return order_rows(start, end, is_range, self.ev_lane, self.lane_lo, ev["event"])["level"]

    def drop_marks(self) -> tuple[np.ndarray, np.ndarray, list[str]]:
        """(lane rows, times, labels) of the instants that say a shown lane lost records. A ring
        lane that wrapped lost its oldest records, before its first; any other lane (ops
        compiled without RING in a ring buffer included) its newest, at its end."""
        t = self.trace
        dropped = t.lanes["dropped"].astype(np.int64)
        dl = np.flatnonzero((dropped > 0) & self.lane_shown)
        over = t.lanes_overwritten()[dl]
        at = np.where(over, self.lane_lo[dl], self.lane_hi[dl]).astype(np.int64)
        labels = [
            f"{n} older records overwritten (ring)" if o else f"{n} records dropped (lane full)"
            for n, o in zip(dropped[dl].tolist(), over.tolist(), strict=True)
        ]
        return dl, at, labels

    # -- order ------------------------------------------------------------------------------

    def lane_rank(self, row: int) -> int:
        """Rank of a lane among its SM's tracks: lanes-table order, which is capture, block,
        group; counters come before (OCCUPANCY_RANK, SUMMARY_RANK0 + event id)."""
        return int(row)


@dataclass(frozen=True, eq=False)
class LaneNames:
    """Lane names held as their parts, made when asked: lane g's name is
    heads[part[g]] + block[g] + tails[part[g]] ('gemm · block ' 3 ' · producer'), or, where
    `block` is None (packed slots), heads[part[g]] whole. A lane holds a part number, not a
    string: millions of lanes cost a word each."""

    heads: list[str]
    tails: list[str]
    part: np.ndarray  # per lanes-table row; -1: a lane not named
    block: np.ndarray | None

    def __len__(self) -> int:
        return len(self.part)

    def __getitem__(self, lane: int) -> str:
        p = int(self.part[lane])
        if p < 0:
            raise KeyError(f"lane {lane} was not named")
        if self.block is None:
            return self.heads[p]
        return f"{self.heads[p]}{int(self.block[lane])}{self.tails[p]}"


def overlap_name(label: str, level: int, packed: bool = False) -> str:
    """The name of a lane's track at `level`: its own name at 0, then 'label (overlap)',
    'label (overlap 2)', ...; a packed slot's 'label (overlap 1)', 'label (overlap 2)', ..."""
    if level == 0:
        return label
    if level == 1 and not packed:
        return f"{label} (overlap)"
    return f"{label} (overlap {level})"


def block_slots(sms: np.ndarray, blocks: dict[str, np.ndarray]):
    """(index into `sms`, slot, slots of that SM) of each row of `blocks` (block_intervals): a
    block takes the lowest slot of its SM free when it arrives (assign_slots)."""
    row = np.searchsorted(sms, blocks["sm"])
    slot, n_slots = assign_slots(row, blocks["start_ns"], blocks["end_ns"], len(sms))
    return row, slot, n_slots[row]


def build(
    trace: TraceData,
    cut_gaps: bool = False,
    *,
    sms=None,
    blocks=None,
    groups=None,
    events=None,
    window_ns: tuple[int, int] | None = None,
    summary: bool | None = None,
    detail_sms=None,
    pack: bool | None = None,
) -> Timeline:
    """The timeline of `trace`.

    cut_gaps: lay launches end to end (see the module doc).
    sms, blocks, groups: keep only lanes on these SMs / of these blocks / groups (iterables of
    ints). events: keep only these events (names or ids). window_ns: (start, end) in ns from the
    trace's start: keep ranges and instants that touch it.
    summary: True: ranges become per-SM counters of active ranges per event (sm_profiler.trace.summary)
    except on `detail_sms`; None (default): only when more than SUMMARY_ROWS rows remain after
    the filters; False: never. detail_sms: SMs kept in full (default: the SM that finishes last).
    pack: lanes share tracks: each SM gets 'slot 0', 'slot 1', ... (a program takes the lowest
    slot free when it starts), and launches share as few tracks as do not overlap; None
    (default): for auto-mode traces, whose every program is a lane.
    """
    whole = len(trace)
    unfiltered = all(v is None for v in (sms, blocks, groups, events, window_ns, detail_sms))
    if summary is None and unfiltered and not cut_gaps and pack is not False:
        if whole > AUTO_DETAIL_ROWS and trace.table.auto:
            return _build_budgeted(trace)
    trace, lane_keep = _filtered(trace, sms, blocks, groups, events, window_ns)
    filters = {
        "sms": sms,
        "blocks": blocks,
        "groups": groups,
        "events": events,
        "window_ns": window_ns,
    }
    named = [k for k, v in filters.items() if v is not None]
    cuts: list[tuple[int, int]] = []
    if cut_gaps and len(trace.kernels) > 1:
        trace, cuts, gaps, min_cut_ns = _cut_host_gaps(trace)
    ev_lane = lane_row_of(trace, trace.events)
    um_lane = lane_row_of(trace, trace.unmatched)
    lo, hi = lane_extent(trace, ev_lane, um_lane)
    lanes = trace.lanes
    nl = len(lanes["lane"])
    has_rows = (np.bincount(ev_lane, minlength=nl) + np.bincount(um_lane, minlength=nl)) > 0
    used = (lanes["initialized"].astype(bool) | has_rows) & lane_keep
    lane_sm = lanes["sm"].astype(np.int64)
    sms_shown = np.unique(lane_sm[used])
    blocks_ = block_intervals(trace, lo, hi, used)
    occ = resident_blocks(blocks_)
    occ["sm_index"] = np.searchsorted(sms_shown, occ.pop("sm"))
    k_lo, k_hi = launch_spans(trace, lo, hi, used)
    caps = np.flatnonzero(~((k_lo == 0) & (k_hi == 0)))
    launches = {"capture": caps, "start_ns": k_lo[caps], "end_ns": k_hi[caps]}
    notes = []
    if cuts:
        notes.append(_cut_note(cuts, gaps, min_cut_ns))
    if named:
        notes.append(
            f"filtered ({', '.join(named)}): {len(trace):,} of {whole:,} ranges and instants kept"
        )
    # The longest launch (the first of equals): where the GPU time went.
    focus = int(np.argmax(launches["end_ns"] - launches["start_ns"])) if len(caps) else None
    tl = Timeline(
        trace=trace,
        ev_lane=ev_lane,
        um_lane=um_lane,
        lane_lo=lo,
        lane_hi=hi,
        lane_used=used,
        lane_shown=used.copy(),
        sms=sms_shown,
        lane_sm_index=np.searchsorted(sms_shown, lane_sm),
        blocks=blocks_,
        occupancy=occ,
        busy=busy_sms(occ),
        launches=launches,
        launch_track=np.arange(len(caps)),
        launch_track_names=[trace.capture_name(c) for c in caps.tolist()],
        focus=focus,
        cuts=cuts,
        notes=notes,
    )
    if pack is None:
        pack = trace.table.auto
    if pack and used.any():
        tl = _pack(tl)
    rows = len(trace.events["kind"])
    if summary or (summary is None and rows > SUMMARY_ROWS):
        tl = _summarise(tl, k_lo, k_hi, detail_sms, auto=summary is None)
    return tl


def _build_budgeted(trace: TraceData) -> Timeline:
    """Auto mode's default timeline of a long run: the launches of the first recorded steps that
    fit AUTO_DETAIL_ROWS programs drawn in full (the span it opens on), every launch on the
    launches track, and every other program in each SM's summary counters (at most
    SUMMARY_POINTS samples): a file of bounded size whatever the run's length. The timeline is
    built on the launches drawn in full alone, so its cost is theirs."""
    ev = trace.events
    n = len(trace.kernels)
    counts = np.bincount(ev["capture"], minlength=n)
    has = counts > 0
    lo, hi = _launch_extents(ev, n)
    detail, focus, label = _detail_launches(trace, counts, lo, hi)
    del counts  # a word a launch: with a million launches, a quarter of the records' bytes
    keep = {name: detail[t["capture"]] for name, t in (("ev", ev), ("ln", trace.lanes))}
    if int(keep["ev"].sum()) > AUTO_DETAIL_ROWS:  # one launch larger than the budget: its start
        starts = ev["start_ns"][keep["ev"]]
        cut = np.partition(starts, AUTO_DETAIL_ROWS - 1)[AUTO_DETAIL_ROWS - 1]
        del starts
        keep["ev"] &= ev["start_ns"] <= cut
        keep["ln"] &= trace.lanes["anchor_ns"] <= cut
        first_cap = int(np.argmax(detail))
        focus = (int(lo[first_cap]), int(min(hi[first_cap], ev["end_ns"][keep["ev"]].max())))
        label += f" (programs starting in its first {format_time(cut - int(lo[first_cap]))})"
    # Every launch on the launches track (those drawn in full alone past MAX_LAUNCH_SLICES).
    n_launches = int(has.sum())
    shown = np.flatnonzero(has if n_launches <= MAX_LAUNCH_SLICES else detail)
    launches = {"capture": shown, "start_ns": lo[shown], "end_ns": hi[shown]}
    del lo, hi  # two words a launch, found again for the summary: not held while building
    sub = _renumber_lanes(
        replace(
            trace,
            events={k: v[keep["ev"]] for k, v in ev.items()},
            lanes={k: v[keep["ln"]] for k, v in trace.lanes.items()},
            unmatched={
                k: v[detail[trace.unmatched["capture"]]] for k, v in trace.unmatched.items()
            },
        )
    )
    tl = replace(build(sub, summary=False, pack=False), launches=launches)
    # Parts of SUMMARY_PART_ROWS: the summary's sort and look-ups hold about five words a row of
    # a part, on top of the timeline already built (host memory, issue 30).
    n_rows = len(ev["sm"])
    chunks = [(a, min(a + SUMMARY_PART_ROWS, n_rows)) for a in range(0, n_rows, SUMMARY_PART_ROWS)]
    all_sms = _unique(
        np.concatenate([_unique(ev["sm"][a:b]) for a, b in chunks] or [np.zeros(0, np.int64)])
    ).astype(np.int64)
    tl = _pack(with_sms(tl, all_sms))  # every SM that ran a program gets its track

    def summarised():  # the ranges not drawn in full, a chunk of rows at a time
        for a, b in chunks:
            m = ~keep["ev"][a:b] & (ev["kind"][a:b] == RANGE)
            yield (
                ev["start_ns"][a:b][m],
                ev["end_ns"][a:b][m],
                ev["capture"][a:b][m].astype(np.int64),
                np.searchsorted(all_sms, ev["sm"][a:b][m].astype(np.int64)),
                ev["event"][a:b][m].astype(np.int64),
            )

    n_summ = sum(int((~keep["ev"][a:b] & (ev["kind"][a:b] == RANGE)).sum()) for a, b in chunks)
    lo, hi = _launch_extents(ev, n)
    counters, how = _summary_counters_of(summarised, lo, hi, len(all_sms))
    n_caps = int(detail.sum())
    notes = list(tl.notes)
    if len(shown) < n_launches:
        notes.append(
            f"the launches track holds the {len(shown):,} launches drawn in full, not all "
            f"{n_launches:,} (more than {MAX_LAUNCH_SLICES:,}: `sm-profiler stats` sums them)"
        )
    notes.append(
        f"summarised (more than {AUTO_DETAIL_ROWS:,} programs): {n_summ:,} programs "
        f"of {n_launches - n_caps:,} launches are shown as counters of {how}; full detail for "
        f"{plural(n_caps, 'launch', 'launches')}, from {label}. For the rest: pick "
        "steps or a window (--steps, --window-us), SMs (--sms), or export everything with "
        "summary=False (--no-summary)"
    )
    return replace(tl, summary=counters, focus=None, focus_ns=focus, focus_label=label, notes=notes)


def _launch_extents(ev: dict[str, np.ndarray], n: int):
    """(first start, last end) of each of `n` launches' rows (int64; a launch without rows: max,
    min), a chunk of rows at a time: the rows' order does not matter, and nothing the size of
    every row is made (a search over the capture column would copy it, cast to int64)."""
    lo = np.full(n, np.iinfo(np.int64).max, np.int64)
    hi = np.full(n, np.iinfo(np.int64).min, np.int64)
    for a in range(0, len(ev["capture"]), CHUNK_ROWS):
        cap = ev["capture"][a : a + CHUNK_ROWS]
        runs = np.flatnonzero(np.r_[True, cap[1:] != cap[:-1]])  # each run of one launch's rows
        np.minimum.at(lo, cap[runs], np.minimum.reduceat(ev["start_ns"][a : a + CHUNK_ROWS], runs))
        np.maximum.at(hi, cap[runs], np.maximum.reduceat(ev["end_ns"][a : a + CHUNK_ROWS], runs))
    return lo, hi


def with_sms(tl: Timeline, sms: np.ndarray) -> Timeline:
    """`tl` with a process for every SM of `sms` too (an SM none of its drawn programs ran on:
    the default trace's summarised programs, or kernels CUPTI saw), its SM indices moved to
    the widened, sorted list; an index past the end (a lane on no SM shown) stays past it."""
    all_sms = np.union1d(tl.sms, sms)
    if len(all_sms) == len(tl.sms):
        return tl
    where = np.append(np.searchsorted(all_sms, tl.sms), len(all_sms))

    def moved(index):
        return where[np.minimum(index, len(tl.sms))]

    summary = tl.summary
    if summary is not None:
        summary = dict(summary, sm_index=moved(summary["sm_index"]))
    return replace(
        tl,
        sms=all_sms,
        lane_sm_index=moved(tl.lane_sm_index),
        occupancy=dict(tl.occupancy, sm_index=moved(tl.occupancy["sm_index"])),
        summary=summary,
    )


def _renumber_lanes(t: TraceData) -> TraceData:
    """`t` with each capture's lanes numbered 0, 1, ... again (lanes were left out): lane ids
    index a capture's rows of the lanes table."""
    ln = t.lanes
    cap, lane = ln["capture"].astype(np.int64), ln["lane"].astype(np.int64)
    width = int(lane.max(initial=0)) + 1
    key = cap * width + lane
    order = np.argsort(key, kind="stable")
    skey = key[order]
    first = np.searchsorted(cap[order], cap[order], side="left")
    new = np.empty(len(key), np.int64)
    new[order] = np.arange(len(key)) - first

    def moved(table):
        k = table["capture"].astype(np.int64) * width + table["lane"].astype(np.int64)
        return dict(table, lane=new[order[np.searchsorted(skey, k)]].astype(ln["lane"].dtype))

    return replace(
        t, events=moved(t.events), unmatched=moved(t.unmatched), lanes=dict(ln, lane=new)
    )


def _detail_launches(trace: TraceData, rows: np.ndarray, lo: np.ndarray, hi: np.ndarray):
    """(launches drawn in full, the span the trace opens on, its name): the first recorded
    steps whose programs fit AUTO_DETAIL_ROWS (where steps were recorded), else the first
    launches that fit; at least the first step's (or launch's) first AUTO_DETAIL_ROWS
    programs."""
    n = len(rows)
    table = trace.table
    step = table.launches["step"]
    order = np.argsort(lo, kind="stable")
    order = order[rows[order] > 0]
    chosen = np.zeros(n, bool)
    if (step[order] >= 0).any():
        steps = np.unique(step[order][step[order] >= 0])
        per_step = np.bincount(np.searchsorted(steps, step[step >= 0]), weights=rows[step >= 0])
        # A step that compiled (seconds of sparse launches where a steady step takes
        # milliseconds) is left to the counters: the trace opens on the first steady step.
        compiled = np.isin(steps, table.compile_steps())
        which = ", ".join(str(int(k)) for k in steps[compiled][:5])
        steps, per_step = steps[~compiled], per_step[~compiled]
        fit = max(1, int(np.searchsorted(np.cumsum(per_step), AUTO_DETAIL_ROWS, side="right")))
        chosen = np.isin(step, steps[:fit]) & (rows > 0)
        label = f"step {int(steps[0])}"
        if compiled.any():
            label += f", the first after the steps that compiled ({which})"
        first = chosen & (step == steps[0])
    else:
        fit = max(1, int(np.searchsorted(np.cumsum(rows[order]), AUTO_DETAIL_ROWS, side="right")))
        chosen[order[:fit]] = True
        label, first = "the first launches", chosen
    if rows[chosen].sum() > AUTO_DETAIL_ROWS:  # one step larger than the budget: its first part
        in_order = chosen[order]
        within = np.cumsum(np.where(in_order, rows[order], 0)) <= AUTO_DETAIL_ROWS
        in_order &= within | (np.cumsum(in_order) == 1)
        chosen = np.zeros(n, bool)
        chosen[order[in_order]] = True
        first = first & chosen
        label += " (its first launches)"
    focus = (int(lo[first].min()), int(hi[first].max())) if first.any() else None
    return chosen, focus, label


def _summary_counters(start, end, cap, smi, eid, k_lo, k_hi, n_sm: int):
    """Summary counters of ranges (start, end) of launch `cap` on SM index `smi`, event `eid`:
    each launch in bins per SM and event where SUMMARY_POINTS allow MIN_LAUNCH_BINS a launch,
    else each SM's ranges of every event in bins of the whole span. Returns (counters, what
    they are)."""
    return _summary_counters_of(lambda: iter([(start, end, cap, smi, eid)]), k_lo, k_hi, n_sm)


def _summary_counters_of(parts, k_lo, k_hi, n_sm: int):
    """_summary_counters of the ranges `parts()` yields a part at a time, as (start, end, cap,
    smi, eid) arrays (int64). `parts` is called three times (event ids, keys, counts), so that
    only one part's temporaries are held at once."""
    top = 1
    for _, _, _, _, eid in parts():
        if len(eid):
            top = max(top, int(eid.max()) + 1)
    # The (launch, SM, event) keys, merged a part at a time and given up once there are more
    # than MIN_LAUNCH_BINS bins each could have (then it is each SM's counter of all kernels):
    # a million one-program launches never hold a million keys at once (host memory, issue 30).
    most_keys = SUMMARY_POINTS // MIN_LAUNCH_BINS
    uniq, sms = np.zeros(0, np.int64), []
    lo = hi = None
    for start, end, cap, smi, eid in parts():
        if not len(start):
            continue
        if uniq is not None:
            uniq = _unique(np.concatenate([uniq, (cap * n_sm + smi) * top + eid]))
            if len(uniq) > most_keys:
                uniq = None
        sms.append(_unique(smi))
        lo = int(start.min()) if lo is None else min(lo, int(start.min()))
        hi = int(end.max()) if hi is None else max(hi, int(end.max()))
    bins = 0 if uniq is None else min(SUMMARY_BINS, SUMMARY_POINTS // max(len(uniq), 1))
    if bins >= MIN_LAUNCH_BINS:
        u_cap = uniq // (n_sm * top)
        acc = ActiveRanges(k_lo[u_cap], k_hi[u_cap], bins=bins)
        for start, end, cap, smi, eid in parts():
            acc.add(start, end, np.searchsorted(uniq, (cap * n_sm + smi) * top + eid))
        counters = drop_repeats(acc.result())
        g = counters.pop("group")
        counters["sm_index"] = (uniq[g] // top) % n_sm
        counters["event"] = uniq[g] % top
        return counters, f"active ranges per event ({bins} bins per launch)"
    sm_u = _unique(np.concatenate(sms)) if sms else np.zeros(0, np.int64)
    lo, hi = (lo, hi) if lo is not None else (0, 1)
    bins = max(SUMMARY_POINTS // max(len(sm_u), 1), 1)
    acc = ActiveRanges(
        np.full(len(sm_u), lo, np.int64), np.full(len(sm_u), hi, np.int64), bins=bins
    )
    for start, end, _, smi, _ in parts():
        acc.add(start, end, np.searchsorted(sm_u, smi))
    counters = drop_repeats(acc.result())
    g = counters.pop("group")
    counters["sm_index"] = sm_u[g]
    counters["event"] = np.full(len(g), ALL_KERNELS_EVENT, np.int64)
    how = (
        f"each SM's programs of all kernels in {bins:,} bins of {max((hi - lo) // bins, 1):,} ns "
        "(the launches track names each kernel)"
    )
    return counters, how


def _unique(a: np.ndarray) -> np.ndarray:
    """np.unique(a) by a sort (numpy's hashing unique is several times slower on these)."""
    a = np.sort(a)
    return a[np.r_[True, a[1:] != a[:-1]]] if len(a) else a


def _pack(tl: Timeline) -> Timeline:
    """`tl` with its lanes on per-SM slot tracks and its launches on shared tracks (see
    build)."""
    t = tl.trace
    lanes = t.lanes
    b = tl.blocks
    row, slot, _ = tl.block_slots()
    n_slot = int(slot.max(initial=0)) + 1
    # Each used lane's block interval, found by its (capture, block, sm) key.
    used = np.flatnonzero(tl.lane_used)
    cap, blk, sm = (lanes[c][used].astype(np.int64) for c in ("capture", "block", "sm"))
    kb = int(max(blk.max(initial=0), b["block"].max(initial=0))) + 1
    ks = int(max(sm.max(initial=0), b["sm"].max(initial=0))) + 2
    bkey = (b["capture"] * kb + b["block"]) * ks + (b["sm"] + 1)
    order = np.argsort(bkey, kind="stable")
    pos = order[np.searchsorted(bkey[order], (cap * kb + blk) * ks + (sm + 1))]
    grp = lanes["group"][used].astype(np.int64)
    n_grp = int(grp.max(initial=0)) + 1
    key = (row[pos] * n_slot + slot[pos]) * n_grp + grp
    uniq, packed = np.unique(key, return_inverse=True)
    packed = packed.reshape(-1)
    n = len(uniq)
    lane_to = np.zeros(len(lanes["lane"]), np.int64)
    lane_to[used] = packed
    p_grp, p_slot, p_row = uniq % n_grp, (uniq // n_grp) % n_slot, uniq // n_grp // n_slot
    lo = np.full(n, np.iinfo(np.int64).max, np.int64)
    hi = np.full(n, np.iinfo(np.int64).min, np.int64)
    np.minimum.at(lo, packed, tl.lane_lo[used])
    np.maximum.at(hi, packed, tl.lane_hi[used])
    written = np.bincount(packed, weights=lanes["written"][used], minlength=n).astype(np.int64)
    # A packed row holds lanes of every launch: a group's name only where all launches agree.
    ks = [t.kernels[i] for i in t.table.representatives()]
    names = {g: {k.group_names.get(g) for k in ks} for g in range(n_grp)}
    gname = {
        g: (v.pop() if len(v) == 1 and None not in v else f"group {g}") for g, v in names.items()
    }
    labels = [
        f"slot {s} · {gname[g]}" if n_grp > 1 else f"slot {s}"
        for s, g in zip(p_slot.tolist(), p_grp.tolist(), strict=True)
    ]
    z = np.zeros(n, np.int64)
    packed_lanes = {
        "capture": z.astype(np.int32),
        "lane": np.arange(n, dtype=np.int64),
        "sm": tl.sms[p_row].astype(lanes["sm"].dtype),
        "block": p_slot,
        "group": p_grp,
        "anchor_ns": lo,
        "written": written,
        "attempted": written,
        "dropped": z,
        "initialized": np.ones(n, bool),
    }
    L = tl.launches
    o = np.argsort(L["start_ns"], kind="stable")
    track = np.zeros(len(o), np.int64)
    if len(o):
        track[o] = assign_slots(np.zeros(len(o), np.int64), L["start_ns"][o], L["end_ns"][o], 1)[0]
    n_tracks = int(track.max(initial=0)) + 1
    return replace(
        tl,
        trace=replace(t, lanes=packed_lanes),
        ev_lane=lane_to[tl.ev_lane],
        um_lane=lane_to[tl.um_lane],
        lane_lo=lo,
        lane_hi=hi,
        lane_used=np.ones(n, bool),
        lane_shown=np.ones(n, bool),
        lane_sm_index=p_row,
        lane_labels=labels,
        launch_track=track,
        launch_track_names=["launches"] + [f"launches (overlap {k})" for k in range(1, n_tracks)],
        notes=[
            *tl.notes,
            f"packed: {len(used):,} programs on {n:,} slot tracks (a program takes the "
            "lowest slot of its SM free when it starts)",
        ],
    )


def assign_slots(row: np.ndarray, start: np.ndarray, end: np.ndarray, n_rows: int):
    """Greedy interval partitioning per row (input sorted by row, then start): each interval
    takes the lowest free slot. Returns (slot of each interval, slots used per row). One loop
    step per interval: blocks or launches, far fewer than events."""
    import heapq

    slot = np.zeros(len(row), np.int64)
    n_slots = np.ones(n_rows, np.int64)
    free: list[int] = []
    busy: list[tuple[int, int]] = []  # (end, slot) of intervals still open
    prev, used = -1, 0
    for i, (r, s, e) in enumerate(zip(row.tolist(), start.tolist(), end.tolist(), strict=True)):
        if r != prev:
            free, busy, used, prev = [], [], 0, r
        while busy and busy[0][0] <= s:
            heapq.heappush(free, heapq.heappop(busy)[1])
        if free:
            k = heapq.heappop(free)
        else:
            k, used = used, used + 1
        heapq.heappush(busy, (e, k))
        slot[i] = k
        n_slots[r] = max(n_slots[r], k + 1)
    return slot, n_slots


def _filtered(trace: TraceData, sms, blocks, groups, events, window_ns):
    """(trace with the events and unmatched records the filters keep, lanes kept: bool)."""
    lanes = trace.lanes
    keep = np.ones(len(lanes["lane"]), bool)
    for col, want in (("sm", sms), ("block", blocks), ("group", groups)):
        if want is not None:
            ids = _ints(want, col)
            # Like an unknown event name, an id no lane has is a mistake, not an empty trace.
            have = lanes[col][lanes["initialized"]] if col == "sm" else lanes[col]
            missing = np.setdiff1d(ids, have)
            if len(missing):
                one, many = ("SM", "SMs") if col == "sm" else (col, col + "s")
                what = f"{one if len(missing) == 1 else many} {_runs(missing)}"
                raise ConfigError(
                    f"{col}s filter: "
                    + (f"no lane ran on {what}" if col == "sm" else f"no {what} in the trace")
                    + f"; the trace's {many}: {_runs(have) or 'none'}"
                )
            keep &= np.isin(lanes[col], ids)
    if all(f is None for f in (sms, blocks, groups, events, window_ns)):
        return trace, keep
    ev, um = trace.events, trace.unmatched
    ev_keep = keep[lane_row_of(trace, ev)]
    um_keep = keep[lane_row_of(trace, um)]
    if events is not None:
        ids = _event_ids(trace, events)
        ev_keep &= np.isin(ev["event"], ids)
        um_keep &= np.isin(um["event"], ids)
    if window_ns is not None:
        a, b = (int(x) + trace.start_ns for x in window_ns)
        if b < a:
            raise ConfigError(f"window_ns={tuple(window_ns)}: the end is before the start")
        ev_keep &= (ev["end_ns"] >= a) & (ev["start_ns"] <= b)
        um_keep &= (um["time_ns"] >= a) & (um["time_ns"] <= b)
    picked = replace(
        trace,
        events={k: v[ev_keep] for k, v in ev.items()},
        lanes=lanes,
        unmatched={k: v[um_keep] for k, v in um.items()},
    )
    return picked, keep


def _runs(ids: np.ndarray, most: int = 8) -> str:
    """'0..7, 9' for sorted unique ids; past `most` runs, the rest counted."""
    ids = np.unique(ids)
    if not len(ids):
        return ""
    cut = np.flatnonzero(np.diff(ids) != 1) + 1
    runs = [f"{r[0]}..{r[-1]}" if len(r) > 1 else f"{r[0]}" for r in np.split(ids, cut)]
    more = f", ... ({len(runs) - most} more runs)" if len(runs) > most else ""
    return ", ".join(runs[:most]) + more


def _ints(values, what: str) -> np.ndarray:
    vals = [values] if isinstance(values, (int, np.integer)) else list(values)
    for v in vals:
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            raise ConfigError(f"{what} filter: {v!r} is not an int; pass ints, e.g. {what}s=[0, 3]")
        if not -(2**31) <= int(v) < 2**31:
            raise ConfigError(
                f"{what} filter: {v} is not a {what} id (ids fit in 32 bits); pass "
                f"ids from the trace, e.g. {what}s=[0, 3]"
            )
    return np.asarray(vals, np.int64)


def _event_ids(trace: TraceData, events) -> np.ndarray:
    vals = [events] if isinstance(events, (str, int, np.integer)) else list(events)
    by_name = {n: i for i, n in trace.event_names.items()}
    ids = []
    for v in vals:
        if isinstance(v, str):
            if v not in by_name:
                raise ConfigError(
                    f"events filter: no event named {v!r}; events: "
                    f"{', '.join(sorted(by_name)) or 'none named'}"
                )
            ids.append(by_name[v])
        elif isinstance(v, (int, np.integer)) and not isinstance(v, bool):
            if not 0 <= int(v) <= MAX_EVENT_ID:
                raise ConfigError(f"events filter: event id {v} is out of range 0..{MAX_EVENT_ID}")
            ids.append(int(v))
        else:
            raise ConfigError(f"events filter: {v!r} is neither an event name nor an id")
    return np.asarray(ids, np.int64)


def _summarise(tl: Timeline, k_lo, k_hi, detail_sms, auto: bool) -> Timeline:
    """`tl` with the ranges of every SM but `detail_sms` replaced by active-range counters."""
    t = tl.trace
    ev = t.events
    if detail_sms is None:
        # The SM that finishes last: the tail is what a reader of a big trace looks at first.
        b = tl.blocks
        detail_sms = [int(b["sm"][np.argmax(b["end_ns"])])] if len(b["sm"]) else []
    detail = _ints(detail_sms, "detail_sm")
    lane_detail = np.isin(t.lanes["sm"], detail)
    ev_detail = lane_detail[tl.ev_lane]
    is_range = ev["kind"] == RANGE
    summ = ~ev_detail & is_range
    smi = tl.lane_sm_index[tl.ev_lane[summ]].astype(np.int64)
    counters, how = _summary_counters(
        ev["start_ns"][summ],
        ev["end_ns"][summ],
        ev["capture"][summ].astype(np.int64),
        smi,
        ev["event"][summ].astype(np.int64),
        k_lo,
        k_hi,
        len(tl.sms),
    )
    n_ranges, n_sms = int(summ.sum()), len(np.unique(smi))
    # Detail SMs keep everything; elsewhere instants and unmatched records go too.
    keep_ev = ev_detail
    keep_um = lane_detail[tl.um_lane]
    why = (
        f"more than {SUMMARY_ROWS:,} trace rows (what the Perfetto UI opens in about "
        f"{SUMMARY_UI_SECONDS} s)"
        if auto
        else "summary asked for"
    )
    shown = ", ".join(f"SM {s}" for s in detail.tolist()) or "none"
    note = (
        f"summarised ({why}): {n_ranges:,} ranges on {n_sms} SMs are shown as counters of "
        f"{how}; full detail for {shown}. "
        "For the rest: choose SMs with detail_sms= (--detail-sms), filter with sms=, blocks=, "
        "groups=, events=, window_ns= (--sms, --blocks, --groups, --events, --window-us), or "
        "export everything with summary=False (--no-summary)"
    )
    return replace(
        tl,
        summary=counters,
        trace=replace(
            t,
            events={k: v[keep_ev] for k, v in ev.items()},
            unmatched={k: v[keep_um] for k, v in t.unmatched.items()},
        ),
        ev_lane=tl.ev_lane[keep_ev],
        um_lane=tl.um_lane[keep_um],
        lane_shown=tl.lane_shown & lane_detail,
        notes=[*tl.notes, note],
    )


# -- overlap levels: which rows of a lane share a track --------------------------------------------


def order_rows(
    start: np.ndarray,
    end: np.ndarray,
    is_range: np.ndarray,
    lane: np.ndarray,
    ref: np.ndarray,
    event: np.ndarray,
) -> dict[str, np.ndarray]:
    """Which track of its lane each row goes to, and the order a viewer must read the rows in.

    A viewer draws a track's ranges as a stack (an end closes the innermost open range), so a
    range that partially overlaps an enclosing one cannot share its track: it moves up a level
    (an '(overlap)' track of the lane) until every level nests. The order is each track's rows
    by time, at one time the ends of ranges begun earlier (innermost first), then begins in row
    order, a zero-length range's end right after its begin. Every writer takes its layout from
    here (Timeline.event_levels for the levels alone).

    `lane` (0..) and `ref` (per lane, <= every time of the lane) say where rows go; `event` is
    each row's event id. Returns level per row and, per begin/end/instant in order: row, is_end,
    block = lane*LEVELS+level, time_ns.
    """
    lane64 = lane.astype(np.int64)
    level = np.zeros(len(start), np.int64)
    pk = _sorted_packets(start, end, is_range, lane64 * LEVELS, ref[lane])
    bad = _offenders(pk, is_range)
    if len(bad):
        level, pk = _overlap_levels(start, end, is_range, lane64, ref, event, bad)
        if pk is None:
            pk = _sorted_packets(start, end, is_range, lane64 * LEVELS + level, ref[lane])
    pk["level"] = level
    return pk


def _overlap_levels(start, end, is_range, lane, ref, event, bad):
    """Levels that nest on every track, for the lanes of the rows in `bad`.

    First, a few passes that move each range closed by another's end one level up: that keeps
    nested ranges together and settles in a pass or two for a range overlapping one or two
    others. A lane still unsettled after _MOVE_PASSES (many ranges overlapping each other; 19
    mutually overlapping ranges need 19 levels) gets one level per event id instead: ranges of
    one id always nest (the decoder pairs them with one stack per lane and id), so every level
    nests, in one pass, for any overlap. Only the rows of the lanes concerned are re-sorted.

    Returns (level per row, the packets when they were already sorted for those levels: when
    every lane took part and settled by moves, else None).
    """
    in_bad = np.zeros(int(lane.max()) + 1, bool)
    in_bad[lane[bad]] = True
    rows = np.flatnonzero(in_bad[lane])
    if len(rows) == len(start):  # every lane overlaps: no need to gather
        s, e, r, ln, local = start, end, is_range, lane, bad
    else:
        s, e, r, ln = start[rows], end[rows], is_range[rows], lane[rows]
        local = np.searchsorted(rows, bad)
    lv = np.zeros(len(rows), np.int64)
    for _ in range(_MOVE_PASSES):
        lv[local] += 1
        pk = _sorted_packets(s, e, r, ln * LEVELS + lv, ref[ln])
        local = _offenders(pk, r)
        if len(local) == 0:
            return _spread(lv, rows, len(start)), pk if len(rows) == len(start) else None
    stuck = np.zeros(len(in_bad), bool)
    stuck[ln[local]] = True
    m = stuck[ln] & r
    lv[stuck[ln]] = 0
    lv[m] = _rank_in_lane(ln[m], event[rows][m].astype(np.int64))
    return _spread(lv, rows, len(start)), None


def _spread(values: np.ndarray, rows: np.ndarray, n: int) -> np.ndarray:
    """`values` at `rows` of an int64 array of n zeros."""
    out = np.zeros(n, np.int64)
    out[rows] = values
    return out


def _rank_in_lane(lane: np.ndarray, event: np.ndarray) -> np.ndarray:
    """Dense rank (0..) of each row's event id among the ids of its lane."""
    key = lane * (int(event.max()) + 1) + event
    uniq, inv = np.unique(key, return_inverse=True)
    u_lane = uniq // (int(event.max()) + 1)
    first = np.searchsorted(u_lane, u_lane)
    return (np.arange(len(uniq)) - first)[inv.reshape(-1)]


def _sorted_packets(start, end, is_range, block, ref) -> dict[str, np.ndarray]:
    n = len(start)
    rows = np.arange(n, dtype=np.int64)
    zero = is_range & (end == start)
    open_end = is_range & ~zero
    # Begins/instants in row order, a zero-length range's end right after its begin; then the
    # other ends in reverse row order so that equal-time ends come out innermost first.
    first = np.repeat(rows, 1 + zero)
    is_end1 = np.zeros(len(first), bool)
    is_end1[np.cumsum(1 + zero)[zero] - 1] = True
    late = rows[open_end][::-1]
    pk_row = np.concatenate([first, late])
    is_end = np.concatenate([is_end1, np.ones(len(late), bool)])
    cls = np.concatenate([np.ones(len(first), np.int64), np.zeros(len(late), np.int64)])
    t = np.where(is_end, end[pk_row], start[pk_row])
    rel = (t - ref[pk_row]) * 2 + cls
    b = block[pk_row]
    shift = int(rel.max()).bit_length() if len(rel) else 0
    if len(rel) == 0 or int(b.max()).bit_length() + shift <= 62:
        order = np.argsort((b << shift) | rel, kind="stable")
    else:
        order = np.lexsort((rel, b))
    return {"row": pk_row[order], "is_end": is_end[order], "block": b[order], "time_ns": t[order]}


def _offenders(pk: dict[str, np.ndarray], is_range: np.ndarray) -> np.ndarray:
    """Rows that a stack (SLICE_END pops the innermost slice) would close with another's end."""
    m = is_range[pk["row"]]
    row, is_end, block = pk["row"][m], pk["is_end"][m], pk["block"][m]
    if len(row) == 0:
        return row
    delta = np.where(is_end, -1, 1)
    cs = np.cumsum(delta)
    first = np.ones(len(row), bool)
    first[1:] = block[1:] != block[:-1]
    seg = np.flatnonzero(first)
    depth_after = cs - np.repeat((cs - delta)[seg], np.diff(np.append(seg, len(row))))
    lv = depth_after + is_end
    if int(lv.max()) < (1 << 15) and int(lv.min()) > -(1 << 15):
        lv = lv.astype(np.int16)  # radix sort
    o = np.argsort(lv, kind="stable")
    r, e, b, lvo = row[o], is_end[o], block[o], lv[o]
    pair = ~e[:-1] & e[1:] & (b[:-1] == b[1:]) & (lvo[:-1] == lvo[1:])
    wrong = pair & (r[:-1] != r[1:])
    # Of a begin closed by another range's end, the later-opened one is the odd one out.
    return np.unique(np.maximum(r[:-1][wrong], r[1:][wrong]))


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


def peak_resident(sm: np.ndarray, start_ns: np.ndarray, end_ns: np.ndarray) -> int:
    """Most intervals (blocks, programs) resident at once on any one SM: the peak of the
    resident-blocks counter (an end and a start at one time do not overlap)."""
    occ = resident_blocks({"sm": sm, "start_ns": start_ns, "end_ns": end_ns})
    return int(occ["value"].max()) if len(occ["value"]) else 0


def busy_sms(occupancy: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The GPU-wide 'busy SMs' counter from `resident_blocks` steps: how many SMs hold at least
    one resident block, after each change. Returns time_ns, value; one row per distinct time."""
    sm, t, v = (np.asarray(occupancy[k]) for k in ("sm_index", "time_ns", "value"))
    if len(t) == 0:
        z = np.zeros(0, np.int64)
        return {"time_ns": z, "value": z}
    busy = (v > 0).astype(np.int64)
    prev = np.zeros(len(busy), np.int64)
    prev[1:] = busy[:-1]
    first = np.ones(len(sm), bool)
    first[1:] = sm[1:] != sm[:-1]
    prev[first] = 0
    d = busy - prev
    order = np.argsort(t, kind="stable")
    t, d = t[order], d[order]
    last = np.ones(len(t), bool)
    last[:-1] = t[1:] != t[:-1]
    return {"time_ns": t[last].astype(np.int64), "value": np.cumsum(d)[last]}


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


class HostCuts(NamedTuple):
    trace: TraceData  # its captures moved back by what was cut before them
    cuts: list[tuple[int, int]]  # (time after the cut, ns cut), in time order
    gaps: int  # host gaps between launches, cut or not (overlapping launches have none)
    min_cut_ns: int  # gaps this long or shorter were kept


def _cut_host_gaps(trace: TraceData) -> HostCuts:
    """`trace` with each capture moved back so that launches follow each other closely.

    Launches are taken in start order; a launch that overlaps or nearly touches what came before
    stays where it is relative to it.
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
    end_so_far, moved, gaps = None, 0, 0
    for c in sorted(np.flatnonzero(has).tolist(), key=lambda c: (int(k_lo[c]), c)):
        if end_so_far is not None:
            gap = int(k_lo[c]) - moved - end_so_far
            gaps += gap > 0
            if gap > CUT_FACTOR * keep:
                moved += gap - keep
                cuts.append((int(k_lo[c]) - moved, gap - keep))
        shift[c] = moved
        end = int(k_hi[c]) - moved
        end_so_far = end if end_so_far is None else max(end_so_far, end)
    if not cuts:
        return HostCuts(trace, [], gaps, CUT_FACTOR * keep)

    def moved_table(table: dict[str, np.ndarray], cols: tuple[str, ...]) -> dict:
        out = dict(table)
        d = shift[table["capture"]]
        for col in cols:
            out[col] = table[col] - d
        return out

    lanes = moved_table(trace.lanes, ("anchor_ns",))
    # An uninitialised lane keeps anchor 0 (it has no time to move).
    lanes["anchor_ns"] = np.where(
        trace.lanes["initialized"], lanes["anchor_ns"], trace.lanes["anchor_ns"]
    )
    shifted = replace(
        trace,
        events=moved_table(trace.events, ("start_ns", "end_ns")),
        lanes=lanes,
        unmatched=moved_table(trace.unmatched, ("time_ns",)),
    )
    return HostCuts(shifted, cuts, gaps, CUT_FACTOR * keep)


def _cut_note(cuts: list[tuple[int, int]], gaps: int, min_cut_ns: int) -> str:
    """'host gaps cut: 1 of 2 gaps (gaps up to 123.67 ms kept), 1277.582 ms in all; ...': the
    gaps cut of those between launches (the demo's three launches have two, one of them short)."""
    total_ns = sum(c for _, c in cuts)
    if len(cuts) == gaps:
        counted = plural(gaps, "gap")
    else:
        counted = f"{len(cuts)} of {gaps} gaps (gaps up to {format_time(min_cut_ns)} kept)"
    return (
        f"host gaps cut: {counted}, {total_ns / 1e6:.3f} ms in all; times after a cut are "
        "moved back by what was cut"
    )
