"""torch.profiler beside auto mode, on auto mode's steps (`sm_profiler.auto(torch_profiler=True)`,
`sm-profiler run --torch`; docs/auto.md, "torch.profiler beside it").

    steps = TorchSteps(prof._records)   # which of our steps are recorded
    steps.start()                       # at our step 0, when the region starts
    steps.step()                        # each time our step advances (prof.step(), the optimizer)
    doc = steps.finish()                # the region ends: one Chrome trace of the recorded steps

One `torch.profiler.profile` (CPU and CUDA activities) runs for the whole region, driven by our
own steps: torch numbers its steps from 0 as we do, and its `step()` is called exactly where
ours advances, so its `ProfilerStep#N` annotation is our step N. Its schedule is ours, mapped
step by step onto torch's actions:

    our step n recorded, n + 1 too          RECORD
    our step n recorded, n + 1 not          RECORD_AND_SAVE (the window's trace is kept)
    n not recorded, n + 1 recorded          WARMUP (torch starts CUPTI a step early, as its own
                                            schedule's warmup does: its start-up cost lands in a
                                            step we do not record)
    neither                                 NONE

so that torch records exactly the steps we record.

The step annotations. torch opens a `ProfilerStep#N` range at each `step()` and closes it at the
next; ours advances inside the optimizer's `Optimizer.step#...` range (its post hook, under
`sm-profiler run`), so torch's ranges would begin inside one optimizer step's range and end
inside the next's: ranges on one thread that overlap without nesting, which trace viewers break
or drop. So torch's own are switched off (`record_steps = False`) and each recorded step is
marked at its boundaries by an empty record_function (`sm_profiler.step#N` where it begins,
`sm_profiler.step_end#N` where the window ends), stamped by torch's own clock; when the trace is
exported the marks become one `ProfilerStep#N` range each, from its mark to the next step's, on
a thread of their own ("steps (sm_profiler)", STEP_TID) of the process, and are removed. Readers
of torch's step annotations (coverage.step_windows, `merge --torch`, TensorBoard's) find them as
torch writes them: complete user_annotation events named ProfilerStep#N.

Before torch stops at the end of a window the
GPU is synchronized (`synchronize`), once per window, in the first step after it: kernels still
running when CUPTI is flushed would be missing from its trace. Each window's results are kept
(`prof.profiler`, whose results outlive the next window's) and exported when the region ends,
not in the middle of the run; several windows (a schedule that repeats) become one trace, each
window's rows moved onto the first's baseTimeNanoseconds.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
import warnings
from collections.abc import Callable

from ..errors import ConfigError

MARK = "sm_profiler.step#"  # an empty range where recorded step N begins
END_MARK = "sm_profiler.step_end#"  # and where a window's last step ends
STEP_TID = 0x0FFF_FFF0  # the steps' thread: above any OS thread id, below the merge's ids
STEP_THREAD = "steps (sm_profiler)"


def check_torch_profiler(cuda: bool = True) -> None:
    """A ConfigError, before anything starts, where torch.profiler cannot record CPU ops and
    CUDA kernels in this process."""
    try:
        import torch
        import torch.profiler as tp
    except ImportError as e:
        raise ConfigError(f"torch_profiler=True needs torch.profiler: {e}") from e
    kineto = getattr(torch.autograd, "kineto_available", None)
    if kineto is not None and not kineto():
        raise ConfigError(
            "torch_profiler=True: this torch was built without Kineto (torch.profiler's "
            "tracer); install a torch wheel from pytorch.org, or leave torch_profiler off"
        )
    if cuda:
        if not torch.cuda.is_available():
            raise ConfigError(
                "torch_profiler=True (--torch) records CUDA kernels with CUPTI: torch sees no "
                "CUDA device"
            )
        if tp.ProfilerActivity.CUDA not in tp.supported_activities():
            raise ConfigError(
                "torch_profiler=True (--torch): this torch's profiler cannot record CUDA "
                "activity (no CUPTI in its build); leave torch_profiler off"
            )
    if _profiler_enabled():
        raise ConfigError(
            "torch_profiler=True (--torch): torch.profiler is already running in this process "
            "(one profiler at a time): stop the script's own torch.profiler, or leave --torch "
            "off and merge its trace with `sm-profiler merge --torch`"
        )


def _profiler_enabled() -> bool:
    try:
        import torch
        from torch.autograd import profiler as autograd_profiler

        if getattr(autograd_profiler, "_is_profiler_enabled", False):
            return True
        enabled = getattr(torch._C._autograd, "_profiler_enabled", None)
        return bool(enabled()) if enabled is not None else False
    except Exception:  # noqa: BLE001 - a torch without the query: nothing known to be running
        return False


class TorchSteps:
    """torch.profiler on the steps `records(n)` says are recorded (see the module doc).

    activities: torch.profiler's (default CPU and CUDA). synchronize: called before torch stops
    recording (the GPUs whose kernels it recorded). notes: what went wrong, said once each (a
    torch.profiler that fails mid-run is switched off; the region goes on)."""

    def __init__(self, records: Callable[[int], bool], activities=None, synchronize=None):
        from torch.profiler import ProfilerActivity

        self.records = records
        self.activities = activities or [ProfilerActivity.CPU, ProfilerActivity.CUDA]
        self.synchronize = synchronize
        self.notes: list[str] = []
        self.windows: list = []  # each recorded window's results (torch.autograd.profiler.profile)
        self.export_s = 0.0
        self._prof = None
        self._recording = False

    def action(self, n: int):
        """torch's ProfilerAction for step n (the module doc's table)."""
        from torch.profiler import ProfilerAction

        if n < 0:
            return ProfilerAction.NONE
        now, after = self.records(n), self.records(n + 1)
        if now:
            return ProfilerAction.RECORD if after else ProfilerAction.RECORD_AND_SAVE
        return ProfilerAction.WARMUP if after else ProfilerAction.NONE

    def start(self) -> None:
        """Start at step 0 (raises ConfigError when torch.profiler refuses to start)."""
        import torch.profiler as tp

        self._prof = tp.profile(
            activities=self.activities,
            schedule=self.action,
            on_trace_ready=self._keep,
        )
        self._prof.record_steps = False  # our own marks instead (the module doc)
        try:
            with _quiet():
                self._prof.__enter__()
        except Exception as e:  # noqa: BLE001 - said as a ConfigError, before the script runs
            self._prof = None
            raise ConfigError(f"torch.profiler did not start: {type(e).__name__}: {e}") from e
        self._recording = self.records(0)
        if self._recording:
            _mark(MARK, 0)

    def step(self) -> None:
        """Our step advanced: torch's follows (its next ProfilerStep#N is our step N)."""
        p = self._prof
        if p is None:
            return
        n = p.step_num + 1
        try:
            now = self.records(n)
            if self._recording and not now:
                _mark(END_MARK, n - 1)
                self._sync()  # the window's kernels have run before CUPTI is flushed
            with _quiet():
                p.step()
            self._recording = now
            if now:
                _mark(MARK, n)
        except Exception as e:  # noqa: BLE001 - never break the user's step over the profiler
            self._give_up(f"torch.profiler failed at step {n} and was switched off", e)

    def finish(self) -> dict | None:
        """Stop torch.profiler and return one Chrome trace (a dict) of every recorded window,
        or None if none was recorded."""
        p, self._prof = self._prof, None
        if p is not None:
            try:
                if self._recording:
                    _mark(END_MARK, p.step_num)
                    self._sync()
                with _quiet():
                    p.__exit__(None, None, None)
            except Exception as e:  # noqa: BLE001
                self._give_up("torch.profiler failed when the region ended", e)
        t0 = time.perf_counter()
        docs = []
        for w in self.windows:
            try:
                docs.append(_export(w))
            except Exception as e:  # noqa: BLE001
                self.notes.append(f"a torch.profiler window could not be exported ({e})")
        self.windows = []
        self.export_s = time.perf_counter() - t0
        return combine(docs) if docs else None

    def _keep(self, p) -> None:
        if p.profiler is not None:
            self.windows.append(p.profiler)

    def _sync(self) -> None:
        if self.synchronize is not None:
            self.synchronize()

    def _give_up(self, what: str, e: BaseException) -> None:
        self.notes.append(f"{what}: {type(e).__name__}: {e}")
        p, self._prof = self._prof, None
        if p is not None:
            try:
                p.__exit__(None, None, None)
            except Exception:  # noqa: BLE001 - already failing: keep what the windows hold
                pass


class _quiet(warnings.catch_warnings):
    """torch's warning that each cycle's events are cleared (we keep each window's results
    ourselves) and that there is no warmup (our step 0 may be recorded) are not the user's."""

    def __enter__(self):
        out = super().__enter__()
        warnings.filterwarnings("ignore", message=".*Profiler clears events at the end")
        warnings.filterwarnings("ignore", message=".*won't be using warmup")
        return out


def _mark(prefix: str, n: int) -> None:
    from torch.profiler import record_function

    with record_function(f"{prefix}{n}"):
        pass


def _export(window) -> dict:
    """One window's results as its Chrome trace dict (torch writes it to a file only), its
    step marks made ProfilerStep#N ranges."""
    fd, path = tempfile.mkstemp(suffix=".json", prefix="sm_profiler_torch_")
    os.close(fd)
    try:
        window.export_chrome_trace(path)
        with open(path, encoding="utf-8") as f:
            return step_ranges(json.load(f))
    finally:
        os.unlink(path)


def step_ranges(doc: dict) -> dict:
    """`doc` with its step marks (MARK, END_MARK) replaced by one ProfilerStep#N range per
    marked step, from its mark to the next step's (else to its end mark), on the marking
    process's STEP_TID thread."""
    begins: dict[int, dict] = {}
    ends: dict[int, float] = {}
    kept = []
    for e in doc.get("traceEvents", []):
        name = str(e.get("name", "")) if isinstance(e, dict) else ""
        for prefix, into in ((MARK, begins), (END_MARK, ends)):
            if name.startswith(prefix) and name[len(prefix) :].isdigit() and e.get("ph") == "X":
                n = int(name[len(prefix) :])
                into[n] = e if into is begins else e["ts"]
                break
        else:
            kept.append(e)
    out = []
    pids = set()
    for n in sorted(begins):
        e = begins[n]
        start = e["ts"]
        end = begins[n + 1]["ts"] if n + 1 in begins else ends.get(n, start)
        pids.add(e.get("pid"))
        out.append(
            {
                "ph": "X",
                "cat": "user_annotation",
                "name": f"ProfilerStep#{n}",
                "pid": e.get("pid"),
                "tid": STEP_TID,
                "ts": start,
                "dur": _dur_us(start, end),
                "args": {"source": f"sm_profiler: step {n} as auto mode counts it"},
            }
        )
    for pid in pids:
        out.append(
            {
                "ph": "M",
                "name": "thread_name",
                "pid": pid,
                "tid": STEP_TID,
                "args": {"name": STEP_THREAD},
            }
        )
        out.append(
            {
                "ph": "M",
                "name": "thread_sort_index",
                "pid": pid,
                "tid": STEP_TID,
                "args": {"sort_index": -1},
            }
        )
    return dict(doc, traceEvents=kept + out)


def combine(docs: list[dict]) -> dict:
    """Several windows' Chrome traces of one process as one: the first's keys, every window's
    rows moved onto the first's baseTimeNanoseconds (each window's metadata rows once)."""
    if len(docs) == 1:
        return docs[0]
    out = dict(docs[0])
    base = int(out.get("baseTimeNanoseconds", 0))
    events = list(out["traceEvents"])

    def key(e: dict) -> str:  # a metadata row, whatever its time
        return json.dumps({k: v for k, v in e.items() if k != "ts"}, sort_keys=True, default=str)

    from ..export.chrome import moved_rows

    seen = {key(e) for e in events if e.get("ph") == "M"}
    for d in docs[1:]:
        # Moved by whole ns (chrome.moved_rows): Kineto's ts of 5e12 µs step by about 1 ns.
        rows, _ = moved_rows(d.get("traceEvents", []), int(d.get("baseTimeNanoseconds", 0)) - base)
        for e in rows:
            if e.get("ph") == "M":
                if key(e) in seen:
                    continue
                seen.add(key(e))
            events.append(e)
    out["traceEvents"] = events
    return out


def _dur_us(start_us, end_us) -> float:
    """end - start of two Kineto times (µs) in whole ns, divided once: a step's range then ends
    where the next begins however large the ts (a double's difference would be off by one)."""
    from ..export.chrome import exact_ns

    start, end = exact_ns(start_us), exact_ns(end_us)
    return 0.0 if start is None or end is None else max(end - start, 0) / 1000
