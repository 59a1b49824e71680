"""Running the compile probes (tests/support/*_probe.py) and comparing the PTX they print.

A probe compiles kernels for the GPU on the CPU in a subprocess without TRITON_INTERPRET: the
ops choose their GPU path when they are imported, so a probe must not share a process with the
interpreter tests. No triton import here.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def run_probe(script: str, timeout_s: int = 600) -> dict:
    """The JSON a probe script in tests/support prints."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    out = subprocess.run(
        [sys.executable, os.path.join(HERE, script)],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout_s,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout)


def strip_names(ptx: str, kernel: str, skip: tuple[str, ...] = (".loc", ".file")) -> str:
    """PTX without what differs between two kernels of one body: the kernel's name (`kernel`, a
    regex; also with a `plain_` prefix), lines starting with `skip` (source lines, file names),
    spacing, and the debug sections (which spell names and the source file's path)."""
    ptx = ptx.split(".section\t.debug")[0].split(".section .debug")[0]
    ptx = re.sub(rf"\b(plain_)?{kernel}(?=\b|_param)", "KERNEL", ptx)
    lines = [ln for ln in ptx.splitlines() if not ln.strip().startswith(skip)]
    return "\n".join(" ".join(ln.split()) for ln in lines)
