"""Launch slots: many launches into one buffer without a host sync, each labelled by its launcher.

A slotted `SmProfiler` (``SmProfiler(..., slots=N)``) holds N copies of the buffer layout
(format.py, "Launch slots"). Every instrumented kernel's init reads the slot control word and
records into slot `w3.lo32`; after each launch a one-program step kernel, queued on the same
stream, writes the launch's label id into that slot's header and adds 1 to the control word.
Stream order is the only synchronisation, so the step works eagerly and inside CUDA graph capture
(the step is captured next to the kernel; every replay advances the slot and labels it again).

Labels come from Triton's launch hooks: `knobs.runtime.launch_exit_hook` runs after each compiled
launch (Triton 3.6 .. 3.9; Gluon kernels launch the same way). The hook finds, among the
launch's arguments, a tensor that is a registered slotted buffer, reads the kernel's name, grid
and num_warps from Triton's own launching frame and the user's call site from the frames above
it, and queues the step. Triton's interpreter calls no launch hook: under TRITON_INTERPRET=1 the
same observer wraps `InterpretedFunction.run`. Launchers without hooks (CuteDSL, raw CUDA) call
`SmProfiler.step(kernel=..., grid=...)` after each launch.
"""

from __future__ import annotations

import os
import sys
import threading
import weakref
from dataclasses import dataclass

import triton
import triton.language as tl

from ..wire import format as fmt

# data_ptr of a slotted buffer -> its profiler (weak: a dropped profiler unregisters itself).
_registry: weakref.WeakValueDictionary = weakref.WeakValueDictionary()
_lock = threading.Lock()
_installed: dict = {}
_local = threading.local()


@dataclass(frozen=True)
class LaunchLabel:
    """What the launcher knew about one launch; equal launches share one label id."""

    kernel: str
    grid: tuple[int, ...] = ()
    num_warps: int | None = None
    call_site: str = ""

    def as_metadata(self) -> dict:
        meta = {"grid": list(self.grid), "call_site": self.call_site}
        if self.num_warps is not None:
            meta["num_warps"] = self.num_warps
        return meta


# -- the device step ------------------------------------------------------------------------

_HDR_SLOTS = tl.constexpr(fmt.HDR_SLOTS)
_HDR_LABEL = tl.constexpr(fmt.HDR_LABEL)
_HDR_SHAPE = tl.constexpr(fmt.HDR_SHAPE)
_HDR_CAPACITY_FLAGS = tl.constexpr(fmt.HDR_CAPACITY_FLAGS)
_HEADER_WORDS = tl.constexpr(fmt.HEADER_WORDS)
_LANE_HEADER_WORDS = tl.constexpr(fmt.LANE_HEADER_WORDS)


@triton.jit(do_not_specialize=["label"])
def sm_profiler_slot_step(buf, label):
    # slot = w3.lo32 (slot 0's header); if slot <= last: that slot's w4 = label; w3 += 1
    ctrl = tl.load(buf + _HDR_SLOTS)
    shape = tl.load(buf + _HDR_SHAPE)
    cap = tl.load(buf + _HDR_CAPACITY_FLAGS) & 0xFFFFFFFF
    words = (shape & 0xFFFFFFFF) * (shape >> 32) * (cap + _LANE_HEADER_WORDS) + _HEADER_WORDS
    slot = ctrl & 0xFFFFFFFF
    tl.store(
        buf + slot * words + _HDR_LABEL, label + tl.zeros((), tl.int64), mask=slot <= (ctrl >> 32)
    )
    tl.store(buf + _HDR_SLOTS, ctrl + 1)


_compiled: dict = {}  # CUDA device index -> the step's CompiledKernel


def queue_step(buffer, label_id: int) -> None:
    """Queue the slot step on the current stream (no host sync; captured by a CUDA graph).

    On a GPU the compiled step is launched through Triton's own launcher with no launch hooks
    and no argument binding (a few µs of host time instead of a full JIT dispatch)."""
    if buffer.device.type != "cuda":  # the interpreter
        _local.stepping = True
        try:
            sm_profiler_slot_step[(1,)](buffer, label_id, num_warps=1)
        finally:
            _local.stepping = False
        return
    import torch

    dev = buffer.device.index if buffer.device.index is not None else torch.cuda.current_device()
    k = _compiled.get(dev)
    if k is None:
        with torch.cuda.device(dev):
            k = sm_profiler_slot_step.warmup(buffer, label_id, grid=(1,), num_warps=1)
            k = k.result() if hasattr(k, "result") else k
            k._init_handles()
        _compiled[dev] = k
    stream = torch.cuda.current_stream(dev).cuda_stream
    k.run(1, 1, 1, stream, k.function, k.packed_metadata, None, None, None, buffer, label_id)


# -- registry and hooks ---------------------------------------------------------------------


def register(profiler, buffer) -> None:
    with _lock:
        _registry[buffer.data_ptr()] = profiler
        _install()


def unregister(buffer) -> None:
    with _lock:
        _registry.pop(buffer.data_ptr(), None)
        if not len(_registry):
            _uninstall()


def _interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def _install() -> None:
    if _installed:
        return
    from triton import knobs

    knobs.runtime.launch_exit_hook.add(_exit_hook)
    _installed["hook"] = True
    if _interpreting():
        from triton.runtime.interpreter import InterpretedFunction

        original = InterpretedFunction.run

        def run(self, *args, grid, warmup, **kwargs):
            out = original(self, *args, grid=grid, warmup=warmup, **kwargs)
            if not warmup and not getattr(_local, "stepping", False) and len(_registry):
                bound = dict(zip(self.arg_names, args, strict=False), **kwargs)
                g = grid(bound) if callable(grid) else grid
                _observed(
                    self.__name__, g, kwargs.get("num_warps", 4), bound.values(), sys._getframe(1)
                )
            return out

        InterpretedFunction.run = run
        _installed["interpreter"] = (InterpretedFunction, original)


def _uninstall() -> None:
    if not _installed:
        return
    from triton import knobs

    knobs.runtime.launch_exit_hook.remove(_exit_hook)
    if "interpreter" in _installed:
        cls, original = _installed["interpreter"]
        cls.run = original
    _installed.clear()


def _exit_hook(metadata) -> None:
    """Triton's launch_exit_hook: find the launching frame, then the buffer among its args."""
    if getattr(_local, "stepping", False) or not len(_registry):
        return
    frame = sys._getframe(1)
    for _ in range(6):  # HookChain.__call__, then Triton's run (or CompiledKernel's runner)
        if frame is None:
            return
        code = frame.f_code
        if code.co_name == "run" and "bound_args" in code.co_varnames:
            loc = frame.f_locals
            kernel = loc.get("kernel")
            num_warps = getattr(getattr(kernel, "metadata", None), "num_warps", None)
            name = getattr(loc.get("self"), "__name__", None) or getattr(kernel, "name", "?")
            grid = (loc.get("grid_0", 1), loc.get("grid_1", 1), loc.get("grid_2", 1))
            _observed(name, grid, num_warps, loc["bound_args"].values(), frame.f_back)
            return
        if code.co_name == "runner" and "grid" in code.co_varnames:  # CompiledKernel[grid](...)
            loc = frame.f_locals
            kernel = loc.get("self")
            num_warps = getattr(getattr(kernel, "metadata", None), "num_warps", None)
            _observed(
                getattr(kernel, "name", "?"),
                tuple(loc["grid"]),
                num_warps,
                loc.get("args", ()),
                frame.f_back,
            )
            return
        frame = frame.f_back


def _observed(name, grid, num_warps, args, frame) -> None:
    for arg in args:
        ptr = getattr(arg, "data_ptr", None)
        if ptr is None or not callable(ptr):
            continue
        prof = _registry.get(ptr())
        if prof is not None:
            grid = normal_grid(grid)
            label = LaunchLabel(
                str(name), grid, None if num_warps is None else int(num_warps), call_site(frame)
            )
            prof._launched(label)
            return


def normal_grid(grid) -> tuple[int, int, int]:
    """(x, y, z) of a launch grid given as an int or a 1..3-tuple."""
    g = tuple(int(v) for v in (grid if isinstance(grid, (tuple, list)) else (grid,)))
    return (g + (1, 1, 1))[:3]


_TRITON_DIR = None


def call_site(frame) -> str:
    """'file.py:42 (function)' of the first frame outside Triton and sm_profiler."""
    global _TRITON_DIR
    if _TRITON_DIR is None:
        _TRITON_DIR = os.path.dirname(triton.__file__)
    here = os.path.dirname(os.path.dirname(__file__))  # the package: record/ is one folder down
    while frame is not None:
        path = frame.f_code.co_filename
        if not (path.startswith(_TRITON_DIR) or path.startswith(here)):
            return f"{os.path.basename(path)}:{frame.f_lineno} ({frame.f_code.co_name})"
        frame = frame.f_back
    return ""
