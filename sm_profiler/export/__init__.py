"""Writers: Perfetto and Chrome JSON traces (by name or file extension), PNG, merged ranks (and
auto mode's rank files: auto_job.py, auto_torch_parts.py). May import report/, trace/, wire/
and the basics; never record/, auto_mode/ or the CLI.

Data flows one way: a decoded `TraceData` -> its `Timeline` (sm_profiler.trace.timeline: every
track, its order, name and contents, built here with the user's options) -> its `Drawing`
(sm_profiler.trace.drawing: the same as plain data, names as strings and rows as numpy columns,
taken from the Timeline once) -> a writer that reads only the drawing and serialises it
(perfetto.py, with protobuf.py's encoding; chrome.py; plot.py draws one per launch; merge.py
hands one per rank to the same writers). A writer given a Timeline draws it first. A new output
format is a writer taking a Drawing plus one entry in formats.py's registry (FORMATS), which
export() and the CLI read. Nothing here imports from the device side.
"""

from __future__ import annotations

import gzip
import os
from dataclasses import replace

from ..errors import ConfigError
from ..paths import atomic_output, check_writable
from ..text import plural
from ..trace.drawing import drawing_of
from ..trace.model import TraceData
from ..trace.timeline import Timeline, build
from . import formats
from .formats import EXTENSIONS, FORMATS, Format, register  # noqa: F401 (the registry)

__all__ = ["export", "to_perfetto_bytes", "to_chrome_json", "EXTENSIONS", "FORMATS", "register"]


def export(
    trace: TraceData, path: str | os.PathLike, format: str | None = None, **options
) -> list[str]:
    """Write `trace` to `path` in one of the registered formats (FORMATS: Perfetto protobuf,
    Chrome JSON); returns the notes saying what was cut or summarised (empty when the trace is
    exported whole).

    Options (see `timeline`): capture=N (one launch), cut_gaps=True (launches end to end, host
    gaps cut and marked), filters sms=, blocks=, groups=, events=, window_ns=(start, end), and
    summary= / detail_sms= (traces above timeline.SUMMARY_ROWS rows are summarised by default;
    a UserWarning then says what was summarised and how to get the rest).

    The format follows the extension (EXTENSIONS: .perfetto-trace / .pftrace, .json / .json.gz)
    unless `format` (a name of FORMATS: "perfetto" or "chrome") is given; a path ending .gz is
    written gzipped. The path is checked before any work, and the file is written under a
    temporary name and renamed, so a bad path or a failed write raises CaptureError and an
    existing file is never half-overwritten.
    """
    fmt = _format_for(path, format)
    check_writable(path)
    tl = timeline(trace, **options)
    gz = os.fspath(path).lower().endswith(".gz")
    # Written to a temporary name and renamed: a failure part-way leaves an older file intact.
    with atomic_output(path) as tmp, (gzip.open if gz else open)(tmp, "wb") as f:
        fmt.write(drawing_of(tl), f)
    return list(tl.notes)


def to_perfetto_bytes(trace: TraceData, **options) -> bytes:
    """The whole Perfetto trace (a serialized `perfetto.protos.Trace`) as bytes; `options` are
    export's (capture, cut_gaps)."""
    from .perfetto import to_perfetto_bytes as impl

    return impl(timeline(trace, **options))


def to_chrome_json(trace: TraceData, **options) -> dict:
    """The Chrome trace-event JSON object ({"traceEvents": [...], ...})."""
    from .chrome import to_chrome_json as impl

    return impl(timeline(trace, **options))


def timeline(trace: TraceData, capture: int | None = None, **options) -> Timeline:
    """The timeline model an export renders (sm_profiler.trace.timeline.build, whose keywords
    `options` are), of one capture when `capture` is given."""
    if capture is not None:
        n = len(trace.kernels)
        if isinstance(capture, bool) or not isinstance(capture, int) or not -n <= capture < n:
            raise ConfigError(
                f"capture={capture!r}: this trace holds {plural(n, 'capture')} (0..{n - 1}); "
                "`sm-profiler info` lists them"
            )
        whole = len(trace)
        trace = trace.select_capture(capture % n)
    tl = build(trace, **options)
    if tl.summary is not None and options.get("summary") is None:
        import warnings

        warnings.warn(tl.notes[-1], UserWarning, stacklevel=3)
    if capture is not None:
        only = f"capture {capture} only: {len(trace):,} of {whole:,} ranges and instants"
        tl = replace(tl, notes=[*tl.notes, only])
    return tl


def _format_for(path: str | os.PathLike, format: str | None) -> Format:
    if format is not None:
        if format not in FORMATS:  # a format's name; the CLI takes its aliases too
            raise ConfigError(f"unknown export format {format!r}; use one of {', '.join(FORMATS)}")
        return FORMATS[format]
    fmt = formats.of_path(path)
    if fmt is None:
        raise formats.unknown_extension(path, "format='{}'")
    return fmt


def __getattr__(name: str):  # a submodule loads on first use (moved.submodule)
    from ..moved import submodule

    return submodule(__name__, name)
