"""docs/architecture.md's recipe for a device front end, run as written (issue 53, the recipes
checked by a test): its block is a whole front end (`toy_ops`, a thin file over
record/ptx.py); each lane's texts run on the CPU evaluator (support/ptx_eval.py) against a
buffer laid out by format.Layout, as a GPU runs them, in the order the recipe says (the lane
opened once, a record per event with the cursor moved on after each, a ring lane closed), and
the host decodes the buffer with trace/decode.py as it is: the times, SM ids and drops given to
the evaluator come back, at any clock origin, in slots and in a ring. The recipe said neither
what a front end must emit nor where its records start."""

from __future__ import annotations

import ast
import os
import re
import types

import numpy as np
import ptx_eval
import pytest
from repo_paths import ROOT

from sm_profiler.record import ptx
from sm_profiler.trace.decode import decode
from sm_profiler.wire import format as fmt
from sm_profiler.wire.capture import Capture

BASE = 0x7F3A_0000_0000  # the buffer's device address
B, E, INSTANT = fmt.KIND_BEGIN, fmt.KIND_END, fmt.KIND_INSTANT
NAMES = {0: "load", 1: "mma", 2: "mark"}


def _recipe() -> str:
    """The python block of docs/architecture.md's "Adding a device front end"."""
    text = open(os.path.join(ROOT, "docs", "architecture.md"), encoding="utf-8").read()
    section = text.split("## Adding a device front end", 1)[1].split("\n## ", 1)[0]
    (block,) = re.findall(r"```python\n(.*?)```", section, re.S)
    return block


@pytest.fixture(scope="module")
def toy() -> types.ModuleType:
    """The recipe's block as the module `toy_ops`."""
    module = types.ModuleType("toy_ops")
    exec(compile(_recipe(), "toy_ops.py", "exec"), module.__dict__)
    return module


class Gpu:
    """A buffer's words at BASE, and one thread of the toy's texts run on them at a time: the
    texts' loads read the words, their stores land in them (never outside the buffer)."""

    def __init__(self, words: np.ndarray):
        self.words = words

    def run(self, asm: tuple[str, str], operands: dict[int, int], timer_ns: int, sm: int = 0):
        memory = {BASE + i * fmt.WORD_BYTES: int(w) for i, w in enumerate(self.words)}
        res = ptx_eval.run(asm[0], operands, memory, {"%globaltimer": timer_ns, "%smid": sm})
        for address, bits, value in res.writes:
            word, byte = divmod(address - BASE, fmt.WORD_BYTES)
            assert 0 <= word < len(self.words), f"a store outside the buffer: word {word}"
            old = int(self.words[word])
            if bits == 64:
                assert byte == 0
                new = value
            else:  # a 32-bit half of a word
                shift = 8 * byte
                new = old & ~(fmt.LOW32 << shift) | value << shift
            self.words[word] = new
        return res.outputs

    def lane(self, toy, block: int, group: int, sm: int, opened_ns: int, events, closed_ns: int):
        """One lane as the recipe says a front end's ops run it: OPEN at its start, EVENT per
        event (the cursor moved on after each, stored or not), CLOSE after the last."""
        out = self.run(toy.OPEN, {3: BASE, 4: block, 5: group, 6: 1, 7: 1}, opened_ns, sm)
        offset, capacity, mask = out[0], out[1], out[2]
        records = toy.records_address(BASE, offset)
        cursor = 0
        for event, kind, t_ns in events:
            regs = {0: records, 1: cursor, 2: capacity, 3: 1, 4: toy.tag(event, kind), 5: mask}
            self.run(toy.EVENT, regs, t_ns)
            cursor += 1
        self.run(toy.CLOSE, {0: records, 1: cursor, 2: capacity, 3: 1, 4: mask}, closed_ns)


def _ranges(t0: int, n: int, event: int = 0, first_ns: int = 100) -> list[tuple[int, int, int]]:
    """`n` ranges of `event` back to back, 200 ns each, the first `first_ns` after t0."""
    out = []
    for k in range(n):
        start = t0 + first_ns + 200 * k
        out += [(event, B, start), (event, E, start + 150)]
    return out


def _decoded(words: np.ndarray):
    return decode(Capture(words=words, event_names=dict(NAMES), kernel_name="toy"))


def _events_of(trace, block: int, group: int) -> list[tuple[str, int, int]]:
    ev = trace.events
    mine = (ev["block"] == block) & (ev["group"] == group)
    return sorted(
        (NAMES[int(e)], int(a), int(b))
        for e, a, b in zip(ev["event"][mine], ev["start_ns"][mine], ev["end_ns"][mine], strict=True)
    )


def _lane_row(trace, block: int, group: int) -> dict:
    lanes = trace.lanes
    (i,) = np.flatnonzero((lanes["block"] == block) & (lanes["group"] == group))
    return {k: int(v[i]) for k, v in lanes.items()}


def test_the_recipe_is_a_thin_file_over_ptx_and_format(toy):
    # Only ptx.py's texts and format's sizes: a front end never retypes either.
    imports = [
        n for n in ast.walk(ast.parse(_recipe())) if isinstance(n, (ast.Import, ast.ImportFrom))
    ]
    got = sorted((n.module, a.name) for n in imports for a in n.names)
    assert got == [("sm_profiler.record", "ptx"), ("sm_profiler.wire", "format")]
    assert toy.OPEN[0] == ptx.OPEN_LANE and toy.CLOSE[0] == ptx.RING_CLOSE
    # Each text takes as many operands as its constraints name.
    for text, constraints in (toy.OPEN, toy.EVENT, toy.CLOSE):
        used = {int(n) for n in re.findall(r"\$(\d+)", text)}
        assert used == set(range(len(constraints.split(","))))


@pytest.mark.parametrize("origin_ns", [0, 10**12, 1_700_000_000_000_000_000])
def test_the_host_decodes_what_the_recipe_s_front_end_recorded(toy, origin_ns):
    layout = fmt.Layout(3, 2, 4)
    gpu = Gpu(np.zeros(layout.total_words, np.uint64))
    gpu.words[: fmt.HEADER_WORDS] = layout.header()
    t0 = origin_ns + 5_000
    marks = [(0, B, t0 + 100), (0, E, t0 + 600), (2, INSTANT, t0 + 700)]
    gpu.lane(toy, 0, 0, 7, t0, marks, t0 + 800)
    nested = [(1, B, t0 + 50), (0, B, t0 + 60), (0, E, t0 + 90), (1, E, t0 + 400)]
    gpu.lane(toy, 1, 1, 3, t0 + 10, nested, t0 + 500)
    gpu.lane(toy, 2, 0, 5, t0 + 20, _ranges(t0, 3), t0 + 900)  # 6 records for 4: 2 dropped
    gpu.lane(toy, 3, 0, 6, t0 + 30, _ranges(t0, 1), t0 + 900)  # out of shape: block 3 of 3
    scratch = int(gpu.words[fmt.HDR_SCRATCH])
    trace = _decoded(gpu.words)

    assert _events_of(trace, 0, 0) == [("load", t0 + 100, t0 + 600), ("mark", t0 + 700, t0 + 700)]
    assert _events_of(trace, 1, 1) == [("load", t0 + 60, t0 + 90), ("mma", t0 + 50, t0 + 400)]
    assert _events_of(trace, 2, 0) == [("load", t0 + 100, t0 + 250), ("load", t0 + 300, t0 + 450)]
    assert [_lane_row(trace, b, g)["sm"] for b, g in ((0, 0), (1, 1), (2, 0))] == [7, 3, 5]
    assert _lane_row(trace, 0, 0)["anchor_ns"] == t0
    assert (_lane_row(trace, 2, 0)["attempted"], _lane_row(trace, 2, 0)["dropped"]) == (6, 2)
    assert trace.dropped_total == 2 and len(trace.unmatched["kind"]) == 0
    assert not _lane_row(trace, 0, 1)["initialized"]  # a lane no program opened
    # The out-of-shape lane wrote nothing but its drop cursors into the header's scratch word.
    assert scratch != 0 and 6 not in trace.lanes["sm"]


def test_launches_take_their_slots_and_a_ring_lane_keeps_its_newest_records(toy):
    # Two launches into a slotted ring buffer of capacity 4: OPEN finds each launch's slot
    # from the header's control word (the host's step moves it on between launches).
    layout = fmt.Layout(1, 1, 4, fmt.FLAG_RING)
    words = np.zeros(fmt.slotted_words(layout.total_words, 2), np.uint64)
    for k in range(2):
        words[k * layout.total_words :][: fmt.HEADER_WORDS] = layout.header()
    gpu = Gpu(words)
    t0 = 1_700_000_000_000_000_000
    for launch, n in enumerate((1, 3)):  # the second launch's 6 records wrap its ring of 4
        gpu.words[fmt.HDR_SLOTS] = fmt.slot_control(launch, 2)
        start = t0 + 10_000 * launch
        gpu.lane(toy, 0, 0, 11 + launch, start, _ranges(start, n), start + 1_000)
    gpu.words[fmt.HDR_SLOTS] = fmt.slot_control(2, 2)
    slots, missed = fmt.split_slots(gpu.words)
    first, second = (_decoded(w) for w in slots)
    assert missed == 0 and len(slots) == 2
    assert _events_of(first, 0, 0) == [("load", t0 + 100, t0 + 250)]
    assert _lane_row(first, 0, 0)["sm"] == 11
    s = t0 + 10_000
    # The ring kept the newest 4 records (two ranges) and the close's count says 6 attempted.
    assert _events_of(second, 0, 0) == [("load", s + 300, s + 450), ("load", s + 500, s + 650)]
    assert (_lane_row(second, 0, 0)["sm"], _lane_row(second, 0, 0)["attempted"]) == (12, 6)
