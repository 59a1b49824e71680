"""
Auto mode under torchrun: every rank of a data-parallel job, and NCCL beside it
===============================================================================

You will learn:

* how to profile every rank of a DDP job with ``sm-profiler run`` under torchrun, the training
  script unchanged: each rank records the Triton kernels of its own GPU and writes
  ``auto.rankN.npz``; rank 0 then writes the job's report (``auto_stats.txt``: each rank's time,
  the slowest rank and the kernels that make its difference) and one trace of every rank, GPU
  by GPU and SM by SM (``auto.ranks.perfetto-trace``);
* how to see the communication kernels (NCCL's all-reduce), which auto mode does not record
  (they are not Triton), beside the programs it did: a torch.profiler trace per rank, merged
  with ``sm-profiler merge --torch``, draws them on the same GPU's SM tracks and says what share
  of a step the instrumented kernels ran.

Run: ``python examples/auto_torchrun.py [OUT_DIR]`` (needs 2 CUDA GPUs; with fewer it says so
and exits). It runs, in effect::

    torchrun --standalone --nproc_per_node 2 --no-python sm-profiler run --steps 3-5 \\
        --out OUT_DIR -- examples/auto_torchrun.py --train OUT_DIR
    sm-profiler merge --torch OUT_DIR/torch.rank0.json OUT_DIR/auto.rank0.npz \\
        -o OUT_DIR/rank0_with_nccl.json

and your own script needs only the first line (docs/auto.md, "Several GPUs and ranks").
"""

# %%
# Motivation
# ----------
#
# In a data-parallel job every GPU runs the same kernels on its own batch, then the gradients are
# summed across GPUs. A step is as slow as its slowest rank: a rank whose kernels take longer
# (a straggler: a slower GPU, a hotter one, more work) makes every other rank wait in the
# all-reduce. The job's report names that rank and the kernels that make its difference; the
# job's trace shows each GPU's SMs one above the other, on one time axis.

import os
import subprocess
import sys

import torch

OUT = "sm_profiler_examples_out/auto_torchrun"
STEPS = 8  # optimizer steps of the training loop; steps 3-5 are recorded (warm, compiled)
RECORDED = (3, 5)


class Block(torch.nn.Module):
    """A pre-LN MLP block: LayerNorm, two matmuls and a GELU, which Inductor fuses into a few
    Triton kernels around the matmuls."""

    def __init__(self, d: int):
        super().__init__()
        self.ln = torch.nn.LayerNorm(d)
        self.fc1, self.fc2 = torch.nn.Linear(d, 4 * d), torch.nn.Linear(4 * d, d)

    def forward(self, x):
        return x + self.fc2(torch.nn.functional.gelu(self.fc1(self.ln(x))))


# %%
# The training script, one process per GPU
# ----------------------------------------
#
# Nothing in it knows about sm_profiler: ``sm-profiler run`` counts a step at each
# ``opt.step()`` and records the steps ``--steps`` names. torch.profiler records the same steps,
# with every kernel CUPTI sees (ours, cuBLAS's matmuls, NCCL's all-reduce), into
# ``torch.rankN.json``.


def train(out: str) -> None:
    import torch.distributed as dist

    dist.init_process_group("nccl")
    rank, local = dist.get_rank(), int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local)
    torch.manual_seed(0)
    model = torch.nn.Sequential(*[Block(512) for _ in range(4)]).cuda()
    model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[local])
    step = torch.compile(model)  # compiled in the region: its Triton kernels are instrumented
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(256, 512, device="cuda")
    activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    prof = None
    for i in range(STEPS):
        if i == RECORDED[0]:
            torch.cuda.synchronize()
            prof = torch.profiler.profile(activities=activities)
            prof.start()
        loss = step(x + rank).float().pow(2).mean()
        loss.backward()  # DDP's all-reduce of the gradients: NCCL kernels
        opt.step()  # the end of step i for `sm-profiler run`
        opt.zero_grad(set_to_none=True)
        if prof is not None:
            prof.step()  # torch's ProfilerStep#N: the steps merge --torch measures coverage in
        if i == RECORDED[1]:
            torch.cuda.synchronize()
            prof.stop()
            prof.export_chrome_trace(os.path.join(out, f"torch.rank{rank}.json"))
            prof = None
    dist.barrier()
    dist.destroy_process_group()


# %%
# The job
# -------
#
# ``main`` starts two ranks under torchrun, each inside ``sm-profiler run``, then merges rank
# 0's torch.profiler trace with its auto-mode file: NCCL beside our programs.


def main(out: str = OUT) -> int:
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if gpus < 2:
        print(
            f"examples/auto_torchrun.py: skipped, needs 2 CUDA GPUs (found {gpus}): it runs a "
            "2-rank DDP job under torchrun with `sm-profiler run` (docs/auto.md, 'Several GPUs "
            "and ranks'); on one GPU, see examples/auto_torch_compile.py"
        )
        return 0
    os.makedirs(out, exist_ok=True)
    job = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]
    job += ["-m", "sm_profiler", "run", "--steps", f"{RECORDED[0]}-{RECORDED[1]}", "--out", out]
    job += ["--", os.path.abspath(__file__), "--train", out]
    print("$", " ".join(job[2:]), flush=True)
    status = subprocess.run(job).returncode  # each rank's lines, then rank 0's job report
    if status != 0:
        print(f"examples/auto_torchrun.py: the job failed (status {status})")
        return status

    # NCCL beside our programs: rank 0's torch trace with its SM tracks added.
    from sm_profiler.cli import main as sm_profiler_cli

    merged = os.path.join(out, "rank0_with_nccl.json")
    torch_trace = os.path.join(out, "torch.rank0.json")
    rank0 = os.path.join(out, "auto.rank0.npz")
    print(f"\n$ sm-profiler merge --torch {torch_trace} {rank0} -o {merged}", flush=True)
    status = sm_profiler_cli(["merge", "--torch", torch_trace, rank0, "-o", merged])
    if status != 0:
        return status
    print(
        f"\nopen the job's trace (GPU by GPU, SM by SM):  sm-profiler open {out}/auto.ranks."
        f"perfetto-trace\nand rank 0 with NCCL on its SM tracks ('other kernels (CUPTI)'):  "
        f"sm-profiler open {merged}"
    )
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--train"]:  # one rank, inside `sm-profiler run`
        train(sys.argv[2] if len(sys.argv) > 2 else OUT)
    else:
        sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else OUT))
