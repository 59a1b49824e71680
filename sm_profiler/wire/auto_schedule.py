"""Which steps of a long run auto mode records: torch.profiler.schedule's conventions.

    skip_first steps are skipped; then cycles of `wait` steps off, `warmup` steps off (torch
    warms its profiler up there; auto mode needs no warm-up, its kernels are instrumented from
    the start) and `active` steps recorded, `repeat` times (0: until the run ends).

Steps are numbered from 0 (the steps before the first `prof.step()`, or the first optimizer
step under `sm-profiler run`). `Schedule.parse` reads the command line's spellings:
"1000-1005" (those steps), "1000" (one step), "wait=1,warmup=1,active=3,repeat=2,skip_first=10".
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from ..errors import ConfigError


def whole_number(text: str) -> int | None:
    """`text` as an int when it is ASCII digits alone ('12'), else None: str.isdigit() also
    takes '²' and other digits int() refuses."""
    t = str(text).strip()
    return int(t) if t.isascii() and t.isdigit() else None


def step_runs(steps: list[int], most: int = 6) -> str:
    """Sorted step numbers as runs, '2-3, 7', the first `most` of them ('...' after)."""
    out, start = [], None
    for k, v in enumerate(steps):
        start = v if start is None else start
        if k + 1 == len(steps) or steps[k + 1] != v + 1:
            out.append(f"{start}" if start == v else f"{start}-{v}")
            start = None
    return ", ".join(out[:most]) + (" ..." if len(out) > most else "")


@dataclass(frozen=True)
class Schedule:
    wait: int = 0
    warmup: int = 0
    active: int = 1
    repeat: int = 0
    skip_first: int = 0

    def __post_init__(self):
        for f in fields(self):
            v = getattr(self, f.name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise ConfigError(f"schedule {f.name} must be an int >= 0, got {v!r}")
        if self.active < 1:
            raise ConfigError("schedule active must be at least 1 (steps recorded per cycle)")

    @property
    def cycle(self) -> int:
        return self.wait + self.warmup + self.active

    def records(self, step: int) -> bool:
        """Whether step `step` is recorded."""
        s = step - self.skip_first
        if s < 0 or (self.repeat and s >= self.repeat * self.cycle):
            return False
        return s % self.cycle >= self.wait + self.warmup

    def last_step(self) -> int | None:
        """The last step recorded (None: the schedule repeats until the run ends)."""
        return self.skip_first + self.repeat * self.cycle - 1 if self.repeat else None

    def describe(self) -> str:
        if self.repeat == 1 and self.wait + self.warmup == 0:
            a, b = self.skip_first, self.skip_first + self.active - 1
            return f"step {a}" if a == b else f"steps {a}-{b}"
        parts = [f"{f.name}={getattr(self, f.name)}" for f in fields(self)]
        return "schedule " + ",".join(parts)

    @classmethod
    def parse(cls, text: str) -> Schedule:
        """'1000-1005', '1000', or 'wait=1,warmup=1,active=3,repeat=2,skip_first=10'."""
        t = str(text).strip()
        fix = "give STEPS as 1000-1005, 1000, or wait=1,warmup=1,active=3,repeat=2,skip_first=10"
        if "=" in t:
            kw = {}
            names = {f.name for f in fields(cls)}
            for part in filter(None, (p.strip() for p in t.split(","))):
                k, _, v = part.partition("=")
                k = k.strip()
                if k not in names:
                    raise ConfigError(f"--steps {text!r}: no setting {k!r}; {fix}")
                kw[k] = whole_number(v)
                if kw[k] is None:
                    raise ConfigError(f"--steps {text!r}: {k} is not a whole number; {fix}")
            return cls(**kw)
        a, sep, b = t.partition("-")
        first = whole_number(a)
        last = whole_number(b) if sep else first
        if first is None or last is None:
            raise ConfigError(f"--steps {text!r}: {fix}")
        if last < first:
            raise ConfigError(f"--steps {text!r}: the last step is before the first")
        return cls(active=last - first + 1, repeat=1, skip_first=first)


def schedule(wait: int = 0, warmup: int = 0, active: int = 1, repeat: int = 0, skip_first: int = 0):
    """A Schedule (torch.profiler.schedule's arguments): `sm_profiler.auto(schedule=...)`."""
    return Schedule(wait, warmup, active, repeat, skip_first)
