"""Run folders of several ranks for the job's answer from summaries (issue 57): each rank's
table built from its launches' programs (advise_inputs.make_table), with what a job's rank file
carries (its rank and WORLD_SIZE, its run's identity, a clock sample), one rank slower than the
others, at a chosen clock origin (%globaltimer reads about 1.7e18 ns; 0 and 1e12 are the
origins a figure must not depend on)."""

from __future__ import annotations

import os

import numpy as np
from advise_inputs import launch, make_table

SM_COUNT = 8
RUN = {"run_id": "r57", "restart": "0", "master": "10.0.0.1:29500", "agent": "node0:1:1"}
# (kernel, programs, ns a program, resident a SM): a partial last wave, too few programs for the
# SMs, and a kernel whose last programs run long (a tail).
KERNELS = (("gemm_tile", 20, 1_000, 2), ("reduce_rows", 5, 800, 1), ("add_bias", 16, 300, 2))


def rank_table(rank: int, world: int, origin_ns: int, slow: bool = False, steps: int = 4):
    """One rank's AutoTable: `steps` steps (step 0 compiles: its kernels run for the first time,
    with long gaps between them), each of two launches of every kernel of KERNELS, host gaps between
    launches; `slow`: the gemm's programs take 40 % longer. The GPU's clock runs 1,000 x rank ns
    behind the host's (its clock sample)."""
    rng = np.random.default_rng(57 + rank)
    t = origin_ns + 1_000 * rank
    out = []
    for step in range(steps):
        t += 3_000
        for name, programs, ns, resident in KERNELS:
            for _ in range(2):
                dur = int(ns * (1.4 if slow and name == "gemm_tile" else 1.0))
                progs = _programs(t, programs, dur, resident, rng, long_last=name == "add_bias")
                out.append(launch(progs, name, step=step))
                t = max(p[2] for p in progs) + int(rng.integers(200, 900))
                t += 40_000 if step == 0 else 0  # compiling the next kernel
    table = make_table(out, sm_count=SM_COUNT, ranks=(rank,), metadata={"job": dict(RUN)})
    table.sessions[0].update(
        world_size=world,
        host=f"node{rank // 4}",
        clock=[{"offset_ns": -1_000 * rank, "error_ns": 50}],
    )
    return table


def _programs(t0: int, n: int, dur: int, resident: int, rng, long_last: bool):
    """n programs of about `dur` ns from t0, `resident` at a time on each of SM_COUNT SMs, in
    waves; long_last: the last program runs three times as long."""
    out = []
    slots = SM_COUNT * resident
    for p in range(n):
        wave, slot = divmod(p, slots)
        start = t0 + wave * dur + int(rng.integers(0, 20))
        d = dur + int(rng.integers(0, 40)) + (2 * dur if long_last and p == n - 1 else 0)
        out.append((slot % SM_COUNT, start, start + d))
    return out


def write_rank_folder(folder, ranks: int = 4, origin_ns: int = 0, slow_rank: int = 1) -> list:
    """`ranks` rank files (auto.rankN.npz) in `folder`, rank `slow_rank` the slow one; returns
    their paths."""
    os.makedirs(folder, exist_ok=True)
    paths = []
    for r in range(ranks):
        path = os.path.join(folder, f"auto.rank{r}.npz")
        rank_table(r, ranks, origin_ns, slow=r == slow_rank).save(path)
        paths.append(path)
    return paths


def write_torch_rank_folder(folder, ranks: int = 3, origin_ns: int = 0, slow_rank: int = 1):
    """write_rank_folder's ranks, each file carrying torch.profiler's trace of its steps (as
    `run --torch` stores it: auto_torch_parts.members): each launch's CUPTI row, a cuBLAS-like
    kernel (with its launch shape) between launches, ProfilerStep#N windows, the rank named."""
    from advise_inputs import cupti_doc_of

    from sm_profiler.export import auto_torch_parts as torch_parts

    os.makedirs(folder, exist_ok=True)
    for r in range(ranks):
        table = rank_table(r, ranks, origin_ns, slow=r == slow_rank)
        shape = ([66, 1, 1], [128, 1, 1], 168, 100_000)
        doc = cupti_doc_of(table, rank=r, fill_shape=shape, num_sms=SM_COUNT)
        table.save(os.path.join(folder, f"auto.rank{r}.npz"), torch_parts.members(doc))
