"""Bounded, seeded fuzzing of the torch.profiler traces we read (issue 52, item 7): a trace's
events with a field (args, ts, dur, pid, tid, name, ph, cat, id, an arg) or a top-level key
replaced by another JSON value or left out, given to `merge --torch` and carried in a rank file
(`stats`, `advise`, `merge`), end in a result or one line of sm_profiler's, never another
exception. Run longer with SM_PROFILER_FUZZ=20. The one-item regression tests are in
test_torch_trace_hostile5.py."""

from __future__ import annotations

import copy
import json

import numpy as np
from auto_inputs import table_of, torch_doc_of, two_kernels
from reference_encoder import examples

from sm_profiler.cli import main
from sm_profiler.export import auto_torch_parts as torch_parts

VALUES = [
    None, "abc", "", 1e300, -1e300, float("nan"), float("inf"), [], {}, [1, [2]], True, False,
    -5, 0, 2**70, -(2**70), "1e3", 0.5, "stream 7", ["stream 7"], {"name": 3}, {"name": [1]},
    {"name": "stream 7"}, {"sort_index": "x"}, {"sort_index": 2**70}, {"correlation": "x"},
    {"device": [0]}, {"rank": "0"},
]  # fmt: skip
FIELDS = ("args", "ts", "dur", "pid", "tid", "name", "ph", "cat", "id", "bp", "s")
TOP = ("baseTimeNanoseconds", "distributedInfo", "deviceProperties", "displayTimeUnit")


def _mutated(doc: dict, rng) -> dict:
    """`doc` with one or two fields replaced or removed: of an event, an event's args, or the
    document."""
    doc = copy.deepcopy(doc)
    events = doc["traceEvents"]

    def value():
        return VALUES[int(rng.integers(len(VALUES)))]

    for _ in range(int(rng.integers(1, 3))):
        if rng.random() < 0.1:
            doc[TOP[int(rng.integers(len(TOP)))]] = value()
            continue
        e = events[int(rng.integers(len(events)))]
        # args most often: the readers take most of their values from there.
        key = "args" if rng.random() < 0.3 else FIELDS[int(rng.integers(len(FIELDS)))]
        args = e.get("args")
        if rng.random() < 0.15:
            e.pop(key, None)
        elif key == "args" and isinstance(args, dict) and args and rng.random() < 0.5:
            args[list(args)[int(rng.integers(len(args)))]] = value()
        else:
            e[key] = value()
    return doc


def _run(argv, capsys) -> str:
    """The outcome of `sm-profiler ARGV`: 'ok', or 'refused' having said one line."""
    rc = main(argv)
    err = capsys.readouterr().err
    if rc == 2:
        assert len(err.strip().splitlines()) == 1, err
        return "refused"
    assert rc == 0, (rc, err)
    return "ok"


def test_mutated_torch_traces_end_in_a_result_or_one_line(tmp_path, capsys):
    table = table_of(two_kernels(), step_tag=1, session={"step_tags": {"1": 3}})
    good = torch_doc_of(table)
    capture = str(tmp_path / "auto.npz")
    table.save(capture)
    trace, rank_file = tmp_path / "t.json", str(tmp_path / "rank" / "auto.npz")
    (tmp_path / "rank").mkdir()
    rng = np.random.default_rng(52)
    seen: dict[tuple[str, str], int] = {}
    for _ in range(examples(300)):
        doc = _mutated(good, rng)
        trace.write_text(json.dumps(doc))
        table.save(rank_file, torch_parts.members(doc))
        for what, argv in (
            ("merge --torch", ["merge", "--torch", str(trace), capture, "-o", str(tmp_path / "m.json")]),
            ("stats", ["stats", rank_file]),
            ("advise", ["advise", rank_file]),
            ("merge", ["merge", rank_file, "-o", str(tmp_path / "j.json")]),
        ):  # fmt: skip
            key = (what, _run(argv, capsys))
            seen[key] = seen.get(key, 0) + 1
    # Both outcomes are reached: the mutations are neither all harmless nor all fatal.
    assert seen.get(("merge --torch", "ok"), 0) > 2 and seen.get(("merge", "refused"), 0) > 2, seen
