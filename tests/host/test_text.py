"""sm_profiler/text.py (issue 53, item 3): the one module of a terminal's text (printable, wrap,
fit_table, plural, metadata_count) below every report. One pluraliser: it counts every noun the
same way (digits grouped, the plural given where it is not noun + s), and the reports that had
their own now say '1 more lane' and '1 step' where they said '1 more lanes' and '1 steps'."""

from __future__ import annotations

import ast
import os

import numpy as np
import pytest
from captures import build_capture
from repo_paths import ROOT

from sm_profiler.report.stats import compute_stats
from sm_profiler.text import fit_table, metadata_count, middle, number_runs, plural, printable
from sm_profiler.trace.decode import decode

PACKAGE = os.path.join(ROOT, "sm_profiler")
# What text.py owns: no other module defines one of its own, nor imports these from a report.
TEXT_HELPERS = {"printable", "wrap", "fit_table", "plural", "middle", "number_runs", "fit"}


def _trees():
    for folder, _, files in os.walk(PACKAGE):
        for f in sorted(files):
            if f.endswith(".py"):
                path = os.path.join(folder, f)
                yield os.path.relpath(path, ROOT), ast.parse(open(path, encoding="utf-8").read())


@pytest.mark.parametrize(
    "n, noun, many, text",
    [
        (0, "gap", "", "0 gaps"),
        (1, "gap", "", "1 gap"),
        (2, "gap", "", "2 gaps"),
        (1024, "block", "", "1,024 blocks"),
        (1, "launch", "launches", "1 launch"),
        (3, "launch", "launches", "3 launches"),
        (1, "more lane", "", "1 more lane"),
    ],
)
def test_plural_counts_every_noun_one_way(n, noun, many, text):
    assert plural(n, noun, many) == text


@pytest.mark.parametrize(
    "value, count",
    [(0, 0), (132, 132), (np.int64(8), 8), (True, 0), ("many", 0), (-1, 0), (1 << 20, 0)],
)
def test_metadata_count_takes_only_a_count_a_file_can_mean(value, count):
    assert metadata_count(value) == count


def test_the_helpers_fit_a_line():
    assert printable("a\x1bb\n") == "a\\x1bb\\n"
    assert middle("triton_per_fused_native_layer_norm", 11) == "trito…_norm"
    assert number_runs([1, 2, 3, 7]) == "1-3, 7"
    lines, dropped = fit_table(
        ["name", "a", "b"], [["kernel_name", "10", "200"]], 15, drop=(1,), shrink=0
    )
    assert dropped == ["a"] and all(len(line) <= 15 for line in lines)


def test_no_module_but_text_defines_a_pluraliser_or_a_metadata_count():
    """Four pluralisers (stats_table's, cli._plural, two _n) and two _count were in four
    modules, each a little different."""
    own = {"plural", "_plural", "_n", "_count", "metadata_count"}
    found = [
        f"{path}: {node.name}"
        for path, tree in _trees()
        if not path.endswith(os.path.join("sm_profiler", "text.py"))
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef) and node.name in own
    ]
    assert not found, found


def test_no_module_takes_a_text_helper_from_a_report():
    """The CLI, the advisor, coverage and auto mode's report took them from stats_table."""
    found = [
        f"{path}: {node.module} {a.name}"
        for path, tree in _trees()
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
        and (node.module or "").split(".")[-1] in ("stats_table", "stats")
        for a in node.names
        if a.name in TEXT_HELPERS
    ]
    assert not found, found


def test_the_lanes_beyond_the_named_ones_are_counted_in_the_singular_too():
    # Four lanes dropped records; the warning names three and counts the fourth.
    recs = [("B", 0, 100 + 10 * i) if i % 2 == 0 else ("E", 0, 100 + 10 * i) for i in range(8)]
    lanes = {b: {"sm": b, "anchor": 50, "records": recs, "attempted": 9 + b} for b in range(4)}
    stats = compute_stats(decode(build_capture(lanes, num_blocks=4, capacity=4)))
    (w,) = [w for w in stats.warnings if "dropped" in w]
    assert "; and 1 more lane." in w or w.split("; and ")[1].startswith("1 more lane")
    assert "more lanes" not in w
