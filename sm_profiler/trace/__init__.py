"""The decoded trace: the model (model.py: TraceData, RANGE, ...; launches.py: its launches as one
table, whatever recorded them), decoding a capture into it, range nesting, summary counters, the
timeline every viewer shows and its drawing (drawing.py: the timeline as plain data, what every
writer reads). Imports wire/ and basics.

`sm_profiler.trace.TraceData` and the other names of the model are importable from here too."""

from .launches import CaptureTable, LaunchTable  # noqa: F401
from .model import (  # noqa: F401 (sm_profiler.trace.X, as before the folders)
    EVENT_COLUMNS,
    INSTANT,
    LANE_COLUMNS,
    RANGE,
    TABLE_VIEWS,
    UNMATCHED_BEGIN,
    UNMATCHED_COLUMNS,
    UNMATCHED_END,
    KernelInfo,
    TraceData,
)


def __getattr__(name: str):  # a submodule loads on first use (moved.submodule)
    from ..moved import submodule

    return submodule(__name__, name)
