"""Auto mode's records on the host (sm_profiler/wire/auto_records.py, trace/auto_table.py): a row per
program, launches as groupings of rows (apart by grid id and by CUDA graph replay, drops counted,
tags kept), and the packed trace they make. The PTX rewrite is tested in
tests/device/test_auto_rewrite.py; hostile buffers and files in test_auto_hostile.py."""

from __future__ import annotations

import numpy as np
from auto_inputs import AUTO_T0, auto_buffer, table_of, two_kernels

from sm_profiler.report.auto_report import format_report, launch_reports
from sm_profiler.trace.decode import decode
from sm_profiler.trace.timeline import build
from sm_profiler.wire import format as fmt
from sm_profiler.wire.auto_records import read_buffer


def test_records_become_one_launch_per_grid_id_and_replay():
    rows, info = read_buffer(auto_buffer(two_kernels()))
    assert info == {
        "claimed": 16,
        "capacity": 4096,
        "kept": 16,
        "dropped": 0,
        "unwritten": 0,
        "ring": False,
        "areas": 4,
    }
    assert len(rows["start_ns"]) == 16
    table = table_of(two_kernels())
    caps = list(table)  # the table is also a sequence of per-launch captures
    assert [c.kernel_name for c in caps] == ["triton_poi_fused_add_0"] * 2 + ["gemm"] * 2
    assert [c.metadata["grid"] for c in caps] == [[4, 1, 1], [4, 1, 1], [2, 1, 2], [2, 1, 2]]
    assert [c.metadata["grid_id"] for c in caps] == [0, 1, 2, 3]  # each launch its area
    assert table.launches["rows"].tolist() == [4, 4, 4, 4]
    assert [k["name"] for k in table.kernels] == ["triton_poi_fused_add_0", "gemm"]
    trace = decode(table)
    assert len(trace.events["kind"]) == 16 and trace.lanes["initialized"].all()
    # Times rebuilt across the low word's wrap; each program's start and duration exact.
    first = trace.events["capture"] == 0
    assert trace.events["start_ns"][first].tolist() == [AUTO_T0 + 10 * p for p in range(4)]
    assert (trace.duration_ns[first] == 500).all()
    r = launch_reports(trace)
    assert [x.programs for x in r] == [4, 4, 4, 4]
    assert r[0].last_sm == 0 and r[0].span_ns == 30 + 500  # programs 0 and 3 ran on SM 0


def test_drops_are_counted_exactly_in_both_modes():
    # Four launches of 4 programs and one of 1 in 10 slots: limit mode keeps the first two
    # launches and nothing after the third (which does not fit); ring mode the newest that fit.
    recs = [(AUTO_T0 + 100 * i, 50, i % 3, 1 + i // 4, 1, i % 4, 0, 0) for i in range(16)]
    recs.append((AUTO_T0 + 5000, 50, 300, 5, 1, 0, 0, 0))
    for ring, starts, kept in ((False, [0, 400], 8), (True, [800, 1200, 5000], 9)):
        table = table_of(recs, capacity=10, ring=ring, sm_count=256)
        counts = table.counts()
        assert counts["claimed"] == 17 and counts["kept"] == kept == table.num_rows
        assert counts["dropped"] == 17 - kept and counts["capacity"] == 10
        assert sorted(int(t) - AUTO_T0 for t in table.launches["start_ns"]) == starts
        assert sorted(table.launches["rows"].tolist()) == [1, 4, 4][-len(starts) :]  # whole
        trace = decode(table)
        assert trace.dropped_total == 17 - kept  # every reader sees them (info, Chrome's)
        text = format_report(trace, width=80)
        assert f"{17 - kept} of 17 program records dropped" in text
        assert ("newest" if ring else "first") in text


def test_a_ring_overwrites_the_oldest_areas_only():
    from sm_profiler.wire.auto_areas import Areas

    a = Areas(10, ring=True)
    assert [a.take(n) for n in (4, 4)] == [0, 4]
    assert a.take(3) == 0  # starts over: the launch at 0 is overwritten, the one at 4 is not
    assert a.areas()[:, :2].tolist() == [[4, 4], [0, 3]]
    assert a.take(2) == 3  # overwrites the launch at 4..8
    assert a.areas()[:, :2].tolist() == [[0, 3], [3, 2]]
    assert a.take(11) is None and a.claimed == 24 and a.kept() == 5
    lim = Areas(10, ring=False)
    assert [lim.take(n) for n in (4, 7, 1)] == [0, None, None]  # none after the first refused
    assert lim.kept() == 4 and lim.claimed == 12


def test_a_graph_replay_is_copied_into_a_launch_area_of_its_own():
    from sm_profiler.wire.auto_areas import Areas

    a = Areas(16, ring=False)
    g1, g2 = a.take_graph(3), a.take_graph(2)  # two captured launches, from the top down
    assert (g1, g2) == (13, 11) and a.top == 11
    assert a.take_graph(4) is None and a.graphs_refused == 1  # graphs hold half at most
    assert a.take(2, step=1) == 0
    replay = Areas.replay_parts([(g1, 3), (g2, 2)])
    assert replay[:3] == (11, 5, 5)  # copy 5 slots from slot 11; 5 records
    assert a.copy_of_many(replay, 1, [(0, 2, 7)]) == 2
    assert a.areas().tolist() == [[0, 2, 1, 0], [2, 2, 2, 7], [4, 3, 2, 7]]
    assert len(a.counts) == 1 and len(a.copies) == 1  # a replay: one entry, whatever it holds
    assert a.copy_of_many(replay, 1, [(0, 0, 0)]) is None  # 7 + 5 > 11: limit mode is full
    assert a.claimed == 2 + 5 + 5 and a.kept() == 7
    words = a.header_and_areas()
    rows, info = read_buffer(np.concatenate([words, np.zeros(16 * 4, np.uint64)]))
    assert info["areas"] == 3 and info["kept"] == 7 and info["unwritten"] == 7


def test_unwritten_slot_is_left_out_and_counted():
    words = auto_buffer(two_kernels()[:4])
    words[fmt.AUTO_HEADER_WORDS] += np.uint64(1 << 32)  # a fifth program, not yet written
    words[fmt.AUTO_HDR_CLAIMED] += np.uint64(1)
    rows, info = read_buffer(words)
    assert len(rows["start_ns"]) == 4 and info["unwritten"] == 1 and info["kept"] == 5


def test_packed_timeline_slots_per_sm_and_shared_launch_tracks():
    tl = build(decode(table_of(two_kernels())))
    assert tl.lane_labels is not None
    assert len(tl.lane_labels) < 16  # programs share slot tracks
    # No two programs on one slot track overlap.
    ev = tl.trace.events
    for row in np.unique(tl.ev_lane):
        m = tl.ev_lane == row
        s, e = np.sort(ev["start_ns"][m]), ev["end_ns"][m][np.argsort(ev["start_ns"][m])]
        assert (s[1:] >= e[:-1]).all()
    # The two overlapping launches of kernel 1 need two launch tracks; the replays reuse one.
    assert tl.launch_track_names == ["launches", "launches (overlap 1)"]
    assert sorted(tl.launch_track.tolist()) == [0, 0, 0, 1]


def test_packed_trace_exports(tmp_path):
    from sm_profiler.export import export

    trace = decode(table_of(two_kernels()))
    export(trace, tmp_path / "a.perfetto-trace")
    export(trace, tmp_path / "a.json")
    import json

    doc = json.loads((tmp_path / "a.json").read_text())
    names = {e["args"]["name"] for e in doc["traceEvents"] if e["name"] == "thread_name"}
    assert {"slot 0", "launches", "launches (overlap 1)"} <= names
    x = [e["name"] for e in doc["traceEvents"] if e.get("ph") == "X"]
    assert x.count("gemm") == 8  # its programs
    assert sum(n.startswith("gemm (launch") for n in x) == 2  # its launches
    assert (tmp_path / "a.perfetto-trace").stat().st_size > 0


def test_a_tag_reaches_the_launch_metadata():
    recs = [(AUTO_T0 + 10 * p, 50, p, 3, 1, p, 0, 0) for p in range(4)]
    recs += [(AUTO_T0 + 900 + 10 * p, 50, p, 4, 1, p, 0, 0) for p in range(4)]
    caps = list(table_of(recs, labels={3: (0, 5)}))
    assert [c.metadata.get("tag") for c in caps] == [5, None]
    assert {c.kernel_name for c in caps} == {"triton_poi_fused_add_0"}  # a tag names nothing


def test_the_launches_table_of_an_auto_trace_has_its_gpu_rank_step_and_programs():
    from sm_profiler.report.tables import columns

    t = columns(decode(table_of(two_kernels(), session={"rank": 3})), "launches")
    assert t["rank"].tolist() == [3, 3, 3, 3] and t["programs"].tolist() == [4, 4, 4, 4]
    assert t["gpu"].tolist() == [0] * 4 and t["step"].tolist() == [-1] * 4
    names, labels = t["kernel"]
    assert [labels[i] for i in names] == ["triton_poi_fused_add_0"] * 2 + ["gemm"] * 2
