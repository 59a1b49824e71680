"""Hostile input, round 5 (issue 52): auto mode's report (`stats`) and `advise` over a file whose
(step, GPU) and (GPU, kernel) grids are far larger than its records. Each test names the item of
the issue it keeps fixed; each failed on the main of 2026-11-29."""

from __future__ import annotations

import json
import os

import pytest
from auto_inputs import cli_in_bounded_memory, many_cells_file

N = 20_000  # launches, each its own step, GPU (rank) and kernel: N x N cells could be


@pytest.fixture(scope="module")
def many(tmp_path_factory):
    path = tmp_path_factory.mktemp("many") / "many.npz"
    many_cells_file(path, N)
    assert os.path.getsize(path) < 8 << 20  # a few MiB of records
    return path


def test_3_advise_memory_is_sized_by_the_records(many):
    r = cli_in_bounded_memory("advise", many, "--json", "--top", "3")
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
    r = cli_in_bounded_memory("stats", many, "--width", "100")
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr[-3000:]
    assert f"steps: {N} recorded (0-{N - 1})" in r.stdout, r.stdout[:3000]
    assert f"per rank ({N} ranks" in r.stdout
