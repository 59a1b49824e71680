"""Bounded, seeded fuzzing of merge inputs (issue 23): hostile rank metadata (clock samples,
barrier stamps, ranks) and malformed torch traces raise only sm_profiler's errors, on one line,
in bounded memory. Run longer with SM_PROFILER_FUZZ=20. The one-item regression tests are in
test_merge.py."""

from __future__ import annotations

import json
import os

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from reference_encoder import INSTANT, Lane, Stream, encode, examples
from strategies import SETTINGS

from sm_profiler.errors import SmProfilerError
from sm_profiler.trace.decode import decode
from sm_profiler.wire.capture import Capture

ns_values = st.one_of(
    st.integers(-(2**70), 2**70),
    st.floats(),
    st.text(max_size=5),
    st.none(),
    st.booleans(),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)


clock_values = st.one_of(
    ns_values,
    st.lists(
        st.one_of(
            ns_values,
            st.fixed_dictionaries(
                {"host_ns": ns_values, "offset_ns": ns_values}, optional={"error_ns": ns_values}
            ),
        ),
        max_size=3,
    ),
)


@settings(max_examples=examples(150), **SETTINGS)
@given(clock_values, ns_values, ns_values, st.sampled_from(["auto", "clock", "barrier", "none"]))
def test_merge_of_hostile_rank_metadata_raises_only_our_errors(clock, barrier, rank, align):
    import tempfile

    from sm_profiler.export.merge import merge_ranks

    a = Capture(encode(Stream(1, 1, 2, {(0, 0): Lane(99, 1, [(INSTANT, 3, 100)])})), {3: "x"})
    b = Capture(a.words, {3: "x"}, {}, "k", {"clock": clock, "barrier_ns": barrier, "rank": rank})
    with tempfile.TemporaryDirectory() as d:
        try:
            merge_ranks([[a], [b]], os.path.join(d, "m.json"), align=align)
        except SmProfilerError as e:
            assert "\n" not in str(e)
            return
        json.loads(open(os.path.join(d, "m.json")).read())


def _good_torch_text(parts) -> str:
    rows = [
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": "aten::mm",
            "pid": 1,
            "tid": 1,
            "ts": 1.5,
            "dur": 3.0,
            "args": {"shape": [[2, 2]]},
        }
    ]
    for p in parts:
        rows.append(
            {
                "ph": "X",
                "cat": "kernel",
                "name": p.kernels[0].name,
                "pid": 0,
                "tid": 7,
                "ts": (int(p.start_ns) - 50) / 1e3,
                "dur": 0.2,
            }
        )
    return json.dumps({"schemaVersion": 1, "baseTimeNanoseconds": 0, "traceEvents": rows})


def test_merge_torch_of_malformed_json_raises_only_our_errors_in_bounded_memory(tmp_path):
    import gzip
    import tracemalloc

    from sm_profiler.export.merge import merge_torch_trace

    caps = [
        Capture(
            encode(
                Stream(1, 1, 2, {(0, 0): Lane(99 + 1000 * i, 1, [(INSTANT, 3, 100 + 1000 * i)])})
            ),
            {3: "x"},
            {},
            "k",
        )
        for i in range(3)
    ]
    good = _good_torch_text([decode([c]) for c in caps])
    rng = np.random.default_rng(2323)
    values = [
        None,
        "abc",
        1e300,
        -1e300,
        float("nan"),
        [],
        {},
        [1, [2]],
        True,
        -5,
        2**70,
        "1e3",
        {"ts": 1},
        "\x1b[2J",
        0.5,
    ]
    seen: dict[str, int] = {}
    tracemalloc.start()
    try:
        for _ in range(examples(300)):
            how = rng.integers(0, 4)
            if how == 0:  # bytes flipped or cut in the text
                data = bytearray(good.encode())
                for _ in range(int(rng.integers(1, 4))):
                    data[int(rng.integers(0, len(data)))] = int(rng.integers(0, 256))
                if rng.random() < 0.3:
                    data = data[: int(rng.integers(0, len(data)))]
                text = bytes(data)
            else:  # a field of a row, or of the document, replaced by another JSON value
                doc = json.loads(good)
                target = doc if how == 1 else doc["traceEvents"][int(rng.integers(0, 4))]
                keys = list(target) + ["extra"]
                key = keys[int(rng.integers(0, len(keys)))]
                target[key] = values[int(rng.integers(0, len(values)))]
                if how == 3 and rng.random() < 0.5:
                    doc["traceEvents"].insert(
                        int(rng.integers(0, 4)), values[int(rng.integers(0, len(values)))]
                    )
                text = json.dumps(doc).encode()
            gz = rng.random() < 0.3
            path = tmp_path / ("t.json.gz" if gz else "t.json")
            path.write_bytes(gzip.compress(text) if gz else text)
            try:
                merge_torch_trace(path, caps, tmp_path / "m.json")
                outcome = "ok"
            except SmProfilerError as e:
                assert "\n" not in str(e)
                outcome = type(e).__name__
            seen[outcome] = seen.get(outcome, 0) + 1
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    print(seen)
    assert peak < 64 << 20, peak
    assert seen.get("ok", 0) > 10 and seen.get("CaptureError", 0) > 50, seen
