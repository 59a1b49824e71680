"""Auto mode: every Triton and Gluon kernel of a region, instrumented by the compiler, no source
change (docs/auto.md). The recording front end, one layer at the API's level (it may import
everything below; nothing below imports it): what it records is read by the layers, its buffer
and file in wire/ (auto_records.py, auto_areas.py, auto_schedule.py, auto_file.py), its table in
trace/auto_table.py, its report in report/auto_report.py, its rank files in export/auto_job.py
and export/auto_torch_parts.py (docs/architecture.md).
`sm_profiler.auto()` makes an AutoProfiler::

    with sm_profiler.auto() as prof:
        loss = compiled_model(x).sum(); loss.backward()
    prof.print_stats()                       # the model's kernels: time, waves, tail, idle SMs
    prof.export("model.perfetto-trace")      # each SM's resident programs over time

binding.py meets Triton, Inductor and the driver (driver.py: the libcuda calls; state.py: what is
on, the buffers, the copy-out; graph_switch.py and graph_stage.py: a CUDA graph's off clone and
its staged replays); rewrite.py splices the record into PTX (the text is ptx.py's); registers.py
keeps the record's registers; session.py is the AutoProfiler; script.py runs a script under
`sm-profiler run`, stop_signals.py its stop signals, rescue.py the read of a stopped run's
buffers while its GPU is stuck; torch_profiler.py torch.profiler beside the recorded steps;
flight.py the flight recorder (every step in the ring, the last steps written when something
goes wrong), flight_triggers.py when it writes.
"""

from __future__ import annotations

from .session import DEFAULT_CAPACITY, AutoProfiler, current

__all__ = ["AutoProfiler", "DEFAULT_CAPACITY", "current"]


def __getattr__(name: str):  # the old paths of its parts that moved to their layers (moved.py)
    from ..moved import moved_from

    module = moved_from(__name__, name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return module
