"""A loop of Triton kernels for the flight recorder's GPU tests (tests/device/
test_auto_flight_gpu.py), run by `sm-profiler run --flight-recorder ... -- auto_flight.py MODE`:
each step runs `work_kernel` (a loop of N_ITER multiply-adds an element) and `add_kernel`, then
reads one value back (the loop's sync, as a loss printed each step) and calls prof.step().

MODE slow: 200 steps, step 137 with three times the work kernel's loop (an extra 2x of work);
spin: at step 90 a Triton kernel spinning on a flag nobody sets, then torch.cuda.synchronize()
(never returns); sleep: the same with torch.cuda._sleep (not instrumented); raise: raises at
step 60; usr1: SIGUSR1 to itself at step 50, 100 steps in all. Prints "stuck" once stuck and
"done" at a normal end."""

import os
import signal
import sys

import torch

import sm_profiler.auto_mode

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from example_scripts import load_example  # noqa: E402

# The job's kernels are the example's (examples/flight_recorder.py): work_kernel, a loop of
# multiply-adds whose time is n_iter's; add_kernel; spin_kernel, spinning until a flag is set.
example = load_example("flight_recorder")
work_kernel, add_kernel, spin_kernel = example.work_kernel, example.add_kernel, example.spin_kernel

MODE = sys.argv[1]
STEPS = {"slow": 200, "usr1": 100}.get(MODE, 120)
N_ITER = 200_000 if MODE == "slow" else 5_000  # slow: steps of a few ms, GPU-bound
BLOCK, PROGRAMS = 1024, 528
prof = sm_profiler.auto_mode.current()
x = torch.rand(PROGRAMS * BLOCK, device="cuda")
y = torch.empty_like(x)
flag = torch.zeros(1, dtype=torch.int32, device="cuda")
for i in range(STEPS):
    if MODE in ("spin", "sleep") and i == 90:
        if MODE == "spin":
            spin_kernel[(1,)](flag)
        else:
            torch.cuda._sleep(2**40)
        print("stuck", flush=True)
        torch.cuda.synchronize()  # never returns
    if MODE == "raise" and i == 60:
        raise RuntimeError("loss is nan at step 60")
    if MODE == "usr1" and i == 50:
        os.kill(os.getpid(), signal.SIGUSR1)
    n_iter = 3 * N_ITER if MODE == "slow" and i == 137 else N_ITER
    work_kernel[(PROGRAMS,)](x, n_iter, BLOCK=BLOCK)
    add_kernel[(PROGRAMS,)](x, y, BLOCK=BLOCK)
    y[:1].item()
    prof.step()
print("done", flush=True)
