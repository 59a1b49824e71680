"""Statistics: exact report text for a tiny hand-built trace, and Stats values checked against
independent numpy / pure-Python computations on random traces."""

from __future__ import annotations

import io

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sm_profiler import decode
from sm_profiler import format as fmt
from sm_profiler.capture import Capture
from sm_profiler.stats import (
    compute_stats,
    format_stats,
    format_time,
    grouped_percentile,
    print_stats,
    union_length,
)

KINDS = {"B": fmt.KIND_BEGIN, "E": fmt.KIND_END, "I": fmt.KIND_INSTANT}


def build_capture(
    lanes: dict[int, dict],
    num_blocks: int,
    num_groups: int = 1,
    capacity: int = 16,
    event_names: dict[int, str] | None = None,
    emulated: bool = False,
    kernel_name: str = "kernel",
    group_names: dict[int, str] | None = None,
) -> Capture:
    """A Capture in the wire format, built word by word.

    lanes: {lane index: {"sm": int, "anchor": ns, "records": [("B"|"E"|"I", event id, ns)],
    "attempted": int (only for overflowed lanes)}}. Lanes not listed stay uninitialised. Records
    beyond `capacity` are dropped as the device would drop them (counted in `attempted`).
    """
    layout = fmt.Layout(num_blocks, num_groups, capacity, fmt.FLAG_EMULATED if emulated else 0)
    words = np.zeros(layout.total_words, np.uint64)
    words[: fmt.HEADER_WORDS] = layout.header()
    view = layout.lanes(words)
    for i, spec in lanes.items():
        recs = spec.get("records", [])
        attempted = spec.get("attempted", len(recs) if len(recs) > capacity else 0)
        view["anchor"][i] = spec["anchor"]
        view["sm_attempted"][i] = spec["sm"] | (attempted << 32)
        for j, (kind, event, t) in enumerate(recs[:capacity]):
            tag = fmt.make_tag(event, KINDS[kind])
            view["records"][i, j] = tag | ((t & fmt.LOW32) << fmt.TIME_SHIFT)
    return Capture(
        words=words,
        event_names=event_names or {},
        group_names=group_names or {},
        kernel_name=kernel_name,
    )


def tiny_capture(**kw) -> Capture:
    """Two blocks on SMs 0 and 1; 'load' then 'compute' in each, one 'mark' instant."""
    lanes = {
        0: {"sm": 0, "anchor": 1000,
            "records": [("B", 0, 1100), ("E", 0, 1600), ("B", 1, 1600), ("E", 1, 3600),
                        ("I", 2, 3700)]},
        1: {"sm": 1, "anchor": 1200,
            "records": [("B", 0, 1300), ("E", 0, 2300), ("B", 1, 2300), ("E", 1, 5300)]},
    }  # fmt: skip
    names = {0: "load", 1: "compute", 2: "mark"}
    return build_capture(lanes, num_blocks=2, event_names=names, kernel_name="tiny", **kw)


# -- exact text --------------------------------------------------------------------------------

TINY_REPORT = """\
sm_profiler stats: tiny (2 blocks)
span 4.30 µs · 2 SMs · 2/2 lanes initialised · 4 ranges · 1 instant

event    count  total µs  mean µs  min µs  p50 µs  p90 µs  p99 µs  max µs  instants
compute      2      5.00     2.50    2.00    2.50    2.90    2.99    3.00         0
load         2      1.50     0.75    0.50    0.75    0.95    0.99    1.00         0
mark         0         -        -       -       -       -       -       -         1

SMs (times from kernel start)
sm  blocks  busy µs  busy %  first ns  last µs
 0       1     2.70    62.8         0     2.70
 1       1     4.10    95.3       200     4.30
load imbalance: last SM (1) finishes 800 ns after the mean SM (18.6% of span)
"""


def test_tiny_report_exact():
    assert format_stats(compute_stats(decode(tiny_capture())), width=100) == TINY_REPORT
