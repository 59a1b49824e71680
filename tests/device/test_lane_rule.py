"""The lane rule: every device spelling agrees with format.open_lane, on the same inputs.

Spellings: ptx.OPEN_LANE (the Gluon ops and the CUDA C++ header), run on the CPU by
tests/support/ptx_eval.py, both as ptx.py writes it and as the generated header spells it; the
Triton ops' `_launch_slot` + `_lane_in_slot`, run through a tiny kernel (Triton's interpreter on
a CPU machine, the compiled kernel on a GPU); and cute_ops.init, compiled by CuteDSL for sm_90a
and its PTX run on the same evaluator, one thread at a time. Inputs: the explicit edge cases
(last slot, a slot past the last, a one-slot buffer, lanes just outside the shape and negative
indices, ring flag on and off, a lane index whose offset needs 64 bits) and random ones
(hypothesis).
"""

from __future__ import annotations

import ast
import os
import re

import numpy as np
import ptx_eval
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sm_profiler.record import cuda, ptx
from sm_profiler.wire import format as fmt

U32 = fmt.LOW32
U64 = (1 << 64) - 1
BASE = 0x7F00_0000_0000  # where the evaluator's buffer starts (a byte address)
TIMER, SMID = 0x1234_5678_9ABC_DEF0, 77


def header(num_blocks, num_groups, capacity, flags=0, next_slot=0, last_slot=0) -> list[int]:
    """Slot 0's header words, as the host writes them (w3 as given: any next, any last)."""
    words = [int(w) for w in fmt.encode_header(num_blocks, num_groups, capacity, flags)]
    words[fmt.HDR_SLOTS] = (next_slot & U32) | (last_slot << 32)
    return words


# (header, [(block, group), ...]): every edge case the rule has.
def _edge_cases() -> list[tuple[list[int], list[tuple[int, int]]]]:
    nb, ng, cap = 5, 3, 16
    near = [
        (0, 0),
        (nb - 1, ng - 1),
        (nb, 0),
        (0, ng),
        (nb, ng),
        (-1, 0),
        (0, -1),
        (-1, -1),
        (2, 1),
        (U32 >> 1, 0),
        (-(1 << 31), 0),
    ]
    cases = []
    for flags in (0, fmt.FLAG_RING, fmt.FLAG_RING | fmt.FLAG_EMULATED):
        cases.append((header(nb, ng, cap, flags), near))  # one slot (w3 = 0)
        for next_slot, last in ((0, 3), (2, 3), (3, 3), (4, 3), (9, 3), (U32, 3), (U32, 0)):
            cases.append((header(nb, ng, cap, flags, next_slot, last), near))
    # Capacity 0 in the header (not a layout the host writes, but the rule still holds).
    cases.append((header(nb, ng, 0, fmt.FLAG_RING), near))
    # The largest lane of the largest buffer: its offset needs 64 bits, also within one slot.
    big = (fmt.MAX_BLOCKS, fmt.MAX_GROUPS, fmt.MAX_CAPACITY)
    far = [(fmt.MAX_BLOCKS - 1, fmt.MAX_GROUPS - 1), (fmt.MAX_BLOCKS // 2, 7), (0, 0)]
    cases.append((header(*big), far))
    cases.append((header(*big, fmt.FLAG_RING, next_slot=5, last_slot=fmt.MAX_SLOTS - 1), far))
    cases.append((header(*big, 0, next_slot=fmt.MAX_SLOTS, last_slot=fmt.MAX_SLOTS - 1), far))
    return cases


EDGE_CASES = _edge_cases()


def test_the_edge_cases_reach_every_branch_of_the_rule():
    out = [fmt.open_lane(h, b, g) for h, lanes in EDGE_CASES for b, g in lanes]
    assert any(cap == 0 for _, cap, _ in out) and any(cap != 0 for _, cap, _ in out)
    assert any(mask != U32 for *_, mask in out) and any(mask == U32 for *_, mask in out)
    assert any(off > U32 for off, _, _ in out)  # a 64-bit offset
    # A lane outside the shape of a ring buffer keeps the all-ones mask.
    h = header(5, 3, 16, fmt.FLAG_RING)
    assert fmt.open_lane(h, 5, 0) == (0, 0, U32)
    assert fmt.open_lane(h, 4, 2) == ((4 * 3 + 2) * 18 + 2, 16, 15)


def test_reference_matches_the_layout_the_host_decodes():
    # A real lane's records[0] is where Layout.lanes puts record 0 of that lane, slot by slot.
    layout = fmt.Layout(3, 2, 4)
    words = np.zeros(fmt.slotted_words(layout.total_words, 3), np.uint64)
    words[: fmt.HEADER_WORDS] = layout.header()
    words[fmt.HDR_SLOTS] = fmt.slot_control(2, 3)
    off, cap, mask = fmt.open_lane(words, 2, 1)
    assert (cap, mask) == (4, U32)
    slot2 = words[2 * layout.total_words :][: layout.total_words].copy()
    slot2[fmt.HEADER_WORDS + off - 2 * layout.total_words] = 99  # record 0 of lane (2, 1)
    assert layout.lanes(slot2)[2 * 2 + 1]["records"][0] == 99


# -- the PTX text, on the CPU evaluator -------------------------------------------------------


def _header_open_lane_text() -> str:
    """SM_PROFILER_PTX_OPEN_LANE from the generated CUDA header, as the C compiler reads it."""
    with open(os.path.join(cuda.include_dir(), "sm_profiler_ptx.h")) as f:
        src = f.read()
    m = re.search(r"#define SM_PROFILER_PTX_OPEN_LANE \\\n((?:\s*\".*\"(?: \\)?\n)+)", src)
    assert m, "SM_PROFILER_PTX_OPEN_LANE not found in sm_profiler_ptx.h"
    return "".join(ast.literal_eval(s) for s in re.findall(r"\"(?:[^\"\\]|\\.)*\"", m.group(1)))


TEXTS = {"ptx.py": (ptx.OPEN_LANE, False), "cuda header": (_header_open_lane_text(), True)}


def run_open_lane(text, cuda_spelling, words, block, group, opens=1, stamps=1):
    memory = {BASE + i * fmt.WORD_BYTES: w for i, w in enumerate(words[: fmt.HEADER_WORDS])}
    operands = {3: BASE, 4: block & U32, 5: group & U32, 6: opens, 7: stamps}
    return ptx_eval.run(
        text, operands, memory, {"%globaltimer": TIMER, "%smid": SMID}, cuda=cuda_spelling
    )


def check_ptx(text, cuda_spelling, words, block, group, stamps=1):
    offset, capacity, mask = fmt.open_lane(words, block, group)
    res = run_open_lane(text, cuda_spelling, words, block, group, stamps=stamps)
    assert (res.outputs[0], res.outputs[1], res.outputs[2]) == (offset, capacity, mask), (
        block,
        group,
        words,
    )
    # The stamp: the anchor at lane header word 0, the SM id at word 1, only for a real lane and
    # only where this thread stamps.
    lane_header = (
        BASE + (fmt.HEADER_WORDS + offset - fmt.LANE_HEADER_WORDS) * fmt.WORD_BYTES
    ) & U64
    real = _in_shape(words, block, group)
    expected = [(lane_header, 64, TIMER), (lane_header + fmt.WORD_BYTES, 32, SMID)]
    assert res.writes == (expected if real and stamps else [])


def _in_shape(words, block, group) -> bool:
    nb, ng = words[fmt.HDR_SHAPE] & U32, words[fmt.HDR_SHAPE] >> 32
    ctrl = words[fmt.HDR_SLOTS]
    slot = min(ctrl & U32, (ctrl >> 32) + 1)
    return (block & U32) < nb and (group & U32) < ng and slot <= ctrl >> 32


@pytest.mark.parametrize("spelling", list(TEXTS))
def test_ptx_text_agrees_with_the_reference_on_the_edge_cases(spelling):
    text, cuda_spelling = TEXTS[spelling]
    for words, lanes in EDGE_CASES:
        for block, group in lanes:
            for stamps in (0, 1):
                check_ptx(text, cuda_spelling, words, block, group, stamps)


def test_the_header_spells_the_same_text():
    assert ptx_eval.cuda_to_llvm(TEXTS["cuda header"][0]) == ptx.OPEN_LANE.replace("_${:uid}", "")


@pytest.mark.parametrize("spelling", list(TEXTS))
def test_a_warp_that_does_not_open_loads_and_writes_nothing(spelling):
    text, cuda_spelling = TEXTS[spelling]
    words = header(5, 3, 16, fmt.FLAG_RING, 1, 3)
    res = run_open_lane(text, cuda_spelling, words, 1, 1, opens=0, stamps=1)
    assert res.outputs == {0: 0, 1: 0, 2: U32}
    assert res.loads == [] and res.writes == []


def test_the_evaluator_refuses_what_it_does_not_know():
    with pytest.raises(ptx_eval.PtxError, match="unknown opcode"):
        ptx_eval.run("{\n\t.reg .u32 a;\n\tpopc.b32 a, $0;\n\t}", {0: 1}, {})
    with pytest.raises(ptx_eval.PtxError, match="undeclared"):
        ptx_eval.run("mov.u32 b, $0;", {0: 1}, {})


# Random headers within the host's limits (format.MAX_*), any slot control, indices near the
# bounds and anywhere in 32 bits.
_HEADERS = st.builds(
    header,
    st.integers(0, fmt.MAX_BLOCKS),
    st.integers(0, fmt.MAX_GROUPS),
    st.integers(0, fmt.MAX_CAPACITY),
    st.sampled_from([0, fmt.FLAG_RING, fmt.FLAG_EMULATED, fmt.FLAG_RING | fmt.FLAG_EMULATED]),
    st.one_of(st.integers(0, 8), st.integers(0, U32)),
    st.one_of(st.integers(0, 8), st.integers(0, fmt.MAX_SLOTS - 1)),
)


@st.composite
def _indices(draw, words, n):
    nb, ng = words[fmt.HDR_SHAPE] & U32, words[fmt.HDR_SHAPE] >> 32
    near = lambda bound: st.integers(max(0, bound - 2), bound + 1)  # noqa: E731
    anyi32 = st.integers(-(1 << 31), (1 << 31) - 1)
    return [
        (
            draw(st.one_of(near(nb), st.integers(0, max(nb, 1)), anyi32)),
            draw(st.one_of(near(ng), st.integers(0, max(ng, 1)), anyi32)),
        )
        for _ in range(n)
    ]


@settings(max_examples=300, deadline=None)
@given(data=st.data(), words=_HEADERS)
def test_ptx_text_agrees_with_the_reference_on_random_inputs(data, words):
    for block, group in data.draw(_indices(words, 4)):
        for text, cuda_spelling in TEXTS.values():
            check_ptx(text, cuda_spelling, words, block, group)


# -- the Triton spelling ----------------------------------------------------------------------

triton = pytest.importorskip("triton")
torch = pytest.importorskip("torch")
tl = triton.language
triton_ops = pytest.importorskip("sm_profiler.triton_ops")

N_LANES = 16  # lanes per launch of lane_rule_kernel


@triton.jit
def lane_rule_kernel(hdr, blocks, groups, out, N: tl.constexpr):
    """out[0:N] records[0]'s byte offset from hdr, out[N:2N] capacity, out[2N:3N] ring mask."""
    i = tl.arange(0, N)
    block = tl.load(blocks + i)
    group = tl.load(groups + i)
    slot = triton_ops._launch_slot(hdr)
    records, capacity, valid, mask = triton_ops._lane_in_slot(slot, block, group)
    tl.store(out + i, records.to(tl.int64) - hdr.to(tl.int64))
    tl.store(out + N + i, capacity.to(tl.int64))
    tl.store(out + 2 * N + i, mask.to(tl.int64))


def _device() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


def run_triton(words, lanes) -> list[tuple[int, int, int]]:
    lanes = (lanes * N_LANES)[:N_LANES]
    dev = _device()
    # A whole slotted buffer is not needed: the kernel only reads slot 0's header.
    hdr = torch.tensor(np.array(words, np.uint64).view(np.int64), device=dev)
    blocks = torch.tensor([b for b, _ in lanes], dtype=torch.int32, device=dev)
    groups = torch.tensor([g for _, g in lanes], dtype=torch.int32, device=dev)
    out = torch.zeros(3 * N_LANES, dtype=torch.int64, device=dev)
    lane_rule_kernel[(1,)](hdr, blocks, groups, out, N=N_LANES)
    o = [int(x) for x in out.cpu().numpy().view(np.uint64)]
    return [(o[k] & U64, o[N_LANES + k] & U32, o[2 * N_LANES + k] & U32) for k in range(N_LANES)]


def _i32(x: int) -> int:
    x &= U32
    return x - (1 << 32) if x >> 31 else x


def check_triton(words, lanes):
    lanes = [(_i32(b), _i32(g)) for b, g in lanes]
    got = run_triton(words, lanes)
    for (block, group), res in zip((lanes * N_LANES)[:N_LANES], got, strict=True):
        offset, capacity, mask = fmt.open_lane(words, block, group)
        # A pointer holds the offset in bytes, modulo 2**64 (as the PTX's address does).
        records_bytes = (fmt.HEADER_WORDS + offset) * fmt.WORD_BYTES & U64
        assert res == (records_bytes, capacity, mask), (block, group, words)


def test_triton_spelling_agrees_with_the_reference_on_the_edge_cases():
    for words, lanes in EDGE_CASES:
        check_triton(words, lanes)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), words=_HEADERS)
def test_triton_spelling_agrees_with_the_reference_on_random_inputs(data, words):
    check_triton(words, data.draw(_indices(words, N_LANES)))


# -- the CuteDSL spelling: cute_ops.init compiled for sm_90a, its PTX run on the CPU evaluator ---

OUT = 0x1000  # where the probe kernel writes what init found
CUTE_TIDS = (0, 5, 37)  # thread 0 (stamps per block), a thread of warp 0, lane 5 of warp 1


@pytest.fixture(scope="module")
def cute_probes():
    """{(per_warp, ring): the probe kernel's PTX}: four compiles of a fraction of a second."""
    pytest.importorskip("cutlass", reason="needs CuteDSL: pip install nvidia-cutlass-dsl==4.8.1")
    import tempfile

    import cute_kernels as K
    import cutlass
    import cutlass.cute as cute
    from cutlass import Int32
    from cutlass.cute.runtime import make_ptr

    def ptr():
        return make_ptr(cutlass.Int64, 0, cute.AddressSpace.gmem, assumed_align=8)

    out = {}
    with tempfile.TemporaryDirectory() as d:
        opts = f"--gpu-arch sm_90a --keep-ptx --dump-dir {d}"
        for per_warp in (False, True):
            for ring in (False, True):
                args = (ptr(), ptr(), Int32(0), Int32(0), per_warp, ring)
                out[per_warp, ring] = cute.compile(K.lane_probe, *args, options=opts).__ptx__
    return out


def _slot_headers(words) -> dict[int, int]:
    """Memory for the compiled kernel: slot 0's header, and every slot's (and the spare one's)
    shape and capacity words, which the host writes alike in each slot (format.py)."""
    memory = {BASE + i * fmt.WORD_BYTES: w for i, w in enumerate(words[: fmt.HEADER_WORDS])}
    nb, ng, cap = words[fmt.HDR_SHAPE] & U32, words[fmt.HDR_SHAPE] >> 32, words[2] & U32
    ctrl = words[fmt.HDR_SLOTS]
    slot = min(ctrl & U32, (ctrl >> 32) + 1)
    at = BASE + slot * (nb * ng * fmt.lane_stride_words(cap) + fmt.HEADER_WORDS) * fmt.WORD_BYTES
    for i in (fmt.HDR_SHAPE, fmt.HDR_CAPACITY_FLAGS):
        memory.setdefault((at + i * fmt.WORD_BYTES) & U64, words[i])
    return memory


def check_cute(ptx_module, per_warp, ring, words, block, group, tid):
    res = ptx_eval.run_kernel(
        ptx_module,
        [BASE, OUT, block & U32, group & U32],
        _slot_headers(words),
        {"%tid.x": tid, "%laneid": tid % 32, "%globaltimer": TIMER, "%smid": SMID},
    )
    lane_group = _i32(group + tid // 32) if per_warp else group
    offset, capacity, mask = fmt.open_lane(words, block, lane_group)
    records = (BASE + (fmt.HEADER_WORDS + offset) * fmt.WORD_BYTES) & U64
    stamps = [w for w in res.writes if w[0] < OUT or w[0] >= OUT + 24]
    got = {a - OUT: v for a, _, v in res.writes if OUT <= a < OUT + 24}
    want = {0: records, 8: capacity} | (
        {16: mask | (U64 ^ U32 if mask == U32 else 0)} if ring else {}
    )
    assert got == want, (per_warp, ring, block, group, tid, words)
    stamper = (tid % 32 == 0) if per_warp else (tid == 0)
    lane_header = records - fmt.LANE_HEADER_WORDS * fmt.WORD_BYTES
    expected = [(lane_header, 64, TIMER), (lane_header + fmt.WORD_BYTES, 32, SMID)]
    real = _in_shape(words, block, lane_group)
    assert stamps == (expected if real and stamper else []), (per_warp, block, group, tid)


@pytest.mark.parametrize("per_warp", [False, True])
@pytest.mark.parametrize("ring", [False, True])
def test_cute_spelling_agrees_with_the_reference_on_the_edge_cases(cute_probes, per_warp, ring):
    for words, lanes in EDGE_CASES:
        for block, group in lanes:
            for tid in CUTE_TIDS:
                check_cute(cute_probes[per_warp, ring], per_warp, ring, words, block, group, tid)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data(), words=_HEADERS)
def test_cute_spelling_agrees_with_the_reference_on_random_inputs(cute_probes, data, words):
    for block, group in data.draw(_indices(words, 2)):
        for (per_warp, ring), module in cute_probes.items():
            check_cute(module, per_warp, ring, words, _i32(block), _i32(group), 37)
