"""End-to-end time that auto mode adds to a torch.compile'd transformer, next to torch.profiler
and Proton's launch-level profile.

The model: a GPT-style stack of pre-LN blocks (causal attention through
F.scaled_dot_product_attention, a 4x GELU MLP), bf16, d_model 1024, 16 heads, batch 8 x 1024
tokens, 4 layers. Two scenarios:

  train   torch.compile (default mode); one step = forward + backward of a mean-square loss,
          then the grads are set to None (no optimizer: it adds no Triton kernel of interest)
  train_graphs  the train step with mode="reduce-overhead" (CUDA graphs: GPU-bound)
  infer   torch.compile(mode="reduce-overhead") (CUDA graphs); one step = a forward under
          torch.no_grad()

Modes, each in a fresh Python subprocess per round so that compile caches in memory, hooks and
CUPTI state never carry from one mode to the next, run interleaved in rounds (plain, auto,
torch_profiler, proton, plain, auto, ...) on one GPU. A mode's process runs the scenarios one
after the other, each with its own compiled model and its own profiler region or session (one
process for both halves the start-up and import time, which outweighs the timed steps):

  plain           the compiled model, no profiler
  auto            `with sm_profiler.auto(ring=True, capacity=2**22)` around compile + warmup + the
                  timed steps (compiling inside the region is what instruments Inductor's
                  kernels; ring=True keeps the newest records, so a long loop never stops
                  recording). After the region: records and distinct kernels of one step, and
                  the header's claimed / dropped counts
  torch_profiler  torch.profiler.profile(activities=[CPU, CUDA]) around the timed steps only
  proton          triton.profiler start(hook="triton") ... finalize() around the timed steps only
                  (CUPTI launch-level: no in-kernel instrumentation)

Timing, per mode process: compile, >= 20 warmup steps, then `--repeats` times: synchronize,
CUDA events around `--steps` steps, synchronize; the process's figure is the median ms/step of
its repeats. The table gives, per scenario and mode, the median over rounds of those figures, the
min..max over rounds, and the time added relative to plain (median over median).

    python -m benchmarks run auto_overhead --json $OUT/auto.json
    python -m benchmarks run auto_overhead --quick      # smoke run: 2 layers, 1 round, few steps
    python -m benchmarks run auto_overhead --rounds 5 --steps 100 --scenarios train

Needs an NVIDIA GPU, torch and Triton (3.6 or newer); without a GPU it says so and exits 0.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

MODES = ("plain", "auto", "torch_profiler", "proton")
SCENARIOS = ("train", "infer", "train_graphs")
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULT_PREFIX = "AUTO_OVERHEAD_RESULT "  # the child's one line of JSON on stdout
# Tag given (set_tag) to the launches of one extra step after the timed ones, so that one step's
# records can be picked out of the ring (0 is "no tag").
ONE_STEP_TAG = 2
AUTO_CAPACITY_RECORDS = 2**22


# -- the model (built in the child only: torch is imported lazily, so that this file imports on
# a machine without torch or a GPU) -------------------------------------------------------------


def build_model(layers: int, d_model: int, heads: int):
    import torch
    import torch.nn.functional as F
    from torch import nn

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
            self.qkv = nn.Linear(d_model, 3 * d_model)
            self.proj = nn.Linear(d_model, d_model)
            self.up = nn.Linear(d_model, 4 * d_model)
            self.down = nn.Linear(4 * d_model, d_model)

        def forward(self, x):
            b, t, d = x.shape
            q, k, v = (
                self.qkv(self.ln1(x))
                .view(b, t, 3, heads, d // heads)
                .permute(2, 0, 3, 1, 4)
                .unbind(0)
            )
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
            return x + self.down(F.gelu(self.up(self.ln2(x))))

    class Stack(nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = nn.ModuleList(Block() for _ in range(layers))
            self.ln_f = nn.LayerNorm(d_model)

        def forward(self, x):
            for blk in self.blocks:
                x = blk(x)
            return self.ln_f(x)

    class MeanSquareLoss(nn.Module):
        """The stack and its loss in one compiled graph, so the loss's reduction is Inductor's."""

        def __init__(self, stack):
            super().__init__()
            self.stack = stack

        def forward(self, x):
            return self.stack(x).float().square().mean()

    stack = Stack().to(device="cuda", dtype=torch.bfloat16)
    return stack, MeanSquareLoss(stack)


def make_step(scenario: str, args):
    """The compiled one-step callable of a scenario. Nothing is compiled until its first call, so
    the caller decides whether that happens inside a profiler region."""
    import torch

    torch.manual_seed(0)
    stack, loss_module = build_model(args.layers, args.d_model, args.heads)
    x = torch.randn(args.batch, args.seq, args.d_model, device="cuda", dtype=torch.bfloat16)
    if scenario in ("train", "train_graphs"):
        # train_graphs: the same step with CUDA graphs (forward and backward replayed), so the
        # GPU, not the host's launch rate, sets the step time.
        mode = "reduce-overhead" if scenario == "train_graphs" else None
        compiled = torch.compile(loss_module, mode=mode)

        def step():
            if mode:
                torch.compiler.cudagraph_mark_step_begin()
            compiled(x).backward()
            stack.zero_grad(set_to_none=True)

        return step
    compiled = torch.compile(stack, mode="reduce-overhead")

    def step():
        # Marks a new iteration for CUDA graph trees: each replay may reuse the last one's
        # output memory, and nothing here keeps an output.
        torch.compiler.cudagraph_mark_step_begin()
        with torch.no_grad():
            compiled(x)

    return step


def time_steps(step, steps: int, repeats: int) -> list[float]:
    """ms/step of each repeat: CUDA events around `steps` back-to-back steps."""
    import torch

    out = []
    for _ in range(repeats):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        start.record()
        for _ in range(steps):
            step()
        end.record()
        torch.cuda.synchronize()
        out.append(start.elapsed_time(end) / steps)
    return out


# -- one mode, in its own process ---------------------------------------------------------------


def run_child(args) -> list[dict]:
    """Every scenario of `--scenarios`, one after the other, in this process, under one mode."""
    t0 = time.perf_counter()
    import torch
    import triton

    env = {
        "device": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "import_s": time.perf_counter() - t0,
    }
    return [dict(env, **run_scenario(sc, args)) for sc in args.scenarios.split(",")]


def run_scenario(scenario: str, args) -> dict:
    import torch

    mode = args.mode
    res = {"scenario": scenario, "mode": mode}
    t0 = time.perf_counter()
    step = make_step(scenario, args)
    res["build_s"] = time.perf_counter() - t0

    if mode == "auto":
        import numpy as np

        import sm_profiler

        t0 = time.perf_counter()
        with sm_profiler.auto(capacity=AUTO_CAPACITY_RECORDS, ring=True) as prof:
            step()  # compiles, inside the region: Inductor's kernels come out instrumented
            torch.cuda.synchronize()
            res["compile_s"] = time.perf_counter() - t0
            for _ in range(args.warmup):
                step()
            res["ms_per_step_repeats"] = time_steps(step, args.steps, args.repeats)
            # One more step, tagged, after the timed ones (the tag's header write stays out of
            # the timing); the ring keeps the newest records, so all of its records survive.
            prof.set_tag(ONE_STEP_TAG)
            step()
            prof.set_tag(0)
            t_exit = time.perf_counter()
        res["region_exit_s"] = time.perf_counter() - t_exit
        recs, info = prof.records()
        tags = (recs["info"] >> 24) & 0xFF
        kernel_ids = recs["info"] & 0xFFFF
        one_step = tags == ONE_STEP_TAG
        res["auto"] = {
            "records_per_step": int(one_step.sum()),
            "kernels_per_step": int(np.unique(kernel_ids[one_step]).size),
            "kernels_in_ring": int(np.unique(kernel_ids).size),
            "claimed": int(info["claimed"]),
            "capacity": int(info["capacity"]),
            "dropped": int(info["dropped"]),
            "unwritten": int(info["unwritten"]),
            "notes": list(prof.notes),
        }
        return res

    t0 = time.perf_counter()
    step()  # compile, outside any profiler
    torch.cuda.synchronize()
    res["compile_s"] = time.perf_counter() - t0
    for _ in range(args.warmup):
        step()

    if mode == "plain":
        res["ms_per_step_repeats"] = time_steps(step, args.steps, args.repeats)
    elif mode == "torch_profiler":
        from torch.profiler import ProfilerActivity, profile

        # Only the region's exit is measured after it: listing its events (p.events()) in
        # Python would cost the run more than the timed steps do.
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]):
            res["ms_per_step_repeats"] = time_steps(step, args.steps, args.repeats)
            t_exit = time.perf_counter()
        res["region_exit_s"] = time.perf_counter() - t_exit
    elif mode == "proton":
        import triton.profiler as proton

        with tempfile.TemporaryDirectory() as tmp:
            name = os.path.join(tmp, f"auto_overhead_{scenario}")
            # hook="triton" adds Triton's launch metadata to each launch Triton makes itself;
            # an older or newer Proton that refuses it still profiles every launch via CUPTI.
            try:
                session = proton.start(name, hook="triton")
                res["proton"] = {"hook": "triton"}
            except (TypeError, ValueError) as e:
                session = proton.start(name)
                res["proton"] = {"hook": None, "hook_error": f"{type(e).__name__}: {e}"}
            res["ms_per_step_repeats"] = time_steps(step, args.steps, args.repeats)
            t_exit = time.perf_counter()
            proton.finalize(session)
            res["region_exit_s"] = time.perf_counter() - t_exit
            res["proton"]["files"] = {
                f: os.path.getsize(os.path.join(tmp, f)) for f in os.listdir(tmp)
            }
    else:
        raise ValueError(f"unknown mode {mode!r}")
    return res


# -- the parent: rounds of subprocesses, then the table ------------------------------------------


def child_command(args, mode: str) -> list[str]:
    cmd = [sys.executable, os.path.abspath(__file__), "--child", "--mode", mode]
    for k in (
        "scenarios",
        "steps",
        "repeats",
        "warmup",
        "layers",
        "d_model",
        "heads",
        "batch",
        "seq",
    ):
        cmd += [f"--{k.replace('_', '-')}", str(getattr(args, k))]
    return cmd


def spawn(args, mode: str, timeout_s: float) -> list[dict]:
    """One fresh process for `mode`: its result per scenario (an 'error' entry for each scenario
    without one)."""
    scenarios = args.scenarios.split(",")
    env = dict(os.environ)
    # The child imports sm_profiler from this checkout whether or not it is installed.
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [REPO_ROOT, env.get("PYTHONPATH")]))
    t0 = time.perf_counter()
    try:
        p = subprocess.run(
            child_command(args, mode), env=env, capture_output=True, text=True, timeout=timeout_s
        )
        out, error = p.stdout, f"exit {p.returncode}"
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        p, error = None, f"timed out after {timeout_s:.0f} s"
    wall_s = time.perf_counter() - t0
    got = {}
    for line in out.splitlines():
        if line.startswith(RESULT_PREFIX):
            for res in json.loads(line[len(RESULT_PREFIX) :]):
                res["process_wall_s"] = wall_s  # the whole process: all its scenarios
                got[res["scenario"]] = res
    tail = "" if p is None else "\n".join((p.stdout + "\n" + p.stderr).strip().splitlines()[-25:])
    return [
        got.get(sc)
        or {
            "scenario": sc,
            "mode": mode,
            "error": error,
            "log_tail": tail,
            "process_wall_s": wall_s,
        }
        for sc in scenarios
    ]


def summarize(runs: list[dict], scenarios, modes) -> list[dict]:
    rows = []
    for sc in scenarios:
        plain_ms = plain_best = None
        for mode in modes:
            ok = [r for r in runs if r["scenario"] == sc and r["mode"] == mode and "error" not in r]
            failed = [r for r in runs if r["scenario"] == sc and r["mode"] == mode and "error" in r]
            row = {"scenario": sc, "mode": mode, "rounds": len(ok), "failed": len(failed)}
            if ok:
                per_round = [statistics.median(r["ms_per_step_repeats"]) for r in ok]
                # best: the fastest repeat of any round. Where the host's launch jitter swings
                # repeats by tens of percent (a launch-bound step), the best repeat is what the
                # GPU work allows and the medians mostly measure the jitter.
                best = min(min(r["ms_per_step_repeats"]) for r in ok)
                row.update(
                    ms_per_step=statistics.median(per_round),
                    ms_min=min(per_round),
                    ms_max=max(per_round),
                    per_round_ms=per_round,
                    best_ms=best,
                )
                if mode == "plain":
                    plain_ms, plain_best = row["ms_per_step"], best
                if plain_ms:
                    row["added_pct"] = 100.0 * (row["ms_per_step"] / plain_ms - 1.0)
                    row["added_best_pct"] = 100.0 * (best / plain_best - 1.0)
                if mode == "auto":
                    a = ok[-1]["auto"]
                    row["auto"] = {
                        k: a[k]
                        for k in ("records_per_step", "kernels_per_step", "dropped", "claimed")
                    }
                if mode == "proton":
                    row["proton_hook"] = ok[-1]["proton"].get("hook")
            rows.append(row)
    return rows


def print_table(rows: list[dict], header: str) -> None:
    print(header)
    print(
        f"{'scenario':<13}{'mode':<16}{'ms/step':>9}  {'min..max (rounds)':<20}{'added':>8}"
        f"{'best':>8}{'added':>8}  notes"
    )
    for r in rows:
        if "ms_per_step" not in r:
            print(f"{r['scenario']:<13}{r['mode']:<16}{'failed':>9}")
            continue
        spread = f"{r['ms_min']:.3f}..{r['ms_max']:.3f} ({r['rounds']})"
        added = f"{r['added_pct']:+.2f}%" if "added_pct" in r else "-"
        note = ""
        if "auto" in r:
            a = r["auto"]
            note = (
                f"{a['records_per_step']:,} rec/step, {a['kernels_per_step']} kernels/step, "
                f"dropped {a['dropped']:,} of {a['claimed']:,} (ring)"
            )
        elif "proton_hook" in r:
            note = f"hook={r['proton_hook']}"
        if r["failed"]:
            note += f" [{r['failed']} round(s) failed]"
        best = f"{r['added_best_pct']:+.2f}%" if "added_best_pct" in r else "-"
        print(
            f"{r['scenario']:<13}{r['mode']:<16}{r['ms_per_step']:>9.3f}  {spread:<20}"
            f"{added:>8}{r['best_ms']:>8.3f}{best:>8}  {note}"
        )


def run_parent(args) -> int:
    try:
        import torch
    except ImportError:
        print("auto_overhead: torch is not installed; nothing to measure")
        return 0
    if not torch.cuda.is_available():
        print("auto_overhead: no CUDA GPU visible; nothing to measure")
        return 0
    scenarios = args.scenarios.split(",")
    modes = args.modes.split(",")
    for name, got, known in (("scenario", scenarios, SCENARIOS), ("mode", modes, MODES)):
        bad = [g for g in got if g not in known]
        if bad:
            sys.exit(f"unknown {name}(s) {bad}; choose from {known}")
    config = {
        k: getattr(args, k)
        for k in (
            "steps",
            "repeats",
            "warmup",
            "rounds",
            "layers",
            "d_model",
            "heads",
            "batch",
            "seq",
        )
    }
    print(f"auto_overhead: {config}", flush=True)

    t_start = time.perf_counter()
    runs: list[dict] = []
    round_s: list[float] = []
    env_line = ""
    for rnd in range(args.rounds):
        elapsed = time.perf_counter() - t_start
        # Stop before a round that would not fit the time budget (the first round carries the
        # cold compiles, so it over-estimates the later ones): a partial table beats none.
        if round_s and elapsed + min(round_s) > args.budget_s:
            print(
                f"stopping after {rnd} round(s): {elapsed:.0f} s used of --budget-s "
                f"{args.budget_s:.0f}",
                flush=True,
            )
            break
        t_round = time.perf_counter()
        for mode in modes:
            # A hung process must not take the table with it: none outlives the budget by more
            # than a minute.
            left = args.budget_s + 60 - (time.perf_counter() - t_start)
            for res in spawn(args, mode, timeout_s=max(60.0, left)):
                res["round"] = rnd
                runs.append(res)
                sc = res["scenario"]
                if "error" in res:
                    print(
                        f"round {rnd} {sc:<6} {mode:<15} FAILED {res['error']}\n"
                        f"{res.get('log_tail', '')}",
                        flush=True,
                    )
                    continue
                env_line = f"device: {res['device']}  torch {res['torch']}  triton {res['triton']}"
                reps = " ".join(f"{m:.3f}" for m in res["ms_per_step_repeats"])
                print(
                    f"round {rnd} {sc:<6} {mode:<15} ms/step [{reps}]  compile "
                    f"{res['compile_s']:.1f} s, process {res['process_wall_s']:.1f} s",
                    flush=True,
                )
        round_s.append(time.perf_counter() - t_round)
        if args.json:
            write_json(args.json, env_line, config, runs, summarize(runs, scenarios, modes))

    rows = summarize(runs, scenarios, modes)
    if args.json:
        write_json(args.json, env_line, config, runs, rows)
    print()
    print_table(rows, env_line or "device: (no run succeeded)")
    print(f"total {time.perf_counter() - t_start:.0f} s")
    return 0


def write_json(path: str, env_line: str, config: dict, runs: list[dict], rows: list[dict]):
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        json.dump({"env": env_line, "config": config, "summary": rows, "runs": runs}, f, indent=1)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=50, help="steps per timed repeat")
    ap.add_argument("--repeats", type=int, default=5, help="timed repeats per process (median)")
    ap.add_argument("--warmup", type=int, default=20, help="steps after compile, before timing")
    ap.add_argument("--rounds", type=int, default=3, help="rounds of one process per mode")
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--d-model", dest="d_model", type=int, default=1024)
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=1024, help="tokens per sequence")
    ap.add_argument("--scenarios", default=",".join(SCENARIOS))
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument(
        "--budget-s",
        dest="budget_s",
        type=float,
        default=480.0,
        help="start no new round past this many seconds",
    )
    ap.add_argument("--json", default=None, help="write the results here (JSON)")
    ap.add_argument(
        "--quick",
        action="store_true",
        help="smoke run: 2 layers, 1 round, 2 repeats of 10 steps, 5 warmup",
    )
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--mode", default="plain", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.quick:
        args.layers, args.rounds, args.repeats, args.steps, args.warmup = 2, 1, 2, 10, 5
    if args.child:
        print(RESULT_PREFIX + json.dumps(run_child(args)), flush=True)
        return 0
    return run_parent(args)


if __name__ == "__main__":
    sys.exit(main())
