"""The runner behind `sm-profiler run`: a user's script (or `-m module`) run inside a profiler
region, and what the region recorded written at the end (docs/cli.md, "run").

    program = find_program(["train.py", "--steps", "20"])
    status = run_program(program, region)   # any context manager: auto mode's, or a test's fake
    write_outputs(prof, out_dir, width)     # the report, auto.npz, auto.perfetto-trace, ...
"""

from __future__ import annotations

import os
import runpy
import sys
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass

from ..errors import ConfigError

OUTPUTS = ("auto.npz", "auto.perfetto-trace", "auto_stats.txt")


@dataclass(frozen=True)
class Program:
    """What `sm-profiler run` runs: a script's path or a module's name, and its arguments."""

    args: tuple[str, ...] = ()
    script: str | None = None
    module: str | None = None


def find_program(command: Sequence[str]) -> Program:
    """The program of `sm-profiler run -- SCRIPT [ARGS]` (or `-- -m MODULE [ARGS]`)."""
    argv = list(command)
    if argv and argv[0] == "--":
        argv = argv[1:]
    if not argv or (argv[0] == "-m" and len(argv) < 2):
        raise ConfigError(
            "sm-profiler run needs a script: sm-profiler run [options] -- "
            "train.py [args] (or -m package.module [args])"
        )
    if argv[0] == "-m":
        return Program(module=argv[1], args=tuple(argv[2:]))
    if not os.path.isfile(argv[0]):
        raise ConfigError(f"no script {argv[0]!r}: give the path of a Python file")
    return Program(script=argv[0], args=tuple(argv[1:]))


def run_program(program: Program, region: AbstractContextManager) -> int:
    """Run `program` inside `with region:`; return its exit status."""
    old_argv, status = sys.argv, 0
    name = program.module or program.script
    sys.argv = [name, *program.args]
    try:
        with region:
            try:
                if program.module:
                    runpy.run_module(program.module, run_name="__main__", alter_sys=True)
                else:
                    sys.path.insert(0, os.path.dirname(os.path.abspath(program.script)))
                    runpy.run_path(program.script, run_name="__main__")
            except SystemExit as e:
                status = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
            except Exception:  # the script failed: say so, keep what it recorded until then
                import traceback

                traceback.print_exc()
                status = 1
                print(
                    "sm-profiler run: the script raised; writing what it recorded", file=sys.stderr
                )
    finally:
        sys.argv = old_argv
    return status


def profile(program: Program, prof, out_dir: str, width: int | None = None) -> int:
    """Run `program` in the auto region `prof`, then write what it recorded into `out_dir`;
    return the program's exit status (1 if it succeeded but nothing was recorded)."""
    status = run_program(program, prof)
    if not prof.captures():
        print(
            "sm-profiler run: no instrumented kernel ran; " + " ".join(prof.notes), file=sys.stderr
        )
        return status or 1
    write_outputs(prof, out_dir, width)
    return status


def write_outputs(prof, out_dir: str, width: int | None) -> None:
    """Print the kernel report of `prof` and write OUTPUTS into the folder `out_dir`."""
    from .report import format_report

    trace = prof.decode()
    text = format_report(trace, width=width)
    print(text, end="")
    with open(os.path.join(out_dir, "auto_stats.txt"), "w") as f:
        f.write(format_report(trace, width=100))
    prof.save(os.path.join(out_dir, "auto.npz"))
    prof.export(os.path.join(out_dir, "auto.perfetto-trace"))
    print(
        f"sm-profiler run: wrote {out_dir}/auto.npz, auto.perfetto-trace, auto_stats.txt "
        f"(open with: sm-profiler open {out_dir}/auto.perfetto-trace)"
    )
