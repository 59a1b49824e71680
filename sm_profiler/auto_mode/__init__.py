"""Auto mode: every Triton and Gluon kernel of a region, instrumented by the compiler, no source
change (docs/auto.md). `sm_profiler.auto()` makes an AutoProfiler::

    with sm_profiler.auto() as prof:
        loss = compiled_model(x).sum(); loss.backward()
    prof.print_stats()                       # the model's kernels: time, waves, tail, idle SMs
    prof.export("model.perfetto-trace")      # each SM's resident programs over time

binding.py meets Triton, Inductor and the driver; rewrite.py splices the record into PTX (the
text is ptx.py's); records.py turns the buffer into one Capture per launch; report.py the table.
"""

from __future__ import annotations

from .session import DEFAULT_CAPACITY, AutoProfiler

__all__ = ["AutoProfiler", "DEFAULT_CAPACITY"]
