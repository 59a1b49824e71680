"""Hostile input to the decoder (issues 15 and 23): times and SM ids at the edges of their fields,
wrong argument types, random lane headers, ring lanes whose mark does not match their slots.

Tests are named test_<item>_... after the item of the issue they reproduce."""

from __future__ import annotations

import numpy as np
import pytest
from captures import lane_base, lane_capture, ring_words
from hypothesis import given, settings
from hypothesis import strategies as st
from reference_encoder import BEGIN, END, INSTANT, Lane, Stream, encode, examples
from strategies import SETTINGS, ring_streams

from sm_profiler.errors import ConfigError, FormatError
from sm_profiler.export import to_chrome_json, to_perfetto_bytes
from sm_profiler.report.stats import compute_stats
from sm_profiler.trace.decode import decode
from sm_profiler.wire import format as fmt
from sm_profiler.wire.capture import Capture


def test_1_times_past_2_63_are_refused_not_wrapped():
    a = 2**63 - 16
    with pytest.raises(FormatError, match=r"lane 0: record 1 .* past the largest time"):
        decode(lane_capture(a, [(BEGIN, 0, a + 8), (END, 0, a + 32)]))
    with pytest.raises(FormatError, match=r"lane 0: anchor 9223372036854775816 ns is past"):
        decode(lane_capture(2**63 + 8, [(BEGIN, 0, 2**63 + 9)]))


def test_1_times_just_below_2_63_decode_exactly():
    a = 2**63 - 64
    trace = decode(lane_capture(a, [(BEGIN, 0, a + 8), (END, 0, a + 63)]))
    assert trace.events["start_ns"].tolist() == [a + 8]
    assert trace.events["end_ns"].tolist() == [2**63 - 1]


@pytest.mark.parametrize("sm", [2**31, 0xFFFFFFFF])
def test_2_sm_ids_past_int32_are_refused(sm):
    with pytest.raises(FormatError, match=f"lane 0: SM id {sm} is above {fmt.MAX_SM_ID}"):
        decode(lane_capture(100, [(BEGIN, 0, 108)], sm=sm))


def test_2_largest_sm_id_decodes():
    trace = decode(lane_capture(100, [(BEGIN, 0, 108), (END, 0, 109)], sm=fmt.MAX_SM_ID))
    assert trace.lanes["sm"].tolist() == [fmt.MAX_SM_ID]


def test_14_decode_of_nothing_or_of_the_wrong_type_is_a_config_error(small_capture):
    with pytest.raises(ConfigError, match="at least one capture"):
        decode([])
    with pytest.raises(ConfigError, match="got int"):
        decode(5)
    with pytest.raises(ConfigError, match="got str"):
        decode([small_capture, "x"])


def test_14_decode_of_a_bare_array_is_a_capture_without_names(small_capture):
    bare = decode(small_capture.words)
    named = decode(small_capture)
    assert bare.events["start_ns"].tolist() == named.events["start_ns"].tolist()
    assert bare.event_names == {}
    with pytest.raises(FormatError, match="too short"):
        decode(np.zeros(3, np.uint64))


# Lane headers anywhere in 64 bits, most near the edges that used to wrap.
wide_anchors = st.one_of(
    st.integers(1, 2**64 - 1),
    st.integers(2**63 - 2**33, 2**63 + 2**33),
    st.integers(2**61 - 2**20, 2**61 + 2**20),
)


wide_sms = st.one_of(st.integers(0, 2**32 - 1), st.sampled_from([2**31 - 1, 2**31, 2**32 - 1]))


@st.composite
def hostile_streams(draw) -> Stream:
    s = Stream(draw(st.integers(1, 3)), 1, draw(st.integers(1, 6)))
    for b in range(s.num_blocks):
        if draw(st.booleans()):
            a = draw(wide_anchors)
            recs, t = [], a
            for kind in draw(st.lists(st.sampled_from([BEGIN, END, INSTANT]), max_size=6)):
                t += draw(st.integers(0, 2**32 - 1))
                recs.append((kind, draw(st.integers(0, 3)), t))
            s.lanes[(b, 0)] = Lane(a, draw(wide_sms), recs)
    return s


def _encode_wide(stream: Stream) -> np.ndarray:
    """encode(), with anchors and times past 2**64 reduced modulo 2**64 as the device would."""
    for lane in stream.lanes.values():
        lane.anchor_ns %= 2**64
    return encode(stream)


@settings(max_examples=examples(150), **SETTINGS)
@given(hostile_streams())
def test_hostile_lane_headers_give_a_format_error_or_a_sane_trace(stream):
    try:
        trace = decode(Capture(_encode_wide(stream)))
    except FormatError:
        return
    ev, lanes = trace.events, trace.lanes
    assert (ev["start_ns"] >= 0).all() and (ev["end_ns"] >= ev["start_ns"]).all()
    assert (lanes["sm"][lanes["initialized"]] >= 0).all()
    assert (lanes["sm"][~lanes["initialized"]] == -1).all()
    compute_stats(trace)
    to_perfetto_bytes(trace)
    to_chrome_json(trace)


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
