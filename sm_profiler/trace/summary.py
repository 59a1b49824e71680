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
