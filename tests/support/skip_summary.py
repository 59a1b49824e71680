"""Skips grouped by reason at the end of a test run: one line each, with a count, most frequent
first (tests/conftest.py takes the hook from here; a pytest plugin of its own, `-p skip_summary`,
so that a test can run it on a tiny test folder).

`-ra` printed a line per skip (99 of 117 lines on a CPU machine, each GPU test one), and
pytest's own `-rs` folds only skips of the same file, line and reason; the reasons are what a
reader acts on (install an extra, find a GPU), so they are grouped by their text alone.
"""

from __future__ import annotations

from collections import Counter

TITLE = "skipped, by reason"


def skip_reason(report) -> str:
    """The reason a skipped test report gives, on one line, without pytest's 'Skipped: '."""
    longrepr = report.longrepr
    text = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
    return " ".join(text.removeprefix("Skipped: ").split())


def grouped(reports) -> list[tuple[int, str]]:
    """(count, reason) of `reports`' skips, most frequent first, then by reason."""
    counts = Counter(skip_reason(r) for r in reports)
    return sorted(((n, reason) for reason, n in counts.items()), key=lambda c: (-c[0], c[1]))


def pytest_terminal_summary(terminalreporter) -> None:
    skipped = terminalreporter.stats.get("skipped", [])
    # `-rs` (or `-ra`) asked for pytest's own lines: not both.
    if not skipped or "s" in terminalreporter.reportchars:
        return
    rows = grouped(skipped)
    terminalreporter.write_sep("=", TITLE)
    digits = len(str(rows[0][0]))
    for n, reason in rows:
        terminalreporter.write_line(f"{n:>{digits}}  {reason}")
