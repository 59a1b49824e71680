"""Splice the auto-mode record into a compiled kernel's PTX (the text lives in `ptx.py`).

The kernel's own code is not touched: the record's registers and start go at the top of the
entry's body, and its end before every `ret` (or `exit`) of the entry.
The record's area comes in the entry's last parameter, Triton's profile scratch pointer, which
the kernel's own code must not use (Proton's instrumentation does; such a kernel is refused).
Anything this does not recognise raises `RewriteError`; the caller then keeps the plain PTX and
says why (a kernel runs uninstrumented rather than broken).
"""

from __future__ import annotations

import re

from ..errors import RewriteError  # rewrite.RewriteError, as before
from ..record import ptx

LEVELS = ("program", "warp")

_ENTRY = re.compile(r"^\s*\.visible\s+\.entry\s+([\w$.]+)\s*\(", re.M)
_RET = re.compile(r"^(\s*)(@(!?)(%[\w$.]+)\s+)?(ret|exit)(\.uni)?\s*;\s*(//.*)?$")
_DECL = re.compile(r"^\s*(\.reg|\.shared|\.local|\.loc|\.pragma|//|$)")
_ADDRESS_SIZE = re.compile(r"^\s*\.address_size\s+64\s*$", re.M)
_LABEL = re.compile(r"^\s*[$\w.]+:")
_DEBUG_LABEL = re.compile(r"^\s*\$L__(tmp|func_begin)\d+:")  # LLVM's line-table labels
_BLOCK_END = re.compile(r"\b(bra|brx|ret|exit|call|bar|barrier|trap)\b")
_GLOBAL_LOAD = re.compile(r"\bld\.global\.")
_PARAM = re.compile(r"\.param\s.*\.[ub]64\b.*?([\w$]+)$", re.S)


def instrument(text: str, level: str = "program", tag: int = 1) -> str:
    """`text` (one kernel's PTX, as Triton emits it) with the auto-mode record added; its records
    name the kernel by `tag` (ptx.auto_kernel_tag)."""
    if level not in LEVELS:  # internal: the binding passes a level AutoProfiler checked
        raise ValueError(f"level must be one of {LEVELS}, got {level!r}")
    per_warp = level == "warp"
    if ptx.AUTO_MARK in text:
        raise RewriteError("the PTX is instrumented already")
    entries = _ENTRY.findall(text)
    if len(entries) != 1:
        raise RewriteError(f"expected one .entry in the module, found {len(entries)}")
    m = _ADDRESS_SIZE.search(text)
    if m is None:
        raise RewriteError("no '.address_size 64' line: not 64-bit PTX")
    lines = text.splitlines(keepends=True)
    entry_line = _line_of(text, _ENTRY.search(text).start())
    body = _body_start(lines, entry_line)
    area = _area_param(lines, entry_line, body)
    out = lines[: body + 1]
    i = body + 1
    while i < len(lines) and _DECL.match(lines[i]) and lines[i].strip() != "}":
        out.append(lines[i])
        i += 1
    out.append("\t" + ptx.auto_declarations())
    start = _after_first_load(lines, i)
    out.extend(lines[i:start])
    i = start
    out.append(ptx.auto_prologue(per_warp, area) + "\n")
    depth, rets, skip, closed = 1, 0, 0, False
    for line in lines[i:]:
        if not closed:
            r = _RET.match(line)
            if r:
                rets += 1
                indent, _, negated, pred = r.group(1), r.group(2), r.group(3), r.group(4)
                epilogue = "\t" + ptx.auto_epilogue(per_warp, rets - 1, area, tag) + "\n"
                if pred:
                    label = f"$SMPA_SKIP_{skip}"
                    skip += 1
                    neg = "" if negated else "!"
                    out.append(f"{indent}@{neg}{pred} bra {label};\n")
                    out.append(epilogue)
                    out.append(f"{indent}{r.group(5)};\n{label}:\n")
                    continue
                out.append(epilogue)
            depth += _brace_delta(line)
            closed = depth <= 0
        out.append(line)
    if not closed:
        raise RewriteError("the entry's body does not close")
    if rets == 0:
        raise RewriteError("the entry has no ret")
    return "".join(out)


def _area_param(lines: list[str], entry: int, body: int) -> str:
    """The name of the entry's last parameter, Triton's profile scratch pointer (a .u64 that
    nothing in the kernel reads)."""
    head = "".join(line.split("//", 1)[0] for line in lines[entry:body])
    params = head[head.index("(") + 1 : head.rindex(")")].split(",")
    last = params[-1].strip() if params else ""
    m = _PARAM.match(last)
    if m is None:
        raise RewriteError(
            "the entry's last parameter is not a 64-bit pointer (Triton's profile scratch)"
        )
    name = m.group(1)
    uses = len(re.findall(rf"(?<![\w$.]){re.escape(name)}(?![\w$.])", "".join(lines[body:])))
    if uses:
        raise RewriteError(
            f"the kernel reads its profile scratch parameter {name!r} itself (Proton's "
            "instrumentation?)"
        )
    return name


def _after_first_load(lines: list[str], first: int) -> int:
    """Where the record's start goes: after the kernel's first global load, where the entry's
    first block (straight-line code: no label but debug ones, no branch, barrier, call or way
    out) has one, else at `first`. Placed first in the text, ptxas issues the record's read and
    timer ahead of the kernel's own first load, which then waits (ptx.py, "auto mode")."""
    depth = 0
    for j in range(first, len(lines)):
        code = lines[j].split("//", 1)[0]
        label = _LABEL.match(code)
        if (label and not _DEBUG_LABEL.match(code)) or _BLOCK_END.search(code):
            return first
        depth += _brace_delta(code)
        if depth < 0:
            return first
        if depth == 0 and _GLOBAL_LOAD.search(code):
            return j + 1
        if depth == 0 and any(_GLOBAL_LOAD.search(x) for x in _open_block(lines, j)):
            return j + 1
    return first


def _open_block(lines: list[str], j: int) -> list[str]:
    """The lines of the { } block closing at line j (inline asm scopes), else []."""
    if "}" not in lines[j].split("//", 1)[0]:
        return []
    depth = 0
    for k in range(j, -1, -1):
        depth += _brace_delta(lines[k])
        if depth == 0:
            return lines[k : j + 1]
    return []


def _line_of(text: str, pos: int) -> int:
    return text.count("\n", 0, pos)


def _body_start(lines: list[str], entry: int) -> int:
    """Index of the line holding the `{` that opens the entry's body."""
    depth = 0
    for j in range(entry, min(len(lines), entry + 10_000)):
        code = lines[j].split("//", 1)[0]
        depth += code.count("(") - code.count(")")
        if depth == 0 and code.strip() == "{":
            return j
    raise RewriteError("could not find the entry's body")


def _brace_delta(line: str) -> int:
    code = line.split("//", 1)[0]
    return code.count("{") - code.count("}")
