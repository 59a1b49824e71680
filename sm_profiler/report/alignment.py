"""Our launches on CUPTI's time axis: torch.profiler's kernel rows by name, each launch matched
to its CUPTI row, the offset from %globaltimer to the host clock those rows carry, and how well
the two agree. export/merge.py (merged traces) and report/advise.py (host gaps over every kernel)
both take the offset from here, so a merged trace and the advisor put a launch at one time.

A launch is given as its kernel's name and its first and last stamps (ns); `rows` is
cupti_kernels' {name: [(start_ns, end_ns), ...]} (CUPTI may decorate names: they are matched as
torch_trace.kernel_key matches them).

Layer: report (it reads torch's kernel table, coverage.kernel_table; nothing above).
"""

from __future__ import annotations

import numpy as np

from ..wire.torch_trace import kernel_key

# Launches sampled per window for the lower bounds of best_window.
WINDOW_SAMPLES = 64
# Launches further than this outside the profile's kernel rows were not profiled (the buffer ran
# longer than torch.profiler): they are left out of the alignment figures.
PROFILE_MARGIN_NS = 1_000_000


def cupti_kernels(doc: dict, table: dict | None = None) -> dict[str, list[tuple[int, int]]]:
    """{kernel name: [(start_ns, end_ns), ...] in time order} from torch's CUDA kernel rows,
    in absolute ns (baseTimeNanoseconds + ts), names in the order they first appear; `table`:
    coverage.kernel_table(doc), where it was read already (then `doc` is not read)."""
    from .coverage import kernel_table

    t = kernel_table(doc) if table is None else table
    return rows_by_name(t, np.ones(len(t["name"]), bool))


def rows_by_name(t: dict, mask: np.ndarray) -> dict[str, list[tuple[int, int]]]:
    """cupti_kernels of the rows of kernel table `t` where `mask` holds (one device's)."""
    idx = np.flatnonzero(mask)
    if not len(idx):
        return {}
    # Sorted by name (its index: the order of first appearance), then start, then end.
    o = idx[np.lexsort((t["end_ns"][idx], t["start_ns"][idx], t["name"][idx]))]
    name = t["name"][o]
    start, end = t["start_ns"][o].tolist(), t["end_ns"][o].tolist()
    cuts = [0, *(np.flatnonzero(np.diff(name)) + 1).tolist(), len(o)]
    return {
        t["names"][int(name[a])]: list(zip(start[a:b], end[a:b], strict=True))
        for a, b in zip(cuts[:-1], cuts[1:], strict=True)
    }


def _rows_for(name: str, rows: dict[str, list[tuple[int, int]]]):
    """CUPTI rows of kernel `name` (CUPTI may decorate names: then by prefix)."""
    key = kernel_key(name, rows)
    return None if key is None else rows[key]


def _by_kernel(names) -> dict[str, list[int]]:
    """Indices of the launches per kernel name, in order of first launch."""
    by_name: dict[str, list[int]] = {}
    for i, n in enumerate(names):
        by_name.setdefault(n, []).append(i)
    return by_name


def match_nearest(names, starts, rows) -> list[tuple[int, int, int]]:
    """[(launch index, cupti start, cupti end)]: each launch paired with the CUPTI row of its
    kernel nearest to its first stamp (the earlier row on a tie). Use once the launches are on
    CUPTI's axis. Per kernel: one binary search per launch in its rows (sorted by start)."""
    by_name = _by_kernel(names)
    found = {}
    for name, idx in by_name.items():
        cands = _rows_for(name, rows)
        if not cands:
            continue
        starts_c = np.array([c[0] for c in cands], np.int64)
        ours = np.array([int(starts[i]) for i in idx], np.int64)
        right = np.minimum(np.searchsorted(starts_c, ours, side="left"), len(starts_c) - 1)
        left = np.maximum(right - 1, 0)
        # The first row holding the left candidate's start (rows are sorted by (start, end)).
        left = np.searchsorted(starts_c, starts_c[left], side="left")
        d_left = np.abs(ours.astype(object) - starts_c[left].astype(object))
        d_right = np.abs(ours.astype(object) - starts_c[right].astype(object))
        pick = np.where(d_left <= d_right, left, right)
        for i, j in zip(idx, pick.tolist(), strict=True):
            found[i] = (i, cands[j][0], cands[j][1])
    return [found[i] for i in sorted(found)]


def match_in_order(names, starts, rows) -> list[tuple[int, int, int]]:
    """Like match_nearest, for launches whose clock is not yet CUPTI's: per kernel name, the
    launches in time order against the window of as many consecutive CUPTI rows whose distances
    to them vary least (the profile may hold launches the buffer did not record), or the rows
    against a window of the launches (the buffer may hold launches the profile did not)."""
    by_name = _by_kernel(names)
    out = []
    for name, idx in by_name.items():
        cands = _rows_for(name, rows)
        if not cands:
            continue
        first = {i: int(starts[i]) for i in idx}
        idx.sort(key=first.__getitem__)
        # Each side relative to its own first time, in int64, before any float: a window's
        # spread does not change by a constant, and at real clock readings (about 1.7e18 ns)
        # a float64 of the absolute time steps by 256 ns.
        ours = _relative([first[i] for i in idx])
        starts_c = _relative([c[0] for c in cands])
        if len(cands) >= len(idx):
            best = best_window(ours, starts_c)
            out += [(i, *cands[best + k]) for k, i in enumerate(idx)]
        else:  # the buffer holds launches the profile does not (it ran longer): slide the rows
            best = best_window(starts_c, ours)
            out += [(idx[best + k], *c) for k, c in enumerate(cands)]
    return out


def _relative(times_ns: list[int]) -> np.ndarray:
    """Times (ns, sorted) as float64 ns after the first, the difference taken in int64."""
    t = np.array(times_ns, np.int64)
    return (t - t[0]).astype(np.float64)


def best_window(ours: np.ndarray, starts: np.ndarray) -> int:
    """The first j minimising ptp(ours - starts[j : j + len(ours)]), without evaluating every
    window in full: the spread over a sample of the launches is a lower bound of a window's
    spread, so windows are evaluated in full in order of their bound, until the best spread found
    is at most the next bound. Exact; about (windows x WINDOW_SAMPLES) + a few full windows, where
    evaluating every window costs windows x launches."""
    n, windows = len(ours), len(starts) - len(ours) + 1
    if windows == 1:
        return 0
    pos = np.unique(np.linspace(0, n - 1, min(n, WINDOW_SAMPLES)).astype(np.int64))
    j = np.arange(windows)
    d = ours[pos][None, :] - starts[j[:, None] + pos[None, :]]
    bound = d.max(axis=1) - d.min(axis=1)
    best_j, best = -1, np.inf
    for k in np.argsort(bound, kind="stable").tolist():
        if bound[k] > best:
            break
        spread = float(np.ptp(ours - starts[k : k + n]))
        if spread < best or (spread == best and k < best_j):
            best_j, best = k, spread
    return best_j


def kernel_offset_ns(names, starts, rows) -> int | None:
    """%globaltimer - CUPTI's clock from the instrumented kernels' own CUPTI rows: the median
    (in exact ns) of first stamp - CUPTI start over the launches match_in_order pairs; None
    where no launch's kernel has a row."""
    fit = kernel_fit(names, starts, None, rows)
    return None if fit is None else fit["offset_ns"]


def kernel_fit(names, starts, ends, rows) -> dict | None:
    """kernel_offset_ns with how well it fits the pairs it came from: offset_ns, matched (the
    pairs), median_abs_ns (over the pairs, the larger of |first stamp - offset - CUPTI start|
    and, with `ends`, |last stamp - offset - CUPTI end|: near 0 where the trace is of these
    launches and its clock is theirs). None where no launch's kernel has a row."""
    m = match_in_order(names, starts, rows)
    if not m:
        return None
    d = sorted(int(starts[i]) - int(s) for i, s, _ in m)
    off = (d[(len(d) - 1) // 2] + d[len(d) // 2]) // 2
    res = [
        max(abs(int(starts[i]) - off - s), 0 if ends is None else abs(int(ends[i]) - off - e))
        for i, s, e in m
    ]
    return {"offset_ns": off, "matched": len(m), "median_abs_ns": float(np.median(res))}


def alignment_error(names, starts, ends, rows) -> dict:
    """First stamp - CUPTI start and last stamp - CUPTI end over matched launches (ns), of the
    launches inside the profile's span (the others are counted as outside_profile); the
    launches already on CUPTI's axis. median_abs_ns: the median over launches of the larger of
    the two distances."""
    spans = [r for v in rows.values() for r in v]
    m = match_nearest(names, starts, rows)
    if spans:
        lo = min(a for a, _ in spans) - PROFILE_MARGIN_NS
        hi = max(b for _, b in spans) + PROFILE_MARGIN_NS
        inside = [x for x in m if lo <= int(starts[x[0]]) <= hi]
        outside, m = len(m) - len(inside), inside
    else:
        outside = 0
    if not m:
        return {"matched": 0, "outside_profile": outside}
    ds = np.array([int(starts[i]) - s for i, s, _ in m], np.float64)
    de = np.array([int(ends[i]) - e for i, _, e in m], np.float64)
    return {
        "matched": len(m),
        "start_delta_ns": {
            "median": float(np.median(ds)),
            "min": float(ds.min()),
            "max": float(ds.max()),
        },
        "end_delta_ns": {
            "median": float(np.median(de)),
            "min": float(de.min()),
            "max": float(de.max()),
        },
        "max_abs_ns": float(max(np.abs(ds).max(), np.abs(de).max())),
        "median_abs_ns": float(np.median(np.maximum(np.abs(ds), np.abs(de)))),
        "outside_profile": outside,
    }
