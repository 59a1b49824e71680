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
)
from .trace import TraceData

__version__ = "0.1.0"

__all__ = [
    "SmProfiler",
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
]


def __getattr__(name):
    # SmProfiler imports torch lazily, but keep even its module out of `import sm_profiler`.
    if name == "SmProfiler":
        from .profiler import SmProfiler

        return SmProfiler
    raise AttributeError(f"module 'sm_profiler' has no attribute {name!r}")
