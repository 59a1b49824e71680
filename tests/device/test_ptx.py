"""The shared inline-PTX texts (sm_profiler/record/ptx.py): what each record mode tests and stores."""

import re

import pytest

from sm_profiler.record import ptx
from sm_profiler.wire import format as fmt


def _stores(text: str) -> list[str]:
    return re.findall(r"(@!?\w+ )?st\.global\.\w+ \[[^\]]+\], \S+;", text)


@pytest.mark.parametrize("vector", [False, True])
@pytest.mark.parametrize("mode", ptx.RECORD_MODES)
@pytest.mark.parametrize("after", [False, True])
def test_every_mode_reads_the_timer_once_and_stores_once_or_counts_the_drop(mode, after, vector):
    text = ptx.record(after, mode=mode, vector=vector)
    # One record store (in bounds) and one drop-cursor store (overflow), on opposite predicates.
    store = "@pin st.global.v2.u32 [a], {lo, $4};" if vector else "@pin st.global.u64 [a], r;"
    assert store in text
    assert f"@pov st.global.u32 [$0+{ptx.LAST_DROPPED_OFFSET_BYTES}], $1;" in text
    assert len(re.findall(r"\bst\.global", text)) == 2
    assert "pin|pov" in text
    # `after` reads the timer under both values of a predicate on the dependency ($5).
    assert text.count("%globaltimer") == (2 if after else 1)
    assert ("setp.ne.u32 pd, $5, 0;" in text) == after
    assert not re.search(r"\b(atom|red|membar|fence|ld)\.", text)


def test_modes_differ_only_in_who_stores():
    warp, every, thread = (ptx.record(False, mode=m) for m in ("warp", "all", "thread"))
    # warp: a warp-uniform branch over the whole event on the leader flag ($3)
    assert "setp.ne.u32 pl, $3, 0;\n\t@!pl bra.uni SMP_DONE_${:uid};" in warp
    assert warp.rstrip("}").rstrip().endswith("SMP_DONE_${:uid}:")
    # all: no leader test at all (out-of-shape lanes rely on capacity 0 and the scratch word)
    assert "pl" not in every.replace(".pred pl,", "") and "bra" not in every
    # thread: the leader flag is and-ed into the bounds test, per thread
    assert "setp.lt.and.u32 pin|pov, $1, $2, pl;" in thread and "bra" not in thread


def test_operands_shift_past_tritons_dummy_output():
    text = ptx.record(False, first=1, mode="all")
    assert "mad.wide.u32 a, $2, 8, $1;" in text and text.endswith("mov.u32 $0, 0;\n\t}")
    assert "$0" not in text.replace("mov.u32 $0, 0;", "")


def test_an_unknown_mode_is_refused_with_the_choices():
    with pytest.raises(ValueError, match="record mode 'lane'.*warp"):
        ptx.record(False, mode="lane")


def test_offsets_point_back_into_the_lane_header():
    assert ptx.ANCHOR_OFFSET_BYTES == -fmt.LANE_HEADER_WORDS * fmt.WORD_BYTES
    assert ptx.SM_OFFSET_BYTES == ptx.ANCHOR_OFFSET_BYTES + fmt.WORD_BYTES
    # Out-of-shape lanes: records = word HEADER_WORDS, so the drop store hits the scratch word.
    scratch_hi = fmt.HEADER_WORDS * fmt.WORD_BYTES + ptx.LAST_DROPPED_OFFSET_BYTES
    assert scratch_hi == fmt.HDR_SCRATCH * fmt.WORD_BYTES + 4


# -- staged texts -------------------------------------------------------------------------------


@pytest.mark.parametrize("after", [False, True])
def test_a_staged_event_is_one_timer_read_and_one_shared_store(after):
    text = ptx.record_staged(after)
    # the caller computed the slot's address: no branch, no bound, no arithmetic here
    assert "st.shared.v2.u32 [$0], {lo, $1};" in text and text.count("st.") == 1
    assert not re.search(r"\b(ld|atom|red|membar|fence)\.|\bbra\b", text)
    assert text.count("%globaltimer") == (2 if after else 1)
    assert ("setp.ne.u32 pd, $2, 0;" in text) == after


def test_the_flush_writes_at_most_capacity_records_and_nothing_for_an_out_of_shape_lane():
    text = ptx.flush()
    # kept = min(cursor <= STAGE ? cursor : STAGE - 1, capacity), 0 without a region of its own
    assert "setp.le.u32 pk, $1, n;\n\tselp.u32 n, $1, $4, pk;\n\tmin.u32 n, n, $2;" in text
    assert "setp.ne.u32 pl, $5, 0;\n\tselp.u32 n, n, 0, pl;" in text
    # the copy loop is bounded by n; the lane header's two stores need capacity != 0
    assert "setp.lt.u32 pk, i, n;\n\t@!pk bra SMP_COPIED_${:uid};" in text
    stores = re.findall(r"(@\w+ )?st\.global\.u64 \[([^\]]+)\]", text)
    assert stores == [("", "g"), ("@pv ", "$0+-16"), ("@pv ", "$0+-8")]
    assert "setp.ne.u32 pv, $2, 0;" in text
    assert "bar.warp.sync -1;" in text and not re.search(r"\b(atom|membar|fence)\.", text)


def test_the_staged_init_declares_the_stage_and_touches_no_global_memory():
    text = ptx.init_staged(num_warps=4, stage_events=100)
    nbytes = ptx.stage_bytes(4, 100)
    assert nbytes == -(-5 * 102 * 8 // 1024) * 1024  # 4 warps + the spare region, 1 KiB units
    assert f".shared .align 16 .b8 smp_stage_${{:uid}}[{nbytes}];" in text
    assert not re.search(r"\b(st|ld)\.global", text)
    assert "add.u32 $1, a, 16;" in text  # the ops hold slot 0, past the lane-header words
    # warp w uses region min(w, 4); the flag says whether it is its own
    assert "setp.lt.u32 q, w, 4;\n\tselp.u32 $0, 1, 0, q;" in text
    assert "min.u32 w, w, 4;\n\tmad.lo.u32 a, w, 816, a;" in text


def test_stage_errors_name_the_problem_and_the_fix():
    assert ptx.stage_error(4, 64) == ""
    assert "must be >= 1" in ptx.stage_error(4, 0)
    msg = ptx.stage_error(8, 1000)
    assert "STAGE=1000 needs" in msg and "lower STAGE" in msg and "49152" in msg
    with pytest.raises(ValueError, match="STAGE=1000 needs"):
        ptx.init_staged(8, 1000)


def test_the_vector_store_is_for_ptxas_13_and_newer():
    assert not ptx.vector_store_for((12, 8)) and not ptx.vector_store_for((12, 9))
    assert ptx.vector_store_for((13, 0)) and ptx.vector_store_for((13, 4))
    assert not ptx.vector_store_for(None)  # unknown: the spelling measured on the GPU machine
