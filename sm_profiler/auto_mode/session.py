"""AutoProfiler: one region of a program in which every Triton and Gluon kernel compiled is
instrumented (docs/auto.md)."""

from __future__ import annotations

import os

import numpy as np

from ..errors import ConfigError
from ..progress import stage_for
from ..wire import format as fmt
from ..wire.auto_areas import Areas
from ..wire.auto_schedule import step_runs, whole_number
from . import binding
from .state import DeviceBuffer
from .stop_signals import OneReader

_PRUNE_STEP_TAGS = 1 << 16  # recorded steps mapped before the first look for forgotten ones
# The flight recorder records every step of a run of any length: its host memory stays flat
# from the first thousands of steps and launches on (a look costs a pass over the areas kept).
_FLIGHT_PRUNE_STEP_TAGS = 1 << 10
_FLIGHT_COMPACT_LAUNCHES = 1 << 12
DEFAULT_CAPACITY = 1 << 22  # records (32 B each: 128 MiB of GPU memory)
_active: list = []


def current():
    """The AutoProfiler recording now in this process (e.g. the one `sm-profiler run` made
    around a script, for the script to call `.step()`), or None."""
    return _active[-1] if _active else None


class AutoProfiler:
    """Instrument every Triton / Gluon kernel compiled between `start()` and `stop()`.

    capacity: records kept per GPU (one per program, or per warp with level='warp'); whole
    launches are kept or dropped. CUDA graphs hold the areas they were captured with (up to half
    the capacity, with their staging) and each recorded replay is copied into the rest.
    ring: keep the newest launches (a long loop) instead of the first ones.
    level: 'program' (each program's start, end, SM) or 'warp' (each warp's).
    device: record on this GPU only (default: every GPU on which an instrumented kernel runs;
    each gets its own buffer of `capacity` records, 32 bytes each, when its first instrumented
    kernel loads).
    schedule: which steps are recorded (sm_profiler.schedule(...), or "1000-1005"); steps advance
    with `prof.step()` (or, with count_optimizer_steps, each step of the first optimizer that
    steps). Kernels are instrumented all along; outside active steps they record nothing. Each
    launch's step is in the table and the report.
    via_triton: while the region is on, torch.compile'd matmuls are Inductor's Triton templates
    (not cuBLAS) and scaled_dot_product_attention is FlexAttention (not cuDNN/FlashAttention), so
    auto mode sees inside them; this profiles Triton kernels in place of the production ones
    (auto_mode/via_triton.py).
    torch_profiler: torch.profiler (CPU and CUDA activities) records the same steps, its
    ProfilerStep#N our step N (auto_mode/torch_profiler.py): `torch_trace()` is its trace,
    `save` stores it in the file, `merge_torch(path)` writes one trace of its rows and our
    programs, and the report's share seen comes from its CUPTI kernel rows.
    flight_recorder: every step recorded into the ring, and the last K steps written when a
    step is slow, the job stalls or ends badly, or on SIGUSR1 (True: K=8; K; or
    sm_profiler.flight_recorder(...) for its settings): auto_mode/flight.py.
    """

    def __init__(
        self,
        capacity: int = DEFAULT_CAPACITY,
        *,
        ring: bool = False,
        level: str = "program",
        device=None,
        schedule=None,
        count_optimizer_steps: bool = False,
        via_triton: bool = False,
        torch_profiler: bool = False,
        flight_recorder=None,
    ):
        problem = fmt.auto_capacity_problem(capacity)
        if problem:
            raise ConfigError(f"capacity {problem}")
        from .flight_triggers import FlightConfig

        self.flight_config = FlightConfig.of(flight_recorder, int(capacity))
        if self.flight_config is not None:
            _check_flight(schedule, torch_profiler)
        self.flight = None  # the FlightRecorder while the region runs (flight.py)
        if not isinstance(ring, bool):
            raise ConfigError(f"ring must be True or False, got {ring!r}")
        if level not in binding.LEVELS:
            raise ConfigError(f"level must be one of {', '.join(binding.LEVELS)}, got {level!r}")
        from ..wire.auto_schedule import Schedule

        if isinstance(schedule, str):
            schedule = Schedule.parse(schedule)
        if schedule is not None and not isinstance(schedule, Schedule):
            raise ConfigError(
                f"schedule must be sm_profiler.schedule(...) or a string like '1000-1005', "
                f"got {type(schedule).__name__}"
            )
        # The flight recorder records every step: the ring keeps the newest.
        ring = ring or self.flight_config is not None
        self.capacity, self.ring, self.level = int(capacity), ring, level
        self.device = device
        self.schedule = schedule
        self.count_optimizer_steps = bool(count_optimizer_steps)
        if not isinstance(via_triton, bool):
            raise ConfigError(f"via_triton must be True or False, got {via_triton!r}")
        self.via_triton = via_triton
        if not isinstance(torch_profiler, bool):
            raise ConfigError(f"torch_profiler must be True or False, got {torch_profiler!r}")
        self.torch_profiler = torch_profiler
        self._torch = None  # TorchSteps while the region runs
        self._torch_doc: dict | None = None
        self._cupti = None  # the coverage of _torch_doc, found once
        self.step_num = 0
        self._step_tag = 0
        self._step_tags: dict[int, int] = {}  # step tag in the records -> step number
        self._prune_at = self._prune_floor()
        self._manual_steps = False
        self._primary_optimizer = None
        self._hook = None
        self._only: int | None = None
        self._buffers: dict[int, dict] = {}  # device index -> buffer, areas, props
        self._table = None
        self._tag = 0
        self.notes: list[str] = []
        self.notes_info = ""
        self.metadata: dict = {}
        self.reading = OneReader()  # who reads the buffers back: the region's end or a rescue

    # -- the region ------------------------------------------------------------------------------

    def start(self) -> AutoProfiler:
        check_can_run()
        if _active:
            raise ConfigError(
                "sm_profiler.auto is already on in this process; one region at a time"
            )
        if self.torch_profiler:
            from .torch_profiler import check_torch_profiler

            check_torch_profiler()
        import torch

        self._only = None
        if self.device is not None:
            try:
                device = torch.device(self.device)
            except (RuntimeError, TypeError) as e:
                raise ConfigError(
                    f"device={self.device!r} is not a device; give 'cuda:N' or N"
                ) from e
            if device.type != "cuda":
                raise ConfigError(f"device={self.device!r}: auto mode records CUDA GPUs only")
            self._only = device.index if device.index is not None else torch.cuda.current_device()
            if not 0 <= self._only < torch.cuda.device_count():
                raise ConfigError(
                    f"device={self.device!r}: this process sees {torch.cuda.device_count()} GPUs"
                )
        self._buffers, self._table = {}, None
        self.step_num, self._step_tags, self._manual_steps = 0, {}, False
        self._step_tag, self._prune_at = 0, self._prune_floor()
        self._primary_optimizer = None
        self._tag = 0
        self._torch, self._torch_doc, self._cupti = None, None, None
        recording = self._records(0)
        if recording:
            self._new_step_tag()
        binding.set_step(self._step_tag, self._tag)
        binding.turn_on(self.level, self._allocate, recording)
        if self.count_optimizer_steps:
            from torch.optim.optimizer import register_optimizer_step_post_hook

            self._hook = register_optimizer_step_post_hook(self._on_optimizer_step)
        self._patches = _Patches(self)
        self._patches.apply()
        _active.append(self)
        if self._only is not None:
            self._allocate(self._only)  # the one GPU asked for: allocated now, errors now
        if self.torch_profiler:
            from .torch_profiler import TorchSteps

            steps = TorchSteps(self._records, synchronize=self._synchronize)
            try:
                steps.start()
            except ConfigError:
                self.stop()
                raise
            self._torch = steps
        if self.flight_config is not None:
            from .flight import FlightRecorder

            try:
                self.flight = FlightRecorder(self, self.flight_config).start()
            except Exception:
                self.stop()
                raise
        return self

    def _synchronize(self) -> None:
        """Wait for the GPUs this region records (and the current one), outside a capture."""
        import torch

        if torch.cuda.is_current_stream_capturing():
            return
        for index in {torch.cuda.current_device(), *self._buffers}:
            torch.cuda.synchronize(index)

    def _allocate(self, index: int):
        """The binding's DeviceBuffer of a new buffer on GPU `index`, or None where it records
        nothing."""
        if index in self._buffers:
            b = self._buffers[index]
            return DeviceBuffer(b["address"], b["areas"], b["buffer"])
        if self._only is not None and index != self._only:
            return None
        import torch

        props = torch.cuda.get_device_properties(index)
        words = self.capacity * fmt.AUTO_RECORD_WORDS  # the record slots; the host keeps the rest
        if torch.cuda.is_current_stream_capturing():
            import warnings

            warnings.warn(
                f"sm_profiler.auto: a kernel first loaded on cuda:{index} inside a CUDA graph "
                "capture; nothing on that GPU is recorded (run the model once before capturing)",
                binding.AutoWarning,
                stacklevel=3,
            )
            return None
        try:
            with torch.cuda.device(index):
                buf = torch.zeros(words, dtype=torch.int64, device=f"cuda:{index}")
        except torch.cuda.OutOfMemoryError as e:
            raise ConfigError(
                f"cannot allocate the {words * 8:,}-byte auto buffer on cuda:{index}; lower capacity"
            ) from e
        areas = (
            Areas(self.capacity, self.ring)
            if self.flight_config is None
            else Areas(self.capacity, self.ring, _FLIGHT_COMPACT_LAUNCHES)
        )
        self._buffers[index] = {
            "buffer": buf,
            "address": buf.data_ptr(),
            "areas": areas,
            "props": props,
            "copier": _copier(index, buf),
        }
        return DeviceBuffer(buf.data_ptr(), areas, buf)

    def stop(self) -> AutoProfiler:
        if self not in _active:
            return self
        import torch

        from . import graph_stage

        self._stop_torch()  # first: our read-back's copies are no step's
        words = {}
        try:
            graph_stage.drain()  # CUDA graph replays staged on the device, not yet copied out
            for index in self._buffers:
                torch.cuda.synchronize(index)
            if not self.reading.claim("stop"):  # a stop signal's rescue has them
                self.reading.done.wait()
                return self
            for index, b in self._buffers.items():
                words[index] = _read_back(b["buffer"], b["areas"])
            origins = _inductor_origins()
            for e in binding.STATE.kernels.values():
                e.origins = e.origins or origins.get(e.name, "")
        finally:
            if self._hook is not None:
                self._hook.remove()
                self._hook = None
            self._patches.undo()
            binding.turn_off()
            _active.remove(self)
            if self.flight is not None:  # after the GPU waits: a stall there is still seen
                self.flight.stop()
            if self.reading.reader != "rescue":
                for b in self._buffers.values():
                    copier = b.pop("copier", None)
                    if copier is not None:
                        copier.close()
        clocks = {i: _clock_sample(i) for i in words}  # plain kernels now: auto mode is off
        self._table = self._build_table(words, clocks)
        for b in self._buffers.values():
            b.pop("buffer", None)
        self._say_what_was_missed()
        return self

    def _build_table(self, words: dict, clocks: dict, prune: bool = True):
        """The AutoTable of the buffers' words read back (GPU index -> words)."""
        kernels = {
            k: dict(name=e.name, **e.as_metadata()) for k, e in list(binding.STATE.kernels.items())
        }
        from ..trace.auto_table import AutoTable

        if self._step_tags and prune:
            self._prune_step_tags()  # the file maps the steps it holds, no more
        steps = {str(k): v for k, v in dict(self._step_tags).items()}
        parts = [
            (dict(self._session(i), clock=clocks[i], step_tags=steps), words[i])
            for i in sorted(words)
        ]
        slots = sum(int(np.asarray(w).size) for w in words.values()) // 4  # 4 words a record
        with stage_for(f"reading {len(parts)} auto buffer(s), {slots:,} record slots", slots):
            return AutoTable.from_buffers(parts, kernels, self._metadata())

    def _stop_torch(self) -> None:
        steps, self._torch = self._torch, None
        if steps is None:
            return
        self._torch_doc = steps.finish()
        if self._torch_doc is None and not steps.notes:
            steps.notes.append("torch.profiler recorded no step (none of its steps was recorded)")
        self.metadata["torch_profiler"] = {
            "steps": _profiler_steps(self._torch_doc),
            "export_s": round(steps.export_s, 3),
            "notes": list(steps.notes),
        }
        import warnings

        for note in steps.notes:
            warnings.warn(f"sm_profiler.auto: {note}", binding.AutoWarning, stacklevel=4)

    def rescue(self) -> bool:
        """The region's table from another thread while the main one is blocked in a GPU wait
        that will not return (a stop signal's watcher, stop_signals.py): each buffer is copied
        through what was made for it with the buffer (rescue.py), polled against a deadline;
        nothing is synchronized, staged replays are not copied out and no clock is sampled
        (each would queue behind the blocked work). A launch still running has unwritten
        records (counted); where a copy cannot run, `notes` say so and what the host knows.
        False where the region's end has begun reading the buffers itself (it writes them)."""
        if not self.reading.claim("rescue"):
            return False
        try:
            if self._torch is not None:  # stopping it would wait on the blocked GPU too
                self.metadata["torch_profiler"] = {
                    "notes": ["stopped by a signal: torch.profiler's trace was not kept"]
                }
                self._torch = None
            words, self.notes = {}, []
            for index, b in self._buffers.items():
                if b.get("buffer") is not None:
                    words[index], copied = _rescue_read(b)
                    self.notes += self._rescue_notes(index, copied)
            if self.notes:
                self.metadata["rescue"] = list(self.notes)
            self._table = self._build_table(words, {i: [] for i in words})
        finally:
            self.reading.done.set()
        return True

    def _rescue_notes(self, index: int, copied) -> list[str]:
        """What a rescue's read of GPU `index` missed, and what the host knows of it."""
        if copied.nbytes == copied.total:
            return []
        areas = self._buffers[index]["areas"].areas()
        steps = sorted({self._step_tags.get(int(t), -1) for t in np.unique(areas[:, 2])} - {-1})
        kernels = sorted(e.name for e in binding.STATE.kernels.values() if index in e.devices)
        read = (
            "no record read"
            if copied.nbytes == 0
            else (f"{copied.nbytes:,} of {copied.total:,} bytes of records read")
        )
        return [
            f"cuda:{index}: {read} ({copied.why}); what the host knows: {len(areas):,} "
            f"launches queued, in steps {step_runs(steps) or 'none'}, "
            f"{int(areas[:, 1].sum()):,} records; kernels: {', '.join(kernels) or 'none'}"
        ]

    def __enter__(self) -> AutoProfiler:
        return self.start()

    def __exit__(self, exc_type, exc, tb) -> None:
        self.stop()
        if exc is not None and self.flight is not None:
            self.flight.ended_by(exc)

    # -- the flight recorder (flight.py) -----------------------------------------------------------

    def read_live(self) -> dict:
        """{GPU index: (words, rescue.Copied, the areas kept once read, the address of its first
        record slot)} of each buffer as it is now, read while the region goes on recording (the
        flight recorder's dumps): through the copier made with the buffer (rescue.py), nothing
        synchronized."""
        out = {}
        for index, b in list(self._buffers.items()):
            if b.get("buffer") is not None:
                words, copied = _rescue_read(b)
                out[index] = (words, copied, b["areas"].areas(), b["address"])
        return out

    def live_table(self, words: dict):
        """The AutoTable of buffers' words read by read_live (GPU index -> words); the region
        goes on (no clock sample, the steps' map kept whole)."""
        return self._build_table(words, {i: [] for i in words}, prune=False)

    def ring_areas(self) -> dict:
        """{GPU index: (the address of its first record slot, its areas kept as the table's
        launches number them: Areas.areas())}."""
        return {i: (b["address"], b["areas"].areas()) for i, b in list(self._buffers.items())}

    def step_of_tags(self) -> dict[int, int]:
        """{step tag in the records: step number} of the steps recorded (a copy)."""
        return dict(self._step_tags)

    # -- steps -------------------------------------------------------------------------------------

    def step(self) -> None:
        """The next step begins (call it once per training step, as torch.profiler's): the
        schedule turns recording on or off, in stream order, and the step's launches carry its
        number. Once a script calls it, optimizer steps no longer count."""
        self._manual_steps = True
        self._advance()

    def _on_optimizer_step(self, optimizer, args, kwargs) -> None:
        if self._manual_steps or self not in _active:
            return
        if self._primary_optimizer is None:
            self._primary_optimizer = id(optimizer)
        if id(optimizer) == self._primary_optimizer:  # several optimizers: one step each round
            self._advance()

    def _records(self, step: int) -> bool:
        return self.schedule is None or self.schedule.records(step)

    def _advance(self) -> None:
        if self not in _active:
            return
        self.step_num += 1
        on = self._records(self.step_num)
        if on:
            self._new_step_tag()
            binding.set_step(self._step_tag, self._tag)
        binding.set_recording(on)
        if self._torch is not None:
            self._torch.step()  # torch's ProfilerStep#N follows: our step N
        if self.flight is not None:
            self.flight.on_step(self.step_num)

    def _new_step_tag(self) -> None:
        """The next step tag (1, 2, 3, ...: one per recorded step, never reused) for the step
        now beginning; the table maps each tag to its step."""
        self._step_tag += 1
        self._step_tags[self._step_tag] = self.step_num
        if len(self._step_tags) >= self._prune_at:
            self._prune_step_tags()

    def _prune_step_tags(self) -> None:
        """Forget the steps whose launches a ring has overwritten (memory stays flat over a
        long run that records every step)."""
        held = {self._step_tag}
        for b in self._buffers.values():
            held.update(np.unique(b["areas"].areas()[:, 2]).tolist())
        self._step_tags = {t: s for t, s in self._step_tags.items() if t in held}
        self._prune_at = max(self._prune_floor(), 2 * len(self._step_tags))

    def _prune_floor(self) -> int:
        return _PRUNE_STEP_TAGS if self.flight_config is None else _FLIGHT_PRUNE_STEP_TAGS

    def set_tag(self, tag: int) -> None:
        """Tag the records of launches queued from now on (0..255, 0 = none; no sync): e.g. one
        step of a loop, to pick its launches out afterwards (the launch's `tag` in the table and
        in each launch's capture metadata)."""
        if isinstance(tag, bool) or not isinstance(tag, int) or not 0 <= tag <= fmt.AUTO_MAX_TAG:
            raise ConfigError(f"tag must be an int in 0..{fmt.AUTO_MAX_TAG}, got {tag!r}")
        self._tag = tag
        binding.set_step(self._step_tag, self._tag)

    # -- results -----------------------------------------------------------------------------------

    def table(self):
        """The AutoTable of the region: a row per program, a launch per grouping of rows."""
        self._require_stopped()
        return self._table

    def records(self):
        """(the rows as numpy columns, the counts summed over the GPUs) of the region."""
        t = self.table()
        return t.rows, t.counts()

    def captures(self):
        """The region's launches; a sequence of per-launch Captures (the AutoTable)."""
        return self.table()

    def decode(self):
        t = self.table()
        if not t.num_launches:
            raise ConfigError(
                "auto mode recorded no kernel launch in this region; " + " ".join(self.notes)
            )
        return t.decode()

    def print_stats(
        self, file=None, width: int | None = None, cupti: dict | None = None, torch_trace=None
    ) -> None:
        """The report (cupti: the share seen from CUPTI; torch_trace: the trace whose kernel
        rows "What to fix first" takes its host gaps over; default for both: the region's
        torch trace where torch_profiler=True recorded one)."""
        from ..report.auto_report import print_report

        cupti = self.cupti_summary() if cupti is None else cupti
        doc = self.torch_trace() if torch_trace is None else torch_trace
        print_report(self.decode(), file=file, width=width, cupti=cupti, torch_trace=doc)

    def cupti_summary(self) -> dict | None:
        """The report's figures from torch.profiler's CUPTI rows (coverage.report_share), or
        None without a torch trace."""
        cov = self.torch_coverage()
        if cov is None:
            return None
        from ..report.coverage import report_share

        return report_share([cov])

    def export(self, path, format: str | None = None, **options) -> list[str]:
        """sm_profiler.export.export of `decode()`; returns the notes saying what was cut or
        summarised."""
        from ..export import export

        return export(self.decode(), path, format=format, **options)

    def save(self, path) -> None:
        """The AutoTable to one file (sm-profiler stats / export / query / merge read it), with
        torch.profiler's trace inside where torch_profiler=True recorded one."""
        from ..export.auto_torch_parts import members

        self.table().save(path, members(self.torch_trace()))

    # -- torch.profiler (torch_profiler=True) ------------------------------------------------------

    def torch_trace(self) -> dict | None:
        """torch.profiler's Chrome trace (a dict) of the recorded steps, or None (torch_profiler
        off, or no step recorded)."""
        self._require_stopped()
        return self._torch_doc

    def torch_coverage(self) -> dict | None:
        """The exact share of each step the instrumented kernels ran, from torch.profiler's CUPTI
        kernel rows (sm_profiler.torch_coverage's dict), or None without a torch trace."""
        doc = self.torch_trace()
        if doc is None:
            return None
        if self._cupti is None:
            from ..export.auto_torch_parts import rank_coverage

            self._cupti = rank_coverage(doc, self.table())
        return self._cupti

    def merge_torch(self, path) -> dict:
        """One trace of torch.profiler's rows (CPU ops, every kernel CUPTI saw) and our per-SM
        programs, on torch's time axis (merge_torch_trace): Perfetto (.perfetto-trace) or
        Chrome JSON (.json / .json.gz), by `path`'s extension; returns its info (alignment,
        coverage)."""
        doc = self.torch_trace()
        if doc is None:
            raise ConfigError(
                "no torch.profiler trace: start the region with torch_profiler=True "
                "(sm-profiler run --torch), and record at least one step"
            )
        from ..export.auto_torch_parts import merge_rank

        info = merge_rank(doc, self.table(), path)
        self._cupti = info["coverage"]
        return info

    def plot(self, path, **options) -> str:
        """sm_profiler.export.plot.plot of `decode()` (its keyword options); returns the path."""
        from ..export.plot import plot

        return plot(self.decode(), path, **options)

    # -- helpers -----------------------------------------------------------------------------------

    def _require_stopped(self) -> None:
        if self._table is None:
            raise ConfigError(
                "the auto region has not ended yet: read results after the "
                "`with sm_profiler.auto()` block (or after stop())"
            )

    def _say_what_was_missed(self) -> None:
        import warnings

        self.notes = []
        counts = self._table.counts()
        if counts["dropped"]:
            kept = "newest" if self.ring else "first"
            self.notes.append(
                f"{counts['dropped']:,} of {counts['claimed']:,} records dropped (kept the "
                f"{kept} {counts['kept']:,}; capacity {counts['capacity']:,}): raise capacity="
            )
        if binding.STATE.pauses:
            self.notes_info = (
                f"{binding.STATE.pauses} autotuner benchmark runs recorded nothing "
                "(left out on purpose)"
            )
        plain = binding.STATE.plain_loaded
        if plain:
            names = ", ".join(sorted(plain)[:5]) + (" ..." if len(plain) > 5 else "")
            self.notes.append(
                f"{len(plain)} kernels loaded in the region were compiled without "
                f"auto mode and ran plain ({names})"
            )
        if counts["claimed"] == 0:
            self.notes.append(
                "no instrumented kernel ran in the region. Kernels compiled before "
                "it stay plain: enter sm_profiler.auto() before a kernel's first "
                "call (for torch.compile, before the compiled model's first call), "
                "or profile the whole script with `sm-profiler run`"
            )
        for note in self.notes:
            warnings.warn(f"sm_profiler.auto: {note}", binding.AutoWarning, stacklevel=3)

    def _session(self, index: int) -> dict:
        """What one GPU's buffer needs beside its words: where it ran."""
        b = self._buffers[index]
        props = b["props"]
        meta = {
            "gpu": index,
            "device": f"cuda:{index}",
            "device_name": props.name,
            "sm_count": props.multi_processor_count,
            "compute_capability": f"{props.major}.{props.minor}",
        }
        meta.update(rank_info())
        return meta

    def _metadata(self) -> dict:
        meta = {"auto_level": self.level, "steps_counted": self.step_num}
        if self.schedule is not None:
            meta["schedule"] = self.schedule.describe()
        if self.via_triton:
            meta["via_triton"] = True
        try:
            import torch
            import triton

            meta.update(torch=torch.__version__, triton=triton.__version__)
        except Exception:
            pass
        meta.update(self.metadata)
        return meta


def _profiler_steps(doc: dict | None) -> list[int]:
    """The ProfilerStep#N numbers of a torch trace, in order."""
    if doc is None:
        return []
    from ..report.coverage import STEP_NAME

    found = set()
    for e in doc.get("traceEvents", []):
        m = STEP_NAME.match(str(e.get("name", ""))) if isinstance(e, dict) else None
        if m:
            found.add(int(m.group(1)))
    return sorted(found)


def _read_back(buffer, areas: Areas) -> np.ndarray:
    """A GPU's buffer as format.py's words: the header and areas the host kept, then the record
    slots copied from the device straight into place (no second copy)."""
    import torch

    head = areas.header_and_areas()
    words = np.empty(len(head) + buffer.numel(), np.uint64)
    words[: len(head)] = head
    torch.from_numpy(words[len(head) :].view(np.int64)).copy_(buffer)
    return words


def _copier(index: int, buffer):
    """The rescue's copier of GPU `index`'s buffer (driver.HostCopier), made with the buffer;
    None where it cannot be made (the rescue then writes what the host knows)."""
    import torch

    from . import driver, rescue

    try:
        with torch.cuda.device(index):
            return driver.HostCopier(buffer.data_ptr(), min(buffer.numel() * 8, rescue.CHUNK_BYTES))
    except Exception:  # never lose the region over its rescue
        return None


def _rescue_read(b: dict):
    """(format.py's words, rescue.Copied) of a buffer read by the rescue: the header and areas
    the host kept, then what its copier got of the record slots (zero past it: unwritten)."""
    from . import rescue

    head = b["areas"].header_and_areas()
    words = np.zeros(len(head) + b["buffer"].numel(), np.uint64)
    words[: len(head)] = head
    out = words[len(head) :].view(np.uint8)
    if b.get("copier") is None:
        return words, rescue.Copied(0, out.size, "no copier was made for it")
    return words, rescue.read_device(b["copier"], out, rescue.STALL_S)


def _clock_sample(index: int) -> list:
    """[where %globaltimer sits on the host clock] of GPU `index` (sm_profiler.record.clock), or [] if
    it cannot be measured: ranks of several nodes are merged on the host clock by it."""
    try:
        from ..record.clock import measure_clock

        return [measure_clock(index, samples=50)]
    except Exception:  # never lose the region's records over the clock
        return []


def rank_info() -> dict:
    """This process's place in a torchrun job (RANK, WORLD_SIZE, LOCAL_RANK) and its host."""
    import socket

    out = {"host": socket.gethostname()}
    for key, env in (("rank", "RANK"), ("world_size", "WORLD_SIZE"), ("local_rank", "LOCAL_RANK")):
        v = whole_number(os.environ.get(env, ""))
        if v is not None:
            out[key] = v
    out.setdefault("rank", 0)
    return out


class _Patches:
    """Settings changed for the region and put back after it: Inductor compiles in this process
    (its worker processes have no compile hook), its caches are keyed apart, autotuners'
    benchmark launches record nothing (a benchmark launches each candidate hundreds of times:
    they would fill the buffer with runs the program never uses), and with via_triton, matmuls
    and attention run as Triton."""

    def __init__(self, prof: AutoProfiler):
        self.prof = prof
        self.undo_steps: list = []

    def apply(self) -> None:
        try:
            from torch._inductor import config as inductor_config

            old = inductor_config.compile_threads
            inductor_config.compile_threads = 1
            self.undo_steps.append(lambda: setattr(inductor_config, "compile_threads", old))
        except Exception:
            pass
        try:
            from torch.compiler import config as compiler_config

            tag = compiler_config.cache_key_tag
            compiler_config.cache_key_tag = f"{tag}|{binding.mode_name(self.prof.level)}"
            self.undo_steps.append(lambda: setattr(compiler_config, "cache_key_tag", tag))
        except Exception:
            pass
        self._pause_benchmarks()
        _clear_inductor_memory()
        self.undo_steps.append(_clear_inductor_memory)
        if self.prof.via_triton:  # matmuls and attention as Triton (auto_mode/via_triton.py)
            from .via_triton import ViaTriton

            via = ViaTriton()
            via.apply()
            self.undo_steps.append(via.undo)

    def _pause_benchmarks(self) -> None:
        def wrap(cls, name):
            original = getattr(cls, name, None)
            if original is None:
                return

            def paused(*args, **kwargs):
                binding.pause()
                try:
                    return original(*args, **kwargs)
                finally:
                    binding.resume()

            setattr(cls, name, paused)
            self.undo_steps.append(lambda: setattr(cls, name, original))

        try:
            from triton.runtime.autotuner import Autotuner

            wrap(Autotuner, "_bench")
        except Exception:
            pass
        try:
            from torch._inductor.runtime.triton_heuristics import CachingAutotuner

            wrap(CachingAutotuner, "benchmark_all_configs")
        except Exception:
            pass
        try:  # Inductor's benchmarker: its autotuners and max-autotune's template choices
            from torch._inductor.runtime import benchmarking

            for cls in vars(benchmarking).values():
                if isinstance(cls, type) and "benchmark_gpu" in vars(cls):
                    wrap(cls, "benchmark_gpu")
        except Exception:
            pass

    def undo(self) -> None:
        for step in reversed(self.undo_steps):
            step()
        self.undo_steps = []


def _inductor_origins() -> dict[str, str]:
    """Kernel name -> the FX nodes and ATen ops Inductor made it from, read from the comment
    above each `name = async_compile.triton(...)` in the output code this process loaded."""
    import re

    out: dict[str, str] = {}
    try:
        from torch._inductor.codecache import PyCodeCache

        files = [getattr(m, "__file__", None) for m in list(getattr(PyCodeCache, "modules", []))]
    except Exception:
        return out
    assign = re.compile(r"^(\w+) = async_compile\.triton\(")
    for path in filter(None, files):
        try:
            with open(path) as f:
                lines = f.read().splitlines()
        except OSError:
            continue
        last = ""
        for line in lines:
            if line.startswith("# ") and "Source Nodes:" in line:
                last = line[2:].replace("Topologically Sorted ", "").strip()
            m = assign.match(line)
            if m and last:
                out.setdefault(m.group(1), last)
                last = ""
    return out


def _clear_inductor_memory() -> None:
    """Inductor keeps compiled kernels in memory by their source (CompiledTritonKernels) and
    loaded output code by path (PyCodeCache): both would hand a kernel compiled outside the region
    to a compile inside it, or the reverse. Its on-disk caches are keyed apart instead."""
    try:
        from torch._inductor.async_compile import CompiledTritonKernels
        from torch._inductor.codecache import PyCodeCache

        CompiledTritonKernels.cache_clear()
        PyCodeCache.cache_clear()
    except Exception:
        pass


def _check_flight(schedule, torch_profiler) -> None:
    """The flight recorder records every step, alone."""
    if schedule is not None:
        raise ConfigError(
            "the flight recorder records every step: leave out schedule= (--steps) with "
            "flight_recorder= (--flight-recorder)"
        )
    if torch_profiler:
        raise ConfigError(
            "the flight recorder records every step, and torch.profiler on every step would "
            "grow without end: leave out torch_profiler= (--torch, --torch-json) with flight_recorder="
        )


def check_can_run() -> None:
    if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
        raise ConfigError(
            "sm_profiler.auto instruments compiled kernels; under TRITON_INTERPRET=1 "
            "nothing is compiled. Unset TRITON_INTERPRET, or use the manual ops "
            "(sm_profiler.triton_ops), which run in the interpreter"
        )
    try:
        import triton
    except ImportError as e:
        raise ConfigError("sm_profiler.auto needs Triton (pip install triton)") from e
    if not hasattr(getattr(triton, "knobs", None), "runtime") or not hasattr(
        triton.knobs.runtime, "add_stages_inspection_hook"
    ):
        raise ConfigError(
            f"sm_profiler.auto needs Triton 3.6 or newer (its compiler stage hook); "
            f"this is Triton {triton.__version__}: pip install -U triton"
        )
    import torch

    if not torch.cuda.is_available():
        raise ConfigError(
            "sm_profiler.auto needs an NVIDIA GPU (torch sees no CUDA device); "
            "on a CPU, the manual ops run in Triton's interpreter"
        )
    mode = triton.knobs.compilation.instrumentation_mode
    if mode and binding.level_of(mode) is None:
        raise ConfigError(
            f"Triton's instrumentation_mode is {mode!r} (Proton's instrumentation "
            "is on?): auto mode cannot share the compiler with it"
        )
