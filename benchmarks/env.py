"""The record of where a benchmark ran: device, driver, CUDA, library versions, date, command.

Every number in BENCHMARKS.md names its device and versions; this is where a run gets them.
`python -m benchmarks.env` prints the record as JSON: the runner reads it from a separate
process, so that the runner itself never holds a CUDA context on the GPU it times.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import json
import os
import platform
import shlex
import subprocess
import sys

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The keys every record has (None where this machine has no such thing, e.g. no GPU driver).
KEYS = (
    "date",
    "command",
    "device",
    "gpus",
    "capability",
    "driver",
    "cuda",
    "torch",
    "triton",
    "numpy",
    "python",
    "platform",
    "commit",
)


def no_cuda_gpu(name: str) -> bool:
    """True, saying so (`name: ... nothing to measure`), where torch is missing or sees no CUDA
    GPU: a GPU benchmark then exits 0 with nothing measured, as `run all` expects on a CPU."""
    try:
        import torch
    except ImportError:
        print(f"{name}: torch is not installed; nothing to measure")
        return True
    if not torch.cuda.is_available():
        print(f"{name}: no CUDA GPU visible; nothing to measure")
        return True
    return False


def add_model_shape_args(ap: argparse.ArgumentParser) -> None:
    """The benchmark models' shape (auto_overhead's GPT-, Llama- and MoE-style stacks), as the
    model benchmarks (auto_overhead, auto_coverage, fix_first) all take it."""
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--d-model", dest="d_model", type=int, default=1024)
    ap.add_argument("--heads", type=int, default=16, help="attention (query) heads")
    ap.add_argument("--kv-heads", dest="kv_heads", type=int, default=4, help="llama's k/v heads")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=1024, help="tokens per sequence")


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def _driver() -> str | None:
    """The NVIDIA driver's version, from nvidia-smi (torch does not report it)."""
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = out.stdout.split()
    return lines[0] if out.returncode == 0 and lines else None


def _commit() -> str | None:
    """This checkout's commit, with "+dirty" when files differ from it."""
    try:
        head = subprocess.run(
            ["git", "-C", REPO_ROOT, "rev-parse", "--short=12", "HEAD"],
            capture_output=True,
            text=True,
            timeout=30,
        )
        dirty = subprocess.run(
            ["git", "-C", REPO_ROOT, "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if head.returncode != 0:
        return None
    return head.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


def environment(command: str | None = None, needs: tuple[str, ...] = ()) -> dict:
    """Where and with what a run happens. `command` is the command line to record (this
    process's by default); `needs` (keys of benchmarks.NEEDS) adds the versions those bring:
    CuteDSL for "cutedsl", CuPy and its NVRTC for "cupy"."""
    rec = dict.fromkeys(KEYS)
    rec["date"] = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    rec["command"] = command or shlex.join([os.path.basename(sys.executable), *sys.argv])
    rec["python"] = platform.python_version()
    rec["platform"] = platform.platform()
    rec["numpy"] = _version("numpy")
    rec["triton"] = _version("triton")
    rec["commit"] = _commit()
    rec["device"], rec["gpus"] = "cpu", 0
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None:
        rec["torch"] = torch.__version__
        if torch.cuda.is_available():
            props = torch.cuda.get_device_properties(0)
            rec["device"], rec["gpus"] = props.name, torch.cuda.device_count()
            rec["sms"] = props.multi_processor_count
            rec["capability"] = f"{props.major}.{props.minor}"
            rec["cuda"] = torch.version.cuda
            rec["driver"] = _driver()
    if "cutedsl" in needs:
        rec["cutedsl"] = _version("nvidia-cutlass-dsl")
    if "cupy" in needs:
        rec["cupy"] = None
        try:
            import cupy

            rec["cupy"] = cupy.__version__
            major, minor = cupy.cuda.nvrtc.getVersion()
            rec["nvrtc"] = f"{major}.{minor}"
        except Exception as e:  # noqa: BLE001 (no CuPy, or no CUDA for its NVRTC: say which)
            rec["nvrtc"] = f"unavailable ({type(e).__name__})"
    return rec


def describe(rec: dict) -> str:
    """The record as two short lines for a run's output."""

    def v(key):
        return rec.get(key) or "-"

    extra = "".join(f" | {k} {rec[k]}" for k in ("cutedsl", "cupy", "nvrtc") if k in rec)
    return (
        f"device {v('device')} | driver {v('driver')} | CUDA {v('cuda')} | torch {v('torch')}"
        f" | triton {v('triton')} | python {v('python')} | numpy {v('numpy')}{extra}\n"
        f"date {v('date')} | commit {v('commit')} | command: {v('command')}"
    )


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--command", default=None, help="the command line to record")
    ap.add_argument("--needs", default="", help="comma-separated keys of benchmarks.NEEDS")
    args = ap.parse_args(argv)
    needs = tuple(n for n in args.needs.split(",") if n)
    json.dump(environment(args.command, needs), sys.stdout)
    print()


if __name__ == "__main__":
    main()
