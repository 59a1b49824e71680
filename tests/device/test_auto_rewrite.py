"""Auto mode's PTX rewrite on the host (sm_profiler/auto_mode/rewrite.py): a record on every way
out of the kernel, functions left alone, and a clear refusal of what it does not know. What the
rewritten kernels compile to is in test_auto_compile.py."""

from __future__ import annotations

import pytest
from auto_inputs import PTX

from sm_profiler.auto_mode.rewrite import RewriteError, instrument
from sm_profiler.wire import format as fmt


def test_rewrite_records_every_way_out_and_leaves_functions_alone():
    out = instrument(PTX)
    assert out.count("// sm_profiler auto: start") == 1
    assert out.count("// sm_profiler auto: end") == 2  # the predicated ret and the last one
    assert "@!%p1 bra $SMPA_SKIP_0;" in out
    head, entry = out.split(".visible .entry k(")
    assert "sm_profiler auto" not in head  # .func helper's ret untouched
    # The prologue comes after the entry's declarations, before its first instruction.
    body = entry.split("{", 1)[1]
    assert body.index(".reg .b32 \t%r<4>;") < body.index("sm_profiler auto: start")
    assert body.index("sm_profiler auto: start") < body.index("mov.u32 \t%r1, %ctaid.x;")
    # The area is the last parameter, read where the record needs it.
    assert entry.count("[k_param_2]") == 1 + 2 and "k_param_1]" not in entry  # start, 2 ends
    # The record names its kernel by the tag it was given, an immediate: the end reads nothing.
    tagged = instrument(PTX, tag=0x9E3779B1)
    assert tagged.count("mov.u32 %smpa_r5, 2654435761;") == 2 and "ld.global" not in tagged
    with pytest.raises(ValueError, match="nonzero 32-bit"):
        instrument(PTX, tag=0)
    w = instrument(PTX, "warp")
    assert "and.b32 %smpa_r0, %smpa_r0, 31;" in w and str(fmt.AUTO_PER_WARP) in w


# The entry's first block with a global load: the record's start goes after it (ptx.py).
_FIRST_LOAD = "\tmov.u32 \t%r1, %ctaid.x;\n"
_LOAD = "\t@%p2 ld.global.b32 { %r2 }, [ %rd1 + 0 ];\n"


@pytest.mark.parametrize(
    "before, after_load",
    [
        ("$L__tmp0:\n\t.loc 1 2 3\n" + _LOAD, True),  # debug labels do not end the block
        ("\t{\n\t.reg .pred q;\n" + _LOAD + "\t}\n", True),  # after the scope it sits in
        ("$L__BB0_1:\n" + _LOAD, False),  # a branch target ends the first block
        ("\tbar.sync 0;\n" + _LOAD, False),
        ("\t@%p1 bra $L__BB0_2;\n" + _LOAD, False),
    ],
)
def test_the_start_goes_after_the_first_blocks_first_global_load(before, after_load):
    text = PTX.replace(_FIRST_LOAD, _FIRST_LOAD + before, 1)
    body = instrument(text).split(".visible .entry k(")[1]
    start = body.index("sm_profiler auto: start")
    load = body.index("ld.global.b32 { %r2 }")
    assert (load < start) == after_load, body
    assert body.index(".reg .b64 %smpa_d<6>;") < body.index(_FIRST_LOAD.strip())
    if not after_load:  # at the top, before the kernel's first instruction
        assert start < body.index(_FIRST_LOAD.strip())
    # the start waits for nothing: its read and timer are first used in the end's text
    prologue = body[start : body.index("\n\n", start)]
    assert "bra" not in prologue and "ld.global" not in prologue  # reads no memory
    assert "@%smpa_p0 mov.u32 %smpa_r1, %globaltimer_lo;" in prologue


@pytest.mark.parametrize(
    "text, why",
    [
        (
            PTX.replace(
                ".visible .entry k(", ".visible .entry k(\n)\n{\nret;\n}\n.visible .entry k2("
            ),
            "one .entry",
        ),
        (PTX.replace(".address_size 64", ".address_size 32"), "address_size"),
        (
            PTX.replace("\tret;\n}\n\t.section", "}\n\t.section").replace("\t@%p1 ret;", ""),
            "no ret",
        ),
        (
            PTX.replace("\tmov.b64 \t{%r2, %r3}, 0;", "\tld.param.u64 \t%rd2, [k_param_2];"),
            "reads its profile scratch parameter 'k_param_2'",
        ),
        (
            PTX.replace(".param .u64 .ptr .global .align 1 k_param_2", ".param .u32 k_param_2"),
            "last parameter is not a 64-bit pointer",
        ),
    ],
)
def test_rewrite_refuses_what_it_does_not_know(text, why):
    with pytest.raises(RewriteError, match=why):
        instrument(text)
    with pytest.raises(RewriteError, match="instrumented already"):
        instrument(instrument(PTX))
