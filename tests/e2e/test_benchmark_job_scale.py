"""The job-scale benchmark (benchmarks/job_scale.py; issue 57, item 5) run end to end on a small
job: each command measured in a process of its own, the planted slow rank found in what it
prints, the folder gone afterwards unless kept, a kept folder measured again with --dir."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from repo_paths import ROOT


def _job_scale(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "benchmarks.job_scale", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_job_scale_measures_each_command_and_finds_the_slow_rank(tmp_path):
    out = tmp_path / "r.json"
    work = tmp_path / "work"
    r = _job_scale(
        "--ranks", "3", "--programs-scale", "0.05", "--commands", "stats,advise,merge,diff",
        "--workdir", str(work), "--keep", "--json", str(out),
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    (row,) = json.loads(out.read_text())
    assert row["ranks"] == 3 and 0 <= row["slow_rank"] < 3
    c = row["commands"]
    assert set(c) == {"stats", "advise", "merge", "diff"}
    for name in ("stats", "advise"):
        assert c[name]["rc"] == 0 and c[name]["named_rank"], (name, c[name])
        assert c[name]["named_kernels"] >= 1, (name, c[name])
    assert c["diff"]["rc"] == 0 and c["diff"]["named_rank"], c["diff"]
    for v in c.values():
        # A Python process with numpy holds tens of MB: the child's own peak, not ours or 0.
        assert 20e6 < v["peak_bytes"] < 2e9 and v["wall_s"] > 0, v
    assert c["merge"]["trace_bytes"] > 0
    lines = r.stdout.splitlines()
    head = next(i for i, ln in enumerate(lines) if ln.startswith("ranks"))
    assert lines[head + 1].split()[:2] == ["3", f"{row['files_bytes'] / 1e6:.0f}"]
    # Kept: measured again from the folder alone, its job_folders.json naming the slow rank.
    (folder,) = [p for p in work.iterdir() if p.name.startswith("job3.")]
    again = tmp_path / "again.json"
    r = _job_scale("--dir", str(folder), "--commands", "stats", "--json", str(again))
    assert r.returncode == 0, r.stderr
    (row2,) = json.loads(again.read_text())
    assert row2["slow_rank"] == row["slow_rank"] and row2["commands"]["stats"]["named_rank"]


def test_job_scale_deletes_its_folders(tmp_path):
    r = _job_scale(
        "--ranks", "2", "--programs-scale", "0.02", "--commands", "stats",
        "--workdir", str(tmp_path),
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert os.listdir(tmp_path) == []
