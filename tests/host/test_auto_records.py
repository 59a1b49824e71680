"""Auto mode's records on the host (sm_profiler/auto_mode/records.py, table.py): a row per
program, launches as groupings of rows (apart by grid id and by CUDA graph replay, drops counted,
tags kept), and the packed trace they make. The PTX rewrite is tested in
tests/device/test_auto_rewrite.py; hostile buffers and files in test_auto_hostile.py."""

from __future__ import annotations

import numpy as np
import pytest
from auto_inputs import AUTO_T0, auto_buffer, table_of, two_kernels

from sm_profiler import format as fmt
from sm_profiler.auto_mode.records import read_buffer
from sm_profiler.auto_mode.report import format_report, launch_reports
from sm_profiler.decode import decode
from sm_profiler.errors import ConfigError
from sm_profiler.timeline import build


def test_records_become_one_launch_per_grid_id_and_replay():
    rows, info = read_buffer(auto_buffer(two_kernels()))
    assert info == {
        "claimed": 16,
        "capacity": 4096,
        "kept": 16,
        "dropped": 0,
        "unwritten": 0,
        "ring": False,
        "regions": 4,
        "region_size": 1024,
    }
    assert len(rows["start_ns"]) == 16
    table = table_of(two_kernels())
    caps = list(table)  # the table is also a sequence of per-launch captures
    assert [c.kernel_name for c in caps] == ["triton_poi_fused_add_0"] * 2 + ["gemm"] * 2
    assert [c.metadata["grid"] for c in caps] == [[4, 1, 1], [4, 1, 1], [2, 1, 2], [2, 1, 2]]
    assert [c.metadata["grid_id"] for c in caps] == [5, 6, 9, 9]  # replays share the grid id
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
    # Three launches of 4 programs, all on SM 0, and one program on SM 300 (past the last
    # region: it shares region 255's counter); 256 regions of 2 records each.
    recs = [(AUTO_T0 + 100 * i, 50, 0, 1 + i // 4, 1, i % 4, 0, 0) for i in range(12)]
    recs.append((AUTO_T0 + 5000, 50, 300, 4, 1, 0, 0, 0))
    for ring, grid_ids in ((False, [1, 4]), (True, [3, 4])):
        table = table_of(recs, capacity=512, ring=ring, sm_count=256)
        counts = table.counts()
        assert counts["claimed"] == 13 and counts["dropped"] == 10 and table.num_rows == 3
        assert counts["kept"] == 3 and counts["capacity"] == 512
        assert sorted({int(g) for g in table.launches["grid_id"]}) == grid_ids
        trace = decode(table)
        assert trace.dropped_total == 10  # every reader sees them (info, Chrome's metadata)
        text = format_report(trace, width=80)
        assert "10 of 13 program records dropped" in text
        assert ("newest" if ring else "first") in text
    with pytest.raises(ConfigError, match="capacity"):
        fmt.auto_header(0, False, 4)


def test_unwritten_slot_is_left_out_and_counted():
    words = auto_buffer(two_kernels()[:4])
    words[fmt.AUTO_HEADER_WORDS] += 1  # SM 0 claimed one more, not yet written
    rows, info = read_buffer(words)
    assert len(rows["start_ns"]) == 4 and info["unwritten"] == 1


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
    recs = [(AUTO_T0 + 10 * p, 50, p, 3, 1 | (5 << 24), p, 0, 0) for p in range(4)]
    recs += [(AUTO_T0 + 900 + 10 * p, 50, p, 4, 1, p, 0, 0) for p in range(4)]
    caps = list(table_of(recs))
    assert [c.metadata.get("tag") for c in caps] == [5, None]
    assert {c.kernel_name for c in caps} == {"triton_poi_fused_add_0"}  # a tag names nothing


def test_the_launches_table_of_an_auto_trace_has_its_gpu_rank_step_and_programs():
    from sm_profiler.tables import columns

    t = columns(decode(table_of(two_kernels(), session={"rank": 3})), "launches")
    assert t["rank"].tolist() == [3, 3, 3, 3] and t["programs"].tolist() == [4, 4, 4, 4]
    assert t["gpu"].tolist() == [0] * 4 and t["step"].tolist() == [-1] * 4
    names, labels = t["kernel"]
    assert [labels[i] for i in names] == ["triton_poi_fused_add_0"] * 2 + ["gemm"] * 2
