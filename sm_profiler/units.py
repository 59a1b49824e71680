"""Time units for everything that prints or draws a time (reports, the timeline's names, plots):
below every module that does, so that none of them imports another for a unit. Counted nouns
and the rest of a terminal's text are text.py's."""

from __future__ import annotations

UNITS = (("s", 1e9), ("ms", 1e6), ("µs", 1e3), ("ns", 1.0))


def time_unit(max_abs_ns: float) -> tuple[str, float]:
    """The largest unit in which `max_abs_ns` is at least 1 (ns for anything under 1 µs)."""
    for name, scale in UNITS:
        if max_abs_ns >= scale:
            return name, scale
    return "ns", 1.0


def format_time(ns: float) -> str:
    """One value in its own unit: '812 ns', '1.25 µs', '3.40 ms'."""
    unit, scale = time_unit(abs(ns))
    return f"{ns:.0f} ns" if unit == "ns" else f"{ns / scale:.2f} {unit}"


def table_unit(max_abs_ns: float) -> tuple[str, float]:
    """The unit of a table or list of times whose largest is `max_abs_ns`: the largest unit in
    which that is at least 10, so the table's numbers keep 3 to 4 significant digits ('180 ms',
    not '0.18 s') and its smaller numbers keep theirs too."""
    for name, scale in UNITS:
        if max_abs_ns >= 10 * scale:
            return name, scale
    return "ns", 1.0


def report_unit(tops_ns: list[float]) -> tuple[str, float]:
    """The one unit of a report whose tables' largest figures are `tops_ns`: the unit the
    largest of them picks (`table_unit`), or a smaller one where a table's largest would be
    under a tenth of it there (three decimals then keep its three digits: a 10 ms kernel's
    200 ns ranges are 0.200 µs, not 0.000 ms)."""
    tops = [t for t in tops_ns if t > 0]
    if not tops:
        return "ns", 1.0
    _, top_scale = table_unit(max(tops))
    for name, scale in UNITS:
        if scale <= top_scale and min(tops) >= 0.1 * scale:
            return name, scale
    return "ns", 1.0
