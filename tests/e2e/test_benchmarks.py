"""The benchmark suite's runner (`python -m benchmarks`): every module listed and declared, the
benchmarks independent of each other, a host benchmark run end to end on the CPU with its
environment record."""

from __future__ import annotations

import ast
import glob
import json
import os
import subprocess
import sys

import pytest

import benchmarks
from benchmarks import env, runner

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(benchmarks.__file__)))
FOLDER = os.path.join(ROOT, "benchmarks")
NAMES = [b.name for b in benchmarks.BENCHMARKS]


def modules() -> list[str]:
    """The modules in benchmarks/, by name (the package's own __init__ and __main__ left out)."""
    names = [os.path.basename(p)[:-3] for p in glob.glob(os.path.join(FOLDER, "*.py"))]
    return sorted(n for n in names if n not in ("__init__", "__main__"))


def tree(name: str) -> ast.Module:
    with open(os.path.join(FOLDER, f"{name}.py"), encoding="utf-8") as f:
        return ast.parse(f.read())


def suite(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "benchmarks", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_every_module_is_a_declared_benchmark_or_shared():
    assert len(NAMES) == len(set(NAMES))
    assert sorted(NAMES + list(benchmarks.SHARED)) == modules()
    for b in benchmarks.BENCHMARKS:
        assert b.summary and b.front_end, b.name
        assert set(b.needs) <= set(benchmarks.NEEDS), b.name
    assert set(runner.NEED_CHECKS) == set(benchmarks.NEEDS)


def test_list_names_every_benchmark_with_its_needs():
    out = suite("list")
    assert out.returncode == 0, out.stderr
    lines = {ln.split()[0]: ln for ln in out.stdout.splitlines()[1:]}
    assert sorted(lines) == sorted(NAMES)
    for b in benchmarks.BENCHMARKS:
        assert b.summary in lines[b.name]
        assert (",".join(b.needs) or "-") in lines[b.name].split()


def test_every_benchmark_has_its_own_command_line():
    for name in NAMES:
        t = tree(name)
        defs = {n.name for n in t.body if isinstance(n, ast.FunctionDef)}
        assert "main" in defs, name
        guard = [n for n in t.body if isinstance(n, ast.If) and "__main__" in ast.unparse(n.test)]
        assert guard, f"{name} has no `if __name__ == '__main__'`"


def test_benchmarks_import_shared_modules_only():
    # From this package only the shared modules; no module of benchmarks/ found by its bare name
    # (the scripts' folder on sys.path), and no private (_name) import from the package. The
    # runner is left out: it asks ui_load what that benchmark needs.
    for name in (m for m in modules() if m != "runner"):
        for node in ast.walk(tree(name)):
            if isinstance(node, ast.ImportFrom) and node.module:
                parts = node.module.split(".")
                if parts[0] == "benchmarks" and len(parts) > 1:
                    assert parts[1] in benchmarks.SHARED, (name, node.module)
                    assert not any(a.name.startswith("_") for a in node.names), (name, node.module)
                assert parts[0] not in modules(), (name, node.module)
            elif isinstance(node, ast.Import):
                for a in node.names:
                    parts = a.name.split(".")
                    assert parts[0] not in modules(), (name, a.name)
                    if parts[0] == "benchmarks" and len(parts) > 1:
                        assert parts[1] in benchmarks.SHARED, (name, a.name)


def test_environment_record_has_every_key():
    rec = env.environment("python -m benchmarks run host", needs=("cutedsl",))
    assert set(env.KEYS) <= set(rec)
    assert rec["command"] == "python -m benchmarks run host"
    assert rec["python"] and rec["numpy"] and rec["triton"] and rec["date"].endswith("Z")
    assert "cutedsl" in rec  # the CuteDSL version where a benchmark needs it (None without it)
    assert rec["device"] == "cpu" or rec["gpus"] >= 1
    text = env.describe(rec)
    assert f"device {rec['device']}" in text and "command: python -m benchmarks run host" in text


def test_run_host_on_the_cpu_writes_the_record_beside_the_log(tmp_path):
    out = suite(
        "run", "--out", str(tmp_path), "host", "--events", "20000", "--lanes", "64", "--repeat", "1"
    )
    assert out.returncode == 0, out.stdout + out.stderr
    # The record printed first, then the benchmark's own table.
    assert out.stdout.startswith("== host: ")
    assert (
        "command: python -m benchmarks run host --events 20000 --lanes 64 --repeat 1" in out.stdout
    )
    assert "decode + Perfetto export" in out.stdout and "peak memory" in out.stdout
    doc = json.loads((tmp_path / "host.env.json").read_text())
    assert doc["exit_status"] == 0 and doc["benchmark"] == "host"
    assert set(env.KEYS) <= set(doc["environment"])
    assert doc["environment"]["command"].endswith("run host --events 20000 --lanes 64 --repeat 1")
    assert "decode + Perfetto export" in (tmp_path / doc["log"]).read_text()


def test_run_refuses_an_unknown_name_and_says_which_exist():
    out = suite("run", "no_such_benchmark")
    assert out.returncode == 2
    assert "no benchmark named 'no_such_benchmark'" in out.stderr and "host" in out.stderr


def test_a_benchmark_this_machine_cannot_run_is_skipped_with_why():
    cpu = {"device": "cpu", "capability": None}
    gpu_only = next(b for b in benchmarks.BENCHMARKS if b.needs == ("gpu",))
    assert runner.cannot_run(gpu_only, cpu) == "needs a CUDA GPU: no CUDA GPU visible"
    hopper = next(b for b in benchmarks.BENCHMARKS if "sm90" in b.needs)
    assert "sm_8.0" in runner.cannot_run(hopper, {"device": "A100", "capability": "8.0"})
    assert runner.cannot_run(hopper, {"device": "H100", "capability": "9.0"}) is None
    host_only = [b for b in benchmarks.BENCHMARKS if not b.needs]
    assert host_only and all(runner.cannot_run(b, cpu) is None for b in host_only)


def test_run_of_a_gpu_benchmark_on_the_cpu_says_why_not():
    if env.environment()["device"] != "cpu":
        pytest.skip("this machine has a GPU")
    out = suite("run", "device_overhead")
    assert out.returncode == 2
    assert "cannot run device_overhead here: needs a CUDA GPU" in out.stderr
