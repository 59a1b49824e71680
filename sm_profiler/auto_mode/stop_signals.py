"""A stop signal during `sm-profiler run`, handled as Ctrl-C is: what the region recorded is
written, not lost (docs/auto.md, "Several GPUs and ranks").

torchrun stops the other ranks of a job whose rank failed with SIGTERM and kills them with
SIGKILL `TORCH_ELASTIC_SHUTDOWN_TIMEOUT` (30 s by default) later; a batch system or a closed
terminal sends SIGTERM or SIGHUP. Two paths, so that both cases keep the records:

- the program is running Python: the signal raises `Stopped` in it, the program unwinds like a
  Ctrl-C, the region ends and the runner writes as it always does (the table first);
- the program is blocked in a GPU wait that never returns (a collective whose peer died): the
  main thread cannot run a handler. A watcher thread, woken through the signal module's wakeup
  fd, waits `grace_s` for the region to end; if it has not, it calls `rescue(signum)` (read the
  buffers on a stream of their own, write the table, then the report) and ends the process with
  128 + the signal's number.
"""

from __future__ import annotations

import os
import signal
import sys
import threading

STOP_SIGNALS = tuple(
    s for s in (getattr(signal, n, None) for n in ("SIGTERM", "SIGHUP")) if s is not None
)
# How long the watcher waits for the region to end after a signal before writing from its own
# thread: inside torchrun's 30 s, leaving the rest for the write (SM_PROFILER_STOP_GRACE_S).
DEFAULT_GRACE_S = 8.0


class Stopped(BaseException):
    """Raised in the program's main thread by a stop signal (a BaseException, as
    KeyboardInterrupt is, so that `except Exception` in the program does not swallow it)."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name


class StopSignals:
    """`with StopSignals(rescue) as stops:` around the region; `stops.in_program` True while the
    program runs (a signal then raises Stopped in it); `stops.region_ended()` once the region
    has read its buffers back (False: the watcher is writing instead, and the process ends).
    Does nothing outside the main thread, where signals cannot be handled."""

    def __init__(self, rescue, grace_s: float | None = None):
        self.rescue = rescue
        env = os.environ.get("SM_PROFILER_STOP_GRACE_S", "")
        try:
            default = float(env) if env else DEFAULT_GRACE_S
        except ValueError:
            default = DEFAULT_GRACE_S
        self.grace_s = default if grace_s is None else grace_s
        self.signum: int | None = None
        self._ended = threading.Event()
        self._lock = threading.Lock()
        self._rescuing = False
        self._active = False
        self.in_program = False  # the runner sets it while the program runs: Stopped raised there

    def __enter__(self) -> StopSignals:
        if threading.current_thread() is not threading.main_thread():
            return self
        self._r, self._w = os.pipe()
        os.set_blocking(self._w, False)
        self._old_fd = signal.set_wakeup_fd(self._w, warn_on_full_buffer=False)
        self._old = {s: signal.signal(s, self._handler) for s in STOP_SIGNALS}
        self._active = True
        threading.Thread(target=self._watch, name="sm-profiler-stop", daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        if not self._active:
            return
        self._active = False
        for s, old in self._old.items():
            signal.signal(s, old)
        signal.set_wakeup_fd(self._old_fd)
        os.close(self._w)  # the watcher reads end of file and returns

    def _handler(self, signum, frame) -> None:
        first = self.signum is None
        self.signum = self.signum or signum
        if first and self.in_program:
            raise Stopped(signum)
        # Outside the program (the region ending, its records being written), or a second
        # signal: noted, not raised. Interrupting the write would lose the records, and torchrun
        # follows with SIGKILL anyway.

    def region_ended(self) -> bool:
        """The region has read its buffers back: the main thread writes. False if the watcher
        took over (it writes and ends the process)."""
        with self._lock:
            self._ended.set()
            return not self._rescuing

    def _watch(self) -> None:
        while True:
            try:
                data = os.read(self._r, 64)
            except OSError:
                return
            if not data:
                os.close(self._r)
                return
            got = [b for b in data if b in (*STOP_SIGNALS, signal.SIGINT)]
            if got:
                break
        signum = got[0]
        if self._ended.wait(self.grace_s):
            return
        with self._lock:
            if self._ended.is_set():
                return
            self._rescuing = True
        name = signal.Signals(signum).name
        print(
            f"sm-profiler run: {name}, and the program did not stop within {self.grace_s:g} s "
            "(blocked in a GPU wait?); writing what it recorded from another thread",
            file=sys.stderr,
            flush=True,
        )
        try:
            self.rescue(signum)
        except BaseException as e:  # noqa: BLE001 - say why, then end as the signal asked
            print(f"sm-profiler run: could not write what it recorded: {e}", file=sys.stderr)
        finally:
            sys.stderr.flush()
            sys.stdout.flush()
            os._exit(128 + signum)
