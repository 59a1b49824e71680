"""Folders of rank files as a job of R ranks leaves them (`sm-profiler run` under torchrun), made
fast enough for R = 8,192: the inputs of benchmarks/job_scale.py (issue 57, item 5).

Each rank file is what auto mode writes (wire/auto_file.py; docs/format.md, "Auto-mode files"),
built through the project's own API (an AutoTable of rows, launches, kernels and sessions, saved
with AutoTable.save) in the shape of a real training job on H200s:

    132 SMs a GPU, 8 GPUs a node (rank r: node r // 8, local rank and GPU r % 8)
    3 recorded steps (10-12, as `run --steps 10-12` records them)
    60 launches a step: 20 Triton kernels, 3 launches each (three layers), a few µs of host gap
        between launches and ~1.4 ms unseen (cuBLAS, NCCL) a step
    ~155,000 programs a rank (at --programs-scale 1): grids of 4 to 2,048 programs, 1 to 4
        resident a SM, waves chained slot by slot; a file is ~7.5 MB
    times as %globaltimer reads them: ~1.7e18 ns, in 32 ns ticks; each node's GPUs off its host's
        CLOCK_REALTIME by up to ±2 ms (the offset a clock sample records in the session, as
        sm_profiler.record.clock measures it), the hosts' clocks off true time by ~50 µs
    one planted slow rank: its SLOW_KERNELS run long enough that its instrumented time a step is
        `slow_pct` % over the other ranks' (which differ among themselves by ~0.3 %)

Speed: one template table (every launch and program of one rank) is built once; each rank is that
template perturbed by a few vector operations over its rows (its clock offset, each step's start
jitter, each launch's speed, each program's jitter, the slow rank's kernels stretched), then saved.
Ranks are written by a process pool, one file each.

    python -m benchmarks.job_folders DIR --ranks 1024 [--slow-rank N] [--programs-scale F]
                                         [--seed S] [--workers W] [--slow-pct P]

`make_job_folder(dir, ranks, slow_rank=..., programs_scale=..., seed=...)` does the same from
Python (the tests of `stats DIR`, `advise DIR`, `merge DIR` and `query DIR` use it).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from dataclasses import dataclass

import numpy as np

SMS = 132
GPUS_PER_NODE = 8
STEPS = (10, 11, 12)  # the recorded steps' numbers
LAYERS = 3  # launches of each kernel a step
TICK_NS = 32  # %globaltimer's resolution on an H200
T0_NS = 1_700_000_000_000_000_000  # the first step's start, true time
STEP_PERIOD_NS = 5_000_000  # step to step: the recorded kernels, their gaps and the unseen work
LAUNCH_GAP_NS = 6_000  # host gap before a launch (median, over 2 µs)
# From one program's end to the next one's start on its slot: more than the programs' jitter
# (±40 ns each end) and a tick, so that a slot never seems to run two programs at once.
PROGRAM_GAP_NS = 160

# The 20 kernels of a step, in launch order: (name, programs a launch, resident a SM, one
# program's time in ns, num_warps). A few carry what the advisor looks for: a 1.1-wave grid, a
# launch of 4 programs on 132 SMs, an under-filled reduction.
KERNELS = (
    ("triton_per_fused_native_layer_norm_0", 1024, 4, 6_000, 4),
    ("triton_poi_fused_gelu_1", 2048, 4, 4_000, 4),
    ("triton_tem_fused_mm_2", 264, 1, 40_000, 8),
    ("triton_red_fused_sum_3", 128, 2, 12_000, 4),
    ("triton_poi_fused_add_4", 1536, 4, 3_000, 4),
    ("triton_per_fused__softmax_5", 1024, 2, 8_000, 4),
    ("triton_tem_fused_bmm_6", 146, 1, 60_000, 8),
    ("triton_poi_fused_mul_7", 2048, 4, 3_000, 4),
    ("triton_red_fused_native_layer_norm_backward_8", 640, 2, 10_000, 8),
    ("triton_per_fused_sum_9", 4, 1, 20_000, 4),
    ("triton_poi_fused_gelu_backward_10", 1536, 4, 4_000, 4),
    ("triton_tem_fused_mm_backward_11", 528, 1, 35_000, 8),
    ("triton_red_fused_sum_12", 256, 2, 9_000, 4),
    ("triton_poi_fused_add_addmm_13", 1024, 4, 5_000, 4),
    ("triton_per_fused__softmax_backward_14", 1024, 2, 8_000, 4),
    ("triton_poi_fused_native_dropout_15", 1536, 4, 3_000, 4),
    ("triton_red_fused__fused_adam_16", 792, 2, 14_000, 8),
    ("triton_poi_fused_copy_17", 1024, 4, 2_000, 4),
    ("triton_per_fused_clamp_linalg_vector_norm_18", 132, 1, 25_000, 4),
    ("triton_poi_fused_cat_19", 512, 4, 5_000, 4),
)
# What makes the planted rank slow: these kernels run longer there (its GPU's clocks, say).
SLOW_KERNELS = ("triton_tem_fused_mm_backward_11", "triton_red_fused_native_layer_norm_backward_8")
RANK_SPREAD = 0.003  # the other ranks' speeds differ by this (standard deviation)
SLOW_PCT = 5.0


@dataclass
class Template:
    """One rank's launches and programs before a rank's perturbation: times relative to the job's
    start (launches) and to their launch's start (programs)."""

    launch_start_ns: np.ndarray  # int64, from T0_NS (true time), as a fast rank starts them
    launch_span_ns: np.ndarray  # int64
    launch_kernel: np.ndarray  # int32, index in KERNELS
    launch_step: np.ndarray  # int64, the step's number
    launch_step_index: np.ndarray  # int64, 0.. of STEPS
    first_row: np.ndarray  # int64
    rows: np.ndarray  # int64, programs a launch
    row_launch: np.ndarray  # int32
    row_start_ns: np.ndarray  # int64, from the launch's start
    row_end_ns: np.ndarray  # int64
    row_sm: np.ndarray  # int32
    row_x: np.ndarray  # int64, the program id
    stretch: np.ndarray  # float64 per launch: the slow rank's factor (1 outside SLOW_KERNELS)
    noise_ns: np.ndarray  # int64, 2 x rows: programs' jitter, read at a random offset per rank

    @property
    def num_rows(self) -> int:
        return len(self.row_start_ns)


def build_template(programs_scale: float = 1.0, seed: int = 0, slow_pct: float = SLOW_PCT):
    """The template of every rank (see the module doc); `programs_scale` scales every grid."""
    rng = np.random.default_rng(seed)
    sm_order = rng.permutation(SMS).astype(np.int32)  # the order the SMs take a launch's blocks
    grids = [max(1, round(g * programs_scale)) for _, g, _, _, _ in KERNELS]
    starts, spans, kinds, steps, step_ix, parts = [], [], [], [], [], []
    t = 0
    for s, step in enumerate(STEPS):
        # Steps start a period apart (later where a large --programs-scale fills the period).
        t = max(s * STEP_PERIOD_NS, t + 1_000_000 if s else 0) + int(rng.integers(0, 20_000))
        for layer in range(LAYERS):
            for k, (_, _, resident, program_ns, _) in enumerate(KERNELS):
                t += 2_000 + int(LAUNCH_GAP_NS * rng.lognormal(0, 0.5))  # > launch jitter
                start, end, sm = _launch_programs(rng, grids[k], resident, program_ns, sm_order)
                starts.append(t)
                spans.append(int(end.max()))
                kinds.append(k)
                steps.append(step)
                step_ix.append(s)
                parts.append((start, end, sm))
                t += spans[-1]
            t += 100_000 * (layer + 1)  # unseen work between layers: cuBLAS, NCCL
    rows = np.array([len(p[0]) for p in parts], np.int64)
    first = np.cumsum(rows) - rows
    kernel = np.array(kinds, np.int32)
    span = np.array(spans, np.int64)
    return Template(
        launch_start_ns=np.array(starts, np.int64),
        launch_span_ns=span,
        launch_kernel=kernel,
        launch_step=np.array(steps, np.int64),
        launch_step_index=np.array(step_ix, np.int64),
        first_row=first,
        rows=rows,
        row_launch=np.repeat(np.arange(len(rows), dtype=np.int32), rows),
        row_start_ns=np.concatenate([p[0] for p in parts]),
        row_end_ns=np.concatenate([p[1] for p in parts]),
        row_sm=np.concatenate([p[2] for p in parts]),
        row_x=np.concatenate([np.arange(n, dtype=np.int64) for n in rows]),
        stretch=_slow_stretch(kernel, span, slow_pct),
        noise_ns=rng.integers(-40, 41, 2 * int(rows.sum()) + 1).astype(np.int64),
    )


def _launch_programs(rng, grid: int, resident: int, program_ns: int, sm_order: np.ndarray):
    """(start, end, sm) of a launch's programs, from its start: program i takes slot
    i % (SMS x resident), each slot runs its programs back to back (waves); each program's time
    varies (lognormal, 8 %), one in 200 a straggler."""
    slots = SMS * resident
    dur = program_ns * rng.lognormal(0, 0.08, grid)
    dur *= np.where(rng.random(grid) < 0.005, 1.5, 1.0)
    dur = dur.astype(np.int64) + PROGRAM_GAP_NS
    waves = -(-grid // slots)
    padded = np.zeros(waves * slots, np.int64)
    padded[:grid] = dur
    ends = np.cumsum(padded.reshape(waves, slots), axis=0).reshape(-1)[:grid]
    # A slot's first program starts as the block scheduler reaches it: a few ns a slot.
    lead = (np.arange(grid) % slots) * 2 + int(rng.integers(500, 1500))
    end = ends + lead
    start = end - dur + PROGRAM_GAP_NS  # a slot's next program starts after this one ends
    sm = sm_order[np.arange(grid) % slots % SMS]
    return start, end, sm


def _slow_stretch(kernel: np.ndarray, span_ns: np.ndarray, slow_pct: float) -> np.ndarray:
    """Per launch, the factor the slow rank's SLOW_KERNELS take longer by, so that its launches'
    spans summed are `slow_pct` % over a normal rank's."""
    names = np.array([k[0] for k in KERNELS])
    slow = np.isin(names[kernel], SLOW_KERNELS)
    extra = slow_pct / 100 * span_ns.sum() / span_ns[slow].sum()
    return np.where(slow, 1.0 + extra, 1.0)


# -- one rank ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Job:
    ranks: int
    slow_rank: int
    seed: int
    run_id: str


def rank_table(tpl: Template, job: Job, rank: int):
    """Rank `rank`'s AutoTable: the template moved onto its GPU's clock, its launches' speed
    and start jitter, its programs' jitter, the slow rank's kernels stretched."""
    from sm_profiler.trace.auto_table import AutoTable
    from sm_profiler.wire.auto_file import reduce_launches

    rng = np.random.default_rng((job.seed, rank))
    node = rank // GPUS_PER_NODE
    host_err_ns, gpu_off_ns = _clock_errors(job.seed, node, rank)
    n_launch = len(tpl.rows)
    speed = 1.0 + RANK_SPREAD * float(rng.standard_normal())
    stretch = speed * (tpl.stretch if rank == job.slow_rank else 1.0)
    stretch = np.broadcast_to(np.asarray(stretch, np.float64), (n_launch,))
    # Later launches of a step start later by what the earlier ones of the step grew.
    grown = (tpl.launch_span_ns * (stretch - 1.0)).astype(np.int64)
    before = np.cumsum(grown) - grown
    shift = before - before[_step_firsts(tpl)][tpl.launch_step_index]
    step_jitter = rng.integers(0, 30_000, len(STEPS))[tpl.launch_step_index]
    launch_jitter = rng.integers(-500, 500, n_launch)
    device_ns = T0_NS + host_err_ns + gpu_off_ns
    base = device_ns + tpl.launch_start_ns + shift + step_jitter + launch_jitter
    # Per program: the launch's start + its time from it, stretched; jittered, in 32 ns ticks.
    n = tpl.num_rows
    at = tpl.row_launch
    f = stretch[at]
    o1, o2 = (int(v) for v in rng.integers(0, n, 2))
    start = base[at] + (tpl.row_start_ns * f).astype(np.int64) + tpl.noise_ns[o1 : o1 + n]
    end = base[at] + (tpl.row_end_ns * f).astype(np.int64) + tpl.noise_ns[o2 : o2 + n]
    np.maximum(end, start, out=end)
    start &= -TICK_NS
    end &= -TICK_NS
    rows = {
        "launch": at,
        "sm": tpl.row_sm,
        "start_ns": start,
        "end_ns": end,
        "x": tpl.row_x,
        "y": np.zeros(n, np.int32),
        "z": np.zeros(n, np.int32),
        "warp": np.zeros(n, np.int32),
    }
    gpu = rank % GPUS_PER_NODE
    launches = {
        "gpu": np.full(n_launch, gpu, np.int32),
        "session": np.zeros(n_launch, np.int32),
        "kernel": tpl.launch_kernel,
        "grid_id": np.arange(n_launch, dtype=np.int64),
        "step": tpl.launch_step,
        "tag": np.zeros(n_launch, np.int32),
        "per_warp": np.zeros(n_launch, np.bool_),
        "first_row": tpl.first_row,
        "rows": tpl.rows,
        "start_ns": reduce_launches(np.minimum, start, tpl.first_row),
        "end_ns": reduce_launches(np.maximum, end, tpl.first_row),
        "grid_x": tpl.rows,
        "grid_y": np.ones(n_launch, np.int64),
        "grid_z": np.ones(n_launch, np.int64),
    }
    last_end_ns = int(launches["end_ns"].max())
    session = _session(job, rank, n, n_launch, gpu_off_ns, last_end_ns - gpu_off_ns)
    return AutoTable(rows, launches, _kernels(), [session], _metadata(job, node))


def _step_firsts(tpl: Template) -> np.ndarray:
    """Each step's first launch."""
    return np.searchsorted(tpl.launch_step_index, np.arange(len(STEPS)))


def _clock_errors(seed: int, node: int, rank: int) -> tuple[int, int]:
    """(node's host clock - true time, this GPU's %globaltimer - its host's clock) in ns: hosts
    kept within ~50 µs by NTP; a node's GPUs off its host by up to ±2 ms, each by a few µs more."""
    node_rng = np.random.default_rng((seed, 1 << 20, node))
    host_err = int(node_rng.normal(0, 50_000))
    node_off = int(node_rng.integers(-2_000_000, 2_000_000))
    gpu_rng = np.random.default_rng((seed, 1 << 21, rank))
    return host_err, node_off + int(gpu_rng.integers(-5_000, 5_000))


def _kernels() -> list[dict]:
    out = []
    for i, (name, _, _, _, warps) in enumerate(KERNELS):
        h = f"{(i + 1) * 0x9E3779B97F4A7C15 % 2**64:016x}" * 4
        out.append(
            {
                "name": name,
                "kernel_id": i + 1,
                "level": "program",
                "kernel_tag": (i + 1) * 2654435761 % 2**32,
                "num_warps": warps,
                "num_stages": 1 if name.startswith("triton_poi") else 3,
                "shared_bytes": 0 if name.startswith("triton_poi") else 16_384,
                "cache_hash": h,
                "source": f"c{h[:50]}.py:10",
                "origins": f"Source Nodes: [{name.split('fused_')[-1].rsplit('_', 1)[0]}]",
            }
        )
    return out


def _session(job: Job, rank: int, rows: int, launches: int, offset_ns: int, host_ns: int) -> dict:
    local = rank % GPUS_PER_NODE
    return {
        "gpu": local,
        "device": f"cuda:{local}",
        "device_name": "NVIDIA H200",
        "sm_count": SMS,
        "compute_capability": "9.0",
        "host": _host(rank // GPUS_PER_NODE),
        "rank": rank,
        "world_size": job.ranks,
        "local_rank": local,
        "clock": [
            {
                "device": f"cuda:{local}",
                "host_ns": host_ns,
                "offset_ns": offset_ns + (rank * 7919) % 2001 - 1000,  # measured within ±1 µs
                "error_ns": 1000 + rank % 100,
                "rtt_min_ns": 2000 + rank % 200,
                "rtt_median_ns": 2300 + rank % 300,
                "samples": 50,
            }
        ],
        "step_tags": {str(i + 1): s for i, s in enumerate(STEPS)},
        "claimed": rows,
        "capacity": 4_194_304,
        "kept": rows,
        "dropped": 0,
        "unwritten": 0,
        "ring": False,
        "areas": launches,
    }


def _host(node: int) -> str:
    return f"node{node:04d}"


def _metadata(job: Job, node: int) -> dict:
    return {
        "auto_level": "program",
        "steps_counted": STEPS[-1] + 1,
        "schedule": f"steps {STEPS[0]}-{STEPS[-1]}",
        "torch": "2.11.0+cu130",
        "triton": "3.6.0",
        "job": {
            "run_id": job.run_id,
            "restart": "0",
            "master": f"{_host(0)}:29500",
            "agent": f"{_host(node)}:4242:{1000 + node}",
        },
    }


# -- a folder ------------------------------------------------------------------------------

# Set in each writer process (fork inherits it): the template and the job.
_WORK: tuple[Template, Job, str] | None = None


def _write_rank(rank: int) -> int:
    tpl, job, folder = _WORK
    path = os.path.join(folder, f"auto.rank{rank}.npz")
    rank_table(tpl, job, rank).save(path)
    return os.path.getsize(path)


@dataclass
class Made:
    """What make_job_folder wrote."""

    folder: str
    ranks: int
    slow_rank: int
    slow_kernels: tuple[str, ...]
    programs_per_rank: int
    launches_per_rank: int
    bytes: int
    seconds: float

    def describe(self) -> str:
        mb = self.bytes / 1e6
        return (
            f"wrote {self.ranks:,} rank files to {self.folder} ({mb:,.0f} MB, "
            f"{mb / self.ranks:.1f} MB and {self.programs_per_rank:,} programs in "
            f"{self.launches_per_rank} launches a rank) in {self.seconds:.1f} s: "
            f"{self.ranks / max(self.seconds, 1e-9):,.0f} ranks/s, "
            f"{mb / max(self.seconds, 1e-9):,.0f} MB/s; slow rank {self.slow_rank} "
            f"({', '.join(self.slow_kernels)})"
        )


def file_bytes(programs_scale: float = 1.0) -> int:
    """About what one rank file of this shape holds, in bytes."""
    from sm_profiler.wire.auto_file import LAUNCH_DTYPES, ROW_DTYPES

    programs = LAYERS * len(STEPS) * sum(max(1, round(g * programs_scale)) for _, g, *_ in KERNELS)
    per_row = sum(np.dtype(t).itemsize for t in ROW_DTYPES.values())
    per_launch = sum(np.dtype(t).itemsize for t in LAUNCH_DTYPES.values())
    return programs * per_row + LAYERS * len(STEPS) * len(KERNELS) * per_launch + 20_000


def make_job_folder(
    folder: str,
    ranks: int,
    *,
    slow_rank: int | None = None,
    programs_scale: float = 1.0,
    seed: int = 0,
    slow_pct: float = SLOW_PCT,
    workers: int | None = None,
) -> Made:
    """Write `ranks` rank files auto.rank0.npz .. into `folder` (made if missing): one job's
    recording (see the module doc), rank `slow_rank` (default: a seeded pick) slow by `slow_pct`
    % in SLOW_KERNELS. workers: processes writing files (default: the cores; 1: this process)."""
    global _WORK
    if ranks < 2:
        raise ValueError(f"a job has 2 ranks or more, not {ranks}")
    if not 0 < programs_scale <= 10:
        raise ValueError(f"programs_scale {programs_scale} is outside (0, 10]")
    if slow_rank is None:
        slow_rank = int(np.random.default_rng(seed).integers(0, ranks))
    if not 0 <= slow_rank < ranks:
        raise ValueError(f"slow rank {slow_rank} is not one of the {ranks} ranks")
    os.makedirs(folder, exist_ok=True)
    need = ranks * file_bytes(programs_scale)
    free = shutil.disk_usage(folder).free
    if need > free - (1 << 30):
        raise OSError(
            f"{ranks:,} rank files take about {need / 1e9:.1f} GB and {folder} has "
            f"{free / 1e9:.1f} GB free (1 GB kept): lower --programs-scale (each file is "
            "about that fraction of 7.5 MB)"
        )
    t0 = time.perf_counter()
    tpl = build_template(programs_scale, seed, slow_pct)
    job = Job(ranks, slow_rank, seed, f"job-scale-{seed}")
    _WORK = (tpl, job, os.path.abspath(folder))
    workers = min(workers or os.cpu_count() or 1, ranks)
    try:
        if workers == 1:
            sizes = [_write_rank(r) for r in range(ranks)]
        else:
            import multiprocessing as mp

            with mp.get_context("fork").Pool(workers) as pool:
                sizes = list(pool.imap_unordered(_write_rank, range(ranks), chunksize=4))
    finally:
        _WORK = None
    return Made(
        folder=folder,
        ranks=ranks,
        slow_rank=slow_rank,
        slow_kernels=SLOW_KERNELS,
        programs_per_rank=tpl.num_rows,
        launches_per_rank=len(tpl.rows),
        bytes=sum(sizes),
        seconds=time.perf_counter() - t0,
    )


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dir", help="the folder to write auto.rank*.npz into")
    ap.add_argument("--ranks", type=int, required=True)
    ap.add_argument("--slow-rank", type=int, default=None, help="default: a seeded pick")
    ap.add_argument(
        "--programs-scale",
        type=float,
        default=1.0,
        help="every grid times this (disk: ~7.5 MB x F a rank)",
    )
    ap.add_argument("--slow-pct", type=float, default=SLOW_PCT)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workers", type=int, default=None, help="default: the cores")
    a = ap.parse_args(argv)
    try:
        made = make_job_folder(
            a.dir,
            a.ranks,
            slow_rank=a.slow_rank,
            programs_scale=a.programs_scale,
            seed=a.seed,
            slow_pct=a.slow_pct,
            workers=a.workers,
        )
    except (ValueError, OSError) as e:
        sys.exit(f"job_folders: {e}")
    print(made.describe())


if __name__ == "__main__":
    main()
