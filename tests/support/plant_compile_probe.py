"""Compile benchmarks/plant_kernels.py's kernels (fix_first's planted defects) for sm_90 on the
CPU, plain and as auto mode instruments them; print, per config, what the tests check as JSON:
registers, spills, shared memory, the residency they allow and the PTX's FMAs. Run by
e2e/test_benchmark_fix_first.py without TRITON_INTERPRET, in a process of its own (auto mode
changes process-wide compiler settings)."""

import json
import os
import sys
import tempfile

import triton
from triton.backends.compiler import GPUTarget

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)
from benchmarks import plant_kernels as P  # noqa: E402
from sm_profiler.auto_mode import binding, registers  # noqa: E402
from sm_profiler.record import ptx  # noqa: E402
from sm_profiler.report.occupancy import resident_blocks  # noqa: E402


def compile_(config, cache_dir):
    triton.knobs.cache.dir = cache_dir
    src = triton.compiler.ASTSource(
        P.kernel(config.kernel), P.SIGNATURES[config.kernel], config.constexprs()
    )
    return triton.compile(
        src, target=GPUTarget("cuda", 90, 32), options={"num_warps": config.num_warps}
    )


def facts(k, threads: int) -> dict:
    regs, spill = registers.usage(k.asm["cubin"])
    smem = int(k.metadata.shared)
    text = k.asm["ptx"]
    return {
        "registers": regs,
        "spill_bytes": spill,
        "shared_bytes": smem,
        "resident": resident_blocks(threads, regs, smem).blocks,
        "fma": text.count("fma.rn.f32"),
        "instrumented": ptx.AUTO_MARK in text,
    }


def main():
    root = tempfile.mkdtemp()
    out = {}
    for name, config in P.CONFIGS.items():
        threads = 32 * config.num_warps
        plain = compile_(config, os.path.join(root, f"{name}-plain"))
        binding.turn_on("program")
        try:
            auto = compile_(config, os.path.join(root, f"{name}-auto"))
        finally:
            binding.turn_off()
        out[name] = {
            "threads": threads,
            "plain": facts(plain, threads),
            "auto": facts(auto, threads),
        }
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
