"""The flight recorder on a GPU (issue 54, "Done when", one GPU): `sm-profiler run
--flight-recorder` of a loop of Triton kernels (tests/support/auto_flight.py). A planted slow
step (an extra 2x of work in step 137 of 200) writes exactly one dump, holding step 137 and the
7 before it, whose report names step 137 and the kernel that grew; a Triton kernel spinning on
a flag at step 90 gives a stall dump within T + 15 s naming it in flight and the last kernel
that ended, and SIGTERM then writes the ring too (exit 143); with torch.cuda._sleep stuck, the
dump names the last instrumented kernel that ended and nothing of ours in flight; an exception
writes the ring; SIGUSR1 writes it and the run finishes. Each asserts decoded content. Run with
-s to see the runs' messages; the file takes about two minutes."""

from __future__ import annotations

import glob
import os
import re
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import torch
from repo_paths import SUPPORT

from sm_profiler.report.dump import gpu_state
from sm_profiler.wire.capture import load

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]
STALL_S = 3  # --stall-s: the stall dump's T
# The runs that test another trigger: no slow-step dump (their short steps are paced by the host,
# whose jitter is a good share of them).
NOT_SLOW = ("--slow-factor", "100")


class Run:
    """`sm-profiler run --flight-recorder OPTIONS --out DIR -- auto_flight.py MODE` in a process
    of its own, its stdout and stderr in files."""

    def __init__(self, tmp_path, mode: str, *options: str):
        self.out = tmp_path / "o"
        cmd = [sys.executable, "-m", "sm_profiler", "run", "--flight-recorder", *options]
        cmd += ["--out", str(self.out), "--", os.path.join(SUPPORT, "auto_flight.py"), mode]
        env = dict(os.environ, SM_PROFILER_STOP_GRACE_S="2")
        self.stdout, self.stderr = tmp_path / "stdout", tmp_path / "stderr"
        with open(self.stdout, "w") as o, open(self.stderr, "w") as e:
            self.p = subprocess.Popen(cmd, stdout=o, stderr=e, text=True, env=env)

    def wait_for(self, what, timeout_s: float, alive: bool = True):
        """Poll `what()` until it is true; fails on the deadline (or the process's end)."""
        deadline = time.monotonic() + timeout_s
        while not what():
            assert time.monotonic() < deadline, self.err()[-3000:]
            assert not alive or self.p.poll() is None, self.err()[-3000:]
            time.sleep(0.2)

    def dumps(self, trigger: str = "*") -> list[str]:
        return sorted(glob.glob(str(self.out / f"flight.rank0.*.{trigger}.npz")))

    def end(self, timeout_s: float = 300) -> int:
        try:
            return self.p.wait(timeout=timeout_s)
        finally:
            self.kill()
            print(self.err()[-3000:])

    def kill(self) -> None:
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait()

    def err(self) -> str:
        return self.stderr.read_text()


def stats_of(path: str) -> str:
    return open(path[: -len(".npz")] + "_stats.txt").read()


def whole(table) -> bool:
    L = table.launches
    return bool((L["rows"] == L["grid_x"] * L["grid_y"] * L["grid_z"]).all())


def names(table) -> list[str]:
    return [table.kernels[k]["name"] for k in table.launches["kernel"]]


def test_a_planted_slow_step_writes_one_dump_naming_the_step_and_the_kernel_that_grew(tmp_path):
    run = Run(tmp_path, "slow")
    assert run.end() == 0
    dumps = run.dumps()
    assert len(dumps) == 1 and dumps == run.dumps("slow"), run.err()[-3000:]
    table = load(dumps[0])
    steps = table.launches["step"]
    assert sorted(set(steps.tolist())) == list(range(130, 138))
    assert whole(table) and table.num_launches == 16
    work = np.array(names(table)) == "work_kernel"
    span = table.launches["end_ns"] - table.launches["start_ns"]
    assert span[work & (steps == 137)][0] > 2 * np.median(span[work & (steps != 137)])
    text = stats_of(dumps[0])
    assert text.startswith("Flight recorder: step 137 was slow: "), text[:500]
    assert re.search(r"grew in step 137, beside the median of steps 130-136:\n +work_kernel ", text)


@pytest.mark.parametrize("mode", ["spin", "sleep"])
def test_a_stall_writes_what_the_gpu_is_in_within_t_plus_15_s_and_the_job_stays(tmp_path, mode):
    run = Run(tmp_path, mode, "--stall-s", str(STALL_S), *NOT_SLOW)
    try:
        run.wait_for(lambda: "stuck" in run.stdout.read_text(), 300)
        stuck_at = time.monotonic()
        run.wait_for(lambda: run.dumps("stall"), STALL_S + 15)
        print(f"{mode}: stall dump {time.monotonic() - stuck_at:.1f} s after the kernel queued")
        time.sleep(1)
        assert run.p.poll() is None  # the job is left as it is
        table = load(run.dumps("stall")[0])
        state = gpu_state(table, 0)
        assert (state.host_step, state.last_step_ended) == (90, 89)
        assert (state.last_ended.kernel, state.last_ended.step) == ("add_kernel", 89)
        assert sorted(set(table.launches["step"].tolist())) == list(range(83, 90))
        assert whole(table)
        text = stats_of(run.dumps("stall")[0])
        if mode == "spin":
            assert [(q.kernel, q.step, q.ended) for q in state.in_flight] == [
                ("spin_kernel", 90, 0)
            ]
            assert "in flight: spin_kernel (step 90): 0 of 1 program ended" in text
        else:
            assert state.in_flight == [] and state.not_reached == []
            assert "nothing of ours in flight" in text
        if mode == "spin":  # SIGTERM while the main thread is blocked: the ring, written
            run.p.send_signal(signal.SIGTERM)
            assert run.end(60) == 128 + signal.SIGTERM
            again = load(run.dumps("SIGTERM")[0])
            assert [q.kernel for q in gpu_state(again, 0).in_flight] == ["spin_kernel"]
    finally:
        run.kill()


def test_an_exception_writes_the_ring(tmp_path):
    run = Run(tmp_path, "raise", *NOT_SLOW)
    assert run.end() == 1
    assert len(run.dumps()) == 1 and run.dumps("exception")
    table = load(run.dumps()[0])
    assert sorted(set(table.launches["step"].tolist())) == list(range(52, 60))
    assert whole(table)
    text = stats_of(run.dumps()[0])
    assert text.startswith("Flight recorder: the program raised RuntimeError: loss is nan at")


def test_sigusr1_writes_the_ring_and_the_run_finishes(tmp_path):
    run = Run(tmp_path, "usr1", *NOT_SLOW)
    assert run.end() == 0
    assert "done" in run.stdout.read_text()
    assert len(run.dumps()) == 1 and run.dumps("SIGUSR1"), run.err()[-3000:]
    table = load(run.dumps()[0])
    steps = table.launches["step"]
    assert set(range(43, 50)) <= set(steps.tolist()) <= set(range(43, 51))
    assert whole(table.select(steps < 50))  # step 50 was running while the ring was read


def test_the_example_writes_the_slow_step_the_stall_and_sigusr1(tmp_path):
    from repo_paths import ROOT

    out = subprocess.run(
        [sys.executable, os.path.join(ROOT, "examples", "flight_recorder.py"), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
        # The example imports sm_profiler as a user's script does: from this checkout, installed
        # or not (the GPU machine runs the tests from a copy of the tree).
        env=dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")])),
    )
    print(out.stdout[-3000:], out.stderr[-3000:])
    assert out.returncode == 0
    dumps = sorted(glob.glob(str(tmp_path / "flight.rank0.*.npz")))
    assert [re.search(r"\.(\w+)\.npz$", d).group(1) for d in dumps] == ["slow", "stall", "SIGUSR1"]
    assert stats_of(dumps[0]).startswith("Flight recorder: step 30 was slow: ")
    stalled = gpu_state(load(dumps[1]), 0)
    assert [(q.kernel, q.step) for q in stalled.in_flight] == [("spin_kernel", 60)]
    assert "in flight: spin_kernel (step 60)" in out.stdout
