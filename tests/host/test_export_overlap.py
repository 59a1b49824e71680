"""Overlapping ranges in one lane (issue 15, item 3): every exported slice keeps its own end.

Perfetto's SLICE_END closes the innermost open slice of its track, so ranges that overlap without
nesting must go to separate tracks. The file is read back the way trace processor reads it
(`read_trace`) and compared with the decoded ranges; Chrome's threads must hold only ranges that
nest or are disjoint.
"""

from __future__ import annotations

from collections import Counter, defaultdict

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from reference_encoder import BEGIN, END, INSTANT, Lane, Stream, encode, examples
from strategies import SETTINGS, event_ids, nested

from sm_profiler.export import to_chrome_json, to_perfetto_bytes
from sm_profiler.trace.decode import decode
from sm_profiler.trace.timeline import order_rows
from sm_profiler.wire.capture import Capture

pytest.importorskip("perfetto.protos.perfetto.trace.perfetto_trace_pb2")
from trace_readers import read_trace  # noqa: E402

T0 = 1_700_000_000_000_000_000


def lanes_capture(lanes: list[list[tuple[int, int]]], gap: int = 10) -> Capture:
    """One block per lane; records `gap` ns apart (gap 0: every record at one time)."""
    cap = max(1, max(len(r) for r in lanes))
    s = Stream(len(lanes), 1, cap)
    for b, recs in enumerate(lanes):
        s.lanes[(b, 0)] = Lane(
            T0, b % 7, [(k, e, T0 + gap * (i + 1)) for i, (k, e) in enumerate(recs)]
        )
    names = {e: f"e{e}" for recs in lanes for _, e in recs}
    return Capture(encode(s), event_names=names)


def clique(n: int) -> list[tuple[int, int]]:
    """b0 .. b(n-1) e0 .. e(n-1): n ranges that all overlap each other."""
    return [(BEGIN, i) for i in range(n)] + [(END, i) for i in range(n)]


def check_perfetto(trace) -> None:
    """The slices read back, per lane (over its tracks), are exactly the decoded ranges."""
    r = read_trace(to_perfetto_bytes(trace))
    got = defaultdict(Counter)
    for d in r.threads():
        block = int(d.name.split()[1])
        got[block].update(r.slices[d.uuid])
    ev = trace.events
    want = defaultdict(Counter)
    cols = [ev[c].tolist() for c in ("block", "event", "kind", "start_ns", "end_ns")]
    for b, e, k, s, t in zip(*cols, strict=True):
        if k == 0:
            want[b][(trace.event_name(e), s, t - s)] += 1
    assert {b: c for b, c in got.items() if c} == dict(want)


def check_chrome(trace) -> None:
    """On every Chrome thread, complete events nest or are disjoint."""
    by_tid = defaultdict(list)
    for x in to_chrome_json(trace)["traceEvents"]:
        if x["ph"] == "X" and x["name"].startswith("e"):
            by_tid[x["tid"]].append((x["ts"], x["ts"] + x["dur"]))
    for spans in by_tid.values():
        for i, (a0, a1) in enumerate(spans):
            for b0, b1 in spans[i + 1 :]:
                assert a1 <= b0 or b1 <= a0 or (a0 <= b0 and b1 <= a1) or (b0 <= a0 and a1 <= b1)


@pytest.mark.parametrize("n", [2, 18, 19, 25, 33, 100])
def test_mutually_overlapping_ranges_keep_their_ends(n):
    trace = decode(lanes_capture([clique(n), [(BEGIN, 0), (END, 0)]]))
    check_perfetto(trace)
    check_chrome(trace)


@pytest.mark.parametrize("gap", [0, 1])
def test_many_overlaps_at_equal_times(gap):
    """Ties: every record at one time, or the same ids reused so that ranges of one id nest."""
    lane = clique(20) + [(BEGIN, 3), (BEGIN, 3), (END, 3), (BEGIN, 1), (END, 3), (END, 1)]
    lane += [(BEGIN, 4), (INSTANT, 9), (BEGIN, 5), (END, 4), (END, 5)] * 3
    trace = decode(lanes_capture([lane, clique(30)[::-1]], gap=gap))
    check_perfetto(trace)
    check_chrome(trace)


def test_a_staircase_settles_with_few_tracks():
    """A light overlap keeps nested ranges together: the overlapping one moves up alone."""
    lane = [(BEGIN, 0), (BEGIN, 1), (END, 1), (BEGIN, 2), (END, 0), (END, 2)]
    trace = decode(lanes_capture([lane]))
    r = read_trace(to_perfetto_bytes(trace))
    assert sorted(d.name for d in r.threads()) == ["block 0", "block 0 (overlap)"]
    check_perfetto(trace)


@st.composite
def tangled(draw) -> list[tuple[int, int]]:
    """Nested runs and begins of many ids whose ends come in any order."""
    out: list[tuple[int, int]] = []
    for _ in range(draw(st.integers(1, 3))):
        ids = draw(st.lists(event_ids, min_size=1, max_size=30))
        out += [(BEGIN, e) for e in ids] + draw(nested())
        out += [(END, e) for e in draw(st.permutations(ids))]
    return out


@settings(max_examples=examples(60), **SETTINGS)
@given(st.lists(tangled(), min_size=1, max_size=3), st.sampled_from([0, 1, 7]))
def test_any_overlap_exports_exactly(lanes, gap):
    trace = decode(lanes_capture(lanes, gap=gap))
    check_perfetto(trace)
    check_chrome(trace)


def test_levels_nest_on_every_level():
    """order_rows directly: ranges sharing a level never partially overlap."""
    rng = np.random.default_rng(15)
    start = np.sort(rng.integers(0, 50, 200))
    end = start + rng.integers(0, 30, 200)
    lane = np.zeros(200, np.int64)
    lv = order_rows(start, end, np.ones(200, bool), lane, np.zeros(1, np.int64), np.arange(200))[
        "level"
    ]
    for a in range(200):
        same = np.flatnonzero(lv == lv[a])
        same = same[same > a]
        s, e = start[same], end[same]
        ok = (e <= start[a]) | (s >= end[a]) | ((s >= start[a]) & (e <= end[a]))
        ok |= (s <= start[a]) & (e >= end[a])
        assert ok.all(), (a, same[~ok])


def test_times_just_below_2_63_export_exactly():
    """Item 1: the latest representable times keep their value in the Perfetto clock."""
    a = 2**63 - 100
    s = Stream(1, 1, 4, {(0, 0): Lane(a, 1, [(BEGIN, 0, a + 10), (END, 0, 2**63 - 1)])})
    trace = decode(Capture(encode(s), event_names={0: "e0"}))
    r = read_trace(to_perfetto_bytes(trace))
    (d,) = r.threads()
    assert r.slices[d.uuid] == [("e0", a + 10, 2**63 - 1 - (a + 10))]
    assert max(r.snapshots) <= 2**63 - 1
