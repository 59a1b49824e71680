"""Reading a trace torch.profiler exported (Chrome JSON, maybe gzipped), as input we did not
write: bounded in size and nesting, checked row by row where the merge and the coverage read it
(`merge --torch`, `torch_coverage`), and CUPTI's kernel names matched to ours (`kernel_key`).
Below merge.py and coverage.py, which both read it."""

from __future__ import annotations

import gzip
import json
import math
import os
import stat
import zlib

from ..errors import CaptureError, ConfigError, InflationError

# A torch trace is input we did not write: what it may inflate to, in bytes (and at most this
# many times its compressed size, plus MAX_TORCH_SLACK), and the deepest JSON nesting parsed.
MAX_TORCH_BYTES = 1 << 30
MAX_TORCH_RATIO = 64
MAX_TORCH_SLACK = 64 << 20
# Kernel rows' ts and dur (µs) and baseTimeNanoseconds (ns) must keep ns times inside int64.
MAX_TORCH_US = 2.0**62 / 1e3


def inflation_limit(stored_bytes: int) -> int:
    """The most bytes a torch trace stored compressed in `stored_bytes` bytes may inflate to
    (MAX_TORCH_RATIO times them plus MAX_TORCH_SLACK, at most MAX_TORCH_BYTES): a .gz given to
    `merge --torch` and the trace inside a rank file alike, so that a gzip bomb is refused
    while it inflates, never parsed."""
    return min(MAX_TORCH_BYTES, MAX_TORCH_RATIO * max(int(stored_bytes), 0) + MAX_TORCH_SLACK)


def read_torch_doc(torch_trace) -> dict:
    if isinstance(torch_trace, dict):
        return check_torch_doc(torch_trace, "the torch trace")
    if hasattr(torch_trace, "export_chrome_trace"):
        import tempfile

        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, "torch.json")
            torch_trace.export_chrome_trace(p)
            return _read_json(p)
    if isinstance(torch_trace, (str, os.PathLike)):
        return _read_json(torch_trace)
    raise ConfigError(
        f"cannot read a torch trace from {type(torch_trace).__name__}: pass a "
        "torch.profiler.profile, its exported JSON's path, or the loaded dict"
    )


def _read_json(path) -> dict:
    """A torch trace file, read like a capture file: a regular file only (a FIFO is refused at
    once), at most MAX_TORCH_BYTES inflated (a .gz at most MAX_TORCH_RATIO times its size), JSON
    that parses within Python's nesting limit, then checked by check_torch_doc."""
    try:
        name = repr(os.fspath(path))
    except TypeError as e:
        raise ConfigError(
            f"a torch trace path must be a str or os.PathLike, not {type(path).__name__}"
        ) from e
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except (OSError, ValueError) as e:
        raise CaptureError(
            f"cannot open the torch trace {name}: {getattr(e, 'strerror', None) or e}"
        ) from e
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise CaptureError(
                f"the torch trace {name} is not a regular file (a pipe, device or "
                "directory?): give the file prof.export_chrome_trace wrote"
            )
        gz = os.fspath(path).lower().endswith(".gz")
        limit = inflation_limit(st.st_size) if gz else MAX_TORCH_BYTES
        try:
            data = read_bounded(f, gz, limit, name)
            doc = json.loads(data)
        except (CaptureError, MemoryError):
            raise
        except (OSError, EOFError, ValueError, zlib.error) as e:
            raise CaptureError(
                f"cannot read the torch trace {name}: {type(e).__name__}: {shortened(str(e))}"
            ) from e
        except RecursionError as e:
            raise CaptureError(
                f"the torch trace {name} nests its JSON too deeply to be a "
                "trace torch.profiler wrote"
            ) from e
    return check_torch_doc(doc, f"the torch trace {name}")


def read_bounded(f, gz: bool, limit: int, name: str) -> bytes:
    """The file's bytes (inflated when gz), refusing more than `limit` before holding them."""
    src = gzip.GzipFile(fileobj=f, mode="rb") if gz else f
    chunks, total = [], 0
    while True:
        chunk = src.read(min(1 << 24, limit + 1 - total))
        if not chunk:
            break
        total += len(chunk)
        if total > limit:
            what = "inflates to" if gz else "holds"
            raise InflationError(
                f"the torch trace {name} {what} more than {limit:,} bytes, the limit for a torch "
                "trace (sm_profiler.wire.torch_trace.MAX_TORCH_BYTES; compressed, it may inflate "
                f"to {MAX_TORCH_RATIO}x its size plus {MAX_TORCH_SLACK >> 20} MiB): profile "
                "fewer steps, or raise the limit"
            )
        chunks.append(chunk)
    return b"".join(chunks)


def shortened(text: str, limit: int = 120) -> str:
    text = ascii(text)[1:-1]
    return text if len(text) <= limit else text[: limit - 3] + "..."


def check_torch_doc(doc, name: str) -> dict:
    """A Chrome trace torch.profiler could have written, as far as the merge reads it: an object
    with a traceEvents list of objects, whose kernel rows have finite ts and dur (µs) and whose
    baseTimeNanoseconds is an integer; anything else raises CaptureError naming the row."""
    fix = "re-export it with prof.export_chrome_trace(path)"
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        raise CaptureError(f"{name} is not a Chrome trace (no traceEvents list); {fix}")
    base = doc.get("baseTimeNanoseconds", 0)
    if isinstance(base, bool) or not isinstance(base, int) or not 0 <= base < 2**62:
        raise CaptureError(
            f"{name}: baseTimeNanoseconds is {shortened(repr(base), 40)}, not an "
            f"integer number of ns; {fix}"
        )
    for i, e in enumerate(doc["traceEvents"]):
        if not isinstance(e, dict):
            raise CaptureError(
                f"{name}: traceEvents[{i}] is a {type(e).__name__}, not an "
                f"object: not a Chrome trace; {fix}"
            )
        _check_fields(e, i, name, fix)
        if e.get("cat") == "kernel" and e.get("ph") == "X":
            for key in ("ts", "dur"):
                v = e.get(key)
                ok = isinstance(v, (int, float)) and not isinstance(v, bool)
                if (
                    not ok
                    or not math.isfinite(v)
                    or not abs(v) < MAX_TORCH_US
                    or (key == "dur" and v < 0)
                ):
                    raise CaptureError(
                        f"{name}: kernel row traceEvents[{i}] has {key} "
                        f"{shortened(repr(v), 40) if key in e else 'missing'}, not a finite "
                        f"{'duration' if key == 'dur' else 'time'} in µs; {fix}"
                    )
    return doc


# The fields every event's readers take as a value (compared, hashed, printed), and its args,
# which they take as an object: a Chrome trace's events hold them so (torch writes numbers and
# text), so anything else is a damaged or hand-made file.
_SCALAR_FIELDS = ("ph", "cat", "name", "pid", "tid", "id")


def _check_fields(e: dict, i: int, name: str, fix: str) -> None:
    """CaptureError where event `e` (traceEvents[i]) has args that are not an object (null is
    taken as none) or a field of _SCALAR_FIELDS that is a list or an object."""
    args = e.get("args")
    if args is not None and not isinstance(args, dict):
        raise CaptureError(
            f"{name}: traceEvents[{i}] ({shortened(str(e.get('name')), 40)}) has args "
            f"{shortened(repr(args), 40)}, not an object; {fix}"
        )
    for key in _SCALAR_FIELDS:
        if isinstance(e.get(key), (list, dict)):
            raise CaptureError(
                f"{name}: traceEvents[{i}] has {key} {shortened(repr(e[key]), 40)}, not a "
                f"number or text; {fix}"
            )


def kernel_key(name: str, rows: dict):
    """The CUPTI name (a key of `rows`) that kernel `name` is matched to: itself, else the first
    that one is a prefix of the other of (CUPTI may decorate names); None if none."""
    if name in rows:
        return name
    return next((k for k in rows if k.startswith(name) or name.startswith(k)), None)


def named_processes(events: list) -> list:
    """torch.profiler's events with its processes named for what they hold: torch names the host
    process and each GPU's "python" alike (a merged trace would show "python" three times). A
    process whose threads are CUDA streams ("stream 7") becomes "GPU 0 · CUDA streams"; the
    others "CPU · python (pid 1419)". Other events are the same objects."""
    streams = {
        e.get("pid")
        for e in events
        if e.get("ph") == "M"
        and e.get("name") == "thread_name"
        and str((e.get("args") or {}).get("name", "")).startswith("stream ")
    }
    out = []
    for e in events:
        if e.get("ph") == "M" and e.get("name") == "process_name":
            pid, name = e.get("pid"), str((e.get("args") or {}).get("name", ""))
            label = f"GPU {pid} · CUDA streams" if pid in streams else f"CPU · {name} (pid {pid})"
            e = dict(e, args={"name": label})
        out.append(e)
    return out
