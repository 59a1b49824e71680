"""Compile instrumented kernels for sm_90 on the CPU and print their PTX and SASS as JSON.

Run as a subprocess by test_triton_compile.py, without TRITON_INTERPRET: the ops choose their
GPU path when they are imported, so this must not share a process with the interpreter tests.
"""

import json
import os
import re
import subprocess
import sys
import tempfile

import triton
from triton.backends.compiler import GPUTarget

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(
    1, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
)  # the repo root
import triton_kernels as K  # noqa: E402

TARGET = GPUTarget("cuda", 90, 32)
NVDISASM = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "nvdisasm")


def ptxas_release() -> str:
    """The release of the ptxas Triton compiles sm_90 with, e.g. "12.8"."""
    from triton.backends.nvidia.compiler import get_ptxas

    ptxas = get_ptxas(TARGET.arch)
    out = subprocess.run([ptxas.path, "--version"], capture_output=True, text=True).stdout
    return re.search(r"release (\d+\.\d+)", out).group(1)


ADD_SIG = {
    "x": "*fp32",
    "y": "*fp32",
    "out": "*fp32",
    "n": "i32",
    "prof": "*i64",
    "BLOCK": "constexpr",
    "PROFILE": "constexpr",
}
LOOP_SIG = {
    "out": "*fp32",
    "iters": "i32",
    "prof": "*i64",
    "GROUP": "i32",
    "PROFILE": "constexpr",
    "PER_WARP": "constexpr",
    "NUM_WARPS": "constexpr",
    "STAGE": "constexpr",
}


def compile_(fn, sig, consts, **opts):
    src = triton.compiler.ASTSource(fn=fn, signature=sig, constexprs=consts)
    return triton.compile(src, target=TARGET, options=opts or None)


def sass(kernel) -> list[str]:
    """Instructions of the kernel's cubin, without the NOP padding after the end."""
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(kernel.asm["cubin"])
        f.flush()
        out = subprocess.run([NVDISASM, "-c", f.name], capture_output=True, text=True, check=True)
    ins = []
    for line in out.stdout.splitlines():
        m = re.match(r"\s+/\*[0-9a-f]{4}\*/\s+(.*?)\s*;", line)
        if m:
            ins.append(m.group(1).strip())
    while ins and ins[-1].startswith(("NOP", "BRA")):
        ins.pop()
    return ins


def main():
    res = {"triton": triton.__version__, "ptxas_release": ptxas_release()}
    ptx_on = compile_(K.add_kernel, ADD_SIG, {"BLOCK": 1024, "PROFILE": True}).asm["ptx"]
    ptx_off = compile_(K.add_kernel, ADD_SIG, {"BLOCK": 1024, "PROFILE": False}).asm["ptx"]
    ptx_plain = compile_(K.plain_add_kernel, ADD_SIG, {"BLOCK": 1024, "PROFILE": False}).asm["ptx"]
    res["add_ptx_on"], res["add_ptx_off"], res["add_ptx_plain"] = ptx_on, ptx_off, ptx_plain
    sig = {
        "prof": "*i64",
        "N_EVENTS": "constexpr",
        "STAGE": "constexpr",
        "PER_WARP": "constexpr",
        "RING": "constexpr",
    }
    for n in (4, 12):
        consts = {"N_EVENTS": n, "STAGE": 0, "PER_WARP": False, "RING": False}
        res[f"straight_{n}"] = sass(compile_(K.straight_kernel, sig, consts))
        # Ring-capable ops (RING=True): the same events with the slot wrapped by a mask.
        k = compile_(K.straight_kernel, sig, dict(consts, RING=True))
        res[f"ring_straight_{n}"] = sass(k)
        res[f"ring_straight_{n}_ptx"] = k.asm["ptx"]
    for per_warp in (False, True):
        k = compile_(
            K.loop_kernel,
            LOOP_SIG,
            {"PROFILE": True, "PER_WARP": per_warp, "NUM_WARPS": 4, "STAGE": 0},
        )
        res[f"loop_sass_warp{int(per_warp)}"] = sass(k)
        res[f"loop_ptx_warp{int(per_warp)}"] = k.asm["ptx"]
    # Staged (per warp, STAGE > 0): events into shared memory, one flush at the end.
    for n in (4, 12):
        k = compile_(
            K.straight_kernel, sig, {"N_EVENTS": n, "STAGE": 32, "PER_WARP": True, "RING": False}
        )
        res[f"staged_straight_{n}"] = sass(k)
        res[f"staged_straight_{n}_ptx"] = k.asm["ptx"]
    consts = {"PROFILE": True, "PER_WARP": True, "NUM_WARPS": 4, "STAGE": 64}
    res["staged_loop"] = sass(compile_(K.loop_kernel, LOOP_SIG, consts))
    # A persistent loop with ring-capable ops and without.
    ring_sig = {
        "prof": "*i64",
        "iters": "i32",
        "PROFILE": "constexpr",
        "RING": "constexpr",
        "PER_WARP": "constexpr",
        "NUM_WARPS": "constexpr",
    }
    for ring in (False, True):
        consts = {"PROFILE": True, "RING": ring, "PER_WARP": False, "NUM_WARPS": 4}
        res[f"ring_loop_{int(ring)}"] = sass(compile_(K.ring_kernel, ring_sig, consts))
    json.dump(res, sys.stdout)


if __name__ == "__main__":
    main()
