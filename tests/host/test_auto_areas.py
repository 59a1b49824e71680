"""Areas (wire/auto_areas.py) against a plain model of what it must keep: every launch area and
copy in a list, the ones a ring overwrites dropped as soon as they are. Areas keeps the sizes and
runs only and works out what was overwritten when read (and forgets it every so often); whatever
the sequence of launches, steps, captures and copies, both must keep the same areas and claims."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from sm_profiler.wire import auto_areas as areas_module
from sm_profiler.wire.auto_areas import Areas


class Model:
    def __init__(self, slots: int, ring: bool):
        self.slots, self.ring, self.top, self.next, self.lap, self.full = (
            slots,
            ring,
            slots,
            0,
            0,
            False,
        )
        self.live: list[list] = []  # [first, count, step, tag, lap, launches or None]
        self.claimed = self.graph_slots = 0
        self.step = self.tag = 0

    def room(self, count):
        if count <= 0 or self.full:
            return None
        end = self.next + count
        if end > self.top:
            if not self.ring:
                self.full = True
                return None
            if count > self.top:
                return None
            self.lap += 1
            self.next, end = 0, count
        first = self.next
        self.next = end
        # what the new area overwrites: the last lap's areas it reaches
        self.live = [
            a for a in self.live if not (a[4] < self.lap and a[0] < end) and a[4] >= self.lap - 1
        ]
        return first

    def take(self, count):
        self.claimed += max(count, 0)
        first = self.room(count)
        if first is not None:
            self.live.append([first, count, self.step, self.tag, self.lap, None])
        return first

    def take_graph(self, count):
        low = self.top - count
        if (
            count <= 0
            or self.graph_slots + count > self.slots // 2
            or (not self.ring and low < self.next)
        ):
            return None
        self.live = [a for a in self.live if a[0] + a[1] <= low]
        self.top, self.graph_slots = low, self.graph_slots + count
        return low

    def copy_many(self, replay, n, kept):
        _, span, records, offsets, counts = replay
        self.claimed += records * len(kept)
        first = self.room(span * n)
        if first is not None:
            for i, step, tag in kept:
                self.live.append([first + i * span, span, step, tag, self.lap, (offsets, counts)])
        return first

    def areas(self):
        out = [a[:4] for a in self.live if a[5] is None]
        for first, _, step, tag, _, parts in self.live:
            if parts is not None:
                out += [[first + int(o), int(c), step, tag] for o, c in zip(*parts, strict=True)]
        return out


ops = st.lists(
    st.one_of(
        st.tuples(st.just("take"), st.integers(0, 9)),
        st.tuples(st.just("mark"), st.integers(0, 3)),
        st.tuples(st.just("graph"), st.integers(1, 4)),
        st.tuples(st.just("copy"), st.integers(1, 3)),
    ),
    max_size=80,
)


@settings(max_examples=300, deadline=None)
@given(slots=st.integers(8, 40), ring=st.booleans(), compact=st.integers(1, 12), ops=ops)
def test_areas_keep_what_a_plain_list_keeps(slots, ring, compact, ops):
    saved, areas_module._COMPACT_MIN = areas_module._COMPACT_MIN, compact  # forgets often
    try:
        _check_against_model(slots, ring, ops)
    finally:
        areas_module._COMPACT_MIN = saved


def _check_against_model(slots, ring, ops):
    a, m = Areas(slots, ring), Model(slots, ring)
    graph: list[tuple[int, int]] = []
    for op, v in ops:
        if op == "take":
            assert a.take(v) == m.take(v)
        elif op == "mark":
            a.mark(v, 2 * v)
            m.step, m.tag = v, 2 * v
        elif op == "graph":
            first = a.take_graph(v)
            assert first == m.take_graph(v)
            if first is not None:
                graph.append((first, v))
        elif graph:
            replay = Areas.replay_parts(graph)
            kept = [(i, m.step + i, 7) for i in range(v) if i != 1]
            assert a.copy_of_many(replay, v, kept) == m.copy_many(replay, v, kept)
        assert a.next == m.next and a.lap == m.lap and a.top == m.top
    assert a.areas().tolist() == m.areas()
    assert a.claimed == m.claimed


def test_a_long_ring_forgets_what_it_overwrote():
    """Memory flat over a long run: a million launches in a ring of 1,000 slots leave a few
    thousand sizes held, not a million."""
    a = Areas(1000, ring=True)
    for i in range(1_000_000):
        if i % 1000 == 0:
            a.mark(i // 1000)
        a.take(3)
    assert len(a.counts) < 4 * areas_module._COMPACT_MIN
    kept = a.areas()
    assert kept[:, 1].sum() == a.kept() and np.all(kept[:, 2] >= 998)  # the newest steps only
    assert a.claimed == 3_000_000
