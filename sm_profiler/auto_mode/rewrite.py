"""Splice the auto-mode record into a compiled kernel's PTX (the text lives in `ptx.py`).

The kernel's own code is not touched: a module global is declared, the record's registers and
start go at the top of the entry's body, and its end before every `ret` (or `exit`) of the entry.
Anything this does not recognise raises `RewriteError`; the caller then keeps the plain PTX and
says why (a kernel runs uninstrumented rather than broken).
"""

from __future__ import annotations

import re

from .. import ptx

LEVELS = ("program", "warp")

_ENTRY = re.compile(r"^\s*\.visible\s+\.entry\s+([\w$.]+)\s*\(", re.M)
_RET = re.compile(r"^(\s*)(@(!?)(%[\w$.]+)\s+)?(ret|exit)(\.uni)?\s*;\s*(//.*)?$")
_DECL = re.compile(r"^\s*(\.reg|\.shared|\.local|\.loc|\.pragma|//|$)")
_ADDRESS_SIZE = re.compile(r"^\s*\.address_size\s+64\s*$", re.M)


class RewriteError(Exception):
    """The PTX is not in a shape the rewrite knows; the kernel is left as it was."""


def instrument(text: str, level: str = "program") -> str:
    """`text` (one kernel's PTX, as Triton emits it) with the auto-mode record added."""
    if level not in LEVELS:
        raise ValueError(f"level must be one of {LEVELS}, got {level!r}")
    per_warp = level == "warp"
    if ptx.AUTO_SYMBOL in text:
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
    out = lines[: body + 1]
    i = body + 1
    while i < len(lines) and _DECL.match(lines[i]) and lines[i].strip() != "}":
        out.append(lines[i])
        i += 1
    out.append("\t" + ptx.auto_declarations() + ptx.auto_prologue(per_warp) + "\n")
    depth, rets, skip, closed = 1, 0, 0, False
    for line in lines[i:]:
        if not closed:
            r = _RET.match(line)
            if r:
                rets += 1
                indent, _, negated, pred = r.group(1), r.group(2), r.group(3), r.group(4)
                epilogue = "\t" + ptx.auto_epilogue(per_warp, rets - 1) + "\n"
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
    text = "".join(out)
    at = _ADDRESS_SIZE.search(text).end()
    return text[:at] + "\n" + ptx.auto_module_global() + text[at:]


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
