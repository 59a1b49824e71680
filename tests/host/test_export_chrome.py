"""Chrome JSON export: json.load it back and check meaning, pid/tid rules and µs precision."""

from __future__ import annotations

import gzip
import json
from collections import Counter

from captures import T0, basic_capture, capture
from reference_encoder import BEGIN, END, INSTANT
from trace_readers import expected_slices

from sm_profiler.export import export, to_chrome_json
from sm_profiler.trace.decode import decode
from sm_profiler.wire import format as fmt


def load(trace):
    # Through a real JSON round trip: what a viewer reads.
    return json.loads(json.dumps(to_chrome_json(trace)))


def meta(events, name):
    return {(e["pid"], e["tid"]): e["args"] for e in events if e["ph"] == "M" and e["name"] == name}


def thread_of(events, name):
    ((pid, tid),) = [k for k, a in meta(events, "thread_name").items() if a["name"] == name]
    return pid, tid


def slices(events, pid, tid, t0):
    # Back to ns: ts and dur are µs since the trace start.
    return Counter(
        (e["name"], t0 + round(e["ts"] * 1000), round(e["dur"] * 1000))
        for e in events
        if e["ph"] == "X" and (e["pid"], e["tid"]) == (pid, tid)
    )


def test_processes_threads_and_ids():
    trace = decode(basic_capture(groups={0: "producer"}))
    ev = load(trace)["traceEvents"]
    procs = meta(ev, "process_name")
    names = {pid: a["name"] for (pid, _), a in procs.items()}
    assert names[1] == "SM 3" and names[2] == "SM 17" and names[3] == "launches"
    sort = {pid: a["sort_index"] for (pid, _), a in meta(ev, "process_sort_index").items()}
    assert sort[1] < sort[2]
    pids = set(names)
    tids = [tid for (_, tid) in meta(ev, "thread_name")]
    assert min(pids) >= 1 and len(set(tids)) == len(tids) and not set(tids) & pids
    for e in ev:
        if e["ph"] in "Xi":
            assert (e["pid"], e["tid"]) in meta(ev, "thread_name")
    p, t = thread_of(ev, "block 0 · group 1")
    assert names[p] == "SM 17"
    order = sorted(meta(ev, "thread_sort_index").items(), key=lambda kv: kv[1]["sort_index"])
    labels = [meta(ev, "thread_name")[k]["name"] for k, _ in order]
    assert labels[:3] == ["block 0 · producer", "block 0 · group 1", "block 1 · producer"]


def test_slices_instants_and_counters_match_the_trace():
    trace = decode(basic_capture())
    out = load(trace)
    ev, t0 = out["traceEvents"], out["otherData"]["start_ns"]
    assert t0 == trace.start_ns == T0
    for lane, name in [
        (0, "block 0 · group 0"),
        (1, "block 0 · group 1"),
        (2, "block 1 · group 0"),
    ]:
        assert slices(ev, *thread_of(ev, name), t0) == expected_slices(trace, lane)
    inst = [(e["name"], e["ts"]) for e in ev if e["ph"] == "i"]
    assert inst == [("store", 0.035)]
    ctr = [(e["pid"], e["ts"], e["args"]["blocks"]) for e in ev if e["ph"] == "C"]
    assert ctr == [(1, 0.05, 1), (1, 70.0, 0), (2, 0.0, 1), (2, 0.4, 0)]


def test_microseconds_keep_every_nanosecond():
    # 3.7 s after the start and 1 ns long: absolute µs in a double would lose the ns.
    far = 3_700_000_001
    cap = capture(
        {(0, 0): (T0, 0, [(BEGIN, 0, 1), (END, 0, 2), (BEGIN, 1, far), (END, 1, far + 1)])},
        num_blocks=1,
        num_groups=1,
    )
    trace = decode(cap)
    ev = load(trace)["traceEvents"]
    x = sorted((e["ts"], e["dur"]) for e in ev if e["ph"] == "X" and e["name"] == "mma")
    assert x == [(far / 1000, 0.001)]
    assert round(x[0][0] * 1000) == far


def test_overlap_thread_and_unmatched():
    cap = capture(
        {
            (0, 0): (
                T0,
                1,
                [
                    (END, 2, 5),
                    (BEGIN, 0, 10),
                    (BEGIN, 1, 20),
                    (END, 0, 30),
                    (END, 1, 40),
                    (INSTANT, 2, 45),
                ],
            )
        },
        num_blocks=1,
        num_groups=1,
    )
    trace = decode(cap)
    ev = load(trace)["traceEvents"]
    main, over = thread_of(ev, "block 0"), thread_of(ev, "block 0 (overlap)")
    assert slices(ev, *main, T0) == Counter([("load", T0 + 10, 20)])
    assert slices(ev, *over, T0) == Counter([("mma", T0 + 20, 20)])
    assert {e["name"] for e in ev if e["ph"] == "i"} == {"unmatched end: store", "store"}


def test_multi_capture_and_emulated_labels(tmp_path):
    a = basic_capture(name="gemm", flags=fmt.FLAG_EMULATED)
    b = capture({(0, 0): (T0 + 1000, 17, [(BEGIN, 0, 1010), (END, 0, 1020)])}, name="softmax")
    out = load(decode([a, b]))
    ev = out["traceEvents"]
    one, two = (
        thread_of(ev, "gemm · block 0 · group 0"),
        thread_of(ev, "softmax · block 0 · group 0"),
    )
    assert one != two and one[0] == two[0]
    assert out["otherData"]["emulated"] is True
    assert all(
        a["name"].endswith("(emulated)") or a["name"] == "launches"
        for a in meta(ev, "process_name").values()
    )
    kern = {
        e["name"]: (e["ts"], e["dur"])
        for e in ev
        if e["ph"] == "X" and e["name"].startswith(("gemm", "softmax"))
    }
    assert kern == {"gemm": (0.0, 70.0), "softmax": (1.0, 0.02)}


def test_export_writes_json_and_json_gz(tmp_path):
    trace = decode(basic_capture())
    export(trace, tmp_path / "t.json")
    export(trace, tmp_path / "t.json.gz")
    plain = json.loads((tmp_path / "t.json").read_text())
    zipped = json.loads(gzip.decompress((tmp_path / "t.json.gz").read_bytes()))
    assert plain == zipped == load(trace)
