"""Writers: Perfetto and Chrome JSON traces (by name or file extension), PNG, merged ranks.
May import report/, trace/, wire/ and the basics; never record/ or the CLI.

Data flows one way: a decoded `TraceData` -> its `Timeline` (sm_profiler.trace.timeline: every
track, its order, name and contents, built here with the user's options) -> its `Drawing`
(sm_profiler.trace.drawing: the same as plain data, names as strings and rows as numpy columns,
taken from the Timeline once) -> a writer that reads only the drawing and serialises it
(perfetto.py, with protobuf.py's encoding; chrome.py; plot.py draws one per launch; merge.py
hands one per rank to the same writers). A writer given a Timeline draws it first. A new output
format is a new writer module taking a Drawing. Nothing here imports from the device side.
"""

from __future__ import annotations

import gzip
import os

from ..errors import ConfigError
from ..paths import atomic_output, check_writable
from ..text import plural
from ..trace.model import TraceData
from ..trace.timeline import Timeline, build

__all__ = ["export", "to_perfetto_bytes", "to_chrome_json", "EXTENSIONS"]

# Extension -> format name. Longest suffix first, so ".json.gz" wins over ".gz".
EXTENSIONS = {
    ".perfetto-trace": "perfetto",
    ".pftrace": "perfetto",
    ".json.gz": "chrome",
    ".json": "chrome",
}
FORMATS = ("perfetto", "chrome")


def export(
    trace: TraceData, path: str | os.PathLike, format: str | None = None, **options
) -> list[str]:
    """Write `trace` to `path` as Perfetto protobuf or Chrome JSON; returns the notes saying
    what was cut or summarised (empty when the trace is exported whole).

    Options (see `timeline`): capture=N (one launch), cut_gaps=True (launches end to end, host
    gaps cut and marked), filters sms=, blocks=, groups=, events=, window_ns=(start, end), and
    summary= / detail_sms= (traces above timeline.SUMMARY_ROWS rows are summarised by default;
    a UserWarning then says what was summarised and how to get the rest).

    The format follows the extension (.perfetto-trace / .pftrace, .json / .json.gz) unless
    `format` ("perfetto" or "chrome") is given. The path is checked before any work, and the
    file is written under a temporary name and renamed, so a bad path or a failed write raises
    CaptureError and an existing file is never half-overwritten.
    """
    fmt_name = _format_for(path, format)
    check_writable(path)
    tl = timeline(trace, **options)
    gz = os.fspath(path).lower().endswith(".gz")
    # Written to a temporary name and renamed: a failure part-way leaves an older file intact.
    with atomic_output(path) as tmp:
        if fmt_name == "perfetto":
            from .perfetto import iter_perfetto_chunks

            opener = gzip.open if gz else open
            with opener(tmp, "wb") as f:
                for chunk in iter_perfetto_chunks(tl):
                    f.write(chunk)
        else:
            from .chrome import write_chrome_json

            write_chrome_json(tl, tmp, compress=gz)
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
        tl.notes.append(f"capture {capture} only: {len(trace):,} of {whole:,} ranges and instants")
    return tl


def _format_for(path: str | os.PathLike, format: str | None) -> str:
    if format is not None:
        if format not in FORMATS:
            raise ConfigError(f"unknown export format {format!r}; use one of {', '.join(FORMATS)}")
        return format
    name = os.fspath(path).lower()
    for ext, fmt_name in EXTENSIONS.items():
        if name.endswith(ext):
            return fmt_name
    raise ConfigError(
        f"cannot tell the trace format of {os.fspath(path)!r} from its extension; use one of "
        f"{', '.join(EXTENSIONS)} or pass format='perfetto' / format='chrome'"
    )


def __getattr__(name: str):  # a submodule loads on first use (moved.submodule)
    from ..moved import submodule

    return submodule(__name__, name)
