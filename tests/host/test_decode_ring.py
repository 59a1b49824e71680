"""Ring mode on the host: decode(encode(ring stream)) keeps each lane's newest records, oldest
first, pairs ranges across the wrap and reports the ends whose begins were overwritten."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from reference_encoder import (
    BEGIN,
    END,
    INSTANT,
    Lane,
    Stream,
    actual,
    check_invariants,
    encode,
    examples,
    expected,
)
from strategies import SETTINGS, ring_streams

from sm_profiler.errors import ConfigError, FormatError
from sm_profiler.report.stats import compute_stats
from sm_profiler.trace.decode import decode
from sm_profiler.wire import format as fmt
from sm_profiler.wire.capture import Capture


@settings(max_examples=examples(300), **SETTINGS)
@given(ring_streams())
def test_ring_round_trip_keeps_the_newest_records(stream):
    trace = decode(Capture(words=encode(stream)))
    want, got = expected(stream), actual(trace)
    assert got.rows == want.rows
    assert got.unmatched == want.unmatched
    assert got.written == want.written
    assert got.attempted == want.attempted
    assert got.anchor_ns == want.anchor_ns
    assert trace.kernels[0].ring
    check_invariants(trace)


def test_an_end_at_the_ring_start_is_unmatched_not_paired():
    t0 = 1 << 40
    recs = [
        (BEGIN, 1, t0 + 1),
        (BEGIN, 0, t0 + 2),
        (END, 0, t0 + 3),
        (END, 1, t0 + 4),
        (BEGIN, 0, t0 + 5),
        (END, 0, t0 + 6),
    ]
    s = Stream(1, 1, 4, {(0, 0): Lane(t0, 7, recs)}, fmt.FLAG_RING)
    trace = decode(Capture(words=encode(s), event_names={0: "a", 1: "outer"}))
    # Kept: E0@3, E1@4, B0@5, E0@6: the first two lost their begins to the wrap.
    assert [
        (int(k), int(e), int(t) - t0)
        for k, e, t in zip(
            trace.unmatched["kind"],
            trace.unmatched["event"],
            trace.unmatched["time_ns"],
            strict=True,
        )
    ] == [(END, 0, 3), (END, 1, 4)]
    assert (trace.events["start_ns"] - t0).tolist() == [5]
    assert trace.lanes["dropped"].tolist() == [2]
    st_ = compute_stats(trace)
    assert any("2 older records overwritten in 1 lanes" in w for w in st_.warnings)
    assert not any("Raise max_events_per_group" in w for w in st_.warnings)


def test_unclosed_full_ring_lanes_are_reported():
    t0 = 1 << 40
    recs = [(INSTANT, 0, t0 + i) for i in range(1, 5)]
    s = Stream(1, 1, 4, {(0, 0): Lane(t0, 3, recs, closed=False)}, fmt.FLAG_RING)
    trace = decode(Capture(words=encode(s)))
    assert trace.kernels[0].ring_unclosed_lanes == [0]
    assert any("not closed by profiler_flush" in w for w in compute_stats(trace).warnings)


def test_ring_capacity_must_be_a_power_of_two():
    with pytest.raises(ConfigError, match="power of two.*use 4 or 8"):
        fmt.Layout.checked(1, 1, 6, fmt.FLAG_RING)
    words = fmt.Layout(1, 1, 6, fmt.FLAG_RING).header()
    import numpy as np

    words = np.concatenate([words, np.zeros(8, np.uint64)])
    with pytest.raises(FormatError, match="not a power of two"):
        decode(Capture(words=words))


@settings(max_examples=examples(200), **SETTINGS)
@given(
    st.integers(1, 3),
    st.sampled_from([1, 2, 4]),
    st.lists(
        st.one_of(
            st.integers(0, (1 << 64) - 1),
            st.integers(0, 64),
            st.integers(0, 64).map(lambda n: (fmt.RING_MARK | n) << 32),
            st.just(0),
        ),
        max_size=40,
    ),
)
def test_random_ring_lanes_decode_or_raise_format_error(nb, cap, body):
    import numpy as np
    from reference_encoder import decode_or_format_error

    words = [int(w) for w in fmt.encode_header(nb, 1, cap, fmt.FLAG_RING)]
    n = nb * (cap + fmt.LANE_HEADER_WORDS)
    decode_or_format_error(np.array(words + (body + [0] * n)[:n], dtype=np.uint64))
