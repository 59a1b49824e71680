"""The shared inline-PTX texts (sm_profiler/ptx.py): what each record mode tests and stores."""

import re

import pytest

from sm_profiler import format as fmt
from sm_profiler import ptx


def _stores(text: str) -> list[str]:
    return re.findall(r"(@!?\w+ )?st\.global\.\w+ \[[^\]]+\], \S+;", text)


@pytest.mark.parametrize("mode", ptx.RECORD_MODES)
@pytest.mark.parametrize("after", [False, True])
def test_every_mode_reads_the_timer_once_and_stores_once_or_counts_the_drop(mode, after):
    text = ptx.record(after, mode=mode)
    # One record store (in bounds) and one drop-cursor store (overflow), on opposite predicates.
    assert "@pin st.global.u64 [a], r;" in text
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
