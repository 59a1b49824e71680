"""What to fix first on real runs (issues 45, 55): each planted-defect case of
benchmarks/fix_first.py (latency-, compute- and memory-bound programs, partial waves at 32, 16,
4 and 1 resident a SM, tails, idle SMs, host gaps, a cuBLAS matmul of a poor wave count seen
through CUPTI) recorded in auto mode, the advisor ranks its defect first, and its suggestion
applied recovers time (the control, a bandwidth-bound partial wave no fix recovers: the advisor
promises no time that is not there); each variant's output equals torch's (the benchmark checks it before
timing); the slow rank of two under torchrun. Run with -s to see the figures (BENCHMARKS.md,
"What to fix first", has the full run)."""

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

ONE_GPU = ("fma_wave16", "fma_wave4", "fma_wave1", "mem_wave", "fma_tail", "mem_tail")
ONE_GPU += ("fma_idle", "matmul", "wave", "skew", "few", "gaps")


@pytest.fixture(scope="module")
def gpu():
    from benchmarks import fix_first

    return fix_first.Gpu(reps=10, repeats=7)


@pytest.mark.parametrize("case", ONE_GPU)
def test_the_planted_defect_ranks_first_and_its_fix_recovers_time(case, gpu, tmp_path):
    from benchmarks import fix_first

    row = fix_first.run_case(case, gpu, str(tmp_path))
    print(json.dumps({k: v for k, v in row.items() if k not in ("findings", "sweep")}))
    print(row["findings"][0]["detail"] if row.get("findings") else "no finding")
    assert not row.get("skipped"), row.get("sweep")
    if row.get("control"):  # no defect: the advisor promised no time the fix did not recover
        assert row["ok"], (row["estimate_us"], row["recovered_us"], row["planted_us"])
        return
    assert row["ranked_first"], [(f["kind"], f["estimate_ns_per_step"]) for f in row["findings"]]
    assert row["recovered_us"] > 0  # the fix is faster; BENCHMARKS.md has by how much
    if case == fix_first.DIFF_CASE:
        finding = row["diff"]["finding"]
        assert finding["estimate_ns"] > 0 and finding["recovered_ns"] > 0


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs 2 GPUs")
def test_one_slow_rank_of_two_ranks_first(tmp_path):
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2"]
    cmd += ["--master_port", "29731", "-m", "benchmarks.fix_first", "--slow-rank"]
    cmd += ["--reps", "5", "--repeats", "5", "--out-dir", str(tmp_path)]
    cmd += ["--json", str(tmp_path / "rank.json")]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=ROOT)
    print(r.stdout[-3000:])
    assert r.returncode == 0, r.stderr[-3000:]
    (row,) = json.loads((tmp_path / "rank.json").read_text())["rows"]
    assert row["ranked_first"] and row["findings"][0]["rank"] == 1
