"""The flight recorder (docs/auto.md, "Flight recorder"): every step recorded into the ring, the
last K steps written when a step is slow, the job stalls, the job ends badly, or on demand.

    with sm_profiler.auto(flight_recorder=8) as prof:   # sm-profiler run --flight-recorder
        for batch in loader:
            train_step(batch)
            prof.step()                                  # (run: each optimizer step)

Nothing is written in the normal course of the job. The main thread's part is one call a step
(`on_step`): a CUDA event recorded at the boundary, the step times whose events have completed
read (flight_triggers.StepClock: never a sync), the slow-step verdict, and now and then the
ring's size against the records a step takes. Each instrumented launch given an area is also
logged by the binding, (CUfunction, area, host time), in a deque of fixed length: what the host
queued, to name the launch a stuck GPU is in. A thread of its own (`sm-profiler-flight`) writes
every dump: a slow step the main thread asked for, a stall it sees itself (no step ended within
the stall time), SIGUSR1. It reads the ring as a stop signal's rescue does (rescue.py: the
copier made with each buffer, polled, never a sync) while kernels go on writing, and keeps:

- the areas still the ring's once the read is done (a launch whose slots the ring gave to a
  newer launch while they were read is left out, counted);
- of the steps the GPU had not finished at the read, the records written since: a slot given to
  a launch that has not run yet still holds a record of the ring's last lap (older than the
  newest finished step's first record), read as unwritten. A launch running at the read has the
  programs that ended (its others unwritten: the report says how many).

A dump is one file per rank and GPU buffer set, `flight.rankR.<UTC time>.<trigger>.npz`, with
its report (`_stats.txt`) and trace (`.perfetto-trace`) as `sm-profiler run` writes them; what a
dump says first (why, and each GPU's last finished step and kernel and the launches queued
after it) is report/dump.py's.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import sys
import threading
import time
import warnings
from collections import deque
from dataclasses import dataclass, field

import numpy as np

from ..errors import AutoWarning
from ..export.auto_job import job_identity
from ..text import printable
from ..wire import format as fmt
from . import binding
from .driver import TimingEvent, capturing, current_device, current_stream
from .flight_triggers import (
    HISTORY,
    DumpBudget,
    FlightConfig,
    Slow,
    SlowSteps,
    StepClock,
    stall_after_s,
)

LOG_LAUNCHES = 4096  # launches the binding logs (the newest); the tail of a stuck GPU's queue
QUEUED_KEPT = 2048  # of them, the newest a dump keeps per GPU
RING_MARGIN_STEPS = 2  # steps queued or running beside the K kept: the ring holds K + this
STEP_STARTS_KEPT = 256  # the newest steps' host start times a dump can join collectives to
_RING_CHECKS = 16  # the ring's size is checked at each of the first steps, then every 100th
_WATCH_POLL_S = 0.25
_READ_TRIES = 3  # a read that races the main thread's bookkeeping is tried again
_END_WAIT_S = 120.0  # the region's end waits this long for a dump being written
ON_DEMAND = getattr(signal, "SIGUSR1", None)
_CAUGHT_ABORT = getattr(signal, "SIGABRT", None)


@dataclass
class Dump:
    """A dump asked for: its trigger ('slow', 'stall', 'SIGUSR1', 'SIGTERM', 'exception',
    ...), the step it is about, why (one line), and what the report says of it."""

    trigger: str
    step: int
    why: str
    info: dict = field(default_factory=dict)
    done: threading.Event = field(default_factory=threading.Event)


class FlightRecorder:
    """The flight recorder of one AutoProfiler region (`prof`): made and started by its start(),
    told of each step by its `_advance`, stopped by its stop(); `write_end` writes the dump of a
    bad end from the region's table. make_event (a CUDA timing event by default) and monotonic
    (the host's clock) are replaceable in tests."""

    def __init__(self, prof, config: FlightConfig, *, make_event=None, monotonic=time.monotonic):
        self.prof, self.config = prof, config
        self.slow = SlowSteps(config.slow_factor)
        self.budget = DumpBudget(config.dump_window_s, config.max_dumps)
        self.clock: StepClock | None = None
        self.written: list[str] = []  # each dump's path (.npz)
        self._make_event = make_event
        # A real event is recorded only where the program has made its CUDA context (the GPU it
        # picked): never one made by us on the current GPU first (torchrun's ranks).
        self._can_mark = _cuda_ready if make_event is None else (lambda: True)
        self._monotonic = monotonic
        self._lock = threading.Lock()  # one dump at a time: they share each GPU's copier
        self._asked: deque[Dump] = deque()
        self._wake = threading.Event()
        self._closed = False
        self._thread: threading.Thread | None = None
        self._progress_s = 0.0  # the last step's end (or kernel load): the stall clock's start
        self._step_began_s = 0.0
        self._steps_s: deque[float] = deque(maxlen=HISTORY)  # recent steps' host times
        self._kernels_at_step = 0  # kernels loaded at the last step's start (main thread)
        self._kernels_seen = 0  # ... at the thread's last look
        self._not_judged: set[int] = set()  # steps that compiled or that a dump held up
        self._dumping = False  # a dump is being read or written (by the thread)
        self._dumps_begun = 0  # dumps begun, counted at each step's start below
        self._dumps_at_step = 0
        self._stalled = False  # a stall dump was written in the step now running
        self._stall_warned = False
        self._ring_warned = False
        self._ring_marks: dict[int, tuple[int, int, int]] = {}  # GPU -> (step, launches, copies)
        self.records_per_step = 0  # the most records a step took, of the steps sampled
        self._handlers: dict[int, object] = {}  # signal -> the handler before ours
        # (step, host wall clock ns) of the newest steps' starts: the steps PyTorch's flight
        # recorder's collectives were queued in (its clock is the same)
        self._step_starts: deque[tuple[int, int]] = deque(maxlen=STEP_STARTS_KEPT)

    # -- on and off --------------------------------------------------------------------------------

    def start(self) -> FlightRecorder:
        self.clock = StepClock(self._make_event or _timing_event)
        binding.STATE.launch_log = deque(maxlen=LOG_LAUNCHES)
        self._kernels_at_step = self._kernels_seen = len(binding.STATE.kernels)
        self._progress_s = self._step_began_s = self._monotonic()
        # No event at the region's start: the CUDA context may not be made yet. Steps are
        # timed from step 1.
        self._install_handlers()
        self._thread = threading.Thread(target=self._watch, name="sm-profiler-flight", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """The region ends (once its GPU waits are over): the steps whose times came in since
        the last step are judged, what was asked for is written, then the thread ends; the
        binding's log and the signal handlers are put back."""
        if self._thread is None:
            return
        try:  # the steps the GPU ended since the last step's start
            for s, ns in self.clock.ready():
                self._judge(s, ns)
        except Exception:  # noqa: BLE001 - a device error: the region's end says it
            pass
        self._closed = True
        self._wake.set()
        self._thread.join(_END_WAIT_S)
        self._thread = None
        try:
            self.clock.close()
        except Exception:  # noqa: BLE001 - a device error: the region's end says it
            pass
        binding.STATE.launch_log = None
        self._restore_handlers()

    # -- the main thread, at each step -------------------------------------------------------------

    def on_step(self, step: int) -> None:
        """Step `step` begins (and step - 1 ends): its start on the GPU's stream, the steps whose
        GPU times are in, judged; the ring's size now and then."""
        now = self._monotonic()
        took_s = now - self._step_began_s
        self._step_began_s = self._progress_s = now
        self._step_starts.append((step, time.time_ns()))  # the host's clock, as the launch log
        kernels = len(binding.STATE.kernels)
        if kernels != self._kernels_at_step:  # the step that ended compiled: not judged
            self._kernels_at_step = kernels
            self._not_judged.add(step - 1)
            self._rearm()
        else:
            self._steps_s.append(took_s)
        # A dump's read and write hold the host up (and the GIL): the steps they overlap are
        # not judged, nor is one that starts while a dump goes on.
        if self._dumps_begun != self._dumps_at_step or self._dumping:
            self._dumps_at_step = self._dumps_begun
            self._not_judged.add(step - 1)
        if self._dumping:
            self._not_judged.add(step)
        if self._stalled:
            self._stalled = False
            self._say_stall_too_short(took_s)
        self._mark(step)
        for s, ns in self.clock.ready():
            self._judge(s, ns)
        if step <= _RING_CHECKS or step % 100 == 0:
            self._check_ring(step)

    def _mark(self, step: int) -> None:
        try:
            if self._can_mark():
                self.clock.mark(step)
        except Exception:  # noqa: BLE001 - (another GPU current now): this step goes untimed
            pass

    def _judge(self, step: int, step_ns: int) -> None:
        if self._not_judged:  # steps come in order: the ones before are done with
            skip = step in self._not_judged
            for s in list(self._not_judged):  # in place: the thread adds to it too
                if s <= step:
                    self._not_judged.discard(s)
            if skip:
                return
        verdict = self.slow.judge(step, step_ns)
        if verdict is None or not self.budget.allow("slow", self._monotonic()):
            return
        self.ask(Dump("slow", step, _slow_why(verdict), _slow_info(verdict)))

    def ask(self, dump: Dump) -> Dump:
        """Have the thread write `dump` (returns it: `done` is set once written or given up)."""
        self._asked.append(dump)
        self._wake.set()
        return dump

    def _check_ring(self, step: int) -> None:
        """Records a step takes on each GPU, from the host's areas (a sum over the launches
        since the last look), against the ring's launch space: warns once where K steps and
        RING_MARGIN_STEPS more do not fit."""
        for device, b in list(binding.STATE.buffers.items()):
            if b is None:
                continue
            areas = b.areas
            n, copies = len(areas.counts), areas.other_claims
            mark = self._ring_marks.get(device)
            self._ring_marks[device] = (step, n, copies)
            if mark is None or n < mark[1] or step <= mark[0]:
                continue  # the first look, or the areas were compacted since
            records = sum(areas.counts[mark[1] :]) + copies - mark[2]
            self.records_per_step = max(self.records_per_step, -(-records // (step - mark[0])))
            self._warn_ring(areas.top, areas.slots)

    def _warn_ring(self, space: int, slots: int) -> None:
        per_step, k = self.records_per_step, self.config.steps
        need = (k + RING_MARGIN_STEPS) * per_step
        if self._ring_warned or need <= space or per_step == 0:
            return
        self._ring_warned = True
        fits = max(space // per_step - RING_MARGIN_STEPS, 0)
        warnings.warn(
            f"sm_profiler.auto: flight recorder: {k} steps of up to {per_step:,} records need "
            f"{need:,} records ({_mib(need)}) with the {RING_MARGIN_STEPS} steps queued or "
            f"running beside them, and the ring has {space:,} for launches ({_mib(space)}): "
            f"a dump would hold {fits} whole steps. Raise capacity (--capacity "
            f"{need + slots - space:,}) or lower flight_recorder (--flight-recorder "
            f"{max(fits, 1)})",
            AutoWarning,
            stacklevel=4,
        )

    def _say_stall_too_short(self, took: float) -> None:
        """A stall dump was written in a step that then ended: a stall that passed, or a stall
        time set too near the job's own step time (said once, with the fix)."""
        import statistics

        stall_s = self.config.stall_s
        if stall_s is None or self._stall_warned or not self._steps_s:
            return
        median_s = statistics.median(self._steps_s)
        if 2 * median_s <= stall_s:
            return  # a stall that passed: the dump is what it is for
        self._stall_warned = True
        warnings.warn(
            f"sm_profiler.auto: flight recorder: a stall dump was written during a step that "
            f"then ended ({took:.1f} s), and stall_s={stall_s:g} is below twice this job's "
            f"median step ({median_s:.1f} s): set --stall-s above its longest step (or leave "
            f"it out: {stall_after_s(None, self._steps_s):g} s from the recent steps)",
            AutoWarning,
            stacklevel=4,
        )

    # -- signals -----------------------------------------------------------------------------------

    def _install_handlers(self) -> None:
        """SIGUSR1: a dump, and the job goes on; SIGABRT sent from outside: a dump, then the
        abort. Each after the program's own handler where it had one (it runs first); only
        where signals can be set (the main thread) and the signal is not ignored."""
        if threading.current_thread() is not threading.main_thread():
            return
        for signum, ours in ((ON_DEMAND, self._on_demand), (_CAUGHT_ABORT, self._on_abort)):
            if signum is None:
                continue
            old = signal.getsignal(signum)
            if old is signal.SIG_IGN or old is None:
                continue
            if signum == _CAUGHT_ABORT and old is not signal.SIG_DFL:
                continue  # the program's own abort handler decides
            self._handlers[signum] = old
            signal.signal(signum, ours)

    def _rearm(self) -> None:
        """Ours set again where a compile hid it. Triton's libtriton.so (LLVM) installs its own
        handlers the first time it compiles in a process, SIGUSR1 among them (LLVM's "info"
        signal, which it swallows), with sigaction: Python's view (signal.getsignal) still says
        ours, and a SIGUSR1 after a kernel compiled in the region was lost (H200, 2026-11-29).
        Only where Python's view is still ours: a handler the program set since is left alone.
        (LLVM's SIGABRT, SIGTERM, ... handlers pass the signal on to ours: left as they are.)
        Called once a step that compiled ends (a few microseconds)."""
        main = threading.current_thread() is threading.main_thread()
        if main and ON_DEMAND in self._handlers and signal.getsignal(ON_DEMAND) == self._on_demand:
            signal.signal(ON_DEMAND, self._on_demand)

    def _restore_handlers(self) -> None:
        for signum, old in self._handlers.items():
            if signal.getsignal(signum) in (self._on_demand, self._on_abort):
                signal.signal(signum, old)
        self._handlers = {}

    def _on_demand(self, signum, frame) -> None:
        theirs = self._handlers.get(signum)
        if callable(theirs):
            theirs(signum, frame)
        step = self.prof.step_num
        self.ask(Dump("SIGUSR1", step, f"SIGUSR1 asked for the ring (in step {step})"))

    def _on_abort(self, signum, frame) -> None:
        dump = self.ask(Dump("SIGABRT", self.prof.step_num, "SIGABRT"))
        dump.done.wait(_END_WAIT_S)
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)

    # -- the thread --------------------------------------------------------------------------------

    def _watch(self) -> None:
        while True:
            self._wake.wait(_WATCH_POLL_S)
            self._wake.clear()
            while self._asked:
                self.dump_live(self._asked.popleft())
            if self._closed:
                return
            self._check_stall()

    def _check_stall(self) -> None:
        """No step ended (and no kernel loaded: a compile) within the stall time: one dump, the
        job left as it is. Armed once a step has ended."""
        now = self._monotonic()
        kernels = len(binding.STATE.kernels)
        if kernels != self._kernels_seen:
            self._kernels_seen, self._progress_s = kernels, now
        if self._stalled or not self._steps_s:
            return
        after = stall_after_s(self.config.stall_s, self._steps_s)
        idle = now - self._progress_s
        if idle < after:
            return
        self._stalled = True
        if not self.budget.allow("stall", now):
            return
        step = self.prof.step_num
        why = f"no step ended within {after:g} s (step {step} began {idle:.1f} s before)"
        self.dump_live(Dump("stall", step, why, {"stall_s": after}))

    # -- dumps -------------------------------------------------------------------------------------

    def dump_live(self, dump: Dump) -> str | None:
        """Read the ring while the region goes on recording and write `dump`; the path written,
        or None (said on stderr: the job never stops over its flight recorder)."""
        try:
            with self._lock:
                self._dumps_begun += 1
                self._dumping = True
                # Not judged: a stalled step (its dump is the stall's, not a slow step's).
                self._not_judged.add(self.prof.step_num)
                table, where = self._read_live()
                dump.info["live"] = True  # read while the GPU ran: what each GPU was in
                return self._write(table, dump, where)
        except Exception as e:  # noqa: BLE001 - the job goes on; say why
            print(
                f"sm_profiler flight recorder: the {dump.trigger} dump was not written: {e}",
                file=sys.stderr,
            )
            return None
        finally:
            self._dumping = False
            dump.done.set()

    def rescue(self, signum: int) -> bool:
        """A stop signal's watcher (stop_signals.py) while the main thread is blocked: the dump,
        read as the live ones are; False where the region's end has the records."""
        reading = self.prof.reading
        if not reading.claim("rescue"):
            return False
        try:
            if not self._lock.acquire(timeout=_END_WAIT_S / 4):
                print("sm_profiler flight recorder: a dump is being written", file=sys.stderr)
                return True
            try:
                table, where = self._read_live()
                name = signal.Signals(signum).name
                dump = Dump(name, self.prof.step_num, _signal_why(name), {"live": True})
                self._write(table, dump, where)
            finally:
                self._lock.release()
        finally:
            reading.done.set()
        return True

    def ended_by(self, exc: BaseException) -> str | None:
        """The region ended by `exc` (its `with` block raised): the dump of that bad end."""
        end = end_of(exc)
        return None if end is None else self.write_end(*end)

    def write_end(self, trigger: str, why: str) -> str | None:
        """The dump of a bad end (an exception, a stop signal the program stopped on), from the
        region's table once it has ended."""
        table = self.prof.table()
        where = {i: (a, r, None) for i, (a, r) in self.prof.ring_areas().items()}
        step = int(table.launches["step"].max()) if table.num_launches else self.prof.step_num
        with self._lock:
            return self._write(table, Dump(trigger, step, why), where)

    def _read_live(self):
        """(the AutoTable of the ring now, {GPU: (address, areas, Copied)}), kept as the module
        says; tried again where the read raced the main thread's bookkeeping."""
        for _ in range(_READ_TRIES - 1):
            try:
                return self._read_once()
            except Exception:  # noqa: BLE001 - the areas changed under the read: again
                pass
        return self._read_once()

    def _read_once(self):
        reads = self.prof.read_live()
        done_tag = _tag_of_step(self.prof.step_of_tags(), self.clock.done_step)
        words, where = {}, {}
        for index, (w, copied, after, address) in reads.items():
            w, _ = drop_overwritten(w, after)
            clear_stale(w, done_tag)
            words[index] = w
            where[index] = (address, descriptor_areas(w), copied)
        return self.prof.live_table(words), where

    def _write(self, table, dump: Dump, where: dict) -> str:
        """Keep the K steps up to `dump.step`, say why in each session, write the files."""
        k = self.config.steps
        steps = table.launches["step"]
        kept = table.select((steps > dump.step - k) & (steps <= dump.step))
        names = binding.kernels_by_function()
        log = list(binding.STATE.launch_log or ())  # a copy: the deque is appended to meanwhile
        starts = [[s, ns] for s, ns in list(self._step_starts) if s >= dump.step - k]
        fr = _nccl_trace()  # once for the dump: read from PyTorch's flight recorder
        step_tags = self.prof.step_of_tags()
        written_ns = time.time_ns()
        sessions = []
        for s in kept.sessions:
            gpu = s.get("gpu")
            address, areas, copied = where.get(gpu, (0, np.zeros((0, 4), np.int64), None))
            info = {
                "trigger": dump.trigger,
                "why": dump.why,
                "step": dump.step,
                "steps": [dump.step - k + 1, dump.step],
                "host_step": self.prof.step_num,
                "done_step": self.clock.done_step if self.clock else -1,
                "written_ns": written_ns,
                "ring_records_per_step": self.records_per_step,
                "queued": queued_launches(
                    log, address, s.get("capacity", 0), areas, step_tags, names, dump.step - k + 1
                ),
                "step_starts_ns": starts,
                **dump.info,
                **fr,
            }
            if copied is not None and copied.nbytes < copied.total:
                info["read"] = [copied.nbytes, copied.total, copied.why]
            sessions.append(dict(s, flight=info))
        # A table of its own: the region's (write_end's) is the user's, left as it was.
        kept = dataclasses.replace(
            kept, sessions=sessions, metadata=dict(kept.metadata, job=job_identity())
        )
        path = write_dump(kept, self.config.out, dump.trigger, written_ns)
        self.written.append(path)
        print(f"sm_profiler flight recorder: {dump.why}: wrote {path}", file=sys.stderr)
        return path


def profile_run(program, prof, out_dir: str) -> int:
    """`sm-profiler run --flight-recorder`: `program` in the region `prof` (its settings' `out`
    is `out_dir`), its stop signals handled as `run` handles them; nothing written in the normal
    course, the dump of a bad end written once the region has ended (or, with the main thread
    blocked, by the stop signal's watcher). Returns the program's exit status."""
    from .script import run_program
    from .stop_signals import StopSignals

    def rescue(signum: int) -> None:  # the watcher's thread: the main one is blocked
        if prof.flight is not None:
            prof.flight.rescue(signum)

    with StopSignals(rescue, reading=prof.reading) as stops:
        noted = _Noted(stops)
        status = run_program(program, prof, noted)
        stops.region_ended()
        end = end_of(noted.exc, status, stops.signum)
        if end is not None and prof.flight is not None:
            try:
                prof.flight.write_end(*end)
            except Exception as e:  # noqa: BLE001 - said; the program's status stands
                print(f"sm-profiler run: the dump of the end was not written: {e}", file=sys.stderr)
    _say_written(prof.flight, out_dir)
    return status


class _Noted:
    """StopSignals as run_program calls it, noting what the program raised."""

    def __init__(self, stops):
        self.stops, self.exc = stops, None

    def program(self, run):
        try:
            return self.stops.program(run)
        except BaseException as e:
            self.exc = e
            raise


def _say_written(flight, out_dir: str) -> None:
    if flight is None:
        return
    for why, n in flight.budget.refused.items():
        print(f"sm-profiler run: flight recorder: {n} dump(s) not written ({why})", file=sys.stderr)
    if not flight.written:
        print(
            "sm-profiler run: flight recorder: no dump written (no slow step, stall or bad "
            "end); every step was recorded into the ring",
            file=sys.stderr,
        )
        return
    print(
        f"sm-profiler run: flight recorder: {len(flight.written)} dump(s) in {out_dir} (read "
        f"each rank's newest: sm-profiler stats {out_dir})",
        file=sys.stderr,
    )


def end_of(exc: BaseException | None = None, status: int = 0, signum: int | None = None):
    """(trigger, why) of a bad end, or None for a good one: an exception, Ctrl-C, a stop signal
    (`signum`: the one the program stopped on), a nonzero exit status."""
    if signum is not None:
        name = signal.Signals(signum).name
        return name, f"{name}: the program stopped"
    if isinstance(exc, KeyboardInterrupt) or (exc is None and status == 130):
        return "SIGINT", "SIGINT: the program was interrupted (Ctrl-C)"
    if isinstance(exc, SystemExit):
        code = exc.code
        status = code if isinstance(code, int) else (0 if code is None else 1)
        exc = None
    if exc is not None:
        text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        return "exception", f"the program raised {_one_line(text)}"
    if status:
        return "exit", f"the program exited with status {status}"
    return None


def _one_line(text: str, limit: int = 200) -> str:
    text = printable(" ".join(text.split()))
    return text if len(text) <= limit else text[: limit - 3] + "..."


# -- reading the ring while it records -------------------------------------------------------


def _descriptors(words: np.ndarray) -> np.ndarray:
    n = int(words[fmt.AUTO_HDR_AREAS])
    return words[fmt.AUTO_HEADER_WORDS : fmt.AUTO_HEADER_WORDS + n * fmt.AUTO_AREA_WORDS].reshape(
        n, fmt.AUTO_AREA_WORDS
    )


def descriptor_areas(words: np.ndarray) -> np.ndarray:
    """(first, count, step tag, tag) of each area a buffer's words describe, in their order (a
    launch's grid_id in the table is its row here)."""
    d = _descriptors(words)
    step_tags, tags, _ = fmt.auto_label_parts(d[:, 1])
    out = np.empty((len(d), 4), np.int64)
    out[:, 0] = (d[:, 0] & np.uint64(fmt.LOW32)).astype(np.int64)
    out[:, 1] = (d[:, 0] >> np.uint64(32)).astype(np.int64)
    out[:, 2], out[:, 3] = step_tags.astype(np.int64), tags.astype(np.int64)
    return out


def drop_overwritten(words: np.ndarray, kept_after: np.ndarray) -> tuple[np.ndarray, int]:
    """`words` without the areas that are not among `kept_after`'s (first, count, step tag)
    rows, the areas the ring still held once the read was done: a launch queued during the read
    was given their slots, and may have written them. Returns (words, how many were dropped)."""
    areas = descriptor_areas(words)
    after = set(map(tuple, kept_after[:, :3].tolist()))
    keep = np.array([tuple(r) in after for r in areas[:, :3].tolist()], bool)
    if keep.all():
        return words, 0
    d = _descriptors(words)[keep]
    head = words[: fmt.AUTO_HEADER_WORDS].copy()
    head[fmt.AUTO_HDR_AREAS] = len(d)
    records = words[fmt.AUTO_HEADER_WORDS + len(areas) * fmt.AUTO_AREA_WORDS :]
    return np.concatenate([head, d.reshape(-1), records]), int((~keep).sum())


def clear_stale(words: np.ndarray, done_tag: int | None) -> int:
    """In place: the records of areas of steps the GPU had not finished (step tags above
    `done_tag`) that start before the first record of the newest finished step that has any,
    marked unwritten: a slot given to a launch that has not run yet holds the ring's last lap.
    Returns how many."""
    if done_tag is None:
        return 0
    areas = descriptor_areas(words)
    count = areas[:, 1]
    if not len(areas) or not count.sum():
        return 0
    start = fmt.AUTO_HEADER_WORDS + len(areas) * fmt.AUTO_AREA_WORDS
    recs = words[start:].view(fmt.AUTO_RECORD_DTYPE)
    before = np.cumsum(count) - count
    slot = np.repeat(areas[:, 0] - before, count) + np.arange(int(count.sum()))
    tag = np.repeat(areas[:, 2], count)
    got = recs[slot]
    written = got["kernel_tag"] != 0
    done = tag <= done_tag
    if not (written & done).any():
        return 0
    newest = tag[written & done].max()
    first_ns = got["start_ns"][written & done & (tag == newest)].min()
    stale = written & ~done & (got["start_ns"] < first_ns)
    recs["kernel_tag"][slot[stale]] = 0
    return int(stale.sum())


def _tag_of_step(step_tags: dict[int, int], step: int) -> int | None:
    """The newest step tag of a step at or before `step` (None: none has ended)."""
    tags = [t for t, s in step_tags.items() if s <= step]
    return max(tags) if step >= 0 and tags else None


def queued_launches(
    log, address: int, slots: int, areas: np.ndarray, step_tags: dict, names: dict, from_step: int
) -> list[list]:
    """[grid_id, kernel, step, records, queued_ns] of the launches the binding logged on the
    buffer at `address` (of `slots` records) whose areas are among `areas` (descriptor rows:
    their index is the launch's grid_id), from step `from_step` on, oldest first; at most
    QUEUED_KEPT, the newest. A logged launch whose slots the ring has given to a newer one is
    not among them."""
    end = address + slots * fmt.AUTO_RECORD_BYTES
    index = {int(f): i for i, f in enumerate(areas[:, 0].tolist())}
    taken: set[int] = set()
    out: list[list] = []
    for function, area, queued_ns in reversed(log):
        if not address <= area < end:
            continue
        i = index.get((area - address) >> fmt.AUTO_RECORD_SHIFT)
        if i is None or i in taken:
            continue  # overwritten: the area now holds a newer launch's
        taken.add(i)
        step = step_tags.get(int(areas[i, 2]), -1)
        if step < from_step:
            break
        name = names.get(function, "(a kernel without a plain binary)")
        out.append([i, name, step, int(areas[i, 1]), int(queued_ns)])
        if len(out) >= QUEUED_KEPT:
            break
    out.reverse()
    return out


# -- the files -------------------------------------------------------------------------------


def dump_stem(folder: str, rank: int, trigger: str, written_ns: int) -> str:
    """FOLDER/flight.rankR.<UTC date and time, ms>Z.<trigger>: sorted by time; a second dump of
    the same millisecond gets .2, .3, ..."""
    from ..report.dump import dump_name

    stem = os.path.join(folder, dump_name(rank, written_ns, trigger))
    n, out = 1, stem
    while os.path.exists(out + ".npz"):
        n += 1
        out = f"{stem}.{n}"
    return out


def write_dump(table, folder: str, trigger: str, written_ns: int, width: int = 100) -> str:
    """The dump's table, report and trace into `folder` (made here); returns the table's path."""
    from ..export import export
    from ..paths import atomic_output
    from ..report.auto_report import dump_report

    os.makedirs(folder, exist_ok=True)
    rank = next((s.get("rank") for s in table.sessions if isinstance(s.get("rank"), int)), 0)
    stem = dump_stem(folder, rank, trigger, written_ns)
    table.save(stem + ".npz")
    with atomic_output(stem + "_stats.txt") as tmp, open(tmp, "w", encoding="utf-8") as f:
        f.write(dump_report(table, width))
    if table.num_launches:
        export(table.decode(), stem + ".perfetto-trace")
    return stem + ".npz"


# -- helpers ---------------------------------------------------------------------------------


def _timing_event():
    return TimingEvent()


def _cuda_ready() -> bool:
    """Whether a step's event may be recorded now: CUDA is initialised (by the program) and the
    current stream is not being captured into a CUDA graph (asked of the driver: torch's
    is_current_stream_capturing builds a Stream object, ~8 us a step on an H200)."""
    import torch

    if not torch.cuda.is_initialized():
        return False
    return not capturing(current_stream(current_device()))


def _mib(records: int) -> str:
    return f"{records * fmt.AUTO_RECORD_BYTES / 2**20:,.0f} MiB of GPU memory"


def _slow_why(v: Slow) -> str:
    from ..units import format_time

    return (
        f"step {v.step} was slow: {format_time(v.step_ns)} on the GPU, "
        f"{v.step_ns / v.median_ns:.2f}x the median {format_time(v.median_ns)} of the "
        f"{v.history} steps before (threshold {v.factor:g}x)"
    )


def _slow_info(v: Slow) -> dict:
    return {
        "step_ns": v.step_ns,
        "median_ns": v.median_ns,
        "factor": v.factor,
        "history": v.history,
    }


def _signal_why(name: str) -> str:
    return f"{name}, with the main thread blocked (in a GPU wait?)"


FR_KEPT = 32  # of PyTorch's flight recorder's collectives, the newest a dump keeps
FR_WAIT_S = 2.0  # how long a dump waits for PyTorch's flight recorder to answer
_FR_FIELDS = {  # ours: PyTorch's entry key (its dump format 2.x), whole numbers or text
    "seq": "collective_seq_id",
    "p2p_seq": "p2p_seq_id",
    "name": "profiling_name",
    "state": "state",
    "created_ns": "time_created_ns",
    "started_ns": "time_discovered_started_ns",
    "completed_ns": "time_discovered_completed_ns",
}


def _nccl_trace() -> dict:
    """PyTorch's own flight recorder, where it is on (TORCH_FR_BUFFER_SIZE, or its older name
    TORCH_NCCL_TRACE_BUFFER_SIZE): its settings, and its newest collectives read from it now
    (fr_collectives), so that the report can say which collective the rank was in and in which
    of our steps the host queued it."""
    for var in ("TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_TRACE_BUFFER_SIZE"):
        size = os.environ.get(var, "").strip()
        if size.isdigit() and int(size) > 0:
            break
    else:
        return {}
    out = {
        "buffer_size": int(size),
        "variable": var,
        "dump_on_timeout": os.environ.get("TORCH_NCCL_DUMP_ON_TIMEOUT", ""),
        "file_prefix": os.environ.get("TORCH_NCCL_DEBUG_INFO_TEMP_FILE", "/tmp/nccl_trace_rank_"),
    }
    out.update(fr_collectives())
    return {"nccl_trace": out}


def fr_collectives(wait_s: float = FR_WAIT_S) -> dict:
    """The newest FR_KEPT collectives of PyTorch's flight recorder ({"collectives": [{seq,
    p2p_seq, name, pg, state, created_ns, started_ns, completed_ns}], "pg_status": ...}), read
    through its JSON dump (torch._C._distributed_c10d._dump_fr_trace_json, or
    _dump_nccl_trace_json before torch 2.8), in a thread of its own given `wait_s`: a dump never
    waits on it longer. {"unread": why} where it cannot be read; {} where torch.distributed is
    not in use."""
    import json

    dist = sys.modules.get("torch.distributed")  # only where the program imported it
    try:
        if dist is None or not dist.is_available() or not dist.is_initialized():
            return {}
        from torch._C import _distributed_c10d as c10d
    except Exception:  # noqa: BLE001 - a torch without it: nothing to read
        return {}
    dump = getattr(c10d, "_dump_fr_trace_json", None) or getattr(
        c10d, "_dump_nccl_trace_json", None
    )
    if dump is None:
        return {"unread": "this torch has no JSON dump of its flight recorder"}
    got: list = []

    def read():
        try:
            got.append(json.loads(dump(True, False)))
        except Exception as e:  # noqa: BLE001 - said in the dump
            got.append(e)

    reader = threading.Thread(target=read, name="sm-profiler-fr", daemon=True)
    reader.start()
    reader.join(wait_s)
    if not got:
        return {"unread": f"it did not answer within {wait_s:g} s"}
    if isinstance(got[0], Exception) or not isinstance(got[0], dict):
        return {"unread": _one_line(f"{type(got[0]).__name__}: {got[0]}")}
    doc = got[0]
    entries = doc.get("entries") if isinstance(doc.get("entries"), list) else []
    kept = []
    for e in entries[-FR_KEPT:]:
        if not isinstance(e, dict):
            continue
        row = {k: e.get(v) for k, v in _FR_FIELDS.items()}
        pg = e.get("process_group")
        row["pg"] = pg[1] or pg[0] if isinstance(pg, list) and len(pg) == 2 else e.get("pg_id")
        kept.append({k: v for k, v in row.items() if isinstance(v, (int, str))})
    status = doc.get("pg_status") if isinstance(doc.get("pg_status"), dict) else {}
    return {"collectives": kept, "pg_status": status, "version": str(doc.get("version", ""))}
