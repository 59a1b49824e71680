"""What share of a training step auto mode sees, by default and with `via_triton=True`, checked
against CUPTI, with the step time and outputs the opt-in changes, on auto_overhead's models.

Per model (`--models`, auto_overhead's builders and sizes: gpt, llama, moe; `--layers` ...
apply) and route (`default`, `via_triton`), one fresh process each, run one after the other on
one GPU; the step is auto_overhead's train step (torch.compile default mode, forward + mean-square
loss + backward):

  step time     the compiled step without a profiler (via_triton's Inductor settings and
                FlexAttention applied where the route is via_triton: what the opt-in itself
                costs), median ms/step of `--repeats` repeats of `--steps` steps (CUDA events)
  coverage      compiled again inside `sm_profiler.auto(via_triton=...)`, `--warmup` steps,
                then `--profiled` steps under both auto mode (prof.step() each step) and
                torch.profiler (its own ProfilerStep#N annotations): the share of each step the
                instrumented kernels ran, from our records alone (the report's "seen" figure,
                report.step_shares) and from CUPTI's kernel rows (sm_profiler.torch_coverage);
                medians over the steps. The check: within 2 points of each other
  outputs       the first step's loss and the model's output on a fixed input, saved by each
                route; the parent compares via_triton's with default's (max abs difference over
                the output's max abs)

    python -m benchmarks run auto_coverage --json $OUT/coverage.json
    python -m benchmarks run auto_coverage --models llama --quick

Needs an NVIDIA GPU, torch and Triton; without a GPU it says so and exits 0.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

from benchmarks.env import add_model_shape_args, no_cuda_gpu

ROUTES = ("default", "via_triton")
RESULT_PREFIX = "AUTO_COVERAGE_RESULT "
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_child(args) -> dict:
    import torch

    import sm_profiler
    from benchmarks import auto_overhead as ao
    from sm_profiler.auto_mode.via_triton import ViaTriton
    from sm_profiler.report.auto_report import step_shares

    via = args.route == "via_triton"
    res = {"model": args.model, "route": args.route, "device": torch.cuda.get_device_name(0)}
    res.update(torch=torch.__version__, triton=__import__("triton").__version__)

    # 1. outputs and step time, no profiler (the same seeds in each route: the same weights)
    routing = ViaTriton() if via else None
    if routing:
        routing.apply()
    try:
        torch.manual_seed(0)
        _, loss_module, x = ao.BUILDERS[args.model](args)
        with torch.no_grad():
            out = torch.compile(loss_module.model)(x)
        torch.save(out.float().cpu(), os.path.join(args.tmp, f"{args.model}_{args.route}.pt"))
        res["loss"] = float(out.float().square().mean())
        del loss_module, x, out
        ao.fresh_compile_state()
        step = ao.make_step(args.model, "train", args)
        ao.warm_up(step, args.warmup, 60.0)
        res["ms_per_step_repeats"] = ao.time_steps(step, args.steps, args.repeats)
    finally:
        if routing:
            routing.undo()
    ao.fresh_compile_state()

    # 2. coverage: auto mode and torch.profiler over the same steps
    from torch.profiler import ProfilerActivity, profile, schedule

    step = ao.make_step(args.model, "train", args)
    with sm_profiler.auto(ring=True, capacity=2**23, via_triton=via) as prof:
        for _ in range(args.warmup):
            step()
        torch.cuda.synchronize()
        sched = schedule(wait=0, warmup=0, active=args.profiled, repeat=1)
        # CPU too: its ProfilerStep#N annotations split the CUPTI rows into steps
        acts = [ProfilerActivity.CPU, ProfilerActivity.CUDA]
        with profile(activities=acts, schedule=sched) as tp:
            for _ in range(args.profiled):
                prof.step()
                step()
                tp.step()
            torch.cuda.synchronize()
        prof.step()
    table = prof.table()
    # steps 1..profiled are the profiled ones (the warm-up ran as step 0)
    shares = step_shares(table.select_steps(f"1-{args.profiled}").decode())
    res["records_share"] = float(statistics.median(shares["share"])) if shares else None
    res["records_steps"] = int(len(shares["steps"])) if shares else 0
    cov = sm_profiler.torch_coverage(tp, table)
    dev = cov["devices"][0]
    res["cupti_share"] = dev["share"]
    res["cupti_share_of_busy"] = dev["share_of_busy"]
    res["cupti_steps"] = len(dev["steps"])
    res["unseen"] = [
        {k: u[k] for k in ("name", "launches", "total_ns", "share")} for u in dev["unseen"][:6]
    ]
    res["kernels_recorded"] = sorted(set(table.kernel_names()))
    return res


def spawn(args, model: str, route: str, tmp: str) -> dict:
    cmd = [sys.executable, os.path.abspath(__file__), "--child", "--model", model]
    cmd += ["--route", route, "--tmp", tmp]
    for k in ("layers", "d_model", "heads", "kv_heads", "batch", "seq", "steps", "repeats"):
        cmd += [f"--{k.replace('_', '-')}", str(getattr(args, k))]
    cmd += ["--warmup", str(args.warmup), "--profiled", str(args.profiled)]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [REPO_ROOT, env.get("PYTHONPATH")]))
    try:
        p = subprocess.run(
            cmd, capture_output=True, text=True, env=env, timeout=args.child_timeout_s
        )
    except subprocess.TimeoutExpired:
        return {
            "model": model,
            "route": route,
            "error": f"timed out after {args.child_timeout_s} s",
        }
    for line in p.stdout.splitlines():
        if line.startswith(RESULT_PREFIX):
            return json.loads(line[len(RESULT_PREFIX) :])
    tail = [ln for ln in p.stderr.splitlines() if ln.strip()][-1:]
    return {"model": model, "route": route, "error": f"exit {p.returncode}: {tail}"}


def compare_outputs(runs: list[dict], tmp: str) -> None:
    import torch

    for r in runs:
        if r["route"] != "via_triton" or "error" in r:
            continue
        a, b = (os.path.join(tmp, f"{r['model']}_{x}.pt") for x in ROUTES)
        if os.path.exists(a) and os.path.exists(b):
            want, got = torch.load(a), torch.load(b)
            r["output_max_abs_diff_rel"] = float((got - want).abs().max() / want.abs().max())


def format_table(runs: list[dict]) -> list[str]:
    out = [
        f"{'model':<7}{'route':<12}{'ms/step':>9}{'vs default':>11}{'records':>9}{'CUPTI':>8}"
        f"{'of busy':>9}  outputs / unseen"
    ]
    base = {
        r["model"]: statistics.median(r["ms_per_step_repeats"])
        for r in runs
        if r["route"] == "default" and "error" not in r
    }
    for r in runs:
        lead = f"{r['model']:<7}{r['route']:<12}"
        if "error" in r:
            out.append(f"{lead}failed: {r['error']}")
            continue
        ms = statistics.median(r["ms_per_step_repeats"])
        vs = f"{100 * (ms / base[r['model']] - 1):+.1f}%" if r["model"] in base else "-"
        rec = f"{100 * r['records_share']:.1f}%" if r["records_share"] is not None else "-"
        note = ""
        if "output_max_abs_diff_rel" in r:
            note = f"max |diff| {r['output_max_abs_diff_rel']:.1e} of max |out|; "
        note += ", ".join(f"{u['name'][:28]} {100 * u['share']:.1f}%" for u in r["unseen"][:2])
        out.append(
            f"{lead}{ms:>9.3f}{vs:>11}{rec:>9}{100 * r['cupti_share']:>7.1f}%"
            f"{100 * r['cupti_share_of_busy']:>8.1f}%  {note}"
        )
    return out


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="llama,gpt,moe")
    add_model_shape_args(ap)
    ap.add_argument("--steps", type=int, default=20, help="steps per timed repeat")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--profiled", type=int, default=5, help="steps under both profilers")
    ap.add_argument("--child-timeout-s", dest="child_timeout_s", type=float, default=400.0)
    ap.add_argument("--quick", action="store_true", help="2 layers, d 512, batch 4 x 512")
    ap.add_argument("--json", default=None)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--model", default="llama", help=argparse.SUPPRESS)
    ap.add_argument("--route", default="default", help=argparse.SUPPRESS)
    ap.add_argument("--tmp", default="", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.quick:
        args.layers, args.d_model, args.heads, args.kv_heads = 2, 512, 8, 2
        args.batch, args.seq, args.steps, args.repeats = 4, 512, 5, 2
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.child:
        print(RESULT_PREFIX + json.dumps(run_child(args)), flush=True)
        return 0
    if no_cuda_gpu("auto_coverage"):
        return 0
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        for model in args.models.split(","):
            for route in ROUTES:
                r = spawn(args, model, route, tmp)
                print(
                    json.dumps({k: v for k, v in r.items() if k != "kernels_recorded"}), flush=True
                )
                runs.append(r)
        compare_outputs(runs, tmp)
    print("\n".join(format_table(runs)))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"config": vars(args), "runs": runs}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
