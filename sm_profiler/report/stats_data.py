"""What a statistics report holds: the plain data (dataclasses and numpy columns) that
`compute_stats` (stats.py) returns and `format_stats` (stats_table.py) draws. Below both, so that
the renderer reads the numbers' types without importing what computes them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from ..trace.model import KernelInfo


@dataclass
class EventStat:
    """Durations (ns) of one event's ranges, and how many instants it recorded."""

    event: int
    name: str
    count: int  # ranges
    total_ns: int
    mean_ns: float
    min_ns: int
    p50_ns: float
    p90_ns: float
    p99_ns: float
    max_ns: int
    instants: int
    # Total self (exclusive) time: total_ns minus what ranges nested directly inside took.
    self_ns: int = 0


@dataclass
class WaitStat:
    """Gaps on a lane from the end of a `before` range to the start of the next `after` range
    with the same parent (the next sibling, or the next top-level range): the waits."""

    before: str
    after: str
    count: int
    total_ns: int
    mean_ns: float
    max_ns: int


@dataclass
class BreakdownRow:
    """One event's ranges within one group, SM or launch (see `breakdown`)."""

    key: str  # 'producer', 'SM 17', 'gemm (launch 2)'
    event: str
    count: int
    total_ns: int
    self_ns: int
    mean_ns: float


@dataclass
class SmTable:
    """One row per SM that ran at least one initialised lane, sorted by SM id. Times are absolute
    %globaltimer ns; subtract `Span.start_ns` for times from kernel start."""

    sm: np.ndarray  # int32
    blocks: np.ndarray  # int64: distinct (capture, block) resident on this SM
    busy_ns: np.ndarray  # int64: length of the union of resident intervals
    busy_pct: np.ndarray  # float64: busy_ns / span duration * 100
    first_start_ns: np.ndarray  # int64
    last_end_ns: np.ndarray  # int64

    def __len__(self) -> int:
        return len(self.sm)


@dataclass
class Span:
    start_ns: int
    end_ns: int

    @property
    def duration_ns(self) -> int:
        return self.end_ns - self.start_ns


@dataclass
class Imbalance:
    """How much later the last SM finishes than the average SM."""

    last_sm: int
    max_end_ns: int
    mean_end_ns: float
    excess_ns: float  # max_end_ns - mean_end_ns
    pct_of_span: float


@dataclass
class KernelLaunches:
    """All launches of one kernel name in a trace."""

    kernel: str
    captures: list[int]
    span_ns: list[int]  # per launch: first stamp to last stamp
    grids: list[str]
    call_sites: list[str]
    section: Stats | None = None
    mixed: int = 0  # launches whose capture mixes launches: no span of theirs is in span_ns

    @property
    def count(self) -> int:
        return len(self.captures)


@dataclass
class Stats:
    """Statistics of a whole trace; `captures` holds one Stats per capture when there are several."""

    label: str
    kernels: list[KernelInfo]
    span: Span
    events: list[EventStat]  # by total range time, largest first; instant-only events last
    sms: SmTable
    imbalance: Imbalance | None
    lanes_total: int
    lanes_initialized: int
    dropped_total: int
    unmatched_begins: int
    unmatched_ends: int
    emulated: bool
    warnings: list[str] = field(default_factory=list)
    captures: list[Stats] = field(default_factory=list)
    # One row per kernel name when a kernel was launched more than once (launch slots, or several
    # snapshots): the launches table and one section per kernel replace the per-capture ones.
    launches: list[KernelLaunches] = field(default_factory=list)
    waits: list[WaitStat] = field(default_factory=list)  # by total gap, largest first
    by_group: list[BreakdownRow] = field(default_factory=list)  # when blocks have several groups
    # A capture here holds records of more than one launch (mixes_launches): its span, SM
    # times and waits would measure the host time between them, so they are not printed.
    mixed: bool = False

    def event(self, name: str) -> EventStat:
        for e in self.events:
            if e.name == name:
                return e
        raise KeyError(f"no event named {name!r}; events: {[e.name for e in self.events]}")
