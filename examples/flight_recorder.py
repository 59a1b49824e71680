"""The flight recorder: the last steps of a long job, written only when something goes wrong.

You will learn:
  * how to record every step of a job into auto mode's ring at the recording's cost, writing
    nothing in the normal course (`sm_profiler.auto(flight_recorder=...)`, or
    `sm-profiler run --flight-recorder -- train.py`),
  * what a dump holds and says when a step is slow (the step, its time against the median, the
    kernel that grew), when the job stalls (what the GPU is in: the kernel in flight, the last
    one that ended, the launches queued behind it) and on demand (SIGUSR1),
  * how to read the dumps: `sm-profiler stats OUT` (each rank's newest, side by side by step).

Run: python examples/flight_recorder.py [OUT_DIR]   (needs a CUDA GPU; on a CPU it says so).
It plants a slow step (step 30 does three times the work), a stall (step 60 waits about 6 s
for a kernel that spins on a flag another stream sets late) and a SIGUSR1 (step 80), and
prints what each dump says (docs/auto.md, "Flight recorder"). About half a minute.
"""

# %%
import os
import signal
import sys

import torch
import triton
import triton.language as tl

OUT = sys.argv[1] if len(sys.argv) > 1 else "sm_profiler_examples_out/flight_recorder"
STEPS, SLOW, STALL, ON_DEMAND = 100, 30, 60, 80


# %% The job's kernels: a loop of multiply-adds whose time is n_iter's, a small pointwise one,
# and one that spins until a flag is set (the stall: a peer that arrives late).
@triton.jit
def work_kernel(x, n_iter, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(x + offs)
    for _ in range(n_iter):
        v = v * 0.999 + 0.001
    tl.store(x + offs, v)


@triton.jit
def add_kernel(x, y, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y + offs, tl.load(x + offs) + 1.0)


@triton.jit
def spin_kernel(flag):
    while tl.load(flag, volatile=True) == 0:
        pass


def stall(flag):
    """A kernel of ours that waits ~6 s: it spins on `flag`, which another stream sets after a
    sleep (a collective whose peer is late looks the same from this GPU)."""
    flag.zero_()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        torch.cuda._sleep(int(6 * 2e9))  # about 6 s of GPU clock cycles
        flag.fill_(1)
    spin_kernel[(1,)](flag)


def main():
    if not torch.cuda.is_available():
        print(
            "examples/flight_recorder.py: skipped, needs a CUDA GPU (auto mode instruments "
            "compiled kernels; the CPU interpreter compiles none)"
        )
        return
    import sm_profiler
    from sm_profiler.report.dump import dump_lines

    # %% Every step recorded into the ring; the last 4 kept in each dump. A stall is 3 s with
    # no step ended (the default: 10 times the longest recent step, at least a minute), and
    # dump_window_s=0 lets the stall follow the slow step's dump at once (default: one slow
    # or stall dump in 5 minutes).
    config = sm_profiler.flight_recorder(steps=4, stall_s=3, dump_window_s=0, out=OUT)
    block, programs = 1024, 528
    x = torch.rand(programs * block, device="cuda")
    y = torch.empty_like(x)
    flag = torch.zeros(1, dtype=torch.int32, device="cuda")
    with sm_profiler.auto(flight_recorder=config) as prof:
        flag.fill_(1)
        spin_kernel[(1,)](flag)  # compiled now (the flag is set: it returns at once)
        for step in range(STEPS):
            if step == STALL:
                stall(flag)
            if step == ON_DEMAND:
                os.kill(os.getpid(), signal.SIGUSR1)  # `kill -USR1 PID` from a shell
            n_iter = 450_000 if step == SLOW else 150_000  # steps of a few ms
            work_kernel[(programs,)](x, n_iter, BLOCK=block)
            add_kernel[(programs,)](x, y, BLOCK=block)
            y[:1].item()  # the loop's sync, as a loss printed each step
            prof.step()

    # %% Three dumps: the slow step, the stall, SIGUSR1. Each is a capture file with its
    # report (_stats.txt) and trace (.perfetto-trace); the report opens with what happened.
    for path in prof.flight.written:
        print(f"\n{path}:")
        print("\n".join(dump_lines(sm_profiler.load(path), 100)))
    print(
        f"\nread a dump: sm-profiler stats {prof.flight.written[0]}; each rank's newest, side "
        f"by side: sm-profiler stats {OUT}"
    )


if __name__ == "__main__":
    main()
