"""The runner behind `sm-profiler run`: a user's script (or `-m module`) run inside a profiler
region, and what the region recorded written at the end (docs/cli.md, "run").

    program = find_program(["train.py", "--steps", "20"])
    out_dir = output_folder("prof_out")     # checked, not created
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

from ..errors import CaptureError, ConfigError
from ..paths import atomic_output, check_writable

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


def output_folder(out: str) -> str:
    """The absolute path of the `--out` folder, checked before anything runs: an existing
    folder whose OUTPUTS can be written, or one that can be created. Creates nothing."""
    if not out:
        raise ConfigError("--out is empty: name a folder for the outputs, e.g. --out prof_out")
    if "\0" in out:
        raise ConfigError(f"--out {out!r} holds a NUL character: name a folder without one")
    folder = os.path.abspath(out)
    if os.path.isdir(folder):
        for name in OUTPUTS:
            try:
                check_writable(os.path.join(folder, name))
            except CaptureError as e:
                raise ConfigError(f"{e}; name another folder with --out") from None
        return folder
    if os.path.lexists(folder):
        raise ConfigError(
            f"--out {out!r} is a file, not a folder: name a folder (new or existing) for "
            + ", ".join(OUTPUTS)
        )
    parent = os.path.dirname(folder)
    while not os.path.isdir(parent):  # the root is a folder: this ends
        if os.path.lexists(parent):
            raise ConfigError(
                f"cannot create --out {out!r}: {parent!r} is not a folder; "
                "name a folder under an existing folder"
            )
        parent = os.path.dirname(parent)
    if not os.access(parent, os.W_OK | os.X_OK):
        raise ConfigError(
            f"cannot create --out {out!r}: no permission to write in {parent!r}; "
            "name a folder you can write to"
        )
    return folder


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
    """Print the kernel report of `prof` and write OUTPUTS into the folder `out_dir`, created
    here: only when there is something to write."""
    from .report import format_report

    trace = prof.decode()
    text = format_report(trace, width=width)
    print(text, end="")
    try:
        os.makedirs(out_dir, exist_ok=True)
    except OSError as e:
        raise CaptureError(f"cannot create {out_dir!r}: {e.strerror or e}") from e
    stats = os.path.join(out_dir, "auto_stats.txt")
    with atomic_output(stats) as tmp, open(tmp, "w", encoding="utf-8") as f:
        f.write(format_report(trace, width=100))
    prof.save(os.path.join(out_dir, "auto.npz"))
    prof.export(os.path.join(out_dir, "auto.perfetto-trace"))
    print(
        f"sm-profiler run: wrote {out_dir}/auto.npz, auto.perfetto-trace, auto_stats.txt "
        f"(open with: sm-profiler open {out_dir}/auto.perfetto-trace)"
    )
