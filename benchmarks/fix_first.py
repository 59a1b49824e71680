"""What to fix first, checked on the GPU (issue 45): kernels with a planted defect each, recorded
in auto mode; the advisor (sm_profiler/advise.py) must rank the planted defect first; then its
suggestion is applied and the time it recovers is measured against its estimate.

One Triton kernel serves every case: each program follows `count` chains of STEPS dependent
loads through a table that stays in L1 (a pointer chase), so a program's time is its chains'
count times a chain's latency, whatever runs beside it on its SM (latency-bound: up to 32
one-warp programs share an SM without slowing each other). The cases (S: the GPU's SMs, R: the
programs resident on one SM, measured by a probe launch):

  wave   ceil(1.1 x S x R) programs of 40 chains: a full wave and a tenth; fixed: the grid the
         advisor suggests (S x R programs, one wave), the same chains spread evenly
  skew   S programs of 4 chains but the last 4 programs 40: a tail; fixed: the same chains
         spread evenly over the S programs
  few    16 programs of 64 chains (fewer programs than SMs); fixed: each program's chains split
         the number of ways the advisor says (ceil(S / 16)), one program each
  gaps   a step of 50 launches of S programs of one short chain, launched from Python (the host
         sets the pace); fixed: the step captured in a CUDA graph and replayed
  rank   (2 GPUs, torchrun) S programs of 100 chains on rank 0, 200 on rank 1, then an
         all-reduce: rank 1 is slow; fixed: 150 chains on each (the work split evenly)

Per case: 5 recorded steps (one launch a step; gaps: 50), the advisor's first finding, its
estimate per step, then the planted and the fixed step timed without recording (CUDA events,
interleaved, median of --repeats figures of --reps steps each) and what the fix recovered. Each
variant's output is checked against torch's chase of the same chains.

    python -m benchmarks run fix_first --json $OUT/fix_first.json
    torchrun --nproc_per_node 2 -m benchmarks.fix_first --slow-rank --json $OUT/fix_first_rank.json
    python -m benchmarks.fix_first --models gpt,llama,moe --json $OUT/fix_first_models.json

The last runs the benchmark models' training step (auto_overhead's stacks) and prints the
advisor's top five lines of each; with --torch, torch.profiler records the same steps and the
host gaps are over every kernel (CUPTI's rows: cuBLAS, NCCL too), printed beside the records'
own figure:

    python -m benchmarks.fix_first --models gpt --torch --json $OUT/fix_first_models_torch.json

Needs an NVIDIA GPU, torch and Triton (the slow-rank mode: 2 GPUs under torchrun); without a GPU
it says so and exits 0.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys

from benchmarks.env import add_model_shape_args, no_cuda_gpu

CASES = ("wave", "skew", "few", "gaps")
EXPECTED = {
    "wave": "partial_wave",
    "skew": "tail",
    "few": "idle_sms",
    "gaps": "host_gaps",
    "rank": "slow_rank",
}
TABLE = 4096  # entries of the chase table (16 KiB: stays in L1)
STEPS = 64  # dependent loads per chain
RECORDED = 5  # steps recorded per case
GAP_LAUNCHES = 50  # launches in a step of the gaps case
# Chains per program on rank 0 and rank 1 (the slow one): rank 1 ~0.8 ms over rank 0, well above
# the recording loop's own pace between steps (~90 µs under torchrun on an H100), which the
# advisor rightly ranked first when the difference was 0.13 ms.
RANK_CHAINS = (400, 1000)


def _kernel():
    import triton
    import triton.language as tl

    @triton.jit
    def chase_kernel(table, first, count, out, STEPS: tl.constexpr, MASK: tl.constexpr):
        p = tl.program_id(0)
        a = tl.load(first + p)
        n = tl.load(count + p)
        for c in range(a, a + n):
            idx = c & MASK
            for _ in range(STEPS):
                idx = tl.load(table + idx)
            tl.store(out + c, idx)

    return chase_kernel


class Chase:
    """The chase kernel and its table on one GPU; `variant(counts)` makes a launch function of a
    grid with those chain counts per program."""

    def __init__(self, steps: int = STEPS, seed: int = 0):
        import torch

        self.torch = torch
        self.kernel = _kernel()
        self.steps = steps
        g = torch.Generator().manual_seed(seed)
        perm = torch.randperm(TABLE, generator=g)
        table = torch.empty(TABLE, dtype=torch.int32)
        table[perm] = perm.roll(-1).to(torch.int32)  # one cycle through every entry
        self.table = table.cuda()

    def variant(self, counts):
        torch = self.torch
        counts = torch.as_tensor(counts, dtype=torch.int32)
        first = (torch.cumsum(counts, 0) - counts).to(torch.int32)
        n_chains = int(counts.sum())
        out = torch.full((max(n_chains, 1),), -1, dtype=torch.int32, device="cuda")
        count, first = counts.cuda(), first.cuda()
        grid = (len(counts),)

        def launch():
            self.kernel[grid](
                self.table, first, count, out, STEPS=self.steps, MASK=TABLE - 1, num_warps=1
            )

        launch.out, launch.n_chains, launch.programs = out, n_chains, len(counts)
        return launch

    def check(self, launch) -> None:
        """The launch's output equals torch's chase of the same chains."""
        torch = self.torch
        launch()
        idx = torch.arange(launch.n_chains, device="cuda") & (TABLE - 1)
        tab = self.table.long()
        for _ in range(self.steps):
            idx = tab[idx]
        got = launch.out[: launch.n_chains].long()
        if not torch.equal(got, idx):
            bad = int((got != idx).sum())
            raise AssertionError(f"chase output differs from torch in {bad} chains")


def sm_count() -> int:
    import torch

    return torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count


def even(total: int, programs: int) -> list[int]:
    """`total` chains over `programs` programs, as evenly as whole chains allow."""
    base, extra = divmod(total, programs)
    return [base + (1 if i < extra else 0) for i in range(programs)]


def peak_resident(table, launch: int) -> int:
    """The most programs of `launch` on one SM at once, from its records."""
    import numpy as np

    L, r = table.launches, table.rows
    a, n = int(L["first_row"][launch]), int(L["rows"][launch])
    sm = np.asarray(r["sm"][a : a + n], np.int64)
    t = np.concatenate([r["start_ns"][a : a + n], r["end_ns"][a : a + n]]).astype(np.int64)
    d = np.r_[np.ones(n, np.int64), -np.ones(n, np.int64)]
    g = np.r_[sm, sm]
    o = np.lexsort((d, t, g))
    run = np.cumsum(d[o])
    return int(run.max()) if n else 0


# -- the cases --------------------------------------------------------------------------------


def planted(case: str, chase: Chase, sms: int, resident: int, rank: int = 0):
    """name -> the planted step (a function that queues one step's launches)."""
    if case == "wave":
        # 40 chains a program: a wave long enough (~60 µs) that the host's pace between recorded
        # steps (~26 µs on an H100, the recording loop's own) is not the larger loss.
        return chase.variant([40] * math.ceil(1.1 * sms * resident))
    if case == "skew":
        return chase.variant([4] * (sms - 4) + [40] * 4)
    if case == "few":
        return chase.variant([64] * 16)
    if case == "gaps":
        one = chase.variant([1] * sms)

        def step():
            for _ in range(GAP_LAUNCHES):
                one()

        step.out, step.n_chains, step.programs, step.one = one.out, one.n_chains, sms, one
        return step
    if case == "rank":
        return chase.variant([RANK_CHAINS[1] if rank == 1 else RANK_CHAINS[0]] * sms)
    raise ValueError(case)


def fixed(case: str, chase: Chase, finding, planted_step, sms: int):
    """The planted step with the advisor's suggestion applied, from the finding's evidence."""
    ev = finding.evidence if finding is not None else {}
    if case == "wave":
        from sm_profiler.report.advise import grid_options

        n, _, _ = grid_options(ev["programs"], ev["slots"])[0]  # the whole waves just below
        return chase.variant(even(planted_step.n_chains, n))
    if case == "skew":
        return chase.variant(even(planted_step.n_chains, planted_step.programs))
    if case == "few":
        k = max(2, math.ceil(ev["sms"] / ev["programs"]))  # the split the suggestion names
        return chase.variant([c for _ in range(16) for c in even(64, k)])
    if case == "gaps":
        import torch

        planted_step.one()  # loaded before the capture
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            planted_step()
        graph.replay()

        def step():
            graph.replay()

        step.out, step.n_chains = planted_step.out, planted_step.n_chains
        return step
    if case == "rank":
        return chase.variant([sum(RANK_CHAINS) // 2] * sms)  # the same work split evenly
    raise ValueError(case)


def record(case: str, step, probe=None, after=None):
    """The auto-mode table of RECORDED steps of `step` (each followed by `after`), the probe's
    launch first (no step)."""
    import torch

    import sm_profiler

    # Step 0 is the warm-up (the compile, NCCL's first all-reduce): recorded are steps 1..N.
    with sm_profiler.auto(schedule=f"1-{RECORDED}") as prof:
        if probe is not None:
            probe()
        step()  # compiled and loaded: warm-up, no step yet
        if after is not None:
            after()  # NCCL's first all-reduce sets up its communicator: ~200 ms, not a step's
        torch.cuda.synchronize()
        for _ in range(RECORDED):
            prof.step()
            step()
            if after is not None:
                after()
        torch.cuda.synchronize()
    return prof.table()


def time_steps(fns: dict, reps: int, repeats: int, after=None) -> dict[str, float]:
    """Median µs per step of each variant: `repeats` figures of `reps` steps each, interleaved,
    between two CUDA events."""
    import torch

    per: dict[str, list[float]] = {k: [] for k in fns}
    for fn in fns.values():  # warm
        fn()
    torch.cuda.synchronize()
    for _ in range(repeats):
        for k, fn in fns.items():
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            for _ in range(reps):
                fn()
                if after is not None:
                    after()
            b.record()
            b.synchronize()
            per[k].append(a.elapsed_time(b) * 1e3 / reps)
    return {k: statistics.median(v) for k, v in per.items()}


def run_case(case: str, reps: int, repeats: int) -> dict:
    """Record, advise, fix, time: one row of the table."""
    from sm_profiler.report.advise import advise

    sms = sm_count()
    # The probe's kernel is a function of its own: the case's is first compiled in its region.
    probe = Chase().variant([4] * (8 * sms * 32))  # more programs than any SM holds at once
    table = record("probe", probe)
    resident = max(1, max(peak_resident(table, i) for i in range(table.num_launches)))
    chase = Chase()
    step = planted(case, chase, sms, resident)
    chase.check(step if case != "gaps" else step.one)
    table = record(case, step)
    advice = advise(table)
    top = advice.findings[0] if advice.findings else None
    row = {
        "case": case,
        "sms": sms,
        "resident": resident,
        "programs": step.programs,
        "expected": EXPECTED[case],
        "first": top.kind if top else None,
        "ranked_first": bool(top and top.kind == EXPECTED[case]),
        "findings": [f.to_dict() for f in advice.findings[:5]],
    }
    if not row["ranked_first"]:
        return row
    fix = fixed(case, chase, top, step, sms)
    if case != "gaps":
        chase.check(fix)
    t = time_steps({"planted": step, "fixed": fix}, reps, repeats)
    row.update(
        recovered(top.estimate_ns_per_step, t), fixed_programs=getattr(fix, "programs", None)
    )
    return row


def recovered(estimate_ns: float, t: dict[str, float]) -> dict:
    """A row's figures: the advisor's estimate, the planted and fixed steps' medians (µs) and the
    time the fix recovered, also as a share of the estimate."""
    est, got = estimate_ns / 1e3, t["planted"] - t["fixed"]
    return {
        "estimate_us": est,
        "planted_us": t["planted"],
        "fixed_us": t["fixed"],
        "recovered_us": got,
        "recovered_of_estimate": got / est if est > 0 else None,
    }


def format_table(rows: list[dict]) -> list[str]:
    out = [
        f"{'case':<6}{'first finding':<15}{'ok':<4}{'estimate':>10}{'planted':>10}"
        f"{'fixed':>10}{'recovered':>11}{'of est.':>9}"
    ]
    for r in rows:
        ok = "yes" if r["ranked_first"] else "NO"
        if "estimate_us" not in r:
            out.append(f"{r['case']:<6}{str(r['first']):<15}{ok:<4}")
            continue
        frac = r["recovered_of_estimate"]
        out.append(
            f"{r['case']:<6}{r['first']:<15}{ok:<4}{r['estimate_us']:>8.1f}us"
            f"{r['planted_us']:>8.1f}us{r['fixed_us']:>8.1f}us{r['recovered_us']:>9.1f}us"
            f"{100 * frac:>8.0f}%"
        )
    out.append(
        "estimate: the advisor's first line, per step; planted, fixed: a step's median time "
        "without recording (CUDA events); recovered: planted - fixed"
    )
    return out


# -- the slow rank (torchrun, 2 GPUs) ---------------------------------------------------------


def run_slow_rank(reps: int, repeats: int, out_dir: str) -> dict | None:
    """Under torchrun: every rank records its steps and saves its table; rank 0 advises on them
    all, then every rank times the planted and the fixed step (an all-reduce after each)."""
    import torch
    import torch.distributed as dist

    from sm_profiler import load
    from sm_profiler.report.advise import advise

    dist.init_process_group("nccl")
    rank, local = dist.get_rank(), int(os.environ.get("LOCAL_RANK", 0))
    torch.cuda.set_device(local)
    chase = Chase()
    sms = sm_count()
    flag = torch.ones(1, device="cuda")

    def sync():
        dist.all_reduce(flag)

    step = planted("rank", chase, sms, 1, rank)
    chase.check(step)
    table = record("rank", step, after=sync)
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, f"fix_first.rank{rank}.npz")
    table.save(path)
    dist.barrier()
    row = None
    verdict = torch.zeros(1, device="cuda")
    if rank == 0:
        tables = [load(os.path.join(out_dir, f"fix_first.rank{r}.npz")) for r in range(2)]
        advice = advise(tables)
        top = advice.findings[0] if advice.findings else None
        row = {
            "case": "rank",
            "sms": sms,
            "programs": sms,
            "expected": "slow_rank",
            "first": top.kind if top else None,
            "ranked_first": bool(top and top.kind == "slow_rank" and top.rank == 1),
            "findings": [f.to_dict() for f in advice.findings[:5]],
        }
        if row["ranked_first"]:
            verdict[0] = top.estimate_ns_per_step
    dist.broadcast(verdict, 0)
    if verdict.item() > 0:
        fix = fixed("rank", chase, None, step, sms)
        chase.check(fix)
        t = time_steps({"planted": step, "fixed": fix}, reps, repeats, after=sync)
        if rank == 0:
            row.update(recovered(verdict.item(), t))
    dist.barrier()
    dist.destroy_process_group()
    return row


def run_models(args) -> list[dict]:
    """The benchmark models' (auto_overhead's GPT-, Llama- and MoE-style stacks) training step,
    compiled in an auto region: --warmup steps, then RECORDED steps recorded; the advisor's top
    five lines of each, as the report prints them at 80 columns."""
    import torch

    import sm_profiler
    from benchmarks import auto_overhead as ao
    from sm_profiler.report.advise import advise, advise_lines

    rows = []
    for model in args.models.split(","):
        ao.fresh_compile_state()
        step = ao.make_step(model, args.scenario, args)
        # --torch: torch.profiler on the recorded steps only (it needs a schedule to know them).
        opts = {"torch_profiler": True, "schedule": f"1-{RECORDED}"} if args.torch else {}
        with sm_profiler.auto(capacity=2**23, **opts) as prof:
            for _ in range(args.warmup):  # compiles, then steady
                step()
            torch.cuda.synchronize()
            for _ in range(RECORDED):
                prof.step()
                step()
            torch.cuda.synchronize()
        table = prof.table().select_steps(f"1-{RECORDED}")
        doc = prof.torch_trace() if args.torch else None
        advice = advise(table, cupti=doc)
        lines = advise_lines(advice, 80, 5)
        print(f"\n== {model} ({args.scenario}; {torch.cuda.get_device_name(0)})")
        print("\n".join(lines[1:]))
        rows.append({"model": model, "scenario": args.scenario, "lines": lines[1:]})
        rows[-1]["advice"] = advice.to_dict(5)
        if args.torch:
            alone = advise(table)
            gaps = {
                a: next((f.estimate_ns_per_step for f in x.findings if f.kind == "host_gaps"), 0.0)
                for a, x in (("records", alone), ("cupti", advice))
            }
            print(
                f"host gaps a step: {gaps['cupti'] / 1e3:.1f} µs over every kernel (CUPTI), "
                f"{gaps['records'] / 1e3:.1f} µs over the instrumented ones "
                f"({advice.gaps_from}; notes: {'; '.join(advice.notes) or 'none'})"
            )
            rows[-1]["host_gaps_ns"] = gaps
            rows[-1]["advice_records_only"] = alone.to_dict(5)
        del step, prof
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", default=",".join(CASES), help="comma-separated: " + ", ".join(CASES))
    ap.add_argument("--slow-rank", action="store_true", help="the 2-GPU case (under torchrun)")
    ap.add_argument("--reps", type=int, default=20, help="steps per timed figure")
    ap.add_argument("--repeats", type=int, default=15, help="figures per variant (median)")
    ap.add_argument("--out", default="fix_first_out", help="folder for the slow-rank files")
    ap.add_argument(
        "--models",
        default=None,
        help="instead: the advisor's top five lines on these benchmark models (gpt,llama,moe)",
    )
    ap.add_argument("--scenario", default="train", help="with --models: train or train_graphs")
    ap.add_argument(
        "--torch",
        action="store_true",
        help="with --models: torch.profiler on the recorded steps; host gaps over every kernel",
    )
    ap.add_argument("--warmup", type=int, default=5, help="with --models: steps before recording")
    add_model_shape_args(ap)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    if no_cuda_gpu("fix_first"):
        return 0
    if args.models:
        rows = run_models(args)
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"config": vars(args), "models": rows}, f, indent=1)
        return 0
    if args.slow_rank:
        row = run_slow_rank(args.reps, args.repeats, args.out)
        rows = [row] if row is not None else []
    else:
        rows = [run_case(c, args.reps, args.repeats) for c in args.cases.split(",") if c]
    if not rows:  # a rank other than 0
        return 0
    print("\n".join(format_table(rows)))
    for r in rows:
        if r["findings"]:
            f = r["findings"][0]
            print(f"{r['case']}: {f['detail']}\n  fix: {f['suggestion']}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"config": vars(args), "rows": rows}, f, indent=1)
    return 0 if all(r["ranked_first"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
