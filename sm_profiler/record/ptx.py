"""The inline PTX every device front end emits, as plain strings: the Triton ops, the Gluon ops,
cute_ops (CuteDSL), the CUDA C++ header (generated from these texts by sm_profiler.record.cuda) and auto
mode (sm_profiler.auto_mode splices the auto_* texts into compiled kernels).

One text for all, so that they put the same words in the same places; offsets come from
`format`, and the lane rule's reference is `format.open_lane` (tests/device/test_lane_rule.py runs
OPEN_LANE against it). Operands are LLVM inline-asm `$n` references numbered from `first` (Triton's elementwise
asm must have an output, so its operands start at $1 and it ends with a dummy `mov.u32 $0, 0`).
No triton or cutlass import: tests read these strings too.
"""

from __future__ import annotations

import re

from ..wire import format as fmt

# Byte offsets from records[0] (what the ops hold) back into the lane header.
ANCHOR_OFFSET_BYTES = (fmt.LANE_ANCHOR - fmt.LANE_HEADER_WORDS) * fmt.WORD_BYTES  # -16
SM_OFFSET_BYTES = (fmt.LANE_SM_ATTEMPTED - fmt.LANE_HEADER_WORDS) * fmt.WORD_BYTES  # -8
# The high 32-bit half of lane word 1 (-4): the cursor of the latest record that did not fit;
# the lane attempted that + 1 records (format.lane_word1).
LAST_DROPPED_OFFSET_BYTES = SM_OFFSET_BYTES + 4

_STAMP_LANE = (
    "mov.u64 t, %globaltimer;\n\t"
    "mov.u32 s, %smid;\n\t"
    f"@p st.global.u64 [{{r}}+{ANCHOR_OFFSET_BYTES}], t;\n\t"
    f"@p st.global.u32 [{{r}}+{SM_OFFSET_BYTES}], s;\n\t"
)


# The CuteDSL ops' stamp (they find the lane in their own arithmetic, as the Triton ops do;
# Gluon and CUDA C++ use open_lane below). $0 records (u64 address of records[0]), $1 stamp (u32:
# nonzero = this thread writes the lane).
# If stamp: lane[0] = %globaltimer (the 64-bit anchor); lane[1].lo32 = %smid.
def init() -> str:
    """CuteDSL's init: $0 records, $1 stamp."""
    return (
        "{\n\t.reg .pred p;\n\t.reg .u32 s;\n\t.reg .u64 t;\n\t"
        "setp.ne.u32 p, $1, 0;\n\t" + _STAMP_LANE.format(r="$0") + "}"
    )


INIT_CONSTRAINTS = "l,r"


def open_lane() -> str:
    """Find a lane and stamp it: the lane rule (format.open_lane, docs/format.md), one text for
    the Gluon ops and the CUDA C++ header.

    Outputs: $0 the lane's offset (u64, words): its records[0] is at buffer word HEADER_WORDS +
    $0; $1 capacity (u32); $2 ring mask (u32: capacity - 1 in a ring buffer, all ones
    otherwise). Inputs: $3 buffer (u64, slot 0's header), $4 block, $5 group, $6 opens (u32,
    warp-uniform: nonzero where this warp writes a lane), $7 stamps (u32: nonzero in the threads
    that stamp the anchor and SM id). The caller adds the header itself, so the compiler can
    fold that constant into every record's store.

    Launch slots: this launch's slot is min(next, last + 1) of the header's w3; past the last
    slot every lane is out of shape. A lane outside the shape (block >= num_blocks, group >=
    num_groups, or no slot) gets capacity 0 and records at the end of its slot's global header,
    so each of its events takes the overflow path into the header's scratch word.

    Where `opens` is 0 (the warps of a per-block or per-partition lane that do not write it) the
    whole text is one branch: offset 0, capacity 0, all-ones mask, no load. Those warps neither
    load the header nor wait for it; only the writing warp does (measured: BENCHMARKS.md).

    The Triton ops and cute_ops keep their own arithmetic (triton_ops._launch_slot and _lane_in_slot, with
    `init_leader` for the stamp): with this text, Triton 3.6's ptxas kept the lane's address in
    uniform registers and copied it back per event (more SASS per event, measured slower on the
    loop kernel).
    """
    w = fmt.WORD_BYTES
    return (
        "{\n\t.reg .pred pv, ps;\n\t.reg .u32 nb, ng, cap, fl, nx, ls, s;\n\t"
        ".reg .u64 sh, cf, ct, slot, last, sw, lane, t, a;\n\t"
        "mov.u64 $0, 0;\n\tmov.u32 $1, 0;\n\tmov.u32 $2, -1;\n\t"
        "setp.eq.u32 ps, $6, 0;\n\t@ps bra.uni SMP_OPEN_${:uid};\n\t"
        f"ld.global.u64 sh, [$3+{fmt.HDR_SHAPE * w}];\n\t"
        f"ld.global.v2.u64 {{cf, ct}}, [$3+{fmt.HDR_CAPACITY_FLAGS * w}];\n\t"
        "mov.b64 {nb, ng}, sh;\n\tmov.b64 {cap, fl}, cf;\n\tmov.b64 {nx, ls}, ct;\n\t"
        # slot = min(next, last + 1); the slot's first word: slot * (lanes * (cap + 2) + 8)
        "cvt.u64.u32 last, ls;\n\tadd.u64 slot, last, 1;\n\tcvt.u64.u32 t, nx;\n\t"
        "min.u64 slot, t, slot;\n\t"
        f"cvt.u64.u32 t, cap;\n\tadd.u64 t, t, {fmt.LANE_HEADER_WORDS};\n\t"
        "mul.wide.u32 sw, nb, ng;\n\tmul.lo.u64 sw, sw, t;\n\t"
        f"add.u64 sw, sw, {fmt.HEADER_WORDS};\n\tmul.lo.u64 $0, sw, slot;\n\t"
        # valid: block < num_blocks, group < num_groups, slot <= last (unsigned)
        "setp.lt.u32 pv, $4, nb;\n\tsetp.lt.and.u32 pv, $5, ng, pv;\n\t"
        "setp.le.and.u64 pv, slot, last, pv;\n\t"
        # a real lane: + lane * (cap + 2) + 2 words (its lane header); else the header's end
        "mul.wide.u32 lane, $4, ng;\n\tcvt.u64.u32 sw, $5;\n\tadd.u64 lane, lane, sw;\n\t"
        f"mad.lo.u64 lane, lane, t, {fmt.LANE_HEADER_WORDS};\n\t"
        "@pv add.u64 $0, $0, lane;\n\t@pv mov.u32 $1, cap;\n\t"
        # the ring mask, for a real lane of a ring buffer
        f"and.b32 fl, fl, {fmt.FLAG_RING};\n\tsetp.ne.and.u32 ps, fl, 0, pv;\n\t"
        "setp.ne.and.u32 ps, cap, 0, ps;\n\t@ps sub.u32 $2, cap, 1;\n\t"
        # the stamp: anchor (64-bit %globaltimer) and SM id, by the stamping threads of a real lane
        f"add.u64 a, $0, {fmt.HEADER_WORDS};\n\tmad.lo.u64 a, a, {w}, $3;\n\t"
        "setp.ne.and.u32 ps, $7, 0, pv;\n\tmov.u64 t, %globaltimer;\n\tmov.u32 s, %smid;\n\t"
        f"@ps st.global.u64 [a+{ANCHOR_OFFSET_BYTES}], t;\n\t"
        f"@ps st.global.u32 [a+{SM_OFFSET_BYTES}], s;\n\t"
        "SMP_OPEN_${:uid}:\n\t}"
    )


OPEN_LANE = open_lane()
OPEN_LANE_CONSTRAINTS = "=l,=r,=r,l,r,r,r,r"


def init_leader(per_warp: bool) -> str:
    """Triton's init: $0 = leader (out), $1 records, $2 valid.

    per program: warp 0 of the program leads, all its lanes (`record(mode="warp")`); they write
        the same values to the same addresses. leader = %tid.x / 32 == 0, also in a lane outside
        the shape (its capacity 0 sends its stores to the header's scratch word): a leader that
        depends on nothing but the warp index lets ptxas keep one predicate for every event's
        branch instead of re-deriving it per event.
    per warp: every warp leads its own lane (`record(mode="all")`); lane 0 stamps it.
    if stamping: lane[0] = %globaltimer (the 64-bit anchor); lane[1].lo32 = %smid
    """
    if per_warp:
        return (
            "{\n\t.reg .pred p;\n\t.reg .u32 w, s;\n\t.reg .u64 t;\n\t"
            "mov.u32 w, %laneid;\n\tsetp.eq.u32 p, w, 0;\n\tsetp.ne.and.u32 p, $2, 0, p;\n\t"
            "mov.u32 $0, 1;\n\t" + _STAMP_LANE.format(r="$1") + "}"
        )
    return (
        "{\n\t.reg .pred p, q;\n\t.reg .u32 w, s;\n\t.reg .u64 t;\n\t"
        "mov.u32 w, %tid.x;\n\tshr.u32 w, w, 5;\n\tsetp.eq.u32 q, w, 0;\n\t"
        "selp.u32 $0, 1, 0, q;\n\tsetp.ne.and.u32 p, $2, 0, q;\n\t"
        + _STAMP_LANE.format(r="$1")
        + "}"
    )


# Who stores a record (`record(mode=...)`):
#   "warp"    the leader flag is warp-uniform (per program: warp 0 of the program). Every lane of
#             a leading warp stores (the same word to the same address: one transaction); a warp
#             that does not lead branches over the whole event (`bra.uni`): one instruction.
#   "all"     every thread that runs the op stores; no leader test at all (per warp: the threads
#             of a warp share a lane). Lanes outside the buffer's shape have capacity 0 and
#             point at the header's scratch word, so they need no test either.
#   "thread"  the leader flag picks single threads (a CuteDSL `leader=`): predicated stores.
RECORD_MODES = ("warp", "all", "thread")


def record(
    after: bool, first: int = 0, mode: str = "thread", vector: bool = False, ring: bool = False
) -> str:
    """One event. Operands from $first: records (u64 address of records[0]), cursor, capacity,
    leader, tag, (ring mask, with `ring`), (dependency, with `after`); with first=1, $0 is a
    dummy output set to 0.

    t = %globaltimer, read 64-bit (CS2R, fixed latency; %globaltimer_lo compiles to a slower S2UR)
    rec = tag << 32 | t.lo32: the low register of t is already in place, only the tag moves.
    Two spellings of the same 8-byte store, chosen per ptxas release (see `vector_store_for`):
      packed (vector=False): `mov.b64 r, {lo, tag}; st.global.u64 [a], r`. ptxas 13.4
        (Triton 3.9) reads this timer through the uniform datapath, S2UR + NOP + a move back:
        9 SASS per event instead of 7.
      vector (vector=True): `st.global.v2.u32 [a], {lo, tag}`. 7 SASS with ptxas 13.4, but
        ptxas 12.8/12.9 copy the timer's low register into a fresh pair for it: 8 SASS, and
        measured slower than packed there (benchmarks/device_overhead.py; BENCHMARKS.md says
        how much).
    if leading: cursor < capacity ? records[cursor] = rec : lane[1].hi32 = cursor (last dropped)

    The slot address is computed here (one multiply-add), not passed in: a pointer the compiler
    strength-reduces across a loop would be advanced (and copied) by every warp on every
    iteration, where this costs only the warp that records, and only when it records.

    ring: the slot is cursor & mask (one AND more per event). mask = capacity - 1 in a ring
    buffer (format.FLAG_RING, capacity a power of two): every record is stored, newer over
    older, and `ring_close` writes the count at the end; mask = all ones otherwise (the direct
    rule above, unchanged).
    """
    text = "".join(part for _, part in record_parts(after, mode=mode, vector=vector, ring=ring))
    return _shift(text, first) + "}"


def record_parts(
    after: bool, mode: str = "thread", vector: bool = False, ring: bool = False
) -> list[tuple[str, str]]:
    """`record`'s text (operands from $0, without its closing brace) as named parts, in order.

    The parts are what the variants share: the CUDA C++ header defines each once and every
    record as their concatenation (sm_profiler.record.cuda). A name stands for one text."""
    if mode not in RECORD_MODES:  # internal: the ops and record/cuda.py pass their own modes
        raise ValueError(f"record mode {mode!r}: expected one of {RECORD_MODES}")
    ring_ = "RING_" if ring else ""
    spelling = "VECTOR" if vector else "PACKED"
    slot = "s" if ring else "$1"
    regs = (
        "{\n\t.reg .pred pl, pin, pov, pd;\n\t"
        + (".reg .u32 lo, s;\n\t" if ring else ".reg .u32 lo;\n\t")
        + (".reg .u64 t, a;\n\t" if vector else ".reg .u64 t, r, a;\n\t")
    )
    parts = [(f"{ring_}REGS_{spelling}", regs)]
    if mode == "warp":
        # ${:uid} makes the label unique for every copy of this asm in a kernel.
        parts.append(("BRANCH", "setp.ne.u32 pl, $3, 0;\n\t@!pl bra.uni SMP_DONE_${:uid};\n\t"))
    dep = (6 if ring else 5) if after else None
    timer = _timer(dep) + "cvt.u32.u64 lo, t;\n\t"
    parts.append((f"TIMER_AFTER_{dep}" if after else "TIMER", timer))
    wrap = "and.b32 s, $1, $5;\n\t" if ring else ""  # after the leader's branch, if any
    if mode == "thread":
        bound = f"{wrap}setp.ne.u32 pl, $3, 0;\n\tsetp.lt.and.u32 pin|pov, {slot}, $2, pl;\n\t"
        parts.append((f"{ring_}LEADER_BOUND", bound))
    else:
        parts.append((f"{ring_}BOUND", f"{wrap}setp.lt.u32 pin|pov, {slot}, $2;\n\t"))
    address = f"mad.wide.u32 a, {slot}, {fmt.WORD_BYTES}, $0;\n\t"
    if vector:
        store = address + "@pin st.global.v2.u32 [a], {lo, $4};\n\t"
    else:
        store = "mov.b64 r, {lo, $4};\n\t" + address + "@pin st.global.u64 [a], r;\n\t"
    parts.append((f"{ring_}STORE_{spelling}", store))
    parts.append(("DROPPED", f"@pov st.global.u32 [$0+{LAST_DROPPED_OFFSET_BYTES}], $1;\n\t"))
    if mode == "warp":
        parts.append(("DONE", "SMP_DONE_${:uid}:\n\t"))
    return parts


def ring_close(first: int = 0) -> str:
    """Close a ring lane (profiler_flush). Operands from $first: records, cursor, capacity,
    leader, ring mask. In a ring buffer (mask != all ones) on a real lane (capacity != 0) the
    leader writes lane[1].hi32 = RING_MARK | cursor (records attempted), and, if the ring
    wrapped (cursor > capacity), re-stamps lane[0] with the 64-bit %globaltimer: the decoder
    rebuilds a wrapped lane's times backwards from it, however long the kernel ran."""
    text = (
        "{\n\t.reg .pred p, w;\n\t.reg .u32 v;\n\t.reg .u64 t;\n\t"
        "setp.ne.u32 p, $2, 0;\n\tsetp.ne.and.u32 p, $4, 0xFFFFFFFF, p;\n\t"
        "setp.ne.and.u32 p, $3, 0, p;\n\t"
        f"or.b32 v, $1, {fmt.RING_MARK:#x};\n\t"
        f"@p st.global.u32 [$0+{LAST_DROPPED_OFFSET_BYTES}], v;\n\t"
        "setp.gt.and.u32 w, $1, $2, p;\n\tmov.u64 t, %globaltimer;\n\t"
        f"@w st.global.u64 [$0+{ANCHOR_OFFSET_BYTES}], t;\n\t"
    )
    return _shift(text, first) + "}"


def vector_store_for(ptxas_release: tuple[int, int] | None) -> bool:
    """Which record spelling suits this ptxas (major, minor): the vector store from 13 on."""
    return ptxas_release is not None and ptxas_release >= (13, 0)


def triton_ptxas_release() -> tuple[int, int] | None:
    """(major, minor) of the ptxas Triton compiles sm_90 with, or None if it cannot be asked.

    The one place ptx.py touches Triton, lazily: the Triton and Gluon ops pick their record
    spelling with it when they are imported."""
    try:
        from triton.backends.nvidia.compiler import get_ptxas_version

        m = re.search(r"release (\d+)\.(\d+)", get_ptxas_version(90))
        return (int(m.group(1)), int(m.group(2))) if m else None
    except Exception:
        return None


def _timer(dep: int | None) -> str:
    """t = %globaltimer; with a dependency operand $dep, the read waits for that value.

    Predicated on a test of the dependency, so the read cannot issue before the value exists;
    both predicate values read the timer, so the time never depends on the value.
    """
    if dep is None:
        return "mov.u64 t, %globaltimer;\n\t"
    return (
        f"setp.ne.u32 pd, ${dep}, 0;\n\t"
        "@pd mov.u64 t, %globaltimer;\n\t"
        "@!pd mov.u64 t, %globaltimer;\n\t"
    )


def _shift(text: str, first: int) -> str:
    """Renumber operands from $first; with first=1, $0 becomes a dummy output set to 0."""
    if first:
        text = re.sub(r"\$(\d)", lambda m: f"${int(m.group(1)) + first}", text)
        text += "mov.u32 $0, 0;\n\t"
    return text


# --------------------------------------------------------------------------------------------
# Staged recording (per warp): events go to shared memory, one flush copies them to the buffer.
#
# A warp's stage region mirrors its lane in the buffer: [anchor u64][sm u32, 0][STAGE slots].
# The ops hold the shared address of slot 0, so the lane-header offsets above apply unchanged.
# The stage is a static `.shared` array declared by the init asm: Triton's own (dynamic) shared
# memory starts after it, so the two never overlap. Its size is rounded up to 1 KiB so that the
# dynamic area that follows keeps the 1 KiB alignment that swizzled TMA/wgmma layouts rely on.
# Events never test a bound: the slot index is min(cursor, STAGE - 1), so an overflowing warp
# keeps overwriting its last slot and nothing is ever written outside the stage; the flush knows
# the cursor and writes exactly what fit, and the drop count, in the lane's header words.
# Per program, staging does not pay: ptxas predicates the short staged record in every warp
# instead of letting the other warps branch past it (measured slower than the direct ops).
# --------------------------------------------------------------------------------------------

STAGE_ALIGN_BYTES = 1024
MAX_STAGE_BYTES = 48 * 1024  # the limit on a kernel's static shared memory


def stage_regions(num_warps: int) -> int:
    """One region per warp, plus one shared by any warp past `num_warps` (a launch with more
    warps than the ops were told): those warps record into it, harmlessly, and their flush
    keeps nothing and reports all their events as dropped."""
    return num_warps + 1


def stage_bytes(num_warps: int, stage_events: int) -> int:
    """Bytes of static shared memory a staged kernel declares (per program)."""
    raw = stage_regions(num_warps) * (fmt.LANE_HEADER_WORDS + stage_events) * fmt.WORD_BYTES
    return -(-raw // STAGE_ALIGN_BYTES) * STAGE_ALIGN_BYTES


def stage_error(num_warps: int, stage_events: int) -> str:
    """Why this stage cannot be built ('' if it can): checked before any code is emitted."""
    if stage_events < 1:
        return f"STAGE={stage_events}: the number of staged events per warp must be >= 1"
    if num_warps < 1:
        return f"NUM_WARPS={num_warps}: must be the launch's num_warps (>= 1)"
    nbytes = stage_bytes(num_warps, stage_events)
    if nbytes > MAX_STAGE_BYTES:
        return (
            f"STAGE={stage_events} needs {nbytes} B of static shared memory "
            f"({stage_regions(num_warps)} regions x {stage_events} records x 8 B); "
            f"the limit is {MAX_STAGE_BYTES} B: lower STAGE"
        )
    return ""


def init_staged(num_warps: int, stage_events: int) -> str:
    """Init of a staged warp lane: $0 = has-region flag (out), $1 = shared address of its stage
    region's slot 0 (out).

    Declares the stage, stamps the anchor and SM id into the region's header words, and touches
    no global memory: no event waits for the buffer header's loads (only the flush does).
    Warp w records into region min(w, num_warps); the flag is 0 for w >= num_warps.
    """
    err = stage_error(num_warps, stage_events)
    if err:  # internal: the ops refuse a bad STAGE with stage_error's text before asking
        raise ValueError(err)
    region = (fmt.LANE_HEADER_WORDS + stage_events) * fmt.WORD_BYTES
    nbytes = stage_bytes(num_warps, stage_events)
    return (
        f"{{\n\t.shared .align 16 .b8 smp_stage_${{:uid}}[{nbytes}];\n\t"
        ".reg .pred q;\n\t.reg .u32 w, a, s;\n\t.reg .u64 t;\n\t"
        "mov.u32 w, %tid.x;\n\tshr.u32 w, w, 5;\n\tmov.u32 a, smp_stage_${:uid};\n\t"
        f"setp.lt.u32 q, w, {num_warps};\n\tselp.u32 $0, 1, 0, q;\n\t"
        f"min.u32 w, w, {num_warps};\n\tmad.lo.u32 a, w, {region}, a;\n\t"
        "mov.u64 t, %globaltimer;\n\tmov.u32 s, %smid;\n\t"
        "st.shared.u64 [a], t;\n\tst.shared.u32 [a+8], s;\n\t"
        f"add.u32 $1, a, {fmt.LANE_HEADER_WORDS * fmt.WORD_BYTES};\n\t}}"
    )


INIT_STAGED_CONSTRAINTS = "=r,=r"


def record_staged(after: bool, first: int = 0) -> str:
    """One staged event: t = %globaltimer; [slot] = tag << 32 | t.lo32 (one shared store).

    Operands from $first: slot (u32 shared address), tag, (dependency, with `after`). The caller
    computes slot = stage + min(cursor, STAGE - 1) * 8 in Triton IR, where the compiler fuses it
    into the loop's addressing (and, with a known trip count, folds the clamp away).
    """
    text = (
        "{\n\t.reg .pred pd;\n\t.reg .u32 lo;\n\t.reg .u64 t;\n\t"
        + _timer(dep=2 if after else None)
        + "cvt.u32.u64 lo, t;\n\tst.shared.v2.u32 [$0], {lo, $1};\n\t"
    )
    return _shift(text, first) + "}"


def flush(first: int = 0) -> str:
    """Copy a staged warp lane into the buffer. Operands from $first: records (u64 address of
    the lane's records[0] in the buffer), cursor, capacity, stage (u32 shared address of slot 0),
    last (STAGE - 1), has-region flag.

    kept = cursor if the stage held every record (cursor <= STAGE), else STAGE - 1 (the last
    slot holds the newest record, which is dropped); at most capacity; 0 without a region of its
    own. The warp's threads copy records[i] for i = lane id, +32, ... < kept; then the lane
    header: the anchor, and sm | last_dropped << 32 with last_dropped = cursor - 1 if anything
    was dropped, else 0. A lane outside the buffer's shape has capacity 0 and writes nothing.
    """
    w = fmt.WORD_BYTES
    text = (
        "{\n\t.reg .pred pl, pk, pv, pd;\n\t.reg .u32 n, i, a, s, d;\n\t.reg .u64 g, v;\n\t"
        "bar.warp.sync -1;\n\t"
        "add.u32 n, $4, 1;\n\tsetp.le.u32 pk, $1, n;\n\tselp.u32 n, $1, $4, pk;\n\t"
        "min.u32 n, n, $2;\n\tsetp.ne.u32 pl, $5, 0;\n\tselp.u32 n, n, 0, pl;\n\t"
        "mov.u32 i, %laneid;\n\t"
        "SMP_COPY_${:uid}:\n\t"
        "setp.lt.u32 pk, i, n;\n\t@!pk bra SMP_COPIED_${:uid};\n\t"
        f"mad.lo.u32 a, i, {w}, $3;\n\tld.shared.u64 v, [a];\n\t"
        f"mad.wide.u32 g, i, {w}, $0;\n\tst.global.u64 [g], v;\n\t"
        "add.u32 i, i, 32;\n\tbra SMP_COPY_${:uid};\n\t"
        "SMP_COPIED_${:uid}:\n\t"
        "setp.ne.u32 pv, $2, 0;\n\tsetp.lt.u32 pd, n, $1;\n\t"
        "sub.u32 d, $1, 1;\n\tselp.u32 d, d, 0, pd;\n\t"
        f"ld.shared.u64 v, [$3+{ANCHOR_OFFSET_BYTES}];\n\t"
        f"@pv st.global.u64 [$0+{ANCHOR_OFFSET_BYTES}], v;\n\t"
        f"ld.shared.u32 s, [$3+{SM_OFFSET_BYTES}];\n\tmov.b64 v, {{s, d}};\n\t"
        f"@pv st.global.u64 [$0+{SM_OFFSET_BYTES}], v;\n\t"
    )
    return _shift(text, first) + "}"


# The Triton and Gluon ops' texts (operands from $1: elementwise asm needs an output, a dummy $0),
# one flat tuple each (what a jit function can index with a constexpr), at
# elementwise_index(per_warp, after, ring). per_warp: every warp leads its own lane (mode "all",
# no test); otherwise warp 0 of the program or partition leads (mode "warp", one warp-uniform
# branch for the others). after: one operand more, the dependency; ring: one more before it, the
# slot mask. The record's spelling suits the ptxas that compiles them (`vector_store_for`).
def elementwise_index(per_warp: bool, after: bool, ring: bool) -> int:
    """Where a record text sits in `elementwise_records` (its constraints: index % 4)."""
    return 4 * per_warp + 2 * after + ring


def elementwise_records(vector: bool) -> tuple[str, ...]:
    """Record texts for Triton and Gluon, at elementwise_index(per_warp, after, ring)."""
    return tuple(
        record(
            after=bool(i & 2),
            first=1,
            mode="all" if i & 4 else "warp",
            vector=vector,
            ring=bool(i & 1),
        )
        for i in range(8)
    )


# $0 dummy, records, cursor, capacity, leader, tag, (ring mask), (dependency): at index % 4.
ELEMENTWISE_RECORD_CONSTRAINTS = tuple(
    "=r,l,r,r,r,r" + ",r" * (i & 1) + ",r" * (i >> 1) for i in range(4)
)
ELEMENTWISE_RING_CLOSE = ring_close(first=1)
ELEMENTWISE_RING_CLOSE_CONSTRAINTS = "=r,l,r,r,r,r"  # $0 dummy, then ring_close's operands

# CuteDSL's texts (no dummy output), by mode.
INIT = init()
RECORD = {m: record(after=False, mode=m) for m in RECORD_MODES}
RECORD_AFTER = {m: record(after=True, mode=m) for m in RECORD_MODES}
RECORD_CONSTRAINTS = "l,r,r,r,r"
RECORD_AFTER_CONSTRAINTS = RECORD_CONSTRAINTS + ",r"
# Ring-capable records (one operand more: the slot mask) and the close.
RING_RECORD = {m: record(after=False, mode=m, ring=True) for m in RECORD_MODES}
RING_RECORD_AFTER = {m: record(after=True, mode=m, ring=True) for m in RECORD_MODES}
RING_RECORD_CONSTRAINTS = RECORD_CONSTRAINTS + ",r"
RING_RECORD_AFTER_CONSTRAINTS = RING_RECORD_CONSTRAINTS + ",r"
RING_CLOSE = ring_close()
RING_CLOSE_CONSTRAINTS = "l,r,r,r,r"

# $0 = 1 in warp 0 (linear thread index $1 < 32), else 0. A shift, not the `tid & 96` that LLVM
# turns `tid // 32 == 0` into for a 128-thread block: ptxas recognises a shifted %tid.x as
# warp-uniform and then branches over events without a BSSY/BSYNC pair around each.
WARP_ZERO = (
    "{\n\t.reg .pred p;\n\t.reg .u32 w;\n\tshr.u32 w, $1, 5;\n\t"
    "setp.eq.u32 p, w, 0;\n\tselp.u32 $0, 1, 0, p;\n\t}"
)
WARP_ZERO_CONSTRAINTS = "=r,r"

# The same flag from a thread index that ptxas cannot see is a shifted %tid.x (Gluon numbers a
# partition's threads as (%tid.x - first thread) masked to the partition's size): a warp vote
# makes it warp-uniform in ptxas's eyes, so each event is still one branch for the other warps.
WARP_ZERO_VOTED = (
    "{\n\t.reg .pred p, q;\n\t.reg .u32 w;\n\tshr.u32 w, $1, 5;\n\t"
    "setp.eq.u32 p, w, 0;\n\tvote.sync.any.pred q, p, -1;\n\tselp.u32 $0, 1, 0, q;\n\t}"
)

# The same flag for CUDA C++, whose linear thread index mixes %tid.x, .y and .z (ptxas sees no
# shifted %tid.x, and would wrap each skipped event in BSSY/BSYNC): voted among the threads that
# run the init, which also holds where a block's last warp is partial (a vote over all 32 lanes
# would name lanes that do not exist). Voted as "all not warp 0" and inverted by the selp, so
# that the record's `@!pl bra.uni` is the vote's own predicate: from "any warp 0" ptxas branched
# on a copy (one PLOP3 per event in every warp that skips it, ptxas 12.8 and 13.0).
WARP_ZERO_ACTIVE = (
    "{\n\t.reg .pred p, q;\n\t.reg .u32 w, m;\n\tshr.u32 w, $1, 5;\n\t"
    "setp.ne.u32 p, w, 0;\n\tactivemask.b32 m;\n\tvote.sync.all.pred q, p, m;\n\t"
    "selp.u32 $0, 0, 1, q;\n\t}"
)

# $0 = 1 in every thread of a warp where $1 is nonzero in some active thread, else 0 (CUDA C++:
# the warp that holds a leader-mode lane's leader opens the lane; the others skip it).
WARP_HOLDS = (
    "{\n\t.reg .pred p, q;\n\t.reg .u32 m;\n\tsetp.ne.u32 p, $1, 0;\n\t"
    "activemask.b32 m;\n\tvote.sync.any.pred q, p, m;\n\tselp.u32 $0, 1, 0, q;\n\t}"
)

# Read-only helpers, used by the floor variant of the benchmark and by tests.
GLOBALTIMER = "mov.u64 $0, %globaltimer;"  # $0 = %globaltimer (64-bit)


# -- auto mode: text spliced into compiled kernels (sm_profiler.auto_mode.rewrite) -----------------
# The kernel's last parameter is Triton's profile scratch pointer, which auto mode's allocator sets
# per launch to the launch's area of the record table, or to null (format.py, "auto mode"). One
# thread per program (lane 0 of each warp per warp), where the pointer is set, stamps its start;
# before each `ret` that thread stamps its end and writes the 32-byte record at area + its linear
# program id. The record names its kernel by a tag fixed at compile time (from Triton's cache hash
# of the kernel), so the end reads nothing from memory: no atomic and no load to wait for. A claim's
# atomic made a short launch 0.3 us longer, and a word read at the start and tested at the end
# made every short program wait for its load (BENCHMARKS.md). A launch that records nothing
# (eager, outside active steps: a null pointer) pays only the pointer's test; a CUDA graph keeps
# its captured pointers, which the host sets to null for replays it does not record
# (auto_mode/graph_switch.py), and copies the records out after those it does. Where the start
# goes: after the kernel's own first global load where its first block has one (placed first,
# ptxas issued the timer ahead of the kernel's first load, and a short kernel took 0.1 us longer
# a launch).
# The kernel's body carries one register (registers cost occupancy on steps that record nothing
# too): the start's low 32 bits (its high half is the end's, less a borrow: a program lasts
# < 2^32 ns, as the record's 32-bit end already assumes). Registers are named %smpa_* and labels
# $SMPA_* so they cannot meet the kernel's own.
AUTO_MARK = "// sm_profiler auto: start"  # in every instrumented kernel's PTX, once


def auto_declarations() -> str:
    return ".reg .pred %smpa_p<4>;\n\t.reg .b32 %smpa_r<16>;\n\t.reg .b64 %smpa_d<6>;\n\t"


def _auto_who(per_warp: bool, area_param: str) -> str:
    # %smpa_p0 = thread 0 (per warp: lane 0 of each warp) of a launch that has an area
    lane = "and.b32 %smpa_r0, %smpa_r0, 31;\n\t" if per_warp else ""
    return (
        "mov.u32 %smpa_r0, %tid.x;\n\t" + lane + "setp.eq.u32 %smpa_p0, %smpa_r0, 0;\n\t"
        f"ld.param.u64 %smpa_d0, [{area_param}];\n\t"
        "setp.ne.u64 %smpa_p1, %smpa_d0, 0;\n\t"
        "and.pred %smpa_p0, %smpa_p0, %smpa_p1;\n\t"
    )


def auto_prologue(per_warp: bool, area_param: str) -> str:
    # start = who ? %globaltimer.lo32 : 0
    return (
        AUTO_MARK + "\n\t" + _auto_who(per_warp, area_param) + "mov.u32 %smpa_r1, 0;\n\t"
        "@%smpa_p0 mov.u32 %smpa_r1, %globaltimer_lo;\n"
    )


def auto_epilogue(per_warp: bool, index: int, area_param: str, tag: int) -> str:
    # The text before the entry's `index`-th `ret` (labels must be unique in the entry).
    # if not who: skip; end = %globaltimer
    # slot = (z * nctaid.y + y) * nctaid.x + x  [per warp: slot * warps + warp]
    # record[area + slot] = {start, end.lo32, %smid, tag, warp << 16 | flags, ctaid.x,
    #                        ctaid.y | ctaid.z << 16}
    if not 0 < tag <= fmt.LOW32:  # internal: auto_kernel_tag makes every tag
        raise ValueError(f"a kernel tag is a nonzero 32-bit value, got {tag!r}")
    done = f"$SMPA_DONE_{index}"
    if per_warp:
        warp = (
            "mov.u32 %smpa_r10, %tid.x;\n\tshr.u32 %smpa_r10, %smpa_r10, 5;\n\t"
            "mov.u32 %smpa_r11, %ntid.x;\n\tshr.u32 %smpa_r11, %smpa_r11, 5;\n\t"
            "cvt.u64.u32 %smpa_d2, %smpa_r11;\n\tcvt.u64.u32 %smpa_d3, %smpa_r10;\n\t"
            "mad.lo.u64 %smpa_d1, %smpa_d1, %smpa_d2, %smpa_d3;\n\t"
            "shl.b32 %smpa_r10, %smpa_r10, 16;\n\t"
            f"or.b32 %smpa_r7, %smpa_r10, {fmt.AUTO_PER_WARP};\n\t"
        )
    else:
        warp = "mov.u32 %smpa_r7, 0;\n\t"
    return (
        "// sm_profiler auto: end\n\t" + _auto_who(per_warp, area_param) + "@!%smpa_p0 bra "
        f"{done};\n\t"
        "mov.u64 %smpa_d5, %globaltimer;\n\t"
        # start's high half: the end's, less one where the low half wrapped in between
        "mov.b64 {%smpa_r3, %smpa_r2}, %smpa_d5;\n\t"
        "setp.gt.u32 %smpa_p3, %smpa_r1, %smpa_r3;\n\t"
        "selp.u32 %smpa_r14, 1, 0, %smpa_p3;\n\t"
        "sub.u32 %smpa_r2, %smpa_r2, %smpa_r14;\n\t"
        "mov.u32 %smpa_r4, %smid;\n\t"
        f"mov.u32 %smpa_r5, {tag};\n\t"
        # the program's linear id, 64-bit (a grid has up to 2^31 * 2^16 * 2^16 programs)
        "mov.u32 %smpa_r8, %ctaid.x;\n\tmov.u32 %smpa_r9, %ctaid.y;\n\t"
        "mov.u32 %smpa_r6, %ctaid.z;\n\tmov.u32 %smpa_r12, %nctaid.y;\n\t"
        "mov.u32 %smpa_r13, %nctaid.x;\n\t"
        "mul.wide.u32 %smpa_d1, %smpa_r6, %smpa_r12;\n\t"
        "cvt.u64.u32 %smpa_d2, %smpa_r9;\n\tadd.u64 %smpa_d1, %smpa_d1, %smpa_d2;\n\t"
        "cvt.u64.u32 %smpa_d2, %smpa_r13;\n\tcvt.u64.u32 %smpa_d3, %smpa_r8;\n\t"
        "mad.lo.u64 %smpa_d1, %smpa_d1, %smpa_d2, %smpa_d3;\n\t" + warp + ""
        f"shl.b64 %smpa_d1, %smpa_d1, {fmt.AUTO_RECORD_SHIFT};\n\t"
        "add.u64 %smpa_d1, %smpa_d1, %smpa_d0;\n\t"
        "shl.b32 %smpa_r6, %smpa_r6, 16;\n\tor.b32 %smpa_r9, %smpa_r9, %smpa_r6;\n\t"
        "st.global.v4.b32 [%smpa_d1], {%smpa_r1, %smpa_r2, %smpa_r3, %smpa_r4};\n\t"
        "st.global.v4.b32 [%smpa_d1+16], {%smpa_r5, %smpa_r7, %smpa_r8, %smpa_r9};\n"
        f"{done}:\n\t"
    )


def auto_kernel_tag(cache_hash: str) -> int:
    """The 32-bit tag a kernel's records carry: from Triton's cache hash of the kernel (hex), so
    that every binary of one compile says the same; never 0 (a slot nobody wrote reads 0)."""
    return (int(cache_hash[:8], 16) | 1) if cache_hash else 1


# -- auto mode: a CUDA graph's recorded replays, staged on the device -------------------------------
# Two kernels auto mode captures at the end of each instrumented CUDA graph (auto_mode/graph_stage.py),
# so that a recorded replay costs the host no driver call: STAGE copies the graph's areas (`n`
# 16-byte units at `src`) into staging slot `*counter` of `dst` (slots `n` units apart), and BUMP,
# the node after it, moves the counter on: (`*counter` + 1) mod `k`. The host counts replays the
# same way, and copies the staging out once it is full. Both do nothing where `counter` is null
# (the graph's switched-off clone, graph_switch.py): the counter is their last parameter, as an
# instrumented kernel's area is. PTX ISA 7.0 for sm_70: the driver compiles it for the GPU it runs on.
AUTO_STAGE_ENTRY = "sm_profiler_auto_stage"
AUTO_BUMP_ENTRY = "sm_profiler_auto_bump"
AUTO_STAGE_PTX = f"""
.version 7.0
.target sm_70
.address_size 64

.visible .entry {AUTO_STAGE_ENTRY}(.param .u64 dst, .param .u64 src, .param .u64 n,
                                    .param .u64 counter)
{{
    .reg .pred %p<2>;
    .reg .b32 %r<9>;
    .reg .b64 %d<12>;
    ld.param.u64 %d9, [counter];
    setp.eq.u64 %p0, %d9, 0;
    @%p0 bra $DONE;
    ld.param.u64 %d0, [dst];
    ld.param.u64 %d1, [src];
    ld.param.u64 %d2, [n];
    cvta.to.global.u64 %d9, %d9;
    cvta.to.global.u64 %d0, %d0;
    cvta.to.global.u64 %d1, %d1;
    ld.global.u32 %r8, [%d9];
    mul.wide.u32 %d10, %r8, 16;
    mul.lo.u64 %d10, %d10, %d2;
    add.u64 %d0, %d0, %d10;
    mov.u32 %r0, %ctaid.x;
    mov.u32 %r1, %ntid.x;
    mov.u32 %r2, %tid.x;
    mov.u32 %r3, %nctaid.x;
    mul.wide.u32 %d3, %r0, %r1;
    cvt.u64.u32 %d4, %r2;
    add.u64 %d3, %d3, %d4;
    mul.wide.u32 %d5, %r3, %r1;
$LOOP:
    setp.ge.u64 %p0, %d3, %d2;
    @%p0 bra $DONE;
    shl.b64 %d6, %d3, 4;
    add.u64 %d7, %d1, %d6;
    add.u64 %d8, %d0, %d6;
    ld.global.v4.u32 {{%r4, %r5, %r6, %r7}}, [%d7];
    st.global.v4.u32 [%d8], {{%r4, %r5, %r6, %r7}};
    add.u64 %d3, %d3, %d5;
    bra $LOOP;
$DONE:
    ret;
}}

.visible .entry {AUTO_BUMP_ENTRY}(.param .u64 k, .param .u64 counter)
{{
    .reg .pred %p<2>;
    .reg .b32 %r<3>;
    .reg .b64 %d<2>;
    ld.param.u64 %d1, [counter];
    setp.eq.u64 %p0, %d1, 0;
    @%p0 bra $DONE;
    ld.param.u32 %r1, [k];
    cvta.to.global.u64 %d1, %d1;
    ld.global.u32 %r0, [%d1];
    add.u32 %r0, %r0, 1;
    setp.ge.u32 %p1, %r0, %r1;
    @%p1 mov.u32 %r0, 0;
    st.global.u32 [%d1], %r0;
$DONE:
    ret;
}}
"""
AUTO_STAGE_THREADS = 256
AUTO_STAGE_MAX_BLOCKS = 264  # two a 132-SM GPU's SMs: a staged replay is ~1 MB, a few us
