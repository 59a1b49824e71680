"""CPU-side CUDA compilers for the header tests: NVRTC (the nvidia-cuda-nvrtc wheel, via ctypes),
Triton's ptxas / nvdisasm, and the system C++ compiler. Each finder returns None when absent, so
the tests that need it skip."""

from __future__ import annotations

import ctypes
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

from sm_profiler.record.cuda import include_dir


def _nvrtc_paths() -> list[str]:
    roots = [p for p in sys.path if p.endswith("site-packages") and os.path.isdir(p)]
    found = []
    for root in roots:
        found += sorted(glob.glob(os.path.join(root, "nvidia", "*", "lib", "libnvrtc.so*")))
        found += sorted(glob.glob(os.path.join(root, "nvidia", "*", "*", "lib", "libnvrtc.so*")))
    return [p for p in found if "builtins" not in p]


_NVRTC = None


def nvrtc():
    """The NVRTC library (ctypes), or None if no nvidia-cuda-nvrtc wheel is installed."""
    global _NVRTC
    if _NVRTC is None:
        _NVRTC = False
        for path in _nvrtc_paths():
            try:
                lib = ctypes.CDLL(path)
            except OSError:
                continue
            lib.nvrtcGetErrorString.restype = ctypes.c_char_p
            _NVRTC = lib
            break
    return _NVRTC or None


def nvrtc_version() -> tuple[int, int]:
    lib = nvrtc()
    major, minor = ctypes.c_int(), ctypes.c_int()
    lib.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor))
    return major.value, minor.value


def nvrtc_ptx(source: str, arch: str = "sm_90", defines: tuple[str, ...] = ()) -> str:
    """Compile `source` with NVRTC (the header's folder on the include path) to PTX."""
    lib = nvrtc()
    prog = ctypes.c_void_p()
    check = _checker(lib)
    check(lib.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), b"k.cu", 0, None, None))
    opts = [f"--gpu-architecture={arch}", f"-I{include_dir()}", "-std=c++17"]
    opts += [f"-D{d}" for d in defines]
    arr = (ctypes.c_char_p * len(opts))(*[o.encode() for o in opts])
    try:
        rc = lib.nvrtcCompileProgram(prog, len(opts), arr)
        if rc != 0:
            size = ctypes.c_size_t()
            lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
            log = ctypes.create_string_buffer(size.value)
            lib.nvrtcGetProgramLog(prog, log)
            raise RuntimeError(f"NVRTC failed:\n{log.value.decode(errors='replace')}")
        size = ctypes.c_size_t()
        check(lib.nvrtcGetPTXSize(prog, ctypes.byref(size)))
        buf = ctypes.create_string_buffer(size.value)
        check(lib.nvrtcGetPTX(prog, buf))
        return buf.value.decode()
    finally:
        lib.nvrtcDestroyProgram(ctypes.byref(prog))


def _checker(lib):
    def check(rc):
        if rc != 0:
            raise RuntimeError(f"NVRTC error {rc}: {lib.nvrtcGetErrorString(rc).decode()}")

    return check


def triton_bin(name: str) -> str | None:
    """A tool Triton ships (ptxas, nvdisasm, cuobjdump), or None."""
    try:
        import triton
    except ImportError:
        return None
    path = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", name)
    return path if os.access(path, os.X_OK) else None


def ptxas_release(ptxas: str) -> tuple[int, int]:
    out = subprocess.run([ptxas, "--version"], capture_output=True, text=True).stdout
    m = re.search(r"release (\d+)\.(\d+)", out)
    return int(m.group(1)), int(m.group(2))


def sass(ptx: str, arch: str = "sm_90") -> str:
    """PTX -> cubin (Triton's ptxas) -> SASS text (nvdisasm), instructions only.

    NVRTC may be newer than Triton's ptxas: the PTX's `.version` is lowered to the highest ISA
    that ptxas reads (12.x reads 8.(x-1), 13.x reads 9.x); the header uses nothing newer."""
    ptxas, nvdisasm = triton_bin("ptxas"), triton_bin("nvdisasm")
    major, minor = ptxas_release(ptxas)
    isa = f"{8 if major == 12 else major - 4}.{minor - 1 if major == 12 else minor}"
    ptx = re.sub(r"^\.version \d+\.\d+", f".version {isa}", ptx, count=1, flags=re.M)
    with tempfile.TemporaryDirectory() as d:
        src, cubin = os.path.join(d, "k.ptx"), os.path.join(d, "k.cubin")
        with open(src, "w") as f:
            f.write(ptx)
        subprocess.run([ptxas, f"-arch={arch}", src, "-o", cubin], check=True, capture_output=True)
        out = subprocess.run(
            [nvdisasm, "-c", cubin], check=True, capture_output=True, text=True
        ).stdout
    lines = []
    for line in out.splitlines():
        m = re.match(r"\s*/\*[0-9a-f]+\*/\s+(.*?)\s*;", line)
        if m:
            lines.append(re.sub(r"\s+", " ", m.group(1)))
    return "\n".join(lines)


def cxx() -> str | None:
    """The system C++ compiler, or None."""
    return shutil.which("g++") or shutil.which("c++") or shutil.which("clang++")
