"""Hostile input, round 2 (issue 23): launch slots, ring buffers, merge, query and the C++
writer. One regression test (or a few) per item of the issue, named test_<item>_...; the fuzz
tests of v4 slots, ring lanes and merge inputs are in test_capture_fuzz.py."""

from __future__ import annotations

import json

import numpy as np
import pytest
from reference_encoder import BEGIN, END, INSTANT, Lane, Stream, encode
from repo_paths import CUDA_SOURCES

from sm_profiler import format as fmt
from sm_profiler.capture import Capture
from sm_profiler.decode import decode
from sm_profiler.errors import FormatError
from sm_profiler.export import to_chrome_json, to_perfetto_bytes

T0 = 1_700_000_000_000_000_000


def ring_words(records_per_lane: list[list], capacity: int = 4, closed=None) -> np.ndarray:
    s = Stream(1, len(records_per_lane), capacity, flags=fmt.FLAG_RING)
    for g, recs in enumerate(records_per_lane):
        s.lanes[(0, g)] = Lane(T0, 1, [(k, e, T0 + t) for k, e, t in recs],
                               closed=True if closed is None else closed[g])  # fmt: skip
    return encode(s)


def lane_base(g: int, capacity: int = 4) -> int:
    return fmt.HEADER_WORDS + g * (fmt.LANE_HEADER_WORDS + capacity)


# -- 1, 2: ring lanes hold what their mark says ------------------------------------------------


def test_1_closed_ring_lane_holding_fewer_records_than_its_mark_is_refused():
    recs = [(INSTANT, 1, 10 + i) for i in range(4)]
    w = ring_words([recs])
    base = lane_base(0)
    assert decode(w).lanes["written"].tolist() == [4]
    # The mark says 2 records, but 4 slots hold records (2 left by an earlier launch).
    w[base + fmt.LANE_SM_ATTEMPTED] = np.uint64(1 | ((fmt.RING_MARK | 2) << 32))
    with pytest.raises(FormatError, match="ring mark counts 2 records.*exactly 2.*4 slots"):
        decode(w)
    # ... and the other way: a mark for 4 over 2 records.
    w2 = ring_words([recs[:2]])
    w2[base + fmt.LANE_SM_ATTEMPTED] = np.uint64(1 | ((fmt.RING_MARK | 4) << 32))
    with pytest.raises(FormatError, match="ring mark counts 4"):
        decode(w2)


def test_2_wrapped_ring_lane_with_an_empty_newest_slot_is_refused():
    recs = [(INSTANT, 1, 10 + i) for i in range(6)]  # 6 over capacity 4: wrapped
    w = ring_words([recs])
    assert decode(w).lanes["attempted"].tolist() == [6]
    newest = lane_base(0) + fmt.LANE_HEADER_WORDS + (6 - 1) % 4
    w[newest] = 0
    with pytest.raises(FormatError, match="ring mark counts 6 records.*all 4 slots"):
        decode(w)


# -- 3: drop labels follow what the lane did, the same in both writers -------------------------


def _ring_trace_with_both_kinds_of_drops():
    # Lane 0 wrapped (RING ops): its 2 oldest records were overwritten. Lane 1 was written by
    # ops compiled without RING in the same ring buffer: a direct lane that dropped its 2 newest.
    w = ring_words([[(INSTANT, 1, 10 + i) for i in range(6)], []], capacity=4)
    base = lane_base(1)
    w[base + fmt.LANE_ANCHOR] = np.uint64(T0)
    for i in range(4):
        w[base + fmt.LANE_HEADER_WORDS + i] = np.uint64(fmt.make_record(T0 + 100 + i, 2,
                                                                        INSTANT))  # fmt: skip
    w[base + fmt.LANE_SM_ATTEMPTED] = np.uint64(fmt.lane_word1(1, 6, 4))
    trace = decode(Capture(w, {1: "a", 2: "b"}))
    assert trace.lanes["dropped"].tolist() == [2, 2]
    assert trace.kernels[0].ring_wrapped_lanes == [0]
    return trace


def test_3_drop_labels_follow_the_lane_in_chrome_json():
    trace = _ring_trace_with_both_kinds_of_drops()
    doc = to_chrome_json(trace)
    t0 = doc["otherData"]["start_ns"]
    marks = {e["name"]: e["ts"] for e in doc["traceEvents"] if "records" in e["name"]}
    assert marks == {
        "2 older records overwritten (ring)": (T0 + 12 - t0) / 1e3,  # lane 0's first record
        "2 records dropped (lane full)": (T0 + 103 - t0) / 1e3,  # lane 1's last
    }


def test_3_drop_labels_follow_the_lane_in_perfetto():
    from trace_readers import read_trace

    trace = _ring_trace_with_both_kinds_of_drops()
    r = read_trace(to_perfetto_bytes(trace))
    marks = sorted(i for v in r.instants.values() for i in v if "records" in i[0])
    assert marks == [("2 older records overwritten (ring)", T0 + 12),
                     ("2 records dropped (lane full)", T0 + 103)]  # fmt: skip


# -- merge of ranks: 4, 5, 9 --------------------------------------------------------------------


def small_capture(name="k", t0=T0, metadata=None, records=None) -> Capture:
    recs = records or [(BEGIN, 1, 10), (INSTANT, 2, 20), (INSTANT, 2, 20.1), (END, 1, 40)]
    s = Stream(1, 1, 8, {(0, 0): Lane(t0, 3, [(k, e, t0 + int(t * 10)) for k, e, t in recs])})
    return Capture(encode(s), {1: "work", 2: "tick"}, {}, name, dict(metadata or {}))


def empty_capture(name="k", metadata=None) -> Capture:
    return Capture(encode(Stream(1, 1, 8)), {}, {}, name, dict(metadata or {}))


def test_4_a_rank_that_ran_nothing_does_not_move_the_base_to_1970(tmp_path):
    from sm_profiler.merge import merge_ranks

    out = tmp_path / "m.json"
    merge_ranks([[small_capture()], [empty_capture()]], out, align="none")
    doc = json.loads(out.read_text())
    assert doc["otherData"]["base_ns"] == T0  # the lane's anchor
    ticks = sorted(e["ts"] for e in doc["traceEvents"] if e.get("name") == "tick")
    assert ticks == [pytest.approx(0.2, abs=1e-6), pytest.approx(0.201, abs=1e-6)]
    assert ticks[1] - ticks[0] == pytest.approx(0.001, abs=1e-6)  # 1 ns apart stays 1 ns


def _lane_far_out_capture(nb: int = 1 << 20) -> Capture:
    """A capture of nb one-group lanes, only the last one used: chrome.py gives it tid ~nb."""
    w = np.zeros(fmt.buffer_words(nb, 1, 1), np.uint64)
    w[: fmt.HEADER_WORDS] = fmt.encode_header(nb, 1, 1)
    base = fmt.HEADER_WORDS + (nb - 1) * (fmt.LANE_HEADER_WORDS + 1)
    w[base] = T0
    w[base + 1] = 5
    w[base + 2] = fmt.make_record(T0 + 10, 2, INSTANT)
    return Capture(w, {2: "tick"}, {}, "wide")


def test_5_a_rank_with_2_20_lanes_keeps_its_ids_clear_of_the_next_rank(tmp_path):
    from sm_profiler.merge import merge_ranks

    out = tmp_path / "m.json"
    merge_ranks([[_lane_far_out_capture()], [small_capture()]], out, align="none")
    ev = json.loads(out.read_text())["traceEvents"]
    pids = {e["pid"] for e in ev}
    tids = {e["tid"] for e in ev if "tid" in e and e["tid"] != 0}
    assert not pids & tids
    by_rank: dict[str, set] = {}
    for e in ev:
        if e.get("name") == "process_name":
            by_rank.setdefault(e["args"]["name"].split(" · ")[0], set()).add(e["pid"])
    assert max(by_rank["GPU 0"] | {t for t in tids if t < min(by_rank["GPU 1"])}) < min(
        by_rank["GPU 1"])


BAD_NS = ["abc", float("nan"), float("inf"), [1], {"a": 1}, True, 2**70, 1.5]


@pytest.mark.parametrize("value", BAD_NS)
@pytest.mark.parametrize("key", ["host_ns", "offset_ns", "error_ns"])
def test_9_bad_clock_samples_are_format_errors(tmp_path, key, value):
    from sm_profiler.merge import merge_ranks

    sample = {"host_ns": 0, "offset_ns": 5, "error_ns": 1, key: value}
    with pytest.raises(FormatError, match=f"clock {key}.*not a time in ns"):
        merge_ranks([[small_capture(metadata={"clock": [sample]})]], tmp_path / "m.json")
    assert not (tmp_path / "m.json").exists()


@pytest.mark.parametrize("clock", [5, "abc", {"host_ns": 0, "offset_ns": 1}, 1.5])
def test_9_a_clock_that_is_not_a_list_is_a_format_error(tmp_path, clock):
    from sm_profiler.merge import merge_ranks

    with pytest.raises(FormatError, match="'clock' is a .*not a list"):
        merge_ranks([[small_capture(metadata={"clock": clock})]], tmp_path / "m.json")


@pytest.mark.parametrize("value", BAD_NS)
def test_9_bad_barrier_stamps_are_format_errors(tmp_path, value):
    from sm_profiler.capture import save_many
    from sm_profiler.cli import main

    files = []
    for r, b in enumerate([1000, value]):
        f = tmp_path / f"r{r}.smp"
        save_many([small_capture(metadata={"barrier_ns": b})], f)
        files.append(str(f))
    assert main(["merge", *files, "-o", str(tmp_path / "m.json")]) == 2
    assert not (tmp_path / "m.json").exists()


# -- merge --torch: 10, 11, 12, 13 --------------------------------------------------------------


def torch_doc(parts, base_ns=T0 - 10**6) -> dict:
    ev = [{"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 11, "tid": 11, "ts": 1.0,
           "dur": 2.0}]  # fmt: skip
    for t in parts:
        ev.append({"ph": "X", "cat": "kernel", "name": t.kernels[0].name, "pid": 0, "tid": 7,
                   "ts": (int(t.start_ns) - base_ns) / 1e3,
                   "dur": (int(t.end_ns) - int(t.start_ns)) / 1e3})  # fmt: skip
    return {"schemaVersion": 1, "baseTimeNanoseconds": base_ns, "traceEvents": ev}


def _kernel_row(doc) -> dict:
    return next(e for e in doc["traceEvents"] if e.get("cat") == "kernel")


def _bad_torch_docs():
    good = torch_doc([decode(small_capture())])
    out = {}

    def case(name, edit):
        d = json.loads(json.dumps(good))
        edit(d)
        out[name] = d

    case("non-object row", lambda d: d["traceEvents"].append([1, 2]))
    case("no ts", lambda d: _kernel_row(d).pop("ts"))
    case("no dur", lambda d: _kernel_row(d).pop("dur"))
    case("ts abc", lambda d: _kernel_row(d).update(ts="abc"))
    case("ts null", lambda d: _kernel_row(d).update(ts=None))
    case("ts nan", lambda d: _kernel_row(d).update(ts=float("nan")))
    case("ts 1e300", lambda d: _kernel_row(d).update(ts=1e300))
    case("dur negative", lambda d: _kernel_row(d).update(dur=-5.0))
    case("base x", lambda d: d.update(baseTimeNanoseconds="x"))
    case("base float", lambda d: d.update(baseTimeNanoseconds=1.5))
    case("no traceEvents", lambda d: d.pop("traceEvents"))
    return out


BAD_TORCH = _bad_torch_docs()


@pytest.mark.parametrize("case", sorted(BAD_TORCH))
def test_10_malformed_torch_traces_are_capture_errors(tmp_path, case):
    from sm_profiler.errors import CaptureError
    from sm_profiler.merge import merge_torch_trace

    with pytest.raises(CaptureError, match="re-export it"):
        merge_torch_trace(BAD_TORCH[case], [small_capture()], tmp_path / "m.json")
    assert not (tmp_path / "m.json").exists()


@pytest.mark.parametrize("case", sorted(BAD_TORCH) + ["deep", "not json", "truncated gz"])
def test_10_malformed_torch_files_give_one_line_errors(tmp_path, capsys, case):
    import gzip

    from sm_profiler.capture import save_many
    from sm_profiler.cli import main

    save_many([small_capture()], tmp_path / "c.smp")
    path = tmp_path / "torch.json"
    if case == "deep":
        path.write_text('{"traceEvents": ' + "[" * 100_000 + "]" * 100_000 + "}")
    elif case == "not json":
        path.write_text('{"traceEvents": [')
    elif case == "truncated gz":
        path = tmp_path / "torch.json.gz"
        path.write_bytes(gzip.compress(json.dumps(torch_doc([])).encode())[:-12])
    else:
        path.write_text(json.dumps(BAD_TORCH[case]))
    capsys.readouterr()
    rc = main(["merge", str(tmp_path / "c.smp"), "--torch", str(path), "-o",
               str(tmp_path / "m.json")])  # fmt: skip
    err = capsys.readouterr().err
    assert rc == 2 and err.startswith("sm-profiler: error: ") and err.count("\n") == 1, err
    assert "torch trace" in err
    assert not (tmp_path / "m.json").exists()


def test_10_a_good_torch_file_still_merges(tmp_path):
    from sm_profiler.merge import merge_torch_trace

    caps = [small_capture(), small_capture(t0=T0 + 10**6)]
    path = tmp_path / "torch.json"
    path.write_text(json.dumps(torch_doc([decode([c]) for c in caps])))
    info = merge_torch_trace(path, caps, tmp_path / "m.json")
    assert info["error"][0]["matched"] == 2


@pytest.mark.skipif(not hasattr(__import__("os"), "mkfifo"), reason="no FIFOs here")
def test_11_a_torch_fifo_is_refused_at_once(tmp_path):
    import os
    import threading

    from sm_profiler.errors import CaptureError
    from sm_profiler.merge import merge_torch_trace

    fifo = tmp_path / "torch.json"
    os.mkfifo(fifo)
    result = []

    def run():
        try:
            merge_torch_trace(fifo, [small_capture()], tmp_path / "m.json")
            result.append("merged")
        except CaptureError as e:
            result.append(str(e))

    th = threading.Thread(target=run, daemon=True)
    th.start()
    th.join(10)
    if th.is_alive():  # release the reader the old code left blocked, then fail
        with open(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK), "w") as f:
            f.write("{}")
        th.join(5)
        pytest.fail("merge --torch blocked on a FIFO")
    assert "not a regular file" in result[0]


def test_12_a_gzip_bomb_is_refused_before_it_is_inflated(tmp_path, monkeypatch):
    import gzip
    import tracemalloc

    from sm_profiler import merge
    from sm_profiler.errors import CaptureError

    body = b'{"traceEvents": [' + b" " * (64 << 20) + b"]}"
    path = tmp_path / "torch.json.gz"
    path.write_bytes(gzip.compress(body, 9))
    size = path.stat().st_size
    assert size < 200_000  # about 1000:1
    monkeypatch.setattr(merge, "MAX_TORCH_SLACK", 0, raising=False)
    tracemalloc.start()
    try:
        with pytest.raises(CaptureError, match="inflates to more than"):
            merge.merge_torch_trace(path, [small_capture()], tmp_path / "m.json")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 * 64 * size + (8 << 20), peak  # bounded by the ratio, not by the 64 MiB
    # A plain file above the absolute limit is refused too.
    monkeypatch.setattr(merge, "MAX_TORCH_BYTES", 1000, raising=False)
    plain = tmp_path / "torch.json"
    plain.write_bytes(b'{"traceEvents": [' + b" " * 2000 + b"]}")
    with pytest.raises(CaptureError, match="holds more than 1,000 bytes"):
        merge.merge_torch_trace(plain, [small_capture()], tmp_path / "m.json")


def _launches(n: int) -> list[Capture]:
    return [small_capture(t0=T0 + 5000 * i) for i in range(n)]


def test_13_matching_launches_to_cupti_rows_is_not_quadratic(monkeypatch):
    from sm_profiler import merge
    from sm_profiler.trace import TraceData

    parts = [decode([c]) for c in _launches(300)]
    rows = merge.cupti_kernels(torch_doc(parts))
    calls = [0]
    prop = TraceData.start_ns

    def counted(self):
        calls[0] += 1
        return prop.fget(self)

    monkeypatch.setattr(TraceData, "start_ns", property(counted))
    m = merge.match_launches(parts, rows)
    assert [i for i, _, _ in m] == list(range(300))
    assert calls[0] <= 2 * len(parts), calls[0]  # was launches x rows


@pytest.mark.parametrize("seed", range(5))
def test_13_the_nearest_row_is_the_one_a_plain_minimum_picks(seed):
    from sm_profiler import merge

    rng = np.random.default_rng(seed)
    parts = [decode([c]) for c in _launches(40)]
    rows = {"k": sorted((int(s), int(s) + 7) for s in
                        rng.choice(np.arange(T0 - 10**5, T0 + 3 * 10**5, 250), 30))}  # fmt: skip
    rows["k"] += rows["k"][:5]  # duplicate starts: the first row of equal ones wins
    rows["k"].sort()
    got = merge.match_launches(parts, rows)
    for i, s, e in got:
        c = rows["k"]
        j = min(range(len(c)), key=lambda j: abs(c[j][0] - int(parts[i].start_ns)))
        assert (s, e) == c[j]


# -- 7, 8: export of a trace without ranges, and the export filters ----------------------------


def instants_capture(n: int = 50) -> Capture:
    return small_capture(records=[(INSTANT, 2, 10 + i) for i in range(n)])


def test_7_summarising_a_trace_without_ranges_works(tmp_path):
    from sm_profiler.export import export
    from sm_profiler.timeline import build

    trace = decode(instants_capture())
    tl = build(trace, summary=True)
    assert len(tl.summary["value"]) == 0
    export(trace, tmp_path / "t.json", summary=True)
    export(trace, tmp_path / "t.perfetto-trace", summary=True)
    doc = json.loads((tmp_path / "t.json").read_text())
    assert not any(e.get("ph") == "C" and "active ranges" in e["name"] for e in doc["traceEvents"])


def test_7_the_default_summary_of_many_instants_works(tmp_path, monkeypatch):
    from sm_profiler import timeline
    from sm_profiler.export import export

    monkeypatch.setattr(timeline, "SUMMARY_ROWS", 5)
    with pytest.warns(UserWarning, match="summarised"):
        export(decode(instants_capture()), tmp_path / "t.json")


@pytest.mark.parametrize("args,usage", [
    (["--window-us", "inf:1"], True), (["--window-us", "nan:1"], True),
    (["--window-us", "0:1e300"], True), (["--sms", str(2**70)], True),
    (["--blocks", str(-(2**63) - 1)], True), (["--groups", "1," + str(2**31)], True),
    (["--events", "²"], False), (["--events", "٣"], False), (["--events", str(2**70)], False),
    (["--events", "4096"], False),
])  # fmt: skip
def test_8_hostile_export_filters_are_usage_or_one_line_errors(tmp_path, capsys, args, usage):
    from sm_profiler.capture import save_many
    from sm_profiler.cli import main

    save_many([small_capture()], tmp_path / "c.smp")
    argv = ["export", str(tmp_path / "c.smp"), str(tmp_path / "t.json"), *args]
    if usage:
        with pytest.raises(SystemExit) as e:
            main(argv)
        assert e.value.code == 2
        assert "usage:" in capsys.readouterr().err
    else:
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.startswith("sm-profiler: error: events filter") and err.count("\n") == 1
    assert not (tmp_path / "t.json").exists()


def test_8_filters_given_to_the_api_are_config_errors():
    from sm_profiler.errors import ConfigError
    from sm_profiler.timeline import build

    trace = decode(small_capture())
    for kw in ({"sms": [2**70]}, {"blocks": [2**40]}, {"events": [2**70]}, {"events": [-1]}):
        with pytest.raises(ConfigError):
            build(trace, **kw)


# -- 14, 17: query ---------------------------------------------------------------------------------


def test_14_query_fetches_only_the_rows_it_prints(tmp_path, capsys):
    pytest.importorskip("duckdb")
    from sm_profiler.capture import save_many
    from sm_profiler.cli import main
    from sm_profiler.tables import query

    trace = decode(small_capture())
    names, rows = query(trace, "select * from range(50000000)", max_rows=4)
    assert names == ["range"] and rows == [(0,), (1,), (2,), (3,)]
    save_many([small_capture()], tmp_path / "c.smp")
    assert main(["query", str(tmp_path / "c.smp"), "select * from range(50000000) order by 1",
                 "--max-rows", "3"]) == 0  # fmt: skip
    out = capsys.readouterr().out.splitlines()
    assert [o.strip() for o in out] == ["range", "0", "1", "2",
                                        "(more rows; --max-rows to see them)"]  # fmt: skip


def test_14_query_memory_is_bounded_by_what_is_printed(tmp_path):
    pytest.importorskip("duckdb")
    import subprocess
    import sys

    from sm_profiler.capture import save_many

    save_many([small_capture()], tmp_path / "c.smp")
    code = ("import resource, sys; from sm_profiler.cli import main; "
            "main(['query', sys.argv[1], sys.argv[2], '--max-rows', '3']); "
            "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)")  # fmt: skip

    def peak_kib(sql: str) -> int:
        out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "c.smp"), sql],
                             check=True, capture_output=True, text=True).stdout  # fmt: skip
        return int(out.splitlines()[-1])

    small, big = peak_kib("select 1"), peak_kib("select * from range(5000000)")
    assert big - small < 100 * 1024, (small, big)  # fetching it all took 650 MiB more


@pytest.mark.parametrize("sql", [
    "copy (select 1) to '{dir}/leak.csv'",
    "select * from read_csv('{dir}/secret.txt')",
    "select * from read_text('{dir}/secret.txt')",
    "attach '{dir}/db.duckdb' as d",
    "set enable_external_access = true",
    "install httpfs",
    "insert into events select * from events",
])  # fmt: skip
def test_17_query_cannot_reach_files_or_change_the_tables(tmp_path, sql):
    pytest.importorskip("duckdb")
    from sm_profiler.errors import ConfigError
    from sm_profiler.tables import query

    (tmp_path / "secret.txt").write_text("password\n")
    trace = decode(small_capture())
    with pytest.raises(ConfigError, match="query failed"):
        query(trace, sql.format(dir=tmp_path))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["secret.txt"]
    assert query(trace, "select count(*) from events")[1] == [(3,)]


# -- 15: temporary files are created exclusively -------------------------------------------------


@pytest.mark.parametrize("writer", ["export_json", "export_perfetto", "save", "merge"])
def test_15_writers_never_follow_a_symlink_at_a_temporary_name(tmp_path, writer, monkeypatch):
    import os

    from sm_profiler.capture import save_many
    from sm_profiler.export import export
    from sm_profiler.merge import merge_ranks

    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    ext = {"export_json": ".json", "export_perfetto": ".perfetto-trace", "save": ".smp",
           "merge": ".json"}[writer]  # fmt: skip
    out = tmp_path / f"out{ext}"
    # The names the old writer would have used (and a spread of pids around this one).
    for pid in range(max(1, os.getpid() - 5), os.getpid() + 6):
        os.symlink(victim, f"{out}.{pid}.tmp")
    cap = small_capture()
    if writer.startswith("export"):
        export(decode(cap), out)
    elif writer == "save":
        save_many([cap], out)
    else:
        merge_ranks([[cap]], out, align="none")
    assert victim.read_text() == "precious\n"
    assert out.stat().st_size > 0 and not out.is_symlink()
    leftovers = [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp") and
                 not p.is_symlink()]  # fmt: skip
    assert leftovers == []


def test_15_the_output_keeps_the_usual_permissions(tmp_path):
    import os
    import stat

    from sm_profiler.capture import save_many

    old = os.umask(0o022)
    try:
        save_many([small_capture()], tmp_path / "c.smp")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "c.smp").stat().st_mode) == 0o644


# -- 16: stats escapes what a file says ----------------------------------------------------------


def test_16_stats_escapes_call_sites_grids_and_slots(tmp_path, capsys):
    from sm_profiler.capture import save_many
    from sm_profiler.cli import main

    evil = "\x1b]0;pwned\x07\x1b[2J"
    meta = {"call_site": evil, "grid": [evil, 1], "slots": evil, "launches_without_slot": 2}
    caps = [small_capture(name="k", metadata=meta) for _ in range(2)]
    save_many(caps, tmp_path / "c.smp")
    assert main(["stats", str(tmp_path / "c.smp"), "--width", "200"]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out
    assert "\\x1b]0;pwned" in out


# -- 6: the C++ writer refuses what load refuses --------------------------------------------------


def _cpp_cases(tmp_path, headers: list[np.ndarray], shape=(2, 2, 4), metadata: bytes | None = None):
    """Run tests/cuda/header_cases.cpp over `headers`: [(C++ exit status, output path)]."""
    import os
    import subprocess

    import cuda_tools

    import sm_profiler

    cxx = cuda_tools.cxx()
    if cxx is None:
        pytest.skip("needs a C++ compiler")
    exe = tmp_path / "header_cases"
    if not exe.exists():
        src = os.path.join(CUDA_SOURCES, "header_cases.cpp")
        subprocess.run([cxx, "-std=c++17", "-O1", "-Wall", "-Werror", "-Wno-type-limits",
                        "-DSM_PROFILER_HOST_NO_CUDA", f"-I{sm_profiler.cuda_include_dir()}", src,
                        "-o", str(exe)], check=True, capture_output=True, text=True)  # fmt: skip
    cases = tmp_path / "cases.bin"
    cases.write_bytes(b"".join(np.asarray(h, "<u8").tobytes() for h in headers))
    outdir = tmp_path / "out"
    outdir.mkdir(exist_ok=True)
    argv = [str(exe), *map(str, shape), str(cases), str(outdir)]
    if metadata is not None:
        argv.append(os.fsdecode(metadata))
    r = subprocess.run(argv, capture_output=True, check=True)
    codes = [int(x) for x in r.stdout.split()]
    assert len(codes) == len(headers)
    return [(c, outdir / f"case_{i}.npz") for i, c in enumerate(codes)], r.stderr.decode("latin-1")


def _loads(path) -> bool:
    from sm_profiler.capture import load
    from sm_profiler.errors import CaptureError

    try:
        decode(load(path))
        return True
    except (CaptureError, FormatError):
        return False


def _header(nb=2, ng=2, cap=4, flags=0, version=fmt.VERSION) -> np.ndarray:
    h = fmt.encode_header(nb, ng, cap, flags)
    h[fmt.HDR_MAGIC_VERSION] = fmt.MAGIC | (version << 32)
    return h


def _edited(**words) -> np.ndarray:
    h = _header(**{k: v for k, v in words.items() if not k.startswith("w")})
    for k, v in words.items():
        if k.startswith("w"):
            h[int(k[1:])] = np.uint64(v)
    return h


HEADER_CASES = {
    "good": _header(),
    "good v1": _header(version=1), "good v2": _header(version=2), "good v3": _header(version=3),
    "version 0": _header(version=0), "version 5": _header(version=5),
    "version 2**31": _header(version=2**31),
    "unknown flag": _header(flags=4), "high flag": _header(flags=1 << 31),
    "emulated": _header(flags=fmt.FLAG_EMULATED), "ring": _header(flags=fmt.FLAG_RING),
    "w5 set": _edited(w5=1), "w6 set": _edited(w6=1 << 63), "w7 scratch": _edited(w7=5),
    "w7 set v1": _edited(version=1, w7=5), "w4 label": _edited(w4=3),
    "w4 set v3": _edited(version=3, w4=3), "w3 set v2": _edited(version=2, w3=1),
    "w3 slots v4": _edited(w3=1),
}  # fmt: skip


def test_6_cpp_writer_refuses_exactly_the_headers_load_refuses(tmp_path):
    names = sorted(HEADER_CASES)
    results, err = _cpp_cases(tmp_path, [HEADER_CASES[n] for n in names])
    seen = {}
    for n, (rc, path) in zip(names, results, strict=True):
        py_ok = _python_accepts(HEADER_CASES[n], (2, 2, 4))
        seen[n] = (rc == 0, py_ok)
        assert (rc == 0) == py_ok, (n, rc, py_ok)
        assert path.exists() == (rc == 0), n
        if rc == 0:
            assert _loads(path), n
    assert not seen["version 5"][0] and not seen["unknown flag"][0] and not seen["w5 set"][0]
    assert seen["good v1"][0] and seen["w4 label"][0] and not seen["w4 set v3"][0]
    assert "sets reserved header word 5" in err and "format version 5" in err


def _python_accepts(header: np.ndarray, shape) -> bool:
    words = np.zeros(fmt.buffer_words(*shape), np.uint64)
    words[: fmt.HEADER_WORDS] = header
    try:
        fmt.Layout.from_header(words)
        return True
    except FormatError:
        return False


def test_6_cpp_writer_and_python_agree_on_random_headers(tmp_path):
    rng = np.random.default_rng(23)
    headers = []
    for _ in range(300):
        h = _header(version=int(rng.choice([0, 1, 2, 3, 4, 5])),
                    flags=int(rng.choice([0, 1, 2, 3, 4, 8, 1 << 20])))  # fmt: skip
        for _ in range(int(rng.integers(0, 3))):
            w = int(rng.integers(1, fmt.HEADER_WORDS))
            bit = int(rng.integers(0, 64))
            h[w] ^= np.uint64(1 << bit)
        headers.append(h)
    results, _ = _cpp_cases(tmp_path, headers)
    for h, (rc, path) in zip(headers, results, strict=True):
        assert (rc == 0) == _python_accepts(h, (2, 2, 4)), [hex(int(x)) for x in h]
        if rc == 0:
            assert _loads(path)


def test_6_cpp_writer_refuses_metadata_that_is_not_utf8(tmp_path):
    (rc, path), = _cpp_cases(tmp_path, [_header()], metadata=b"caf\xe9")[0]
    assert rc != 0 and not path.exists()
    results, _ = _cpp_cases(tmp_path, [_header()], metadata="café ✓".encode())
    (rc, path), = results
    assert rc == 0
    from sm_profiler.capture import load

    assert load(path)[0].metadata["note"] == "café ✓"


@pytest.mark.parametrize("text", [b"\xed\xa0\x80", b"\xc0\xaf", b"\xf4\x90\x80\x80", b"\xe2\x82",
                                  b"ok\xff"])  # fmt: skip
def test_6_cpp_utf8_check_is_pythons(tmp_path, text):
    with pytest.raises(UnicodeDecodeError):
        text.decode()
    (rc, path), = _cpp_cases(tmp_path, [_header()], metadata=text)[0]
    assert rc != 0 and not path.exists()


# -- 18: a lane of 4,095 mutually overlapping ranges ---------------------------------------------


def _fanout_capture(width: int = 4095, lanes: int = 1) -> Capture:
    s = Stream(lanes, 1, 2 * width)
    recs = [(BEGIN, i, 10 + i) for i in range(width)] + [(END, i, 10 + width + i)
                                                         for i in range(width)]  # fmt: skip
    for b in range(lanes):
        s.lanes[(b, 0)] = Lane(T0, b, [(k, e, T0 + t) for k, e, t in recs])
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
        return [self._lane_header(int(lanes[k // pf.LEVELS]), k % pf.LEVELS,
                                  int(ref[k // pf.LEVELS])) for k in bkeys.tolist()]  # fmt: skip

    monkeypatch.setattr(pf._Writer, "_lane_headers", reference)
    assert to_perfetto_bytes(trace) == data
    r = read_trace(data)
    tracks = [d for d in r.threads()]
    assert len(tracks) == 4095
    assert sorted(s[0] for v in r.slices.values() for s in v if s[0].startswith("e")) == sorted(
        f"e{i}" for i in range(4095))


# -- 1, 2 as a property: a ring mark that disagrees with the lane's slots is refused --------------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from reference_encoder import examples  # noqa: E402
from strategies import SETTINGS, ring_streams  # noqa: E402


@settings(max_examples=examples(200), **SETTINGS)
@given(ring_streams(), st.data())
def test_1_2_a_ring_mark_that_does_not_match_the_slots_is_refused(stream, data):
    closed = [k for k, lane in stream.lanes.items() if lane.closed]
    if not closed:
        return
    key = data.draw(st.sampled_from(sorted(closed)))
    n = len(stream.lanes[key].records)
    m = data.draw(st.integers(0, fmt.RING_MARK - 1))
    words = encode(stream)
    cap = stream.capacity
    at = lane_base(key[0] * stream.num_groups + key[1], cap) + fmt.LANE_SM_ATTEMPTED
    words[at] = np.uint64((int(words[at]) & fmt.LOW32) | ((fmt.RING_MARK | m) << 32))
    if min(m, cap) != min(n, cap):
        with pytest.raises(FormatError):
            decode(words)


def test_13_window_search_is_the_exhaustive_one_and_cheap():
    """match_in_order's window (issue 23, item 13): the same window as trying every one, at
    twice as many CUPTI rows as launches, in time far below the exhaustive search's."""
    import time

    from sm_profiler.merge import _best_window

    rng = np.random.default_rng(5)
    for n, extra in ((1, 3), (5, 0), (40, 37), (300, 300)):
        starts = np.cumsum(rng.integers(1_000, 50_000, n + extra)).astype(np.float64)
        j0 = int(rng.integers(0, extra + 1))
        ours = starts[j0 : j0 + n] + 123_456 + rng.integers(0, 500, n)
        full = min(range(extra + 1), key=lambda j: float(np.ptp(ours - starts[j : j + n])))
        assert _best_window(ours, starts) == full
        assert n == 1 or full == j0  # one launch fits every window equally: the first wins
    n = 5_000
    starts = np.cumsum(rng.integers(1_000, 50_000, 2 * n)).astype(np.float64)
    ours = starts[1234 : 1234 + n] + 99.0
    t = time.perf_counter()
    assert _best_window(ours, starts) == 1234
    assert time.perf_counter() - t < 2.0  # every window in full: 5,001 x 5,000 differences


def test_13_launches_outside_the_torch_profile_are_matched_by_sliding_the_rows():
    """The buffer ran longer than torch.profiler (auto mode around two steps, the profile around
    the second): the CUPTI rows are matched to the window of launches they fit."""
    from types import SimpleNamespace

    from sm_profiler.merge import match_in_order

    def part(start):
        return SimpleNamespace(kernels=[SimpleNamespace(name="k")], start_ns=start, end_ns=start + 10)

    ours = [1_000, 5_000, 9_000, 50_020_000, 50_026_000, 50_029_000]  # two steps, 50 ms apart
    parts = [part(t) for t in ours]
    offset = 7_000_000
    rows = {"k": [(t - offset, t - offset + 10) for t in ours[3:]]}  # the profile: step two
    m = match_in_order(parts, rows)
    assert [i for i, _, _ in m] == [3, 4, 5]
    assert all(parts[i].start_ns - s == offset for i, s, _ in m)
    from sm_profiler.merge import alignment_error

    aligned = [part(t - offset) for t in ours]
    err = alignment_error(aligned, rows)
    assert err["matched"] == 3 and err["outside_profile"] == 3 and err["max_abs_ns"] == 0
