"""What does recording cost in a CUDA C++ kernel? sm_profiler.cuh beside its peers, in one run.

The loop kernel of device_overhead.py (benchmarks/triton_kernels.py) written in CUDA C++ (128
threads, 8 floats per thread, ITERS iterations of INNER dependent FMAs, one range per iteration),
compiled by NVRTC through CuPy's RawKernel, one build per variant:

  base         no instrumentation
  floor        one %globaltimer read + one 8-byte store per event (thread 0), cursor in a
               register, no tag, no bounds test
  floor_w0     the floor executed by warp 0 alone, the other warps branching past it: the
               floor of a lane that one warp writes (what `ours` is)
  ours         sm_profiler.cuh per block (warp 0 stores, the other warps branch past)
  ours_packed  ours with the packed record spelling (-DSM_PROFILER_VECTOR_STORE=0), against the
               vector one a CUDA 13 compiler gets by default
  ours_warp    sm_profiler.cuh per warp (every warp its own lane)
  ours_leader  sm_profiler.cuh with one leader thread (thread 0) per block
  warpscope    FlashInfer / warpscope style: thread 0 stores {%globaltimer_lo, tag} and fences
               the block (__threadfence_block) per event
  seed         the seed SM Profiler's style: thread 0 takes a slot with a global atomic counter
               and writes a 40-byte event (5 stores)

Kernel time is CUPTI's (torch.profiler), median over launches interleaved over rounds; where
CUPTI cannot run, CUDA events (the output says which).

    python -m benchmarks run cuda_overhead [--launches 30] [--rounds 3] [--grid 1056] [--json out]
"""

from __future__ import annotations

import argparse
import json

import numpy as np
import torch

import sm_profiler
from benchmarks.timing import add_timing_args, added_pct, cupti_medians, event_medians
from sm_profiler import SmProfiler

MODES = {
    "base": 0,
    "floor": 1,
    "floor_w0": 7,
    "ours": 2,
    "ours_packed": 2,
    "ours_warp": 3,
    "ours_leader": 4,
    "warpscope": 5,
    "seed": 6,
}
DEFINES = {"ours_packed": ("-DSM_PROFILER_VECTOR_STORE=0",)}  # per variant, beyond SMP_MODE
OURS = ("ours", "ours_packed", "ours_warp", "ours_leader")
THREADS, PER_THREAD = 128, 8
SEED_WORDS = 5  # 40-byte events

SRC = r"""
#include <sm_profiler.cuh>

#define EVT 0

// floor: t = %globaltimer; thread 0 stores it at `slot` (8 bytes). Nothing else.
__device__ __forceinline__ void floor_record(unsigned long long* slot, unsigned int lead) {
    asm volatile("{\n\t.reg .pred p;\n\t.reg .u64 t;\n\tsetp.ne.u32 p, %1, 0;\n\t"
                 "mov.u64 t, %%globaltimer;\n\t@p st.global.u64 [%0], t;\n\t}"
                 :: "l"(slot), "r"(lead));
}

__device__ __forceinline__ unsigned int timer_lo() {
    unsigned int t;
    asm volatile("mov.u32 %0, %%globaltimer_lo;" : "=r"(t));
    return t;
}

extern "C" __global__ void loop_kernel(float* out, unsigned long long* prof,
                                       unsigned long long* plain, unsigned int lane_words) {
    unsigned int tid = threadIdx.x, pid = blockIdx.x;
    float acc[8];
#pragma unroll
    for (int k = 0; k < 8; ++k) acc[k] = (float)(tid + 128 * k + pid) * 1e-3f;
#if SMP_MODE == 2
    sm_profiler_lane lane = sm_profiler_init(prof);
#elif SMP_MODE == 3
    sm_profiler_warp_lane lane = sm_profiler_init_per_warp(prof);
#elif SMP_MODE == 4
    sm_profiler_leader_lane lane = sm_profiler_init_leader(prof, pid, 0, tid == 0);
#else
    unsigned long long* mine = plain + (unsigned long long)pid * lane_words;
    unsigned int cursor = 0, lead = tid == 0, warp0 = (tid >> 5) == 0;
#endif
    for (int i = 0; i < ITERS; ++i) {
#if SMP_MODE == 1
        floor_record(mine + cursor++, lead);
#elif SMP_MODE == 7
        if (warp0) floor_record(mine + cursor, lead);
        cursor++;
#elif SMP_MODE >= 2 && SMP_MODE <= 4
        sm_profiler_event_start(lane, EVT);
#elif SMP_MODE == 5
        if (lead) {
            mine[cursor] = ((unsigned long long)((EVT << 2) | 1) << 32) | timer_lo();
            __threadfence_block();
        }
        cursor++;
#elif SMP_MODE == 6
        if (lead) {
            unsigned int c = atomicAdd((unsigned int*)mine, 1u);
            unsigned long long* rec = mine + 1 + (unsigned long long)c * 5;
            rec[0] = sm_profiler_get_timestamp(); rec[1] = EVT; rec[2] = 1; rec[3] = pid; rec[4] = 0;
        }
#endif
#pragma unroll
        for (int j = 0; j < INNER; ++j)
#pragma unroll
            for (int k = 0; k < 8; ++k) acc[k] = acc[k] * 1.000001f + 1e-6f;
#if SMP_MODE == 1
        floor_record(mine + cursor++, lead);
#elif SMP_MODE == 7
        if (warp0) floor_record(mine + cursor, lead);
        cursor++;
#elif SMP_MODE >= 2 && SMP_MODE <= 4
        sm_profiler_event_end(lane, EVT);
#elif SMP_MODE == 5
        if (lead) {
            mine[cursor] = ((unsigned long long)((EVT << 2) | 2) << 32) | timer_lo();
            __threadfence_block();
        }
        cursor++;
#elif SMP_MODE == 6
        if (lead) {
            unsigned int c = atomicAdd((unsigned int*)mine, 1u);
            unsigned long long* rec = mine + 1 + (unsigned long long)c * 5;
            rec[0] = sm_profiler_get_timestamp(); rec[1] = EVT; rec[2] = 0; rec[3] = pid; rec[4] = 0;
        }
#endif
    }
#pragma unroll
    for (int k = 0; k < 8; ++k) out[pid * 1024 + tid + 128 * k] = acc[k];
}
"""


def build(mode: int, iters: int, inner: int, defines: tuple[str, ...] = ()):
    import cupy

    opts = (
        f"-I{sm_profiler.cuda_include_dir()}",
        "--std=c++17",
        f"-DSMP_MODE={mode}",
        f"-DITERS={iters}",
        f"-DINNER={inner}",
        f"-DSM_PROFILER_HEADERS={sm_profiler.record.cuda.headers_digest()}",
        *defines,
    )
    return cupy.RawKernel(SRC, "loop_kernel", options=opts)


def main():
    import cupy

    ap = argparse.ArgumentParser()
    add_timing_args(ap)
    args = ap.parse_args()
    dev = torch.cuda.get_device_properties(0)
    nvrtc = cupy.cuda.nvrtc.getVersion()
    info = {
        "device": dev.name,
        "sms": dev.multi_processor_count,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cupy": cupy.__version__,
        "nvrtc": f"{nvrtc[0]}.{nvrtc[1]}",
        "driver": cupy.cuda.runtime.driverGetVersion(),
    }
    print(info)
    grid, rows = args.grid, []
    out = cupy.empty(grid * 1024, dtype=cupy.float32)
    for iters, inner in [(64, 64), (64, 16), (16, 16)]:
        epp = 2 * iters
        lane_words = 1 + epp * SEED_WORDS + 8
        plain = cupy.zeros(grid * lane_words, dtype=cupy.uint64)
        profs = {m: SmProfiler(grid, 4, epp) for m in OURS}
        bufs = {m: cupy.from_dlpack(p.get_buffer()) for m, p in profs.items()}
        kernels = {name: build(m, iters, inner, DEFINES.get(name, ())) for name, m in MODES.items()}

        def launcher(name, kernels=kernels, bufs=bufs, plain=plain, lane_words=lane_words):
            k, buf = kernels[name], bufs.get(name, plain)

            def launch():
                if name == "seed":
                    plain.fill(0)  # the seed's counters live in the buffer: reset per launch
                k((grid,), (THREADS,), (out, buf, plain, np.uint32(lane_words)))

            return launch

        fns = {name: launcher(name) for name in MODES}
        for fn in fns.values():  # compile and warm up outside the timed session
            fn()
            fn()
        cupy.cuda.Device().synchronize()
        try:
            row, how = cupti_medians(fns, args.launches, args.rounds, "loop_kernel"), "cupti"
        except Exception as e:  # noqa: BLE001 - report which timing was used
            row, how = event_medians(fns, args.launches, args.rounds), f"cuda-events ({e})"[:80]
        base, floor = row["base"], row["floor"]
        r = {"ITERS": iters, "INNER_FMA": inner, "grid": grid, "timing": how}
        w0 = row["floor_w0"] - base
        for k, v in row.items():
            r[f"{k}_us"] = round(v, 3)
            r[f"{k}_added_pct"] = round(added_pct(v, base), 2)
        for k in OURS + ("floor_w0", "warpscope", "seed"):
            r[f"{k}_vs_floor_added"] = (
                round((row[k] - base) / (floor - base), 3) if floor > base else None
            )
        # What the timed code records: one launch of each of ours into a fresh buffer, decoded.
        dec = {}
        for m, p in profs.items():
            p.init_buffer()
            fns[m]()
            cupy.cuda.Device().synchronize()
            t = p.decode()
            dec[m] = {
                "ranges": len(t),
                "dropped": int(t.lanes["dropped"].sum()),
                "lanes": int(t.lanes["initialized"].sum()),
            }
        r["ours_vs_floor_w0_added"] = round((row["ours"] - base) / w0, 3) if w0 > 0 else None
        r["decoded"] = dec
        rows.append(r)
        print(json.dumps(r))
    print()
    print(
        f"{'ITERS x FMA':<12}{'base µs':>9}"
        + "".join(f"{k:>12}" for k in MODES if k != "base")
        + "   ours/floor  ours/floor_w0"
    )
    for r in rows:
        cells = "".join(f"{r[k + '_added_pct']:>+11.1f}%" for k in MODES if k != "base")
        print(
            f"{r['ITERS']:>3} x {r['INNER_FMA']:<6}{r['base_us']:>9.2f}{cells}"
            f"   {r['ours_vs_floor_added']!s:>10}  {r['ours_vs_floor_w0_added']!s:>13}"
        )
    print(f"timing: {rows[0]['timing']}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"info": info, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
