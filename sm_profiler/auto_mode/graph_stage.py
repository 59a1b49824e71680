"""A CUDA graph's recorded replays, staged on the device: no driver call a replay.

A graph's kernels write into the areas they were captured with, so each recorded replay must be
copied out before the next one overwrites it. A copy the host asks for after every replay
(cuMemcpyDtoDAsync) cost ~20 us of host time in a real step (BENCHMARKS.md): on a step whose host
sets the pace (the MLP of the issue, ~1 ms) two graphs' copies a step were +5..14 %. So at capture
end, while the capture is still open, auto mode captures two kernels of its own after the graph's
work (ptx.AUTO_STAGE_PTX): STAGE copies the graph's areas into slot `counter` of K staging slots
beside them, and BUMP moves the counter on, modulo K. The host counts the same replays (a list
append) and, once the K slots are full, copies them out in one call into a launch area holding
the K replays side by side (Areas.copy_of_many): one driver call every K replays.

The two kernels' last parameter is the counter, so the graph's switched-off clone (graph_switch)
nulls it as it nulls the instrumented kernels' areas: an off replay stages nothing, and the host
does not count it; where the graph keeps the nodes it was instantiated from, an off replay does
not run the two kernels at all (graph_switch disables them). What is staged but not yet copied
out when a region reads its buffer back is copied then (`drain`).

One stream is assumed between a graph's replays, as PyTorch replays them: a replay on another
stream than the last copy-out first waits for it (`Stage.order`).
"""

from __future__ import annotations

import ctypes

from ..record import ptx
from ..wire import format as fmt
from . import driver, state
from .driver import check_rc, libcuda
from .state import STATE

STAGE_REPLAYS = 16  # K: replays staged before one copy-out (fewer where the buffer is small)
_MIN_REPLAYS = 2  # below this, staging saves no copy: the graph is copied out a replay at a time
_FUNCTIONS: dict[int, tuple[int, int]] = {}  # CUcontext -> (STAGE, BUMP), loaded once
PENDING: list[Stage] = []  # stages holding recorded replays not yet copied out


def load() -> tuple[int, int]:
    """(STAGE, BUMP) in the current context, loaded the first time. Called before a capture
    begins: loading a module while a stream captures may invalidate the capture."""
    cuda = libcuda()
    ctx = ctypes.c_void_p(0)
    check_rc(cuda.cuCtxGetCurrent(ctypes.byref(ctx)), "cuCtxGetCurrent")
    functions = _FUNCTIONS.get(ctx.value or 0)
    if functions is None:
        module = ctypes.c_void_p(0)
        check_rc(
            cuda.cuModuleLoadData(ctypes.byref(module), ptx.AUTO_STAGE_PTX.encode() + b"\0"),
            "cuModuleLoadData",
        )
        handles = []
        for entry in (ptx.AUTO_STAGE_ENTRY, ptx.AUTO_BUMP_ENTRY):
            fn = ctypes.c_void_p(0)
            check_rc(
                cuda.cuModuleGetFunction(ctypes.byref(fn), module, entry.encode()),
                "cuModuleGetFunction",
            )
            handles.append(fn.value)
        functions = _FUNCTIONS[ctx.value or 0] = (handles[0], handles[1])
    return functions


def replays_to_stage(span: int, slots: int, graph_slots: int) -> int:
    """K for a graph of `span` slots: STAGE_REPLAYS, or fewer: staging takes at most a quarter of
    the graph space still free and a quarter of all of it (graphs hold at most half the buffer,
    Areas.take_graph), so that graphs captured later still get areas of their own, which matter
    more (a graph not staged is copied out a replay at a time; one with no areas records
    nothing). 0: do not stage. Small graphs, whose replays are short and host-paced, get all K."""
    free = slots // 2 - graph_slots - 1  # graph_slots counts the graph's own areas; 1: the counter
    span = max(span, 1)
    k = min(STAGE_REPLAYS, max(free // 4, 0) // span, slots // 8 // span)
    return k if k >= _MIN_REPLAYS else 0


def _launch(stream: int, function: int, grid: int, threads: int, args: list) -> None:
    values = [ctypes.c_uint64(a) for a in args]
    params = (ctypes.c_void_p * len(values))(*(ctypes.addressof(v) for v in values))
    rc = libcuda().cuLaunchKernel(
        ctypes.c_void_p(function),
        grid, 1, 1, threads, 1, 1, 0,
        ctypes.c_void_p(stream),
        params,
        None,
    )  # fmt: skip
    check_rc(rc, "cuLaunchKernel")


class Stage:
    """One captured graph's staging: K slots of `span` records beside its areas, the host's
    count of what they hold, and where full slots are copied out."""

    def __init__(self, device: int, replay: tuple, staging: int, k: int, keep, functions=()):
        self.device, self.replay, self.staging, self.k = device, replay, staging, k
        self.functions = functions  # (STAGE, BUMP): the nodes an off replay disables
        self.keep = keep  # the buffer the staging lies in
        self.start = 0  # the slot the device's counter pointed at when `held` began
        self.held: list[tuple[int, int] | None] = []  # per staged replay: (step, tag), or None
        self.runs = True  # the graph's STAGE and BUMP run at its replays (not switched off)
        self.copied_on: int | None = None  # the stream of the last copy-out, until the next replay
        self.pending = False  # in PENDING: holds a recorded replay

    def replayed(self, recorded: bool) -> None:
        """After a replay whose STAGE ran: count it, and copy the slots out when full."""
        if recorded:
            if not self.pending:
                PENDING.append(self)
                self.pending = True
            self.held.append((STATE.step_tag, STATE.tag))
        else:  # staged (the graph could not be switched off) but not recorded
            self.held.append(None)
        if self.start + len(self.held) == self.k:
            self.copy_out()

    def copy_out(self) -> None:
        """Copy the slots held since the last copy-out into one new launch area (in the current
        stream's order, before the replay that would overwrite the first of them)."""
        held, start = self.held, self.start
        self.held, self.start = [], (start + len(held)) % self.k
        if self.pending:
            PENDING.remove(self)
            self.pending = False
        kept = [(i, h[0], h[1]) for i, h in enumerate(held) if h is not None]
        src = self.staging + start * self.replay[1] * fmt.AUTO_RECORD_BYTES
        self.copied_on = state.copy_out(self.device, self.replay, src, len(held), kept)

    def order(self) -> None:
        """Before the first replay after a copy-out: where it runs on another stream, it first
        waits for the copy, which reads the slot it is about to overwrite."""
        copied_on, self.copied_on = self.copied_on, None
        current = driver.current_stream(self.device)
        if current != copied_on:
            import torch

            done = torch.cuda.Event()
            done.record(torch.cuda.ExternalStream(copied_on, device=self.device))
            torch.cuda.current_stream(self.device).wait_event(done)


def capture(stream: int, device: int, replay: tuple, functions: tuple[int, int]):
    """At capture end, while `stream` still captures: take the graph's staging from its device's
    buffer and capture STAGE and BUMP after its work. (Stage, the counter's address), or None
    where the buffer has no room for two replays."""
    b = STATE.buffers[device]
    base, areas, buffer = b.address, b.areas, b.buffer
    span = replay[1]
    k = replays_to_stage(span, areas.slots, areas.graph_slots)
    if not k:
        return None
    low = areas.take_graph(1 + k * span)  # the counter's slot (left zero), then K slots
    if low is None:
        return None
    counter = base + (low << fmt.AUTO_RECORD_SHIFT)
    staging = counter + fmt.AUTO_RECORD_BYTES
    units = span * fmt.AUTO_RECORD_BYTES // 16
    stage_fn, bump_fn = functions
    threads = ptx.AUTO_STAGE_THREADS
    grid = max(1, min(-(-units // threads), ptx.AUTO_STAGE_MAX_BLOCKS))
    src = base + (replay[0] << fmt.AUTO_RECORD_SHIFT)
    _launch(stream, stage_fn, grid, threads, [staging, src, units, counter])
    _launch(stream, bump_fn, 1, 1, [k, counter])
    return Stage(device, replay, staging, k, buffer, functions), counter


def drain() -> None:
    """Copy out every staged recorded replay not yet copied (before a region reads back)."""
    for stage in list(PENDING):
        stage.copy_out()
