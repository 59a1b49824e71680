"""The inline PTX both device front ends emit (Triton ops and cute_ops), as plain strings.

One text for both, so that they put the same words in the same places; offsets come from
`format`. Operands are LLVM inline-asm `$n` references numbered from `first` (Triton's elementwise
asm must have an output, so its operands start at $1 and it ends with a dummy `mov.u32 $0, 0`).
No triton or cutlass import: tests read these strings too.
"""

from __future__ import annotations

import re

from . import format as fmt

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

# $0 records (u64 address of records[0]), $1 stamp (u32: nonzero = this thread writes the lane)
# if stamp: lane[0] = %globaltimer (the full 64-bit anchor); lane[1].lo32 = %smid
INIT = (
    "{\n\t.reg .pred p;\n\t.reg .u32 s;\n\t.reg .u64 t;\n\t"
    "setp.ne.u32 p, $1, 0;\n\t" + _STAMP_LANE.format(r="$0") + "}"
)
INIT_CONSTRAINTS = "l,r"


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


def record(after: bool, first: int = 0, mode: str = "thread") -> str:
    """One event. Operands from $first: records (u64 address of records[0]), cursor, capacity,
    leader, tag, (dependency, with `after`); with first=1, $0 is a dummy output set to 0.

    t = %globaltimer, read 64-bit (CS2R, fixed latency; %globaltimer_lo compiles to a slower S2UR)
    rec = tag << 32 | t.lo32: the low register of t is already in place, only the tag moves
    if leading: cursor < capacity ? records[cursor] = rec : lane[1].hi32 = cursor (last dropped)

    The slot address is computed here (one multiply-add), not passed in: a pointer the compiler
    strength-reduces across a loop would be advanced (and copied) by every warp on every
    iteration, where this costs only the warp that records, and only when it records.
    """
    if mode not in RECORD_MODES:
        raise ValueError(f"record mode {mode!r}: expected one of {RECORD_MODES}")
    if after:
        # Predicated on a test of the dependency, so the read cannot issue before the value
        # exists; both predicate values read the timer, so the time never depends on the value.
        timer = (
            "setp.ne.u32 pd, $5, 0;\n\t"
            "@pd mov.u64 t, %globaltimer;\n\t"
            "@!pd mov.u64 t, %globaltimer;\n\t"
        )
    else:
        timer = "mov.u64 t, %globaltimer;\n\t"
    head = "{\n\t.reg .pred pl, pin, pov, pd;\n\t.reg .u32 lo;\n\t.reg .u64 t, r, a;\n\t"
    tail = ""
    bound = "setp.lt.u32 pin|pov, $1, $2;\n\t"
    if mode == "warp":
        # ${:uid} makes the label unique for every copy of this asm in a kernel.
        head += "setp.ne.u32 pl, $3, 0;\n\t@!pl bra.uni SMP_DONE_${:uid};\n\t"
        tail = "SMP_DONE_${:uid}:\n\t"
    elif mode == "thread":
        bound = "setp.ne.u32 pl, $3, 0;\n\tsetp.lt.and.u32 pin|pov, $1, $2, pl;\n\t"
    text = (
        head + timer + "cvt.u32.u64 lo, t;\n\t" + bound + "mov.b64 r, {lo, $4};\n\t"
        f"mad.wide.u32 a, $1, {fmt.WORD_BYTES}, $0;\n\t"
        "@pin st.global.u64 [a], r;\n\t"
        f"@pov st.global.u32 [$0+{LAST_DROPPED_OFFSET_BYTES}], $1;\n\t" + tail
    )
    if first:
        text = re.sub(r"\$(\d)", lambda m: f"${int(m.group(1)) + first}", text)
        text += "mov.u32 $0, 0;\n\t"
    return text + "}"


# CuteDSL's texts (no dummy output), by mode.
RECORD = {m: record(after=False, mode=m) for m in RECORD_MODES}
RECORD_AFTER = {m: record(after=True, mode=m) for m in RECORD_MODES}
RECORD_CONSTRAINTS = "l,r,r,r,r"
RECORD_AFTER_CONSTRAINTS = RECORD_CONSTRAINTS + ",r"

# $0 = 1 in warp 0 (linear thread index $1 < 32), else 0. A shift, not the `tid & 96` that LLVM
# turns `tid // 32 == 0` into for a 128-thread block: ptxas recognises a shifted %tid.x as
# warp-uniform and then branches over events without a BSSY/BSYNC pair around each.
WARP_ZERO = (
    "{\n\t.reg .pred p;\n\t.reg .u32 w;\n\tshr.u32 w, $1, 5;\n\t"
    "setp.eq.u32 p, w, 0;\n\tselp.u32 $0, 1, 0, p;\n\t}"
)
WARP_ZERO_CONSTRAINTS = "=r,r"

# Read-only helpers, used by the floor variant of the benchmark and by tests.
GLOBALTIMER = "mov.u64 $0, %globaltimer;"  # $0 = %globaltimer (64-bit)
