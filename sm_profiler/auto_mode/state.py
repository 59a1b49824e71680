"""Auto mode's process-wide state (what is on, each GPU's buffer and areas, the kernels bound:
each a KernelEntry, which the binding fills in) and the copy of records into a new launch area,
which the binding and the graph staging share. Below the binding, graph_stage.py and
graph_switch.py; above driver.py."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from ..wire import format as fmt
from . import driver


@dataclass
class KernelEntry:
    """What is known of one loaded, instrumented kernel."""

    kid: int
    name: str
    level: str
    num_warps: int | None = None
    num_stages: int | None = None
    shared_bytes: int | None = None
    cache_hash: str = ""
    source: str = ""  # 'file.py:42' of the @triton.jit function
    origins: str = ""  # Inductor: the ATen ops / FX nodes the kernel was generated from
    call_site: str = ""  # where it was first launched (Triton's own launcher)
    # Warp-specialized kernels: (partition name, first warp, warps) of each partition
    partitions: list = field(default_factory=list)
    tag: int = 0  # what its records say (ptx.auto_kernel_tag of its cache hash)
    devices: set = field(default_factory=set)  # where it was loaded
    registers: int | None = None  # a thread's, as loaded (the driver's CU_FUNC_ATTRIBUTE_NUM_REGS)

    def as_metadata(self) -> dict:
        meta = {"kernel_id": self.kid, "level": self.level, "kernel_tag": self.tag}
        for k in ("num_warps", "num_stages", "shared_bytes", "registers"):
            v = getattr(self, k)
            if v is not None:
                meta[k] = int(v)
        for k in ("cache_hash", "source", "origins", "call_site"):
            v = getattr(self, k)
            if v:
                meta[k] = v
        if self.partitions:
            meta["partitions"] = [list(p) for p in self.partitions]
        return meta


class DeviceBuffer:
    """One GPU's record buffer while auto mode is on: the address of its slot 0, its Areas
    (which slots each launch gets) and the buffer object (held while a graph may write to it).
    Slotted: the launch path reads it at every launch, and a slot's attribute costs no more
    than a tuple's position (benchmarks: area_for_launch)."""

    __slots__ = ("address", "areas", "buffer")

    def __init__(self, address: int, areas, buffer):
        self.address = address
        self.areas = areas
        self.buffer = buffer


class _State:
    # Slotted: the launch path reads a few of these at every launch; a typo'd name fails.
    __slots__ = (
        "lock",
        "kernels",
        "by_module",
        "by_tag",
        "buffers",
        "allocate",
        "step_tag",
        "tag",
        "capturing",
        "stage_functions",
        "on",
        "single",
        "static_loaded",
        "level",
        "skipped",
        "plain_loaded",
        "saved",
        "installed",
        "paused",
        "recording",
        "pauses",
        "plain",
        "plain_of_module",
        "launch_log",
    )

    def __init__(self):
        self.lock = threading.RLock()
        self.kernels: dict[int, KernelEntry] = {}  # kid -> entry
        self.by_module: dict[int, int] = {}  # CUmodule -> kid
        self.by_tag: dict[int, int] = {}  # a record's kernel tag -> kid
        # device -> its DeviceBuffer while on; a device gets it from `allocate` when its first
        # instrumented module loads (None: it records nothing)
        self.buffers: dict[int, DeviceBuffer | None] = {}
        self.allocate = None
        self.step_tag = 0  # what a launch area given now records as its step and tag
        self.tag = 0
        self.capturing: list | None = None  # (device, first, count) of a graph being captured
        self.stage_functions = None  # graph_stage's kernels for the capture in progress, or None
        self.on = False  # launches get areas: on, recording and not paused
        self.single: DeviceBuffer | None = None  # the one device's, while only one has one
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
    first = b.areas.copy_of_many(replay, n, kept)
    if first is None:
        return None
    stream = driver.current_stream(device)
    span_bytes = replay[1] * fmt.AUTO_RECORD_BYTES
    driver.copy_device(b.address + (first << fmt.AUTO_RECORD_SHIFT), src, n * span_bytes, stream)
    return stream
