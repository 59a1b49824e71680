"""Why auto mode's record costs a short kernel a fixed time a launch: the end of a program written
several ways in CUDA C++, each in a CUDA graph, against the same kernel without it.

The kernel is y = 2x + 1 over N floats, 1,024 a block (256 threads, a float4 each). Thread 0 of
each block stamps its program's start and end (%globaltimer, into a log per launch: where the time
goes) and adds, after its store of y, per spelling:

  plain            nothing
  stores           the 32-byte record in two 16-byte stores to a slot fixed by the block
  red              a fire-and-forget atomic add on its SM's counter (no value back), no stores
  claim_stores     an atomic add that returns the SM's count, then the record at that slot (what
                   auto mode does: ptx.py's auto_epilogue)
  claim_at_start   the same atomic add issued first thing, its value used only at the end
  load_stores      a load from L2 (no atomic) whose value places the record, then the stores

Each spelling: a CUDA graph of --launches launches, replayed --replays times between CUDA events,
--rounds rounds interleaved; the figure is the median microseconds a launch, and beside it the
mean nanoseconds a program ran (start to end stamp, the graph's last replay) and the median gap
from one launch's last program to the next one's first. Compiled by NVRTC through CuPy (one
module, a template instance per spelling).

    python -m benchmarks run auto_claim_cost [--sizes 65536,1048576,16777216] [--json out]

Needs an NVIDIA GPU and CuPy; without them it says so and exits 0.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys

import numpy as np

SPELLINGS = ("plain", "stores", "red", "claim_stores", "claim_at_start", "load_stores")
COUNTER_STRIDE_WORDS = 4  # a counter per 32-byte sector, as the claim (format v3) had them
RING = 4096  # records per SM's region (a power of two: the slot is the count's low bits)

SRC = r"""
typedef unsigned long long u64;

__device__ __forceinline__ u64 gtimer() {
  u64 t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); return t; }
__device__ __forceinline__ unsigned gtimer_lo() {
  unsigned t; asm volatile("mov.u32 %0, %%globaltimer_lo;" : "=r"(t)); return t; }
__device__ __forceinline__ unsigned smid() {
  unsigned s; asm volatile("mov.u32 %0, %%smid;" : "=r"(s)); return s & 255; }
__device__ __forceinline__ void record(uint4* r, unsigned t0) {
  r[0] = uint4{t0, gtimer_lo(), smid(), blockIdx.x};
  r[1] = uint4{1, 2, 3, 4};
}

template <int S>
__global__ void __launch_bounds__(256) kernel(const float4* x, float4* y, uint4* rec, u64* ctr_all, u64* stamps) {
  int i = blockIdx.x * 256 + threadIdx.x;
  u64 start = threadIdx.x == 0 ? gtimer() : 0;
  unsigned t0 = (unsigned)start;
  u64* ctr = ctr_all + smid() * STRIDE;
  u64 early = 0;
  if (S == 4)  // predicated, not branched: nothing waits on the value before the end
    asm volatile("{.reg .pred p; setp.eq.u32 p, %1, 0; @p atom.global.add.u64 %0, [%2], 1;}"
                 : "+l"(early) : "r"(threadIdx.x), "l"(ctr));
  float4 v = x[i];
  y[i] = float4{v.x * 2 + 1, v.y * 2 + 1, v.z * 2 + 1, v.w * 2 + 1};
  if (threadIdx.x != 0) return;
  u64 slot = blockIdx.x;
  if (S == 2) atomicAdd(ctr, 1ull);
  if (S == 3) slot = atomicAdd(ctr, 1ull);
  if (S == 4) slot = early;
  if (S == 5) slot = __ldcg(ctr);
  if (S >= 3) slot = (slot & (RING - 1)) + smid() * RING;
  if (S == 1 || S >= 3) record(rec + 2 * slot, t0);
  // the program's own span, for where the time goes (two 8-byte stores: "stores" costs about
  // nothing, so these barely move what is timed)
  stamps[2 * blockIdx.x] = start;
  stamps[2 * blockIdx.x + 1] = gtimer();
}
"""


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="65536,1048576,16777216", help="floats, multiples of 1024")
    ap.add_argument("--launches", type=int, default=200, help="launches per CUDA graph")
    ap.add_argument("--replays", type=int, default=20, help="graph replays per figure")
    ap.add_argument("--rounds", type=int, default=9, help="figures per spelling (median)")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    try:
        import cupy as cp

        if cp.cuda.runtime.getDeviceCount() == 0:
            raise RuntimeError("no GPU")
    except Exception as e:  # noqa: BLE001 (no CuPy, no driver, no GPU: all mean "cannot run")
        print(f"auto_claim_cost: needs an NVIDIA GPU and CuPy ({e}); nothing measured")
        return 0

    names = [f"kernel<{s}>" for s in range(len(SPELLINGS))]
    mod = cp.RawModule(
        code=SRC,
        options=("-std=c++17", f"-DSTRIDE={COUNTER_STRIDE_WORDS}", f"-DRING={RING}"),
        name_expressions=names,
    )
    kernels = [mod.get_function(n) for n in names]
    stream = cp.cuda.Stream(non_blocking=True)
    results = []
    for n in (int(s) for s in args.sizes.split(",")):
        blocks = n // 1024
        x = cp.random.standard_normal(n, dtype=cp.float32)
        y = cp.empty_like(x)
        rec = cp.zeros(256 * RING * 8, dtype=cp.uint32)  # 256 regions of RING 32-byte records
        ctr = cp.zeros(256 * COUNTER_STRIDE_WORDS, dtype=cp.uint64)
        stamps = cp.zeros((len(SPELLINGS), args.launches, blocks, 2), dtype=cp.uint64)
        graphs = []
        for si, k in enumerate(kernels):
            with stream:
                k((blocks,), (256,), (x, y, rec, ctr, stamps[si, 0]))  # loaded outside the capture
                stream.begin_capture()
                for launch in range(args.launches):
                    k((blocks,), (256,), (x, y, rec, ctr, stamps[si, launch]))
                graphs.append(stream.end_capture())
        stream.synchronize()
        times = {s: [] for s in SPELLINGS}
        start, stop = cp.cuda.Event(), cp.cuda.Event()
        for _ in range(args.rounds):
            for s, g in zip(SPELLINGS, graphs, strict=True):
                start.record(stream)
                for _ in range(args.replays):
                    g.launch(stream)
                stop.record(stream)
                stop.synchronize()
                us = cp.cuda.get_elapsed_time(start, stop) * 1e3
                times[s].append(us / (args.launches * args.replays))
        spans = stamps.get().astype(np.int64)  # [spelling, launch, block, start/end] ns
        program_ns = (spans[..., 1] - spans[..., 0]).reshape(len(SPELLINGS), -1).mean(axis=1)
        # from a launch's last program end to the next launch's first program start
        gap_ns = np.median(spans[:, 1:, :, 0].min(axis=2) - spans[:, :-1, :, 1].max(axis=2), axis=1)
        base = statistics.median(times["plain"])
        print(
            f"\n{n:,} floats, {blocks:,} blocks: us a launch (added over plain), ns a program, "
            "ns between launches"
        )
        for si, s in enumerate(SPELLINGS):
            med = statistics.median(times[s])
            added = 100 * (med - base) / base
            print(
                f"  {s:<15} {med:8.3f}  {added:+6.1f} %   {program_ns[si]:7.0f} ns"
                f"   {gap_ns[si]:6.0f} ns"
            )
            results.append(
                {
                    "floats": n,
                    "spelling": s,
                    "us": med,
                    "added_pct": added,
                    "program_ns": float(program_ns[si]),
                    "gap_ns": float(gap_ns[si]),
                }
            )
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"results": results}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
