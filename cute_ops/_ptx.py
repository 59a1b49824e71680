"""The inline PTX of the CuteDSL ops, as plain strings (no cutlass import: tests read them too).

Operands are LLVM inline-asm `$n` references; the comments above each string say what lands where.
The text follows sm_profiler.triton_ops instruction for instruction, so both front ends put the
same words in the same places.
"""

from __future__ import annotations

from sm_profiler import format as fmt

# Byte offsets from records[0] (what the ops hold) back into the lane header.
ANCHOR_OFFSET_BYTES = (fmt.LANE_ANCHOR - fmt.LANE_HEADER_WORDS) * fmt.WORD_BYTES  # -16
SM_OFFSET_BYTES = (fmt.LANE_SM_ATTEMPTED - fmt.LANE_HEADER_WORDS) * fmt.WORD_BYTES  # -8
# The high 32-bit half of lane word 1 (-4): the cursor of the latest record that did not fit;
# the lane attempted that + 1 records (format.lane_word1).
LAST_DROPPED_OFFSET_BYTES = SM_OFFSET_BYTES + 4

# $0 records (u64 address of records[0]), $1 stamp (u32: nonzero = this thread writes the lane)
# if stamp: lane[0] = %globaltimer (the full 64-bit anchor); lane[1].lo32 = %smid
INIT = (
    "{\n\t.reg .pred p;\n\t.reg .u32 s;\n\t.reg .u64 t;\n\t"
    "setp.ne.u32 p, $1, 0;\n\t"
    "mov.u64 t, %globaltimer;\n\t"
    "mov.u32 s, %smid;\n\t"
    f"@p st.global.u64 [$0+{ANCHOR_OFFSET_BYTES}], t;\n\t"
    f"@p st.global.u32 [$0+{SM_OFFSET_BYTES}], s;\n\t}}"
)
INIT_CONSTRAINTS = "l,r"


def record(after: bool) -> str:
    """One event: $0 &records[cursor], $1 records, $2 cursor, $3 capacity, $4 leader, $5 tag,
    ($6 dependency, with `after`).

    t = %globaltimer, read 64-bit (CS2R, fixed latency; %globaltimer_lo compiles to a slower S2UR)
    rec = tag << 32 | t.lo32: the low register of t is already in place, only the tag moves
    if leader: cursor < capacity ? records[cursor] = rec : lane[1].hi32 = cursor (last dropped)
    """
    if after:
        # Predicated on a test of the dependency, so the read cannot issue before the value
        # exists; both predicate values read the timer, so the time never depends on the value.
        timer = (
            "setp.ne.u32 pd, $6, 0;\n\t"
            "@pd mov.u64 t, %globaltimer;\n\t"
            "@!pd mov.u64 t, %globaltimer;\n\t"
        )
    else:
        timer = "mov.u64 t, %globaltimer;\n\t"
    return (
        "{\n\t.reg .pred pl, pin, pov, pd;\n\t.reg .u32 lo;\n\t.reg .u64 t, r;\n\t"
        + timer
        + "cvt.u32.u64 lo, t;\n\t"
        "setp.ne.u32 pl, $4, 0;\n\t"
        "setp.lt.and.u32 pin|pov, $2, $3, pl;\n\t"
        "mov.b64 r, {lo, $5};\n\t"
        "@pin st.global.u64 [$0], r;\n\t"
        f"@pov st.global.u32 [$1+{LAST_DROPPED_OFFSET_BYTES}], $2;\n\t}}"
    )


RECORD = record(after=False)
RECORD_AFTER = record(after=True)
RECORD_CONSTRAINTS = "l,l,r,r,r,r"
RECORD_AFTER_CONSTRAINTS = RECORD_CONSTRAINTS + ",r"

# Read-only helpers, used by the floor variant of the benchmark and by tests.
GLOBALTIMER = "mov.u64 $0, %globaltimer;"  # $0 = %globaltimer (64-bit)
