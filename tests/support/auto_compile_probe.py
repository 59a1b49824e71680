"""Compile the auto-mode kernels for sm_90 and sm_100 on the CPU with auto mode on, off and
never on; print what the tests check as JSON. Run by test_auto_compile.py without
TRITON_INTERPRET, in a process of its own (auto mode changes process-wide compiler settings)."""

import base64
import json
import os
import sys
import tempfile

import triton
from triton.backends.compiler import GPUTarget

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(
    1, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
)  # the repo root
import auto_kernels as K  # noqa: E402
from triton_compile_probe import sass  # noqa: E402

from sm_profiler.auto_mode import binding, registers  # noqa: E402
from sm_profiler.record import ptx  # noqa: E402


def compile_(fn, sig, consts, opts, arch, cache_dir):
    triton.knobs.cache.dir = cache_dir
    return triton.compile(
        triton.compiler.ASTSource(fn, sig, consts), target=GPUTarget("cuda", arch, 32), options=opts
    )


class _Cubin:
    """A cubin as `sass` takes a compiled kernel."""

    def __init__(self, cubin: bytes):
        self.asm = {"cubin": cubin}


def count(ins, *needles):
    return sum(1 for i in ins if any(n in i for n in needles))


def inductor_kernels(root: str) -> dict:
    """Compile the Inductor-generated kernels of fixtures/inductor_kernels.tgz instrumented, for
    sm_90 and sm_100. Returns {file: {"name", "ok_90", "ok_100"} or the error}."""
    import importlib.util
    import tarfile

    from torch._inductor.runtime import triton_helpers

    triton_helpers.set_driver_to_gpu = lambda: None  # their import asks for a GPU driver
    d = os.path.join(root, "inductor")
    with tarfile.open(
        os.path.join(
            os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
            "fixtures",
            "inductor_kernels.tgz",
        )
    ) as tf:
        try:
            tf.extractall(d, filter="data")
        except TypeError:  # Python without extraction filters: our own fixture, plain files
            tf.extractall(d)
    out = {}
    for f in sorted(os.listdir(d)):
        spec = importlib.util.spec_from_file_location(f[:-3], os.path.join(d, f))
        mod = importlib.util.module_from_spec(spec)
        try:
            spec.loader.exec_module(mod)
            kern = next(v for v in vars(mod).values() if hasattr(v, "triton_meta"))
            cfg = kern.configs[0]
            consts = {**kern.triton_meta.get("constants", {}), **cfg.kwargs}
            sig = {
                k: "constexpr" if k in consts else v
                for k, v in kern.triton_meta["signature"].items()
            }
            opts = {"num_warps": cfg.num_warps, "num_stages": cfg.num_stages}
            r = out[f] = {"name": kern.fn.__name__}
            plain = compile_(kern.fn, sig, consts, opts, 90, os.path.join(root, "i90plain"))
            binding.turn_on("program")
            try:
                for arch in (90, 100):
                    k = compile_(kern.fn, sig, consts, opts, arch, os.path.join(root, f"i{arch}"))
                    r[f"ok_{arch}"] = ptx.AUTO_MARK in k.asm["ptx"] and len(k.asm["cubin"]) > 0
                    if arch == 90:  # occupancy, plain and instrumented (auto_mode/registers.py)
                        threads = registers.threads_of(k.asm["ptx"])
                        r["blocks"] = [
                            registers.blocks_per_sm(registers.usage(c.asm["cubin"])[0], threads)
                            for c in (plain, k)
                        ]
            finally:
                binding.turn_off()
        except Exception as e:  # reported, and the test says which file
            out[f] = {"error": f"{type(e).__name__}: {str(e)[:300]}"}
    return out


def main():
    res = {"triton": triton.__version__, "cases": {}}
    root = tempfile.mkdtemp()
    for name, fn, sig, consts, opts in K.CASES:
        for arch in (90, 100):
            r = res["cases"][f"{name}_{arch}"] = {}
            plain = compile_(fn, sig, consts, opts, arch, os.path.join(root, f"{name}{arch}a"))
            for level in ("program", "warp"):
                binding.turn_on(level)
                k = compile_(
                    fn, sig, consts, opts, arch, os.path.join(root, f"{name}{arch}{level}")
                )
                binding.turn_off()
                kept_plain = base64.b64decode(getattr(k.metadata, binding.PLAIN_KEY, "") or "")
                r[level] = {
                    "instrumented": ptx.AUTO_MARK in k.asm["ptx"],
                    "mode": k.metadata.instrumentation_mode,
                    "cubin_bytes": len(k.asm["cubin"]),
                    "hash": k.hash,
                    "scratch": [k.metadata.profile_scratch_size, k.metadata.num_warps],
                    # the plain binary kept beside it: what a launch that records nothing runs
                    "plain_cubin_identical": kept_plain == plain.asm["cubin"],
                    # %globaltimer reads (the record's) and instructions: the plain compile's
                    "plain_sass": [count(s := sass(_Cubin(kept_plain)), "GLOBALTIMER"), len(s)],
                    "sass": [count(s := sass(plain), "GLOBALTIMER"), len(s)],
                }
                if arch == 90 and level == "program":
                    a, b = sass(plain), sass(k)
                    r["sass"] = {
                        "timer_plain": count(a, "GLOBALTIMER"),
                        "timer_auto": count(b, "GLOBALTIMER"),
                        "stg_plain": count(a, "STG"),
                        "stg_auto": count(b, "STG"),
                        "atom_plain": count(a, "ATOM", "RED"),
                        "atom_auto": count(b, "ATOM", "RED"),
                        "ldg_plain": count(a, "LDG"),
                        "ldg_auto": count(b, "LDG"),
                        "added": len(b) - len(a),
                    }
            after = compile_(fn, sig, consts, opts, arch, os.path.join(root, f"{name}{arch}b"))
            r["plain_identical"] = plain.asm["ptx"] == after.asm["ptx"]
            r["plain_instrumented"] = ptx.AUTO_MARK in plain.asm["ptx"]
    # One cache directory: plain, on, off, on again.
    name, fn, sig, consts, opts = K.CASES[0]
    d = os.path.join(root, "shared")
    k0 = compile_(fn, sig, consts, opts, 90, d)
    binding.turn_on("program")
    k1 = compile_(fn, sig, consts, opts, 90, d)
    binding.turn_off()
    k2 = compile_(fn, sig, consts, opts, 90, d)
    entries = len(os.listdir(d))
    binding.turn_on("program")
    k3 = compile_(fn, sig, consts, opts, 90, d)
    binding.turn_off()
    res["cache"] = {
        "hashes": [k0.hash, k1.hash, k2.hash, k3.hash],
        "instrumented": [ptx.AUTO_MARK in k.asm["ptx"] for k in (k0, k1, k2, k3)],
        "entries_before": entries,
        "entries_after": len(os.listdir(d)),
    }
    res["inductor"] = inductor_kernels(root)
    # Gluon: a warp-specialized kernel.
    try:
        import gluon_kernels as G
        from triton.experimental.gluon._runtime import GluonASTSource

        sig = {
            "out": "*fp32",
            "iters": "i32",
            "prof": "*i64",
            "PROFILE": "constexpr",
            "PER_WARP": "constexpr",
            "WORKER_WARPS": "constexpr",
        }
        consts = {"PROFILE": False, "PER_WARP": False, "WORKER_WARPS": 2}
        for arch in (90, 100):
            for level in ("program", "warp"):
                binding.turn_on(level)
                triton.knobs.cache.dir = os.path.join(root, f"gluon{arch}{level}")
                k = triton.compile(
                    GluonASTSource(G.plain_ws_loop_kernel, sig, consts),
                    target=GPUTarget("cuda", arch, 32),
                )
                binding.turn_off()
                res[f"gluon_ws_{arch}_{level}"] = {
                    "instrumented": ptx.AUTO_MARK in k.asm["ptx"],
                    "cubin_bytes": len(k.asm["cubin"]),
                }
    except ImportError as e:
        res["gluon_error"] = str(e)
    json.dump(res, sys.stdout)


if __name__ == "__main__":
    main()
