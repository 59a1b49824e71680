"""Folders of rank files for `sm-profiler query DIR` (issue 57, item 4): a few ranks of a small
job, each built through auto_inputs' table_of, one rank slower than the others in one kernel."""

from __future__ import annotations

import os

from auto_inputs import table_of

# The job's kernels, numbered as the binding numbers them.
JOB_KERNELS = {
    1: {"name": "gemm", "num_warps": 8},
    2: {"name": "triton_poi_fused_add_0", "num_warps": 4},
    3: {"name": "triton_red_fused_softmax_1", "num_warps": 4},
}
STEPS = (1, 2, 3)
PROGRAMS = 6  # per launch, on 4 SMs
# Each kernel's program time (ns), and what the slow rank takes in kernel 2 instead.
PROGRAM_NS = {1: 900, 2: 400, 3: 250}
SLOW_FACTOR = 3
JOB = {"run_id": "job-57", "restart": "0", "master": "node0:29500", "agent": "node0:1:1"}


def rank_records(rank: int, t0_ns: int, slow: bool = False) -> tuple[list, dict]:
    """(records as auto_buffer takes them, labels: launch -> (step tag, tag)) of one rank: per
    step, each kernel launched once, its programs back to back on 4 SMs; the rank's own offset
    and per-program jitter make every launch's time distinct."""
    recs, labels = [], {}
    at = t0_ns + 37 * rank
    for step in STEPS:
        for kid in JOB_KERNELS:
            launch = 10 * step + kid
            labels[launch] = (step, 0)
            base = PROGRAM_NS[kid] * (SLOW_FACTOR if slow and kid == 2 else 1)
            for p in range(PROGRAMS):
                dur = base + 11 * p + 3 * rank + step
                recs.append((at + 5 * p, dur, p % 4, launch, kid, p, 0, 0))
            at += base + 11 * PROGRAMS + 3 * rank + 1000
        at += 5000
    return recs, labels


def rank_table(
    rank: int, t0_ns: int, slow: bool = False, job: dict | None = JOB, world_size: int = 4
):
    """Rank `rank`'s AutoTable (its session names the rank and the job's size; its metadata
    the run `job`)."""
    recs, labels = rank_records(rank, t0_ns, slow)
    session = {"rank": rank, "world_size": world_size}
    table = table_of(recs, kernels=JOB_KERNELS, session=session, labels=labels)
    if job is not None:
        table.metadata["job"] = dict(job)
    return table


def job_folder(folder, ranks: int = 4, slow_rank: int = 2, t0_ns: int = 1_700_000_000 * 10**9):
    """`folder` holding auto.rank0.npz .. auto.rank{ranks-1}.npz of one run, rank `slow_rank`
    slow; returns {rank: its AutoTable} as saved."""
    os.makedirs(folder, exist_ok=True)
    tables = {}
    for r in range(ranks):
        tables[r] = rank_table(r, t0_ns, slow=r == slow_rank, world_size=ranks)
        tables[r].save(os.path.join(folder, f"auto.rank{r}.npz"))
    return tables


def wide_rank_table(rank: int, programs: int, slow: bool = False, sms: int = 132):
    """A rank of a realistic shape built from numpy columns (no record written one by one): 3
    steps of 60 launches of 20 kernels, about `programs` programs in waves over `sms` SMs,
    each program 20-41 µs (5 % longer on a slow rank), at a real clock reading."""
    import numpy as np

    from sm_profiler.trace.auto_table import AutoTable

    rng = np.random.default_rng(rank)
    steps, per_step, n_kernels = 3, 60, 20
    n_launch = steps * per_step
    mean = max(programs // n_launch, 2)
    per = rng.integers(mean // 2, mean * 3 // 2, n_launch).astype(np.int64)
    first = np.cumsum(per) - per
    launch = np.repeat(np.arange(n_launch), per)
    x = np.arange(int(per.sum())) - first[launch]
    kernel = np.tile(np.arange(per_step) % n_kernels, steps)
    stretch = 1.05 if slow else 1.0
    wave_ns = int(24_000 * stretch)
    waves = (per + sms - 1) // sms
    launch_at = 1_700_000_000 * 10**9 + 37 * rank + np.cumsum(waves * wave_ns + 5_000)
    start = launch_at[launch] + (x // sms) * wave_ns + rng.integers(0, 500, len(x))
    dur = ((20_000 + 1_000 * kernel[launch] + rng.integers(0, 2_000, len(x))) * stretch).astype(
        np.int64
    )
    zeros = np.zeros(len(x), np.int32)
    rows = dict(launch=launch, sm=(x % sms).astype(np.int32), start_ns=start)
    rows.update(end_ns=start + dur, x=x, y=zeros, z=zeros, warp=zeros)
    ones = np.ones(n_launch, np.int64)
    launches = dict(gpu=0 * ones, session=0 * ones, kernel=kernel, grid_id=np.arange(n_launch))
    launches.update(step=np.repeat(np.arange(steps), per_step), tag=0 * ones)
    launches.update(per_warp=np.zeros(n_launch, bool), first_row=first, rows=per)
    launches.update(start_ns=np.minimum.reduceat(start, first))
    launches.update(end_ns=np.maximum.reduceat(start + dur, first))
    launches.update(grid_x=per, grid_y=ones, grid_z=ones)
    kernels = [{"name": f"triton_kernel_{k}", "num_warps": 4, "kernel_id": k} for k in range(20)]
    session = {"gpu": 0, "rank": rank, "sm_count": sms, "device_name": "synthetic"}
    return AutoTable(rows, launches, kernels, [session], {"job": dict(JOB)})
