"""Hostile input, round 5 (issue 52): the auto report (`stats`) and `advise` of recordings that
span years, within what an auto file may hold (item 5: computed without wrapping), of ranks that
kept different steps (item 2), and of a file whose (step, GPU) and (GPU, kernel) grids are far
larger than its records (item 3). Each test names the item of the issue it keeps fixed; each
failed on the main of 2026-11-29."""

from __future__ import annotations

import json
import os
import re

import advise_inputs as ai
import pytest
from auto_inputs import many_cells_file
from cli_runs import run_cli

from sm_profiler.report.auto_report import format_report, launch_table, step_shares

YEARS_NS = 2**61  # 73 years: a step of it is within an auto file's span (less than 2**62 ns)


def _steps(programs_of_step0, ranks=(0,)):
    """Step 0: one launch of `programs_of_step0` (sm, start_ns, end_ns) on a 4-SM GPU; step 1:
    2 programs of 100 ns right after it."""
    end = max(p[2] for p in programs_of_step0)
    return ai.make_table(
        [
            ai.launch(programs_of_step0, step=0),
            ai.launch([(0, end, end + 100), (1, end, end + 100)], step=1),
        ],
        ranks=ranks,
    )


def test_5_the_idle_sm_time_of_a_launch_of_years_is_its_own():
    # 2 programs on 4 SMs for 2**61 ns: 50 % idle. The GPU's SM-time (4 x 2**61 ns) wrapped in
    # int64: 150 %.
    trace = _steps([(0, 0, YEARS_NS), (1, 0, YEARS_NS)]).decode()
    assert launch_table(trace)["idle_pct"][0] == 50
    text = format_report(trace, width=100)
    assert "idle 50%" in text and not re.search(r"\s-\d", text), text


def test_5_a_step_of_three_gpus_of_years_has_its_own_share():
    # Three ranks each busy the whole of a step of 2**62 - 1000 ns: the share seen is 100 %. The
    # three GPUs' busy time summed in int64 wrapped: -4.6e18.
    long_ns = 2**62 - 1000
    per_rank = [
        [
            ai.launch([(0, 0, long_ns), (1, 0, long_ns)], step=0),
            ai.launch([(0, long_ns, long_ns + 100)], step=1),
        ]
        for _ in range(3)
    ]
    got = step_shares(ai.ranks_table(per_rank).decode())
    assert got["share"].tolist() == [1.0, 1.0]


def test_2_the_per_rank_lines_compare_the_steps_every_rank_kept():
    # Rank 1 recorded steps 0-6 (six of 10 ns, then 400 ns), rank 0 kept steps 5 and 6 (10 ns
    # each): over those two steps rank 1 is 205 ns a step, rank 0 10 ns. Before, every launch
    # was summed: rank 1 460 ns, rank 0 20 ns, 7 steps against 2.
    rank1 = [ai.launch([(sm, 10 * k, 10 * k + 10) for sm in range(4)], step=k) for k in range(6)]
    rank1.append(ai.launch([(sm, 60, 460) for sm in range(4)], step=6))
    rank0 = [ai.launch([(sm, 10 * k, 10 * k + 10) for sm in range(4)], step=k) for k in (5, 6)]
    text = format_report(ai.ranks_table([rank0, rank1]).decode(), width=100)
    assert "per step, over the 2 steps every rank kept" in text, text
    assert re.search(r"rank 0 10 ns, rank 1 205 ns", text), text
    assert re.search(r"slowest: rank 1, 205 ns", text), text


N = 20_000  # launches, each its own step, GPU (rank) and kernel: N x N cells could be
MEMORY_BYTES = 2 << 30  # one dense N x N grid of int64 is 3 GiB


@pytest.fixture(scope="module")
def many(tmp_path_factory):
    path = tmp_path_factory.mktemp("many") / "many.npz"
    many_cells_file(path, N)
    assert os.path.getsize(path) < 8 << 20  # a few MiB of records
    return path


def test_3_advise_memory_is_sized_by_the_records(many):
    r = run_cli("advise", many, "--json", "--top", "3", timeout=300, memory_bytes=MEMORY_BYTES)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr[-3000:]
    got = json.loads(r.stdout)
    assert got["basis"] == "steps" and got["steps"] == list(range(N))
    assert got["gpus"] == N and got["ranks"] == N
    # Each launch: 1 program on 4 SMs for 100 ns, its GPU's only launch of its only step: 3 SMs
    # idle for 100 ns, one finding per kernel; nothing else (no gaps, no step two GPUs ran).
    assert [f["kind"] for f in got["findings"]] == ["idle_sms"] * 3
    assert [f["estimate_ns_per_step"] for f in got["findings"]] == [75.0] * 3
    assert got["more"] == N - 3


def test_3_stats_memory_is_sized_by_the_records(many):
    r = run_cli("stats", many, "--width", "100", timeout=300, memory_bytes=MEMORY_BYTES)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr[-3000:]
    assert f"steps: {N} recorded (0-{N - 1})" in r.stdout, r.stdout[:3000]
    assert f"per rank ({N} ranks" in r.stdout
