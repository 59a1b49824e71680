"""One GPU's record slots, handed out a launch at a time (format.py, "auto mode").

Triton asks for a launch's area just before the launch (its profile scratch allocator); `Areas`
gives the first slot of `count` free ones and remembers the area's step and tag, or says no.
Launch areas are taken upward from slot 0: in limit mode until one does not fit (then nothing
more: the kept records are the run's first, whole launches); in ring mode over and over, an
area overwriting the oldest ones. A CUDA graph's kernels keep the pointers they were captured
with, so their areas are taken downward from the top, once, and never reused; each recorded
replay is copied into a launch area (`copy_of_many`, which takes a graph's staged replays at
once).

`take` runs before every instrumented launch, on a step the host may set the pace of, so it does
the least it can: a cursor moves on and the area's size goes into a list (no object of its own a
launch, nothing more for the garbage collector). An area's first slot, step, tag and lap are kept
as runs, which change only at a step, a wrap or a copy. What a ring has overwritten is worked out
from the laps when the areas are read, and forgotten every so often so that memory stays flat
over a long run.

Pure bookkeeping, no GPU: the binding turns slots into addresses.
"""

from __future__ import annotations

import numpy as np

from . import format as fmt

_COMPACT_MIN = 1 << 16  # launches held before the first look for overwritten ones


class Areas:
    def __init__(self, slots: int, ring: bool, compact_min: int = _COMPACT_MIN):
        self.slots, self.ring = int(slots), bool(ring)
        self.compact_min = compact_min  # launches held before the first look, at least
        self.top = self.slots  # graph areas lie in [top, slots)
        self.next = 0  # the next free slot of the launch space [0, top)
        self.lap = 0  # ring: times the launch space was started over
        self.full = False  # limit mode: an area did not fit, so no later one is given
        self.limit = self.top  # take's fast path: an area ending at or below this fits as is
        # Launch areas in the order given: their counts; then as runs (index of the first launch
        # of the run, value...): first slots (areas lie back to back within a run), step and
        # tag, lap.
        self.counts: list[int] = []
        self.first_runs: list[tuple[int, int]] = [(0, 0)]
        self.step, self.tag = 0, 0
        self.step_runs: list[tuple[int, int, int]] = [(0, 0, 0)]
        self.lap_runs: list[tuple[int, int]] = [(0, 0)]
        self.forgotten_claims = 0  # records of launch areas _compact forgot
        self.compact_at = compact_min
        # Graph replays copied out: [first, span, step, tag, lap, (offsets, counts)], the
        # replay's launches as offsets from first and counts, shared by a graph's replays (a
        # replay costs one entry, not one a launch)
        self.copies: list[list] = []
        self.other_claims = 0  # records asked for but not in `counts`: refused, copies
        self.graph_slots = 0  # slots held by captured graphs
        self.graphs_refused = 0  # captured launches given no area (no room)

    @property
    def claimed(self) -> int:
        """Records asked for while recording, kept or not."""
        return sum(self.counts) + self.forgotten_claims + self.other_claims

    def mark(self, step: int, tag: int = 0) -> None:
        """The step and tag of the launch areas given from now on."""
        if (step, tag) != (self.step, self.tag):
            self.step, self.tag = step, tag
            _run(self.step_runs, len(self.counts), step, tag)

    def take(self, count: int, step: int | None = None, tag: int = 0) -> int | None:
        """First slot of a new area of `count` records for a launch, or None (nothing kept).
        `step` and `tag`: mark() first (the binding marks at each step, not at each launch)."""
        if step is not None:
            self.mark(step, tag)
        first = self.next
        end = first + count
        if end <= self.limit and count > 0:  # the usual case (binding.area_for_launch inlines it)
            self.next = end
            self.counts.append(count)
            return first
        first = self._room(count)
        if first is None:
            self.other_claims += max(count, 0)
            return None
        _run(self.first_runs, len(self.counts), first, merge=False)
        self.counts.append(count)
        if len(self.counts) >= self.compact_at:
            self._compact()
        return first

    @staticmethod
    def replay_parts(parts: list[tuple[int, int]]) -> tuple:
        """A captured graph's areas ((first, count) each, in the graph space) as copy_of_many takes
        them: (graph first, span, records, offsets, counts)."""
        firsts = np.array(sorted(p[0] for p in parts), np.int64)
        counts = np.array([c for _, c in sorted(parts)], np.int64)
        lo = int(firsts[0])
        span = int((firsts + counts).max()) - lo
        return lo, span, int(counts.sum()), firsts - lo, counts

    def copy_of_many(self, replay: tuple, n: int, kept: list[tuple[int, int, int]]) -> int | None:
        """First slot of a new area holding `n` replays of one graph side by side, `span` slots
        apart (a graph's staged replays, graph_stage.py), or None when it does not fit. Only the
        replays `kept` lists as (index, step, tag) are kept: the others were not recorded."""
        lo, span, records, offsets, counts = replay
        self.other_claims += records * len(kept)
        first = self._room(span * n)
        if first is not None:
            _run(self.first_runs, len(self.counts), self.next, merge=False)  # the next launch
            for i, step, tag in kept:
                self.copies.append([first + i * span, span, step, tag, self.lap, (offsets, counts)])
            if len(self.copies) >= self.compact_at:
                self._compact()
        return first

    def take_graph(self, count: int) -> int | None:
        """First slot of an area for a launch being captured into a CUDA graph (kept until the
        run ends), or None where there is no room: graphs hold at most half the slots, so that
        a replay's copy fits in the other half."""
        if count <= 0:
            return None
        low = self.top - count
        if self.graph_slots + count > self.slots // 2 or (not self.ring and low < self.next):
            self.graphs_refused += 1
            return None
        # Ring: launch areas reaching above `low` are overwritten from now on (`_kept`).
        self.top = low
        self.graph_slots += count
        self._set_limit()
        return low

    def _set_limit(self) -> None:
        self.limit = -1 if self.full else self.top

    def _room(self, count: int) -> int | None:
        """The slow path of take and copies: an area that does not fit as is, or a copy."""
        if count <= 0 or self.full:
            return None
        end = self.next + count
        if end > self.top:
            if not self.ring:
                self.full = True
                self._set_limit()
                return None
            if count > self.top:
                return None
            # Start over: what lies past this lap's end is older than all of this lap.
            self.lap += 1
            _run(self.lap_runs, len(self.counts), self.lap)
            self.next, end = 0, count
        first = self.next
        self.next = end
        return first

    def _kept(self, firsts: np.ndarray, counts: np.ndarray, laps: np.ndarray) -> np.ndarray:
        """Which areas still hold their records: this lap's, the last lap's past where this one
        has reached, and none that reaches into graph areas taken since."""
        keep = (laps == self.lap) | ((laps == self.lap - 1) & (firsts >= self.next))
        return keep & (firsts + counts <= self.top)

    @staticmethod
    def _expand(runs: list, n: int) -> np.ndarray:
        """Per launch, the values of runs [(index, *values)] (n launches)."""
        r = np.array(runs, np.int64).reshape(len(runs), -1)
        idx = np.searchsorted(r[:, 0], np.arange(n), side="right") - 1
        return r[idx, 1:]

    def _launch_areas(self) -> np.ndarray:
        """(first, count, step, tag, lap, kept) of every launch area given, in order."""
        n = len(self.counts)
        out = np.empty((n, 6), np.int64)
        out[:, 1] = self.counts
        # First slots: each run's, then back to back (the counts before, within the run).
        run = np.array(self.first_runs, np.int64).reshape(-1, 2)
        which = np.searchsorted(run[:, 0], np.arange(n), side="right") - 1
        before = np.cumsum(out[:, 1]) - out[:, 1]  # slots of the launches before each
        out[:, 0] = run[which, 1] + before - before[run[which, 0]]
        out[:, 2:4] = self._expand(self.step_runs, n)
        out[:, 4] = self._expand(self.lap_runs, n)[:, 0]
        out[:, 5] = self._kept(out[:, 0], out[:, 1], out[:, 4])
        return out

    def _compact(self) -> None:
        """Forget the launch areas and copies a ring has overwritten (memory stays flat)."""
        a = self._launch_areas()
        self.forgotten_claims += int(a[a[:, 5] == 0, 1].sum())
        a = a[a[:, 5] == 1]
        self.counts = a[:, 1].tolist()
        # Kept areas are no longer back to back: a run at every gap, and where the next goes.
        gap = np.ones(len(a), bool)
        gap[1:] = a[1:, 0] != a[:-1, 0] + a[:-1, 1]
        self.first_runs = [(int(i), int(a[i, 0])) for i in np.flatnonzero(gap)]
        _run(self.first_runs, len(a), self.next, merge=False)
        self.step_runs = _runs(a[:, 2:4], (self.step, self.tag))
        self.lap_runs = _runs(a[:, 4:5], (self.lap,))
        self.copies = self._kept_copies()
        self.compact_at = max(self.compact_min, 2 * max(len(self.counts), len(self.copies)))

    def _kept_copies(self) -> list[list]:
        if not self.copies:
            return []
        c = np.array([e[:5] for e in self.copies], np.int64)
        keep = self._kept(c[:, 0], c[:, 1], c[:, 4])
        return [e for e, k in zip(self.copies, keep, strict=True) if k]

    # -- reading back ------------------------------------------------------------------------

    def areas(self) -> np.ndarray:
        """(first, count, step, tag) of every kept launch area: the launches' in the order given,
        then each replay's launches."""
        a = self._launch_areas()
        out = [a[a[:, 5] == 1, :4]]
        for first, _, step, tag, _, parts in self._kept_copies():
            offsets, counts = parts
            c = np.empty((len(counts), 4), np.int64)
            c[:, 0], c[:, 1], c[:, 2], c[:, 3] = first + offsets, counts, step, tag
            out.append(c)
        return np.concatenate(out)

    def kept(self) -> int:
        return int(self.areas()[:, 1].sum())

    def header_and_areas(self) -> np.ndarray:
        """The header and area descriptors that go in front of the record slots read back."""
        a = self.areas().astype(np.uint64)
        words = np.zeros(fmt.AUTO_HEADER_WORDS + fmt.AUTO_AREA_WORDS * len(a), np.uint64)
        words[: fmt.AUTO_HEADER_WORDS] = fmt.auto_header(
            self.slots, self.ring, len(a), self.claimed
        )
        d = words[fmt.AUTO_HEADER_WORDS :].reshape(-1, fmt.AUTO_AREA_WORDS)
        d[:, 0] = a[:, 0] | (a[:, 1] << np.uint64(32))
        d[:, 1] = fmt.auto_label(a[:, 2], a[:, 3])
        return words


def _runs(values: np.ndarray, current: tuple) -> list[tuple]:
    """[(index, *values)] where each run of equal rows of `values` begins, then `current` (the
    values the next launch will carry) where the last run's differ."""
    runs: list[tuple] = []
    if len(values):
        change = np.ones(len(values), bool)
        change[1:] = (values[1:] != values[:-1]).any(axis=1)
        runs = [(int(i), *(int(v) for v in values[i])) for i in np.flatnonzero(change)]
    if not runs or runs[-1][1:] != tuple(current):
        runs.append((len(values), *current))
    return runs


def _run(runs: list, index: int, *values, merge: bool = True) -> None:
    """Begin a run at launch `index` (replacing one that begins there: it holds no launch);
    `merge`: not where the run before has the same values."""
    if runs and runs[-1][0] == index:
        runs.pop()
    if not runs or not merge or runs[-1][1:] != values:
        runs.append((index, *values))
