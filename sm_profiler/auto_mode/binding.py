"""Where auto mode meets Triton, Inductor and the CUDA driver.

- compile: a stage hook rewrites the PTX of kernels compiled with auto mode's
  `instrumentation_mode` (part of Triton's compile options, so of both its in-memory and
  on-disk cache keys: an instrumented binary is never served to a plain compile, nor the reverse).
  Inductor compiles through `triton.compile` with its own options, which lack that field; while
  auto mode is on, the backend's `parse_options` fills it in from the knob.
- load: each loaded instrumented kernel gets a kernel id, known to its records by the tag fixed
  when it was compiled, through Triton's `kernel_load_end_hook` and Inductor's static launcher
  (which loads cubins itself and calls no Triton hook).
- launch: Triton's launcher asks its profile scratch allocator for each instrumented launch's
  area (`area_for_launch`); a CUDA graph's recorded replays are staged on the device and copied
  out K at a time (graph_stage), and its kernels are switched off for the others (graph_switch).
- the driver: ctypes calls into libcuda (cuFuncGetModule, cuMemcpyDtoDAsync; graph_switch and
  graph_stage make their own).

Everything here is process-wide; `sm_profiler.auto_mode.AutoProfiler` turns it on and off.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import sys
import threading
import time
import warnings

from ..errors import AutoWarning, RewriteError
from ..record import ptx
from ..wire import format as fmt
from . import registers
from .driver import check_rc, copy_device, current_stream, libcuda, module_of  # noqa: F401 (binding.*)
from .rewrite import LEVELS, instrument
from .state import (  # noqa: F401 (binding.STATE, binding.copy_out, binding.KernelEntry)
    STATE,
    KernelEntry,
    copy_out,
)

__all__ = ["LEVELS", "install", "turn_on", "turn_off", "set_recording", "pause", "resume"]

MODE_PREFIX = "sm_profiler-auto"
# The compile metadata's key for the kernel's plain binary (base64 of its cubin).
PLAIN_KEY = "sm_profiler_plain_cubin"
# Bump when the spliced text or the record changes: cached binaries of another version are then
# compiled anew, never reused.
REWRITE_VERSION = 9  # 9: the plain binary kept beside the instrumented one


def mode_name(level: str) -> str:
    """The `instrumentation_mode` string of a level ('sm_profiler-auto-v1-program')."""
    return f"{MODE_PREFIX}-v{REWRITE_VERSION}-{level}"


def level_of(mode: str | None) -> str | None:
    prefix = f"{MODE_PREFIX}-v{REWRITE_VERSION}-"
    if mode and mode.startswith(prefix):
        return mode[len(prefix) :]
    return None


def partitions_of(ttgir: str) -> list[tuple[str, int, int]]:
    """(name, first warp, warps) of each partition of a warp-specialized kernel's TTGIR: the
    default partition holds the module's num-warps warps, the workers follow in order."""
    if "warp_specialize" not in ttgir:
        return []
    m = re.search(r'"ttg.num-warps" = (\d+)', ttgir)
    if m is None:
        return []
    first = int(m.group(1))
    out = [("default", 0, first)]
    for i, n in enumerate(re.findall(r"^\s*partition\d+\(.*\)\s*num_warps\((\d+)\)", ttgir, re.M)):
        out.append((f"worker {i}", first, int(n)))
        first += int(n)
    return out


# -- compile -------------------------------------------------------------------------------------


def _stages_hook(*args):
    """Triton's stage hook. Triton 3.7+ also calls it with no arguments for a (key, hash) that
    joins its cache keys while the hook is set; 3.6 keys on `instrumentation_mode` alone."""
    previous = STATE.saved.get("stages_hook")
    if not args:
        key = f"-{MODE_PREFIX}-v{REWRITE_VERSION}"
        if previous is not None:
            prev_key, prev_hash = previous()
            key = f"{prev_key}{key}-{prev_hash}"
        return key, hashlib.sha256(key.encode()).hexdigest()
    backend, stages, options, language, capability = args
    if previous is not None:
        previous(backend, stages, options, language, capability)
    level = level_of(getattr(options, "instrumentation_mode", ""))
    if level is None or "ptx" not in stages:
        return
    make_ptx = stages["ptx"]
    plain = {}  # this compile's PTX before the rewrite, for the cubin stage

    def ptx_stage(src, metadata):
        text = make_ptx(src, metadata)
        try:
            tag = ptx.auto_kernel_tag(str(metadata.get("hash", "")))
            out = instrument(text, level, tag)
            plain["ptx"] = text
            # One record per program (per warp): Triton's launcher asks the profile scratch
            # allocator for grid x this many bytes at each launch (area_for_launch).
            if not isinstance(metadata, dict):
                raise RewriteError("Triton's compile metadata is not a dict")
            warps = int(metadata.get("num_warps", 1)) if level == "warp" else 1
            metadata["profile_scratch_size"] = fmt.AUTO_RECORD_BYTES * warps
            metadata["profile_scratch_align"] = fmt.AUTO_RECORD_BYTES
            return out
        except RewriteError as e:
            name = metadata.get("name", "kernel") if isinstance(metadata, dict) else "kernel"
            STATE.skipped[name] = str(e)
            warnings.warn(
                f"sm_profiler.auto: kernel {name!r} runs uninstrumented: {e}",
                AutoWarning,
                stacklevel=2,
            )
            return text

    stages["ptx"] = ptx_stage
    make_cubin = stages.get("cubin")
    if make_cubin is None:
        return

    def cubin_stage(src, metadata):
        if "ptx" not in plain:  # left uninstrumented
            return make_cubin(src, metadata)
        # The plain binary too (a second ptxas run per kernel, cached with it in its metadata):
        # a launch that records nothing runs it (bind_plain), so an off step costs nothing.
        plain_cubin = make_cubin(plain["ptx"], metadata)
        metadata[PLAIN_KEY] = base64.b64encode(plain_cubin).decode()
        return registers.keep_occupancy(src, plain_cubin, lambda ptx: make_cubin(ptx, metadata))

    stages["cubin"] = cubin_stage


def _wrap_parse_options(original):
    def parse_options(self, opts):
        mode = _knobs().compilation.instrumentation_mode
        if STATE.level is not None and not (opts or {}).get("instrumentation_mode"):
            opts = dict(opts or {}, instrumentation_mode=mode)
        return original(self, opts)

    parse_options.__wrapped__ = original
    return parse_options


def _knobs():
    import triton

    return triton.knobs


# -- load ------------------------------------------------------------------------------------------


def _current_device() -> int:
    import torch

    return torch.cuda.current_device()


def register_loaded(
    module: int, name: str, meta: dict, src_fn=None, call_site: str = "", registers=None
) -> None:
    """A module was loaded: if instrumented, give its kernel an id, known by its records' tag;
    `registers`: a thread's, as loaded (the advisor's bound on the programs an SM holds)."""
    level = level_of(meta.get("instrumentation_mode"))
    if level is None:
        if STATE.level is not None:
            STATE.plain_loaded[name] = STATE.plain_loaded.get(name, 0) + 1
        return
    with STATE.lock:
        tag = ptx.auto_kernel_tag(str(meta.get("hash", "")))
        kid = STATE.by_module.get(module) or STATE.by_tag.get(tag)
        if kid is not None and STATE.kernels[kid].name != name:
            warnings.warn(
                f"sm_profiler.auto: kernels {STATE.kernels[kid].name!r} and {name!r} share the "
                f"record tag 0x{tag:08x}; {name!r}'s launches are named as the first's",
                AutoWarning,
                stacklevel=2,
            )
        if kid is None:
            kid = len(STATE.kernels) + 1
            if kid > fmt.AUTO_MAX_KERNELS:
                warnings.warn(
                    f"sm_profiler.auto: more than {fmt.AUTO_MAX_KERNELS} kernels "
                    f"loaded; {name!r}'s launches are recorded as 'kernel 0'",
                    AutoWarning,
                    stacklevel=2,
                )
                return
            entry = KernelEntry(
                kid,
                name,
                level,
                meta.get("num_warps"),
                meta.get("num_stages"),
                meta.get("shared"),
                str(meta.get("hash", "")),
                *_source_of(src_fn),
                call_site,
            )
            entry.tag = tag
            entry.registers = int(registers) if registers else None
            STATE.kernels[kid] = entry
            STATE.by_tag[tag] = kid
        STATE.by_module[module] = kid
        device = _current_device()
        STATE.kernels[kid].devices.add(device)
        _buffer(device)  # the device's buffer, taken now: never mid-run


def _on_triton_load(module, function, name, metadata_group, hash):  # noqa: A002 (Triton's names)
    if STATE.level is None and not STATE.by_module:
        return
    try:
        frame = sys._getframe(1)
        while frame is not None and frame.f_code.co_name != "_init_handles":
            frame = frame.f_back  # past Triton's HookChain to CompiledKernel._init_handles
        kernel = frame.f_locals.get("self") if frame is not None else None
        meta = kernel.metadata._asdict() if kernel is not None else _json_of(metadata_group)
        src_fn = getattr(getattr(kernel, "src", None), "fn", None)
        regs = getattr(kernel, "n_regs", None)  # load_binary's, set before this hook runs
        register_loaded(module, name, meta, src_fn, _user_call_site(sys._getframe(1)), regs)
        kid = STATE.by_module.get(module)
        if kid is not None and kernel is not None and not STATE.kernels[kid].partitions:
            STATE.kernels[kid].partitions = partitions_of(str(kernel.asm.get("ttgir", "")))
        if kid is not None and meta.get(PLAIN_KEY):
            from triton.runtime.driver import driver

            plain = base64.b64decode(meta[PLAIN_KEY])
            loaded = driver.active.utils.load_binary(
                name, plain, meta.get("shared", 0), _current_device()
            )
            bind_plain(module, function, loaded[1])
    except Exception as e:  # never stop the user's launch over the profiler
        warnings.warn(
            f"sm_profiler.auto: could not bind kernel {name!r}: {e}", AutoWarning, stacklevel=2
        )


def bind_plain(module: int, function: int, plain_function: int) -> None:
    """`function` (of instrumented `module`) runs as `plain_function` where it records nothing."""
    with STATE.lock:
        STATE.plain[function] = plain_function
        STATE.plain_of_module[module] = function


def kernels_by_function() -> dict[int, str]:
    """{instrumented CUfunction: its kernel's name} of the kernels bound now (the flight
    recorder names the launches it logged by them)."""
    # Bounded: a dump from the flight recorder's thread must not wait for a main thread that
    # is blocked while it holds the lock (loading a module on a stuck GPU).
    locked = STATE.lock.acquire(timeout=1.0)
    try:
        names = {kid: e.name for kid, e in list(STATE.kernels.items())}
        return {
            function: names[STATE.by_module[module]]
            for module, function in list(STATE.plain_of_module.items())
            if STATE.by_module.get(module) in names
        }
    finally:
        if locked:
            STATE.lock.release()


def _json_of(metadata_group) -> dict:
    path = next((p for f, p in dict(metadata_group or {}).items() if f.endswith(".json")), None)
    if path is None:
        return {}
    with open(path) as f:
        return json.load(f)


def _source_of(fn) -> tuple[str, str]:
    """('file.py:42', Inductor's origins comment) of a JITFunction, best effort."""
    try:
        code = fn.fn.__code__
        path, line = code.co_filename, code.co_firstlineno
    except AttributeError:
        return "", ""
    origins = ""
    try:
        with open(path) as f:
            head = f.read(1 << 16)
        for tag in ("# Source Nodes:", "# Original ATen:"):
            i = head.find(tag)
            if i >= 0:
                origins += ("; " if origins else "") + head[i + 2 : head.find("\n", i)].strip()
    except OSError:
        pass
    return f"{os.path.basename(path)}:{line}", origins


_SKIP_DIRS: tuple[str, ...] | None = None


def _user_call_site(frame) -> str:
    global _SKIP_DIRS
    if _SKIP_DIRS is None:
        import torch
        import triton

        here = os.path.dirname(os.path.dirname(__file__))
        _SKIP_DIRS = (os.path.dirname(triton.__file__), os.path.dirname(torch.__file__), here)
    while frame is not None:
        path = frame.f_code.co_filename
        if not path.startswith(_SKIP_DIRS) and not path.startswith("<"):
            return f"{os.path.basename(path)}:{frame.f_lineno} ({frame.f_code.co_name})"
        frame = frame.f_back
    return ""


def _static_launcher_classes() -> list:
    """Inductor's static CUDA launcher class(es) of this torch, if any (the module's name moved)."""
    out = []
    for mod in (
        "torch._inductor.runtime.static_triton_launcher",
        "torch._inductor.runtime.static_cuda_launcher",
    ):
        try:
            m = __import__(mod, fromlist=["StaticallyLaunchedCudaKernel"])
        except Exception:
            continue
        cls = getattr(m, "StaticallyLaunchedCudaKernel", None)
        if cls is not None and cls not in out:
            out.append(cls)
    return out


def _wrap_static_init(original):
    """Inductor's static launcher refuses a kernel that asks for profile scratch; an
    instrumented kernel is built as one that does not, then told to pass the launch's area
    where its profile scratch pointer goes (`_wrap_static_run`), so Inductor keeps its faster
    launcher."""

    def __init__(self, kernel, *args, **kwargs):
        meta = getattr(kernel, "metadata", None)
        ours = (
            meta is not None
            and level_of(getattr(meta, "instrumentation_mode", None)) is not None
            and getattr(meta, "profile_scratch_size", 0) > 0
        )
        if ours:
            kernel.metadata = meta._replace(profile_scratch_size=0)
        try:
            original(self, kernel, *args, **kwargs)
        finally:
            if ours:
                kernel.metadata = meta
        if ours:
            if not (getattr(self, "has_profile_scratch", False) and isinstance(self.arg_tys, str)):
                # Internal: Inductor takes NotImplementedError as "cannot launch statically"
                # and runs the kernel with Triton's own launcher; it never reaches the user.
                raise NotImplementedError("sm_profiler.auto: profile scratch (Triton's launcher)")
            has_global = bool(getattr(self, "has_global_scratch", False))
            self.has_global_scratch = self.has_profile_scratch = False
            self.arg_tys += ("O" if has_global else "") + "K"  # None; the area, a u64
            self._sm_profiler_scratch = (meta.profile_scratch_size, has_global)
            self._sm_profiler_plain = getattr(meta, PLAIN_KEY, None)  # loaded with the kernel
        try:
            meta = kernel.metadata._asdict()
            if level_of(meta.get("instrumentation_mode")) is not None:
                keep = ("instrumentation_mode", "num_warps", "num_stages", "shared", "hash")
                self._sm_profiler_auto = (
                    {k: meta.get(k) for k in keep},
                    _source_of(getattr(kernel.src, "fn", None)),
                )
        except Exception:
            pass

    __init__.__wrapped__ = original
    return __init__


def _wrap_static_run(original):
    def run(self, grid_x, grid_y, grid_z, stream, *args):
        scratch = getattr(self, "_sm_profiler_scratch", None)
        if scratch is None:
            return original(self, grid_x, grid_y, grid_z, stream, *args)
        area = 0  # a null area: record nothing (asked only where one may be given)
        if STATE.on or STATE.capturing is not None:
            size = grid_x * grid_y * grid_z * scratch[0]
            area = area_for_launch(size, fmt.AUTO_RECORD_BYTES, stream) or 0
        if area and STATE.launch_log is not None:  # the flight recorder: what is queued
            STATE.launch_log.append((self.function, area, time.time_ns()))
        tail = (None, area) if scratch[1] else (area,)
        plain = None if area else STATE.plain.get(getattr(self, "function", None))
        if plain is None:
            return original(self, grid_x, grid_y, grid_z, stream, *args, *tail)
        # No area: the plain binary runs (the launcher launches self.function).
        function, self.function = self.function, plain
        try:
            return original(self, grid_x, grid_y, grid_z, stream, *args, *tail)
        finally:
            self.function = function

    run.__wrapped__ = original
    return run


def _wrap_static_load(original):
    def load_kernel(self, device, *args, **kwargs):
        fresh = self.function is None
        out = original(self, device, *args, **kwargs)
        info = getattr(self, "_sm_profiler_auto", None)
        if fresh and info is not None and self.function:
            try:
                meta, (source, origins) = info
                module = module_of(self.function)
                from ..record.occupancy import regs_per_thread

                register_loaded(module, self.name, meta, registers=regs_per_thread(self.function))
                self._sm_profiler_module = module
                STATE.static_loaded += 1
                plain = getattr(self, "_sm_profiler_plain", None)
                if plain and module in STATE.by_module:
                    bind_plain(module, self.function, _static_load_plain(self, plain, device))
                kid = STATE.by_module.get(module)
                if kid is not None:
                    STATE.kernels[kid].source = STATE.kernels[kid].source or source
                    STATE.kernels[kid].origins = STATE.kernels[kid].origins or origins
            except Exception as e:
                warnings.warn(
                    f"sm_profiler.auto: could not bind kernel {self.name!r}: {e}",
                    AutoWarning,
                    stacklevel=2,
                )
        return out

    load_kernel.__wrapped__ = original
    return load_kernel


def _static_load_plain(launcher, plain_b64: str, device: int) -> int:
    """The plain binary of a kernel Inductor's static launcher loaded, loaded as it loads its
    cubin (from a file), its CUfunction."""
    import tempfile

    impl = getattr(launcher, "C_impl", None)
    if impl is None:
        import torch

        impl = torch._C._StaticCudaLauncher
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(base64.b64decode(plain_b64))
        f.flush()
        loaded = impl._load_kernel(f.name, launcher.name, launcher.shared, device)
    return loaded[-3]  # (module,) function, registers, spills


def _wrap_static_close(original):
    def close(self, *args, **kwargs):
        forget(getattr(self, "_sm_profiler_module", None))
        return original(self, *args, **kwargs)

    close.__wrapped__ = original
    return close


def forget(module) -> None:
    """A module is being unloaded: forget its handle (a later module may get it)."""
    if not module:
        return
    with STATE.lock:
        STATE.by_module.pop(module, None)
        STATE.plain.pop(STATE.plain_of_module.pop(module, None), None)


# -- launches and graph replays ---------------------------------------------------------------


def area_for_launch(size: int, alignment: int, stream) -> int | None:
    """Triton's profile scratch allocator: the address of the next launch's area (`size` bytes:
    a record per program, or per warp), or None (a null pointer: the launch records nothing).
    Called before every launch of an instrumented kernel, so it does the least it can. Areas
    taken while a CUDA graph is captured stay the graph's; they are taken while not recording
    too, since a graph captured in a warm-up step is replayed in the active ones."""
    st = STATE
    if st.capturing is None:
        if not st.on:
            return None
        b = st.single or _buffer(_current_device())
        if b is None:
            return None
        # Areas.take, its usual case inlined (a call costs as much again); its step and tag:
        # set_step marks them.
        a, count = b.areas, size >> fmt.AUTO_RECORD_SHIFT
        first = a.next
        end = first + count
        if end <= a.limit and count > 0:
            a.next = end
            a.counts.append(count)
            return b.address + (first << fmt.AUTO_RECORD_SHIFT)
        first = a.take(count)
        return None if first is None else b.address + (first << fmt.AUTO_RECORD_SHIFT)
    if st.paused:
        return None
    device = _current_device()
    b = _buffer(device)
    if b is None:
        return None
    count = size >> fmt.AUTO_RECORD_SHIFT
    first = b.areas.take_graph(count)
    if first is None:
        return None
    st.capturing.append((device, first, count))
    return b.address + (first << fmt.AUTO_RECORD_SHIFT)


class _Handed(threading.local):
    """The area a launcher wrapper took for the launch it is making (the profile scratch
    allocator hands it out when Triton's launcher asks), per thread."""

    area = None
    set = False


_HANDED = _Handed()


def profile_scratch(size: int, alignment: int, stream) -> int | None:
    """Triton's profile scratch allocator: the area `_wrap_launcher_call` took for this launch,
    else (a launcher not wrapped) one taken now."""
    h = _HANDED
    if h.set:
        h.set = False
        return h.area
    return area_for_launch(size, alignment, stream)


def _wrap_launcher_call(original):
    """Triton's launcher (its CudaLauncher.__call__): a launch of an instrumented kernel given
    no area runs the kernel's plain binary, so a step that records nothing costs nothing."""

    def __call__(self, gridX, gridY, gridZ, stream, function, *args):
        plain = STATE.plain.get(function)
        if plain is None:
            return original(self, gridX, gridY, gridZ, stream, function, *args)
        st, area = STATE, None
        if st.on or st.capturing is not None:
            size = gridX * gridY * gridZ * getattr(self, "num_ctas", 1) * self.profile_scratch_size
            area = area_for_launch(size, fmt.AUTO_RECORD_BYTES, stream)
            if area and st.launch_log is not None:  # the flight recorder: what is queued
                st.launch_log.append((function, area, time.time_ns()))
        h = _HANDED
        h.area, h.set = area, True
        try:
            return original(self, gridX, gridY, gridZ, stream, function if area else plain, *args)
        finally:
            h.set = False

    __call__.__wrapped__ = original
    return __call__


def _wrap_capture_begin(original):
    def capture_begin(self, *args, **kwargs):
        STATE.stage_functions = None
        if STATE.level is not None:
            from . import graph_stage

            try:  # before the capture: a module loaded while a stream captures may break it
                STATE.stage_functions = graph_stage.load()
            except Exception as e:
                _warn_unstaged(e)
        out = original(self, *args, **kwargs)
        if STATE.level is not None:
            STATE.capturing = []
        return out

    capture_begin.__wrapped__ = original
    return capture_begin


def _wrap_capture_end(original):
    def capture_end(self, *args, **kwargs):
        parts, STATE.capturing = STATE.capturing, None
        staged = switch = None
        if parts:
            from ..wire.auto_areas import Areas

            devices = sorted({p[0] for p in parts})
            # Each device's captured areas, as a replay's copy takes them.
            replays = {
                d: Areas.replay_parts([(f, c) for dd, f, c in parts if dd == d]) for d in devices
            }
            staged = _stage_of_capture(replays)
            switch = _switch_of_capture(parts, staged[1] if staged else None)
        out = original(self, *args, **kwargs)
        if getattr(self, "_sm_profiler_instantiate", False):
            _instantiate(self, switch, staged[0] if staged else None)
        if parts:
            self._sm_profiler_switch = switch
            self._sm_profiler_stage = staged[0] if staged else None
            # With the address of the buffer they lie in: a replay in a later region copies
            # from this buffer into that region's.
            self._sm_profiler_areas = {d: (replays[d], STATE.buffers[d].address) for d in devices}
            # The graph's kernels write into its areas at its recorded replays (at every replay
            # where they could not be switched off) for as long as it lives: so does the buffer.
            self._sm_profiler_keep = [STATE.buffers[d].buffer for d in devices]
        return out

    capture_end.__wrapped__ = original
    return capture_end


def _wrap_graph_init(original):
    """A CUDA graph constructed while auto mode is on keeps the graph it is instantiated from
    (keep_graph=True), so that its off replays can disable our staging kernels (graph_switch);
    capture_end instantiates it as PyTorch would have without keep_graph."""

    def __init__(self, keep_graph=False, *args, **kwargs):
        if STATE.level is not None and not keep_graph:
            try:
                original(self, True, *args, **kwargs)
            except TypeError:  # a PyTorch without keep_graph: the kernels run empty off
                original(self, *args, **kwargs)
            else:
                self._sm_profiler_instantiate = True
        else:
            original(self, keep_graph, *args, **kwargs)

    __init__.__wrapped__ = original
    return __init__


def _instantiate(graph, switch, stage) -> None:
    """At capture end, for a graph auto mode made keep its captured graph: find the staging
    kernels' nodes (an off replay disables them), then instantiate, as capture_end would have."""
    try:
        if switch is not None and stage is not None:
            from . import graph_switch

            switch.nodes = graph_switch.nodes_of(graph.raw_cuda_graph(), stage.functions)
    except Exception as e:  # they run, empty, at off replays
        warnings.warn(
            f"sm_profiler.auto: a CUDA graph's staging kernels will run (empty) at its replays "
            f"that record nothing (they could not be found: {e})",
            AutoWarning,
            stacklevel=3,
        )
    graph.instantiate()


def _stage_of_capture(replays: dict):
    """(graph_stage.Stage, its counter's address) of the graph being captured (its areas on each
    device, `replays`), its STAGE and BUMP kernels captured after its work; or None: each
    recorded replay is then copied out by the host (copy_replay)."""
    from . import graph_stage

    functions, STATE.stage_functions = STATE.stage_functions, None
    if functions is None or len(replays) != 1:
        return None
    ((device, replay),) = replays.items()
    try:
        return graph_stage.capture(_capture_stream(), device, replay, functions)
    except Exception as e:
        _warn_unstaged(e)
        return None


def _warn_unstaged(e: Exception) -> None:
    warnings.warn(
        f"sm_profiler.auto: a CUDA graph's recorded replays will be copied out one at a time "
        f"(they could not be staged on the device: {e})",
        AutoWarning,
        stacklevel=4,
    )


def _switch_of_capture(parts: list, counter: int | None = None):
    """The graph_switch.Switch of the graph being captured (before its capture closes), or None:
    the graph then writes its records at every replay. `counter`: its staging counter, switched
    off with its areas."""
    from . import graph_switch

    areas = {STATE.buffers[d].address + (first << fmt.AUTO_RECORD_SHIFT) for d, first, _ in parts}
    if counter is not None:
        areas.add(counter)
    try:
        return graph_switch.prepare(_capture_stream(), areas, STATE.plain)
    except Exception as e:
        warnings.warn(
            f"sm_profiler.auto: a CUDA graph's kernels will write their records at every replay, "
            f"recorded or not (they could not be switched off: {e})",
            AutoWarning,
            stacklevel=3,
        )
        return None


def _capture_stream() -> int:
    import torch

    return torch.cuda.current_stream().cuda_stream  # capture_end runs in the capture's stream


def _follow(graph, switch) -> None:
    """Switch a graph's kernels to write records or not, as this replay is recorded or not."""
    try:
        exec_handle = graph.raw_cuda_graph_exec()
    except Exception:  # not instantiated yet (keep_graph=True): it will be from the captured graph
        return
    stage = getattr(graph, "_sm_profiler_stage", None)
    try:
        switch.follow(exec_handle, STATE.on)
    except Exception as e:
        graph._sm_profiler_switch = None  # stop switching: no more work at its replays
        stays = (
            "write their records at every replay"
            if switch.on
            else "write no records (its recorded replays come back unwritten)"
        )
        warnings.warn(
            f"sm_profiler.auto: a CUDA graph's kernels are no longer switched and {stays}: {e}",
            AutoWarning,
            stacklevel=3,
        )
    finally:
        if stage is not None:
            stage.runs = switch.on  # switched, or as it stays where the driver refused


def _wrap_replay(original):
    def replay(self, *args, **kwargs):
        switch = getattr(self, "_sm_profiler_switch", None)
        if switch is not None and switch.on != STATE.on:
            _follow(self, switch)
        stage = getattr(self, "_sm_profiler_stage", None)
        if stage is not None and stage.copied_on is not None:
            stage.order()
        out = original(self, *args, **kwargs)
        try:  # never stop the user's replay over the profiler
            if stage is not None:  # the usual case: staged on the device, a list append here
                if stage.runs:
                    stage.replayed(STATE.on)
            elif STATE.on:  # on: recording and not paused
                parts = getattr(self, "_sm_profiler_areas", None)
                if parts:
                    copy_replay(parts)
        except Exception as e:
            warnings.warn(
                f"sm_profiler.auto: a CUDA graph replay was not recorded: {e}",
                AutoWarning,
                stacklevel=2,
            )
        return out

    replay.__wrapped__ = original
    return replay


def copy_replay(replays: dict) -> None:
    """After a recorded replay of a graph that is not staged, in its stream's order: each
    device's captured areas (in the buffer of the region that captured the graph) copied out."""
    kept = [(0, STATE.step_tag, STATE.tag)]
    for device, (replay, graph_base) in replays.items():
        copy_out(device, replay, graph_base + (replay[0] << fmt.AUTO_RECORD_SHIFT), 1, kept)


def install() -> None:
    """Hooks that stay for the process (they do nothing while auto mode is off). The profile
    scratch allocator, set by turn_on, stays too: a kernel compiled in auto mode asks it at every
    launch, and after the region it says "no area"."""
    if STATE.installed:
        return
    knobs = _knobs()
    knobs.runtime.kernel_load_end_hook.add(_on_triton_load)
    for cls in _static_launcher_classes():
        cls.__init__ = _wrap_static_init(cls.__init__)
        cls.load_kernel = _wrap_static_load(cls.load_kernel)
        cls.run = _wrap_static_run(cls.run)
        if hasattr(cls, "close"):
            cls.close = _wrap_static_close(cls.close)
    try:
        from triton.backends.nvidia.driver import CudaLauncher

        CudaLauncher.__call__ = _wrap_launcher_call(CudaLauncher.__call__)
    except (ImportError, AttributeError):  # another backend layout: off launches run as on
        pass
    from torch.cuda import CUDAGraph

    CUDAGraph.__init__ = _wrap_graph_init(CUDAGraph.__init__)
    CUDAGraph.capture_begin = _wrap_capture_begin(CUDAGraph.capture_begin)
    CUDAGraph.capture_end = _wrap_capture_end(CUDAGraph.capture_end)
    CUDAGraph.replay = _wrap_replay(CUDAGraph.replay)
    STATE.installed = True


def _install_allocator() -> None:
    from triton.runtime import _allocation

    _allocation.set_profile_allocator(profile_scratch)


def turn_on(level: str, allocate=None, recording: bool = True) -> None:
    """Compile what follows with `level` and give every instrumented launch an area of its
    device's buffer, which `allocate(device)` -> a state.DeviceBuffer (the address of slot 0,
    the Areas, the buffer object) makes when first needed (None: record nothing)."""
    knobs = _knobs()
    install()
    _install_allocator()  # at every region: another tool (Proton) may have set its own since
    from triton.backends.nvidia.compiler import CUDABackend

    STATE.saved = {
        "mode": knobs.compilation.instrumentation_mode,
        "stages_hook": knobs.runtime.add_stages_inspection_hook,
        "parse_options": CUDABackend.parse_options,
    }
    STATE.level = level
    STATE.buffers = {}
    STATE.single = None
    STATE.allocate = allocate
    STATE.plain_loaded = {}
    STATE.static_loaded = 0
    STATE.paused = STATE.pauses = 0
    STATE.recording = recording
    STATE.capturing = None
    knobs.compilation.instrumentation_mode = mode_name(level)
    knobs.runtime.add_stages_inspection_hook = _stages_hook
    CUDABackend.parse_options = _wrap_parse_options(CUDABackend.parse_options)
    rebind()
    # Kernels loaded in an earlier region launch in this one without loading again: their
    # devices' buffers are taken now, not at their first recorded launch.
    for device in sorted({d for e in STATE.kernels.values() for d in e.devices}):
        _buffer(device)


def turn_off() -> None:
    knobs = _knobs()
    from triton.backends.nvidia.compiler import CUDABackend

    if STATE.level is None:
        return
    knobs.compilation.instrumentation_mode = STATE.saved.get("mode", "")
    knobs.runtime.add_stages_inspection_hook = STATE.saved.get("stages_hook")
    CUDABackend.parse_options = STATE.saved.get("parse_options", CUDABackend.parse_options)
    STATE.level = None
    STATE.buffers = {}
    STATE.single = None
    STATE.allocate = None
    STATE.capturing = None
    rebind()


def _buffer(device: int):
    """The DeviceBuffer of `device`, or None where it records nothing. A
    device gets its buffer when its first instrumented module is bound, recording or not: its
    GPU memory is taken at once, never mid-run."""
    if STATE.level is None or STATE.allocate is None:
        return None
    if device not in STATE.buffers:
        STATE.buffers[device] = b = STATE.allocate(device) or None
        if b is not None:
            b.areas.mark(STATE.step_tag, STATE.tag)
        live = [b for b in STATE.buffers.values() if b is not None]
        STATE.single = live[0] if len(STATE.buffers) == 1 and live else None
    return STATE.buffers[device]


def rebind() -> None:
    """Whether launches get areas now: on, recording and not paused."""
    with STATE.lock:
        STATE.on = STATE.level is not None and STATE.recording and not STATE.paused


def set_recording(on: bool) -> None:
    """Record from now on (or not): launches get areas (or none), and CUDA graph replays are
    copied out (or not). Host-side only: a launch queued before keeps what it was given."""
    with STATE.lock:
        STATE.recording = on
        rebind()


def set_step(step_tag: int, tag: int) -> None:
    """The step tag and tag of the areas given from now on."""
    STATE.step_tag, STATE.tag = int(step_tag), int(tag)
    for b in STATE.buffers.values():
        if b is not None:
            b.areas.mark(STATE.step_tag, STATE.tag)


def pause() -> None:
    """Record nothing until resume() (nested calls count): an autotuner's benchmark launches
    would otherwise fill the buffer with runs the program never uses."""
    with STATE.lock:
        STATE.paused += 1
        if STATE.paused == 1 and STATE.level is not None:
            STATE.pauses += 1
            rebind()


def resume() -> None:
    with STATE.lock:
        STATE.paused = max(0, STATE.paused - 1)
        if STATE.paused == 0 and STATE.level is not None:
            rebind()
