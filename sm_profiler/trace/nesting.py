"""Where the time went inside a lane: which range encloses which, self time, and waits.

All vectorized over ranges. For each range, its parent is the nearest earlier range of the same
lane that contains it (ranges sorted by lane, start, longest first). It is found by pointer
jumping: start from the previous range and, while the candidate ends before this range does,
jump to the candidate's own candidate; every range skipped ends earlier, so the first candidate
that ends no earlier is the nearest container. Each round halves the chains (list ranking), so a
lane of n sibling ranges settles in about log2(n) rounds.

self time    a range's duration minus the time its direct children cover (clipped to the range,
             never below zero: ranges that only partly overlap do not nest and are not children)
waits        the gap from a range's end to the next range with the same parent (the next
             sibling, or the next top-level range of the lane), by (event before, event after)
"""

from __future__ import annotations

import numpy as np

from .model import RANGE, TraceData

NO_PARENT = -1


def range_tree(trace: TraceData) -> dict[str, np.ndarray]:
    """The ranges of `trace` in (capture, lane, start, longest first) order, with their parent.

    Returns row (index into trace.events), start_ns, end_ns, event, parent (index into these
    arrays, NO_PARENT for top-level ranges), self_ns.
    """
    ev = trace.events
    rows = np.flatnonzero(ev["kind"] == RANGE)
    lane = _lane_key(ev, rows)
    s, e = ev["start_ns"][rows], ev["end_ns"][rows]
    order = np.lexsort((-e, s, lane))
    rows, lane, s, e = rows[order], lane[order], s[order], e[order]
    n = len(rows)
    idx = np.arange(n)
    cand = idx - 1
    same = np.zeros(n, bool)
    same[1:] = lane[1:] == lane[:-1]
    cand[~same] = NO_PARENT
    # Pointer jumping: a candidate that ends before us cannot contain us, nor can anything
    # between it and its own candidate.
    active = np.flatnonzero(cand >= 0)
    while len(active):
        c = cand[active]
        bad = e[c] < e[active]
        active = active[bad]
        cand[active] = cand[c[bad]]
        active = active[cand[active] >= 0]
    parent = cand
    dur = e - s
    has = parent >= 0
    # A child's time counted inside its parent only (a partly overlapping range is no child,
    # since the parent must end no earlier; clipping guards against zero-length oddities).
    covered = np.minimum(e[has], e[parent[has]]) - np.maximum(s[has], s[parent[has]])
    child_ns = np.bincount(parent[has], weights=np.maximum(covered, 0), minlength=n)
    self_ns = np.maximum(dur - child_ns.astype(np.int64), 0)
    return {
        "row": rows,
        "start_ns": s,
        "end_ns": e,
        "event": ev["event"][rows],
        "parent": parent,
        "self_ns": self_ns,
        "lane_key": lane,
    }


def self_time(trace: TraceData) -> np.ndarray:
    """Self (exclusive) time of each row of trace.events (0 for instants)."""
    t = range_tree(trace)
    out = np.zeros(len(trace.events["kind"]), np.int64)
    out[t["row"]] = t["self_ns"]
    return out


def waits(trace: TraceData, tree: dict[str, np.ndarray] | None = None) -> dict[str, np.ndarray]:
    """Gaps between consecutive ranges with the same parent on a lane (a negative gap, from
    ranges that partly overlap, is left out). Returns one row per gap: before (event id), after
    (event id), gap_ns, row_before, row_after (indices into trace.events)."""
    t = range_tree(trace) if tree is None else tree
    n = len(t["row"])
    # Siblings: same lane and same parent, in start order (the tree's order within a lane).
    key_parent = t["parent"]  # NO_PARENT (-1) for top-level ranges
    order = np.lexsort((np.arange(n), key_parent, t["lane_key"]))
    lane, par = t["lane_key"][order], key_parent[order]
    nxt = np.zeros(n, bool)
    if n > 1:
        nxt[:-1] = (lane[1:] == lane[:-1]) & (par[1:] == par[:-1])
    a = order[:-1][nxt[:-1]] if n > 1 else order[:0]
    b = order[1:][nxt[:-1]] if n > 1 else order[:0]
    gap = t["start_ns"][b] - t["end_ns"][a]
    keep = gap >= 0
    a, b, gap = a[keep], b[keep], gap[keep]
    return {
        "before": t["event"][a],
        "after": t["event"][b],
        "gap_ns": gap,
        "row_before": t["row"][a],
        "row_after": t["row"][b],
    }


def _lane_key(ev: dict[str, np.ndarray], rows: np.ndarray) -> np.ndarray:
    lanes = int(ev["lane"].max()) + 1 if len(ev["lane"]) else 1
    return ev["capture"][rows].astype(np.int64) * lanes + ev["lane"][rows]
