"""Hostile input (issue 15): one regression test per item of the independent fuzz's findings.

Every item was a silently wrong result or an exception other than sm_profiler's own; each test
below is the short reproducer from the issue, asserting the clear error or the correct result.
"""

from __future__ import annotations

import numpy as np
import pytest
from reference_encoder import BEGIN, END, Lane, Stream, encode

from sm_profiler import format as fmt
from sm_profiler.capture import Capture
from sm_profiler.decode import decode
from sm_profiler.errors import ConfigError, FormatError
from sm_profiler.stats import compute_stats


def one_lane(anchor: int, records, sm: int = 1, capacity: int = 4) -> Capture:
    return Capture(encode(Stream(1, 1, capacity, {(0, 0): Lane(anchor, sm, records)})))


# -- 1. times at or above 2**63 ns ------------------------------------------------------------


def test_1_times_past_2_63_are_refused_not_wrapped():
    a = 2**63 - 16
    with pytest.raises(FormatError, match=r"lane 0: record 1 .* past the largest time"):
        decode(one_lane(a, [(BEGIN, 0, a + 8), (END, 0, a + 32)]))
    with pytest.raises(FormatError, match=r"lane 0: anchor 9223372036854775816 ns is past"):
        decode(one_lane(2**63 + 8, [(BEGIN, 0, 2**63 + 9)]))


def test_1_times_just_below_2_63_decode_exactly():
    a = 2**63 - 64
    trace = decode(one_lane(a, [(BEGIN, 0, a + 8), (END, 0, a + 63)]))
    assert trace.events["start_ns"].tolist() == [a + 8]
    assert trace.events["end_ns"].tolist() == [2**63 - 1]


# -- 2. SM ids that do not fit int32 -----------------------------------------------------------


@pytest.mark.parametrize("sm", [2**31, 0xFFFFFFFF])
def test_2_sm_ids_past_int32_are_refused(sm):
    with pytest.raises(FormatError, match=f"lane 0: SM id {sm} is above {fmt.MAX_SM_ID}"):
        decode(one_lane(100, [(BEGIN, 0, 108)], sm=sm))


def test_2_largest_sm_id_decodes():
    trace = decode(one_lane(100, [(BEGIN, 0, 108), (END, 0, 109)], sm=fmt.MAX_SM_ID))
    assert trace.lanes["sm"].tolist() == [fmt.MAX_SM_ID]


# -- 4. stats of blocks 2**61 ns or more apart ---------------------------------------------------


@pytest.mark.parametrize("gap", [2**61, 2**62, 2**63 - 1000])
def test_4_stats_of_blocks_far_apart_on_one_sm(gap):
    s = Stream(2, 1, 4)
    s.lanes[(0, 0)] = Lane(100, 1, [(BEGIN, 0, 108), (END, 0, 200)])
    s.lanes[(1, 0)] = Lane(gap + 100, 1, [(BEGIN, 0, gap + 108), (END, 0, gap + 300)])
    st = compute_stats(decode(Capture(encode(s))))
    assert st.sms.busy_ns.tolist() == [100 + 200]
    assert st.span.duration_ns == gap + 200


# -- 14. API misuse ------------------------------------------------------------------------------


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
