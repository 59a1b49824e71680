"""Summary counters for traces too big for a trace viewer: active ranges per SM and event.

For each (launch, SM, event) the launch's span is cut into `bins` equal bins and each bin gets
the mean number of that event's ranges active on that SM during it (time-weighted: 2.5 means
two and a half ranges on average, over all the SM's lanes). Computed from the integral of the
active count, I(x) = sum over ranges of clamp(x - start, 0, duration), at every bin edge: with
the starts and ends sorted per group and their prefix sums, I at any x is two searchsorted
look-ups, so the cost is a sort of the ranges plus one look-up per bin edge, whatever the
ranges' lengths.
"""

from __future__ import annotations

import numpy as np

from ..errors import ConfigError

# Bins per launch: about one per pixel of a wide screen.
SUMMARY_BINS = 1000


def active_ranges(
    start: np.ndarray,
    end: np.ndarray,
    group: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    bins: int = SUMMARY_BINS,
) -> dict[str, np.ndarray]:
    """Mean active ranges per bin of each group.

    start, end, group: the ranges (group 0..G-1); lo, hi: the span of each group (every range
    of group g inside [lo[g], hi[g]]). Returns group, time_ns (bin start), value (float64)
    for every bin, group-major, then a last row per group at hi with value 0.
    """
    acc = ActiveRanges(lo, hi, bins)
    acc.add(start, end, group)
    return acc.result()


class ActiveRanges:
    """active_ranges of ranges given a part at a time (any split of them: the integral of the
    active count is a sum over ranges, in exact integers), so that no part of the work holds
    more than one part's temporaries."""

    def __init__(self, lo: np.ndarray, hi: np.ndarray, bins: int = SUMMARY_BINS):
        self.lo, self.hi, self.bins = lo, hi, bins
        n_groups = len(lo)
        if n_groups == 0:
            return
        width = np.maximum((hi - lo), 1).astype(np.int64)
        k = np.arange(bins + 1, dtype=np.int64)
        # Bin edges relative to each group's lo: (G, bins + 1).
        self.edges = (width[:, None] * k[None, :]) // bins
        self.lift = int(width.max()) + 2
        if self.lift * (n_groups + 1) >= 2**62:  # int64 areas: a span of years, a bad clock
            raise ConfigError(
                f"cannot summarise {n_groups:,} counters over a span of {int(width.max()):,} ns "
                "(more than int64 holds): export a window (window_ns=, --window-us) or every "
                "range (summary=False, --no-summary)"
            )
        self.area = np.zeros((n_groups, bins + 1), np.int64)  # ns x active ranges, to each edge

    def add(self, start: np.ndarray, end: np.ndarray, group: np.ndarray) -> None:
        """Count the ranges (start, end) of `group` in."""
        if len(self.lo) == 0 or len(start) == 0:
            return
        rel_s = (start - self.lo[group]).astype(np.int64)
        self.area += self._integral(rel_s, group)
        del rel_s
        rel_e = (end - self.lo[group]).astype(np.int64)
        self.area -= self._integral(rel_e, group)

    def _integral(self, rel: np.ndarray, group: np.ndarray) -> np.ndarray:
        """sum over ranges of (x - rel)+ at every edge x, per group: (G, bins + 1)."""
        n_groups, lift, edges = len(self.lo), self.lift, self.edges
        key = group.astype(np.int64) * lift + rel
        order = np.argsort(key, kind="stable")
        key, r = key[order], rel[order]
        del order
        csum = np.concatenate([[0], np.cumsum(r)])
        q = np.arange(n_groups, dtype=np.int64)[:, None] * lift + edges
        first = np.searchsorted(key, np.arange(n_groups, dtype=np.int64) * lift)[:, None]
        upto = np.searchsorted(key, q, side="left")  # ranges of the group with rel < x
        count = upto - first
        return count * edges - (csum[upto] - csum[first])

    def result(self) -> dict[str, np.ndarray]:
        lo, hi, bins = self.lo, self.hi, self.bins
        n_groups = len(lo)
        if n_groups == 0:  # nothing to summarise (a trace of instants only)
            return {
                "group": np.zeros(0, np.int64),
                "time_ns": np.zeros(0, np.int64),
                "value": np.zeros(0, np.float64),
            }
        edges = self.edges
        bin_ns = np.diff(edges, axis=1)
        mean = np.diff(self.area, axis=1) / np.maximum(bin_ns, 1)
        times = lo[:, None] + edges[:, :-1]
        value = np.concatenate([mean, np.zeros((n_groups, 1))], axis=1)
        times = np.concatenate([times, hi[:, None]], axis=1)
        g = np.repeat(np.arange(n_groups), bins + 1)
        return {"group": g, "time_ns": times.reshape(-1), "value": value.reshape(-1)}


def drop_repeats(table: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Rows whose value differs from the previous row of their group (and each group's first
    and last row): a counter holds its value until the next sample anyway."""
    g, v = table["group"], table["value"]
    keep = np.ones(len(g), bool)
    keep[1:] = (g[1:] != g[:-1]) | (v[1:] != v[:-1])
    last = np.ones(len(g), bool)
    last[:-1] = g[1:] != g[:-1]
    keep |= last
    return {k: a[keep] for k, a in table.items()}


def union_segments(
    group: np.ndarray, start: np.ndarray, end: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The union of the [start, end) intervals of each group as disjoint segments (group,
    start, end), sorted by group then start; intervals that touch are one segment.

    Where int64 holds each group's times lifted above the previous group's (times taken from
    the earliest start), one stable sort of the lifted starts orders them (a few times faster
    than a sort by two keys: rows come nearly sorted) and one np.maximum.accumulate of the
    lifted ends gives the furthest end so far within each group; else a group at a time."""
    if len(group) == 0:
        z = np.zeros(0, np.int64)
        return z, z, z
    g = group.astype(np.int64)
    lo = int(start.min())
    width = int(end.max()) - lo + 1
    lifted = width * (int(g.max()) + 2) < 2**62
    if lifted:
        lift = g * width - lo
        order = np.argsort(start + lift, kind="stable")
        lift = lift[order]
    else:
        order = np.lexsort((start, g))
    g, s, e = g[order], start[order].astype(np.int64), end[order].astype(np.int64)
    del order
    runs = np.empty_like(e)  # the furthest end of the group's intervals up to each
    if lifted:
        np.maximum.accumulate(e + lift, out=runs)
        runs -= lift
        del lift
    else:
        for k in np.unique(g).tolist():
            m = g == k
            runs[m] = np.maximum.accumulate(e[m])
    begins = np.ones(len(g), bool)  # an interval past every earlier end of its group
    begins[1:] = (g[1:] != g[:-1]) | (s[1:] > runs[:-1])
    first = np.flatnonzero(begins)
    last = np.append(first[1:] - 1, len(g) - 1)
    return g[first], s[first], runs[last]


def busy_sms_binned(
    track: np.ndarray,
    sm: np.ndarray,
    start: np.ndarray,
    end: np.ndarray,
    n_tracks: int,
    lo_ns: int,
    hi_ns: int,
    bins: int,
) -> dict[str, np.ndarray]:
    """Each track's busy SMs (SMs running at least one of its programs) as the mean per bin of
    `bins` equal bins over [lo_ns, hi_ns): programs (track 0..n_tracks-1, sm, start, end), each
    inside that span. Returns drop_repeats of active_ranges' table (group: the track): the mean
    over each bin, then 0 at hi_ns; a run of equal bins held by its first."""
    top = int(sm.max()) + 1 if len(sm) else 1
    key, seg_start, seg_end = union_segments(
        track.astype(np.int64) * top + sm.astype(np.int64), start, end
    )
    span = np.full(n_tracks, lo_ns, np.int64), np.full(n_tracks, hi_ns, np.int64)
    acc = ActiveRanges(*span, bins)
    acc.add(seg_start, seg_end, key // top)  # an SM's segments never overlap: one per SM busy
    return drop_repeats(acc.result())
