"""`python -m benchmarks`: list the benchmarks, run one with its own options, or run them all.

    python -m benchmarks list
    python -m benchmarks run [--out DIR] NAME [ARGS...]
    python -m benchmarks run [--out DIR] all

A run first prints where it runs (benchmarks/env.py: device, driver, CUDA, versions, date, the
command that reproduces it), then the benchmark's own output. With `--out DIR` it also writes,
per benchmark, NAME.env.json (that record, the exit status, the wall time), NAME.log (the output)
and, for a benchmark that takes `--json`, its results as NAME.json.

Each benchmark runs in its own process (`python -m benchmarks.NAME ARGS`) with this checkout first
on PYTHONPATH: a crash in one (a CUDA fault, Proton's SIGFPE) cannot take the others with it, and
the runner itself never opens a CUDA context beside the one it times.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import os
import shlex
import subprocess
import sys
import time

from benchmarks import BENCHMARKS, NEEDS, Benchmark

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROG = "python -m benchmarks"


def _child_env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [REPO_ROOT, env.get("PYTHONPATH")]))
    env["PYTHONUNBUFFERED"] = "1"  # the output reaches the terminal and the log as it is printed
    return env


def read_environment(needs: tuple[str, ...]) -> dict:
    """benchmarks/env.py's record, taken in a separate process (so no CUDA context stays here)."""
    cmd = [sys.executable, "-m", "benchmarks.env", "--needs", ",".join(needs)]
    out = subprocess.run(cmd, capture_output=True, text=True, env=_child_env(), check=True)
    return json.loads(out.stdout)


def _module_missing(name: str, why: str):
    return lambda env: None if importlib.util.find_spec(name) else why


def _browser_missing(env: dict) -> str | None:
    from benchmarks.ui_load import missing

    return missing()


def _sm90_missing(env: dict) -> str | None:
    if env["device"] == "cpu":
        return "no CUDA GPU visible"
    return None if env.get("capability") == "9.0" else f"the GPU is sm_{env.get('capability')}"


# Each need of benchmarks.NEEDS: why this machine lacks it (from the environment record), or None.
NEED_CHECKS = {
    "gpu": lambda env: "no CUDA GPU visible" if env["device"] == "cpu" else None,
    "sm90": _sm90_missing,
    "cutedsl": _module_missing("cutlass", "nvidia-cutlass-dsl is not installed"),
    "cupy": _module_missing("cupy", "cupy is not installed"),
    "browser": _browser_missing,
}


def cannot_run(bench: Benchmark, env: dict) -> str | None:
    """Why `bench` cannot run on this machine, or None."""
    for need in bench.needs:
        why = NEED_CHECKS[need](env)
        if why:
            return f"needs {NEEDS[need]}: {why}"
    return None


def list_benchmarks() -> str:
    rows = [("name", "front end", "needs", "measures")]
    rows += [(b.name, b.front_end, ",".join(b.needs) or "-", b.summary) for b in BENCHMARKS]
    return "\n".join(f"{a:<23}{b:<11}{c:<13}{d}" for a, b, c, d in rows)


def run_one(bench: Benchmark, args: list[str], env: dict, out_dir: str | None) -> int:
    """Run `bench` with its own `args`; print (and under `out_dir` write) the record. Returns the
    benchmark's exit status."""
    # `run all` reads the versions every benchmark needs once; each record keeps its own.
    extra = {"cutedsl": ("cutedsl",), "cupy": ("cupy", "nvrtc")}
    drop = {k for need, keys in extra.items() if need not in bench.needs for k in keys}
    record = {k: v for k, v in env.items() if k not in drop}
    record["date"] = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    record["command"] = shlex.join([*PROG.split(), "run", bench.name, *args])
    argv = list(args)
    results = None
    if out_dir and bench.json_option and "--json" not in argv:
        results = f"{bench.name}.json"
        argv += ["--json", os.path.join(out_dir, results)]
    child = [sys.executable, "-m", f"benchmarks.{bench.name}", *argv]
    print(f"== {bench.name}: {bench.summary}")
    from benchmarks.env import describe

    print("\n".join("   " + line for line in describe(record).splitlines()), flush=True)
    t0 = time.perf_counter()
    if out_dir is None:
        status = subprocess.run(child, env=_child_env()).returncode
    else:
        with open(os.path.join(out_dir, f"{bench.name}.log"), "w") as log:
            p = subprocess.Popen(
                child, env=_child_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
            )
            for line in p.stdout:
                sys.stdout.write(line)
                sys.stdout.flush()
                log.write(line)
            status = p.wait()
    wall_s = time.perf_counter() - t0
    if out_dir is not None:
        doc = {
            "benchmark": bench.name,
            "summary": bench.summary,
            "environment": record,
            "argv": child[1:],
            "exit_status": status,
            "wall_s": round(wall_s, 3),
            "log": f"{bench.name}.log",
            "results": results,
        }
        with open(os.path.join(out_dir, f"{bench.name}.env.json"), "w") as f:
            json.dump(doc, f, indent=1)
    print(f"== {bench.name}: exit {status} after {wall_s:.1f} s", flush=True)
    return status


def run_all(env: dict, out_dir: str | None) -> int:
    """Every benchmark this machine can run, with its defaults; the others skipped, with why."""
    done = []
    for bench in BENCHMARKS:
        why = cannot_run(bench, env)
        if why:
            print(f"== {bench.name}: skipped, {why}", flush=True)
            done.append({"benchmark": bench.name, "status": "skipped", "why": why})
            continue
        t0 = time.perf_counter()
        status = run_one(bench, [], env, out_dir)
        done.append(
            {
                "benchmark": bench.name,
                "status": "ok" if status == 0 else f"exit {status}",
                "wall_s": round(time.perf_counter() - t0, 1),
            }
        )
    print("\n== summary")
    for d in done:
        detail = d["why"] if "why" in d else f"{d['wall_s']} s"
        print(f"   {d['benchmark']:<23}{d['status']:<9}{detail}")
    if out_dir is not None:
        with open(os.path.join(out_dir, "summary.json"), "w") as f:
            json.dump({"environment": env, "benchmarks": done}, f, indent=1)
    return 0 if all(d["status"] in ("ok", "skipped") for d in done) else 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="every benchmark: name, front end, what it needs, what it measures")
    run = sub.add_parser(
        "run",
        help="run one benchmark (its own options after its name) or all",
        usage=f"{PROG} run [--out DIR] NAME [ARGS...] | all",
    )
    run.add_argument("--out", metavar="DIR", help="also write the record, log and results here")
    run.add_argument("name", help="a benchmark's name (see `list`), or 'all'")
    run.add_argument("args", nargs=argparse.REMAINDER, help="the benchmark's own options")
    a = ap.parse_args(argv)
    if a.command == "list":
        print(list_benchmarks())
        return 0
    benches = {b.name: b for b in BENCHMARKS}
    if a.name != "all" and a.name not in benches:
        ap.error(f"no benchmark named {a.name!r}; choose one of: {', '.join(benches)}, or all")
    if a.name == "all" and a.args:
        ap.error("run all takes no benchmark options (each runs with its defaults)")
    if a.out:
        os.makedirs(a.out, exist_ok=True)
    needs = sorted(
        {n for b in BENCHMARKS for n in b.needs} if a.name == "all" else set(benches[a.name].needs)
    )
    env = read_environment(tuple(needs))
    if a.name == "all":
        return run_all(env, a.out)
    why = cannot_run(benches[a.name], env)
    if why:
        print(f"{PROG}: cannot run {a.name} here: {why}", file=sys.stderr)
        return 2
    return run_one(benches[a.name], a.args, env, a.out)
