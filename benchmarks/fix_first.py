"""What to fix first, checked on the GPU (issues 45, 55): kernels with a planted defect each,
recorded in auto mode; the advisor (sm_profiler/report/advise.py) must rank the planted defect
first; then its suggestion is applied and the time it recovers is measured against its estimate.

The kernels (benchmarks/plant_kernels.py) give each program a count of units of work, so that a
defect (too many, too few or uneven programs) and its fix (the same units spread another way)
run one compiled kernel and compute the same output. S: the GPU's SMs; R: the programs of the
case's kernel resident on one SM, measured by a probe launch (the compile test checks what the
registers allow: chase 32, fma16 16, fma4 4, fma1 1, stream 16). The cases:

  fma_wave16  ceil(1.1 x S x R) programs of 20 tiles of dependent FMAs at R = 16 (compute-bound:
              a full wave's program shares its SM with 15 others, a last wave's nearly has it to
              itself, about 4x faster); fixed: the advisor's grid of whole waves (S x R), the
              tiles spread evenly (1.1x each)
  fma_wave4   the same at R = 4 (16 warps a program)
  fma_wave1   the same at R = 1 (a program fills its SM: the last wave's run as long as a full
              wave's); 30 tiles a program
  mem_wave    a control, not a defect: ceil(1.1 x S x R) programs of 60 tiles streamed from
              HBM (R = 16); the GPU's bandwidth binds the whole launch, so one wave of 1.1x the
              bytes each takes as long (H200, 2026-11-29: 9 us slower). The advisor must not
              promise time here: its partial-wave estimate (0 if none) at most twice what the
              fix recovered plus 2 % of the step (CONTROL_SLACK)
  mem_tail    S x R programs of 8 streamed tiles but one program in 64 of 64: while the long
              programs run alone, HBM waits on a few programs' latency; fixed as fma_tail
  fma_tail    S x R programs of 8 fma4 tiles (one wave) but one program in 64 of 64 tiles: a tail
              from skewed work; fixed: the same tiles spread evenly over the same programs
  fma_idle    S / 4 programs of 48 fma4 tiles (a quarter of the SMs used); fixed: each program
              split the number of ways the advisor says (ceil(S / P)), one program each
  matmul      torch.matmul (cuBLAS, which auto mode cannot see inside) of M_total rows in chunks
              whose grid's last wave is at most 40 % full, recorded with torch.profiler beside
              auto mode (`--torch`): the advisor's finding from CUPTI's launch shape; fixed:
              chunks of a row count whose grid (nearly) fills its waves, the same M_total rows
              (a different M split). The shapes are chosen on the GPU from a sweep of shapes (CUPTI's grid,
              block, registers and shared memory of each, resident blocks from the device's
              limits: report/occupancy.py), preferring kernels of one block a SM
  wave        (pointer chase, latency-bound) ceil(1.1 x S x R) programs of 40 chains; fixed as
              fma_wave16
  skew        S programs of 4 chains but the last 4 programs 40: a tail; fixed: spread evenly
  few         16 programs of 64 chains (fewer programs than SMs); fixed: each split ceil(S / 16)
  gaps        a step of 50 launches of S programs of one chain, launched from Python (the host
              sets the pace); fixed: the step captured in a CUDA graph and replayed
  rank        (2 GPUs: run under torchrun by this benchmark where 2 GPUs are visible, else
              skipped) S programs of 400 chains on rank 0, 1,000 on rank 1, then an all-reduce;
              fixed: 700 on each

Per case: 5 recorded steps (one launch a step; gaps: 50; matmul: its chunks between two launches
of a one-program Triton kernel that mark the step), the advisor's first finding, its estimate per
step, then the planted and the fixed step timed without recording (CUDA events, interleaved,
median of --repeats figures of --reps steps each) and what the fix recovered. Each variant's
output is checked against torch's before it is timed. The table is printed worst case first
(not ranked first, then recovered / estimate furthest from 1). For fma_wave16, the plant's and
the fix's recordings are saved under --out-dir and compared with `sm-profiler diff` (its JSON's
finding: the estimate beside what the fix's recording shows recovered).

    python -m benchmarks run fix_first --json $OUT/fix_first.json
    python -m benchmarks.fix_first --dry-run --json /tmp/fix_first.json   # no GPU: a model's times
    torchrun --nproc_per_node 2 -m benchmarks.fix_first --slow-rank --json $OUT/fix_first_rank.json
    python -m benchmarks.fix_first --models gpt,llama,moe --json $OUT/fix_first_models.json

`--dry-run` runs every case on a model of the GPU (benchmarks/plant_model.py): the plants, the
advisor, the fixes read from its evidence, the table, the JSON and the diff, with the model's
times instead of the GPU's. `--models` runs the benchmark models' training step (auto_overhead's
stacks) and prints the advisor's top five lines of each; with --torch, torch.profiler records the
same steps and the host gaps are over every kernel (CUPTI's rows: cuBLAS, NCCL too), printed
beside the records' own figure:

    python -m benchmarks.fix_first --models gpt --torch --json $OUT/fix_first_models_torch.json

Needs an NVIDIA GPU, torch and Triton (the slow-rank mode: 2 GPUs under torchrun); without a GPU
(and without --dry-run) it says so and exits 0.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass

from benchmarks.env import add_model_shape_args, no_cuda_gpu


@dataclass(frozen=True)
class Plant:
    """A case: the config of its kernel (plant_kernels.CONFIGS), the finding the advisor must
    rank first, the defect and the fix in words."""

    config: str
    expected: str
    planted: str
    fix: str
    control: bool = False  # not a defect: the advisor must not promise what no fix recovers


PLANTS = {
    "fma_wave16": Plant(
        "fma16", "partial_wave", "dependent FMAs, 1.1 waves, 16 resident", "whole waves"
    ),
    "fma_wave4": Plant(
        "fma4", "partial_wave", "dependent FMAs, 1.1 waves, 4 resident", "whole waves"
    ),
    "fma_wave1": Plant(
        "fma1", "partial_wave", "dependent FMAs, 1.1 waves, 1 resident", "whole waves"
    ),
    "mem_wave": Plant(
        "stream",
        "partial_wave",
        "HBM streaming, 1.1 waves, 16 resident (a control)",
        "whole waves",
        control=True,
    ),
    "fma_tail": Plant(
        "fma4", "tail", "dependent FMAs, 1 program in 64 of 8x the work", "even split"
    ),
    "mem_tail": Plant(
        "stream", "tail", "HBM streaming, 1 program in 64 of 8x the work", "even split"
    ),
    "fma_idle": Plant(
        "fma4", "idle_sms", "dependent FMAs, a quarter of the SMs used", "split each"
    ),
    "matmul": Plant(
        "", "partial_wave", "cuBLAS matmul chunks, a last wave under 40 % full", "whole-wave chunks"
    ),
    "wave": Plant("chase", "partial_wave", "pointer chase, 1.1 waves", "whole waves"),
    "skew": Plant("chase", "tail", "pointer chase, 4 programs of 10x the work", "even split"),
    "few": Plant("chase", "idle_sms", "pointer chase, 16 programs", "split each"),
    "gaps": Plant("chase", "host_gaps", "50 launches a step from Python", "a CUDA graph"),
    "rank": Plant("chase", "slow_rank", "rank 1 of 2 with 2.5x the work", "even split"),
}
CASES = tuple(PLANTS)
EXPECTED = {case: p.expected for case, p in PLANTS.items()}
DIFF_CASE = "fma_wave16"  # the case whose plant and fix are compared by sm-profiler diff
RECORDED = 5  # steps recorded per case
GAP_LAUNCHES = 50  # launches in a step of the gaps case
WAVES = 1.1  # the partial-wave plants' waves
WAVE_UNITS = {"fma_wave16": 20, "fma_wave4": 20, "fma_wave1": 30, "mem_wave": 60, "wave": 40}
TAIL = (8, 8, 64)  # fma_tail: units a program, the long programs' factor, one long in this many
IDLE_UNITS = 48  # fma_idle: units of each of the S / 4 programs
# Chains per program on rank 0 and rank 1 (the slow one): rank 1 ~0.8 ms over rank 0, well above
# the recording loop's own pace between steps (~90 µs under torchrun on an H100), which the
# advisor rightly ranked first when the difference was 0.13 ms.
RANK_CHAINS = (400, 1000)
# The matmul sweep: (dtype, N, K) and the row counts M tried for each (multiples of 128).
MATMUL_SHAPES = (
    ("bfloat16", 4096, 4096),
    ("float16", 8192, 2048),
    ("float32", 4096, 1024),
    ("float32", 2048, 2048),
    ("float32", 1024, 4096),
)
MATMUL_ROWS = tuple(128 * j for j in range(1, 49))
# The planted chunk's grid: at least two waves, the last at most this full (1.1-1.4, 2.1-2.4, ...
# waves). A run of 2026-11-29 (H200, fp32) found no cuBLAS kernel of 1.1-1.35 waves whose own
# shape also filled whole waves at another M; its one-block-a-SM fp32 kernel does at 3.4 and 4.4.
MATMUL_PLANT_FILL = (0.05, 0.4)
MATMUL_FIX_FILL = 0.9  # the fixed chunk's blocks fill at least this share of its waves' slots
MATMUL_MAX_CHUNKS = 8  # chunks of M_total rows, planted or fixed
# A recorded step's GPU time at least this (M_total rows done as many times as it takes, by the
# sweep's times): longer than the host's own time a step with torch.profiler on (its step(),
# the launches), so that the GPU never waits for the host and host gaps stay below the plant.
MATMUL_MIN_STEP_NS = 600_000
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# -- the plants and their fixes (host only: the dry run and the tests call these) -------------


def even(total: int, programs: int) -> list[int]:
    """`total` units over `programs` programs, as evenly as whole units allow."""
    base, extra = divmod(total, programs)
    return [base + (1 if i < extra else 0) for i in range(programs)]


def planted_counts(case: str, sms: int, resident: int, rank: int = 0) -> list[list[int]]:
    """The planted step: per launch, each program's units."""
    if case in WAVE_UNITS:
        return [[WAVE_UNITS[case]] * math.ceil(round(WAVES * sms * resident, 6))]
    if case in ("fma_tail", "mem_tail"):
        units, factor, every = TAIL
        return [
            [units * factor if p % every == every - 1 else units for p in range(sms * resident)]
        ]
    if case == "fma_idle":
        return [[IDLE_UNITS] * max(sms // 4, 1)]
    if case == "skew":
        return [[4] * (sms - 4) + [40] * 4]
    if case == "few":
        return [[64] * 16]
    if case == "gaps":
        return [[1] * sms] * GAP_LAUNCHES
    if case == "rank":
        return [[RANK_CHAINS[1] if rank == 1 else RANK_CHAINS[0]] * sms]
    raise ValueError(f"no planted step for case {case!r}")


def fixed_counts(case: str, evidence: dict, planted: list[list[int]]) -> list[list[int]]:
    """The planted step with the advisor's suggestion applied, read from the finding's evidence
    (gaps: the same launches, replayed as a CUDA graph)."""
    (counts,) = planted if case != "gaps" else planted[:1]
    total = sum(counts)
    if case in WAVE_UNITS:
        from sm_profiler.report.advise import grid_options

        n, _, _ = grid_options(evidence["programs"], evidence["slots"])[0]  # whole waves below
        return [even(total, n)]
    if case in ("fma_tail", "mem_tail", "skew"):
        return [even(total, len(counts))]
    if case in ("fma_idle", "few"):
        k = max(2, math.ceil(evidence["sms"] / evidence["programs"]))  # the suggestion's split
        return [[part for c in counts for part in even(c, k)]]
    if case == "gaps":
        return planted
    if case == "rank":
        return [[sum(RANK_CHAINS) // 2] * len(counts)]  # the same work split evenly
    raise ValueError(f"no fix for case {case!r}")


def recovered(estimate_ns: float, t: dict[str, float]) -> dict:
    """A row's figures: the advisor's estimate, the planted and fixed steps' medians (µs) and the
    time the fix recovered, also as a share of the estimate."""
    est, got = estimate_ns / 1e3, t["planted"] - t["fixed"]
    return {
        "estimate_us": est,
        "planted_us": t["planted"],
        "fixed_us": t["fixed"],
        "recovered_us": got,
        "recovered_of_estimate": got / est if est > 0 else None,
    }


CONTROL_SLACK = 0.02  # a control's estimate may exceed what its fix recovers by this share


def control_holds(row: dict) -> bool:
    """A control (no defect a fix recovers) holds where the advisor's estimate for it is at
    most twice what its fix recovered (nothing, if the fix was slower) plus CONTROL_SLACK of
    the step: it promised no time that is not there."""
    got = max(row["recovered_us"], 0.0)
    return row["estimate_us"] <= 2 * got + CONTROL_SLACK * row["planted_us"]


def row_ok(row: dict) -> bool:
    """A plant ranked first, or a control that holds."""
    return bool(row.get("ok") if row.get("control") else row.get("ranked_first"))


def badness(row: dict) -> float:
    """How far a row is from a fix that recovers its estimate: inf where the plant was not
    ranked first (or not run) or a control does not hold (0 where it does), else
    |ln(recovered / estimate)| (inf for nothing recovered)."""
    if row.get("control"):
        return 0.0 if row_ok(row) else math.inf
    frac = row.get("recovered_of_estimate")
    if not row.get("ranked_first") or frac is None:
        return math.inf
    return abs(math.log(frac)) if frac > 0 else math.inf


def worst_first(rows: list[dict]) -> list[dict]:
    """The rows worst case first (badness), skipped cases last, ties in case order."""
    order = {c: i for i, c in enumerate(CASES)}

    def key(r):
        return (r.get("skipped") is not None, -badness(r), order.get(r["case"], len(order)))

    return sorted(rows, key=key)


def first_row(case: str, advice, sms: int, programs: int, extra_ok=None) -> dict:
    """A case's row as far as the advisor: what it ranked first and whether that is the plant."""
    top = advice.findings[0] if advice.findings else None
    ok = bool(top and top.kind == EXPECTED[case] and (extra_ok is None or extra_ok(top)))
    return {
        "case": case,
        "planted": PLANTS[case].planted,
        "fix": PLANTS[case].fix,
        "sms": sms,
        "programs": programs,
        "expected": EXPECTED[case],
        "first": top.kind if top else None,
        "first_kernel": top.kernel if top else None,
        "ranked_first": ok,
        "findings": [f.to_dict() for f in advice.findings[:5]],
    }


# -- the matmul plant: shapes from a sweep of CUPTI's launch shapes ---------------------------


def sweep_rows(doc: dict, labels: list[str]) -> dict[str, list[dict]]:
    """Per label of `labels` (torch.profiler.record_function ranges of a trace), the kernel rows
    its launches ran: name, grid, block, registers, shared memory, duration (ns). A kernel row
    belongs to the range holding the CPU launch of the same correlation id."""
    ev = doc.get("traceEvents", [])
    ranges = {
        e["name"]: (e["ts"], e["ts"] + e.get("dur", 0))
        for e in ev
        if e.get("cat") == "user_annotation" and e.get("name") in labels
    }
    launch_ts = {
        (e.get("args") or {}).get("correlation"): e["ts"]
        for e in ev
        if e.get("cat") in ("cuda_runtime", "cuda_driver") and "ts" in e
    }
    out: dict[str, list[dict]] = {label: [] for label in labels}
    for e in ev:
        if e.get("cat") != "kernel":
            continue
        a = e.get("args") or {}
        ts = launch_ts.get(a.get("correlation"))
        label = next(
            (k for k, (lo, hi) in ranges.items() if ts is not None and lo <= ts <= hi), None
        )
        if label is None:
            continue
        out[label].append(
            {
                "name": e["name"],
                "grid": list(a.get("grid", [0, 0, 0])),
                "block": list(a.get("block", [0, 0, 0])),
                "registers": a.get("registers per thread"),
                "shared": a.get("shared memory"),
                "dur_ns": int(round(e.get("dur", 0) * 1e3)),
            }
        )
    return out


def shape_of(rows: list[dict], sms: int, limits) -> dict | None:
    """One swept matmul's launch: its kernel, blocks, resident blocks a SM, slots and waves;
    None unless it ran exactly one kernel whose shape CUPTI gave."""
    from sm_profiler.report.occupancy import resident_blocks, waves

    if len(rows) != 1:
        return None
    r = rows[0]
    if r["registers"] is None or r["shared"] is None or min(r["grid"] + r["block"]) <= 0:
        return None
    blocks, threads = math.prod(r["grid"]), math.prod(r["block"])
    res = resident_blocks(threads, int(r["registers"]), int(r["shared"]), limits)
    if res.blocks == 0:
        return None
    key = (r["name"], tuple(r["block"]), r["registers"], r["shared"])
    return {
        "kernel": r["name"],
        "key": key,
        "grid": r["grid"],
        "blocks": blocks,
        "resident_per_sm": res.blocks,
        "limit_binds": res.binds,
        "slots": sms * res.blocks,
        "waves": waves(blocks, sms, res.blocks),
        "dur_ns": r["dur_ns"],
    }


def last_fill(waves: float) -> float:
    """The share of its slots a launch's last wave fills."""
    return waves - (math.ceil(waves) - 1)


def choose_matmul(swept: dict, sms: int, limits=None) -> tuple[dict | None, list[str]]:
    """The matmul plant and its fix from a sweep: `swept` maps (dtype, N, K, M) to its kernel
    rows (sweep_rows). The plant: a chunk of M_p rows whose one kernel's grid is more than a
    wave, its last wave filled within MATMUL_PLANT_FILL; the fix: chunks of M_f rows run by the same kernel (name, block,
    registers, shared memory) whose grid fills at least MATMUL_FIX_FILL of its last wave; both
    a whole number of chunks of lcm(M_p, M_f) rows, at most MATMUL_MAX_CHUNKS, and M_total that
    many rows times what makes the planted step MATMUL_MIN_STEP_NS (the sweep's times).
    Preferred: fewer resident blocks a SM (a lone last-wave block then runs as long as a full
    wave's, as the launch-shape estimate takes it), then the larger share of the plant's time
    its last wave wastes ((1 - fill) / waves), then the fix's fuller waves, then fewer chunks.
    Returns (the plan or None, what the sweep saw, in words)."""
    from sm_profiler.report.occupancy import SmLimits

    limits = limits or SmLimits()
    shapes = {k: shape_of(v, sms, limits) for k, v in swept.items()}
    seen = [
        f"{dt} N={n} K={k} M={m}: "
        + (
            f"{s['kernel'][:60]} grid {s['grid']}, {s['resident_per_sm']} a SM, {s['waves']:.2f} waves"
            if s
            else f"{len(swept[(dt, n, k, m)])} kernels (not one with a launch shape)"
        )
        for (dt, n, k, m), s in shapes.items()
    ]
    best, best_key = None, None
    for (dt, n, k, mp), sp in shapes.items():
        if sp is None or sp["waves"] <= 1:
            continue
        if not MATMUL_PLANT_FILL[0] <= last_fill(sp["waves"]) <= MATMUL_PLANT_FILL[1]:
            continue
        for (dt2, n2, k2, mf), sf in shapes.items():
            if (dt2, n2, k2) != (dt, n, k) or sf is None or sf["key"] != sp["key"]:
                continue
            if sf["waves"] / math.ceil(sf["waves"]) < MATMUL_FIX_FILL:
                continue  # the fix must itself fill its waves
            total = math.lcm(mp, mf)
            a, b = total // mp, total // mf
            if max(a, b) > MATMUL_MAX_CHUNKS:
                continue
            rounds = max(1, math.ceil(MATMUL_MIN_STEP_NS / max(a * sp["dur_ns"], 1)))
            a, b, total = a * rounds, b * rounds, total * rounds
            fill = sf["waves"] / math.ceil(sf["waves"])
            share = (1 - last_fill(sp["waves"])) / math.ceil(sp["waves"])  # the plant's waste
            key = (sp["resident_per_sm"], -round(share, 3), -round(fill, 2), a + b, mp, mf)
            if best_key is None or key < best_key:
                best_key = key
                best = {
                    "dtype": dt,
                    "n": n,
                    "k": k,
                    "m_total": total,
                    "m_planted": mp,
                    "m_fixed": mf,
                    "chunks_planted": a,
                    "chunks_fixed": b,
                    "kernel": sp["kernel"],
                    "planted_shape": {x: v for x, v in sp.items() if x != "key"},
                    "fixed_shape": {x: v for x, v in sf.items() if x != "key"},
                }
    return best, seen


# -- the GPU ----------------------------------------------------------------------------------


def sm_count() -> int:
    import torch

    return torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count


def peak_resident(table, launch: int) -> int:
    """The most programs of `launch` on one SM at once, from its records."""
    import numpy as np

    L, r = table.launches, table.rows
    a, n = int(L["first_row"][launch]), int(L["rows"][launch])
    sm = np.asarray(r["sm"][a : a + n], np.int64)
    t = np.concatenate([r["start_ns"][a : a + n], r["end_ns"][a : a + n]]).astype(np.int64)
    d = np.r_[np.ones(n, np.int64), -np.ones(n, np.int64)]
    g = np.r_[sm, sm]
    o = np.lexsort((d, t, g))
    run = np.cumsum(d[o])
    return int(run.max()) if n else 0


def record(step, after=None, torch_profiler: bool = False):
    """The auto-mode table of RECORDED steps of `step` (each followed by `after`), after a
    warm-up step (the compile, NCCL's first all-reduce) that is not recorded; with
    `torch_profiler`, (table, torch.profiler's trace of the same steps)."""
    import torch

    import sm_profiler

    opts = {"torch_profiler": True} if torch_profiler else {}
    with sm_profiler.auto(schedule=f"1-{RECORDED}", **opts) as prof:
        step()  # compiled and loaded: warm-up, no step yet
        if after is not None:
            after()  # NCCL's first all-reduce sets up its communicator: ~200 ms, not a step's
        torch.cuda.synchronize()
        for _ in range(RECORDED):
            prof.step()
            step()
            if after is not None:
                after()
        torch.cuda.synchronize()
    table = prof.table()
    if torch_profiler:
        return table.select_steps(f"1-{RECORDED}"), prof.torch_trace()
    return table


def time_steps(fns: dict, reps: int, repeats: int, after=None) -> dict[str, float]:
    """Median µs per step of each variant: `repeats` figures of `reps` steps each, interleaved,
    between two CUDA events."""
    import torch

    per: dict[str, list[float]] = {k: [] for k in fns}
    for fn in fns.values():  # warm
        fn()
    torch.cuda.synchronize()
    for _ in range(repeats):
        for k, fn in fns.items():
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            for _ in range(reps):
                fn()
                if after is not None:
                    after()
            b.record()
            b.synchronize()
            per[k].append(a.elapsed_time(b) * 1e3 / reps)
    return {k: statistics.median(v) for k, v in per.items()}


class Gpu:
    """The cases on this process's GPU: steps of a config's kernel, checked against torch,
    recorded and timed. Each case builds its own kernels and inputs (plant_kernels.Tiles): run
    outside an auto region (the check, the timing) they run their plain build, inside one
    (the recording) their instrumented build."""

    dry = False

    def __init__(self, reps: int, repeats: int):
        self.reps, self.repeats = reps, repeats
        self.sms = sm_count()
        self._resident: dict[str, int] = {}
        self._tiles = {}

    def begin_case(self) -> None:
        import torch

        self._tiles = {}
        torch.cuda.empty_cache()

    def resident(self, config) -> int:
        """The programs of `config`'s kernel one SM holds at once, from a probe launch of more
        programs than fit (recorded once per config: the same build as the case's)."""
        from benchmarks.plant_kernels import Tiles
        from sm_profiler.report.advise import resident_limit

        if config.name not in self._resident:
            per_sm = max(1, min(32, 2048 // (32 * config.num_warps)))
            table = record(Tiles(config).probe(4 * self.sms * per_sm, units=4))
            seen = max(peak_resident(table, i) for i in range(table.num_launches))
            # Records may overlap past what the SM holds (a program's record ends with its first
            # warp): never more than its registers, warps and shared memory allow.
            limit = int(resident_limit(table).max(initial=0))
            self._resident[config.name] = max(1, min(seen, limit) if limit > 0 else seen)
        return self._resident[config.name]

    def step(self, config, launches: list[list[int]], graph: bool = False, fresh: bool = False):
        """One step: the launches of `config`'s kernel with these units per program, each
        checked against torch's output; `graph`: captured in a CUDA graph and replayed;
        `fresh`: a kernel of its own (to record it in another region)."""
        import torch

        from benchmarks.plant_kernels import Tiles

        if fresh or config.name not in self._tiles:
            self._tiles[config.name] = Tiles(config)
        tiles = self._tiles[config.name]
        made: dict[tuple, object] = {}  # a variant per distinct launch (gaps: 50 of one)
        for c in dict.fromkeys(tuple(c) for c in launches):
            made[c] = tiles.variant(c)
            tiles.check(made[c])
        fns = [made[tuple(c)] for c in launches]
        if graph:
            torch.cuda.synchronize()
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                for fn in fns:
                    fn()

            def step():
                g.replay()

        else:

            def step():
                for fn in fns:
                    fn()

        step.programs = max(fn.programs for fn in fns)
        return step

    def record(self, step, torch_profiler: bool = False):
        return record(step, torch_profiler=torch_profiler)

    def time(self, steps: dict) -> dict[str, float]:
        return time_steps(steps, self.reps, self.repeats)

    def matmul_sweep(self) -> dict:
        return matmul_sweep_gpu()

    def matmul_steps(self, plan: dict):
        """(planted, fixed, the planted step as recorded: between two launches of the mark
        kernel, which give auto mode the step's launches), each variant's output checked."""
        import torch

        from benchmarks.plant_kernels import MatmulChunks, kernel

        mm = MatmulChunks(plan["m_total"], plan["n"], plan["k"], plan["dtype"])
        planted, fix = mm.variant(plan["m_planted"]), mm.variant(plan["m_fixed"])
        mm.check(planted)
        mm.check(fix)
        mark = kernel("mark")
        marks = torch.zeros(2, dtype=torch.int32, device="cuda")

        def bracketed():  # values neither 1 nor multiples of 16: one specialization
            mark[(1,)](marks, 3, num_warps=1)
            planted()
            mark[(1,)](marks, 5, num_warps=1)

        return planted, fix, bracketed

    def rank_case(self, out_dir: str) -> dict:
        return rank_case_gpu(self.reps, self.repeats, out_dir)


def matmul_sweep_gpu() -> dict:
    """Every shape of MATMUL_SHAPES x MATMUL_ROWS run once under torch.profiler (after a run
    outside it: cuBLAS's own choice and load), each in a record_function range of its own:
    {(dtype, N, K, M): its kernel rows}."""
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function

    cands = [(dt, n, k, m) for dt, n, k in MATMUL_SHAPES for m in MATMUL_ROWS]
    mats = {}
    for dt, n, k in MATMUL_SHAPES:
        d = getattr(torch, dt)
        mats[(dt, n, k)] = (
            torch.ones(max(MATMUL_ROWS), k, dtype=d, device="cuda"),
            torch.ones(k, n, dtype=d, device="cuda"),
            torch.empty(max(MATMUL_ROWS), n, dtype=d, device="cuda"),
        )
    for dt, n, k, m in cands:  # as MatmulChunks calls it: rows of A into rows of C
        a, b, c = mats[(dt, n, k)]
        torch.matmul(a[:m], b, out=c[:m])
    torch.cuda.synchronize()
    labels = [f"fix_first_sweep_{i}" for i in range(len(cands))]
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as p:
        for label, (dt, n, k, m) in zip(labels, cands, strict=True):
            a, b, c = mats[(dt, n, k)]
            with record_function(label):
                torch.matmul(a[:m], b, out=c[:m])
        torch.cuda.synchronize()
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "sweep.json")
        p.export_chrome_trace(path)
        with open(path) as f:
            doc = json.load(f)
    rows = sweep_rows(doc, labels)
    return {c: rows[label] for label, c in zip(labels, cands, strict=True)}


def matmul_case(backend) -> dict:
    """The cuBLAS plant: the sweep, the chosen chunks recorded with torch.profiler between two
    mark launches a step, advised with CUPTI's rows, then timed against the fix."""
    from sm_profiler.report.advise import advise

    plan, seen = choose_matmul(backend.matmul_sweep(), backend.sms)
    if plan is None:
        return {"case": "matmul", "skipped": "no swept shape fits the plant", "sweep": seen}
    planted, fix, bracketed = backend.matmul_steps(plan)
    table, doc = backend.record(bracketed, torch_profiler=True)
    advice = advise(table, cupti=doc)
    blocks = plan["planted_shape"]["blocks"]
    row = first_row("matmul", advice, backend.sms, blocks, _from_launch_shape)
    row["plan"], row["sweep"] = plan, seen
    if row["ranked_first"]:
        t = backend.time({"planted": planted, "fixed": fix})
        row.update(recovered(advice.findings[0].estimate_ns_per_step, t))
    return row


def _from_launch_shape(finding) -> bool:
    return finding.evidence.get("source") == "launch shape"


# -- the dry run: a model of the GPU in place of the device -----------------------------------

# The dry run's cuBLAS: a kernel of 128 x 128 tiles, 256 threads, 168 registers (one block a SM),
# whose block takes MODEL_GEMM_BLOCK_NS a 128 x 128 x 1024 tile.
MODEL_GEMM = ("modeled_gemm_128x128_kernel", (256, 1, 1), 168, 98_304)
MODEL_GEMM_BLOCK_NS = 20_000
GRAPH_LAUNCH_NS = 0  # a CUDA graph's launches: queued at once


class ModelStep:
    """A modeled step: its launches (name, programs from plant_model.run_launch, CUPTI's launch
    shape or None) and the host's time a launch after the step's first."""

    def __init__(self, launches: list[tuple], host_ns: int, programs: int):
        self.launches, self.host_ns, self.programs = launches, host_ns, programs


class Model:
    """The dry run's backend (`--dry-run`): plant_model's GPU of `sms` SMs in place of the
    device; residency as the registers allow (plant_kernels.CONFIGS)."""

    dry = True

    def __init__(self, sms: int = 132):
        self.sms = sms

    def begin_case(self) -> None:
        pass

    def resident(self, config) -> int:
        return config.resident

    def step(self, config, launches, graph: bool = False, fresh: bool = False) -> ModelStep:
        from benchmarks.plant_model import HOST_LAUNCH_NS, SPEEDS, run_launch

        made = {}
        for c in dict.fromkeys(tuple(c) for c in launches):
            made[c] = run_launch(c, self.sms, config.resident, SPEEDS[config.name])
        name = f"{config.kernel}_kernel"
        host = GRAPH_LAUNCH_NS if graph else HOST_LAUNCH_NS
        progs = max(len(c) for c in launches)
        return ModelStep([(name, made[tuple(c)], None) for c in launches], host, progs)

    def _run(self, recorder, step: ModelStep, number: int, first_host_ns: int, not_before=0):
        for j, (name, progs, shape) in enumerate(step.launches):
            host = first_host_ns if j == 0 else step.host_ns
            recorder.launch(name, progs, number, host, not_before if j == 0 else 0, shape)

    def record(self, step: ModelStep, torch_profiler: bool = False, rank: int = 0, period=None):
        """RECORDED steps after a warm-up one, at the recording loop's pace; `period`: each
        step starts that long after the last (the slow rank's all-reduce)."""
        from benchmarks.plant_model import RECORDING_LOOP_NS, Recorder

        rec = Recorder(self.sms, rank)
        for k in range(RECORDED + 1):
            at = 0 if period is None else k * period
            self._run(rec, step, k if k else -1, RECORDING_LOOP_NS, at)
        table = rec.table()
        return (table, rec.cupti_doc()) if torch_profiler else table

    def time(self, steps: dict) -> dict[str, float]:
        """µs per step of each variant, steps back to back as the timing loop runs them."""
        from benchmarks.plant_model import HOST_LAUNCH_NS, Recorder

        out = {}
        for k, step in steps.items():
            rec = Recorder(self.sms)
            for n in range(3):
                self._run(rec, step, n, HOST_LAUNCH_NS)
            (_, s1, _), _, (_, s3, _) = rec.steps()
            out[k] = (s3 - s1) / 2 / 1e3
        return out

    def matmul_sweep(self) -> dict:
        """The modeled cuBLAS's launch of each swept shape (its tile over M and N)."""
        name, block, regs, smem = MODEL_GEMM
        out = {}
        for dt, n, k in MATMUL_SHAPES:
            for m in MATMUL_ROWS:
                grid = [math.ceil(n / 128), math.ceil(m / 128), 1]
                row = {"name": name, "grid": grid, "block": list(block), "registers": regs}
                waves = math.ceil(math.prod(grid) / self.sms)  # one block a SM
                dur = waves * MODEL_GEMM_BLOCK_NS * k // 1024
                out[(dt, n, k, m)] = [dict(row, shared=smem, dur_ns=dur)]
        return out

    def _gemm(self, plan: dict, rows: int) -> tuple:
        from benchmarks.plant_model import Speed, run_launch

        name, block, regs, smem = MODEL_GEMM
        grid = [math.ceil(plan["n"] / 128), math.ceil(rows / 128), 1]
        per = plan["planted_shape"]["resident_per_sm"]
        speed = Speed("compute", MODEL_GEMM_BLOCK_NS * plan["k"] / 1024, alone=1.0 / per)
        progs = run_launch([1] * math.prod(grid), self.sms, per, speed)
        shape = {"grid": grid, "block": list(block), "registers": regs, "shared": smem}
        return name, progs, shape

    def matmul_steps(self, plan: dict):
        from benchmarks.plant_kernels import CONFIGS
        from benchmarks.plant_model import HOST_LAUNCH_NS

        planted = [self._gemm(plan, plan["m_planted"])] * plan["chunks_planted"]
        fixed = [self._gemm(plan, plan["m_fixed"])] * plan["chunks_fixed"]
        mark = self.step(CONFIGS["mark"], [[1]]).launches[0]
        bracketed = ModelStep([mark, *planted, mark], HOST_LAUNCH_NS, 1)
        return (
            ModelStep(planted, HOST_LAUNCH_NS, 0),
            ModelStep(fixed, HOST_LAUNCH_NS, 0),
            bracketed,
        )

    def rank_case(self, out_dir: str) -> dict:
        """Two modeled ranks whose steps start together (an all-reduce after each)."""
        from benchmarks.plant_kernels import CONFIGS
        from benchmarks.plant_model import LAUNCH_GAP_NS, launch_ns
        from sm_profiler.report.advise import advise

        chase = CONFIGS["chase"]
        plants = [planted_counts("rank", self.sms, 1, r) for r in (0, 1)]
        steps = [self.step(chase, p) for p in plants]
        period = max(launch_ns(s.launches[0][1]) for s in steps) + 2 * LAUNCH_GAP_NS
        tables = [self.record(s, rank=r, period=period) for r, s in enumerate(steps)]
        advice = advise(tables)
        row = first_row("rank", advice, self.sms, self.sms, lambda f: f.rank == 1)
        if row["ranked_first"]:
            fixed = self.step(chase, fixed_counts("rank", {}, plants[1]))
            t = self.time({"planted": steps[1], "fixed": fixed})
            row.update(recovered(advice.findings[0].estimate_ns_per_step, t))
        return row


# -- the cases ----------------------------------------------------------------------------------


def run_case(case: str, backend, out_dir: str) -> dict:
    """Record, advise, fix, time: one row of the table, on `backend` (Gpu, or the dry run's
    Model)."""
    from benchmarks.plant_kernels import CONFIGS
    from sm_profiler.report.advise import advise

    backend.begin_case()
    if case == "matmul":
        return matmul_case(backend)
    if case == "rank":
        return backend.rank_case(out_dir)
    config = CONFIGS[PLANTS[case].config]
    resident = backend.resident(config)
    plant = planted_counts(case, backend.sms, resident)
    step = backend.step(config, plant)
    table = backend.record(step)
    advice = advise(table)
    row = first_row(case, advice, backend.sms, step.programs)
    row.update(resident=resident, resident_by_registers=config.resident)
    if PLANTS[case].control:
        top = next((f for f in advice.findings if f.kind == EXPECTED[case]), None)
        evidence = {"programs": len(plant[0]), "slots": backend.sms * resident}
        fix = fixed_counts(case, top.evidence if top else evidence, plant)
    elif not row["ranked_first"]:
        return row
    else:
        top = advice.findings[0]
        fix = fixed_counts(case, top.evidence, plant)
    fixed = backend.step(config, fix, graph=case == "gaps")
    estimate_ns = top.estimate_ns_per_step if top is not None else 0.0
    row.update(
        recovered(estimate_ns, backend.time({"planted": step, "fixed": fixed})),
        fixed_programs=max(len(c) for c in fix),
    )
    if PLANTS[case].control:
        row.update(control=True, ok=control_holds(row))
    # The fix recorded too (a kernel of its own: another region), both saved: the recorded
    # spans beside the plain timing show where the instrumented build ran otherwise.
    fix_table = backend.record(backend.step(config, fix, fresh=True))
    row.update(
        plant_recorded_us=recorded_span_us(table), fix_recorded_us=recorded_span_us(fix_table)
    )
    save_recordings(case, table, fix_table, out_dir)
    if case == DIFF_CASE:
        row["diff"] = diff_recordings(table, fix_table, top, out_dir)
    return row


def recorded_span_us(table) -> float | None:
    """The median recorded launch's span (µs), where a step is one launch; None otherwise."""
    L = table.launches
    if table.num_launches == 0 or table.num_launches > RECORDED:
        return None
    return float(statistics.median((L["end_ns"] - L["start_ns"]).tolist())) / 1e3


def save_recordings(case: str, plant, fix, out_dir: str) -> list[str]:
    """The plant's and the fix's recordings under `out_dir`, as fix_first.CASE.{plant,fix}.npz."""
    os.makedirs(out_dir, exist_ok=True)
    paths = [os.path.join(out_dir, f"fix_first.{case}.{w}.npz") for w in ("plant", "fix")]
    plant.save(paths[0])
    fix.save(paths[1])
    return paths


def diff_recordings(before, after, finding, out_dir: str) -> dict:
    """Both recordings saved under `out_dir` and compared by `sm-profiler diff --json` (a
    process of its own, as a user runs it): the diff's file, and its line for `finding`
    (the estimate beside what AFTER's recording shows recovered)."""
    paths = save_recordings(DIFF_CASE, before, after, out_dir)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [REPO_ROOT, env.get("PYTHONPATH")]))
    cmd = [sys.executable, "-m", "sm_profiler", "diff", *paths, "--json"]
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=REPO_ROOT)
    if out.returncode != 0:
        return {"command": cmd[1:], "error": (out.stderr or out.stdout).strip()[-2000:]}
    doc = json.loads(out.stdout)
    path = os.path.join(out_dir, f"fix_first.{DIFF_CASE}.diff.json")
    with open(path, "w") as f:
        f.write(out.stdout)
    line = next(
        (x for x in doc["findings"] if x["kind"] == finding.kind and x["kernel"] == finding.kernel),
        None,
    )
    return {"command": ["sm-profiler", "diff", *paths, "--json"], "file": path, "finding": line}


def rank_case_gpu(reps: int, repeats: int, out_dir: str) -> dict:
    """The slow-rank case where 2 GPUs are visible: this benchmark under torchrun (--slow-rank),
    its row read back; skipped otherwise."""
    import torch

    n = torch.cuda.device_count()
    if n < 2:
        return {"case": "rank", "skipped": f"needs 2 GPUs ({n} visible)", "ranked_first": None}
    path = os.path.join(out_dir, "fix_first_rank.json")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2"]
    cmd += ["--master_port", "29733", "-m", "benchmarks.fix_first", "--slow-rank"]
    cmd += ["--reps", str(reps), "--repeats", str(repeats), "--out-dir", out_dir, "--json", path]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [REPO_ROOT, env.get("PYTHONPATH")]))
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=REPO_ROOT, timeout=300)
    if out.returncode not in (0, 1) or not os.path.exists(path):
        return {"case": "rank", "skipped": "torchrun failed: " + out.stderr.strip()[-500:]}
    with open(path) as f:
        (row,) = json.load(f)["rows"]
    return row


# -- the table --------------------------------------------------------------------------------


def format_table(rows: list[dict], dry: bool = False) -> list[str]:
    """The rows as a table (worst case first, as given), a line each."""
    out = [
        f"{'case':<11}{'ranked first':<22}{'estimate':>10}{'planted':>10}{'fixed':>10}"
        f"{'recovered':>11}{'rec./est.':>10}"
    ]
    for r in rows:
        if r.get("skipped") or r.get("error"):
            why = f"skipped: {r['skipped']}" if r.get("skipped") else f"ERROR: {r['error']}"
            out.append(f"{r['case']:<11}{why[:79]}")
            continue
        first = "yes" if r["ranked_first"] else f"NO: {r['first']}"
        if r.get("control"):
            first = "control: " + ("holds" if r.get("ok") else "FALSE PROMISE")
        if "estimate_us" not in r:
            out.append(f"{r['case']:<11}{first[:21]:<22}")
            continue
        frac = r["recovered_of_estimate"]
        share = f"{100 * frac:>9.0f}%" if frac is not None else f"{'-':>10}"
        out.append(
            f"{r['case']:<11}{first[:21]:<22}{r['estimate_us']:>8.1f}us"
            f"{r['planted_us']:>8.1f}us{r['fixed_us']:>8.1f}us{r['recovered_us']:>9.1f}us{share}"
        )
    out.append(
        "estimate: the advisor's first line, per step; planted, fixed: a step's median time "
        + ("(the dry run's model, not measured)" if dry else "without recording (CUDA events)")
        + "; recovered: planted - fixed; worst case first; a control: no defect a fix "
        "recovers, its estimate must stay within 2x recovered + 2 % of the step"
    )
    return out


def diff_line(row: dict) -> str | None:
    d = row.get("diff")
    if not d:
        return None
    if "error" in d or d.get("finding") is None:
        return f"{row['case']}: sm-profiler diff: {d.get('error', 'no line for the finding')}"
    f = d["finding"]
    frac = f["recovered_over_estimate"]
    return (
        f"{row['case']}: sm-profiler diff of the plant's and the fix's recordings: estimate "
        f"{f['estimate_ns'] / 1e3:.1f} us, recovered {(f['recovered_ns'] or 0) / 1e3:.1f} us "
        f"({'-' if frac is None else f'{100 * frac:.0f}%'}; {d['file']})"
    )


# -- the slow rank (torchrun, 2 GPUs) ---------------------------------------------------------


def run_slow_rank(reps: int, repeats: int, out_dir: str) -> dict | None:
    """Under torchrun: every rank records its steps and saves its table; rank 0 advises on them
    all, then every rank times the planted and the fixed step (an all-reduce after each)."""
    import torch
    import torch.distributed as dist

    from benchmarks.plant_kernels import CONFIGS, Tiles
    from sm_profiler import load
    from sm_profiler.report.advise import advise

    dist.init_process_group("nccl")
    rank, local = dist.get_rank(), int(os.environ.get("LOCAL_RANK", 0))
    torch.cuda.set_device(local)
    tiles = Tiles(CONFIGS["chase"])
    sms = sm_count()
    flag = torch.ones(1, device="cuda")

    def sync():
        dist.all_reduce(flag)

    (counts,) = planted_counts("rank", sms, 1, rank)
    step = tiles.variant(counts)
    tiles.check(step)
    table = record(step, after=sync)
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, f"fix_first.rank{rank}.npz")
    table.save(path)
    dist.barrier()
    row = None
    verdict = torch.zeros(1, device="cuda")
    if rank == 0:
        tables = [load(os.path.join(out_dir, f"fix_first.rank{r}.npz")) for r in range(2)]
        advice = advise(tables)
        row = first_row("rank", advice, sms, sms, lambda f: f.rank == 1)
        if row["ranked_first"]:
            verdict[0] = advice.findings[0].estimate_ns_per_step
    dist.broadcast(verdict, 0)
    if verdict.item() > 0:
        (fixed,) = fixed_counts("rank", {}, [counts])
        fix = tiles.variant(fixed)
        tiles.check(fix)
        t = time_steps({"planted": step, "fixed": fix}, reps, repeats, after=sync)
        if rank == 0:
            row.update(recovered(verdict.item(), t))
    dist.barrier()
    dist.destroy_process_group()
    return row


def run_models(args) -> list[dict]:
    """The benchmark models' (auto_overhead's GPT-, Llama- and MoE-style stacks) training step,
    compiled in an auto region: --warmup steps, then RECORDED steps recorded; the advisor's top
    five lines of each, as the report prints them at 80 columns."""
    import torch

    import sm_profiler
    from benchmarks import auto_overhead as ao
    from sm_profiler.report.advise import advise, advise_lines

    rows = []
    for model in args.models.split(","):
        ao.fresh_compile_state()
        step = ao.make_step(model, args.scenario, args)
        # --torch: torch.profiler on the recorded steps only (it needs a schedule to know them).
        opts = {"torch_profiler": True, "schedule": f"1-{RECORDED}"} if args.torch else {}
        with sm_profiler.auto(capacity=2**23, **opts) as prof:
            for _ in range(args.warmup):  # compiles, then steady
                step()
            torch.cuda.synchronize()
            for _ in range(RECORDED):
                prof.step()
                step()
            torch.cuda.synchronize()
        table = prof.table().select_steps(f"1-{RECORDED}")
        doc = prof.torch_trace() if args.torch else None
        advice = advise(table, cupti=doc)
        lines = advise_lines(advice, 80, 5)
        print(f"\n== {model} ({args.scenario}; {torch.cuda.get_device_name(0)})")
        print("\n".join(lines[1:]))
        rows.append({"model": model, "scenario": args.scenario, "lines": lines[1:]})
        rows[-1]["advice"] = advice.to_dict(5)
        if args.torch:
            alone = advise(table)
            gaps = {
                a: next((f.estimate_ns_per_step for f in x.findings if f.kind == "host_gaps"), 0.0)
                for a, x in (("records", alone), ("cupti", advice))
            }
            print(
                f"host gaps a step: {gaps['cupti'] / 1e3:.1f} µs over every kernel (CUPTI), "
                f"{gaps['records'] / 1e3:.1f} µs over the instrumented ones "
                f"({advice.gaps_from}; notes: {'; '.join(advice.notes) or 'none'})"
            )
            rows[-1]["host_gaps_ns"] = gaps
            rows[-1]["advice_records_only"] = alone.to_dict(5)
        del step, prof
    return rows


# -- the command line -------------------------------------------------------------------------


def run_cases(cases: list[str], backend, out_dir: str, save=None) -> list[dict]:
    """Every case in order, its progress printed as it goes, the rows so far given to `save`
    after each (a run cut short keeps what it measured); a case that raises is a row with its
    error, and the next runs. The rows worst case first."""
    rows = []
    t0 = time.perf_counter()
    for i, case in enumerate(cases, 1):
        t = time.perf_counter()
        print(f"[{i}/{len(cases)}] {case}: {PLANTS[case].planted} ...", flush=True)
        try:
            row = run_case(case, backend, out_dir)
        except Exception as e:  # one case's failure (a CUDA error, a shape) is its row's
            trace = traceback.format_exc()
            print(trace[-3000:], flush=True)
            row = {"case": case, "error": f"{type(e).__name__}: {e}"[:500], "ranked_first": False}
            row["traceback"] = trace[-3000:]
        rows.append(row)
        if save is not None:
            save(worst_first(rows))
        what = (
            row.get("skipped")
            or row.get("error")
            or (
                f"control: estimate {row['estimate_us']:.1f} us, recovered "
                f"{row['recovered_us']:.1f} us ({'holds' if row['ok'] else 'FALSE PROMISE'})"
                if row.get("control")
                else f"first: {row['first']} "
                f"({'the plant' if row['ranked_first'] else 'NOT the plant'})"
            )
        )
        print(
            f"[{i}/{len(cases)}] {case}: {what}; {time.perf_counter() - t:.1f} s "
            f"({time.perf_counter() - t0:.0f} s in all)",
            flush=True,
        )
    return worst_first(rows)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", default=",".join(CASES), help="comma-separated: " + ", ".join(CASES))
    ap.add_argument("--slow-rank", action="store_true", help="the 2-GPU case (under torchrun)")
    ap.add_argument(
        "--dry-run",
        action="store_true",
        help="no GPU: every case on a model of the GPU (benchmarks/plant_model.py)",
    )
    ap.add_argument("--reps", type=int, default=20, help="steps per timed figure")
    ap.add_argument("--repeats", type=int, default=15, help="figures per variant (median)")
    ap.add_argument(
        "--out-dir",
        "--out",
        dest="out_dir",
        default=None,
        help="folder for the recordings, the diff and the slow-rank files (default: --json's "
        "folder, else fix_first_out)",
    )
    ap.add_argument(
        "--models",
        default=None,
        help="instead: the advisor's top five lines on these benchmark models (gpt,llama,moe)",
    )
    ap.add_argument("--scenario", default="train", help="with --models: train or train_graphs")
    ap.add_argument(
        "--torch",
        action="store_true",
        help="with --models: torch.profiler on the recorded steps; host gaps over every kernel",
    )
    ap.add_argument("--warmup", type=int, default=5, help="with --models: steps before recording")
    add_model_shape_args(ap)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    cases = [c for c in args.cases.split(",") if c]
    unknown = [c for c in cases if c not in PLANTS]
    if unknown:
        ap.error(f"no case named {', '.join(unknown)}; choose from {', '.join(CASES)}")
    out_dir = args.out_dir or (os.path.dirname(os.path.abspath(args.json)) if args.json else None)
    out_dir = out_dir or "fix_first_out"

    def save(rows):
        if args.json:
            with open(args.json, "w") as f:
                doc = {"config": vars(args), "dry_run": args.dry_run, "rows": rows}
                json.dump(doc, f, indent=1)

    if args.dry_run:
        rows = run_cases(cases, Model(), out_dir, save)
    else:
        if no_cuda_gpu("fix_first"):
            return 0
        if args.models:
            rows = run_models(args)
            if args.json:
                with open(args.json, "w") as f:
                    json.dump({"config": vars(args), "models": rows}, f, indent=1)
            return 0
        if args.slow_rank:
            row = run_slow_rank(args.reps, args.repeats, out_dir)
            rows = [row] if row is not None else []
            if not rows:  # a rank other than 0
                return 0
        else:
            os.makedirs(out_dir, exist_ok=True)
            rows = run_cases(cases, Gpu(args.reps, args.repeats), out_dir, save)
    print("\n".join(format_table(rows, args.dry_run)))
    for r in rows:
        if r.get("findings"):
            f = r["findings"][0]
            print(f"{r['case']}: {f['detail']}\n  fix: {f['suggestion']}")
    for r in rows:
        line = diff_line(r)
        if line:
            print(line)
    save(rows)
    ran = [r for r in rows if not r.get("skipped")]
    return 0 if all(row_ok(r) for r in ran) else 1


if __name__ == "__main__":
    sys.exit(main())
