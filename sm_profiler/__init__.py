"""sm_profiler: zero-sync in-kernel profiling for Triton and CuteDSL kernels.

Device ops stamp %globaltimer and %smid into a fixed-layout buffer (see `sm_profiler.format`);
the host decodes it (`decode`), prints statistics and exports Perfetto / Chrome traces.
Heavy imports (torch, triton) happen only where they are needed.
"""

from __future__ import annotations

from .capture import Capture, load, save_many
from .decode import decode
from .errors import (
    CaptureError,
    ConfigError,
    FormatError,
    MissingDependencyError,
    SmProfilerError,
    UsageError,
)
from .trace import TraceData

__version__ = "0.1.0"

__all__ = [
    "SmProfiler",
    "auto",
    "AutoProfiler",
    "cuda_include_dir",
    "merge_torch_trace",
    "merge_ranks",
    "Capture",
    "TraceData",
    "decode",
    "load",
    "save_many",
    "SmProfilerError",
    "ConfigError",
    "FormatError",
    "CaptureError",
    "MissingDependencyError",
    "UsageError",
]


def cuda_include_dir() -> str:
    """The folder of the CUDA C++ headers (sm_profiler.cuh, sm_profiler_host.h), for
    `nvcc -I`, NVRTC's `-I` or load_inline's `extra_include_paths` (docs/cuda.md)."""
    from .cuda import include_dir

    return include_dir()


# Host submodules that `sm_profiler.NAME` loads on first use, as the docs write them
# (`sm_profiler.stats.compute_stats`). Not triton_ops: importing it reads TRITON_INTERPRET, which
# must happen where the user imports it, after setting the switch.
_SUBMODULES = (
    "capture",
    "cli",
    "cuda",
    "decode",
    "export",
    "format",
    "merge",
    "plot",
    "stats",
    "stats_table",
    "tables",
    "timeline",
    "trace",
    "ui_server",
)


def auto(capacity: int | None = None, *, ring: bool = False, level: str = "program", device=None):
    """Auto mode: every Triton and Gluon kernel compiled in a region is instrumented, no source
    change (docs/auto.md)::

        with sm_profiler.auto() as prof:
            compiled_model(x)
        prof.print_stats()

    capacity: records kept (a power of two; default 2**22, 128 MiB of GPU memory); ring: keep the
    newest instead of the first; level: 'program' or 'warp'."""
    from .auto_mode import DEFAULT_CAPACITY, AutoProfiler

    return AutoProfiler(
        DEFAULT_CAPACITY if capacity is None else capacity, ring=ring, level=level, device=device
    )


def __getattr__(name):
    if name == "AutoProfiler":
        from .auto_mode import AutoProfiler

        return AutoProfiler
    # SmProfiler imports torch lazily, but keep even its module out of `import sm_profiler`.
    if name == "SmProfiler":
        from .profiler import SmProfiler

        return SmProfiler
    if name in ("merge_torch_trace", "merge_ranks"):
        from . import merge

        return getattr(merge, name)
    if name in _SUBMODULES:
        import importlib

        return importlib.import_module(f".{name}", __name__)
    if name == "triton_ops":
        raise AttributeError(
            "sm_profiler.triton_ops is not loaded by 'import sm_profiler': import it (from "
            "sm_profiler.triton_ops import profiler_init, ...) after setting TRITON_INTERPRET"
        )
    raise AttributeError(f"module 'sm_profiler' has no attribute {name!r}")
