"""Compile instrumented Gluon kernels for sm_90 and sm_100 on the CPU; print PTX and SASS as JSON.

Run as a subprocess by test_gluon_compile.py, without TRITON_INTERPRET (Gluon has no interpreter).
"""

import json
import os
import sys

import triton
from triton.backends.compiler import GPUTarget
from triton.experimental.gluon._runtime import GluonASTSource

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(
    1, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
)  # the repo root
import gluon_kernels as K  # noqa: E402
from triton_compile_probe import ptxas_release, sass  # noqa: E402

LOOP_SIG = {
    "out": "*fp32",
    "iters": "i32",
    "prof": "*i64",
    "PROFILE": "constexpr",
    "PER_WARP": "constexpr",
    "WORKER_WARPS": "constexpr",
}
STRAIGHT_SIG = {"prof": "*i64", "N_EVENTS": "constexpr", "PER_WARP": "constexpr"}


def compile_(fn, sig, consts, arch):
    return triton.compile(GluonASTSource(fn, sig, consts), target=GPUTarget("cuda", arch, 32))


def main():
    res = {"triton": triton.__version__, "ptxas_release": ptxas_release()}
    for arch in (90, 100):
        for name, fn, profile, per_warp in (
            ("on", K.ws_loop_kernel, True, False),
            ("warp", K.ws_loop_kernel, True, True),
            ("off", K.ws_loop_kernel, False, False),
            ("plain", K.plain_ws_loop_kernel, False, False),
        ):
            consts = {"PROFILE": profile, "PER_WARP": per_warp, "WORKER_WARPS": 2}
            k = compile_(fn, LOOP_SIG, consts, arch)
            res[f"loop_{name}_ptx_{arch}"] = k.asm["ptx"]
            if arch == 90:
                res[f"loop_{name}_sass"] = sass(k)
    for per_warp in (False, True):
        for n in (4, 12):
            consts = {"N_EVENTS": n, "PER_WARP": per_warp}
            res[f"straight_{n}_{int(per_warp)}"] = sass(
                compile_(K.straight_kernel, STRAIGHT_SIG, consts, 90)
            )
            res[f"ws_straight_{n}_{int(per_warp)}"] = sass(
                compile_(K.ws_straight_kernel, STRAIGHT_SIG, consts, 90)
            )
    # A stage through Gluon's own shared-memory allocation (why gluon_ops has no staged lanes).
    k = compile_(
        K.smem_stage_kernel,
        {"prof": "*i64", "iters": "i32", "STAGE": "constexpr"},
        {"STAGE": 64},
        90,
    )
    res["smem_stage"] = {"ptx": k.asm["ptx"], "shared": k.metadata.shared}
    ring_sig = {"prof": "*i64", "iters": "i32", "PER_WARP": "constexpr"}
    for per_warp in (False, True):
        k = compile_(K.ring_kernel, ring_sig, {"PER_WARP": per_warp}, 90)
        res[f"ring_ptx_{int(per_warp)}"] = k.asm["ptx"]
    json.dump(res, sys.stdout)


if __name__ == "__main__":
    main()
