"""When the flight recorder writes (flight.py): its settings, checked before anything runs, and
its triggers, as decisions with no GPU and no clock of their own (tests drive them by hand).

    config = FlightConfig.of(8, capacity)            # or FlightConfig(steps=8, slow_factor=2.0)
    clock = StepClock(make_event)                    # CUDA events made at the region's start
    clock.mark(step)                                 # at each step's start: one event recorded
    for step, gpu_ns in clock.ready():               # the steps whose events have completed
        verdict = slow.judge(step, gpu_ns)           # SlowSteps: over factor x the median?
    budget.allow(now_s)                              # DumpBudget: one a window, N a run

A step's time is the GPU's: two events of the current stream, at the step's start and the next
one's, read (`elapsed_time`) once `query()` says the later one has completed, a step or two
later; nothing waits on the GPU and nothing is copied to the host per step.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

from ..errors import ConfigError

DEFAULT_STEPS = 8  # steps kept
DEFAULT_SLOW_FACTOR = 1.5  # a step this many times the median of the recent steps is slow
DEFAULT_DUMP_WINDOW_S = 300.0  # at most one slow (one stall) dump in this many seconds
DEFAULT_MAX_DUMPS = 10  # slow and stall dumps a run writes at most
DEFAULT_OUT = "sm_profiler_flight"  # where sm_profiler.auto(flight_recorder=K) writes dumps
MIN_STALL_S = 60.0  # the derived stall time is at least this
STALL_STEPS = 10  # ... and this many times the longest recent step (host time)
MIN_SET_STALL_S = 1.0  # a stall time set by hand is at least this (a GC pause is not a stall)
HISTORY = 32  # recent steps whose median a step is judged against
MIN_HISTORY = 5  # steps timed before the first is judged
# CUDA events made for the step clock: the step boundaries the host may be ahead of the GPU
# and still time each step (a loop that never syncs runs as far ahead as CUDA's launch queue).
EVENTS = 256


@dataclass(frozen=True)
class FlightConfig:
    """The flight recorder's settings (sm_profiler.flight_recorder(...), `sm-profiler run
    --flight-recorder`): steps: the last K steps each dump keeps; slow_factor: a step over this
    times the median of the recent steps is slow; stall_s: no step ended within this many
    seconds is a stall (None: STALL_STEPS times the longest recent step, at least MIN_STALL_S);
    dump_window_s: at most one slow dump and one stall dump in this many seconds; max_dumps:
    slow and stall dumps written at most (on demand and at a bad end: always); out: the folder."""

    steps: int = DEFAULT_STEPS
    slow_factor: float = DEFAULT_SLOW_FACTOR
    stall_s: float | None = None
    dump_window_s: float = DEFAULT_DUMP_WINDOW_S
    max_dumps: int = DEFAULT_MAX_DUMPS
    out: str = DEFAULT_OUT

    def __post_init__(self):
        problem = _problem(self)
        if problem:
            raise ConfigError(problem)

    @classmethod
    def of(cls, value, capacity: int) -> FlightConfig | None:
        """The settings AutoProfiler's `flight_recorder=` names: None or False (off), True (the
        defaults), K (the last K steps), or a FlightConfig; refused where K steps cannot fit
        in a ring of `capacity` records (each step keeps one at least)."""
        if value is None or value is False:
            return None
        config = cls() if value is True else value
        if not isinstance(config, FlightConfig):
            config = cls(steps=value)
        if config.steps > capacity:
            raise ConfigError(
                f"flight_recorder={config.steps} keeps {config.steps:,} steps, each at least one "
                f"record, in a ring of {capacity:,} records: raise capacity (--capacity) or "
                "lower flight_recorder"
            )
        return config


def config_of_options(
    steps: int | None,
    out: str,
    slow_factor: float | None = None,
    stall_s: float | None = None,
    dump_window_s: float | None = None,
    max_dumps: int | None = None,
) -> FlightConfig | None:
    """`sm-profiler run --flight-recorder[=K] --slow-factor X --stall-s S --dump-window-s S
    --max-dumps N` as settings (None: no --flight-recorder); a setting given without it is
    refused."""
    given = {
        "--slow-factor": slow_factor,
        "--stall-s": stall_s,
        "--dump-window-s": dump_window_s,
        "--max-dumps": max_dumps,
    }
    if steps is None:
        named = [k for k, v in given.items() if v is not None]
        if named:
            raise ConfigError(
                f"{named[0]} is a setting of the flight recorder: add --flight-recorder (the "
                f"last {DEFAULT_STEPS} steps) or --flight-recorder=K"
            )
        return None
    defaults = FlightConfig()
    return FlightConfig(
        steps=steps,
        slow_factor=defaults.slow_factor if slow_factor is None else slow_factor,
        stall_s=stall_s,
        dump_window_s=defaults.dump_window_s if dump_window_s is None else dump_window_s,
        max_dumps=defaults.max_dumps if max_dumps is None else max_dumps,
        out=out,
    )


def _problem(c: FlightConfig) -> str:
    """What is wrong with the settings, with the fix, or ''."""
    if not _whole(c.steps) or c.steps < 1:
        return (
            f"flight_recorder must be a whole number of steps from 1 (the last K steps kept, "
            f"e.g. {DEFAULT_STEPS}), got {c.steps!r}"
        )
    if not _number(c.slow_factor) or c.slow_factor <= 1:
        return (
            f"slow_factor must be a number over 1 (a step that many times the median of the "
            f"recent steps is slow, e.g. {DEFAULT_SLOW_FACTOR:g}), got {c.slow_factor!r}"
        )
    if c.stall_s is not None and (not _number(c.stall_s) or c.stall_s < MIN_SET_STALL_S):
        return (
            f"stall_s must be a number of seconds from {MIN_SET_STALL_S:g} (no step ended that "
            f"long is a stall; above the job's longest step, e.g. 300), or None to derive it "
            f"from the recent steps; got {c.stall_s!r}"
        )
    if not _number(c.dump_window_s) or c.dump_window_s < 0:
        return (
            f"dump_window_s must be a number of seconds from 0 (at most one slow or one stall dump "
            f"in that time, e.g. {DEFAULT_DUMP_WINDOW_S:g}), got {c.dump_window_s!r}"
        )
    if not _whole(c.max_dumps) or c.max_dumps < 0:
        return (
            f"max_dumps must be a whole number from 0 (slow and stall dumps a run writes at "
            f"most, e.g. {DEFAULT_MAX_DUMPS}), got {c.max_dumps!r}"
        )
    if not isinstance(c.out, str) or not c.out or "\0" in c.out:
        return f"out must name a folder for the dumps, e.g. {DEFAULT_OUT!r}; got {c.out!r}"
    return ""


def _whole(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


# -- the step clock ---------------------------------------------------------------------------


class StepClock:
    """Each step's GPU time, from CUDA events recorded at the steps' starts (made once, at the
    first: `make_event()` -> an object with record(), query() and elapsed_time(other) in ms, as
    torch.cuda.Event(enable_timing=True)), reused round-robin and read only once query() says
    done: never a sync, a fixed pool whatever the number of steps."""

    def __init__(self, make_event, events: int = EVENTS):
        self._make, self._events = make_event, events
        self._pool: list = []
        self._next = 0
        self._marks: deque = deque()  # (step, event) recorded and not yet read, oldest first
        self.done_step = -1  # the newest step the GPU is known to have ended

    def mark(self, step: int) -> None:
        """`step` starts here, in the current stream's order (and the step before it ends). With
        every event still pending (the GPU that far behind) the boundary goes untimed: an event
        is recorded again only once it has been read."""
        if not self._pool:
            self._pool = [self._make() for _ in range(self._events)]
        if len(self._marks) >= len(self._pool) - 1:
            return
        event = self._pool[self._next]
        self._next = (self._next + 1) % len(self._pool)
        event.record()
        self._marks.append((step, event))

    def close(self) -> None:
        """The events given back (those that can be: destroy(), as the driver's events)."""
        pool, self._pool, self._marks = self._pool, [], deque()
        for event in pool:
            destroy = getattr(event, "destroy", None)
            if destroy is not None:
                destroy()

    def ready(self) -> list[tuple[int, int]]:
        """(step, its GPU time in ns) of each step whose end event has completed since the last
        call, oldest first; steps whose boundaries were not both recorded are left out."""
        out = []
        marks = self._marks
        while len(marks) >= 2 and marks[1][1].query():
            (s0, e0), (s1, e1) = marks.popleft(), marks[0]
            self.done_step = max(self.done_step, s1 - 1)
            if s1 == s0 + 1:
                out.append((s0, round(e0.elapsed_time(e1) * 1e6)))
        return out


# -- the slow-step trigger --------------------------------------------------------------------


@dataclass(frozen=True)
class Slow:
    """A step judged slow: its GPU time against the median of the `history` steps before it."""

    step: int
    step_ns: int
    median_ns: int
    factor: float
    history: int


class SlowSteps:
    """Judges each step's GPU time against the median of the HISTORY steps judged before it
    (after MIN_HISTORY of them): over `factor` times that median is slow. A step that is not
    judged (it compiled, or a dump's write held the host) enters neither."""

    def __init__(self, factor: float):
        self.factor = factor
        self._recent: deque[int] = deque(maxlen=HISTORY)

    def judge(self, step: int, step_ns: int) -> Slow | None:
        verdict = None
        if len(self._recent) >= MIN_HISTORY:
            median_ns = _median(self._recent)
            if step_ns > self.factor * median_ns:
                verdict = Slow(step, step_ns, median_ns, self.factor, len(self._recent))
        self._recent.append(step_ns)  # a job that slows down for good: the median follows
        return verdict


def _median(values) -> int:
    """The median of whole numbers, a whole number (the mean of the middle two, rounded)."""
    s = sorted(values)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2] + 1) // 2


# -- how many dumps ---------------------------------------------------------------------------


class DumpBudget:
    """At most one automatic dump of a trigger (slow, stall) in `window_s` seconds, and
    `max_dumps` in all, so that a job that slows down for good does not fill a disk (a slow step
    never keeps a stall from being written); `refused` counts the others, by why."""

    def __init__(self, window_s: float, max_dumps: int):
        self.window_s, self.max_dumps = window_s, max_dumps
        self.written = 0
        self._last_s: dict[str, float] = {}  # trigger -> when its last dump was allowed
        self.refused: dict[str, int] = {}

    def allow(self, trigger: str, now_s: float) -> bool:
        """Whether a dump of `trigger` may be written now (`now_s`: a monotonic clock); counts
        it if so."""
        why = ""
        last = self._last_s.get(trigger)
        if self.written >= self.max_dumps:
            why = f"over --max-dumps {self.max_dumps}"
        elif last is not None and now_s - last < self.window_s:
            why = f"{trigger}: within --dump-window-s {self.window_s:g} of the last one"
        if why:
            self.refused[why] = self.refused.get(why, 0) + 1
            return False
        self.written += 1
        self._last_s[trigger] = now_s
        return True


# -- the stall trigger ------------------------------------------------------------------------


def stall_after_s(stall_s: float | None, recent_steps_s) -> float:
    """Seconds with no step ended after which the job is stalled: `stall_s` where set, else
    STALL_STEPS times the longest of the recent steps (host time), at least MIN_STALL_S."""
    if stall_s is not None:
        return float(stall_s)
    return max(MIN_STALL_S, STALL_STEPS * max(recent_steps_s, default=0.0))
