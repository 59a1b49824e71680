"""auto_mode/registers.py: the occupancy arithmetic, the cubin's register count, .maxnreg, and
the choice between the instrumented build and the capped one (with a fake ptxas)."""

from __future__ import annotations

import struct

import pytest

from sm_profiler.auto_mode import registers as R


def fake_cubin(regs: int, frame: int = 0) -> bytes:
    """A minimal ELF64 with a .nv.info section holding EIATTR_REGCOUNT and EIATTR_FRAME_SIZE, as
    ptxas writes them (format SVAL: symbol index, value)."""
    info = b""
    for attr, value in ((R._EIATTR_FRAME_SIZE, frame), (0x12, 0), (R._EIATTR_REGCOUNT, regs)):
        info += bytes([R._EIFMT_SVAL, attr]) + struct.pack("<HII", 8, 1, value)
    info = bytes([1, 0x0A]) + info  # an attribute of another format (EIFMT_NVAL) before them
    names = b"\0.shstrtab\0.nv.info\0"
    data_off = 64
    names_off = data_off + len(info)
    shoff = names_off + len(names)
    head = bytearray(64)
    head[:4] = b"\x7fELF"
    struct.pack_into("<Q", head, 0x28, shoff)
    struct.pack_into("<HHH", head, 0x3A, 64, 3, 1)
    sections = struct.pack("<IIQQQQ", 0, 0, 0, 0, 0, 0).ljust(64, b"\0")
    sections += struct.pack("<IIQQQQ", 1, 3, 0, 0, names_off, len(names)).ljust(64, b"\0")
    sections += struct.pack("<IIQQQQ", 11, 0x70000000, 0, 0, data_off, len(info)).ljust(64, b"\0")
    return bytes(head) + info + names + sections


@pytest.mark.parametrize(
    "regs, threads, blocks",
    [(32, 128, 16), (40, 128, 12), (32, 64, 32), (43, 64, 21), (255, 256, 1), (80, 128, 6)],
)
def test_blocks_per_sm(regs, threads, blocks):
    assert R.blocks_per_sm(regs, threads) == blocks


def test_register_cap_is_the_last_count_on_the_same_step():
    for regs, threads in ((32, 128), (48, 256), (62, 64), (113, 256), (200, 128)):
        cap = R.register_cap(regs, threads)
        assert cap >= regs
        assert R.blocks_per_sm(cap, threads) == R.blocks_per_sm(regs, threads)
        assert cap == R.MAX_REGISTERS or R.blocks_per_sm(cap + 1, threads) < R.blocks_per_sm(
            regs, threads
        )
    assert R.register_cap(32, 128) == 32 and R.register_cap(48, 256) == 48


def test_usage_reads_the_count_and_frame_and_refuses_junk():
    assert R.usage(fake_cubin(43, 24)) == (43, 24)
    with pytest.raises(ValueError, match="cubin"):
        R.usage(b"\x7fELF" + b"\0" * 10)


PTX = """.version 8.7
.target sm_90a
.address_size 64
.visible .entry k(
\t.param .u64 k_param_0
)
.reqntid 128, 1, 1
{
\tret;
}
"""


def test_threads_and_maxnreg_go_on_the_entry():
    assert R.threads_of(PTX) == 128
    assert R.threads_of(PTX.replace(".reqntid 128, 1, 1", ".maxntid 64")) == 64
    out = R.with_maxnreg(PTX, 32)
    assert ")\n.maxnreg 32\n.reqntid" in out
    with pytest.raises(ValueError, match="entry"):
        R.with_maxnreg(".version 8.7\n", 32)


def builds(counts: dict):
    """A fake ptxas: the cubin's (registers, frame) by which text it was given."""
    calls = []

    def build(ptx):
        kind = "capped" if ".maxnreg" in ptx else ("plain" if "PLAIN" in ptx else "inst")
        calls.append(kind)
        return fake_cubin(*counts[kind])

    return build, calls


def test_a_kernel_pushed_off_its_step_is_built_capped():
    build, calls = builds({"inst": (40, 0), "plain": (32, 0), "capped": (32, 8)})
    got = R.keep_occupancy(PTX, build(PTX + "// PLAIN"), build)
    assert R.usage(got) == (32, 8) and calls == ["plain", "inst", "capped"]


def test_a_capped_build_that_spills_more_than_the_record_is_not_kept():
    build, calls = builds({"inst": (72, 0), "plain": (62, 0), "capped": (64, 40)})
    got = R.keep_occupancy(PTX.replace("128", "64"), build(PTX + "// PLAIN"), build)
    assert R.usage(got) == (72, 0) and calls == ["plain", "inst", "capped"]


def test_no_second_build_where_no_step_could_have_been_crossed():
    build, calls = builds({"inst": (24, 0), "plain": (18, 0), "capped": (18, 0)})
    assert R.usage(R.keep_occupancy(PTX, build(PTX + "// PLAIN"), build)) == (24, 0)
    assert calls == ["plain", "inst"]  # the plain build is made anyway (an off launch runs it)
    # on the same step as plain: the instrumented build stays
    build, calls = builds({"inst": (127, 0), "plain": (120, 0), "capped": (120, 0)})
    assert (
        R.usage(R.keep_occupancy(PTX.replace("128", "256"), build(PTX + "PLAIN"), build))[0] == 127
    )
    # the user's own .maxnreg is theirs
    build, calls = builds({"inst": (40, 0), "plain": (32, 0), "capped": (32, 0)})
    R.keep_occupancy(R.with_maxnreg(PTX, 40), build(PTX + "// PLAIN"), build)
    assert calls == ["plain", "capped"]


def test_no_cap_on_a_warp_specialized_kernel_and_a_refused_cap_keeps_the_first_build():
    build, calls = builds({"inst": (40, 0), "plain": (32, 0), "capped": (32, 0)})
    ws = PTX.replace("ret;", "setmaxnreg.inc.sync.aligned.u32 232;\n\tret;", 1)
    assert R.usage(R.keep_occupancy(ws, build(ws + "// PLAIN"), build)) == (40, 0)
    assert calls == ["plain", "inst"]

    def refusing(ptx):
        if ".maxnreg" in ptx:
            raise RuntimeError("ptxas: error")
        return fake_cubin(32 if "PLAIN" in ptx else 40)

    assert R.usage(R.keep_occupancy(PTX, refusing(PTX + "// PLAIN"), refusing)) == (40, 0)
