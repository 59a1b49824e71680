"""The generator of a job's rank folders (benchmarks/job_folders.py; issue 57, item 5): what it
writes is a job of R ranks that `sm-profiler stats DIR` reads, on real clock readings, with the
planted slow rank and its kernels named. The other helpers of issue 57 build their folders with
make_job_folder too."""

from __future__ import annotations

import os

import numpy as np
import pytest
from cli_runs import run_cli

from benchmarks import job_folders as jf
from sm_profiler.export import auto_job as jobs
from sm_profiler.wire.capture import load

SCALE = 0.05  # ~7,800 programs a rank: seconds for the test, the job's shape kept


@pytest.mark.parametrize("slow", [0, 2])
def test_stats_dir_names_the_planted_slow_rank_and_its_kernels(tmp_path, slow):
    made = jf.make_job_folder(tmp_path, 3, slow_rank=slow, programs_scale=SCALE, seed=7)
    assert sorted(jobs.rank_files(str(tmp_path))) == [0, 1, 2]
    r = run_cli("stats", tmp_path)
    assert r.returncode == 0, r.stderr
    line = " ".join(r.stdout.split("slowest: rank ", 1)[1].split("\n\n", 1)[0].split())
    assert line.startswith(f"{slow},"), line
    # The kernels that make its difference are the planted ones, largest first.
    after = line.split("most of the difference:", 1)[1]
    assert after.split(" +")[0].strip() in made.slow_kernels, after
    assert all(k in after for k in made.slow_kernels), after


def test_ranks_are_one_job_on_their_own_clocks(tmp_path):
    ranks = 2 * jf.GPUS_PER_NODE + 1  # three nodes
    made = jf.make_job_folder(tmp_path, ranks, slow_rank=1, programs_scale=0.02, seed=0)
    tables = [load(os.path.join(tmp_path, f"auto.rank{r}.npz")) for r in range(ranks)]
    starts = np.array([int(t.launches["start_ns"].min()) for t in tables], np.int64)
    # %globaltimer readings of today, in 32 ns ticks, each node's GPUs off its host's clock.
    assert (abs(starts - jf.T0_NS) < 10**7).all()
    assert all((t.rows["start_ns"] % jf.TICK_NS == 0).all() for t in tables)
    sessions = [t.sessions[0] for t in tables]
    assert [s["rank"] for s in sessions] == list(range(ranks))
    assert {s["world_size"] for s in sessions} == {ranks}
    assert len({s["host"] for s in sessions}) == 3
    assert len({s["clock"][0]["offset_ns"] for s in sessions}) == ranks
    assert len({jobs.run_key(t.metadata["job"]) for t in tables}) == 1
    assert made.programs_per_rank == tables[0].num_rows == tables[-1].num_rows
    assert made.launches_per_rank == 3 * jf.LAYERS * len(jf.KERNELS) == tables[0].num_launches
    # On the host's clock (what merge aligns by) the ranks' steps start within the hosts'
    # error; on their GPUs' clocks, nodes apart by far more.
    host = [int(t.on_host_clock().launches["start_ns"].min()) for t in tables]
    assert max(host) - min(host) < 250_000 < 1_000_000 < max(starts) - min(starts)


def test_a_folder_that_does_not_fit_the_disk_is_refused_before_writing(tmp_path):
    with pytest.raises(OSError, match="lower --programs-scale"):
        jf.make_job_folder(tmp_path, 10**7, programs_scale=1.0)
    assert os.listdir(tmp_path) == []
