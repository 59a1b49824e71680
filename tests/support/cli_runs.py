"""`sm-profiler ARGS` run as a user runs it, in a Python process of its own: a crash or a hang is
seen, not inherited by the test's process."""

from __future__ import annotations

import subprocess
import sys


def run_cli(*args, timeout: float = 60) -> subprocess.CompletedProcess:
    """`python -m sm_profiler ARGS` (each argument str()'d); its returncode, stdout, stderr."""
    return subprocess.run(
        [sys.executable, "-m", "sm_profiler", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
