"""SmProfiler: owns one device buffer, its event and group names, and the captures taken from it.

Typical use::

    prof = SmProfiler(num_blocks=grid, num_groups=1, max_events_per_group=64)
    prof.register_event(0, "load")
    kernel[grid](..., prof.get_buffer(), PROFILE=prof.enabled)
    prof.print_stats()
    prof.export("trace.perfetto-trace")

Many launches without a sync (docs/workloads.md): ``SmProfiler(..., slots=N)`` gives every
launch that takes the buffer its own slot and label (kernel name, grid, num_warps, call site);
`captures()` returns one capture per launch.
"""

from __future__ import annotations

import datetime
import os
import platform
import sys
from typing import TextIO

import numpy as np

from .errors import ConfigError
from .wire import format as fmt
from .wire.capture import Capture, name_problem


class SmProfiler:
    def __init__(
        self,
        num_blocks: int,
        num_groups: int = 1,
        max_events_per_group: int = 256,
        enabled: bool = True,
        device="cuda",
        *,
        group_names: dict[int, str] | list[str] | None = None,
        kernel_name: str | None = None,
        slots: int | None = None,
        ring: bool = False,
    ):
        # ring: each lane keeps its newest max_events_per_group records (a power of two) instead
        # of its first ones; needs ops compiled with profiler_init(..., RING=True) and a
        # profiler_flush(ctx) after the last event (docs/api.md, "Ring mode").
        flags = fmt.FLAG_EMULATED if str(device).startswith("cpu") else 0
        if not isinstance(ring, bool):
            raise ConfigError(f"ring must be True or False, got {ring!r}")
        flags |= fmt.FLAG_RING if ring else 0
        self.layout = fmt.Layout.checked(num_blocks, num_groups, max_events_per_group, flags)
        _check_device(device)
        _check_interpreter_numpy()
        _check_interpreter()
        self.enabled = bool(enabled)
        self.device = device
        # Unnamed, captures are called "kernel" and the stats label them by their shape only.
        self._named = kernel_name is not None
        self.kernel_name = _check_name(kernel_name, "kernel_name") if self._named else "kernel"
        self.event_names: dict[int, str] = {}
        self.group_names: dict[int, str] = {}
        if group_names is not None:
            if isinstance(group_names, str):
                raise ConfigError(
                    f"group_names must be a list or a dict of names, not the string {group_names!r}; "
                    f"write group_names=[{group_names!r}]"
                )
            if not isinstance(group_names, (dict, list, tuple)):
                raise ConfigError(
                    f"group_names must be a list or a dict of names, got "
                    f"{type(group_names).__name__} {group_names!r}"
                )
            items = group_names.items() if isinstance(group_names, dict) else enumerate(group_names)
            for g, name in items:
                self.register_group(g, name)
        self.slots = _check_slots(slots)
        if self.slots is not None:
            nbytes = fmt.slotted_words(self.layout.total_words, self.slots) * fmt.WORD_BYTES
            if nbytes > fmt.MAX_BUFFER_BYTES:
                raise ConfigError(
                    f"{self.slots} slots of {self.layout.total_bytes:,} bytes need "
                    f"{nbytes / 2**30:.1f} GiB; the limit is {fmt.MAX_BUFFER_BYTES >> 30} GiB: "
                    "lower slots, max_events_per_group or num_blocks"
                )
        self._labels: list = []  # label id - 1 -> slots.LaunchLabel
        self._label_ids: dict = {}
        self._launches = 0  # launches seen by the host since the buffer was initialised
        # Merged into every capture's metadata: "rank", "clock" samples, "barrier_ns" (merge.py).
        self.metadata: dict = {}
        self._captures: list[Capture] = []
        self._buffer = None
        self._dirty = False
        self.init_buffer()

    # -- sizes -------------------------------------------------------------------------------

    @property
    def num_blocks(self) -> int:
        return self.layout.num_blocks

    @property
    def num_groups(self) -> int:
        return self.layout.num_groups

    @property
    def max_events_per_group(self) -> int:
        return self.layout.capacity

    # -- names -------------------------------------------------------------------------------

    def register_event(self, event_no: int, name: str) -> None:
        """Name event id `event_no` (0..4095). The device ops take the id as a constexpr."""
        event_no = _check_id(event_no, fmt.MAX_EVENT_ID, "event_no")
        name = _check_name(name, "event name")
        _register(self.event_names, event_no, name, "event")

    def register_group(self, group: int, name: str) -> None:
        """Name group `group` (e.g. 0 "producer", 1 "consumer"); shown instead of 'group N'."""
        group = _check_id(group, self.layout.num_groups - 1, "group")
        name = _check_name(name, "group name")
        _register(self.group_names, group, name, "group")

    # -- the buffer --------------------------------------------------------------------------

    def init_buffer(self):
        """Zero the buffer and write its header. Call before each launch that records into it."""
        import torch

        words = self.layout.total_words if self.enabled else fmt.HEADER_WORDS
        if self.slots is not None and self.enabled:
            words = fmt.slotted_words(words, self.slots)
        if self._buffer is None or self._buffer.numel() != words:
            if self._buffer is not None and self.slots is not None:
                from .record import slots

                slots.unregister(self._buffer)
            self._buffer = _allocate(torch, words, self.device)
            if self.slots is not None and self.enabled:  # disabled: nothing to label or step
                from .record import slots

                slots.register(self, self._buffer)
        else:
            self._buffer.zero_()
        if self.enabled:
            hdr = self.layout.header()
        else:
            # Shape 0 x 0: any op that still records finds every lane out of shape and writes nothing.
            hdr = fmt.encode_header(0, 0, 0)
        hdr = torch.from_numpy(hdr.view(np.int64))
        if self.slots is not None and self.enabled:
            # Every slot starts with the plain header (stream-ordered: no sync); slot 0's w3 is the
            # slot control word.
            plain = self.layout.total_words
            self._buffer[: self.slots * plain].view(self.slots, plain)[:, : fmt.HEADER_WORDS] = hdr
            self._buffer[fmt.HDR_SLOTS] = fmt.slot_control(0, self.slots)
        else:
            self._buffer[: fmt.HEADER_WORDS].copy_(hdr)
        self._dirty = False
        self._handouts = 0
        self._launches = 0
        return self._buffer

    def get_buffer(self):
        """The int64 tensor to pass to the kernel (its data pointer is the ops' `buffer_ptr`).

        One launch per hand-out: a second get_buffer() before snapshot()/init_buffer() warns,
        and the capture's stats say so, since two launches into one buffer mix their records.
        With `slots`, every launch takes its own slot: hand it out as often as you like."""
        self._handouts += 1
        if self._handouts == 2 and self.slots is None:
            import warnings

            warnings.warn(
                "SmProfiler.get_buffer() called again without snapshot(): a second launch into "
                "the same buffer mixes its records with the first's; call prof.snapshot() after "
                "each launch (or init_buffer() to discard it)",
                stacklevel=2,
            )
        # The last call before a launch: catch an interpreter switch flipped since the ops were
        # imported here, before Triton fails on it with a message that does not say why.
        _check_interpreter()
        _check_cpu_launch(self.device)
        self._dirty = True
        return self._buffer

    # -- captures ----------------------------------------------------------------------------

    # -- launch slots ------------------------------------------------------------------------

    def step(self, kernel: str = "kernel", grid=(), num_warps: int | None = None) -> None:
        """Close the current launch's slot and label it; call after each launch that no Triton
        hook sees (CuteDSL, raw CUDA). Queued on the current stream: no sync."""
        from .record.slots import LaunchLabel, call_site, normal_grid

        self._require_slots("step")
        grid = normal_grid(grid) if grid != () else ()
        self._launched(
            LaunchLabel(_check_name(kernel, "kernel"), grid, num_warps, call_site(sys._getframe(1)))
        )

    def _launched(self, label) -> None:
        """A launch into this buffer was queued (the Triton hook or `step`): queue the slot step."""
        from .record.slots import queue_step

        lid = self._label_ids.get(label)
        if lid is None:
            self._labels.append(label)
            lid = self._label_ids[label] = len(self._labels)
        self._launches += 1
        self._dirty = True
        queue_step(self._buffer, lid)

    def calibrate_clock(self, samples: int = 200) -> dict:
        """Measure %globaltimer - CLOCK_REALTIME on this profiler's GPU (sm_profiler.record.clock) and
        keep it in the captures' metadata, where merges read it; call it before and after a
        workload to also get the drift. Needs a GPU."""
        from .record.clock import measure_clock

        if self.layout.emulated:
            raise ConfigError("calibrate_clock needs a GPU: an emulated buffer has no %globaltimer")
        sample = measure_clock(self._buffer.device, samples)
        self.metadata.setdefault("clock", []).append(sample)
        return sample

    def close(self) -> None:
        """Stop observing launches (slotted profilers register a Triton launch hook)."""
        if self.slots is not None and self._buffer is not None:
            from .record import slots

            slots.unregister(self._buffer)

    def _slot_captures(self) -> list[Capture]:
        words = self._buffer.detach().cpu().numpy().view(np.uint64).copy()
        parts, missed = fmt.split_slots(words)
        meta = self._metadata()
        caps = []
        for k, w in enumerate(parts):
            lid = int(w[fmt.HDR_LABEL])
            label = self._labels[lid - 1] if 0 < lid <= len(self._labels) else None
            m = dict(meta, launch=k, slots=self.slots, buffer_handouts=1)
            if label is not None:
                m.update(label.as_metadata())
            if missed and k == len(parts) - 1:
                m["launches_without_slot"] = missed
            caps.append(
                Capture(
                    words=w,
                    event_names=dict(self.event_names),
                    group_names=dict(self.group_names),
                    kernel_name=label.kernel if label is not None else self.kernel_name,
                    metadata=m,
                )
            )
        if missed:
            import warnings

            warnings.warn(
                f"{missed} launches found all {self.slots} slots used and recorded nothing; "
                "raise slots= or snapshot() more often",
                stacklevel=3,
            )
        return caps

    def capture(self, kernel_name: str | None = None) -> Capture:
        """Copy the buffer to the host (waits for the device) as a Capture.
        With `slots`: the last used slot's capture (see `captures` for all)."""
        self._require_enabled("capture")
        if self.slots is not None:
            return self._slot_captures()[-1]
        if kernel_name is not None:
            _check_name(kernel_name, "kernel_name")
        words = self._buffer.detach().cpu().numpy().view(np.uint64).copy()
        meta = self._metadata()
        if kernel_name is None and not self._named:
            meta["unnamed"] = True  # no kernel_name given: the stats do not print "kernel"
        return Capture(
            words=words,
            event_names=dict(self.event_names),
            group_names=dict(self.group_names),
            kernel_name=kernel_name or self.kernel_name,
            metadata=meta,
        )

    def snapshot(self, kernel_name: str | None = None) -> Capture:
        """Keep the current launch's capture and re-initialise the buffer for the next launch.

        Snapshots, and the live buffer after them, all go into one trace by `decode`/`export`.
        """
        if self.slots is not None:
            self._require_enabled("snapshot")
            caps = self._slot_captures()
            self._captures.extend(caps)
            self.init_buffer()
            return caps
        cap = self.capture(kernel_name)
        self._captures.append(cap)
        self.init_buffer()
        return cap

    def captures(self) -> list[Capture]:
        """The snapshots taken so far, plus the live buffer if it was handed out since."""
        if self.slots is not None:
            live = self._slot_captures() if self._dirty or not self._captures else []
            return self._captures + live
        live = [self.capture()] if self._dirty or not self._captures else []
        return self._captures + live

    def decode(self):
        """Decode every capture (see `captures`) into one TraceData."""
        from .trace.decode import decode

        self._require_enabled("decode")
        return decode(self.captures())

    # -- outputs: thin wrappers of the functions of the same name, over decode() --------------
    # Their parameters are the wrapped functions' (tests/host/test_profiler_methods.py checks).

    def stats(self):
        """sm_profiler.report.stats.compute_stats of `decode()`."""
        from .report.stats import compute_stats

        return compute_stats(self.decode())

    def print_stats(self, file: TextIO | None = None, width: int | None = None) -> None:
        """sm_profiler.report.stats.print_stats of `decode()`: the plain-text report, to stdout unless
        `file` is given, every line within `width` (default: the terminal's)."""
        from .report.stats import print_stats

        print_stats(self.decode(), file=file, width=width)

    def export(self, path: str | os.PathLike, format: str | None = None, **options) -> list[str]:
        """sm_profiler.export.export of `decode()`: write a trace (the format follows the
        extension, .perfetto-trace/.pftrace, .json/.json.gz); `options` are export's
        (capture=N, cut_gaps=True, filters, summary=). Returns the notes saying what was cut or
        summarised."""
        from .export import export

        return export(self.decode(), path, format=format, **options)

    def save(self, path) -> None:
        """Save the raw capture (only the live buffer, or every snapshot: one file each is not
        needed; several captures go into one file)."""
        from .wire.capture import save_many

        self._require_enabled("save")
        save_many(self.captures(), path)

    def plot(self, path: str | os.PathLike, **options) -> str:
        """sm_profiler.export.plot.plot of `decode()`: the SM occupancy picture; returns the path.
        `options` are sm_profiler.export.plot.figure's keywords (width_in, dpi, colors, title,
        max_vector, capture)."""
        from .export.plot import plot

        return plot(self.decode(), path, **options)

    # -- helpers -----------------------------------------------------------------------------

    def _require_slots(self, what: str) -> None:
        if self.slots is None:
            raise ConfigError(
                f"cannot {what}: this SmProfiler has one launch per buffer; create it with "
                "slots=N to record N launches without a sync"
            )

    def _require_enabled(self, what: str) -> None:
        if not self.enabled:
            raise ConfigError(f"cannot {what}: this SmProfiler was created with enabled=False")

    def _metadata(self) -> dict:
        meta = {
            "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "host": platform.node(),
            "device": str(self.device),
            "interpreted": self.layout.emulated,
            "buffer_handouts": self._handouts,
        }
        try:
            import torch

            meta["torch"] = torch.__version__
            if not self.layout.emulated and torch.cuda.is_available():
                props = torch.cuda.get_device_properties(self._buffer.device)
                meta["device_name"] = props.name
                meta["sm_count"] = props.multi_processor_count
                meta["compute_capability"] = f"{props.major}.{props.minor}"
        except Exception:  # metadata is best effort; never fail a capture over it
            pass
        if self.layout.emulated:
            meta["device_name"] = "CPU (Triton interpreter)"
            meta["sm_count"] = fmt.EMULATED_SM_COUNT
        try:
            import triton

            meta["triton"] = triton.__version__
        except Exception:
            pass
        meta["triton_interpret"] = os.environ.get("TRITON_INTERPRET", "0")
        meta.update(self.metadata)
        return meta


def _check_slots(slots) -> int | None:
    if slots is None:
        return None
    if isinstance(slots, bool) or not isinstance(slots, (int, np.integer)) or slots < 1:
        raise ConfigError(f"slots must be a positive int (launches per buffer), got {slots!r}")
    if slots > fmt.MAX_SLOTS:
        raise ConfigError(f"slots={slots} is larger than the supported {fmt.MAX_SLOTS}; lower it")
    return int(slots)


def _check_device(device) -> None:
    """A CUDA device without CUDA fails in torch ("Torch not compiled with CUDA enabled"), which
    does not say what to do instead."""
    if not str(device).startswith("cuda"):
        return
    import torch

    if not torch.cuda.is_available():
        raise ConfigError(
            f"SmProfiler(device={str(device)!r}): torch sees no CUDA device; without a GPU, pass "
            "device='cpu' (and device='cpu' tensors) and run the kernel in Triton's interpreter: "
            "set TRITON_INTERPRET=1 before importing triton"
        )


def _interpret_env() -> bool:
    # The same rule sm_profiler.triton_ops applies when it is imported.
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def _interpreter_numpy_error(
    triton_version: str | None = None, numpy_version: str | None = None
) -> str:
    """Why Triton's interpreter cannot run here ('' if it can). Triton 3.6's interpreter turns
    1-element arrays into Python ints, which numpy 2.4 refuses: every kernel then fails with
    "only 0-dimensional arrays can be converted to Python scalars" (Triton 3.7 and later run)."""
    if triton_version is None:
        import triton

        triton_version = triton.__version__
    if numpy_version is None:
        numpy_version = np.__version__

    def release(v: str) -> tuple[int, int]:
        major, minor = v.split(".")[:2]
        return int(major), int("".join(c for c in minor if c.isascii() and c.isdigit()) or 0)

    if release(triton_version) < (3, 7) and release(numpy_version) >= (2, 4):
        return (
            f"Triton {triton_version}'s CPU interpreter (TRITON_INTERPRET=1) cannot run with numpy "
            f'{numpy_version}: every kernel fails in it with "only 0-dimensional arrays can be '
            'converted to Python scalars". Install numpy older than 2.4 (pip install '
            "'numpy<2.4') or Triton 3.7 or newer (pip install -U triton)"
        )
    return ""


def _check_interpreter_numpy() -> None:
    """At construction (not per launch): the versions do not change within a process."""
    if _interpret_env():
        err = _interpreter_numpy_error()
        if err:
            raise ConfigError(err)


def _check_interpreter() -> None:
    """sm_profiler.triton_ops picks its GPU or interpreter ops once, when imported, while Triton
    decides per @triton.jit, when the kernel is defined. If TRITON_INTERPRET changed in between,
    the user's kernel and the ops disagree and Triton fails with "Cannot call @triton.jit'd
    outside of the scope of a kernel" (or inline asm under the interpreter): say why instead."""
    now = _interpret_env()
    env = os.environ.get("TRITON_INTERPRET")
    ops = sys.modules.get("sm_profiler.triton_ops")
    # Not imported (yet, or a CuteDSL user): the ops will read the switch then.
    if ops is not None and bool(getattr(ops._INTERPRET, "value", ops._INTERPRET)) != now:
        change = "set" if now else "unset"
        raise ConfigError(
            f"TRITON_INTERPRET was {change} (now {env!r}) after sm_profiler.triton_ops was "
            f"imported with the {'GPU' if now else 'interpreter'} ops, so Triton kernels would "
            "fail; set TRITON_INTERPRET before importing triton and sm_profiler.triton_ops (at "
            "the top of the script, or in the shell)"
        )
    # Triton chose GPU or interpreter code for its own @triton.jit functions (tl.zeros, tl.cdiv,
    # the reductions' combiners) when triton.language was imported: a switch flipped after that
    # fails inside them ("Cannot call @triton.jit'd outside of the scope of a kernel").
    chosen = _triton_interpreted()
    if chosen is not None and chosen != now:
        fix = (
            "set TRITON_INTERPRET=1 before importing triton (at the top of the script, before "
            "`import triton`, or in the shell: TRITON_INTERPRET=1 python script.py)"
            if now
            else "unset TRITON_INTERPRET before importing triton, or leave it set"
        )
        raise ConfigError(
            f"TRITON_INTERPRET was {'set' if now else 'unset'} (now {env!r}) after triton was "
            f"imported {'without' if now else 'with'} it, so Triton kernels would fail; {fix}"
        )


def _triton_interpreted() -> bool | None:
    """Whether triton.language's own jit functions were made for the interpreter (None: triton
    not imported, or a Triton that does not tell)."""
    std = sys.modules.get("triton.language.standard")
    kind = type(getattr(std, "zeros", None)).__name__
    if kind == "InterpretedFunction":
        return True
    if kind == "JITFunction":
        return False
    return None


def _check_cpu_launch(device) -> None:
    """A CPU buffer is for Triton's interpreter: without it and without CUDA, Triton finds no
    backend at the launch ("0 active drivers ([]). There should only be one.")."""
    if not str(device).startswith("cpu") or _interpret_env():
        return
    import torch

    if not torch.cuda.is_available():
        raise ConfigError(
            "SmProfiler(device='cpu') hands out a buffer for Triton's CPU interpreter, which is "
            "off: set TRITON_INTERPRET=1 before importing triton (at the top of the script, or in "
            "the shell: TRITON_INTERPRET=1 python script.py)"
        )


def _check_id(value, maximum: int, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ConfigError(f"{what} must be an int, got {type(value).__name__} {value!r}")
    if not 0 <= value <= maximum:
        raise ConfigError(f"{what}={value} is out of range: it must be in 0..{maximum}")
    return int(value)


def _check_name(name, what: str) -> str:
    problem = name_problem(name)
    if problem:
        raise ConfigError(f"{what} {problem}, got {name!r}")
    return name


def _allocate(torch, words: int, device):
    """The zeroed int64 buffer; running out of memory is a ConfigError saying what was asked."""
    try:
        return torch.zeros(words, dtype=torch.int64, device=device)
    except (torch.cuda.OutOfMemoryError, MemoryError, RuntimeError) as e:
        if not isinstance(e, (torch.cuda.OutOfMemoryError, MemoryError)) and (
            "out of memory" not in str(e).lower() and "not enough memory" not in str(e).lower()
        ):
            raise
        asked = words * fmt.WORD_BYTES
        raise ConfigError(
            f"cannot allocate the {asked:,}-byte ({asked / 2**30:.2f} GiB) profiling buffer on "
            f"{device}: {_free_memory(torch, device)}; lower max_events_per_group or num_blocks"
        ) from e


def _free_memory(torch, device) -> str:
    if str(device).startswith("cpu"):
        return "the host is out of memory"
    try:
        free, total = torch.cuda.mem_get_info(torch.device(device))
    except Exception:  # the numbers are a courtesy; the error stands without them
        return "the device is out of memory"
    return f"{free:,} of {total:,} bytes are free"


def _register(table: dict[int, str], key: int, name: str, what: str) -> None:
    if table.get(key, name) != name:
        raise ConfigError(
            f"{what} {key} is already registered as {table[key]!r}; cannot rename it to {name!r}"
        )
    for k, v in table.items():
        if v == name and k != key:
            raise ConfigError(f"duplicate {what} name {name!r}: already used by {what} {k}")
    table[key] = name
