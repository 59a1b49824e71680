"""Hostile input, round 3 (issue 31): auto mode's buffers, tables and files. Each test names the
item of the issue it keeps fixed; each failed on the main of 2026-11-25 (captures per launch)."""

from __future__ import annotations

import json
import tracemalloc
import zipfile

import numpy as np
import pytest
from auto_inputs import AUTO_T0, KERNELS, auto_buffer, table_of, two_kernels

from sm_profiler.errors import ConfigError, FormatError
from sm_profiler.export import to_chrome_json
from sm_profiler.report.auto_report import format_report, launch_table
from sm_profiler.trace.auto_table import AutoTable
from sm_profiler.trace.decode import decode
from sm_profiler.trace.launches import LaunchList
from sm_profiler.wire import format as fmt
from sm_profiler.wire.auto_records import read_buffer
from sm_profiler.wire.capture import load


def _replays(n, programs, gap_ns=400, dur_ns=110, t0=AUTO_T0, kid=2, grid_id=9):
    """n replays of a CUDA graph node (one grid id) of `programs` programs, program p on SM p."""
    return [
        (t0 + r * gap_ns + 3 * p, dur_ns, p, grid_id, kid, p, 0, 0)
        for r in range(n)
        for p in range(programs)
    ]


@pytest.mark.parametrize("ring", [False, True])
def test_1_graph_replays_stay_apart_after_drops(ring):
    # SM 0 also runs another kernel's programs, so its region fills (or wraps) at another
    # point than SM 1's: counting the k-th record of each program as the k-th replay then pairs
    # programs of different replays (a launch of 110 ns replays spanning microseconds).
    recs = [(AUTO_T0 - 10_000 + 50 * i, 20, 0, 3, 1, i, 0, 0) for i in range(5)]
    recs += _replays(40, 2)
    table = table_of(recs, capacity=64, ring=ring, sm_count=2)
    assert table.counts()["dropped"] > 0
    L = table.launches
    replay = L["kernel"] == 1  # table index of kernel id 2
    assert replay.any()
    spans = (L["end_ns"] - L["start_ns"])[replay]
    assert spans.max() <= 110 + 3  # one replay each: never two replays' programs together
    assert (L["rows"][replay] <= 2).all()
    # Every kept program record is in exactly one launch.
    assert int(L["rows"].sum()) == table.num_rows == table.counts()["kept"]


def test_2_a_huge_grid_costs_its_records_not_its_grid():
    x = (1 << 24) + 5
    recs = [(AUTO_T0, 100, 0, 1, 1, x, 0, 0), (AUTO_T0 + 10, 100, 1, 1, 1, 3, 0, 0)]
    table = table_of(recs)
    assert table.launches["grid_x"].tolist() == [x + 1]
    trace = decode(table)
    assert sorted(trace.events["block"].tolist()) == [3, x]
    cap = table[0]  # as a capture: one lane per recorded program
    assert cap.words.nbytes < 1024
    assert sorted(decode(cap).events["start_ns"].tolist()) == [AUTO_T0, AUTO_T0 + 10]


def test_3_the_largest_program_ids_allocate_nothing_by_them():
    recs = [(AUTO_T0, 100, 0, 1, 1, 2**31 - 1, 65535, 65535), (AUTO_T0 + 5, 90, 1, 1, 1, 0, 0, 0)]
    tracemalloc.start()
    table = table_of(recs)
    trace = decode(table)
    text = format_report(trace, width=80)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 64 << 20
    assert table.launches["grid_y"].tolist() == [65536]
    assert sorted(trace.events["block"].tolist()) == [0, 1]  # numbered by rank: too large
    assert "2 programs" in text
    to_chrome_json(trace)


def _many_kernels(launches, kernels):
    recs = [
        (AUTO_T0 + 1000 * i, 100, i % 4, 100 + i, 1 + i % kernels, 0, 0, 0) for i in range(launches)
    ]
    names = {
        k: {"name": f"triton_poi_fused_{k}_kernel_with_a_long_name", "num_warps": 4}
        for k in range(1, kernels + 1)
    }
    return table_of(recs, kernels=names, capacity=1 << 16)


def test_4_5_kernel_names_are_stored_once_and_the_file_reads_back(tmp_path):
    table = _many_kernels(1000, 800)
    path = tmp_path / "auto.npz"
    table.save(path)
    assert path.stat().st_size < 1 << 20  # 82 MiB before: every launch carried every name
    with zipfile.ZipFile(path) as z:
        meta = json.loads(np.load(z.open("meta.npy")).tobytes())
    assert len(meta["kernels"]) == 800
    back = load(path)
    assert isinstance(back, AutoTable) and back.num_launches == 1000
    assert back.kernel_names() == table.kernel_names()
    for k in ("start_ns", "end_ns", "sm", "x"):
        assert (back.rows[k] == table.rows[k]).all()
    t = decode(back)
    assert isinstance(t.kernels, LaunchList) and len(t.event_names) == 800
    assert t.kernels[999].name == "triton_poi_fused_200_kernel_with_a_long_name"


def test_6_many_single_program_replays_cost_memory_linear_in_records():
    n = 20_000
    recs = _replays(n, 1, gap_ns=300)
    table = table_of(recs, capacity=1 << 16, sm_count=1)
    assert table.num_launches == n
    rows_bytes = sum(v.nbytes for v in table.rows.values())
    tracemalloc.start()
    trace = decode(table)
    lt = launch_table(trace)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert len(lt["capture"]) == n and (lt["programs"] == 1).all()
    assert isinstance(trace.kernels, LaunchList)  # no KernelInfo per launch held
    assert peak < 30 * rows_bytes, (peak, rows_bytes)


def test_7_waves_count_programs_not_warps():
    # 32 programs of 4 warps on 4 SMs, one program resident per SM at a time: 8 waves.
    recs = []
    for p in range(32):
        sm, wave = p % 4, p // 4
        for w in range(4):
            info = 1 | (w << 16) | fmt.AUTO_PER_WARP
            recs.append((AUTO_T0 + 1000 * wave + w, 900 - w, sm, 7, info, p, 0, 0))
    table = table_of(recs)
    assert table.launches["per_warp"].all()
    lt = launch_table(decode(table))
    assert lt["programs"].tolist() == [32]
    assert lt["waves"].tolist() == [8.0]


def test_10_drops_reach_every_reader(tmp_path, capsys):
    # Limit mode, 6 slots: launches of 3, 2 and 4 programs; the third does not fit and is
    # dropped whole, and so is every launch after it (the kept records are the run's first).
    recs = [(AUTO_T0 + 100 * p, 50, p % 2, 1, 1, p, 0, 0) for p in range(3)]
    recs += [(AUTO_T0 + 1000 + 100 * p, 50, 0, 2, 1, p, 0, 0) for p in range(2)]
    recs += [(AUTO_T0 + 2000 + 100 * p, 50, 1, 3, 1, p, 0, 0) for p in range(4)]
    recs += [(AUTO_T0 + 3000, 50, 1, 4, 1, 0, 0, 0)]
    table = table_of(recs, capacity=6)
    assert table.counts() == {"claimed": 10, "kept": 5, "dropped": 5, "unwritten": 0, "capacity": 6}
    trace = decode(table)
    assert trace.dropped_total == 5
    assert to_chrome_json(trace)["otherData"]["dropped_records"] == 5
    assert [k.num_blocks for k in trace.kernels] == [3, 2]  # whole launches, exact grids
    path = tmp_path / "auto.npz"
    table.save(path)
    from sm_profiler.cli import main

    assert main(["info", str(path)]) == 0
    assert "5 dropped" in capsys.readouterr().out


@pytest.mark.parametrize(
    "words, why",
    [
        (np.array([object()] * 2000, dtype=object), "dtype object"),
        (None, "numpy array or bytes, got NoneType"),
        (np.zeros(2001, np.int32), "not whole words"),
        (b"\0" * 8001, "not whole words"),
        (np.zeros(2000, np.float64), "dtype float64"),
    ],
)
def test_11_what_is_not_a_buffer_is_refused_with_the_fix(words, why):
    with pytest.raises(FormatError, match=why) as e:
        read_buffer(words)
    assert "pass the buffer's words" in str(e.value)


def test_11_strided_and_int32_views_of_a_buffer_read_alike():
    words = auto_buffer(two_kernels())
    wide = np.zeros((len(words), 2), np.uint64)
    wide[:, 0] = words
    a, _ = read_buffer(words)
    b, _ = read_buffer(wide[:, 0])  # a strided column
    c, _ = read_buffer(words.view(np.int32))
    d, _ = read_buffer(words.tobytes())
    for other in (b, c, d):
        assert (other["start_ns"] == a["start_ns"]).all()


@pytest.mark.parametrize(
    "area, why",
    [
        ((0, 0), r"holds slots 0\.\.0 of"),  # an empty area
        ((4090, 10), r"holds slots 4,090\.\.4,100 of 4,096"),  # past the slots
        ((2, 3), "areas overlap"),
    ],
)
def test_12_impossible_areas_are_refused(area, why):
    words = auto_buffer(two_kernels())
    d = fmt.AUTO_HEADER_WORDS + fmt.AUTO_AREA_WORDS  # the second area's descriptor
    words[d] = np.uint64(area[0] | (area[1] << 32))
    with pytest.raises(FormatError, match=why):
        read_buffer(words)


def test_12_an_area_with_unknown_bits_and_a_short_claim_are_refused():
    words = auto_buffer(two_kernels())
    words[fmt.AUTO_HEADER_WORDS + 1] = np.uint64(1 << 30)
    with pytest.raises(FormatError, match="unknown bits"):
        read_buffer(words)
    words = auto_buffer(two_kernels())
    words[fmt.AUTO_HDR_CLAIMED] = np.uint64(3)
    with pytest.raises(FormatError, match="claims 3 records but its areas keep 16"):
        read_buffer(words)


@pytest.mark.parametrize(
    "word, value, why",
    [
        (5, 1, "reserved header words"),
        (fmt.AUTO_HDR_SLOTS, 4096 | (1 << 33), "unknown bits"),
        (fmt.AUTO_HDR_SLOTS, 0, "names 0 record slots"),
        (fmt.AUTO_HDR_AREAS, 5000, "names 4,096 record slots and 5,000 areas"),
        (fmt.AUTO_HDR_AREAS, 5, "header needs"),
        (0, fmt.AUTO_MAGIC | (3 << 32), "version 3"),
    ],
)
def test_13_impossible_headers_are_refused(word, value, why):
    words = auto_buffer(two_kernels())
    words[word] = np.uint64(value)
    with pytest.raises(FormatError, match=why):
        read_buffer(words)


def test_14_the_header_and_area_builders_refuse_with_config_errors():
    for bad in (0, 2**32, "many", True):
        with pytest.raises(ConfigError, match="capacity"):
            fmt.auto_header(bad, False, 0, 0)
    for tag in (-1, 256, 300, 1.5):
        with pytest.raises(ConfigError, match=r"tag must be an int in 0\.\.255"):
            fmt.auto_area(0, 1, tag=tag)
    # Step tags have 48 bits since issue 42 (16 before, reused after 65,535 recorded steps).
    with pytest.raises(
        ConfigError,
        match=r"step tag must be an int in 0\.\.281,474,976,710,655|step tag must be an int in 0\.\.281474976710655",
    ):
        fmt.auto_area(0, 1, step=2**48)
    assert fmt.auto_area(7, 3, step=65535, tag=255) == (7 | 3 << 32, 65535 | 255 << 16)
    assert fmt.auto_area(7, 3, step=65536, tag=1) == (7 | 3 << 32, 1 << 16 | 1 << 32)


@pytest.mark.parametrize("sm_count", ["many", [1, 2], float("inf"), None, -3])
def test_8_9_bad_session_metadata_prints_a_report_not_a_traceback(sm_count):
    table = table_of(two_kernels())
    table.sessions[0]["sm_count"] = sm_count
    table.sessions[0]["device_name"] = "evil\x1b[31mGPU\n"
    table.sessions[0]["claimed"] = "lots"
    text = format_report(decode(table), width=80)
    assert "\x1b" not in text and "evil\\x1b[31mGPU\\n" in text
    assert "(? SMs)" in " ".join(text.split())


def test_8_an_old_auto_file_with_bad_metadata_still_reports():
    from sm_profiler.report.auto_report import format_report as fr

    caps = list(table_of(two_kernels()))
    for c in caps:
        c.metadata["auto_session"] = ["not", "a", "table"]
        c.metadata["sm_count"] = "many"
    text = fr(decode(caps), width=80)
    assert "4 launches of 2 kernels" in text and "(? SMs)" in text


def test_a_table_per_rank_concatenates_in_time_order():
    a = table_of(two_kernels())
    recs = [(AUTO_T0 + 500 + 10 * p, 50, p, 77, 1, p, 0, 0) for p in range(3)]
    b = table_of(recs)
    b.sessions[0]["rank"] = 1
    both = AutoTable.concat([a, b])
    assert both.num_launches == 5 and both.num_rows == 19
    assert (np.diff(both.launches["start_ns"]) >= 0).all()
    assert both.launches["session"].tolist().count(1) == 1
    names = decode(both).table.launch_names()
    # Kernel 1 of both ranks is one kernel: one entry, named once.
    assert names.count("triton_poi_fused_add_0") == 3 and len(both.kernels) == 2
    assert KERNELS[1]["name"] in both.kernel_names()
