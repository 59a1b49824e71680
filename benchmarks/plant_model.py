"""A model of the GPU for fix_first's dry run (`python -m benchmarks.fix_first --dry-run`): the
planted defects and their fixes run on the CPU, every step of the benchmark but the kernels and
the clock, so that the cases, the fixes read from the advisor's evidence, the table, the JSON
and `sm-profiler diff` of a plant against its fix are checked without a GPU. Its times are the
model's, never a measurement: what it checks is the benchmark's logic, not the advisor's
accuracy (that takes the GPU).

A launch's programs are placed as a GPU's block scheduler places them: in program order, each
on the SM holding the fewest (the lowest SM of equals) while one has a free slot (`resident` a
SM), else when one frees. A program's speed, in units of work per ns (Speed):

  latency  1 / unit_ns, whatever shares its SM (the pointer chase)
  compute  the SM's throughput is shared by its programs: min(alone, 1 / k) / unit_ns with k
           programs on the SM, `alone` the share one program can use by itself (a dependent-FMA
           program of one warp a sub-partition: a quarter)
  memory   the GPU's bandwidth is shared by every running program: min(alone, 1 / n) / unit_ns
           with n programs running anywhere, `alone` what one program's loads in flight reach

Steps follow one another on the GPU `LAUNCH_GAP_NS` apart unless the host is slower (its time a
launch, `host_ns`); the recorded steps become an AutoTable as auto mode would have written it
(steps 1..RECORDED, times at a %globaltimer-like origin).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

ORIGIN_NS = 1_700_000_000_000_000_000  # %globaltimer reads about 1.7e18 ns
TORCH_BASE_NS = 3_000_000_000  # torch.profiler's clock: its own origin
LAUNCH_GAP_NS = 2_000  # between launches the GPU runs back to back
HOST_LAUNCH_NS = 16_000  # a launch from Python (the gaps case's pace)
RECORDING_LOOP_NS = 26_000  # the recording loop's pace a step (prof.step() and a launch)
EPS = 1e-9


@dataclass(frozen=True)
class Speed:
    """How fast a program of a config runs (see the module's docstring)."""

    bound: str
    unit_ns: float
    alone: float = 1.0


# Per plant config (plant_kernels.CONFIGS): an H200-like guess, enough to place each defect.
SPEEDS = {
    "chase": Speed("latency", 1_000.0),
    "fma16": Speed("compute", 540.0, alone=0.25),
    "fma4": Speed("compute", 2_150.0, alone=1.0),
    "fma1": Speed("compute", 4_300.0, alone=1.0),
    "stream": Speed("memory", 1.0, alone=1 / 700),
    "mark": Speed("latency", 1_000.0),
}


def run_launch(work, sms: int, resident: int, speed: Speed) -> np.ndarray:
    """Programs (sm, start_ns, end_ns), one row per program in program order, of a launch whose
    program p does work[p] units, from the launch's start."""
    work = np.asarray(work, np.float64)
    n = len(work)
    out = np.zeros((n, 3), np.float64)
    on_sm = np.zeros(sms, np.int64)
    left = work.copy()
    running = np.zeros(n, bool)
    sm_of = np.zeros(n, np.int64)
    nxt, now = 0, 0.0
    while nxt < n or running.any():
        while nxt < n and on_sm.min() < resident:  # the scheduler fills free slots in order
            sm = int(np.argmin(on_sm))
            on_sm[sm] += 1
            sm_of[nxt] = sm
            out[nxt, :2] = sm, now
            running[nxt] = True
            nxt += 1
        act = np.flatnonzero(running)
        rate = _rates(speed, sm_of[act], on_sm)
        dt = float(np.min(left[act] / rate))
        left[act] -= rate * dt
        now += dt
        done = act[left[act] <= EPS * np.maximum(work[act], 1.0)]
        out[done, 2] = now
        np.subtract.at(on_sm, sm_of[done], 1)
        running[done] = False
    return out


def _rates(speed: Speed, sms_of_active: np.ndarray, on_sm: np.ndarray) -> np.ndarray:
    """Units per ns of each running program (Speed)."""
    if speed.bound == "latency":
        share = np.ones(len(sms_of_active))
    elif speed.bound == "compute":
        share = np.minimum(speed.alone, 1.0 / on_sm[sms_of_active])
    else:
        share = np.full(len(sms_of_active), min(speed.alone, 1.0 / len(sms_of_active)))
    return share / speed.unit_ns


def launch_ns(programs: np.ndarray) -> int:
    """A launch's span: its last program's end (programs from run_launch)."""
    return int(math.ceil(programs[:, 2].max())) if len(programs) else 0


class Recorder:
    """The launches of a modeled run on one GPU. `launch(name, programs, step, host_ns)` places
    one after the last (LAUNCH_GAP_NS later), or when the host has queued it (`host_ns` after
    the last launch's queueing), or at `not_before_ns`, whichever is latest; `shape` (grid,
    block, registers, shared) marks a kernel auto mode does not instrument (cuBLAS): CUPTI's
    rows have it, the AutoTable does not. `table()` is the AutoTable of the instrumented
    launches of steps >= 0, `cupti_doc()` torch.profiler's trace of every launch."""

    def __init__(self, sm_count: int, rank: int = 0):
        self.sm_count, self.rank = sm_count, rank
        self.gpu_free = 0
        self.host = 0
        self.launches: list[dict] = []

    def launch(self, name, programs, step: int, host_ns: int, not_before_ns=0, shape=None) -> int:
        self.host += host_ns
        start = max(self.host, self.gpu_free + LAUNCH_GAP_NS, not_before_ns)
        span = launch_ns(programs)
        self.launches.append(
            {"name": name, "programs": programs, "step": step, "start": start, "shape": shape}
        )
        self.gpu_free = start + span
        return start

    def steps(self) -> list[tuple[int, int, int]]:
        """(step, first start, last end) of each step >= 0, in ns from the run's start."""
        out: dict[int, list[int]] = {}
        for la in self.launches:
            if la["step"] >= 0:
                end = la["start"] + launch_ns(la["programs"])
                lo, hi = out.get(la["step"], (la["start"], end))
                out[la["step"]] = [min(lo, la["start"]), max(hi, end)]
        return [(k, v[0], v[1]) for k, v in sorted(out.items())]

    def table(self, device_name: str = "modeled GPU (dry run)"):
        from sm_profiler.trace.auto_table import LAUNCH_DTYPES, ROW_DTYPES, AutoTable

        kept = [la for la in self.launches if la["step"] >= 0 and la["shape"] is None]
        names = list(dict.fromkeys(la["name"] for la in kept))
        rows: dict[str, list] = {k: [] for k in ROW_DTYPES}
        cols: dict[str, list] = {k: [] for k in LAUNCH_DTYPES}
        first = 0
        for i, la in enumerate(kept):
            progs = la["programs"]
            n = len(progs)
            s = ORIGIN_NS + la["start"] + np.floor(progs[:, 1]).astype(np.int64)
            e = ORIGIN_NS + la["start"] + np.ceil(progs[:, 2]).astype(np.int64)
            given = {
                "launch": [i] * n,
                "sm": progs[:, 0].astype(np.int64).tolist(),
                "start_ns": s.tolist(),
                "end_ns": e.tolist(),
                "x": list(range(n)),
            }
            for k in ROW_DTYPES:
                rows[k].extend(given.get(k, [0] * n))
            given = {
                "kernel": names.index(la["name"]),
                "grid_id": i,
                "step": la["step"],
                "first_row": first,
                "rows": n,
                "start_ns": int(s.min()),
                "end_ns": int(e.max()),
                "grid_x": n,
                "grid_y": 1,
                "grid_z": 1,
            }
            for k in LAUNCH_DTYPES:
                cols[k].append(given.get(k, 0))
            first += n
        r = {k: np.array(rows[k], ROW_DTYPES[k]) for k in ROW_DTYPES}
        launches = {k: np.array(cols[k], LAUNCH_DTYPES[k]) for k in LAUNCH_DTYPES}
        session = {
            "gpu": 0,
            "sm_count": self.sm_count,
            "rank": self.rank,
            "device_name": device_name,
        }
        kernels = [{"name": n, "kernel_id": j} for j, n in enumerate(names)]
        return AutoTable(r, launches, kernels, [session], {"dry_run": True})

    def cupti_doc(self) -> dict:
        """torch.profiler's trace of the run: a CUPTI row per launch (its span; the launch shape
        of those that carry one) and a ProfilerStep#N window per step, on torch's clock, whose
        origin is not ours (the advisor's alignment finds the offset)."""
        ev = []
        for la in self.launches:
            shape = la["shape"] or {
                "grid": [len(la["programs"]), 1, 1],
                "block": [32, 1, 1],
                "registers": 32,
                "shared": 0,
            }
            args = {"device": 0, "grid": list(shape["grid"]), "block": list(shape["block"])}
            args.update(
                {"registers per thread": shape["registers"], "shared memory": shape["shared"]}
            )
            ev.append(_event("kernel", la["name"], la["start"], launch_ns(la["programs"]), args))
        for n, s, e in self.steps():
            ev.append(_event("user_annotation", f"ProfilerStep#{n}", s - 1_000, e - s + 2_000, {}))
        return {
            "schemaVersion": 1,
            "baseTimeNanoseconds": TORCH_BASE_NS,
            "traceEvents": ev,
            "deviceProperties": [
                {"id": 0, "name": "modeled GPU (dry run)", "numSms": self.sm_count}
            ],
        }


def _event(cat: str, name: str, start_ns: int, dur_ns: int, args: dict) -> dict:
    pid, tid = (0, 7) if cat == "kernel" else (11, 11)
    ev = {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid}
    ev.update({"ts": start_ns / 1e3, "dur": dur_ns / 1e3})
    if args:
        ev["args"] = args
    return ev
