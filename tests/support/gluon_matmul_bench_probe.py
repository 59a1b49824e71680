"""Compile benchmarks/gluon_matmul_overhead.py's kernel for sm_90 on the CPU, every variant; print
its PTX facts as JSON. Run as a subprocess by e2e/test_benchmark_gluon_matmul.py, without
TRITON_INTERPRET."""

import json
import os
import sys

import triton
from triton.backends.compiler import GPUTarget
from triton.experimental.gluon import language as gl
from triton.experimental.gluon._runtime import GluonASTSource

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)
import benchmarks.gluon_matmul_overhead as bench  # noqa: E402


def main():
    lay = gl.NVMMASharedLayout.get_default_for([bench.BLOCK, bench.BLOCK], gl.float16)
    desc = f"tensordesc<fp16[{bench.BLOCK}, {bench.BLOCK}],{lay!r}>"
    sig = {
        "a_desc": desc,
        "b_desc": desc,
        "c_desc": desc,
        "prof": "*i64",
        "lane_words": "i32",
        "MODE": "constexpr",
    }
    res = {}
    for mode, value in bench.MODES.items():
        k = triton.compile(
            GluonASTSource(bench.pipelined_matmul_kernel, sig, {"MODE": value}),
            target=GPUTarget("cuda", 90, 32),
            options={"num_warps": bench.NUM_WARPS},
        )
        ptx = k.asm["ptx"]
        res[mode] = {
            "timer_reads": ptx.count("%globaltimer"),
            "wgmma": "wgmma.mma_async" in ptx,
            "fence_before_tma_store": ptx.rfind("fence.proxy.async")
            < ptx.find("cp.async.bulk.tensor.2d.global.shared"),
        }
    json.dump(res, sys.stdout)


if __name__ == "__main__":
    main()
