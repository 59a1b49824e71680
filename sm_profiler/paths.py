"""Output-path checks shared by everything that writes a file."""

from __future__ import annotations

import os

from .errors import CaptureError


def check_writable(path: str | os.PathLike) -> None:
    """Raise CaptureError before anything is written if `path` can't be created."""
    path = os.fspath(path)
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise CaptureError(f"cannot write {path!r}: directory {parent!r} does not exist")
    if os.path.isdir(path):
        raise CaptureError(f"cannot write {path!r}: it is a directory")
    if not os.access(parent, os.W_OK) or (os.path.exists(path) and not os.access(path, os.W_OK)):
        raise CaptureError(f"cannot write {path!r}: permission denied")
