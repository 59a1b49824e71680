"""Perfetto export: read the file back with Perfetto's own protos and check what it means.

`read_trace` replays the file the way trace processor does: incremental clock 64 reset by each
ClockSnapshot, TracePacketDefaults giving the track, events sorted by (timestamp, file order),
SLICE_END closing the innermost open slice of its track.
"""

from __future__ import annotations

import os
from collections import Counter

import numpy as np
import pytest
from captures import EPOCH_T0, T0, basic_capture, capture
from reference_encoder import BEGIN, END, INSTANT, Lane, Stream, encode
from trace_readers import expected_slices, read_trace

from sm_profiler.errors import CaptureError, ConfigError
from sm_profiler.export import export, to_perfetto_bytes
from sm_profiler.export import perfetto as pf
from sm_profiler.trace.decode import decode
from sm_profiler.trace.timeline import order_rows
from sm_profiler.wire import format as fmt
from sm_profiler.wire.capture import Capture

pb2 = pytest.importorskip("perfetto.protos.perfetto.trace.perfetto_trace_pb2")


def test_processes_threads_and_slices_match_the_trace():
    trace = decode(basic_capture(groups={0: "producer"}))
    r = read_trace(to_perfetto_bytes(trace))
    procs = r.processes()
    assert [d.name for d in procs] == ["SM 3", "SM 17"]  # rank order = SM order
    assert all(d.child_ordering == pf.EXPLICIT for d in [*procs, r.tracks[pf.ROOT_UUID]])
    assert not any(d.HasField("process") or d.HasField("thread") for d in r.tracks.values())
    threads = r.threads()
    by_rank = [d.name for d in sorted(threads, key=lambda d: d.sibling_order_rank)]
    assert by_rank == ["block 0 · producer", "block 0 · group 1", "block 1 · producer"]
    sm17 = next(d.uuid for d in procs if d.name == "SM 17")
    assert r.thread("block 0 · group 1").parent_uuid == sm17
    for lane, name in [
        (0, "block 0 · producer"),
        (1, "block 0 · group 1"),
        (2, "block 1 · producer"),
    ]:
        got = Counter(r.slices[r.thread(name).uuid])
        assert got == expected_slices(trace, lane)
    assert r.instants[r.thread("block 0 · producer").uuid] == [("store", T0 + 35)]
    assert r.slices[r.thread("block 1 · producer").uuid] == [("load", T0 + 60, 69940)]


def test_snapshots_never_go_back_and_events_are_small():
    trace = decode(basic_capture())
    data = to_perfetto_bytes(trace)
    r = read_trace(data)
    assert r.snapshots == sorted(r.snapshots)
    # A begin packet: 0A len 40 dt 50 01 5A 04 48 01 50 iid -> 12 bytes for a 1-byte delta.
    t = pb2.Trace()
    t.ParseFromString(data)
    sizes = [p.ByteSize() + 2 for p in t.packet if p.HasField("track_event")]
    assert max(sizes) <= 16


def test_resident_blocks_counter_steps_with_block_arrivals_and_departures():
    trace = decode(basic_capture())
    r = read_trace(to_perfetto_bytes(trace))
    ctr = r.occupancy()  # each SM's track is its 'resident blocks' counter
    assert all(d.HasField("counter") for d in r.processes())
    # SM 17 holds block 0 from its first anchor to its last end; SM 3 holds block 1 later.
    assert ctr["SM 17"] == [(T0, 1), (T0 + 400, 0)]
    assert ctr["SM 3"] == [(T0, 0), (T0 + 50, 1), (T0 + 70000, 0)]


def test_two_blocks_on_one_sm_overlap_in_the_counter():
    cap = capture(
        {
            (0, 0): (T0, 5, [(BEGIN, 0, 10), (END, 0, 100)]),
            (1, 0): (T0 + 50, 5, [(BEGIN, 0, 60), (END, 0, 100)]),
        },
        num_groups=1,
    )
    r = read_trace(to_perfetto_bytes(decode(cap)))
    # Both leave at T0+100: one step down by two, not two samples at one timestamp.
    assert r.occupancy()["SM 5"] == [(T0, 1), (T0 + 50, 2), (T0 + 100, 0)]


def test_equal_times_nest_correctly_without_overlap_tracks():
    cap = capture(
        {
            (0, 0): (
                T0,
                1,
                [
                    (BEGIN, 0, 10),
                    (BEGIN, 1, 20),
                    (END, 1, 30),
                    (END, 0, 30),  # equal ends
                    (BEGIN, 0, 30),
                    (END, 0, 40),  # adjacent to the previous one
                    (BEGIN, 1, 40),
                    (BEGIN, 2, 40),
                    (END, 2, 40),
                    (END, 1, 40),  # zero-length, nested
                    (BEGIN, 0, 50),
                    (BEGIN, 1, 50),
                    (END, 1, 60),
                    (END, 0, 70),  # equal begins
                ],
            ),
        },
        num_blocks=1,
        num_groups=1,
    )
    trace = decode(cap)
    r = read_trace(to_perfetto_bytes(trace))
    assert [d.name for d in r.threads()] == ["block 0"]
    assert Counter(r.slices[r.thread("block 0").uuid]) == expected_slices(trace, 0)


def test_partial_overlap_goes_to_an_overlap_thread():
    cap = capture(
        {
            (0, 0): (
                T0,
                1,
                [
                    (BEGIN, 0, 10),
                    (BEGIN, 1, 20),
                    (END, 0, 30),
                    (END, 1, 40),
                    (BEGIN, 2, 50),
                    (END, 2, 60),
                ],
            )
        },
        num_blocks=1,
        num_groups=1,
    )
    trace = decode(cap)
    assert len(trace.ranges["start_ns"]) == 3
    r = read_trace(to_perfetto_bytes(trace))
    main, over = r.thread("block 0"), r.thread("block 0 (overlap)")
    assert sorted(r.slices[main.uuid]) == [("load", T0 + 10, 20), ("store", T0 + 50, 10)]
    assert r.slices[over.uuid] == [("mma", T0 + 20, 20)]
    assert over.parent_uuid == main.uuid and over.uuid != main.uuid


def test_overlap_levels_separate_a_staircase():
    # Three ranges of three ids, each overlapping the next: no level may hold two that overlap.
    start = np.array([0, 5, 8, 100], np.int64)
    end = np.array([10, 15, 18, 110], np.int64)
    lane = np.zeros(4, np.int64)
    lv = order_rows(start, end, np.ones(4, bool), lane, np.zeros(1, np.int64), np.arange(4))[
        "level"
    ]
    for a in range(4):
        for b in range(a + 1, 4):
            if lv[a] == lv[b]:
                nested = start[a] <= start[b] and end[b] <= end[a]
                assert nested or end[a] <= start[b], (a, b, lv)
    assert lv[3] == 0


def test_unmatched_and_dropped_are_visible():
    cap = capture(
        {
            (0, 0): (
                T0,
                2,
                [
                    (END, 1, 5),
                    (BEGIN, 0, 10),
                    (END, 0, 20),
                    (BEGIN, 2, 30),
                    (INSTANT, 1, 31),
                    (INSTANT, 1, 32),
                ],
            )
        },
        num_blocks=1,
        num_groups=1,
        capacity=5,
    )
    trace = decode(cap)
    assert trace.dropped_total == 1
    r = read_trace(to_perfetto_bytes(trace))
    inst = r.instants[r.thread("block 0").uuid]
    assert ("unmatched end: mma", T0 + 5) in inst
    assert ("unmatched begin: store", T0 + 30) in inst
    assert ("1 records dropped (lane full)", T0 + 31) in inst
    assert ("mma", T0 + 31) in inst


def test_captures_share_one_time_axis_but_never_one_thread():
    a = basic_capture(name="gemm")
    b = capture({(0, 0): (T0 + 1000, 17, [(BEGIN, 0, 1010), (END, 0, 1020)])}, name="softmax")
    trace = decode([a, b])
    r = read_trace(to_perfetto_bytes(trace))
    one, two = r.thread("gemm · block 0 · group 0"), r.thread("softmax · block 0 · group 0")
    assert one.uuid != two.uuid and one.parent_uuid == two.parent_uuid
    assert Counter(r.slices[one.uuid]) == expected_slices(trace, 0, capture=0)
    assert r.slices[two.uuid] == [("load", T0 + 1010, 10)]
    assert r.launches() == {
        "gemm": [("gemm", T0, 70000)],
        "softmax": [("softmax", T0 + 1000, 20)],
    }


def test_launches_of_one_kernel_are_told_apart_by_their_launch():
    a = basic_capture(name="gemm")
    b = capture({(0, 0): (T0 + 1000, 17, [(BEGIN, 0, 1010), (END, 0, 1020)])}, name="softmax")
    c = capture({(0, 0): (T0 + 2000, 17, [(BEGIN, 0, 2010), (END, 0, 2030)])}, name="gemm")
    trace = decode([a, b, c])
    assert [trace.capture_name(i) for i in range(3)] == [
        "gemm (launch 0)",
        "softmax",
        "gemm (launch 2)",
    ]
    r = read_trace(to_perfetto_bytes(trace))
    names = {d.name for d in r.threads()}
    assert {
        "gemm (launch 0) · block 0 · group 0",
        "softmax · block 0 · group 0",
        "gemm (launch 2) · block 0 · group 0",
    } <= names
    assert not [n for n in names if "#" in n]
    assert r.slices[r.thread("gemm (launch 2) · block 0 · group 0").uuid] == [
        ("load", T0 + 2010, 20)
    ]


def test_emulated_traces_say_so():
    trace = decode(basic_capture(flags=fmt.FLAG_EMULATED))
    r = read_trace(to_perfetto_bytes(trace))
    assert all(d.name.endswith("(emulated)") for d in r.processes())
    plain = read_trace(to_perfetto_bytes(decode(basic_capture())))
    assert not any("emulated" in d.name for d in plain.processes())


def test_chunks_give_the_same_trace(monkeypatch):
    rng = np.random.default_rng(1)
    lanes = {}
    for blk in range(6):
        recs, t, depth = [], 0, []
        for _ in range(40):
            t += int(rng.integers(0, 3))  # many equal times
            if depth and rng.random() < 0.45:
                recs.append((END, depth.pop(), t))
            elif rng.random() < 0.2:
                recs.append((INSTANT, 2, t))
            else:
                depth.append(int(rng.integers(0, 2)))
                recs.append((BEGIN, depth[-1], t))
        recs += [(END, e, t + 1) for e in reversed(depth)]
        lanes[(blk, 0)] = (T0 + blk, blk % 3, recs)
    trace = decode(capture(lanes, num_blocks=6, num_groups=1, capacity=64))
    whole = read_trace(to_perfetto_bytes(trace))
    monkeypatch.setattr(pf, "CHUNK_ROWS", 7)
    parts = read_trace(to_perfetto_bytes(trace))
    assert len(parts.snapshots) == len(whole.snapshots) and parts.snapshots == sorted(
        parts.snapshots
    )
    for blk in range(6):
        name = f"block {blk}"
        exp = expected_slices(trace, blk)
        assert Counter(whole.slices[whole.thread(name).uuid]) == exp
        assert Counter(parts.slices[parts.thread(name).uuid]) == exp


def test_export_picks_the_format_and_checks_the_path(tmp_path):
    trace = decode(basic_capture())
    for ext in (".perfetto-trace", ".pftrace"):
        p = tmp_path / f"t{ext}"
        export(trace, p)
        assert p.read_bytes() == to_perfetto_bytes(trace)
    p = tmp_path / "t.bin"
    export(trace, p, format="perfetto")
    assert p.read_bytes() == to_perfetto_bytes(trace)
    with pytest.raises(ConfigError, match=r"\.perfetto-trace"):
        export(trace, tmp_path / "t.txt")
    with pytest.raises(ConfigError):
        export(trace, tmp_path / "t.json", format="svg")
    with pytest.raises(CaptureError):
        export(trace, tmp_path / "missing" / "t.pftrace")
    existing = tmp_path / "dir.pftrace"
    existing.mkdir()
    with pytest.raises(CaptureError):
        export(trace, existing)
    assert os.path.isdir(existing)


def test_empty_trace_exports():
    trace = decode(capture({}))
    r = read_trace(to_perfetto_bytes(trace))
    assert r.threads() == [] and r.processes() == []


# -- hostile input (issue 23, item 18): a wide fan-out of overlapping ranges ----------------------


def _fanout_capture(width: int = 4095, lanes: int = 1) -> Capture:
    s = Stream(lanes, 1, 2 * width)
    recs = [(BEGIN, i, 10 + i) for i in range(width)] + [
        (END, i, 10 + width + i) for i in range(width)
    ]
    for b in range(lanes):
        s.lanes[(b, 0)] = Lane(EPOCH_T0, b, [(k, e, EPOCH_T0 + t) for k, e, t in recs])
    return Capture(encode(s), {i: f"e{i}" for i in range(width)})


def test_18_fanout_export_is_the_per_track_reference_and_costs_little_per_track(monkeypatch):
    from trace_readers import read_trace

    from sm_profiler.export import perfetto as pf

    trace = decode(_fanout_capture())
    calls = [0]
    real_fb = pf._fb

    def counted(field, payload):
        calls[0] += 1
        return real_fb(field, payload)

    monkeypatch.setattr(pf, "_fb", counted)
    data = to_perfetto_bytes(trace)
    assert calls[0] < 3 * 4095, calls[0]  # 2 per interned name; was 9 more per overlap track
    monkeypatch.setattr(pf, "_fb", real_fb)

    # The same bytes as the one-header-at-a-time path.
    def reference(self, lanes, bkeys, ref):
        return [
            self._lane_header(int(lanes[k // pf.LEVELS]), k % pf.LEVELS, int(ref[k // pf.LEVELS]))
            for k in bkeys.tolist()
        ]

    monkeypatch.setattr(pf._Writer, "_lane_headers", reference)
    assert to_perfetto_bytes(trace) == data
    r = read_trace(data)
    tracks = [d for d in r.threads()]
    assert len(tracks) == 4095
    assert sorted(s[0] for v in r.slices.values() for s in v if s[0].startswith("e")) == sorted(
        f"e{i}" for i in range(4095)
    )
