"""The wire format's constants agree with each other, with the docs, and with the encoder."""

from __future__ import annotations

import pathlib
import re

import numpy as np
import pytest
from repo_paths import ROOT

from sm_profiler.errors import ConfigError, FormatError
from sm_profiler.wire import format as fmt

DOC = pathlib.Path(ROOT) / "docs" / "format.md"


def test_record_fields_tile_the_low_word():
    assert fmt.KIND_MASK == 0b11 and fmt.EVENT_SHIFT == fmt.KIND_BITS
    assert fmt.MAX_EVENT_ID == 4095 and fmt.NUM_EVENT_IDS == 4096
    id_bits = fmt.EVENT_MASK << fmt.EVENT_SHIFT
    assert fmt.KIND_MASK & id_bits == 0 and fmt.TAG_RESERVED_MASK & (id_bits | fmt.KIND_MASK) == 0
    assert fmt.TAG_RESERVED_MASK | id_bits | fmt.KIND_MASK == fmt.LOW32
    assert fmt.TAG_SHIFT == 32
    assert {fmt.KIND_BEGIN, fmt.KIND_END, fmt.KIND_INSTANT} == {1, 2, 3}  # 0 = empty slot


def test_make_tag_places_kind_and_id():
    tag = fmt.make_tag(fmt.MAX_EVENT_ID, fmt.KIND_INSTANT)
    assert tag & fmt.KIND_MASK == fmt.KIND_INSTANT
    assert (tag >> fmt.EVENT_SHIFT) & fmt.EVENT_MASK == fmt.MAX_EVENT_ID
    assert tag & fmt.TAG_RESERVED_MASK == 0 and tag != 0


def test_magic_spells_smpf():
    assert fmt.MAGIC.to_bytes(4, "little") == b"SMPF"


def test_header_round_trips_through_from_header():
    layout = fmt.Layout.checked(3, 2, 5, fmt.FLAG_EMULATED)
    words = np.zeros(layout.total_words, np.uint64)
    words[: fmt.HEADER_WORDS] = layout.header()
    assert fmt.Layout.from_header(words) == layout
    assert layout.emulated and layout.num_lanes == 6 and layout.lane_words == 7
    assert layout.total_words == fmt.HEADER_WORDS + 6 * 7
    assert layout.total_bytes == layout.total_words * 8
    assert int(words[0]) == fmt.MAGIC | (fmt.VERSION << 32)
    assert int(words[1]) == 3 | (2 << 32) and int(words[2]) == 5 | (fmt.FLAG_EMULATED << 32)
    assert not words[3 : fmt.HEADER_WORDS].any()


def test_lane_view_matches_the_offsets():
    layout = fmt.Layout.checked(2, 1, 3)
    words = np.arange(layout.total_words, dtype=np.uint64)
    lanes = layout.lanes(words)
    base = fmt.HEADER_WORDS + layout.lane_words
    assert int(lanes["anchor"][1]) == base + fmt.LANE_ANCHOR
    assert int(lanes["sm_attempted"][1]) == base + fmt.LANE_SM_ATTEMPTED
    assert lanes["records"][1].tolist() == [base + 2, base + 3, base + 4]
    assert np.shares_memory(lanes, words)
    assert fmt.lane_dtype(3).itemsize == layout.lane_words * fmt.WORD_BYTES


@pytest.mark.parametrize(
    "args, message",
    [
        ((0, 1, 1), "num_blocks must be positive, got 0"),
        ((1, -2, 1), "num_groups must be positive, got -2"),
        ((1, 1, True), "max_events_per_group must be an int, got bool"),
        ((1.0, 1, 1), "num_blocks must be an int, got float"),
        ((fmt.MAX_BLOCKS + 1, 1, 1), "larger than the supported"),
        ((fmt.MAX_BLOCKS, fmt.MAX_GROUPS, fmt.MAX_CAPACITY), "GiB.*lower max_events_per_group"),
    ],
)
def test_checked_refuses_bad_sizes(args, message):
    with pytest.raises(ConfigError, match=message):
        fmt.Layout.checked(*args)


def test_from_header_refuses_a_size_that_does_not_match():
    layout = fmt.Layout.checked(2, 2, 2)
    words = np.zeros(layout.total_words + 1, np.uint64)
    words[: fmt.HEADER_WORDS] = layout.header()
    with pytest.raises(FormatError, match=f"needs {layout.total_words}"):
        fmt.Layout.from_header(words)


# -- docs/format.md stays in step ------------------------------------------------------------


def test_the_format_doc_states_the_current_version_and_constants():
    text = DOC.read_text()
    assert re.search(rf"\bVERSION\b.*\b{fmt.VERSION}\b", text), "docs/format.md: version"
    assert f"0x{fmt.MAGIC:08X}" in text.upper().replace("0X", "0x")
    for value in (fmt.HEADER_WORDS, fmt.LANE_HEADER_WORDS, fmt.MAX_EVENT_ID):
        assert str(value) in text
    for name in ("HDR_SHAPE", "LANE_SM_ATTEMPTED", "KIND_BEGIN", "FLAG_EMULATED", "FormatError"):
        assert name in text, name
