"""sm_profiler: zero-sync in-kernel profiling for Triton and CuteDSL kernels.

Device ops stamp %globaltimer and %smid into a fixed-layout buffer (see `sm_profiler.wire.format`);
the host decodes it (`decode`), prints statistics and exports Perfetto / Chrome traces.
Heavy imports (torch, triton) happen only where they are needed.
"""

from __future__ import annotations

from . import moved as _moved
from .errors import (
    CaptureError,
    ConfigError,
    FormatError,
    MissingDependencyError,
    SmProfilerError,
    UsageError,
)
from .trace.decode import decode
from .trace.model import TraceData
from .wire.capture import Capture, load, save_many

# Auto files: their reader registers itself with `load` (capture.FILE_READERS); the table views
# with TraceData.to_pandas / to_arrow (trace.TABLE_VIEWS).
from .report import tables as _tables  # noqa: E402, F401  isort: skip
from .trace import auto_table as _auto_table  # noqa: E402, F401  isort: skip

__version__ = "0.1.0"

__all__ = [
    "SmProfiler",
    "auto",
    "schedule",
    "flight_recorder",
    "AutoProfiler",
    "cuda_include_dir",
    "merge_torch_trace",
    "merge_ranks",
    "torch_coverage",
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
    from .record.cuda import include_dir

    return include_dir()


# The layer folders, loaded on first use as `sm_profiler.report`; the old module paths
# (`sm_profiler.stats`) resolve through moved.py. Not triton_ops: importing it reads
# TRITON_INTERPRET, which must happen where the user imports it, after setting the switch.
_SUBMODULES = ("cli", "export", "record", "report", "trace", "wire")
_moved.install()


def auto(capacity: int | None = None, **options):
    """Auto mode: every Triton and Gluon kernel compiled in a region is instrumented, no source
    change (docs/auto.md)::

        with sm_profiler.auto(schedule=sm_profiler.schedule(skip_first=1000, active=5)) as prof:
            for batch in data:
                train_step(batch)
                prof.step()
        prof.print_stats()

    An AutoProfiler (options by keyword, passed on to it): capacity: records kept per GPU
    (default 2**22, 128 MiB of each GPU recorded); ring: keep the newest instead of the first;
    level: 'program' or 'warp'; device: one GPU only (default: every GPU used); schedule: the
    steps recorded (sm_profiler.schedule, or '1000-1005'); count_optimizer_steps: a step is each
    optimizer step (no prof.step() needed); via_triton: torch.compile'd matmuls and attention run
    as Triton kernels (Inductor's templates, FlexAttention) so auto mode sees inside them, in
    place of cuBLAS/cuDNN; torch_profiler: torch.profiler (CPU ops, every CUDA kernel via CUPTI)
    records the same steps, numbered as ours (prof.torch_trace(), prof.merge_torch(path); the
    report's share seen from CUPTI); flight_recorder: every step recorded into the ring, the last
    K steps written when a step is slow, the job stalls or ends badly, or on SIGUSR1 (True, K, or
    sm_profiler.flight_recorder(...))."""
    from .auto_mode import DEFAULT_CAPACITY, AutoProfiler

    return AutoProfiler(DEFAULT_CAPACITY if capacity is None else capacity, **options)


def schedule(wait: int = 0, warmup: int = 0, active: int = 1, repeat: int = 0, skip_first: int = 0):
    """Which steps auto mode records, as torch.profiler.schedule: skip_first steps, then cycles
    of wait + warmup steps off and active steps recorded, repeat times (0: forever)."""
    from .wire.auto_schedule import Schedule

    return Schedule(wait, warmup, active, repeat, skip_first)


def flight_recorder(
    steps: int = 8,
    slow_factor: float = 1.5,
    stall_s: float | None = None,
    dump_window_s: float = 300.0,
    max_dumps: int = 10,
    out: str = "sm_profiler_flight",
):
    """The flight recorder's settings, for sm_profiler.auto(flight_recorder=...) (docs/auto.md,
    "Flight recorder"): the last `steps` steps written into `out` when a step takes over
    `slow_factor` times the median of the recent steps, when no step ends within `stall_s`
    seconds (None: 10 times the longest recent step, at least 60 s), on SIGUSR1 and at a bad
    end; at most one slow and one stall dump in `dump_window_s` seconds, `max_dumps` in all."""
    from .auto_mode.flight_triggers import FlightConfig

    return FlightConfig(steps, slow_factor, stall_s, dump_window_s, max_dumps, out)


def __getattr__(name):
    if name == "AutoProfiler":
        from .auto_mode import AutoProfiler

        return AutoProfiler
    # SmProfiler imports torch lazily, but keep even its module out of `import sm_profiler`.
    if name == "SmProfiler":
        from .profiler import SmProfiler

        return SmProfiler
    if name in ("merge_torch_trace", "merge_ranks"):
        from .export import merge

        return getattr(merge, name)
    if name == "torch_coverage":
        from .report.coverage import torch_coverage

        return torch_coverage
    if name in _SUBMODULES:
        import importlib

        return importlib.import_module(f".{name}", __name__)
    if name in _moved.MOVED and name not in _moved.PERMANENT:
        return _moved.resolve(name)
    if name == "triton_ops":
        raise AttributeError(
            "sm_profiler.triton_ops is not loaded by 'import sm_profiler': import it (from "
            "sm_profiler.triton_ops import profiler_init, ...) after setting TRITON_INTERPRET"
        )
    raise AttributeError(f"module 'sm_profiler' has no attribute {name!r}")
