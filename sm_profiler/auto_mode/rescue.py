"""A GPU's records read while the GPU may be stuck: the rescue of a stop signal's watcher
(stop_signals.py, AutoProfiler.rescue), while the main thread waits in a GPU call that will not
return (a collective whose peer died, a kernel that never ends).

Nothing is made at the signal: a stream created then, `torch.cuda.synchronize`, a copy through
PyTorch (its caching allocators and their locks) may each wait on the blocked device or on the
blocked thread. The copier (driver.HostCopier: a non-blocking stream, an event and a pinned
chunk of CHUNK_BYTES, made with the buffer) copies the buffer a chunk at a time; each copy is
polled, never waited on. A copy on a non-blocking stream runs while another stream's kernel
spins: it sees what the records hold (a launch still running has programs not yet written,
counted as unwritten). A copy that does not arrive within `stall_s` (queued behind a stuck
kernel, a wedged device, a driver call that does not return) ends the read with the chunks
that did: the host then writes what it knows, and says so.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

import numpy as np

CHUNK_BYTES = 16 << 20  # pinned host memory per GPU, for the copy through
STALL_S = 2.0  # a chunk not arrived this long after the last one: the copy cannot run
_POLL_S = 2e-4  # between two looks at a chunk's event


@dataclass(frozen=True)
class Copied:
    """What a read got: the buffer's first `nbytes` of `total`, and why not the rest."""

    nbytes: int
    total: int
    why: str = ""


@dataclass
class _Progress:
    at: float  # when the last chunk arrived (time.monotonic)
    nbytes: int = 0
    why: str = ""
    stop: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)


def read_device(copier, out: np.ndarray, stall_s: float = STALL_S) -> Copied:
    """Copy the device buffer of `copier` (driver.HostCopier, or a stand-in with its `bind`,
    `copy`, `done` and `chunk`) into `out` (uint8, the buffer's size), chunk by chunk, from a
    thread of its own; returns when it is all there or nothing has arrived for `stall_s`."""
    progress = _Progress(at=time.monotonic())
    worker = threading.Thread(
        target=_copy_chunks,
        args=(copier, out, progress, stall_s),
        name="sm-profiler-rescue-copy",
        daemon=True,  # one stuck in a driver call is left there: the process ends after
    )
    worker.start()
    while worker.is_alive():
        worker.join(0.01)
        with progress.lock:
            if worker.is_alive() and time.monotonic() - progress.at > stall_s + 0.5:
                progress.stop = True  # a driver call that does not return
                progress.why = progress.why or (
                    f"a CUDA call did not return within {stall_s:g} s (the device is stuck?)"
                )
                break
    with progress.lock:
        return Copied(progress.nbytes, out.size, progress.why)


def _copy_chunks(copier, out: np.ndarray, progress: _Progress, stall_s: float) -> None:
    try:
        copier.bind()
        size = copier.chunk.size
        for offset in range(0, out.size, size):
            n = min(size, out.size - offset)
            copier.copy(offset, n)
            while not copier.done():
                if progress.stop:
                    return
                if time.monotonic() - progress.at > stall_s:
                    with progress.lock:
                        progress.why = progress.why or (
                            f"the copy did not finish within {stall_s:g} s "
                            "(queued behind a kernel that does not end?)"
                        )
                        progress.stop = True
                    return
                time.sleep(_POLL_S)
            with progress.lock:
                if progress.stop:
                    return
                out[offset : offset + n] = copier.chunk[:n]
                progress.nbytes, progress.at = offset + n, time.monotonic()
    except Exception as e:  # noqa: BLE001 - the host writes what it knows instead
        with progress.lock:
            progress.why = progress.why or f"the copy failed: {e}"
            progress.stop = True
