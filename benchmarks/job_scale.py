"""A job of R ranks read whole: `stats DIR`, `advise DIR --json`, `merge DIR`, `query DIR` and
`diff DIR DIR --json` over folders of R rank files, their wall time and peak memory (issue 57, item 5).

You will see how the commands that read a job's folder grow with its ranks: each runs in a
process of its own, as a user runs it (`python -m sm_profiler ...`), over a folder that
benchmarks/job_folders.py writes (realistic rank files: 132 SMs, 3 steps, 60 launches a step of
20 kernels, ~155,000 programs and 7.5 MB a rank, one rank slow in two kernels), and is measured:

    wall     seconds from start to exit
    peak     the process's peak resident memory (os.wait4's ru_maxrss of that one child)
    trace    the size of what `merge DIR -o X` writes
    named    whether the output names the planted slow rank (stats: its "slowest: rank N" line
             and a planted kernel on it; advise: its slow_rank finding and a planted kernel; merge:
             "rank N" anywhere in what it prints; query: the first row of QUERY, each rank's
             launches' time, largest first; diff, of the folder against itself: BEFORE's
             slow_rank finding)

Each folder's ranks are summarized first (`sm-profiler summarize DIR`, what each rank's `run`
writes beside its file on its own node; timed apart), so stats and advise read the summaries;
--no-summaries leaves them out (the records path: each rank's records read in a worker).
Peak memory is the child's own (wait4: the largest process of its tree it waited for, not their
sum). A command that fails (or, for query, is not there yet) shows its first line of error
instead.
Folders are written under --workdir and deleted after each R unless --keep; --dir measures a
folder made before (its job_folders.json says which rank is slow) instead of writing one.

Run:  python -m benchmarks run job_scale --ranks 8,32,128 [--commands stats,advise,merge,query]
          [--programs-scale F] [--workdir DIR] [--keep] [--dir DIR] [--json PATH]
"""

# %%
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

from benchmarks import job_folders

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COMMANDS = ("stats", "advise", "merge", "query", "diff")
# A question across ranks: each rank's launches' time, largest first.
QUERY = (
    "SELECT rank, sum(end_ns - start_ns) AS launches_ns, count(*) AS launches FROM launches "
    "GROUP BY rank ORDER BY launches_ns DESC LIMIT 5"
)


# -- one command -----------------------------------------------------------------------------


def measure(args: list[str], out_dir: str, timeout_s: float) -> dict:
    """`python -m sm_profiler ARGS` in a process of its own: its exit status, wall seconds, peak
    resident bytes (its own, from os.wait4), stdout and stderr."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [REPO_ROOT, env.get("PYTHONPATH")]))
    out_path, err_path = os.path.join(out_dir, "stdout"), os.path.join(out_dir, "stderr")
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        t0 = time.perf_counter()
        p = subprocess.Popen(
            [sys.executable, "-m", "sm_profiler", *args], stdout=out, stderr=err, env=env,
            cwd=REPO_ROOT,
        )  # fmt: skip
        status, usage, timed_out = _wait(p, timeout_s)
        wall_s = time.perf_counter() - t0
    with open(out_path, encoding="utf-8", errors="replace") as f:
        stdout = f.read()
    with open(err_path, encoding="utf-8", errors="replace") as f:
        stderr = f.read()
    return {
        "rc": None if timed_out else os.waitstatus_to_exitcode(status),
        "wall_s": wall_s,
        "peak_bytes": usage.ru_maxrss * 1024,  # Linux gives KiB
        "stdout": stdout,
        "stderr": stderr,
        "timed_out": timed_out,
    }


def _wait(p: subprocess.Popen, timeout_s: float):
    """(wait status, rusage, timed out) of `p`, killed after timeout_s."""
    deadline = time.monotonic() + timeout_s
    while True:
        pid, status, usage = os.wait4(p.pid, os.WNOHANG)
        if pid:
            p.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
            return status, usage, False
        if time.monotonic() > deadline:
            p.kill()
            _, status, usage = os.wait4(p.pid, 0)
            p.returncode = -9
            return status, usage, True
        time.sleep(0.05)


# -- what each command should name ------------------------------------------------------------


def stats_names(out: str, slow: int, kernels) -> tuple[bool, int]:
    """(the report's slowest rank is `slow`, how many of `kernels` its line names)."""
    m = re.search(r"slowest: rank (\d+)(.*?)\n\n", out + "\n\n", re.S)
    if not m:
        return False, 0
    text = " ".join(m.group(2).split())
    return int(m.group(1)) == slow, sum(k in text for k in kernels)


def advise_names(out: str, slow: int, kernels) -> tuple[bool, int]:
    """(advise --json has a slow_rank finding of rank `slow`, how many of `kernels` it names)."""
    try:
        doc = json.loads(out)
    except ValueError:
        return False, 0
    for f in doc.get("findings", []):
        if f.get("kind") == "slow_rank":
            named = {k.get("kernel") for k in f.get("evidence", {}).get("kernels", [])}
            return f.get("rank") == slow, len(named & set(kernels))
    return False, 0


def merge_names(out: str, slow: int, kernels) -> tuple[bool, int]:
    return re.search(rf"\brank {slow}\b", out) is not None, sum(k in out for k in kernels)


def query_names(out: str, slow: int, kernels) -> tuple[bool, int]:
    """(the first row of QUERY's answer is rank `slow`, 0)."""
    lines = [ln for ln in out.splitlines() if ln.strip()]
    if len(lines) < 2 or not lines[1].split()[0].isdigit():
        return False, 0
    return int(lines[1].split()[0]) == slow, 0


def diff_names(out: str, slow: int, kernels) -> tuple[bool, int]:
    """(diff --json compares BEFORE's slow_rank finding, of rank `slow`; 0)."""
    try:
        doc = json.loads(out)
    except ValueError:
        return False, 0
    ranks = [f.get("rank") for f in doc.get("findings", []) if f.get("kind") == "slow_rank"]
    return bool(ranks) and ranks[0] == slow, 0


NAMES = {
    "stats": stats_names,
    "advise": advise_names,
    "merge": merge_names,
    "query": query_names,
    "diff": diff_names,
}


def command_args(name: str, folder: str, trace: str, sql: str) -> list[str]:
    return {
        "stats": ["stats", folder],
        "advise": ["advise", folder, "--json"],
        "merge": ["merge", folder, "-o", trace],
        "query": ["query", folder, sql],
        "diff": ["diff", folder, folder, "--json"],
    }[name]


def run_command(name: str, folder: str, slow: int, kernels, work: str, a) -> dict:
    trace = os.path.join(work, f"job.{name}.perfetto-trace")
    m = measure(command_args(name, folder, trace, a.sql), work, a.timeout)
    r = {k: m[k] for k in ("rc", "wall_s", "peak_bytes", "timed_out")}
    if m["rc"] == 0:
        # advise and diff --json's answer is their stdout alone (notes go to stderr)
        said = m["stdout"] if name in ("advise", "diff") else m["stdout"] + m["stderr"]
        r["named_rank"], r["named_kernels"] = NAMES[name](said, slow, kernels)
    else:
        lines = (m["stderr"] or m["stdout"]).strip().splitlines() or ["(no output)"]
        r["error"] = "timed out" if m["timed_out"] else lines[-1][:200]
    if os.path.exists(trace):
        r["trace_bytes"] = _size(trace)
        _remove(trace)
    return r


def _size(path: str) -> int:
    if os.path.isdir(path):
        return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs)
    return os.path.getsize(path)


def _remove(path: str) -> None:
    shutil.rmtree(path) if os.path.isdir(path) else os.remove(path)


# -- one folder ------------------------------------------------------------------------------

MADE_FILE = "job_folders.json"  # beside the rank files: what job_folders made them with


def bench_folder(folder: str, made: dict, a) -> dict:
    """Every command of a.commands over `folder` (made by job_folders as `made` says)."""
    row = {**made, "commands": {}}
    with tempfile.TemporaryDirectory(dir=a.workdir) as work:
        for name in a.commands:
            r = run_command(name, folder, made["slow_rank"], made["slow_kernels"], work, a)
            row["commands"][name] = r
            print(f"  {name:<7}{cell(r, name)}", flush=True)
    return row


def generate(ranks: int, a) -> tuple[str, dict]:
    """A fresh folder of `ranks` rank files under a.workdir, and what made it."""
    folder = tempfile.mkdtemp(prefix=f"job{ranks}.", dir=a.workdir)
    made = job_folders.make_job_folder(
        folder, ranks, programs_scale=a.programs_scale, seed=a.seed, workers=a.workers
    )
    print(made.describe(), flush=True)
    summarize_s = None
    if not a.no_summaries:
        # What each rank's `sm-profiler run` writes beside its file on its own node (timed
        # apart: here one machine does every rank's).
        t0 = time.perf_counter()
        cmd = [sys.executable, "-m", "sm_profiler", "summarize", folder]
        subprocess.run(cmd, check=True, capture_output=True)
        summarize_s = time.perf_counter() - t0
        print(f"  summarized every rank in {summarize_s:.1f} s", flush=True)
    info = {
        "summarize_s": summarize_s,
        "ranks": ranks,
        "slow_rank": made.slow_rank,
        "slow_kernels": list(made.slow_kernels),
        "programs_per_rank": made.programs_per_rank,
        "files_bytes": made.bytes,
        "programs_scale": a.programs_scale,
        "seed": a.seed,
        "generate_s": made.seconds,
    }
    with open(os.path.join(folder, MADE_FILE), "w") as f:
        json.dump(info, f)
    return folder, info


def given(folder: str) -> dict:
    """What a folder made before says of itself (job_folders.json)."""
    path = os.path.join(folder, MADE_FILE)
    if not os.path.exists(path):
        sys.exit(f"job_scale: {folder} has no {MADE_FILE}: make it with job_scale --keep")
    with open(path) as f:
        return json.load(f)


# -- the table -------------------------------------------------------------------------------


def cell(r: dict | None, name: str) -> str:
    """'2.2 s, 208 MB ✓' (✓: names the slow rank, ✗: does not; the trace's size for merge), or
    the error's line."""
    if r is None:
        return "-"
    if "error" in r:
        why = r["error"].removeprefix("sm-profiler: error: ")
        return f"({why[:57] + '...' if len(why) > 60 else why})"
    mark = "✓" if r["named_rank"] else "✗"
    if name in ("stats", "advise") and r["named_rank"]:
        mark += f"{r['named_kernels']}"
    return f"{r['wall_s']:.1f} s, {_mb(r['peak_bytes'])} {mark}"


def _mb(n: float) -> str:
    return f"{n / 1e9:.1f} GB" if n >= 1e9 else f"{n / 1e6:.0f} MB"


def table(rows: list[dict], commands) -> str:
    """One line per folder, the largest (the worst) first."""
    heads = ["ranks", "files", *[f"`{c} DIR`" for c in commands]]
    if "merge" in commands:
        heads.append("its trace")
    lines = []
    for row in sorted(rows, key=lambda r: -r["ranks"]):
        c = row["commands"]
        cells = [f"{row['ranks']:,}", _mb(row["files_bytes"])]
        cells += [cell(c.get(n), n) for n in commands]
        if "merge" in commands:
            tb = c.get("merge", {}).get("trace_bytes")
            cells.append(_mb(tb) if tb else "-")
        lines.append(cells)
    widths = [max(len(x[i]) for x in [heads, *lines]) for i in range(len(heads))]
    out = ["  ".join(h.ljust(w) for h, w in zip(heads, widths, strict=True))]
    out += ["  ".join(v.ljust(w) for v, w in zip(x, widths, strict=True)) for x in lines]
    out.append(
        "  (wall time, peak memory; ✓N: names the planted slow rank and N of its 2 slow kernels, "
        "✗: does not name it)"
    )
    return "\n".join(out)


# %%
def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ranks", default="8,32", help="comma-separated R, e.g. 8,32,128,1024")
    ap.add_argument("--commands", default=",".join(COMMANDS), help="of " + ", ".join(COMMANDS))
    ap.add_argument("--programs-scale", type=float, default=1.0, help="each rank's grids x F")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workers", type=int, default=None, help="writing files (default: cores)")
    ap.add_argument("--workdir", default=None, help="where folders go (default: the temp dir)")
    ap.add_argument("--dir", default=None, help="measure this folder (made with --keep) only")
    ap.add_argument("--keep", action="store_true", help="keep the folders (printed)")
    ap.add_argument(
        "--no-summaries",
        action="store_true",
        help="leave the ranks' summaries out (run writes them; without, records are read)",
    )
    ap.add_argument("--sql", default=QUERY, help="the query DIR question")
    ap.add_argument("--timeout", type=float, default=3600, help="seconds a command may take")
    ap.add_argument("--json", default=None, help="write the results here")
    a = ap.parse_args(argv)
    a.commands = [c for c in a.commands.split(",") if c]
    bad = [c for c in a.commands if c not in COMMANDS]
    if bad:
        sys.exit(f"job_scale: --commands {bad[0]!r}: pick of {', '.join(COMMANDS)}")
    if a.workdir:
        os.makedirs(a.workdir, exist_ok=True)
    rows = []
    if a.dir:
        rows.append(bench_folder(a.dir, given(a.dir), a))
    else:
        for ranks in [int(x) for x in a.ranks.split(",") if x]:
            folder, made = generate(ranks, a)
            try:
                rows.append(bench_folder(folder, made, a))
            finally:
                if a.keep:
                    print(f"  kept {folder}")
                else:
                    shutil.rmtree(folder)
    print(table(rows, a.commands))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
