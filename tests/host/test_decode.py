"""Decoder examples, one rule each; the random coverage is in test_decode_properties.py."""

from __future__ import annotations

import numpy as np
import pytest
from reference_encoder import BEGIN, END, INSTANT, Lane, Stream, actual, encode, expected

from sm_profiler.errors import FormatError
from sm_profiler.trace.decode import decode
from sm_profiler.trace.model import INSTANT as ROW_INSTANT
from sm_profiler.trace.model import RANGE, UNMATCHED_BEGIN, UNMATCHED_END
from sm_profiler.wire import format as fmt
from sm_profiler.wire.capture import Capture

U32 = 2**32


def one_lane(records, capacity=8, anchor=1000, sm=0) -> Capture:
    return Capture(words=encode(Stream(1, 1, capacity, {(0, 0): Lane(anchor, sm, records)})))


def test_small_capture_decodes_to_the_expected_rows(small_stream, small_capture):
    trace = decode(small_capture)
    t0 = small_stream.lanes[(0, 0)].anchor_ns
    assert actual(trace).rows == [
        (0, 1, RANGE, t0 + 5, t0 + 40),
        (0, 2, RANGE, t0 + 20, t0 + 30),
        (1, 7, ROW_INSTANT, t0 + 2, t0 + 2),
        (2, 1, RANGE, t0 + 3, t0 + 9),  # overlapping ranges of two ids on one lane
        (2, 2, RANGE, t0 + 4, t0 + 11),
    ]
    assert actual(trace).unmatched == [(1, 1, UNMATCHED_END, t0 + 3)]
    assert trace.lanes["sm"].tolist() == [3, 4, 5, -1]
    assert trace.lanes["initialized"].tolist() == [True, True, True, False]
    assert trace.lanes["written"].tolist() == [4, 2, 4, 0]
    assert trace.event_name(2) == "mma" and trace.lane_label(0, 1, 0) == "block 1 · producer"
    assert trace.kernels[0].name == "small" and trace.kernels[0].metadata == {"note": "fixture"}


def test_times_cross_the_low_word_wrap():
    anchor = 7 * U32 - 3
    recs = [(BEGIN, 0, anchor + 1), (END, 0, anchor + 5), (INSTANT, 1, anchor + 5 + U32 - 1)]
    trace = decode(one_lane(recs, anchor=anchor))
    assert trace.events["start_ns"].tolist() == [anchor + 1, anchor + 5 + U32 - 1]
    assert trace.events["end_ns"].tolist() == [anchor + 5, anchor + 5 + U32 - 1]


def test_a_gap_of_2_32_ns_or_more_is_lost_modulo_2_32():
    """The documented limit: consecutive events of a lane must be < 2**32 ns apart."""
    anchor = 1000
    trace = decode(one_lane([(INSTANT, 0, anchor + U32 + 7)], anchor=anchor))
    assert trace.events["start_ns"].tolist() == [anchor + 7]


def test_each_end_closes_the_latest_open_begin_of_its_id():
    recs = [(BEGIN, 1, 10), (BEGIN, 1, 20), (END, 1, 30), (BEGIN, 2, 35), (END, 1, 40)]
    recs += [(END, 2, 50), (END, 2, 60), (BEGIN, 3, 70)]
    trace = decode(one_lane(recs, anchor=5))
    assert [(r[1], r[3], r[4]) for r in actual(trace).rows] == [
        (1, 10, 40),
        (1, 20, 30),
        (2, 35, 50),
    ]
    assert actual(trace).unmatched == [(0, 2, UNMATCHED_END, 60), (0, 3, UNMATCHED_BEGIN, 70)]


def test_overflow_reports_attempted_and_dropped():
    recs = [(BEGIN, 0, 10 + i) if i % 2 == 0 else (END, 0, 10 + i) for i in range(11)]
    trace = decode(one_lane(recs, capacity=4))
    assert trace.lanes["written"].tolist() == [4]
    assert trace.lanes["attempted"].tolist() == [11]
    assert trace.lanes["dropped"].tolist() == [7]
    assert trace.dropped_total == 7
    assert len(trace) == 2 and len(trace.unmatched["kind"]) == 0


def test_a_lane_filled_exactly_to_capacity_did_not_overflow():
    trace = decode(one_lane([(INSTANT, 0, 10 + i) for i in range(4)], capacity=4))
    assert trace.lanes["attempted"].tolist() == [4] and trace.dropped_total == 0


def test_lanes_that_never_ran_and_a_capture_with_no_records():
    trace = decode(Capture(words=encode(Stream(3, 2, 5))))
    assert len(trace) == 0 and len(trace.unmatched["kind"]) == 0
    assert trace.lanes["initialized"].tolist() == [False] * 6
    assert trace.lanes["sm"].tolist() == [-1] * 6
    assert trace.start_ns == 0 and trace.end_ns == 0


def test_an_initialised_lane_with_no_records_keeps_its_anchor_and_sm():
    trace = decode(one_lane([], anchor=123, sm=9))
    assert trace.lanes["anchor_ns"].tolist() == [123] and trace.lanes["sm"].tolist() == [9]
    assert trace.start_ns == 123


def test_deep_nesting_pairs_by_level():
    depth = 300  # past the per-level passes: the radix-sort path
    recs = [(BEGIN, i % 5, 10 + i) for i in range(depth)]
    recs += [(END, (depth - 1 - i) % 5, 10 + depth + i) for i in range(depth)]
    stream = Stream(1, 1, 2 * depth, {(0, 0): Lane(1, 0, recs)})
    assert actual(decode(Capture(words=encode(stream)))).rows == expected(stream).rows


def test_many_event_ids_overlapping():
    ids = list(range(0, 4096, 97))  # more ids than the per-id passes: the radix-sort path
    recs = [(BEGIN, e, 10 + i) for i, e in enumerate(ids)]
    recs += [(END, e, 1000 + i) for i, e in enumerate(ids)]
    stream = Stream(1, 1, len(recs), {(0, 0): Lane(1, 0, recs)})
    trace = decode(Capture(words=encode(stream)))
    assert actual(trace).rows == expected(stream).rows
    assert sorted(trace.events["event"].tolist()) == ids


def test_decode_of_several_captures_numbers_them():
    caps = [one_lane([(INSTANT, 0, 10)], anchor=5), one_lane([(INSTANT, 0, 20)], anchor=6)]
    trace = decode(caps)
    assert trace.events["capture"].tolist() == [0, 1]
    assert trace.lanes["capture"].tolist() == [0, 1]
    assert [k.name for k in trace.kernels] == ["kernel", "kernel"]


def test_output_dtypes():
    trace = decode(one_lane([(BEGIN, 0, 10), (END, 0, 20), (END, 1, 30)]))
    ints = {"capture", "lane", "sm", "block", "group", "event"}
    for table in (trace.events, trace.unmatched):
        for name in ints:
            assert table[name].dtype == np.int32, name
        assert table["kind"].dtype == np.int8
    for name in ("start_ns", "end_ns"):
        assert trace.events[name].dtype == np.int64
    assert trace.unmatched["time_ns"].dtype == np.int64
    assert trace.lanes["written"].dtype == np.int64 and trace.lanes["initialized"].dtype == bool


# -- what the decoder refuses -----------------------------------------------------------------


def words_with(stream: Stream, **edits) -> np.ndarray:
    w = encode(stream)
    for i, v in edits.items():
        w[int(i[1:])] = np.uint64(v)
    return w


def test_wrong_magic_says_what_to_pass():
    w = encode(Stream(1, 1, 2))
    w[0] = np.uint64(0x12345678 | (fmt.VERSION << 32))
    with pytest.raises(
        FormatError, match=r"not an sm_profiler buffer: magic 0x12345678.*get_buffer"
    ):
        decode(Capture(words=w))


def test_wrong_version_names_both_versions():
    w = encode(Stream(1, 1, 2))
    w[0] = np.uint64(fmt.MAGIC | ((fmt.VERSION + 1) << 32))
    readable = ", ".join(map(str, fmt.READABLE_VERSIONS))
    assert readable.startswith("1, ") and readable.endswith(f", {fmt.VERSION}")
    with pytest.raises(
        FormatError, match=f"version {fmt.VERSION + 1}; .* reads versions {readable}$"
    ):
        decode(Capture(words=w))


def test_a_drop_before_the_lane_is_full_reads_in_version_3_only():
    # A staged lane (STAGE=2 < capacity 4) kept 1 record of 3: last_dropped = 2, lane not full.
    w = encode(Stream(1, 1, 4, {(0, 0): Lane(5, 0, [(INSTANT, 0, 6)])}))
    j = fmt.HEADER_WORDS + fmt.LANE_SM_ATTEMPTED
    w[j] = np.uint64((int(w[j]) & fmt.LOW32) | (2 << 32))
    t = decode(Capture(words=w))
    assert t.lanes["written"].tolist() == [1] and t.lanes["attempted"].tolist() == [3]
    for old in (1, 2):  # older writers drop only past a full lane: there it is corrupt
        w[0] = np.uint64(fmt.MAGIC | (old << 32))
        with pytest.raises(FormatError, match="lane 0: overflow index 2 is impossible"):
            decode(Capture(words=w))


def test_scratch_word_is_ignored_in_version_2_and_reserved_in_version_1():
    stream = Stream(1, 1, 2, {(0, 0): Lane(5, 0, [(INSTANT, 0, 6)])})
    w = encode(stream)
    w[fmt.HDR_SCRATCH] = np.uint64(7 << 32)  # an out-of-shape lane's cursor
    assert decode(Capture(words=w)).events["event"].tolist() == [0]
    w[0] = np.uint64(fmt.MAGIC | (1 << 32))
    with pytest.raises(FormatError, match=f"header word {fmt.HDR_SCRATCH} is reserved"):
        decode(Capture(words=w))
    w[fmt.HDR_SCRATCH] = np.uint64(0)
    assert decode(Capture(words=w)).events["event"].tolist() == [0]  # version 1 still reads


@pytest.mark.parametrize("cut", [0, 3, fmt.HEADER_WORDS, fmt.HEADER_WORDS + 1, -1])
def test_truncated_buffers(cut):
    w = encode(Stream(2, 1, 2, {(0, 0): Lane(5, 0, [(INSTANT, 0, 6)])}))
    with pytest.raises(FormatError, match="too short|truncated"):
        decode(Capture(words=w[:cut]))


def test_a_record_after_an_empty_slot_names_the_lane_and_the_fix():
    w = encode(Stream(2, 1, 4, {(1, 0): Lane(5, 0, [(INSTANT, 0, 6)])}))
    base = fmt.HEADER_WORDS + 1 * (4 + 2) + 2
    w[base + 2] = w[base]
    with pytest.raises(
        FormatError, match=r"lane 1: 2 non-zero records but only the first 1 .*init_buffer"
    ):
        decode(Capture(words=w))


def test_records_in_a_lane_that_never_ran():
    w = encode(Stream(1, 1, 4))
    w[fmt.HEADER_WORDS + 2] = np.uint64((INSTANT << fmt.TAG_SHIFT) | 5)
    with pytest.raises(FormatError, match="lane 0 .*never initialised"):
        decode(Capture(words=w))


@pytest.mark.parametrize("tag", [0x4, 1 << 14, 1 << 31])  # kind 0; reserved bits
def test_bad_record_tags(tag):
    w = encode(Stream(1, 1, 4, {(0, 0): Lane(5, 0, [(INSTANT, 0, 6)])}))
    w[fmt.HEADER_WORDS + 3] = np.uint64((tag << fmt.TAG_SHIFT) | 7)
    with pytest.raises(FormatError, match=f"lane 0: record 1 has tag 0x{tag:08x}"):
        decode(Capture(words=w))


def test_reserved_header_words_and_unknown_flags():
    w = encode(Stream(1, 1, 2))
    w[5] = np.uint64(1)
    with pytest.raises(FormatError, match="header word 5 is reserved"):
        decode(Capture(words=w))
    w = encode(Stream(1, 1, 2, flags=1 << 3))
    with pytest.raises(FormatError, match="flags 0x8"):
        decode(Capture(words=w))


def test_impossible_shapes_in_the_header():
    for nb, ng, cap in ((0, 1, 1), (1, 0, 1), (1, 1, 0), (fmt.MAX_BLOCKS + 1, 1, 1)):
        w = np.zeros(fmt.HEADER_WORDS + 4, np.uint64)
        w[: fmt.HEADER_WORDS] = fmt.encode_header(nb, ng, cap)
        with pytest.raises(FormatError, match="impossible header"):
            decode(Capture(words=w))


def test_non_integer_words_are_refused():
    with pytest.raises(FormatError, match="64-bit integers"):
        Capture(words=np.zeros(16, np.float64))
    with pytest.raises(FormatError, match="64-bit integers"):
        Capture(words=np.zeros(16, np.uint32))


def test_int64_strided_and_big_endian_words_decode_the_same(small_capture):
    want = actual(decode(small_capture)).rows
    w = small_capture.words
    assert actual(decode(Capture(words=w.view(np.int64)))).rows == want
    strided = np.zeros((len(w), 2), np.uint64)
    strided[:, 0] = w
    assert actual(decode(Capture(words=strided[:, 0]))).rows == want
    assert actual(decode(Capture(words=w.astype(">u8")))).rows == want
