"""`sm-profiler ARGS` run as a user runs it, in a Python process of its own: a crash or a hang is
seen, not inherited by the test's process."""

from __future__ import annotations

import os
import subprocess
import sys


def run_cli(
    *args, timeout: float = 60, memory_bytes: int | None = None, env: dict | None = None
) -> subprocess.CompletedProcess:
    """`python -m sm_profiler ARGS` (each argument str()'d); its returncode, stdout, stderr.
    memory_bytes: the process's address space (RLIMIT_AS), numpy's threads one: a MemoryError
    there is a traceback in its stderr, not the test's. env: variables set for it."""
    limit = None
    env = None if env is None else dict(os.environ, **env)
    if memory_bytes is not None:
        one = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
        env = dict(env or os.environ, **dict.fromkeys(one, "1"))

        def limit() -> None:
            import resource

            resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))

    return subprocess.run(
        [sys.executable, "-m", "sm_profiler", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        preexec_fn=limit,
    )
