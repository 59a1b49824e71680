"""What to fix first on real runs (issue 45): each planted-defect kernel of
benchmarks/fix_first.py recorded in auto mode, the advisor ranks its defect first, and its
suggestion applied recovers time; the slow rank of two under torchrun. Run with -s to see the
figures (BENCHMARKS.md, "What to fix first", has the full run)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch
from repo_paths import ROOT

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]


@pytest.mark.parametrize("case", ["wave", "skew", "few", "gaps"])
def test_the_planted_defect_ranks_first_and_its_fix_recovers_time(case):
    from benchmarks import fix_first

    row = fix_first.run_case(case, reps=10, repeats=7)
    print(json.dumps({k: v for k, v in row.items() if k != "findings"}))
    print(row["findings"][0]["detail"] if row["findings"] else "no finding")
    assert row["ranked_first"], [(f["kind"], f["estimate_ns_per_step"]) for f in row["findings"]]
    assert row["recovered_us"] > 0  # the fix is faster; BENCHMARKS.md has by how much


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs 2 GPUs")
def test_one_slow_rank_of_two_ranks_first(tmp_path):
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2"]
    cmd += ["--master_port", "29731", "-m", "benchmarks.fix_first", "--slow-rank"]
    cmd += ["--reps", "5", "--repeats", "5", "--out", str(tmp_path)]
    cmd += ["--json", str(tmp_path / "rank.json")]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=ROOT)
    print(r.stdout[-3000:])
    assert r.returncode == 0, r.stderr[-3000:]
    (row,) = json.loads((tmp_path / "rank.json").read_text())["rows"]
    assert row["ranked_first"] and row["findings"][0]["rank"] == 1
