"""Progress messages for long work: shown on a terminal, silent when stderr is a pipe or a file.

Logs, CI output and redirected runs stay clean; a person at a terminal sees what is taking time::

    with stage("decoding 12,345,678 records"):
        trace = decode(captures)

prints ``decoding 12,345,678 records ...`` and then ``done in 1.2 s`` on the same line.
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO


def is_terminal(stream: TextIO | None) -> bool:
    try:
        return stream is not None and stream.isatty()
    except (AttributeError, ValueError):  # closed or not a real stream
        return False


@contextmanager
def stage(label: str, stream: TextIO | None = None, enabled: bool | None = None) -> Iterator[None]:
    """Announce `label`, run the block, then say how long it took (or that it failed).

    `enabled` defaults to whether `stream` (default: stderr) is a terminal.
    """
    out = sys.stderr if stream is None else stream
    show = is_terminal(out) if enabled is None else enabled
    if not show:
        yield
        return
    out.write(f"{label} ...")
    out.flush()
    t0 = time.perf_counter()
    try:
        yield
    except BaseException:
        out.write(" failed\n")
        out.flush()
        raise
    out.write(f" done in {time.perf_counter() - t0:.1f} s\n")
    out.flush()


# Host work over fewer rows than this (records, programs) takes about a second at most: it gets
# no progress line (BENCHMARKS.md, auto_host: 5 M records take 2-6 s a stage on 2 cores).
LONG_ROWS = 1_000_000


def stage_for(
    label: str, rows: int, stream: TextIO | None = None, enabled: bool | None = None
) -> contextlib.AbstractContextManager[None]:
    """`stage` for work over `rows` rows: announced only from LONG_ROWS rows on."""
    return stage(label, stream, enabled if rows >= LONG_ROWS else False)
