"""A raw capture: one buffer's words plus everything needed to decode it later, elsewhere.

A capture is what `SmProfiler.capture()` copies off the device and what `save`/`load` write and
read. It holds no decoded data: decoding is `sm_profiler.trace.decode.decode(capture)`.
"""

from __future__ import annotations

import json
import os
import stat
import zipfile
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ..errors import CaptureError, ConfigError, FormatError
from ..paths import atomic_output, check_writable
from . import format as fmt
from .format import Layout

CAPTURE_FILE_VERSION = 1
AUTO_FILE_VERSION = 2  # an auto-mode table (wire/auto_file.py), not captures
# Readers of the files whose meta names another "kind" than captures, (zip, meta, name) -> what
# `load` returns: the layer that owns such a file registers its reader here
# (trace/auto_table.py: "auto"; sm_profiler/__init__.py imports it), so that this module imports
# nothing above it.
FILE_READERS: dict = {}
# Names and metadata of real captures take kilobytes; a `meta` entry claiming more is not ours,
# and is refused before it is inflated.
MAX_META_BYTES = 1 << 26
# What a damaged zip member can raise while it is read: a bad compression method
# (NotImplementedError), "encrypted" flags (RuntimeError), a corrupt deflate stream (zlib.error).
_READ_ERRORS = (
    OSError,
    ValueError,
    KeyError,
    TypeError,
    EOFError,
    NotImplementedError,
    RuntimeError,
    zipfile.BadZipFile,
    zlib.error,
    RecursionError,
    MemoryError,
)


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
        self.event_names = _int_keyed(self.event_names, "event_names", fmt.MAX_EVENT_ID)
        self.group_names = _int_keyed(self.group_names, "group_names", fmt.MAX_GROUPS - 1)
        problem = name_problem(self.kernel_name)
        if problem:
            raise FormatError(f"kernel_name {problem}, got {shortened(self.kernel_name)}")
        meta = self.metadata
        if not isinstance(meta, dict) or not all(isinstance(k, str) for k in meta):
            raise FormatError(
                f"capture metadata must be a dict with string keys, got "
                f"{type(meta).__name__} {shortened(meta)}"
            )

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


class CaptureSequence(Sequence):
    """Captures built when asked: a recording read as one Capture per launch but not held as a
    list of them (auto mode's table, wire/auto_file.py: a million launches are columns, not a
    million buffers). `captures_of` passes one on whole."""


def name_problem(name) -> str | None:
    """Why `name` can't label an event, group or kernel, or None if it can.

    Names go to terminals, JSON and protobuf strings: they must be non-empty, printable, and
    encodable as UTF-8 (a lone surrogate such as "\\ud800" is not printable, so it is caught too).
    """
    if not isinstance(name, str) or not name.strip():
        return "must be a non-empty string"
    bad = next((c for c in name if not c.isprintable()), None)
    if bad is not None:
        return f"must be printable text, but holds {ascii(bad)}"
    return None


def _int_keyed(names, what: str, top: int) -> dict[int, str]:
    """{id: name} with int keys in 0..top (JSON stores them as strings) and printable names."""
    try:
        out = {int(k): str(v) for k, v in dict(names).items()}
    except (TypeError, ValueError, OverflowError) as e:
        raise FormatError(f"{what} must map integer ids to names, got {shortened(names)}") from e
    seen: dict[str, int] = {}
    for k, v in out.items():
        if not 0 <= k <= top:
            raise FormatError(f"{what} has id {k}, out of range: ids are 0..{top}")
        problem = name_problem(v)
        if problem:
            raise FormatError(f"{what}[{k}] {problem}, got {shortened(v)}")
        # One name, one id (as register_event insists): merging captures by name relies on it.
        if seen.setdefault(v, k) != k:
            raise FormatError(f"{what} gives the name {v!r} to ids {seen[v]} and {k}")
    return out


def shortened(value, limit: int = 60) -> str:
    """repr(value), cut to one short line: the value may be a large or hostile file's content."""
    try:
        text = ascii(value)
    except RecursionError:
        text = f"<deeply nested {type(value).__name__}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


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
    except (TypeError, ValueError, RecursionError) as e:
        raise CaptureError(
            f"cannot save {str(path)!r}: names and metadata must be JSON-serialisable and nested "
            f"less deeply ({type(e).__name__}: {shortened(str(e), 120)})"
        ) from e
    check_writable(path)
    arrays = {f"words_{i}": c.words for i, c in enumerate(captures)}
    # Write a temporary file next to `path` and rename it: `path` is replaced whole or not at all.
    with atomic_output(path) as tmp, open(tmp, "wb") as f:
        np.savez(f, meta=blob, **arrays)


# A capture file is a zip archive (np.savez): local file header, or the end record of an empty one.
_ZIP_MAGIC = (b"PK\x03\x04", b"PK\x05\x06")


def is_capture_file(path: str | os.PathLike) -> bool:
    """Whether `path` is a zip archive, as capture files are (a cheap test: it reads 4 bytes)."""
    try:
        with open(path, "rb") as f:
            return f.read(4) in _ZIP_MAGIC
    except OSError:
        return False


def foreign_kind(path: str | os.PathLike) -> tuple[str, bool] | None:
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

    An auto-mode file (`AutoProfiler.save`) gives its AutoTable, which is also a sequence of
    per-launch captures; `decode` reads it whole, fast.

    Raises CaptureError for a missing, truncated, damaged or foreign file (or one that is not a
    regular file) and FormatError for a capture whose buffer is damaged. Sizes stated in the file
    (zip directory, .npy headers, buffer header) are checked against each other before anything
    is inflated, so a hostile file cannot make it allocate more than its buffers really hold.
    """
    name = _path_text(path)
    with _open_regular(path, name) as f:
        foreign = foreign_kind(path)  # a regular file by now: reading its first bytes returns
        if foreign:
            what, is_trace = foreign
            fix = "; to view a trace, run sm-profiler open on it" if is_trace else ""
            raise CaptureError(
                f"{name} is not an sm_profiler capture file: it looks like {what}; capture "
                f"files are the .npz files that SmProfiler.save(path) writes{fix}"
            )
        try:
            with zipfile.ZipFile(f) as z:
                if "meta.npy" not in z.namelist():
                    raise CaptureError(
                        f"{name} is a .npz archive but not an sm_profiler capture (it has no "
                        "'meta' entry); capture files are the .npz files that "
                        "SmProfiler.save(path) writes"
                    )
                meta = read_meta(z, name)
                reader = FILE_READERS.get(meta.get("kind"))
                if reader is not None:  # an auto file (trace/auto_table.py registers it)
                    return reader(z, meta, name)
                words = [_read_words(z, f"words_{i}", name) for i in range(len(meta["captures"]))]
        except (CaptureError, FormatError):
            raise
        except _READ_ERRORS as e:
            raise CaptureError(
                f"{name} is not a readable sm_profiler capture (truncated, damaged or another "
                f"format): {type(e).__name__}: {shortened(str(e), 160)}"
            ) from e
    caps = []
    for i, (w, m) in enumerate(zip(words, meta["captures"], strict=True)):
        if not isinstance(m, dict):
            raise CaptureError(f"{name}: capture {i} has no metadata table: corrupt file")
        try:
            cap = Capture(
                words=w,
                event_names=m.get("event_names", {}),
                group_names=m.get("group_names", {}),
                kernel_name=m.get("kernel_name", "kernel"),
                metadata=m.get("metadata", {}),
            )
        except FormatError as e:
            raise CaptureError(f"{name}: capture {i} is unreadable: {e}") from e
        caps.append(cap)
    if not caps:
        raise CaptureError(f"{name} holds no captures")
    return caps


def _path_text(path) -> str:
    try:
        return repr(os.fspath(path))
    except TypeError as e:
        raise CaptureError(f"a capture path must be a str or os.PathLike: {shortened(path)}") from e


def _open_regular(path, name: str):
    """Open `path` for reading if it is a regular file; a FIFO or device would block or never end.

    O_NONBLOCK makes opening a FIFO return at once, so it can be refused instead of waited on.
    """
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError as e:
        raise CaptureError(f"capture file {name} does not exist") from e
    except (OSError, ValueError) as e:
        why = getattr(e, "strerror", None) or e
        raise CaptureError(f"cannot open capture file {name}: {why}") from e
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            what = "a directory" if stat.S_ISDIR(mode) else "not a regular file (a pipe or device?)"
            raise CaptureError(f"capture file {name} is {what}; give a file written by save()")
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_meta(z: zipfile.ZipFile, name: str) -> dict:
    raw = read_member(z, "meta", name, MAX_META_BYTES, uint8=True)
    meta = json.loads(raw.tobytes().decode())
    version = meta.get("capture_file_version") if isinstance(meta, dict) else None
    if version == AUTO_FILE_VERSION and meta.get("kind") == "auto":
        return meta
    if version != CAPTURE_FILE_VERSION or not isinstance(meta.get("captures"), list):
        raise CaptureError(
            f"{name}: unsupported capture file version {shortened(version)}; this sm_profiler "
            f"reads capture files of version {CAPTURE_FILE_VERSION} and auto files of version "
            f"{AUTO_FILE_VERSION}: read it with the sm_profiler that wrote it, or upgrade"
        )
    return meta


def read_column(z: zipfile.ZipFile, member: str, name: str, dtype) -> np.ndarray:
    """One 1-D column of an auto file, of exactly `dtype`, its size checked before inflating."""
    dtype = np.dtype(dtype)
    try:
        info = z.getinfo(f"{member}.npy")
    except KeyError as e:
        raise CaptureError(f"{name}: no {member} column: damaged auto file") from e
    with z.open(info) as m:
        shape, got = _npy_header(m, name, member)
        if len(shape) != 1 or got.newbyteorder("=") != dtype.newbyteorder("="):
            raise CaptureError(
                f"{name}: {member} holds a {got} array of shape {shape}, not a 1-D {dtype} "
                "column: damaged auto file"
            )
        nbytes = int(shape[0]) * got.itemsize
        if nbytes > fmt.MAX_BUFFER_BYTES or info.file_size != m.tell() + nbytes:
            raise CaptureError(
                f"{name}: {member} claims {nbytes:,} bytes in a {info.file_size:,}-byte entry: "
                "damaged auto file"
            )
        out = np.empty(int(shape[0]), got)
        _fill(m, memoryview(out.view(np.uint8)), name, member)
    return out.astype(dtype, copy=False)


def _read_words(z: zipfile.ZipFile, member: str, name: str) -> np.ndarray:
    return read_member(z, member, name, fmt.MAX_BUFFER_BYTES, uint8=False)


def read_member(z: zipfile.ZipFile, member: str, name: str, limit: int, uint8: bool):
    """One .npy member, its sizes checked before its data is inflated.

    uint8: a byte array of at most `limit` bytes (the JSON). Otherwise a buffer of 64-bit words
    whose own header (read first) must need exactly the words the .npy header declares.
    """
    info = z.getinfo(f"{member}.npy")
    with z.open(info) as m:
        shape, dtype = _npy_header(m, name, member)
        ok_dtype = dtype == np.uint8 if uint8 else dtype.kind in "iu" and dtype.itemsize == 8
        if len(shape) != 1 or not ok_dtype:
            raise CaptureError(
                f"{name}: {member} holds a {dtype} array of shape {shape}, not a 1-D "
                f"{'uint8' if uint8 else '64-bit'} array: not an sm_profiler capture"
            )
        count = int(shape[0])
        nbytes = count * dtype.itemsize
        if nbytes > limit or info.file_size != m.tell() + nbytes:
            raise CaptureError(
                f"{name}: {member} claims {nbytes:,} bytes of data in a {info.file_size:,}-byte "
                f"entry (limit {limit:,}): damaged or not an sm_profiler capture"
            )
        head = np.zeros(0, dtype)
        if not uint8:  # the buffer's own header first: FormatError before the rest is inflated
            head = np.empty(min(count, fmt.HEADER_WORDS), dtype)
            _fill(m, memoryview(head.view(np.uint8)), name, member)
            Layout.from_header(head.astype(dtype.newbyteorder("=")).view(np.uint64), size=count)
        try:
            out = np.empty(count, dtype)
        except MemoryError as e:
            raise CaptureError(
                f"{name}: {member} holds {nbytes:,} bytes, more than this machine can allocate; "
                "load it where more memory is free"
            ) from e
        out[: len(head)] = head
        _fill(m, memoryview(out.view(np.uint8))[head.nbytes :], name, member)
    return out


def _npy_header(m, name: str, member: str) -> tuple[tuple, np.dtype]:
    """Shape and dtype from a .npy header. numpy parses the header text with Python's tokenizer
    and literal_eval, which raise more than ValueError on damaged text (tokenize.TokenError,
    SyntaxError, RecursionError): any failure there means a damaged file."""
    try:
        version = np.lib.format.read_magic(m)
        if version == (1, 0):
            shape, _, dtype = np.lib.format.read_array_header_1_0(m)
        else:
            shape, _, dtype = np.lib.format.read_array_header_2_0(m)
    except (zipfile.BadZipFile, zlib.error, OSError, EOFError):
        raise  # the zip itself, reported by load
    except Exception as e:  # noqa: BLE001 - see the docstring
        raise CaptureError(
            f"{name}: the .npy header of {member} is damaged: {type(e).__name__}: "
            f"{shortened(str(e), 160)}"
        ) from e
    return shape, dtype


def _fill(m, buf: memoryview, name: str, member: str) -> None:
    """Read exactly len(buf) bytes of a zip member into buf, in pieces (no second copy)."""
    got = 0
    while got < len(buf):
        n = m.readinto(buf[got : got + (1 << 24)])
        if not n:
            raise CaptureError(
                f"{name}: {member} ends after {got:,} of {len(buf):,} bytes: truncated file"
            )
        got += n


def captures_of(source) -> list[Capture]:
    """Captures from an SmProfiler, an auto region or its table, a Capture, a capture file's
    path, or a list of any of these (one rank's: an auto region's launches and a hand-
    instrumented kernel's capture of the same process then share its GPU's tracks)."""
    if hasattr(source, "captures") and callable(source.captures):
        caps = source.captures()
        return caps if isinstance(caps, CaptureSequence) else list(caps)
    if isinstance(source, Capture):
        return [source]
    if isinstance(source, CaptureSequence):
        return source
    if isinstance(source, (str, os.PathLike)):
        return load(source)
    if isinstance(source, (list, tuple)):
        if all(isinstance(c, Capture) for c in source):
            return list(source)
        return [c for part in source for c in captures_of(part)]  # an auto table's launches too
    raise ConfigError(
        f"cannot read captures from {type(source).__name__}: pass an SmProfiler, an auto "
        "region or table, Captures, a capture file written by SmProfiler.save, or a list of these"
    )
