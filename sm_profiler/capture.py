"""A raw capture: one buffer's words plus everything needed to decode it later, elsewhere.

A capture is what `SmProfiler.capture()` copies off the device and what `save`/`load` write and
read. It holds no decoded data: decoding is `sm_profiler.decode.decode(capture)`.
"""

from __future__ import annotations

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
        if words.dtype != np.uint64:
            if words.dtype.itemsize == 8 and words.dtype.kind in "iu":
                words = words.view(np.uint64)
            else:
                raise FormatError(f"capture words must be 64-bit integers, got dtype {words.dtype}")
        self.words = words.reshape(-1)
        self.event_names = {int(k): str(v) for k, v in self.event_names.items()}
        self.group_names = {int(k): str(v) for k, v in self.group_names.items()}

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


def save_many(captures: list[Capture], path: str | os.PathLike) -> None:
    """Write captures to one .npz file: raw words plus JSON names and metadata.

    Everything is checked before the file is opened, so a failure overwrites nothing.
    """
    if not captures:
        raise CaptureError("nothing to save: no captures")
    for c in captures:
        c.layout  # refuse to save something we could not read back
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
    blob = np.frombuffer(json.dumps(meta).encode(), np.uint8)
    check_writable(path)
    arrays = {f"words_{i}": c.words for i, c in enumerate(captures)}
    with open(path, "wb") as f:
        np.savez(f, meta=blob, **arrays)


def load(path: str | os.PathLike) -> list[Capture]:
    """Read the captures of a file written by `save_many` / `SmProfiler.save`.

    Raises CaptureError for a missing, truncated or foreign file and FormatError for a capture
    whose buffer is damaged.
    """
    try:
        with np.load(path, allow_pickle=False) as z:
            meta = json.loads(bytes(z["meta"]).decode())
            n = len(meta["captures"]) if isinstance(meta, dict) else 0
            words = [z[f"words_{i}"] for i in range(n)]
    except FileNotFoundError as e:
        raise CaptureError(f"capture file {str(path)!r} does not exist") from e
    except (OSError, ValueError, KeyError, TypeError, zipfile.BadZipFile, EOFError) as e:
        raise CaptureError(
            f"{str(path)!r} is not a readable sm_profiler capture (truncated or another format): {e}"
        ) from e
    if not isinstance(meta, dict) or meta.get("capture_file_version") != CAPTURE_FILE_VERSION:
        version = meta.get("capture_file_version") if isinstance(meta, dict) else None
        raise CaptureError(f"{str(path)!r}: unsupported capture file version {version!r}")
    caps = []
    for w, m in zip(words, meta["captures"]):
        cap = Capture(
            words=w,
            event_names=m.get("event_names", {}),
            group_names=m.get("group_names", {}),
            kernel_name=m.get("kernel_name", "kernel"),
            metadata=m.get("metadata", {}),
        )
        cap.layout  # validate now, with a clear FormatError
        caps.append(cap)
    if not caps:
        raise CaptureError(f"{str(path)!r} holds no captures")
    return caps
