"""A stop signal while the GPU is stuck (issue 54, item 1), on a GPU: `sm-profiler run --steps
2-3` of a training loop that, at step 6, queues a kernel that never ends and waits for it in
torch.cuda.synchronize() (tests/support/auto_stuck.py); SIGTERM 3 s later. The main thread runs
no handler, so the watcher writes from its own thread after its grace (8 s): its copy runs on a
stream of its own while the kernel spins, and the recorded steps are written, whole, within
15 s of the signal, exit status 143. Run with -s to see the run's messages."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
import torch
from repo_paths import SUPPORT

from sm_profiler.wire.capture import load

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]


def _stuck_run(tmp_path, kind: str):
    """(seconds from SIGTERM to the process's end, exit status, stdout, stderr) of the run."""
    out = tmp_path / "o"
    cmd = [sys.executable, "-m", "sm_profiler", "run", "--steps", "2-3", "--out", str(out)]
    cmd += ["--width", "80", "--", os.path.join(SUPPORT, "auto_stuck.py"), kind]
    env = {k: v for k, v in os.environ.items() if k != "SM_PROFILER_STOP_GRACE_S"}
    stdout, stderr = tmp_path / "stdout", tmp_path / "stderr"
    with open(stdout, "w") as o, open(stderr, "w") as e:
        p = subprocess.Popen(cmd, stdout=o, stderr=e, text=True, env=env)
    try:
        deadline = time.monotonic() + 600  # the compile and steps 0-5, then the stuck kernel
        while "stuck" not in stdout.read_text() and p.poll() is None:
            assert time.monotonic() < deadline, stderr.read_text()[-3000:]
            time.sleep(0.2)
        assert p.poll() is None, stderr.read_text()[-3000:]
        time.sleep(3)
        t0 = time.monotonic()
        p.send_signal(signal.SIGTERM)
        p.wait(timeout=60)
        took = time.monotonic() - t0
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    err = stderr.read_text()
    print(f"{kind}: ended {took:.1f} s after SIGTERM\n{err[-3000:]}")
    return took, p.returncode, stdout.read_text(), err


@pytest.mark.parametrize("kind", ["sleep", "spin"])
def test_a_stop_signal_while_the_gpu_is_stuck_writes_the_recorded_steps(tmp_path, kind):
    took, returncode, stdout, stderr = _stuck_run(tmp_path, kind)
    assert returncode == 128 + signal.SIGTERM, stderr[-3000:]
    assert took < 15, stderr[-3000:]
    assert "the main thread ran no Python within 8 s" in stderr
    assert "writing what it recorded from another thread" in stderr
    table = load(tmp_path / "o" / "auto.npz")
    L = table.launches
    assert set(L["step"].tolist()) == {2, 3}
    assert (L["rows"] == L["grid_x"] * L["grid_y"] * L["grid_z"]).all()  # every program's record
    assert table.counts()["unwritten"] == 0 and table.counts()["dropped"] == 0
    assert (table.rows["end_ns"] >= table.rows["start_ns"]).all()
    assert "rescue" not in table.metadata  # every record read: no note of what was missed
    for name in ("auto.perfetto-trace", "auto_stats.txt"):
        assert (tmp_path / "o" / name).stat().st_size > 0
