"""A raw capture: one buffer's words plus everything needed to decode it later, elsewhere.

A capture is what `SmProfiler.capture()` copies off the device and what `save`/`load` write and
read. It holds no decoded data: decoding is `sm_profiler.decode.decode(capture)`.
"""

from __future__ import annotations

import contextlib
import json
import os
import zipfile
from dataclasses import dataclass, field

import numpy as np

from .errors import CaptureError, FormatError
from .format import Layout
from .paths import check_writable

CAPTURE_FILE_VERSION = 1


@dataclass
class Capture:
    """One launch's buffer (uint64 words) with its names and where it came from."""

    words: np.ndarray
    event_names: dict[int, str] = field(default_factory=dict)
    group_names: dict[int, str] = field(default_factory=dict)
    kernel_name: str = "kernel"
    metadata: dict = field(default_factory=dict)

    def __post_init__(self):
        words = np.asarray(self.words)
        if words.dtype.itemsize != 8 or words.dtype.kind not in "iu":
            raise FormatError(f"capture words must be 64-bit integers, got dtype {words.dtype}")
        # Native byte order, contiguous, then the same bits as uint64.
        words = np.ascontiguousarray(words, dtype=words.dtype.newbyteorder("="))
        self.words = words.view(np.uint64).reshape(-1)
        self.event_names = _int_keyed(self.event_names, "event_names")
        self.group_names = _int_keyed(self.group_names, "group_names")

    @property
    def layout(self) -> Layout:
        return Layout.from_header(self.words)

    @property
    def emulated(self) -> bool:
        return self.layout.emulated

    def event_name(self, event_id: int) -> str:
        return self.event_names.get(int(event_id), f"event {int(event_id)}")

    # -- files ---------------------------------------------------------------------------------

    def save(self, path: str | os.PathLike) -> None:
        """Write this capture alone to `path` (see `save_many`)."""
        save_many([self], path)


def _int_keyed(names, what: str) -> dict[int, str]:
    """{id: name} with int keys (JSON stores them as strings)."""
    try:
        return {int(k): str(v) for k, v in dict(names).items()}
    except (TypeError, ValueError) as e:
        raise FormatError(f"{what} must map integer ids to names, got {names!r}") from e


def save_many(captures: list[Capture], path: str | os.PathLike) -> None:
    """Write captures to one .npz file: raw words plus JSON names and metadata.

    Everything is checked before the file is opened, so a failure overwrites nothing.
    """
    if not captures:
        raise CaptureError("nothing to save: no captures")
    for c in captures:
        if not isinstance(c, Capture):
            raise CaptureError(f"save_many takes Capture objects, got {type(c).__name__}")
        _ = c.layout  # refuse to save something we could not read back
    meta = {
        "capture_file_version": CAPTURE_FILE_VERSION,
        "captures": [
            {
                "event_names": {str(k): v for k, v in c.event_names.items()},
                "group_names": {str(k): v for k, v in c.group_names.items()},
                "kernel_name": c.kernel_name,
                "metadata": c.metadata,
            }
            for c in captures
        ],
    }
    try:
        blob = np.frombuffer(json.dumps(meta).encode(), np.uint8)
    except (TypeError, ValueError) as e:
        raise CaptureError(
            f"cannot save {str(path)!r}: names and metadata must be JSON-serialisable ({e})"
        ) from e
    check_writable(path)
    arrays = {f"words_{i}": c.words for i, c in enumerate(captures)}
    # Write a temporary file next to `path` and rename it: `path` is replaced whole or not at all.
    path = os.fspath(path)
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        with open(tmp, "wb") as f:
            np.savez(f, meta=blob, **arrays)
        os.replace(tmp, path)
    except OSError as e:
        with contextlib.suppress(OSError):
            os.remove(tmp)
        raise CaptureError(f"cannot write {path!r}: {e}") from e


# A capture file is a zip archive (np.savez): local file header, or the end record of an empty one.
_ZIP_MAGIC = (b"PK\x03\x04", b"PK\x05\x06")


def is_capture_file(path: str | os.PathLike) -> bool:
    """Whether `path` is a zip archive, as capture files are (a cheap test: it reads 4 bytes)."""
    try:
        with open(path, "rb") as f:
            return f.read(4) in _ZIP_MAGIC
    except OSError:
        return False


def _foreign_kind(path: str | os.PathLike) -> tuple[str, bool] | None:
    """What a file that is not a zip archive looks like ('a Chrome JSON trace', ...) and whether
    that is a trace; None for a zip archive, or a file that cannot be read or is empty (np.load
    then says why)."""
    try:
        with open(path, "rb") as f:
            head = f.read(4096)
    except OSError:
        return None
    if head[:4] in _ZIP_MAGIC or (head and b"PK".startswith(head[:2])):
        return None  # a zip archive, or the start of one (truncated): np.load reports it
    text = head.lstrip()
    if text[:1] in (b"{", b"["):
        if b'"traceEvents"' in head:
            return "a Chrome JSON trace", True
        return "a JSON file", False
    if head[:2] == b"\x1f\x8b":
        return "a gzip file (a compressed Chrome JSON trace?)", True
    if head[:6] == b"\x93NUMPY":
        return "a single numpy array (.npy)", False
    if head[:1] == b"\x0a":  # field 1 (TracePacket), length-delimited: a protobuf Trace
        return "a Perfetto trace", True
    if not head:
        return None  # empty: np.load reports it as truncated
    return "another kind of file (a capture is a zip archive)", False


def load(path: str | os.PathLike) -> list[Capture]:
    """Read the captures of a file written by `save_many` / `SmProfiler.save`.

    Raises CaptureError for a missing, truncated or foreign file and FormatError for a capture
    whose buffer is damaged.
    """
    foreign = _foreign_kind(path)
    if foreign:
        what, is_trace = foreign
        fix = "; to view a trace, run sm-profiler open on it" if is_trace else ""
        raise CaptureError(
            f"{str(path)!r} is not an sm_profiler capture file: it looks like {what}; capture "
            f"files are the .npz files that SmProfiler.save(path) writes{fix}"
        )
    try:
        with np.load(path, allow_pickle=False) as z:
            if "meta" not in z.files:
                raise CaptureError(
                    f"{str(path)!r} is a .npz archive but not an sm_profiler capture (it has no "
                    "'meta' entry); capture files are the .npz files that SmProfiler.save(path) "
                    "writes"
                )
            meta = json.loads(bytes(z["meta"]).decode())
            n = len(meta["captures"]) if isinstance(meta, dict) else 0
            words = [z[f"words_{i}"] for i in range(n)]
    except CaptureError:
        raise
    except FileNotFoundError as e:
        raise CaptureError(f"capture file {str(path)!r} does not exist") from e
    except (OSError, ValueError, KeyError, TypeError, zipfile.BadZipFile, EOFError) as e:
        raise CaptureError(
            f"{str(path)!r} is not a readable sm_profiler capture (truncated or another format): {e}"
        ) from e
    if not isinstance(meta, dict) or meta.get("capture_file_version") != CAPTURE_FILE_VERSION:
        version = meta.get("capture_file_version") if isinstance(meta, dict) else None
        raise CaptureError(
            f"{str(path)!r}: unsupported capture file version {version!r}; this sm_profiler "
            f"reads version {CAPTURE_FILE_VERSION}"
        )
    caps = []
    for i, (w, m) in enumerate(zip(words, meta["captures"], strict=True)):
        if not isinstance(m, dict):
            raise CaptureError(f"{str(path)!r}: capture {i} has no metadata table: corrupt file")
        try:
            cap = Capture(
                words=w,
                event_names=m.get("event_names", {}),
                group_names=m.get("group_names", {}),
                kernel_name=str(m.get("kernel_name", "kernel")),
                metadata=m.get("metadata", {}),
            )
        except FormatError as e:
            raise CaptureError(f"{str(path)!r}: capture {i} is unreadable: {e}") from e
        _ = cap.layout  # validate now, with a clear FormatError
        caps.append(cap)
    if not caps:
        raise CaptureError(f"{str(path)!r} holds no captures")
    return caps
