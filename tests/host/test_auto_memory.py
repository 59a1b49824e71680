"""Auto mode's host side at bounded memory: what is computed a chunk at a time, in narrow dtypes
or as read-only views gives exactly what the whole-array computation gave."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from auto_inputs import AUTO_T0, KERNELS, table_of, two_kernels

from sm_profiler.trace import auto_table as table_mod
from sm_profiler.wire import auto_file
from sm_profiler.wire import format as fmt


def mixed_records():
    """two_kernels, a per-warp launch (3 programs x 4 warps) and a wide 2-D grid."""
    recs = list(two_kernels())
    warp_kid = 1 | fmt.AUTO_PER_WARP
    for p in range(3):
        for w in range(4):
            recs.append(
                (AUTO_T0 + 5000 + 20 * p + w, 100 + w, p, 11, warp_kid | (w << 16), p, 0, 0)
            )
    for i, (x, y) in enumerate([(0, 0), (65534, 0), (3, 65535), (70000, 2)]):
        recs.append((AUTO_T0 + 9000 + 10 * i, 50, 255, 12, 2, x, y, 0))
    return recs


def _decoded(monkeypatch, chunk):
    monkeypatch.setattr(table_mod, "CHUNK_ROWS", chunk)
    t = table_of(mixed_records(), sm_count=256)
    return t, t.decode()


@pytest.mark.parametrize("chunk", [1, 3, 7])
def test_decode_a_chunk_at_a_time_is_decode_at_once(monkeypatch, chunk):
    _, whole = _decoded(monkeypatch, 1 << 18)
    _, parts = _decoded(monkeypatch, chunk)
    for name in ("events", "lanes", "unmatched"):
        a, b = getattr(whole, name), getattr(parts, name)
        assert list(a) == list(b)
        for k in a:
            assert a[k].dtype == b[k].dtype, (name, k)
            np.testing.assert_array_equal(a[k], b[k], err_msg=f"{name}.{k}")


def test_constant_columns_are_read_only_views_of_their_value(monkeypatch):
    t, tr = _decoded(monkeypatch, 4)
    n = t.num_rows
    for table, col, value, dtype in [
        (tr.events, "kind", 0, np.int8),
        (tr.lanes, "written", 2, np.int64),
        (tr.lanes, "attempted", 2, np.int64),
        (tr.lanes, "dropped", 0, np.int64),
        (tr.lanes, "initialized", True, np.bool_),
    ]:
        a = table[col]
        assert a.shape == (n,) and a.dtype == dtype and (a == value).all()
        assert not a.flags.writeable
        assert a[a == value].flags.writeable  # what a reader selects is its own array
    # Block ids: linear in the launch's grid (x + gx * y), rows in (z, y, x) order.
    wide = tr.events["capture"] == tr.events["capture"].max()
    gx = 70001
    assert tr.events["block"][wide].tolist() == [0, 65534, 70000 + gx * 2, 3 + gx * 65535]
    assert tr.events["sm"][wide].tolist() == [255] * 4


def _shuffled(trace, seed=0):
    """`trace` with its event rows in another order (what launch_table must not depend on)."""
    from dataclasses import replace

    o = np.random.default_rng(seed).permutation(len(trace))
    return replace(trace, events={k: np.asarray(v)[o] for k, v in trace.events.items()})


@pytest.mark.parametrize("chunk", [1, 2, 5, 1 << 18])
def test_launch_table_in_place_and_a_chunk_of_groups_at_a_time(monkeypatch, chunk):
    from sm_profiler.report.auto_report import format_report, kernel_reports, launch_table

    _, tr = _decoded(monkeypatch, 1 << 18)
    ref = launch_table(_shuffled(tr))  # the sorting path, whole
    text = format_report(tr, 100)
    monkeypatch.setattr(table_mod, "CHUNK_ROWS", chunk)
    got = launch_table(tr)  # rows in (capture, block) order: read in place, groups in chunks
    assert list(got) == list(ref)
    for k in ref:
        assert got[k].dtype == ref[k].dtype, k
        np.testing.assert_array_equal(got[k], ref[k], err_msg=k)
    assert kernel_reports((tr, got)) == kernel_reports((_shuffled(tr), ref))
    assert format_report(tr, 100) == format_report(_shuffled(tr), 100) == text


def test_kernel_names_of_an_auto_trace_match_its_launches_names(monkeypatch):
    from sm_profiler.report.auto_report import kernel_name_ids

    _, tr = _decoded(monkeypatch, 1 << 18)
    caps = np.array([3, 0, 3, 1])
    uniq, inv = kernel_name_ids(tr, caps)
    names = tr.table.launch_names()
    assert [str(uniq[i]) for i in inv] == [names[c] for c in caps]
    assert list(uniq) == sorted(set(uniq))


def test_active_ranges_given_in_parts_are_active_ranges_at_once():
    from sm_profiler.trace.summary import ActiveRanges, active_ranges

    rng = np.random.default_rng(1)
    n, groups = 500, 7
    group = rng.integers(0, groups, n)
    lo = (2**40 + rng.integers(0, 10**6, groups)).astype(np.int64)
    start = lo[group] + rng.integers(0, 5000, n)
    end = start + rng.integers(0, 3000, n)
    hi = np.maximum(lo + 1, np.array([end[group == g].max(initial=0) for g in range(groups)]))
    whole = active_ranges(start, end, group, lo, hi, bins=37)
    acc = ActiveRanges(lo, hi, bins=37)
    for a in range(0, n, 61):
        acc.add(start[a : a + 61], end[a : a + 61], group[a : a + 61])
    parts = acc.result()
    for k in whole:
        assert parts[k].dtype == whole[k].dtype
        np.testing.assert_array_equal(parts[k], whole[k])


@pytest.mark.parametrize("launches", [3, 40_000])  # bins per launch; bins of the whole span
def test_summary_counters_a_part_at_a_time_are_those_at_once(launches):
    from sm_profiler.trace.timeline import _summary_counters, _summary_counters_of

    rng = np.random.default_rng(2)
    n = 60_000
    cap = np.sort(rng.integers(0, launches, n))
    smi = rng.integers(0, 132, n)
    eid = cap % 5
    start = (1 << 60) + cap * 10_000 + rng.integers(0, 5_000, n)
    end = start + rng.integers(0, 4_000, n)
    k_lo = np.full(launches, 1 << 62, np.int64)
    k_hi = np.zeros(launches, np.int64)
    np.minimum.at(k_lo, cap, start)
    np.maximum.at(k_hi, cap, end)
    whole, how = _summary_counters(start, end, cap, smi, eid, k_lo, k_hi, 132)
    cuts = [0, 1, 999, 25_000, 25_001, n]

    def parts():
        return (
            (c[a:b] for c in (start, end, cap, smi, eid))
            for a, b in zip(cuts[:-1], cuts[1:], strict=True)
        )

    got, how2 = _summary_counters_of(lambda: (tuple(p) for p in parts()), k_lo, k_hi, 132)
    assert how2 == how and list(got) == list(whole)
    for k in whole:
        assert got[k].dtype == whole[k].dtype, k
        np.testing.assert_array_equal(got[k], whole[k], err_msg=k)


def _rows_wide(recs):
    """rows_of as it was computed in int64 (the narrow columns must hold the same values)."""
    start = recs["start_ns"].astype(np.int64)
    info = recs["info"].astype(np.int64)
    yz = recs["ctaid_yz"].astype(np.int64)
    return {
        "sm": recs["sm"].astype(np.int64) & 0xFFFF,
        "start_ns": start,
        "end_ns": start + ((recs["end_lo"].astype(np.int64) - (start & fmt.LOW32)) & fmt.LOW32),
        "x": recs["ctaid_x"].astype(np.int64),
        "y": yz & 0xFFFF,
        "z": yz >> 16,
        "warp": (info >> 16) & 0x7F,
        "kernel": 0 * info,  # by tag, where read_buffer is given the tags
        "grid_id": 0 * info,  # the area's number (read_buffer)
        "tag": 0 * info,  # an area's, not a record's (records.read_buffer)
        "step_tag": 0 * info,
        "per_warp": (info & fmt.AUTO_PER_WARP) != 0,
    }


def test_narrow_row_columns_hold_every_value_a_record_can_say():
    from sm_profiler.wire.auto_records import ROW_COLUMNS, rows_of

    top = 2**32 - 1
    recs = np.zeros(6, fmt.AUTO_RECORD_DTYPE)
    # Starts just below and at a wrap of the low 32 bits, ends past it; and past 2**62.
    recs["start_ns"] = [2**32 - 5, 2**32, 7 * 2**32 - 1, 2**62 + 2**32 - 1, 1, 2**63 - 2**33]
    recs["end_lo"] = [3, 10, 5, 0, top, 2**32 - 1]
    recs["sm"] = [255, 65535 | (65535 << 16), 0, 132 | (7 << 16), 65534, 1 << 16]
    recs["kernel_tag"] = [top, 1, 1, 2**31, 2**31 - 1, 7]
    recs["info"] = [top, 1, 0xFFFF | fmt.AUTO_PER_WARP | (127 << 16), 255 << 24, 2, 3]
    recs["ctaid_x"] = [top, 0, 65535, 2**31, 1, 2]
    recs["ctaid_yz"] = [top, 65535, 65535 << 16, 1 | (2 << 16), 0, 3]
    rows, ref = rows_of(recs), _rows_wide(recs)
    for k, v in ref.items():
        assert rows[k].dtype == ROW_COLUMNS[k], k
        assert rows[k].astype(np.int64).tolist() == v.astype(np.int64).tolist(), k
    assert (rows["end_ns"] >= rows["start_ns"]).all()


def test_a_table_holds_narrow_columns_and_saves_its_file_dtypes(tmp_path):
    from sm_profiler.trace.auto_table import LAUNCH_DTYPES, NARROW_DTYPES, ROW_DTYPES
    from sm_profiler.wire.capture import load

    recs = [
        (AUTO_T0, 100, 255, 2**32 - 1, 1, 2**32 - 1, 65535, 65535),
        (AUTO_T0 + 10, 2**32 + 5, 3, 2**32 - 1, 1, 0, 0, 0),
    ]
    t = table_of(recs, sm_count=256)

    def want(dtypes):
        return {k: np.dtype(NARROW_DTYPES.get(k, v)) for k, v in dtypes.items()}

    assert {k: v.dtype for k, v in t.rows.items()} == want(ROW_DTYPES)
    assert {k: v.dtype for k, v in t.launches.items()} == want(LAUNCH_DTYPES)
    assert t.rows["x"].tolist() == [0, 2**32 - 1] and t.rows["sm"].tolist() == [3, 255]
    assert t.rows["y"].tolist() == [0, 65535] and t.rows["z"].tolist() == [0, 65535]
    assert t.launches["grid_id"].tolist() == [0]  # its area's number
    assert t.launches["grid_x"].tolist() == [2**32] and t.launches["grid_z"].tolist() == [65536]
    # A duration past 2**32 ns wraps in the record's 32-bit end: 5 ns.
    assert (t.rows["end_ns"] - t.rows["start_ns"]).tolist() == [5, 100]
    # The file holds the file dtypes; read back, the table is narrow again, values the same.
    path = tmp_path / "t.npz"
    t.save(path)
    with np.load(path) as z:
        for k, v in ROW_DTYPES.items():
            assert z[f"row_{k}"].dtype == v
        for k, v in LAUNCH_DTYPES.items():
            assert z[f"launch_{k}"].dtype == v
    back = load(str(path))
    for cols, got in ((t.rows, back.rows), (t.launches, back.launches)):
        for k in cols:
            assert got[k].dtype == cols[k].dtype and got[k].tolist() == cols[k].tolist(), k
    # Decoded, the columns are as they always were.
    tr = t.decode()
    assert tr.events["capture"].dtype == np.int32 and tr.events["block"].dtype == np.int64
    assert tr.events["sm"].dtype == np.int32 and tr.events["group"].dtype == np.int32


def test_values_a_narrow_column_cannot_hold_keep_the_file_dtype():
    from sm_profiler.trace.auto_table import AutoTable, narrow

    assert narrow("x", np.array([-1, 5])).dtype == np.int64
    assert narrow("y", np.array([0, 65536])).dtype == np.int64
    assert narrow("launch", np.array([0, 2**31])).dtype == np.int64
    assert narrow("launch", np.array([0, 2**31 - 1])).dtype == np.int32
    assert narrow("start_ns", np.array([1, 2])).dtype == np.int64  # kept as it is
    t = table_of(two_kernels())
    rows = dict(t.rows, x=t.rows["x"].astype(np.int64) - 1)  # a file may say anything
    odd = AutoTable(rows, t.launches, t.kernels, t.sessions)
    assert odd.rows["x"].dtype == np.int64 and odd.rows["x"].min() == -1


def test_kernel_sums_added_a_chunk_at_a_time_are_one_bincount():
    from sm_profiler.report.auto_report import KernelSums

    rng = np.random.default_rng(3)
    n = 5_000
    t = {
        "capture": np.arange(n),
        "span_ns": rng.integers(1, 10**9, n),
        "idle_pct": rng.random(n) * 100,
        "programs": rng.integers(1, 10**6, n),
        "waves": rng.random(n) * 7,
        "tail_ns": rng.integers(-(10**6), 10**6, n),
        "imbalance": 1 + rng.random(n),
    }
    inv = rng.integers(0, 6, n)
    names = np.array([f"k{i}" for i in range(6)])
    acc = KernelSums(None, names)
    for a in range(0, n, 777):
        acc.add({k: v[a : a + 777] for k, v in t.items()}, inv[a : a + 777])
    got = {r.kernel: r for r in acc.reports()}
    count = np.bincount(inv, minlength=6)
    span = t["span_ns"].astype(np.float64)
    total = np.bincount(inv, weights=span, minlength=6)
    idle = np.bincount(inv, weights=span * t["idle_pct"], minlength=6) / np.maximum(total, 1)
    for i, name in enumerate(names.tolist()):
        r = got[name]
        assert (r.launches, r.total_ns, r.mean_ns) == (count[i], int(total[i]), total[i] / count[i])
        assert r.idle_pct == idle[i]
        for col in ("programs", "waves", "tail_ns", "imbalance"):
            want = np.bincount(inv, weights=np.asarray(t[col], np.float64), minlength=6)[i]
            assert getattr(r, col) == want / count[i], col


@pytest.mark.parametrize("chunk", [1, 4])
def test_report_parts_a_chunk_of_launches_at_a_time(monkeypatch, chunk):
    from sm_profiler.report.auto_report import launch_table, report_parts

    recs = [
        (AUTO_T0 + 1000 * i, 900 - 37 * (i % 5), i % 3, 20 + i, 1 + i % 2, 0, 0, 0)
        for i in range(20)
    ]
    t = table_of(recs + mixed_records(), sm_count=256)
    tr = t.decode()
    whole = launch_table(tr)
    ref = report_parts(tr)
    monkeypatch.setattr(table_mod, "CHUNK_ROWS", chunk)
    got = report_parts(tr)
    assert got.kernels == ref.kernels and got.programs == ref.programs == int(
        whole["programs"].sum()
    )
    for k in ref.launches:
        np.testing.assert_array_equal(got.launches[k], whole[k])
    worst = np.argsort(-whole["tail_ns"], kind="stable")[:3]
    for k in whole:
        np.testing.assert_array_equal(got.worst[k], whole[k][worst])
    np.testing.assert_array_equal(got.worst["row"], worst)


@pytest.mark.parametrize("part", [1, 2, 3, 5])
def test_writer_blocks_encoded_in_parts_are_the_same_bytes(monkeypatch, part):
    from types import SimpleNamespace

    from sm_profiler.export import perfetto

    rng = np.random.default_rng(4)
    blocks = []
    for i, m in enumerate([0, 3, 0, 4, 0, 0, 1, 6]):  # empty blocks first and inside
        times = np.sort(rng.integers(1000, 10**6, m))
        types = rng.choice([perfetto.SLICE_BEGIN, perfetto.SLICE_END, perfetto.TYPE_COUNTER], m)
        iids = rng.integers(0, 300, m).astype(np.uint64)
        vals = rng.integers(0, 70, m)
        blocks.append((b"desc%d" % i, 100 + i, times, types, iids, vals))
    w = SimpleNamespace(origin=500)
    whole = perfetto._Writer._encode_blocks(w, blocks, 900)
    monkeypatch.setattr(perfetto, "ENCODE_EVENTS", part)
    assert perfetto._Writer._encode_blocks(w, blocks, 900) == whole
    doubles = [(*b[:5], b[5] / 7) for b in blocks]
    monkeypatch.setattr(perfetto, "ENCODE_EVENTS", 1 << 16)
    whole = perfetto._Writer._encode_blocks(w, doubles, 900, double=True)
    monkeypatch.setattr(perfetto, "ENCODE_EVENTS", part)
    assert perfetto._Writer._encode_blocks(w, doubles, 900, double=True) == whole


def test_trace_written_in_parts_is_the_same_trace(monkeypatch):
    from sm_profiler.export import perfetto, to_perfetto_bytes

    recs = [(AUTO_T0 + 700 * i, 650, i % 5, 40 + i, 1 + i % 2, 0, 0, 0) for i in range(30)]
    tr = table_of(recs + mixed_records(), sm_count=256).decode()
    whole = to_perfetto_bytes(tr)
    cut = to_perfetto_bytes(tr, cut_gaps=True)  # launches with cut marks
    monkeypatch.setattr(perfetto, "ENCODE_EVENTS", 3)
    assert to_perfetto_bytes(tr) == whole
    assert to_perfetto_bytes(tr, cut_gaps=True) == cut


def test_capture_names_of_an_auto_trace_are_those_of_its_launches():
    from collections import Counter

    lonely = [(AUTO_T0 + 20_000, 100, 1, 99, 3, 0, 0, 0)]
    kernels = {**KERNELS, 3: {"name": "lonely"}}
    tr = table_of(mixed_records() + lonely, kernels=kernels, sm_count=256).decode()
    names = tr.table.launch_names()
    count = Counter(names)
    want = [f"{n} (launch {c})" if count[n] > 1 else n for c, n in enumerate(names)]
    assert [tr.capture_name(c) for c in range(len(names))] == want
    assert any("(launch" in w for w in want) and any("(launch" not in w for w in want)


def _bench_table(compact, monkeypatch, **shape):
    """benchmarks/auto_host's table of synthetic records, columns compacted or (compact=False)
    only narrowed, as before columns of one value became views."""
    from benchmarks.auto_host import _table
    from benchmarks.captures import synthetic_auto_buffer

    with monkeypatch.context() as m:
        if not compact:  # where the table's columns are made, and where its file's are read
            for module in (table_mod, auto_file):
                m.setattr(module, "compact", auto_file.narrow)
        return _table(synthetic_auto_buffer(**shape))


@pytest.mark.parametrize(
    "shape",
    [
        dict(launches=3000, programs=1, replays=True, kernels=1),
        dict(launches=300, programs=7, steps=5),
        dict(launches=1, programs=5000),
    ],
)
def test_columns_of_one_value_are_views_and_change_no_result(tmp_path, monkeypatch, shape):
    from sm_profiler.export import export
    from sm_profiler.report.auto_report import format_report

    t = _bench_table(True, monkeypatch, **shape)
    ref = _bench_table(False, monkeypatch, **shape)
    views = 0
    for cols, want in ((t.rows, ref.rows), (t.launches, ref.launches)):
        for k, v in cols.items():
            assert v.dtype == want[k].dtype and v.tolist() == want[k].tolist(), k
            if v.strides == (0,):
                views += 1
                assert not v.flags.writeable and len(set(want[k].tolist())) == 1, k
    assert views >= 4  # session, gpu, tag, per_warp at least
    # The same file, report and trace.
    t.save(tmp_path / "a.npz")
    ref.save(tmp_path / "b.npz")
    assert (tmp_path / "a.npz").read_bytes() == (tmp_path / "b.npz").read_bytes()
    assert format_report(t.decode(), 100) == format_report(ref.decode(), 100)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # a summarised trace's note
        export(t.decode(), str(tmp_path / "a.perfetto-trace"))
        export(ref.decode(), str(tmp_path / "b.perfetto-trace"))
    a = (tmp_path / "a.perfetto-trace").read_bytes()
    assert a == (tmp_path / "b.perfetto-trace").read_bytes()


def test_launch_steps_by_table_are_the_steps_mapped_one_by_one():
    from sm_profiler.trace.auto_table import _launch_steps

    rng = np.random.default_rng(5)
    tags = rng.integers(0, 1 << 16, 4000).astype(np.uint16)
    tags[:3] = [0, 65535, 1]
    sessions = [
        {},
        {"step_tags": {"1": 10, "65535": 2**40, "0": 7, "70000": 1, "-3": 4}},
        {"step_tags": {"5": -2, str(int(tags[9])): 2**31 - 1}},
        {"step_tags": "not a map"},
    ]
    for session in (
        rng.integers(0, len(sessions), len(tags)).astype(np.int16),
        auto_file.constant_column(1, np.int16, len(tags)),
        auto_file.constant_column(2, np.int16, len(tags)),
    ):
        got = _launch_steps(tags, session, sessions)
        want = _launch_steps(tags.astype(np.int64), np.asarray(session), sessions)  # one by one
        assert want.dtype == np.int64
        assert got.tolist() == want.tolist()
    assert (
        _launch_steps(tags, auto_file.constant_column(0, np.int16, len(tags)), [{}]).dtype
        == np.int32
    )
    assert _launch_steps(tags[:0], np.zeros(0, np.int16), [{}]).tolist() == []


def test_narrow_launch_columns_at_their_limits():
    from sm_profiler.trace.auto_table import compact, narrow

    for k in ("first_row", "rows", "step"):
        assert narrow(k, np.array([-1, 2**31 - 1])).dtype == np.int32
        assert narrow(k, np.array([0, 2**31])).dtype == np.int64
        assert narrow(k, np.array([-(2**31) - 1, 0])).dtype == np.int64
    for k in ("gpu", "session", "kernel"):
        assert narrow(k, np.array([-1, 32767], np.int32)).dtype == np.int16
        assert narrow(k, np.array([0, 32768], np.int32)).dtype == np.int32
    one = compact("grid_x", np.full(5, 2**32, np.int64))
    assert one.strides == (0,) and one.tolist() == [2**32] * 5 and one.dtype == np.int64
    assert compact("rows", np.array([3])).strides != (0,)  # one launch: as it is
    assert compact("start_ns", np.array([1, 2])).strides != (0,)
