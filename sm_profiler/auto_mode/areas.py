"""One GPU's record slots, handed out a launch at a time (format.py, "auto mode").

Triton asks for a launch's area just before the launch (its profile scratch allocator); `Areas`
gives the first slot of `count` free ones and remembers the area's step and tag, or says no.
Launch areas are taken upward from slot 0: in limit mode until one does not fit (then nothing
more: the kept records are the run's first, whole launches); in ring mode over and over, an
area overwriting the oldest ones. A CUDA graph's kernels keep the pointers they were captured
with, so their areas are taken downward from the top, once, and never reused; each recorded
replay is copied into a launch area (`copy_of`).

Pure bookkeeping, no GPU: the binding turns slots into addresses.
"""

from __future__ import annotations

from collections import deque

import numpy as np

from .. import format as fmt


class Areas:
    def __init__(self, slots: int, ring: bool):
        self.slots, self.ring = int(slots), bool(ring)
        self.top = self.slots  # graph areas lie in [top, slots)
        self.next = 0  # the next free slot of the launch space [0, top)
        self.lap = 0  # ring: times the launch space was started over
        self.full = False  # limit mode: an area did not fit, so no later one is given
        # The kept areas in the order they were given: [first, count, step, tag, lap, parts];
        # parts: None for a launch, else a graph replay's launches as (offsets from first,
        # counts) arrays, shared by its replays (a replay costs one entry, not one a launch)
        self.live: deque[list] = deque()
        self.claimed = 0  # records asked for while recording, kept or not
        self.graph_slots = 0  # slots held by captured graphs
        self.graphs_refused = 0  # captured launches given no area (no room)

    def take(self, count: int, step: int = 0, tag: int = 0) -> int | None:
        """First slot of a new area of `count` records for a launch, or None (nothing kept)."""
        self.claimed += max(count, 0)
        end = self.next + count
        if end <= self.top and count > 0 and not self.lap and not self.full:  # the usual case
            first, self.next = self.next, end
            self.live.append([first, count, step, tag, 0, None])
            return first
        first = self._room(count)
        if first is not None:
            self.live.append([first, count, step, tag, self.lap, None])
        return first

    @staticmethod
    def replay_parts(parts: list[tuple[int, int]]) -> tuple:
        """A captured graph's areas ((first, count) each, in the graph space) as copy_of takes
        them: (graph first, span, records, offsets, counts)."""
        firsts = np.array(sorted(p[0] for p in parts), np.int64)
        counts = np.array([c for _, c in sorted(parts)], np.int64)
        lo = int(firsts[0])
        span = int((firsts + counts).max()) - lo
        return lo, span, int(counts.sum()), firsts - lo, counts

    def copy_of(self, replay: tuple, step: int = 0, tag: int = 0) -> int | None:
        """First slot of a new area holding a graph replay (`replay_parts` of its captured areas)
        as its areas lie, each launch kept as an area of its own; None when it does not fit.
        Copy `span` slots from `graph first` to it."""
        return self.copy_of_many(replay, 1, [(0, step, tag)])

    def copy_of_many(self, replay: tuple, n: int, kept: list[tuple[int, int, int]]) -> int | None:
        """First slot of a new area holding `n` replays of one graph side by side, `span` slots
        apart (a graph's staged replays, graph_stage.py), or None when it does not fit. Only the
        replays `kept` lists as (index, step, tag) are kept: the others were not recorded."""
        lo, span, records, offsets, counts = replay
        self.claimed += records * len(kept)
        first = self._room(span * n)
        if first is not None:
            for i, step, tag in kept:
                self.live.append([first + i * span, span, step, tag, self.lap, (offsets, counts)])
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
        if self.ring:  # launch areas at or above `low` are overwritten from now on
            self.live = deque(a for a in self.live if a[0] + a[1] <= low)
        self.top = low
        self.graph_slots += count
        return low

    def _room(self, count: int) -> int | None:
        if count <= 0:
            return None
        if self.full:
            return None
        end = self.next + count
        if end > self.top:
            if not self.ring:
                self.full = True
                return None
            if count > self.top:
                return None
            # Start over: what lies past this lap's end is older than all of this lap.
            self.lap += 1
            while self.live and self.live[0][4] < self.lap - 1:
                self.live.popleft()
            self.next, end = 0, count
        if self.lap:
            while self.live and self.live[0][4] < self.lap and self.live[0][0] < end:
                self.live.popleft()
        first = self.next
        self.next = end
        return first

    # -- reading back ------------------------------------------------------------------------

    def areas(self) -> np.ndarray:
        """(first, count, step, tag) of every kept launch area: the launches' in the order given,
        then each replay's launches."""
        launches = [e[:4] for e in self.live if e[5] is None]  # one list: a million take a second
        out = [np.array(launches, np.int64).reshape(-1, 4)]
        for first, _, step, tag, _, parts in self.live:
            if parts is not None:
                offsets, counts = parts
                a = np.empty((len(counts), 4), np.int64)
                a[:, 0], a[:, 1], a[:, 2], a[:, 3] = first + offsets, counts, step, tag
                out.append(a)
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
        d[:, 1] = a[:, 2] | (a[:, 3] << np.uint64(fmt.AUTO_TAG_SHIFT))
        return words
