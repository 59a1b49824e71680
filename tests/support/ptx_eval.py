"""A tiny PTX interpreter for the straight-line integer texts of sm_profiler.record.ptx, on the CPU.

Enough of PTX to run ptx.OPEN_LANE (and texts like it) on given operand values: register
declarations, mov (with {lo, hi} packing and unpacking), cvt, add, sub, mul.lo, mul.wide, mad.lo,
mad.wide, min, max, and, or, xor, shl, shr, setp (with .and/.or/.xor combiners and p|q
destinations), selp, predicated instructions (@p, @!p), bra/bra.uni to labels, ld.global (.v2)
from a dict of 64-bit words, st.global recorded as writes, and the special registers
%globaltimer, %smid, %laneid, %tid.x as given values. Anything else raises, so a text that grows
an instruction this does not know fails its test instead of being skipped.

Operands are LLVM's `$n` (ptx.py's spelling) or, with `cuda=True`, CUDA's `%n` with `%%` for `%`
(the generated header's spelling). No triton import: the lane-rule test runs this anywhere.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_OPS_ALU = {"add", "sub", "min", "max", "and", "or", "xor", "shl", "shr"}


class PtxError(Exception):
    """A text the evaluator cannot run: an unknown opcode, an undeclared register, a bad load."""


@dataclass
class Result:
    outputs: dict[int, int]  # operand number -> value written by the text
    writes: list[tuple[int, int, int]] = field(default_factory=list)  # (byte address, bits, value)
    loads: list[int] = field(default_factory=list)  # byte addresses loaded


def _width(type_: str) -> int:
    if type_ == "pred":
        return 1
    return int(type_[1:])


def _signed(type_: str) -> bool:
    return type_.startswith("s")


def _to_signed(value: int, bits: int) -> int:
    return value - (1 << bits) if value >> (bits - 1) & 1 else value


def _split_operands(args: str) -> list[str]:
    """Operands at top-level commas ({a, b} and [a+8] stay one operand)."""
    out, depth, cur = [], 0, ""
    for ch in args:
        if ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur.strip())
    return out


class Machine:
    def __init__(self, operands: dict[int, int], memory: dict[int, int], specials: dict[str, int]):
        self.operands = dict(operands)  # $n -> value (inputs; outputs are written here too)
        self.written: set[int] = set()
        self.memory = memory  # byte address (multiple of 8) -> u64 word
        self.specials = specials
        self.regs: dict[str, int] = {}
        self.types: dict[str, str] = {}
        self.result = Result(outputs={})
        self.params: dict[str, int] = {}  # a kernel's .param names -> values (run_kernel)

    # -- operands ---------------------------------------------------------------------------

    def read(self, op: str, bits: int, signed: bool = False) -> int:
        mask = (1 << bits) - 1
        if op.startswith("$"):
            value = self.operands[int(op[1:])]
        elif op in self.types:
            value = self.regs.get(op, 0)
        elif op.startswith("%"):
            if op not in self.specials:
                raise PtxError(f"special register {op} not given")
            value = self.specials[op]
        elif re.fullmatch(r"-?(0[xX][0-9a-fA-F]+|\d+)", op):
            value = int(op, 0)
        elif op in self.regs:
            value = self.regs[op]
        else:
            raise PtxError(f"undeclared register or bad operand {op!r}")
        value &= mask
        return _to_signed(value, bits) if signed else value

    def write(self, op: str, value: int, bits: int) -> None:
        value &= (1 << bits) - 1
        if op == "_":  # a discarded half of an unpacking move
            return
        if op.startswith("$"):
            n = int(op[1:])
            self.operands[n] = value
            self.written.add(n)
        elif op in self.types:
            self.regs[op] = value & ((1 << _width(self.types[op])) - 1)
        else:
            raise PtxError(f"write to undeclared register {op!r}")

    def pred(self, op: str) -> bool:
        neg = op.startswith("!")
        name = op[1:] if neg else op
        if self.types.get(name) != "pred":
            raise PtxError(f"{name!r} is not a declared predicate")
        return bool(self.regs.get(name, 0)) != neg

    def address(self, op: str) -> int:
        m = re.fullmatch(r"\[\s*([^+\]\s]+)\s*(?:\+\s*(-?\d+))?\s*\]", op)
        if not m:
            raise PtxError(f"bad address {op!r}")
        return (self.read(m.group(1), 64) + int(m.group(2) or 0)) & ((1 << 64) - 1)

    def load64(self, addr: int) -> int:
        if addr % 8:
            raise PtxError(f"unaligned 64-bit load at {addr:#x}")
        if addr not in self.memory:
            raise PtxError(f"load from {addr:#x}, which the test did not provide")
        self.result.loads.append(addr)
        return self.memory[addr]

    # -- instructions -----------------------------------------------------------------------

    def step(self, opcode: str, args: list[str]) -> None:  # noqa: C901 - one branch per opcode
        parts = opcode.split(".")
        op, mods = parts[0], parts[1:]
        t = mods[-1] if mods else ""
        if op == "mov":
            bits = _width(t)
            dst, src = args
            if dst.startswith("{"):  # unpack a 64-bit value into two 32-bit registers
                lo, hi = (x.strip() for x in dst[1:-1].split(","))
                v = self.read(src, bits)
                self.write(lo, v, bits // 2)
                self.write(hi, v >> (bits // 2), bits // 2)
            elif src.startswith("{"):
                lo, hi = (x.strip() for x in src[1:-1].split(","))
                half = bits // 2
                self.write(dst, self.read(lo, half) | self.read(hi, half) << half, bits)
            else:
                self.write(dst, self.read(src, bits), bits)
        elif op == "cvt":
            dt, st = mods[-2], mods[-1]
            v = self.read(args[1], _width(st), _signed(st))
            self.write(args[0], v, _width(dt))
        elif op in _OPS_ALU:
            bits, signed = _width(t), _signed(t)
            a = self.read(args[1], bits, signed)
            b = self.read(
                args[2], 32 if op in ("shl", "shr") else bits, signed and op not in ("shl", "shr")
            )
            v = {
                "add": lambda: a + b,
                "sub": lambda: a - b,
                "min": lambda: min(a, b),
                "max": lambda: max(a, b),
                "and": lambda: a & b,
                "or": lambda: a | b,
                "xor": lambda: a ^ b,
                "shl": lambda: a << b if b < bits else 0,
                "shr": lambda: a >> b if b < bits else (-1 if a < 0 else 0),
            }[op]()
            self.write(args[0], v, bits)
        elif op in ("mul", "mad"):
            mode, bits, signed = mods[0], _width(t), _signed(t)
            if mode not in ("lo", "wide"):
                raise PtxError(f"{opcode}: only .lo and .wide")
            a, b = self.read(args[1], bits, signed), self.read(args[2], bits, signed)
            out_bits = 2 * bits if mode == "wide" else bits
            v = a * b + (self.read(args[3], out_bits, signed) if op == "mad" else 0)
            self.write(args[0], v, out_bits)
        elif op == "setp":
            cmp, t = mods[0], mods[-1]
            combine = mods[1] if len(mods) == 3 else None
            bits, signed = _width(t), _signed(t)
            a, b = self.read(args[1], bits, signed), self.read(args[2], bits, signed)
            c = {"eq": a == b, "ne": a != b, "lt": a < b, "le": a <= b, "gt": a > b, "ge": a >= b}[
                cmp
            ]
            p, q = c, not c
            if combine is not None:
                other = self.pred(args[3])
                f = {
                    "and": lambda x: x and other,
                    "or": lambda x: x or other,
                    "xor": lambda x: x != other,
                }[combine]
                p, q = f(p), f(q)
            dst = args[0].split("|")
            self.write(dst[0], int(p), 1)
            if len(dst) == 2:
                self.write(dst[1], int(q), 1)
        elif op == "selp":
            bits = _width(t)
            v = args[1] if self.pred(args[3]) else args[2]
            self.write(args[0], self.read(v, bits), bits)
        elif op == "ld" and mods[0] == "param":
            name = args[1].strip("[] ")
            if name not in self.params:
                raise PtxError(f"kernel parameter {name!r} not given")
            self.write(args[0], self.params[name], _width(t))
        elif op == "ld" and mods[0] == "global":
            addr = self.address(args[1])
            if mods[1:] == ["u64"] or mods[1:] == ["b64"]:
                self.write(args[0], self.load64(addr), 64)
            elif mods[1:] in (["v2", "u64"], ["v2", "b64"]):
                a, b = (x.strip() for x in args[0][1:-1].split(","))
                self.write(a, self.load64(addr), 64)
                self.write(b, self.load64(addr + 8), 64)
            else:
                raise PtxError(f"unsupported load {opcode}")
        elif op == "st" and mods[0] == "global":
            addr = self.address(args[0])
            if len(mods) == 3 and mods[1] == "v2":
                bits = _width(mods[2])
                a, b = (x.strip() for x in args[1][1:-1].split(","))
                self.result.writes.append((addr, bits, self.read(a, bits)))
                self.result.writes.append((addr + bits // 8, bits, self.read(b, bits)))
            elif len(mods) == 2:
                bits = _width(mods[1])
                self.result.writes.append((addr, bits, self.read(args[1], bits)))
            else:
                raise PtxError(f"unsupported store {opcode}")
        else:
            raise PtxError(f"unknown opcode {opcode!r}")


def _statements(text: str) -> list[str]:
    text = text.replace("${:uid}", "0")
    out = []
    for raw in re.split(r"[;\n]", text):
        s = raw.strip()
        while s.startswith(("{", "}")):
            s = s[1:].strip()
        if s:
            out.append(s)
    return out


def cuda_to_llvm(text: str) -> str:
    """The generated header's spelling (%n operands, %% for %) back in ptx.py's ($n, %)."""
    text = re.sub(r"(?<!%)%(\d+)", r"$\1", text)
    return text.replace("%%", "%")


def run(
    text: str,
    operands: dict[int, int],
    memory: dict[int, int],
    specials: dict[str, int] | None = None,
    cuda: bool = False,
    max_steps: int = 10_000,
    params: dict[str, int] | None = None,
) -> Result:
    """Run `text` with inputs `operands` ($n -> value, unsigned); return the operands it wrote,
    its stores and its loads. `memory`: byte address -> 64-bit word, for its loads."""
    if cuda:
        text = cuda_to_llvm(text)
    specials = {"%globaltimer": 0, "%smid": 0, "%laneid": 0, "%tid.x": 0, **(specials or {})}
    m = Machine(operands, memory, specials)
    m.params = params or {}
    program: list[tuple[str | None, str, list[str]]] = []
    labels: dict[str, int] = {}
    for s in _statements(text):
        if re.fullmatch(r"[A-Za-z_$][\w$]*:", s):
            labels[s[:-1]] = len(program)
            continue
        guard = None
        if s.startswith("@"):
            guard, s = s[1:].split(None, 1)
        if s.startswith(".reg"):
            _, type_, names = s.split(None, 2)
            for name in (n.strip() for n in names.split(",")):
                m.types[name] = type_[1:]
            continue
        opcode, _, rest = s.partition(" ")
        program.append((guard, opcode, _split_operands(rest)))
    pc, steps = 0, 0
    while pc < len(program):
        steps += 1
        if steps > max_steps:
            raise PtxError("too many steps: a loop that does not end?")
        guard, opcode, args = program[pc]
        pc += 1
        if guard is not None and not m.pred(guard):
            continue
        if opcode in ("bra", "bra.uni"):
            if args[0] not in labels:
                raise PtxError(f"branch to unknown label {args[0]!r}")
            pc = labels[args[0]]
            continue
        m.step(opcode, args)
    m.result.outputs = {n: m.operands[n] for n in sorted(m.written)}
    return m.result


def run_kernel(
    ptx_module: str,
    params: list[int],
    memory: dict[int, int],
    specials: dict[str, int] | None = None,
    max_steps: int = 10_000,
) -> Result:
    """Run one thread of the (only) `.entry` of a compiled PTX module: `params` are its
    parameters' values in order; its stores are returned in `Result.writes`. The same subset of
    PTX as `run`, plus what a compiler adds around it: `.reg .b32 %r<N>` declarations, `ld.param`,
    `//` comments, `ret` and LLVM's `$L__` labels. Used to run a front end's compiled lane rule
    (cute_ops) on the CPU."""
    m = re.search(r"\.entry\s+[\w$]+\s*\((.*?)\)(.*?)\n\{\n(.*)\n\}", ptx_module, re.S)
    if not m:
        raise PtxError("no .entry with a body in this module")
    names = re.findall(r"\.param\s[^,\n]*?([\w$]+)\s*(?:,|$)", m.group(1), re.M)
    if len(names) != len(params):
        raise PtxError(f"the kernel takes {len(names)} parameters, {len(params)} given")
    body = re.sub(r"//[^\n]*", "", m.group(3))
    # `.reg .b64 %rd<34>` declares %rd0 .. %rd33: spelled out for `run`'s declarations.
    body = re.sub(
        r"\.reg\s+(\.\w+)\s+(%\w+)<(\d+)>",
        lambda d: (
            f".reg {d.group(1)} " + ", ".join(f"{d.group(2)}{i}" for i in range(int(d.group(3))))
        ),
        body,
    )
    body = re.sub(r"^\s*ret(\.uni)?\s*;", "bra SMP_EVAL_RET;", body, flags=re.M) + "\nSMP_EVAL_RET:"
    specials = {
        "%tid.y": 0,
        "%tid.z": 0,
        "%ctaid.x": 0,
        "%ctaid.y": 0,
        "%ctaid.z": 0,
        **(specials or {}),
    }
    return run(
        body,
        {},
        memory,
        specials,
        max_steps=max_steps,
        params=dict(zip(names, params, strict=True)),
    )
