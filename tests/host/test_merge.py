"""Merging (sm_profiler/export/merge.py) on hand-built captures: ranks with nothing recorded or with
millions of lanes, bad clock samples and barrier stamps, malformed torch traces, and matching
launches to CUPTI rows fast and exactly. Regression tests of issue 23, named test_<item>_...

Merges of captures recorded by real launches (interpreter and GPU) are in
tests/e2e/test_workload.py and test_workload_gpu.py."""

from __future__ import annotations

import json

import numpy as np
import pytest
from captures import EPOCH_T0, kernel_capture, torch_doc
from reference_encoder import INSTANT, Stream, encode

from sm_profiler.errors import ConfigError, FormatError
from sm_profiler.trace.decode import decode
from sm_profiler.wire import format as fmt
from sm_profiler.wire.capture import Capture


def empty_capture(name="k", metadata=None) -> Capture:
    return Capture(encode(Stream(1, 1, 8)), {}, {}, name, dict(metadata or {}))


def test_4_a_rank_that_ran_nothing_does_not_move_the_base_to_1970(tmp_path):
    from sm_profiler.export.merge import merge_ranks

    out = tmp_path / "m.json"
    merge_ranks([[kernel_capture()], [empty_capture()]], out, align="none")
    doc = json.loads(out.read_text())
    assert doc["otherData"]["base_ns"] == EPOCH_T0  # the lane's anchor
    ticks = sorted(e["ts"] for e in doc["traceEvents"] if e.get("name") == "tick")
    assert ticks == [pytest.approx(0.2, abs=1e-6), pytest.approx(0.201, abs=1e-6)]
    assert ticks[1] - ticks[0] == pytest.approx(0.001, abs=1e-6)  # 1 ns apart stays 1 ns


def _lane_far_out_capture(nb: int = 1 << 20) -> Capture:
    """A capture of nb one-group lanes, only the last one used: chrome.py gives it tid ~nb."""
    w = np.zeros(fmt.buffer_words(nb, 1, 1), np.uint64)
    w[: fmt.HEADER_WORDS] = fmt.encode_header(nb, 1, 1)
    base = fmt.HEADER_WORDS + (nb - 1) * (fmt.LANE_HEADER_WORDS + 1)
    w[base] = EPOCH_T0
    w[base + 1] = 5
    w[base + 2] = fmt.make_record(EPOCH_T0 + 10, 2, INSTANT)
    return Capture(w, {2: "tick"}, {}, "wide")


def test_5_a_rank_with_2_20_lanes_keeps_its_ids_clear_of_the_next_rank(tmp_path):
    from sm_profiler.export.merge import merge_ranks

    out = tmp_path / "m.json"
    merge_ranks([[_lane_far_out_capture()], [kernel_capture()]], out, align="none")
    ev = json.loads(out.read_text())["traceEvents"]
    pids = {e["pid"] for e in ev}
    tids = {e["tid"] for e in ev if "tid" in e and e["tid"] != 0}
    assert not pids & tids
    by_rank: dict[str, set] = {}
    for e in ev:
        if e.get("name") == "process_name":
            by_rank.setdefault(e["args"]["name"].split(" · ")[0], set()).add(e["pid"])
    assert max(by_rank["GPU 0"] | {t for t in tids if t < min(by_rank["GPU 1"])}) < min(
        by_rank["GPU 1"]
    )


BAD_NS = ["abc", float("nan"), float("inf"), [1], {"a": 1}, True, 2**70, 1.5]


@pytest.mark.parametrize("value", BAD_NS)
@pytest.mark.parametrize("key", ["host_ns", "offset_ns", "error_ns"])
def test_9_bad_clock_samples_are_format_errors(tmp_path, key, value):
    from sm_profiler.export.merge import merge_ranks

    sample = {"host_ns": 0, "offset_ns": 5, "error_ns": 1, key: value}
    with pytest.raises(FormatError, match=f"clock {key}.*not a time in ns"):
        merge_ranks([[kernel_capture(metadata={"clock": [sample]})]], tmp_path / "m.json")
    assert not (tmp_path / "m.json").exists()


@pytest.mark.parametrize("clock", [5, "abc", {"host_ns": 0, "offset_ns": 1}, 1.5])
def test_9_a_clock_that_is_not_a_list_is_a_format_error(tmp_path, clock):
    from sm_profiler.export.merge import merge_ranks

    with pytest.raises(FormatError, match="'clock' is a .*not a list"):
        merge_ranks([[kernel_capture(metadata={"clock": clock})]], tmp_path / "m.json")


@pytest.mark.parametrize("value", BAD_NS)
def test_9_bad_barrier_stamps_are_format_errors(tmp_path, value):
    from sm_profiler.cli import main
    from sm_profiler.wire.capture import save_many

    files = []
    for r, b in enumerate([1000, value]):
        f = tmp_path / f"r{r}.smp"
        save_many([kernel_capture(metadata={"barrier_ns": b})], f)
        files.append(str(f))
    assert main(["merge", *files, "-o", str(tmp_path / "m.json")]) == 2
    assert not (tmp_path / "m.json").exists()


def _kernel_row(doc) -> dict:
    return next(e for e in doc["traceEvents"] if e.get("cat") == "kernel")


def _bad_torch_docs():
    good = torch_doc([decode(kernel_capture())])
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
    from sm_profiler.export.merge import merge_torch_trace

    with pytest.raises(CaptureError, match="re-export it"):
        merge_torch_trace(BAD_TORCH[case], [kernel_capture()], tmp_path / "m.json")
    assert not (tmp_path / "m.json").exists()


@pytest.mark.parametrize("case", sorted(BAD_TORCH) + ["deep", "not json", "truncated gz"])
def test_10_malformed_torch_files_give_one_line_errors(tmp_path, capsys, case):
    import gzip

    from sm_profiler.cli import main
    from sm_profiler.wire.capture import save_many

    save_many([kernel_capture()], tmp_path / "c.smp")
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
    rc = main(
        ["merge", str(tmp_path / "c.smp"), "--torch", str(path), "-o", str(tmp_path / "m.json")]
    )
    err = capsys.readouterr().err
    assert rc == 2 and err.startswith("sm-profiler: error: ") and err.count("\n") == 1, err
    assert "torch trace" in err
    assert not (tmp_path / "m.json").exists()


def test_10_a_good_torch_file_still_merges(tmp_path):
    from sm_profiler.export.merge import merge_torch_trace

    caps = [kernel_capture(), kernel_capture(t0=EPOCH_T0 + 10**6)]
    path = tmp_path / "torch.json"
    path.write_text(json.dumps(torch_doc([decode([c]) for c in caps])))
    info = merge_torch_trace(path, caps, tmp_path / "m.json")
    assert info["error"][0]["matched"] == 2


@pytest.mark.skipif(not hasattr(__import__("os"), "mkfifo"), reason="no FIFOs here")
def test_11_a_torch_fifo_is_refused_at_once(tmp_path):
    import os
    import threading

    from sm_profiler.errors import CaptureError
    from sm_profiler.export.merge import merge_torch_trace

    fifo = tmp_path / "torch.json"
    os.mkfifo(fifo)
    result = []

    def run():
        try:
            merge_torch_trace(fifo, [kernel_capture()], tmp_path / "m.json")
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

    from sm_profiler.errors import CaptureError
    from sm_profiler.export import merge

    body = b'{"traceEvents": [' + b" " * (64 << 20) + b"]}"
    path = tmp_path / "torch.json.gz"
    path.write_bytes(gzip.compress(body, 9))
    size = path.stat().st_size
    assert size < 200_000  # about 1000:1
    from sm_profiler.wire import torch_trace  # the limits live where torch traces are read

    monkeypatch.setattr(torch_trace, "MAX_TORCH_SLACK", 0)
    tracemalloc.start()
    try:
        with pytest.raises(CaptureError, match="inflates to more than"):
            merge.merge_torch_trace(path, [kernel_capture()], tmp_path / "m.json")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 * 64 * size + (8 << 20), peak  # bounded by the ratio, not by the 64 MiB
    # A plain file above the absolute limit is refused too.
    monkeypatch.setattr(torch_trace, "MAX_TORCH_BYTES", 1000)
    plain = tmp_path / "torch.json"
    plain.write_bytes(b'{"traceEvents": [' + b" " * 2000 + b"]}")
    with pytest.raises(CaptureError, match="holds more than 1,000 bytes"):
        merge.merge_torch_trace(plain, [kernel_capture()], tmp_path / "m.json")


def _launches(n: int) -> list[Capture]:
    return [kernel_capture(t0=EPOCH_T0 + 5000 * i) for i in range(n)]


def test_13_matching_launches_to_cupti_rows_is_not_quadratic(monkeypatch):
    from sm_profiler.export import merge
    from sm_profiler.trace.model import TraceData

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
    from sm_profiler.export import merge

    rng = np.random.default_rng(seed)
    parts = [decode([c]) for c in _launches(40)]
    rows = {
        "k": sorted(
            (int(s), int(s) + 7)
            for s in rng.choice(np.arange(EPOCH_T0 - 10**5, EPOCH_T0 + 3 * 10**5, 250), 30)
        )
    }
    rows["k"] += rows["k"][:5]  # duplicate starts: the first row of equal ones wins
    rows["k"].sort()
    got = merge.match_launches(parts, rows)
    for i, s, e in got:
        c = rows["k"]
        j = min(range(len(c)), key=lambda j: abs(c[j][0] - int(parts[i].start_ns)))
        assert (s, e) == c[j]


def test_13_window_search_is_the_exhaustive_one_and_cheap():
    """match_in_order's window (issue 23, item 13): the same window as trying every one, at
    twice as many CUPTI rows as launches, in time far below the exhaustive search's."""
    import time

    from sm_profiler.report.alignment import best_window

    rng = np.random.default_rng(5)
    for n, extra in ((1, 3), (5, 0), (40, 37), (300, 300)):
        starts = np.cumsum(rng.integers(1_000, 50_000, n + extra)).astype(np.float64)
        j0 = int(rng.integers(0, extra + 1))
        ours = starts[j0 : j0 + n] + 123_456 + rng.integers(0, 500, n)
        full = min(range(extra + 1), key=lambda j: float(np.ptp(ours - starts[j : j + n])))
        assert best_window(ours, starts) == full
        assert n == 1 or full == j0  # one launch fits every window equally: the first wins
    n = 5_000
    starts = np.cumsum(rng.integers(1_000, 50_000, 2 * n)).astype(np.float64)
    ours = starts[1234 : 1234 + n] + 99.0
    t = time.perf_counter()
    assert best_window(ours, starts) == 1234
    assert time.perf_counter() - t < 2.0  # every window in full: 5,001 x 5,000 differences


def test_13_launches_outside_the_torch_profile_are_matched_by_sliding_the_rows():
    """The buffer ran longer than torch.profiler (auto mode around two steps, the profile around
    the second): the CUPTI rows are matched to the window of launches they fit."""
    from types import SimpleNamespace

    from sm_profiler.export.merge import match_in_order

    def part(start):
        return SimpleNamespace(
            kernels=[SimpleNamespace(name="k")], start_ns=start, end_ns=start + 10
        )

    ours = [1_000, 5_000, 9_000, 50_020_000, 50_026_000, 50_029_000]  # two steps, 50 ms apart
    parts = [part(t) for t in ours]
    offset = 7_000_000
    rows = {"k": [(t - offset, t - offset + 10) for t in ours[3:]]}  # the profile: step two
    m = match_in_order(parts, rows)
    assert [i for i, _, _ in m] == [3, 4, 5]
    assert all(parts[i].start_ns - s == offset for i, s, _ in m)
    from sm_profiler.export.merge import alignment_error

    aligned = [part(t - offset) for t in ours]
    err = alignment_error(aligned, rows)
    assert err["matched"] == 3 and err["outside_profile"] == 3 and err["max_abs_ns"] == 0


# -- coverage and the unseen kernels (issue 33, item 1) ----------------------------------------


def _merged_with_unseen(tmp_path, unseen, num_sms=4):
    """One launch of 'k' (on SM 3, 0-400 ns after EPOCH_T0) merged with a torch trace of its
    row and `unseen` kernel rows (cupti_doc's dicts)."""
    from captures import cupti_doc

    from sm_profiler.export.merge import merge_torch_trace

    cap = kernel_capture()
    t = decode([cap])
    rows = [dict(name="k", start=int(t.start_ns) - EPOCH_T0, end=int(t.end_ns) - EPOCH_T0)]
    doc = cupti_doc(rows + unseen, num_sms=num_sms)
    info = merge_torch_trace(doc, [cap], tmp_path / "m.json", offset_ns=0)
    return info, json.loads((tmp_path / "m.json").read_text())


def _cupti_slices(doc):
    return [e for e in doc["traceEvents"] if "CUPTI" in str(e.get("args", {}).get("source"))]


def _sm_of_pid(doc) -> dict[int, str]:
    return {
        e["pid"]: e["args"]["name"]
        for e in doc["traceEvents"]
        if e.get("name") == "process_name" and " · SM " in e["args"]["name"]
    }


def test_merge_returns_and_writes_the_coverage(tmp_path):
    info, doc = _merged_with_unseen(tmp_path, [dict(name="gemm", start=1000, end=1600)])
    cov = info["coverage"]
    assert doc["sm_profiler_coverage"] == json.loads(json.dumps(cov))
    assert "coverage" not in doc["sm_profiler_alignment"]
    (d,) = cov["devices"]
    # k's row 0-400 ns (its lane's anchor to its last record), gemm 1000-1600: 400 of 1,600.
    assert d["share"] == pytest.approx(400 / 1600)
    assert d["unseen"][0]["name"] == "gemm"
    assert cov["bars"]["drawn"][0]["kernels"] == 1 and cov["bars"]["note"] is None


def test_unseen_kernels_are_bars_on_the_sm_tracks(tmp_path):
    unseen = [
        dict(name="gemm", start=1000, end=1600, grid=(8, 1, 1), block=(256, 1, 1)),
        dict(name="reduce", start=2000, end=2100, grid=(2, 1, 1)),
    ]
    info, doc = _merged_with_unseen(tmp_path, unseen)
    sm_of = _sm_of_pid(doc)
    slices = _cupti_slices(doc)
    gemm = sorted(sm_of[e["pid"]] for e in slices if e["name"] == "gemm")
    assert gemm == [f"GPU 0 · SM {s}" for s in range(4)]  # SMs 0-2 have no program: new tracks
    reduce = sorted(sm_of[e["pid"]] for e in slices if e["name"].startswith("reduce"))
    assert reduce == ["GPU 0 · SM 0", "GPU 0 · SM 1"]
    r = next(e for e in slices if e["name"].startswith("reduce"))
    assert r["name"] == "reduce (any 2 of 4 SMs)" and "does not say which" in r["args"]["sms"]
    g = next(e for e in slices if e["name"] == "gemm")
    assert g["args"]["grid"] == [8, 1, 1] and g["args"]["block"] == [256, 1, 1]
    assert g["dur"] == pytest.approx(0.6) and g["ts"] == pytest.approx(1.0)  # µs since base
    # Each bar sits on a thread 'other kernels (CUPTI)' of its SM, whose tid is no pid.
    names = {
        (e["pid"], e["tid"]): e["args"]["name"]
        for e in doc["traceEvents"]
        if e.get("name") == "thread_name"
    }
    assert {names[e["pid"], e["tid"]] for e in slices} == {"other kernels (CUPTI)"}
    pids = {e["pid"] for e in doc["traceEvents"]}
    assert not {e["tid"] for e in slices} & pids
    assert info["coverage"]["bars"]["drawn"][0]["slices"] == 6


def test_overlapping_unseen_kernels_take_a_second_thread(tmp_path):
    unseen = [
        dict(name="a", start=1000, end=2000, grid=(4, 1, 1)),
        dict(name="b", start=1500, end=2500, grid=(4, 1, 1)),
        dict(name="c", start=2000, end=2200, grid=(4, 1, 1)),
    ]
    _, doc = _merged_with_unseen(tmp_path, unseen)
    slices = _cupti_slices(doc)
    by_thread: dict = {}
    for e in slices:
        by_thread.setdefault((e["pid"], e["tid"]), []).append(e)
    assert len(by_thread) == 8  # 4 SMs x 2 levels
    for rows in by_thread.values():  # no two bars of one thread overlap
        rows.sort(key=lambda e: e["ts"])
        assert all(
            a["ts"] + a["dur"] <= b["ts"] + 1e-9 for a, b in zip(rows[:-1], rows[1:], strict=True)
        )


def test_the_bars_are_capped_keeping_the_longest(tmp_path, monkeypatch):
    from sm_profiler.report import coverage

    monkeypatch.setattr(coverage, "MAX_UNSEEN_SLICES", 10)
    unseen = [
        dict(name=f"u{i}", start=1000 + 1000 * i, end=1000 + 1000 * i + d, grid=(4, 1, 1))
        for i, d in enumerate([100, 900, 300, 500])
    ]
    info, doc = _merged_with_unseen(tmp_path, unseen)
    assert sorted({e["name"] for e in _cupti_slices(doc)}) == ["u1", "u3"]
    bars = doc["sm_profiler_coverage"]["bars"]["drawn"][0]
    assert (bars["slices"], bars["left_out_kernels"], bars["left_out_slices"]) == (8, 2, 8)
    assert bars["max_slices"] == 10


def test_ranks_the_torch_trace_does_not_name_get_no_bars(tmp_path):
    from captures import cupti_doc

    from sm_profiler.export.merge import merge_torch_trace

    caps = [kernel_capture(metadata={"rank": 0}), kernel_capture(metadata={"rank": 1})]
    doc = cupti_doc([dict(name="gemm", start=0, end=100, grid=(8, 1, 1))], num_sms=4)
    info = merge_torch_trace(doc, [[caps[0]], [caps[1]]], tmp_path / "m.json", offset_ns=0)
    assert info["coverage"]["bars"]["drawn"] == []
    assert "distributedInfo.rank" in info["coverage"]["bars"]["note"]
    doc["distributedInfo"] = {"rank": 1, "world_size": 2}
    info = merge_torch_trace(doc, [[caps[0]], [caps[1]]], tmp_path / "m.json", offset_ns=0)
    assert [b["rank"] for b in info["coverage"]["bars"]["drawn"]] == [1]
    out = json.loads((tmp_path / "m.json").read_text())
    sm_of = _sm_of_pid(out)
    assert {sm_of[e["pid"]][:5] for e in _cupti_slices(out)} == {"GPU 1"}


def test_merge_torch_prints_the_coverage_in_80_columns(tmp_path, capsys):
    from captures import cupti_doc

    from sm_profiler.cli import main
    from sm_profiler.wire.capture import save_many

    cap = kernel_capture()
    save_many([cap], tmp_path / "c.smp")
    t = decode([cap])
    long = "nvjet_tst_128x256_64x4_2x1_v_bz_coopA_NNT_" * 3
    rows = [dict(name="k", start=int(t.start_ns) - EPOCH_T0, end=int(t.end_ns) - EPOCH_T0)]
    rows += [dict(name=long, start=1000, end=1600, grid=(8, 1, 1))]
    (tmp_path / "t.json").write_text(json.dumps(cupti_doc(rows, num_sms=4)))
    args = ["merge", str(tmp_path / "c.smp"), "--torch", str(tmp_path / "t.json")]
    assert main([*args, "-o", str(tmp_path / "m.json")]) == 0
    out = capsys.readouterr().out.splitlines()
    assert all(len(line) <= 80 for line in out[1:]), out  # the first names the output's path
    text = "\n".join(out)
    assert "cuda:0, from CUPTI (the whole profile as one step): instrumented kernels ran" in text
    assert "25.0% of a step" in text  # k's 400 ns of the 1,600 ns span
    (listed,) = [line for line in out if "1x  " in line]
    assert listed.startswith("       37.5%        1x  nvjet_tst") and "…" in listed
    assert "unseen kernels on GPU 0's SM tracks: 1 of 1 (4 slices)" in text


def test_an_auto_region_and_a_hand_instrumented_kernel_share_one_ranks_tracks(tmp_path):
    """One rank's sources as a list: auto mode's launches and a manual capture of the same
    process (e.g. a CUDA C++ kernel instrumented by hand in the region) land on one GPU's SM
    tracks, on one time axis (both stamp %globaltimer)."""
    from auto_inputs import AUTO_T0, table_of, two_kernels

    from sm_profiler.export.merge import merge_ranks

    table = table_of(two_kernels())
    manual = kernel_capture(name="my_cuda_kernel", t0=AUTO_T0 + 20)
    out = tmp_path / "both.json"
    merge_ranks([[table, manual]], out, align="none")
    doc = json.loads(out.read_text())
    procs = {
        e["pid"]: e["args"]["name"]
        for e in doc["traceEvents"]
        if e.get("ph") == "M" and e.get("name") == "process_name"
    }
    assert {p.split(" · ")[0] for p in procs.values()} == {"GPU 0"}  # one rank, one GPU
    slices = [e for e in doc["traceEvents"] if e.get("ph") == "X"]
    by_name = {e["name"]: e for e in slices}
    assert {"my_cuda_kernel", "work", "triton_poi_fused_add_0", "gemm"} <= set(by_name)
    # the manual lane opens 20 ns after the auto launch's first program and its range begins
    # 100 ns into the lane (kernel_capture's t = 10): 0.120 us apart on the trace's axis
    work = by_name["work"]["ts"]
    first = min(e["ts"] for e in slices if e["name"].startswith("triton_poi_fused_add_0"))
    assert work - first == pytest.approx(0.120, abs=1e-3)


def test_ranks_as_perfetto_show_gpu_by_gpu_sm_by_sm_every_program_in_place(tmp_path):
    # Issue 46, item 7: the job's Chrome JSON opened in the Perfetto UI with its SMs in no order
    # ('GPU 0 · SM 125', 'GPU 1 · SM 34', ...) and a pid after every name. As Perfetto: a root
    # per rank, then its SMs in SM order; every program on its rank's SM at its time.
    from collections import Counter

    from auto_inputs import AUTO_T0, table_of
    from trace_readers import read_trace

    import sm_profiler

    tables = []
    for r, sms in enumerate([[125, 8, 34, 124, 49], [34, 49, 2, 131]]):
        recs = [(AUTO_T0 + 100 * p + 50 * r, 5000, sm, 1, 1, p, 0, 0) for p, sm in enumerate(sms)]
        recs += [(AUTO_T0 + 9000 + 100 * p, 3000, sm, 2, 2, p, 0, 0) for p, sm in enumerate(sms)]
        tables.append(table_of(recs, sm_count=132, session={"rank": r}))
    path = tmp_path / "ranks.perfetto-trace"
    info = sm_profiler.merge_ranks(tables, path, align="none")
    assert info["method"] == "none"
    read = read_trace(path.read_bytes())
    roots = ["GPU 0 · triton_poi_fused_add_0, gemm", "GPU 1 · triton_poi_fused_add_0, gemm"]
    assert [d.name for d in read.top_level()] == [
        roots[0],
        *[f"GPU 0 · SM {s}" for s in (8, 34, 49, 124, 125)],
        roots[1],
        *[f"GPU 1 · SM {s}" for s in (2, 34, 49, 131)],
    ]
    by_name = {d.name: d for d in read.tracks.values()}
    for r, t in enumerate(tables):
        names = t.kernel_names()
        rows = t.rows
        want = Counter(
            (f"GPU {r} · SM {sm}", names[t.launches["kernel"][launch]], int(s), int(e - s))
            for sm, launch, s, e in zip(
                rows["sm"], rows["launch"], rows["start_ns"], rows["end_ns"], strict=True
            )
        )
        got = Counter()
        for d in read.tracks.values():
            parent = read.tracks.get(d.parent_uuid)
            if parent is not None and parent.name.startswith(f"GPU {r} · SM"):
                got.update((parent.name, *s) for s in read.slices[d.uuid])
        assert got == want
        launches = [d for d in read.tracks.values() if d.parent_uuid == by_name[roots[r]].uuid]
        assert sum(len(read.slices[d.uuid]) for d in launches) == t.num_launches
    assert "2 ranks on one time axis, aligned by none" in by_name[roots[1]].description
    # The Chrome JSON of the same ranks is still written for a .json name.
    sm_profiler.merge_ranks(tables, tmp_path / "ranks.json", align="none")
    doc = json.loads((tmp_path / "ranks.json").read_text())
    procs = {e["args"]["name"] for e in doc["traceEvents"] if e.get("name") == "process_name"}
    assert "GPU 1 · SM 131" in procs
    with pytest.raises(ConfigError, match="name the merged trace .perfetto-trace"):
        sm_profiler.merge_ranks(tables, tmp_path / "ranks.txt")


def test_torch_processes_are_named_for_what_they_hold():
    """torch.profiler names the host process and each GPU's "python" alike: a merged trace
    showed "rank 1 · python" twice (seen in the Perfetto UI, issue 45)."""
    from sm_profiler.wire.torch_trace import named_processes

    meta = [
        {"ph": "M", "name": "process_name", "pid": 1419, "args": {"name": "python"}},
        {"ph": "M", "name": "process_name", "pid": 0, "args": {"name": "python"}},
        {"ph": "M", "name": "thread_name", "pid": 0, "tid": 7, "args": {"name": "stream 7"}},
        {"ph": "M", "name": "thread_name", "pid": 1419, "tid": 1419, "args": {"name": "main"}},
        {"ph": "X", "name": "aten::mm", "pid": 1419, "tid": 1419, "ts": 1.0, "dur": 2.0},
    ]
    out = named_processes(meta)
    names = {e["pid"]: e["args"]["name"] for e in out if e["name"] == "process_name"}
    assert names == {1419: "CPU · python (pid 1419)", 0: "GPU 0 · CUDA streams"}
    assert out[4] is meta[4] and meta[0]["args"]["name"] == "python"  # the input is untouched
