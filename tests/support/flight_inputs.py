"""Stand-ins for the flight recorder's CPU tests (issue 54, items 2-4): a GPU's stream as a
clock that runs behind the host (`FakeStream`), and CUDA timing events on it (`FakeEvent`), as
torch.cuda.Event(enable_timing=True) is called: record(), query(), elapsed_time(other) in ms."""

from __future__ import annotations


class FakeStream:
    """A stream whose queued work ends at `queued_ms` and whose GPU has reached `now_ms`."""

    def __init__(self):
        self.queued_ms = 0.0
        self.now_ms = 0.0
        self.events_made = 0

    def queue(self, ms: float) -> None:
        """Queue `ms` of work after what is queued."""
        self.queued_ms = max(self.queued_ms, self.now_ms) + ms

    def run_to(self, ms: float) -> None:
        self.now_ms = ms

    def catch_up(self) -> None:
        self.now_ms = self.queued_ms

    def event(self) -> FakeEvent:
        self.events_made += 1
        return FakeEvent(self)


class FakeEvent:
    def __init__(self, stream: FakeStream):
        self.stream, self.at_ms, self.records = stream, None, 0

    def record(self) -> None:
        self.at_ms = max(self.stream.queued_ms, self.stream.now_ms)
        self.records += 1

    def query(self) -> bool:
        return self.at_ms is not None and self.at_ms <= self.stream.now_ms

    def elapsed_time(self, other: FakeEvent) -> float:
        assert self.query() and other.query(), "elapsed_time of an event not completed"
        return other.at_ms - self.at_ms


# -- dumps, built by hand --------------------------------------------------------------------

# Kernel ids of the hand-built dumps and their names (ids are the records' kernel tags here).
FLIGHT_KERNELS = {
    1: {"name": "triton_poi_fused_add_0"},
    2: {"name": "triton_red_fused_sum_1"},
    3: {"name": "spin_kernel"},
    4: {"name": "work_kernel"},
}


def flight_words(launches, capacity=4096, t0_ns=0):
    """A GPU's buffer words (as the flight recorder reads them) after `launches` were queued in
    this order: (kernel id, step, programs, programs ended, start offset ns, duration ns) each,
    given one area each by the host's allocator (areas.Areas); only the programs that ended
    have their records written (the others still run, or never started). Step tags are step +
    1. Returns (words, the Areas)."""
    import numpy as np

    from sm_profiler.wire import format as fmt
    from sm_profiler.wire.auto_areas import Areas

    areas = Areas(capacity, ring=True)
    slots = np.zeros(capacity, fmt.AUTO_RECORD_DTYPE)
    for kid, step, programs, ended, start, dur in launches:
        first = areas.take(programs, step=step + 1)
        for p in range(ended):
            t = t0_ns + start + 10 * p
            slots[first + p] = (t, (t + dur) & fmt.LOW32, p % 4, kid, 0, p, 0)
    return np.concatenate([areas.header_and_areas(), slots.view(np.uint64)]), areas


def flight_table(launches, info, rank=0, t0_ns=0, queued_at_ns=None, kernels=None):
    """The table of a dump of one GPU whose host queued `launches` (as flight_words takes them),
    with the session's `flight` info: `info` and the launches queued, [grid_id, kernel, step,
    records, queued_ns] each, queued 1 ms apart from `queued_at_ns`."""
    from sm_profiler.trace.auto_table import AutoTable

    kernels = FLIGHT_KERNELS if kernels is None else kernels
    words, _ = flight_words(launches, t0_ns=t0_ns)
    steps = sorted({step for _, step, *_ in launches})
    session = {
        "gpu": 0,
        "sm_count": 4,
        "device_name": "test GPU",
        "rank": rank,
        "step_tags": {str(s + 1): s for s in steps},
    }
    table = AutoTable.from_buffers([(session, words)], kernels)
    at = info.get("written_ns", 0) - 10**9 if queued_at_ns is None else queued_at_ns
    queued = [
        [i, kernels[kid]["name"], step, programs, at + i * 10**6]
        for i, (kid, step, programs, *_) in enumerate(launches)
    ]
    table.sessions[0]["flight"] = {"queued": queued, **info}
    return table


# -- a GPU under the flight recorder, simulated on the CPU -----------------------------------

ADDRESS = 0x7F00_0000_0000  # where the simulated buffer's first record slot lies
GPU_T0_NS = 1_700_000_000_000_000_000  # the simulated GPU's clock at its stream's 0 ms


class ArrayCopier:
    """driver.HostCopier as the rescue's read calls it, over `device` (uint8: the buffer's
    record slots as the GPU holds them now): each copy arrives at once, except where
    `stuck` (a wedged device: it never arrives)."""

    def __init__(self, device, chunk_bytes=1 << 16):
        self.device, self.chunk, self.stuck, self.copies = device, None, False, 0
        import numpy as np

        self.chunk = np.zeros(chunk_bytes, np.uint8)

    def bind(self):
        pass

    def copy(self, offset, nbytes):
        self.copies += 1
        self.chunk[:nbytes] = self.device[offset : offset + nbytes]

    def done(self):
        return not self.stuck


class SimGpu:
    """sm_profiler.auto(flight_recorder=config) on one simulated GPU: a real AutoProfiler whose
    buffer's device memory is a numpy array read through an ArrayCopier, its kernels bound as
    the binding binds them (FLIGHT_KERNELS: kernel id k is CUfunction 1000 + k), a stream that
    runs launches when told (`run_gpu`) and timing events on it, a host clock the test moves
    (`now_s`). `launch` is what an instrumented launch does on the host: an area taken, the
    launch logged; `step()` is prof.step(). Undo with `close()`."""

    def __init__(self, monkeypatch, config, capacity=4096):
        import numpy as np

        from sm_profiler.auto_mode import binding, session
        from sm_profiler.auto_mode.flight import FlightRecorder
        from sm_profiler.wire import format as fmt
        from sm_profiler.wire.auto_areas import Areas

        self.fmt = fmt
        self.prof = prof = session.AutoProfiler(capacity, flight_recorder=config)
        self.areas = Areas(capacity, ring=True, compact_min=1 << 12)
        self.slots = np.zeros(capacity, fmt.AUTO_RECORD_DTYPE)
        self.copier = ArrayCopier(self.slots.view(np.uint8))
        props = _Props()
        prof._buffers[0] = {
            "buffer": _Numel(capacity * fmt.AUTO_RECORD_WORDS),
            "address": ADDRESS,
            "areas": self.areas,
            "props": props,
            "copier": self.copier,
        }
        kernels = {
            k: binding.KernelEntry(k, v["name"], "program", tag=k, devices={0})
            for k, v in FLIGHT_KERNELS.items()
        }
        monkeypatch.setattr(binding.STATE, "kernels", kernels)
        monkeypatch.setattr(binding.STATE, "by_module", {500 + k: k for k in kernels})
        monkeypatch.setattr(binding.STATE, "plain_of_module", {500 + k: 1000 + k for k in kernels})
        from sm_profiler.auto_mode.state import DeviceBuffer

        buffers = {0: DeviceBuffer(ADDRESS, self.areas, None)}
        monkeypatch.setattr(binding.STATE, "buffers", buffers)
        monkeypatch.setattr(binding.STATE, "launch_log", None)
        monkeypatch.setattr(session, "_active", [prof])
        prof._new_step_tag()
        binding.set_step(prof._step_tag, 0)
        self.binding = binding
        self.stream = FakeStream()
        self.now_s = 1000.0
        self.pending = []  # launches queued and not run: (first, programs, kernel, start, end ms)
        prof.flight = FlightRecorder(
            prof, prof.flight_config, make_event=self.stream.event, monotonic=lambda: self.now_s
        ).start()

    def launch(self, kernel: int, programs: int, ms: float) -> None:
        import time

        first = self.areas.take(programs)
        assert first is not None
        log = self.binding.STATE.launch_log
        log.append((1000 + kernel, ADDRESS + (first << self.fmt.AUTO_RECORD_SHIFT), time.time_ns()))
        start = max(self.stream.queued_ms, self.stream.now_ms)
        self.stream.queue(ms)
        self.pending.append((first, programs, kernel, start, self.stream.queued_ms))

    def run_gpu(self, to_ms: float | None = None) -> None:
        """The GPU runs what is queued up to `to_ms` (everything by default): the records of
        each launch that ended are written, on the GPU's clock."""
        to_ms = self.stream.queued_ms if to_ms is None else to_ms
        keep = []
        for first, programs, kernel, start, end in self.pending:
            if end > to_ms:
                keep.append((first, programs, kernel, start, end))
                continue
            for p in range(programs):
                t = GPU_T0_NS + round(start * 1e6) + p
                t_end = GPU_T0_NS + round(end * 1e6)
                self.slots[first + p] = (t, t_end & self.fmt.LOW32, p % 4, kernel, 0, p, 0)
        self.pending = keep
        self.stream.run_to(to_ms)

    def step(self, host_s: float = 0.01) -> None:
        self.now_s += host_s
        self.prof.step()

    def wait_for_dumps(self, n: int, timeout_s: float = 10.0) -> list[str]:
        import time

        deadline = time.monotonic() + timeout_s
        while len(self.prof.flight.written) < n and time.monotonic() < deadline:
            time.sleep(0.02)
        return list(self.prof.flight.written)

    def close(self) -> None:
        self.prof.flight.stop()


class _Props:
    name, multi_processor_count, major, minor = "test GPU", 4, 9, 0


class _Numel:
    def __init__(self, n):
        self.n = n

    def numel(self):
        return self.n


def steady_step(gpu, work_ms=3.0, programs=8):
    """One step of a job on a SimGpu: two launches (kernels 1 and 4), run, then prof.step()."""
    gpu.launch(1, programs, 2.0)
    gpu.launch(4, programs, work_ms)
    gpu.run_gpu()
    gpu.step()


CURRENT: list = []  # the SimGpu of the SimRegion running now, for the script it runs


class SimRegion:
    """AutoProfiler's region as `sm-profiler run --flight-recorder` uses it, over a SimGpu made
    when the region starts with the settings `run` gave; the script drives that GPU through
    `flight_inputs.CURRENT[0]`. Its end reads the ring back as the region's end does."""

    def __init__(self, monkeypatch, config, capacity=4096):
        from sm_profiler.auto_mode.stop_signals import OneReader

        self.monkeypatch, self.config, self.capacity = monkeypatch, config, capacity
        self.reading = OneReader()
        self.flight = None

    def __enter__(self):
        self.gpu = SimGpu(self.monkeypatch, self.config, self.capacity)
        self.gpu.prof.reading = self.reading
        self.flight = self.gpu.prof.flight
        CURRENT[:] = [self.gpu]
        return self

    def __exit__(self, *exc):
        prof = self.gpu.prof
        self.reading.claim("stop")
        prof._table = prof.live_table({i: r[0] for i, r in prof.read_live().items()})
        self.gpu.close()
        CURRENT.clear()


def patch_flight_auto(monkeypatch) -> list:
    """sm_profiler.auto made to return a SimRegion of the flight recorder's settings it is
    given (the regions made are appended to the list returned), auto mode's GPU check passed."""
    import sm_profiler
    from sm_profiler.auto_mode import session

    regions: list = []

    def auto(capacity=None, flight_recorder=None, **options):
        session.AutoProfiler(capacity or 4096, flight_recorder=flight_recorder, **options)
        regions.append(SimRegion(monkeypatch, flight_recorder))
        return regions[-1]

    monkeypatch.setattr(sm_profiler, "auto", auto)
    monkeypatch.setattr(session, "check_can_run", lambda: None)
    return regions
