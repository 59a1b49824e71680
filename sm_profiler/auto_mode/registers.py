"""Keep an instrumented kernel's occupancy: the record holds a few registers across the kernel's
body (ptx.py, "auto mode"), and where those push a kernel's register count past an occupancy
step (e.g. 32 -> 40 registers: 64 resident warps an SM -> 48), the kernel runs measurably slower
when it records. So after ptxas has built the instrumented cubin, a kernel that may have crossed
a step is compared with its plain build (every instrumented kernel has one: a launch that
records nothing runs it, binding.py), and, where it did cross, built again with `.maxnreg` at the
plain build's step; that build is kept unless it spills more than the record's registers.

The register file and limits are those of sm_90 and sm_100 (64 Ki 32-bit registers, 64 warps
and 32 blocks an SM, registers allocated 256 to a warp). Shared memory may bound a kernel's
blocks further; the cap only keeps what registers allowed.
"""

from __future__ import annotations

import re
import struct

REGISTERS_PER_SM = 65536
MAX_WARPS_PER_SM = 64
MAX_BLOCKS_PER_SM = 32
WARP_ALLOCATION_UNIT = 256  # registers a warp is given at a time
MAX_REGISTERS = 255
# The most registers the record has been seen to add (+6..+16 over Inductor's kernels): a
# kernel whose count less this is on the same occupancy step cannot have crossed one.
RECORD_REGISTERS = 16
# Spilled bytes a capped build may add over the plain one: the two values the record carries
# through the body (ptx.py), spilled after the start and read back at the end. More is the
# kernel's own values spilled, which a Llama step's pointwise kernel paid 31 % for (32 bytes).
RECORD_SPILL_BYTES = 8

_EIATTR_FRAME_SIZE = 0x11
_EIATTR_REGCOUNT = 0x2F
_EIFMT_SVAL = 4
_ENTRY_PARAMS = re.compile(r"(\.visible\s+\.entry\s+[\w$.]+\s*\([^)]*\))", re.S)
_THREADS = re.compile(r"\.(?:reqntid|maxntid)\s+(\d+)(?:\s*,\s*(\d+))?(?:\s*,\s*(\d+))?")


def usage(cubin: bytes) -> tuple[int, int]:
    """(registers a thread, local frame bytes: spills) of the one kernel in `cubin`, from its
    ELF's .nv.info attributes (what ptxas -v prints)."""
    try:
        (shoff,) = struct.unpack_from("<Q", cubin, 0x28)
        shentsize, shnum, shstrndx = struct.unpack_from("<HHH", cubin, 0x3A)
        sections = [
            struct.unpack_from("<IIQQQQ", cubin, shoff + i * shentsize) for i in range(shnum)
        ]
        names_at = sections[shstrndx][4]
        regs = frame = None
        for name, _, _, _, off, size in sections:
            end = cubin.index(b"\0", names_at + name)
            if cubin[names_at + name : end] != b".nv.info":
                continue
            p = off
            while p + 4 <= off + size:
                fmt, attr, n = cubin[p], cubin[p + 1], struct.unpack_from("<H", cubin, p + 2)[0]
                if fmt != _EIFMT_SVAL:
                    p += 4 if fmt in (2, 3) else 2
                    continue
                if n == 8 and attr in (_EIATTR_REGCOUNT, _EIATTR_FRAME_SIZE):
                    value = struct.unpack_from("<I", cubin, p + 8)[0]
                    if attr == _EIATTR_REGCOUNT:
                        regs = value
                    else:
                        frame = value
                p += 4 + n
    except (struct.error, ValueError, IndexError) as e:  # internal: ptxas wrote the cubin
        raise ValueError(f"not a cubin ptxas wrote: {e}") from None
    if regs is None:  # internal: ptxas names every kernel's register count
        raise ValueError("the cubin names no register count")
    return regs, frame or 0


def threads_of(ptx: str) -> int | None:
    """The block size the PTX declares (Triton writes .reqntid or .maxntid), or None."""
    m = _THREADS.search(ptx)
    if m is None:
        return None
    n = 1
    for g in m.groups():
        n *= int(g) if g else 1
    return n


def blocks_per_sm(registers: int, threads: int) -> int:
    """Resident blocks of `threads` threads an SM holds at `registers` a thread (registers and
    the warp and block limits; not shared memory)."""
    warps = max(1, -(-threads // 32))
    per_warp = -(-max(1, registers) * 32 // WARP_ALLOCATION_UNIT) * WARP_ALLOCATION_UNIT
    return min(MAX_BLOCKS_PER_SM, MAX_WARPS_PER_SM // warps, REGISTERS_PER_SM // (per_warp * warps))


def register_cap(registers: int, threads: int) -> int:
    """The most registers a thread may use and keep the occupancy of `registers`."""
    keep = blocks_per_sm(registers, threads)
    cap = registers
    while cap < MAX_REGISTERS and blocks_per_sm(cap + 1, threads) == keep:
        cap += 1
    return cap


def may_have_crossed(registers: int, threads: int) -> bool:
    """Whether a kernel at `registers` could have sat on a higher occupancy step before the
    record's registers were added."""
    return blocks_per_sm(max(1, registers - RECORD_REGISTERS), threads) > blocks_per_sm(
        registers, threads
    )


def with_maxnreg(ptx: str, registers: int) -> str:
    """`ptx` with `.maxnreg registers` on its entry (ptxas then fits the kernel in that many)."""
    text, n = _ENTRY_PARAMS.subn(lambda m: f"{m.group(1)}\n.maxnreg {registers}", ptx, count=1)
    if n != 1:  # internal: keep_occupancy's caller catches it and keeps its first build
        raise ValueError("no .entry to put .maxnreg on")
    return text


def keep_occupancy(instrumented_ptx: str, plain_cubin: bytes, build) -> bytes:
    """The cubin of `instrumented_ptx` at the plain kernel's occupancy (`plain_cubin`, the same
    kernel built without the record) where it can be had. build(ptx) -> cubin is the backend's
    ptxas step."""
    cubin = build(instrumented_ptx)
    threads = threads_of(instrumented_ptx)
    # A cap of the user's own is theirs; a warp-specialized kernel moves registers between its
    # partitions itself (setmaxnreg), which a .maxnreg would fight.
    if threads is None or ".maxnreg" in instrumented_ptx or "setmaxnreg" in instrumented_ptx:
        return cubin
    regs, _ = usage(cubin)
    if not may_have_crossed(regs, threads):
        return cubin
    plain_regs, plain_frame = usage(plain_cubin)
    if blocks_per_sm(plain_regs, threads) <= blocks_per_sm(regs, threads):
        return cubin
    try:
        capped = build(with_maxnreg(instrumented_ptx, register_cap(plain_regs, threads)))
    except Exception:  # ptxas refused the cap: the build it already made stands
        return cubin
    _, frame = usage(capped)
    return capped if frame <= plain_frame + RECORD_SPILL_BYTES else cubin
