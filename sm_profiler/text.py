"""Text for a terminal: what every report, the CLI and the timeline's notes share to print a
name safely, count a noun, wrap prose and fit a table to a line width. Below every module that
prints (the layer of the basics), so that none of them imports another report's renderer for a
helper; time units are units.py's.
"""

from __future__ import annotations

import re
import textwrap

import numpy as np


def printable(text: str) -> str:
    """`text` with every unprintable character escaped (\\x1b, \\n, \\ud800): what a capture file
    holds must not reach the terminal as escape sequences, nor fail to encode."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else ascii(c)[1:-1] for c in text)


def plural(n: int, noun: str, many: str = "") -> str:
    """'1 gap', '2 gaps', '1,024 blocks', '3 launches' (`many`: a plural that is not noun + s):
    the one way sm_profiler counts a noun."""
    return f"{n:,} {noun if n == 1 else many or noun + 's'}"


def metadata_count(v) -> int:
    """A count from metadata (an SM count, a GPU number) in 0..2**20, else 0: a file may say
    anything there ('many', a list, True, inf, -1)."""
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
        return 0
    return int(v) if 0 <= v < 1 << 20 else 0


def middle(name: str, room: int) -> str:
    """`name` cut to `room` characters in the middle: 'triton_per_fused_nat…backward_view_7'."""
    if len(name) <= room:
        return name
    tail = (room - 1) // 2
    return name[: room - 1 - tail] + "…" + name[len(name) - tail :]


def fit(text: str, width: int) -> str:
    """`text` cut to `width` characters at its end, with an ellipsis."""
    return text if len(text) <= width else text[: max(width - 1, 0)] + "…"


_TIME_SPACE = re.compile(r"(\d) (ns|µs|ms|s)\b")


def wrap(text: str, width: int, indent: str = "  ") -> list[str]:
    """textwrap.wrap that never breaks a time from its unit ('800 ns')."""
    glued = _TIME_SPACE.sub("\\1\0\\2", text)
    lines = textwrap.wrap(glued, width=width, subsequent_indent=indent, break_on_hyphens=False)
    return [line.replace("\0", " ") for line in lines]


def join_wrapped(parts: list[str], width: int, sep: str = " · ", indent: str = "  ") -> list[str]:
    """`parts` joined by `sep`, broken between parts (never inside one unless it alone is too
    long) so that every line fits `width`."""
    lines: list[str] = []
    cur = ""
    for p in parts:
        if cur and len(cur) + len(sep) + len(p) > width:
            lines.append(cur + sep.rstrip())
            cur = indent + p
        else:
            cur = cur + sep + p if cur else p
    lines.append(cur)
    return [w for line in lines for w in (wrap(line, width, indent) or [""])]


def fit_table(
    headers: list[str],
    rows: list[list[str]],
    width: int,
    left: int = 1,
    drop: tuple[int, ...] = (),
    shrink: int | None = None,
) -> tuple[list[str], list[str]]:
    """Aligned table lines within `width` (the first `left` columns left-aligned, the rest
    right-aligned), and the headers of the columns left out to fit.

    Columns in `drop` go, in that order, while the table is too wide; then column `shrink` (the
    names) is cut with an ellipsis, down to 8 characters.
    """
    keep = list(range(len(headers)))
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]

    def total(cols: list[int]) -> int:
        w = [min(widths[i], 8) if i == shrink else widths[i] for i in cols]
        return sum(w) + 2 * (len(cols) - 1)

    dropped: list[str] = []
    for i in drop:
        if total(keep) <= width:
            break
        keep.remove(i)
        dropped.append(headers[i])
    if shrink is not None:
        room = width - (total(keep) - min(widths[shrink], 8))
        widths[shrink] = max(min(widths[shrink], room), min(widths[shrink], 8))
        rows = [r[:shrink] + [fit(r[shrink], widths[shrink])] + r[shrink + 1 :] for r in rows]

    def line(cells: list[str]) -> str:
        return "  ".join(
            cells[i].ljust(widths[i]) if i < left else cells[i].rjust(widths[i]) for i in keep
        ).rstrip()

    return [line(headers)] + [line(r) for r in rows], dropped


def number_runs(values: list[int], most: int = 6) -> str:
    """[1, 2, 3, 7] -> '1-3, 7': runs of consecutive numbers, at most `most` pieces shown."""
    out, start = [], None
    for k, v in enumerate(values):
        if start is None:
            start = v
        if k + 1 == len(values) or values[k + 1] != v + 1:
            out.append(f"{start}" if start == v else f"{start}-{v}")
            start = None
    return ", ".join(out[:most]) + (" ..." if len(out) > most else "")
