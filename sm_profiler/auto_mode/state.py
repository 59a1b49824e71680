"""Auto mode's process-wide state (what is on, each GPU's buffer and areas, the kernels bound)
and the copy of records into a new launch area, which the binding and the graph staging share.
Below the binding, graph_stage.py and graph_switch.py; above driver.py."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from ..wire import format as fmt
from . import driver

if TYPE_CHECKING:  # a type only: the binding makes the entries
    from .binding import KernelEntry


class _State:
    def __init__(self):
        self.lock = threading.RLock()
        self.kernels: dict[int, KernelEntry] = {}  # kid -> entry
        self.by_module: dict[int, int] = {}  # CUmodule -> kid
        self.by_tag: dict[int, int] = {}  # a record's kernel tag -> kid
        # device -> (record slots' address, Areas, the buffer) while on; a device gets it from
        # `allocate` when its first instrumented module loads (None: it records nothing)
        self.buffers: dict[int, tuple | None] = {}
        self.allocate = None
        self.step_tag = 0  # what a launch area given now records as its step and tag
        self.tag = 0
        self.capturing: list | None = None  # (device, first, count) of a graph being captured
        self.stage_functions = None  # graph_stage's kernels for the capture in progress, or None
        self.on = False  # launches get areas: on, recording and not paused
        self.single = None  # the one device's buffers[device] while only one has a buffer
        self.static_loaded = 0  # instrumented kernels Inductor's static launcher loaded
        self.level: str | None = None  # set while on
        self.skipped: dict[str, str] = {}  # kernel -> why it runs plain (rewrite refused)
        self.plain_loaded: dict[str, int] = {}  # plain kernels loaded while on (name -> count)
        self.saved: dict = {}
        self.installed = False
        self.paused = 0  # > 0: every module points at no buffer (autotuners benchmarking)
        self.recording = True  # False: outside a schedule's active steps, nothing recorded
        self.pauses = 0  # benchmark runs left out while on
        # An instrumented kernel's CUfunction -> its plain binary's: what a launch that records
        # nothing runs (and a graph's off clone), and the module each plain one came from.
        self.plain: dict[int, int] = {}
        self.plain_of_module: dict[int, int] = {}  # instrumented CUmodule -> its CUfunction
        # The flight recorder's log of the newest launches given an area (flight.py): a deque
        # of (CUfunction, area address, host time.time_ns()) of fixed length, or None (off).
        self.launch_log = None


STATE = _State()


def copy_out(device: int, replay: tuple, src: int, n: int, kept: list) -> int | None:
    """Copy `n` replays of one graph, lying side by side `span` slots apart from address `src`
    (its areas, or its staging slots), into a new launch area of `device`'s buffer now, whose
    parts are the launches of the replays `kept` lists as (index, step, tag): in the current
    stream's order, which it returns (None: nothing copied, no buffer or no room)."""
    b = STATE.buffers.get(device)
    if b is None or not kept:
        return None
    first = b[1].copy_of_many(replay, n, kept)
    if first is None:
        return None
    stream = driver._stream(device)
    span_bytes = replay[1] * fmt.AUTO_RECORD_BYTES
    driver.copy_device(b[0] + (first << fmt.AUTO_RECORD_SHIFT), src, n * span_bytes, stream)
    return stream
