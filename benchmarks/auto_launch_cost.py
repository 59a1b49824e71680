"""What auto mode's record adds to one launch of a short Triton kernel: plain, recording off and
recording on, each kernel replayed in a CUDA graph (no host launch cost in the figure).

A training step runs hundreds of kernels of a few microseconds; there the record's fixed cost per
launch (the first program on each SM, the last program's end) matters more than its cost per
program. The kernels (bf16):

  ew_16M    y = 2x + 1 over 16 M elements, 1,024 a program (16,384 programs, ~24 us)
  ew_1M     the same over 1 M (1,024 programs, under two waves on an H100)
  ew_64K    the same over 64 K (64 programs: one short wave)
  gelu_16M  erf GELU over 16 M elements, 512 a program (32,768 programs of a few microseconds
            of MUFU work: the class the record costs most, BENCHMARKS.md "part by part")
  norm_16K  RMS-normalise 16,384 rows of 1,024 (a program a row)
  norm_512  the same over 512 rows

Each kernel is compiled twice: plain, outside any region, and instrumented, inside
`sm_profiler.auto(ring=True)`; a CUDA graph of `--launches` launches of each is captured. Then,
`--repeats` times, alternating: the plain graph, the instrumented graph with recording off
(`binding.set_recording(False)`: what a step outside a schedule's active steps runs) and with
recording on, `--replays` replays each, CUDA events around them. The figure is the median
microseconds per launch; the plain and instrumented kernels read different buffers of the same
size, which moves the 16 M kernel's time by up to 1 % either way on its own.

    python -m benchmarks run auto_launch_cost --json $OUT/launch_cost.json

Needs an NVIDIA GPU, torch and Triton; without a GPU it says so and exits 0.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys

from benchmarks.env import no_cuda_gpu


def _kernels():
    import triton
    import triton.language as tl

    @triton.jit
    def axpb(x, y, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        tl.store(y + offs, tl.load(x + offs, mask=m) * 2.0 + 1.0, mask=m)

    @triton.jit
    def rownorm(x, y, C: tl.constexpr):
        r = tl.program_id(0).to(tl.int64)
        offs = tl.arange(0, C)
        v = tl.load(x + r * C + offs).to(tl.float32)
        s = tl.sum(v * v, 0) / C
        tl.store(y + r * C + offs, (v * tl.rsqrt(s + 1e-6)).to(tl.bfloat16))

    @triton.jit
    def gelu(x, y, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        v = tl.load(x + offs, mask=m).to(tl.float32)
        g = 0.5 * v * (1.0 + tl.erf(v * 0.7071067811865476))
        tl.store(y + offs, g.to(tl.bfloat16), mask=m)

    return axpb, rownorm, gelu


def cases(axpb, rownorm, gelu) -> dict:
    """name -> a function that launches that kernel once (on its own buffers)."""
    import torch
    import triton

    out = {}
    for name, n in (("ew_16M", 1 << 24), ("ew_1M", 1 << 20), ("ew_64K", 1 << 16)):
        x = torch.randn(n, device="cuda", dtype=torch.bfloat16)
        y = torch.empty_like(x)
        grid = (triton.cdiv(n, 1024),)
        out[name] = lambda x=x, y=y, n=n, g=grid: axpb[g](x, y, n, BLOCK=1024, num_warps=4)
    x = torch.randn(1 << 24, device="cuda", dtype=torch.bfloat16)
    y = torch.empty_like(x)
    grid = (triton.cdiv(x.numel(), 512),)
    out["gelu_16M"] = lambda x=x, y=y, g=grid: gelu[g](x, y, x.numel(), BLOCK=512, num_warps=4)
    for name, rows in (("norm_16K", 16384), ("norm_512", 512)):
        x = torch.randn(rows, 1024, device="cuda", dtype=torch.bfloat16)
        y = torch.empty_like(x)
        out[name] = lambda x=x, y=y, r=rows: rownorm[(r,)](x, y, C=1024, num_warps=4)
    return out


def capture(fn, launches: int):
    import torch

    fn()  # compiled and loaded outside the capture
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(launches):
            fn()
    return g


def us_per_launch(graph, launches: int, replays: int) -> float:
    import torch

    graph.replay()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(replays):
        graph.replay()
    b.record()
    torch.cuda.synchronize()
    return a.elapsed_time(b) * 1e3 / (replays * launches)


def measure(args) -> dict:
    import sm_profiler
    from sm_profiler.auto_mode import binding

    kernels = _kernels()
    plain = {k: capture(f, args.launches) for k, f in cases(*kernels).items()}
    res = {}
    with sm_profiler.auto(ring=True, capacity=2**22) as prof:
        inst = {k: capture(f, args.launches) for k, f in cases(*kernels).items()}
        for k in inst:
            t = {"plain": [], "off": [], "on": []}
            for _ in range(args.repeats):
                t["plain"].append(us_per_launch(plain[k], args.launches, args.replays))
                binding.set_recording(False)
                t["off"].append(us_per_launch(inst[k], args.launches, args.replays))
                binding.set_recording(True)
                t["on"].append(us_per_launch(inst[k], args.launches, args.replays))
            res[k] = {m: statistics.median(v) for m, v in t.items()}
    counts = prof.table().counts()
    return {"kernels": res, "claimed": int(counts["claimed"])}


def format_table(res: dict) -> list[str]:
    out = [f"{'kernel':<10}{'plain us':>10}{'off us':>9}{'off':>8}{'on us':>9}{'on':>8}"]
    for k, r in res["kernels"].items():
        p = r["plain"]
        out.append(
            f"{k:<10}{p:>10.3f}{r['off']:>9.3f}{100 * (r['off'] / p - 1):>+7.1f}%"
            f"{r['on']:>9.3f}{100 * (r['on'] / p - 1):>+7.1f}%"
        )
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--launches", type=int, default=50, help="launches per CUDA graph")
    ap.add_argument("--replays", type=int, default=20, help="graph replays per figure")
    ap.add_argument("--repeats", type=int, default=9, help="figures per mode (median)")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    if no_cuda_gpu("auto_launch_cost"):
        return 0
    res = measure(args)
    print("\n".join(format_table(res)))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"config": vars(args), **res}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
