"""CuteDSL device ops for sm_profiler: record ranges and instants from a @cute.kernel.

    import cute_ops

    @cute.kernel
    def kernel(..., prof_buf: cute.Tensor, PROFILE: cutlass.Constexpr[bool]):
        prof = cute_ops.init(prof_buf, block=bidx, group=0, enabled=PROFILE)
        with prof.region(LOAD):
            x = a[i]
        prof.start(COMPUTE)
        ...
        prof.end(COMPUTE, after=y)

See docs/cute.md. The buffer layout is sm_profiler.wire.format's, decoded by the same host code.
"""

from __future__ import annotations

try:
    import cutlass  # noqa: F401
except ImportError as e:  # pragma: no cover - depends on the environment
    raise ImportError(
        "cute_ops needs CuteDSL (nvidia-cutlass-dsl): pip install -e '.[cute]' (from "
        "sm_profiler's repository root) or pip install nvidia-cutlass-dsl==4.8.1"
    ) from e

from .ops import Profiler, init, read_globaltimer

__all__ = ["Profiler", "init", "read_globaltimer"]
