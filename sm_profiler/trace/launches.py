"""A trace's launches as one table, whatever recorded them: the model every layer above wire/
reads (docs/architecture.md, "The trace model").

A trace holds one capture per kernel launch. Manual captures (SmProfiler's ops, the C++ writer)
decode into a KernelInfo per capture, which `CaptureTable` reads as a table; auto mode's
recording decodes from its `AutoTable` (trace/auto_table.py), whose launches are columns and
whose KernelInfo are built only when asked (`LaunchList`). Both are a `LaunchTable`: the same
declared columns and methods, with the same meaning, so that no reader asks which kind it holds
(`TraceData.table` gives it; tests/host/test_launches.py keeps the two in step)::

    launches   one row per launch (capture), in capture order: kernel (index into
               kernel_names()), session (index into sessions), step (-1: none recorded)
    sessions   one per GPU buffer: device_name, sm_count, rank, gpu, the record counts (auto
               mode: one per (rank, GPU); captures: their first capture's device)
    metadata   of the whole recording (auto mode: schedule, via_triton)

This module imports only the basics (text.py's metadata_count).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ..text import metadata_count

# The columns of LaunchTable.launches that every table has (AutoTable has more).
LAUNCH_COLUMNS = ("kernel", "session", "step")
# Of a session: what a capture's metadata says of its device (CaptureTable.sessions).
DEVICE_KEYS = ("device_name", "sm_count", "rank", "gpu")


@dataclass
class KernelInfo:
    """What is known about one capture (one kernel launch) in a trace."""

    name: str
    num_blocks: int
    num_groups: int
    capacity: int
    emulated: bool
    group_names: dict[int, str] = field(default_factory=dict)
    metadata: dict = field(default_factory=dict)
    # Lanes whose records step back in time by more than STALE_STEP_NS: records left by an
    # earlier launch into the same buffer (see decode._stale_lanes).
    stale_lanes: list[int] = field(default_factory=list)
    # The header's scratch word was written: programs outside the buffer's shape ran the ops.
    out_of_shape_writes: bool = False
    # Emulated buffers only: a lane was opened twice (format.SCRATCH_REOPENED), by a second
    # launch into the same buffer or by two programs given one lane.
    reopened_lanes: bool = False
    # Ring buffer (format.FLAG_RING): a lane's `dropped` are its oldest records, overwritten.
    ring: bool = False
    # Full lanes of a ring buffer that profiler_flush never closed: their order is unknown
    # (compiled without RING=True, or no flush), decoded as the first records.
    ring_unclosed_lanes: list[int] = field(default_factory=list)
    # Lanes of a ring buffer that wrapped (closed with a count above capacity): their `dropped`
    # are their oldest records, overwritten. Any other lane's drops are its newest records.
    ring_wrapped_lanes: list[int] = field(default_factory=list)


class LaunchTable(ABC):
    """The launches of a trace as a table (see the module doc): `launches` (LAUNCH_COLUMNS at
    least), `sessions`, `metadata`, and the methods below. A method that only one kind could
    answer does not belong here: a reader would have to ask which kind it holds."""

    launches: dict[str, np.ndarray]
    sessions: list[dict]
    metadata: dict

    @property
    def num_launches(self) -> int:
        return len(self.launches["kernel"])

    @property
    @abstractmethod
    def auto(self) -> bool:
        """Whether auto mode recorded the launches: one range per program, named by its kernel
        (the kernel report reads such a trace; the timeline packs its programs' lanes)."""

    @property
    @abstractmethod
    def emulated(self) -> bool:
        """Whether a launch ran under Triton's CPU interpreter (host clock, SM ids made up)."""

    @abstractmethod
    def kernel_names(self) -> list[str]:
        """Each kernel's name (launches' `kernel` indexes it); names may repeat."""

    def launch_names(self) -> list[str]:
        """Each launch's kernel name."""
        names = self.kernel_names()
        return [names[k] for k in self.launches["kernel"].tolist()]

    @abstractmethod
    def launch_info(self, i: int) -> KernelInfo:
        """Launch i's KernelInfo (TraceData.kernels[i])."""

    @abstractmethod
    def representatives(self) -> list[int]:
        """One launch of each kind: launches of one kind share their KernelInfo's group names
        and shape, so that a reader of every launch's reads these alone."""

    @abstractmethod
    def compile_steps(self) -> np.ndarray:
        """The recorded steps that compiled kernels (sorted; empty where none stands out)."""

    @abstractmethod
    def sm_counts(self, launches: np.ndarray) -> np.ndarray:
        """The SM count of the GPU of each launch of `launches` (indices), as the recording
        says it (int64; 0 where it says none, or nothing that is a count)."""

    @abstractmethod
    def wrapped_lanes(self) -> dict[int, list[int]]:
        """{launch: its lanes whose drops are their oldest records, overwritten by a ring that
        wrapped}; a lane not named dropped its newest records, if any."""

    @abstractmethod
    def launch_columns(self) -> dict[str, np.ndarray | tuple]:
        """The launches as `TraceData.to_pandas("launches")` shows them, less the columns the
        trace gives (capture, name, start_ns, end_ns): kernel (codes, names), num_blocks,
        num_groups, capacity, emulated, then what this recording adds."""

    def ranks(self) -> np.ndarray:
        """Each session's rank (0 where it says none); [0] for a table of no session."""
        return np.array([session_rank(s) for s in self.sessions] or [0], np.int64)

    def gpu_ids(self) -> np.ndarray:
        """Per session, a number for its (rank, GPU): sessions of one GPU (tables joined by
        concat) are one GPU."""
        ranks = self.ranks().tolist()[: len(self.sessions)]  # [0] for a table of no session
        keys = [(r, str(s.get("gpu"))) for r, s in zip(ranks, self.sessions, strict=True)]
        index = {k: i for i, k in enumerate(sorted(set(keys)))}
        return np.array([index[k] for k in keys] or [0], np.int64)


class CaptureTable(LaunchTable):
    """The LaunchTable of a trace's KernelInfo, one per capture (what `decode` makes of manual
    captures): each capture a launch of a kernel of its own, of one session (its first
    capture's device), no steps. Read when asked: the list may still grow."""

    def __init__(self, infos: Sequence[KernelInfo]):
        self.infos = infos
        self.metadata: dict = {}

    @property
    def launches(self) -> dict[str, np.ndarray]:
        n = len(self.infos)
        return {
            "kernel": np.arange(n, dtype=np.int64),
            "session": np.zeros(n, np.int64),
            "step": np.full(n, -1, np.int64),  # manual captures record no steps
        }

    @property
    def sessions(self) -> list[dict]:
        """One: what the first capture's metadata says of its device (auto mode's launches
        saved as captures carry their session as 'auto_session')."""
        meta = self.infos[0].metadata if len(self.infos) else {}
        sess = meta.get("auto_session")
        sess = sess if isinstance(sess, dict) else {}
        return [{**sess, **{k: meta.get(k) for k in DEVICE_KEYS}}]

    @property
    def auto(self) -> bool:
        # Auto mode's launches saved as captures, each marked so in its metadata.
        return bool(self.infos) and all(k.metadata.get("auto") for k in self.infos)

    @property
    def emulated(self) -> bool:
        return any(k.emulated for k in self.infos)

    def kernel_names(self) -> list[str]:
        return [k.name for k in self.infos]

    def launch_names(self) -> list[str]:
        return self.kernel_names()

    def launch_info(self, i: int) -> KernelInfo:
        return self.infos[i]

    def representatives(self) -> list[int]:
        return list(range(len(self.infos)))

    def compile_steps(self) -> np.ndarray:
        return np.zeros(0, np.int64)

    def sm_counts(self, launches: np.ndarray) -> np.ndarray:
        return np.array(
            [metadata_count(self.infos[c].metadata.get("sm_count")) for c in launches.tolist()],
            np.int64,
        )

    def wrapped_lanes(self) -> dict[int, list[int]]:
        return {
            c: k.ring_wrapped_lanes
            for c, k in enumerate(self.infos)
            if k.ring and k.ring_wrapped_lanes
        }

    def launch_columns(self) -> dict[str, np.ndarray | tuple]:
        ks, n = self.infos, len(self.infos)
        return {
            "kernel": (np.arange(n, dtype=np.int32), [k.name for k in ks]),
            "num_blocks": np.array([k.num_blocks for k in ks], np.int64),
            "num_groups": np.array([k.num_groups for k in ks], np.int64),
            "capacity": np.array([k.capacity for k in ks], np.int64),
            "emulated": np.array([k.emulated for k in ks], bool),
        }


class LaunchList(Sequence):
    """The KernelInfo of each launch of a LaunchTable, built when asked for (a million launches
    cost their columns, not a million objects): an auto trace's `kernels`."""

    def __init__(self, table: LaunchTable):
        self.table = table

    def __len__(self) -> int:
        return self.table.num_launches

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        n = len(self)
        if not -n <= i < n:
            raise IndexError(f"capture {i} out of range: this trace has {n}")
        return self.table.launch_info(int(i) % n)

    def __add__(self, other):
        return list(self) + list(other)


def table_of(kernels: Sequence[KernelInfo]) -> LaunchTable:
    """The LaunchTable of a trace's `kernels`: the table a LaunchList reads, else the
    captures' own."""
    if isinstance(kernels, LaunchList):
        return kernels.table
    return CaptureTable(kernels)


def session_rank(s: dict) -> int:
    """A session's rank (0 where it names none that is a rank)."""
    r = s.get("rank") if isinstance(s, dict) else None
    return int(r) if isinstance(r, int) and not isinstance(r, bool) and 0 <= r < 2**31 else 0
