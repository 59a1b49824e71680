"""Stop signals during `sm-profiler run` (SIGTERM, SIGHUP, SIGINT): the program's own handlers
come first, and what the region recorded is written, not lost (docs/auto.md, "Stop signals").

torchrun stops the other ranks of a job whose rank failed with SIGTERM and kills them with
SIGKILL `TORCH_ELASTIC_SHUTDOWN_TIMEOUT` (30 s by default) later; a batch system or a closed
terminal sends SIGTERM or SIGHUP. The paths:

- The program's handlers first. While the region is on, `signal.signal` and `signal.getsignal`
  of these signals set and read the program's handler, kept here, while ours stays installed
  and calls it: a handler the program installs (or had before the run: Python's
  KeyboardInterrupt for SIGINT) runs as it would without sm-profiler, and the program keeps its
  own course and exit status. A signal ignored when the run starts (`nohup`) stays ignored.
- No handler of the program's (SIG_DFL), the program running: the signal raises `Stopped` in it,
  the program unwinds like a Ctrl-C, the region ends and the runner writes as it always does.
  Outside the program (the region starting or ending, the runner reporting the program's exit,
  the records being written) a signal is noted, never raised: interrupting the write would lose
  the records.
- The main thread blocked in a call that never returns (a GPU wait whose peer died, a kernel
  that never ends) runs no handler at all. Each signal writes its number to the signal module's
  wakeup fd, and our handler reads the fd whenever it runs; a watcher thread that finds a number
  still unread `grace_s` after it came knows that the main thread has run no Python since. So
  does a stop noted outside the program that the region has not ended `grace_s` later (the
  region's own GPU wait blocked). Then, and only then, the watcher calls `rescue(signum)` (read
  the buffers without waiting on the GPU, write the table, then the report) and ends the process
  with 128 + the signal's number.
- One writer at a time: the region's end and the watcher each claim the records (`reading`, a
  OneReader: AutoProfiler claims them once its GPU waits are over, before it reads its buffers
  back); the watcher leaves them to a region's end that claimed them first, however long it
  then takes; once the watcher has them, the main thread waits for the process to end.
- A process forked from the program (multiprocessing, DataLoader workers) gets the program's
  handlers back and no wakeup fd: its signals are its own, not the run's.
"""

from __future__ import annotations

import os
import select
import signal
import sys
import threading
import time

WATCHED = tuple(
    s for s in (getattr(signal, n, None) for n in ("SIGTERM", "SIGHUP", "SIGINT")) if s is not None
)
# How long the watcher waits for the main thread after a signal before writing from its own
# thread: inside torchrun's 30 s, leaving the rest for the write (SM_PROFILER_STOP_GRACE_S).
DEFAULT_GRACE_S = 8.0
_POLL_S = 0.05  # the watcher's look at the region's end while a stop is pending
_REAL_SIGNAL, _REAL_GETSIGNAL = signal.signal, signal.getsignal
_current: list[StopSignals] = []  # the one on now (a forked child forgets it)


class Stopped(BaseException):
    """Raised in the program's main thread by a stop signal (a BaseException, as
    KeyboardInterrupt is, so that `except Exception` in the program does not swallow it)."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name


class OneReader:
    """Who reads a region's buffers back: its end ("stop") or a stop signal's rescue, whichever
    claims first; the other leaves (the rescue) or waits for `done` (the region's end: the
    process ends once the rescue has written)."""

    def __init__(self):
        self._lock = threading.Lock()
        self.reader: str | None = None
        self.done = threading.Event()  # the rescue has its table

    def claim(self, reader: str) -> bool:
        with self._lock:
            self.reader = self.reader or reader
            return self.reader == reader


class StopSignals:
    """`with StopSignals(rescue, reading=region.reading) as stops:` around the region;
    `stops.program(run)` runs the program (signals act on it only while `run` is on the main
    thread's stack); `stops.signum` is the stop signal noted or raised, if any;
    `stops.region_ended()` once the region has ended. `rescue(signum)` runs in the watcher's
    thread once it has claimed the records. Does nothing outside the main thread, where signals
    cannot be handled."""

    def __init__(self, rescue, grace_s: float | None = None, reading: OneReader | None = None):
        self.rescue = rescue
        self.reading = reading or OneReader()
        env = os.environ.get("SM_PROFILER_STOP_GRACE_S", "")
        try:
            default = float(env) if env else DEFAULT_GRACE_S
        except ValueError:
            default = DEFAULT_GRACE_S
        self.grace_s = default if grace_s is None else grace_s
        self.signum: int | None = None  # the stop: raised as Stopped, or noted outside it
        self._stop_at = 0.0  # when it came (time.monotonic)
        self._theirs: dict[int, object] = {}  # signal -> the program's handler
        self._old: dict[int, object] = {}  # signal -> its handler before the run, put back
        self._handled = 0  # times our handler ran (and read the wakeup fd)
        self._cond = threading.Condition()  # reentrant: a handler may run inside a handler
        self._lock = threading.Lock()  # one writer: held by the watcher while it rescues
        self._ended = False
        self._closed = False
        self._active = False

    # -- on and off --------------------------------------------------------------------------------

    def __enter__(self) -> StopSignals:
        if threading.current_thread() is not threading.main_thread():
            return self
        # The wakeup fd (signal numbers) and a pipe that wakes the watcher up for anything
        # else: a stop noted, the end. Our handler reads what is there, never waits.
        self._r, self._w = os.pipe()
        self._poke_r, self._poke_w = os.pipe()
        for fd in (self._r, self._w, self._poke_r, self._poke_w):
            os.set_blocking(fd, False)
        for s in WATCHED:
            self._old[s] = old = _REAL_GETSIGNAL(s)
            # Ignored (nohup) stays ignored; a handler not set from Python is not ours to wrap.
            if old is not None and old is not signal.SIG_IGN:
                self._theirs[s] = old
                _REAL_SIGNAL(s, self._handler)
        self._old_fd = signal.set_wakeup_fd(self._w, warn_on_full_buffer=False)
        signal.signal, signal.getsignal = self._signal, self._getsignal
        _current.append(self)
        self._active = True
        threading.Thread(target=self._watch, name="sm-profiler-stop", daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        if not self._active:
            return
        self._active = False
        self._restore()
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        os.close(self._poke_w)  # the watcher wakes up, closes the rest and returns

    def _restore(self) -> None:
        """The signal module and the handlers as they were before the run."""
        _current.remove(self)
        signal.signal, signal.getsignal = _REAL_SIGNAL, _REAL_GETSIGNAL
        for s, old in self._old.items():
            if old is not None or s in self._theirs:  # None: a handler not set from Python
                _REAL_SIGNAL(s, signal.SIG_DFL if old is None else old)
        signal.set_wakeup_fd(self._old_fd)

    def _forget_in_child(self) -> None:
        """In a process forked from the program: the program's handlers, no wakeup fd (its
        signals would read as the run's), no watcher (threads do not survive a fork)."""
        _current.remove(self)
        self._active = False
        signal.signal, signal.getsignal = _REAL_SIGNAL, _REAL_GETSIGNAL
        signal.set_wakeup_fd(-1)
        for s, theirs in self._theirs.items():
            _REAL_SIGNAL(s, theirs)
        for fd in (self._r, self._w, self._poke_r, self._poke_w):
            os.close(fd)

    # -- the signal module, as the program sees it -------------------------------------------------

    def _signal(self, signum, handler):
        """signal.signal for the program: a watched signal's handler is kept as the program's,
        ours stays installed (ignoring is the system's to do)."""
        known = handler in (signal.SIG_DFL, signal.SIG_IGN) or callable(handler)
        main = threading.current_thread() is threading.main_thread()
        if signum not in self._theirs and signum not in WATCHED or not known or not main:
            return _REAL_SIGNAL(signum, handler)  # Python's own errors, where it has them
        previous = self._getsignal(signum)
        _REAL_SIGNAL(signum, signal.SIG_IGN if handler is signal.SIG_IGN else self._handler)
        self._theirs[signum] = handler
        return previous

    def _getsignal(self, signum):
        if signum in self._theirs:
            return self._theirs[signum]
        return _REAL_GETSIGNAL(signum)

    # -- the main thread -------------------------------------------------------------------------

    def program(self, run):
        """`run()` (the program) and its result. A stop noted before it starts raises Stopped
        at once; while this frame is on the main thread's stack, signals go to the program."""
        if self.signum is not None:
            raise Stopped(self.signum)
        return run()

    def _handler(self, signum, frame) -> None:
        with self._cond:  # the main thread runs Python: what came so far is handled here
            _drain(self._r)
            self._handled += 1
            self._cond.notify_all()
        if _running(frame):
            theirs = self._theirs.get(signum, signal.SIG_DFL)
            if callable(theirs):
                return theirs(signum, frame)
            if self.signum is None:
                self._note(signum)
                raise Stopped(signum)
            return None  # a second one: the program is stopping already
        self._note(signum)
        return None

    def _note(self, signum: int) -> None:
        if self.signum is None:
            self.signum, self._stop_at = signum, time.monotonic()
            if not self._closed:  # the watcher now keeps an eye on the region's end
                _poke(self._poke_w)

    def region_ended(self) -> None:
        """The region has read its buffers back and the main thread writes; waits (for the
        process to end) while the watcher is writing instead."""
        if not self._active:
            return
        with self._lock:
            self._ended = True

    # -- the watcher thread ------------------------------------------------------------------------

    def _watch(self) -> None:
        outside_since = None  # when the watcher first saw a pending stop outside the program
        while True:
            pending = self.signum is not None and not self._ended
            fds = (self._r, self._poke_r)
            ready = select.select(fds, [], [], _POLL_S if pending else None)[0]
            if self._closed:
                for fd in (self._r, self._w, self._poke_r):
                    os.close(fd)
                return
            _drain(self._poke_r)
            if self._r in ready:
                signum = self._unhandled()
                if signum is not None:
                    name = signal.Signals(signum).name
                    why = f"the main thread ran no Python within {self.grace_s:g} s"
                    self._take_over(signum, f"{name}, and {why} (blocked in a GPU wait?)")
                continue
            if not pending or _running(_main_frame()):
                outside_since = None
                continue
            now = time.monotonic()
            outside_since = outside_since or now
            if now - max(outside_since, self._stop_at) >= self.grace_s:
                name = signal.Signals(self.signum).name
                why = f"the region did not end within {self.grace_s:g} s"
                self._take_over(self.signum, f"{name}, and {why} (blocked in a GPU wait?)")
                outside_since = None

    def _unhandled(self) -> int | None:
        """The watched signal whose number no handler read within `grace_s` of being readable,
        or None (the handler read it: the main thread runs Python)."""
        handled = self._handled
        if not select.select([self._r], [], [], 0)[0]:
            return None  # read meanwhile
        with self._cond:
            self._cond.wait_for(lambda: self._handled != handled or self._closed, self.grace_s)
            if self._handled != handled or self._closed:
                return None
            data = _drain(self._r)
        got = [b for b in data if b in WATCHED]
        return got[0] if got else None

    def _take_over(self, signum: int, why: str) -> None:
        """Write from this thread and end the process, unless the main thread has the records."""
        with self._lock:
            if self._ended or self._closed:
                return
            if not self.reading.claim("rescue"):
                self._ended = True  # the region's end has read its records: it writes them
                return
            self._note(signum)
            print(
                f"sm-profiler run: {why}; writing what it recorded from another thread",
                file=sys.stderr,
                flush=True,
            )
            try:
                self.rescue(signum)
            except BaseException as e:  # noqa: BLE001 - say why, then end as the signal asked
                print(f"sm-profiler run: could not write what it recorded: {e}", file=sys.stderr)
            sys.stderr.flush()
            sys.stdout.flush()
            os._exit(128 + signum)


def _poke(fd: int) -> None:
    try:
        os.write(fd, b"!")
    except OSError:  # full: the watcher has a byte to wake up to already
        pass


def _drain(fd: int) -> bytes:
    """Everything the wakeup fd holds now (it never blocks)."""
    out = b""
    while True:
        try:
            data = os.read(fd, 512)
        except (BlockingIOError, OSError):
            return out
        if not data:
            return out
        out += data


def _running(frame) -> bool:
    """Whether StopSignals.program is on the stack whose top is `frame`: the program runs."""
    while frame is not None:
        if frame.f_code is _PROGRAM_CODE:
            return True
        frame = frame.f_back
    return False


def _main_frame():
    return sys._current_frames().get(threading.main_thread().ident)


def _after_fork_in_child() -> None:
    for stops in list(_current):
        stops._forget_in_child()


_PROGRAM_CODE = StopSignals.program.__code__
os.register_at_fork(after_in_child=_after_fork_in_child)
