"""Output-path checks and the atomic write shared by everything that writes a file."""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Iterator

from .errors import CaptureError


def check_writable(path: str | os.PathLike) -> None:
    """Raise CaptureError before anything is written if `path` can't be created."""
    path = os.fspath(path)
    if "\0" in str(path):
        raise CaptureError(f"cannot write {path!r}: a path cannot contain a NUL character")
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise CaptureError(f"cannot write {path!r}: directory {parent!r} does not exist")
    if os.path.isdir(path):
        raise CaptureError(f"cannot write {path!r}: it is a directory")
    if not os.access(parent, os.W_OK) or (os.path.exists(path) and not os.access(path, os.W_OK)):
        raise CaptureError(f"cannot write {path!r}: permission denied")


def _new_temporary(path: str) -> str:
    """Create an empty file with a random name next to `path`, exclusively (O_EXCL: never
    through a symlink or over a file already there), and return its name."""
    folder, base = os.path.split(path)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    for _ in range(100):
        tmp = os.path.join(folder, f"{base}.{secrets.token_hex(8)}.tmp")
        try:
            os.close(os.open(tmp, flags, 0o666))
            return tmp
        except FileExistsError:
            continue
        except OSError as e:
            raise CaptureError(f"cannot write {path!r}: {e.strerror or e}") from e
    raise CaptureError(f"cannot write {path!r}: no free temporary name next to it")


@contextlib.contextmanager
def atomic_output(path: str | os.PathLike) -> Iterator[str]:
    """Yield a temporary name next to `path` to write; rename it over `path` once the block ends.

    `path` is replaced whole or not at all: on any failure the temporary file is removed and an
    older `path` survives. An OSError (disk full, a filesystem that refuses the file) becomes a
    CaptureError naming `path`.
    """
    path = os.fspath(path)
    tmp = _new_temporary(path)
    try:
        yield tmp
        os.replace(tmp, path)
    except BaseException as e:
        with contextlib.suppress(OSError, ValueError):
            os.remove(tmp)
        if isinstance(e, OSError) and not isinstance(e, CaptureError):
            raise CaptureError(f"cannot write {path!r}: {e.strerror or e}") from e
        raise
