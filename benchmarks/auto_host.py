"""Auto mode on the host: a table of millions of records saved, loaded, reported and exported.

You will see what auto mode's host side costs in time and memory against the records it holds
(issue 31: linear in the records, a few times their bytes), and what its default trace weighs
for 10, 100 and 1,000 steps of a model (issue 30: at most 64 MiB, whatever the run's length).
Each shape is built from raw device records (benchmarks/captures.py) the way AutoProfiler does
when a region ends (records -> rows -> launches), then timed stage by stage:

    build     device records -> AutoTable (rows, launches split)
    save      AutoTable.save (.npz);  load: sm_profiler.load of it
    report    the kernel report (decode + report)
    export    the default Perfetto export (decode + budgeted trace)

Memory is tracemalloc's peak of each stage, over the raw records' bytes (32 B a record).
Issue 30 asks for at most about 3x in build, report and export. `--parts` also prints the peak
of each step inside the stages (rows, launches split, decode, report, default timeline, the
Perfetto writer), to find what to cut; `--scale 0.2` runs the shapes at a fifth of their size.

`--launch-path` times instead the host's part of an instrumented kernel's launch (issue 53:
its per-GPU state made a slotted DeviceBuffer; issue 54: the flight recorder's launch log):
Triton's launcher as auto mode wraps it, around a launcher that does nothing, with a real
Areas and DeviceBuffer (no GPU needed): recording off (the plain binary), on, and on with the
flight recorder's log; the minimum of 7 repeats of 200,000 launches, ns a launch.

Run:  python -m benchmarks run auto_host [--shapes one_launch,launches,replays,steps10,...]
                                         [--scale F] [--parts] [--launch-path]
"""

# %%
from __future__ import annotations

import argparse
import os
import tempfile
import time
import tracemalloc
import warnings

from benchmarks.captures import SYNTHETIC_AUTO_TAGS as TAGS
from benchmarks.captures import synthetic_auto_buffer
from sm_profiler.export import export
from sm_profiler.report.auto_report import format_report
from sm_profiler.trace.auto_table import AutoTable
from sm_profiler.wire.auto_records import read_buffer
from sm_profiler.wire.capture import load

SHAPES = {
    "one_launch": dict(launches=1, programs=5_000_000),
    "launches": dict(launches=50_000, programs=100),
    "replays": dict(launches=1_000_000, programs=1, replays=True, kernels=1),
    "steps10": dict(launches=10 * 60, programs=4_000, steps=10),
    "steps100": dict(launches=100 * 60, programs=600, steps=100),
    "steps1000": dict(launches=1000 * 60, programs=60, steps=1000),
}


def _table(words) -> AutoTable:
    rows, counts = read_buffer(words, 0, TAGS)
    session = {"gpu": 0, "sm_count": 132, "device_name": "synthetic", "rank": 0}
    session.update({k: counts[k] for k in ("claimed", "kept", "dropped", "unwritten", "capacity")})
    session["step_tags"] = {str(k): k - 1 for k in range(1, 1001)}
    kernels = [{"name": f"triton_poi_fused_kernel_{k}", "kernel_id": k} for k in range(1, 21)]
    import numpy as np

    lut = np.zeros(21, np.int32)
    lut[1:] = np.arange(20)
    return AutoTable._from_rows(rows, lut[rows["kernel"]], kernels, [session], {})


def _stage(fn):
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    t0 = time.perf_counter()
    out = fn()
    seconds = time.perf_counter() - t0
    peak = tracemalloc.get_traced_memory()[1] - base
    tracemalloc.stop()
    return out, seconds, peak


def scaled(shape: dict, scale: float) -> dict:
    """`shape` at `scale` times its records: fewer programs a launch where launches are few,
    else fewer launches."""
    out = dict(shape)
    key = "programs" if shape["programs"] > 1000 else "launches"
    out[key] = max(1, int(shape[key] * scale))
    return out


def parts(shape: dict) -> list[tuple[str, float, float]]:
    """(step, seconds, peak over the records' bytes) of the steps inside the stages, each from a
    table (or trace, or timeline) built before it is timed."""
    from sm_profiler.export.perfetto import iter_perfetto_chunks
    from sm_profiler.report.auto_report import launch_table
    from sm_profiler.trace import timeline as tlm
    from sm_profiler.wire.auto_records import split_launches

    recs = synthetic_auto_buffer(**shape)
    raw = recs.nbytes
    out = []

    def step(name, fn):
        res, s, peak = _stage(fn)
        out.append((name, s, peak / raw))
        return res

    rows = step("records -> rows", lambda: read_buffer(recs, 0, TAGS)[0])
    step("split_launches", lambda: split_launches(rows))
    rows = None
    table = _table(recs)
    trace = step("decode", table.decode)
    step("launch_table", lambda: launch_table(trace))
    step("format_report", lambda: format_report(trace, 100))
    tl = step("default timeline", lambda: tlm.build(trace))
    step("Perfetto writer", lambda: sum(len(c) for c in iter_perfetto_chunks(tl)))
    return out


def bench(name: str, shape: dict) -> dict:
    recs = synthetic_auto_buffer(**shape)
    raw = recs.nbytes  # kept until the end: what the device's buffer held
    n = shape["launches"] * shape["programs"]
    r = {"shape": name, "records": n, "launches": shape["launches"], "raw_bytes": raw}
    table, r["build_s"], r["build_peak"] = _stage(lambda: _table(recs))
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "auto.npz")
        _, r["save_s"], r["save_peak"] = _stage(lambda: table.save(path))
        r["file_bytes"] = os.path.getsize(path)
        loaded, r["load_s"], r["load_peak"] = _stage(lambda: load(path))
        assert loaded.num_rows == table.num_rows
        del loaded
        _, r["report_s"], r["report_peak"] = _stage(lambda: format_report(table.decode(), 100))
        trace_path = os.path.join(d, "auto.perfetto-trace")
        _, r["export_s"], r["export_peak"] = _stage(lambda: export(table.decode(), trace_path))
        r["trace_bytes"] = os.path.getsize(trace_path)
    return r


def report(rows: list[dict]) -> str:
    head = (
        f"{'shape':<11}{'records':>10}{'launches':>10}  {'build':>13}{'save':>13}{'load':>13}"
        f"{'report':>13}{'export':>13}{'trace MiB':>10}"
    )
    lines = [head, "  (each stage: seconds / peak memory as a multiple of the records' 32 B each)"]
    for r in rows:
        cells = "".join(
            f"{r[f'{s}_s']:>6.2f}s/{r[f'{s}_peak'] / r['raw_bytes']:>4.1f}x "
            for s in ("build", "save", "load", "report", "export")
        )
        lines.append(
            f"{r['shape']:<11}{r['records']:>10,}{r['launches']:>10,}  {cells}"
            f"{r['trace_bytes'] / 2**20:>9.1f}"
        )
    return "\n".join(lines)


# %%
def launch_path(launches: int = 200_000, repeats: int = 7) -> dict[str, float]:
    """ns a launch of the wrapped launcher: off, on, and on with the flight recorder's log."""
    import collections
    import timeit

    from sm_profiler.auto_mode import binding
    from sm_profiler.auto_mode.state import STATE, DeviceBuffer
    from sm_profiler.wire.auto_areas import Areas

    class Launcher:  # Triton's CudaLauncher, doing nothing: what is left is ours
        num_ctas, profile_scratch_size = 1, 8

        def __call__(self, gx, gy, gz, stream, function, *args):
            return None

    call = binding._wrap_launcher_call(Launcher.__call__)
    launcher, function, plain = Launcher(), 0x1000, 0x2000
    saved = {k: getattr(STATE, k) for k in ("buffers", "single", "plain", "on", "launch_log")}
    out = {}
    try:
        areas = Areas(1 << 26, ring=True)
        STATE.buffers = {0: DeviceBuffer(1 << 40, areas, None)}
        STATE.single, STATE.plain = STATE.buffers[0], {function: plain}
        for name, on, log in (("off", False, None), ("on", True, None), ("flight", True, 4096)):
            STATE.on = on
            STATE.launch_log = None if log is None else collections.deque(maxlen=log)

            def launch():
                call(launcher, 132, 1, 1, 0, function, 1, 2, 3)

            best = min(timeit.repeat(launch, number=launches, repeat=repeats))
            out[name] = 1e9 * best / launches
            areas.next = 0  # the ring's launch space from the start again
            areas.counts.clear()
    finally:
        for k, v in saved.items():
            setattr(STATE, k, v)
    return out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument(
        "--shapes", default=",".join(SHAPES), help="comma-separated: " + ", ".join(SHAPES)
    )
    ap.add_argument("--scale", type=float, default=1.0, help="records of each shape, times this")
    ap.add_argument("--parts", action="store_true", help="also each step's seconds and peak")
    ap.add_argument(
        "--launch-path", action="store_true", help="time an instrumented launch's host part"
    )
    a = ap.parse_args(argv)
    if a.launch_path:
        ns = launch_path()
        print("host time of an instrumented kernel's launch (the wrapped launcher), ns a launch:")
        for name, what in (
            ("off", "recording off (the plain binary)"),
            ("on", "recording on (an area taken)"),
            ("flight", "recording on, flight recorder's launch log"),
        ):
            print(f"  {what:<44}{ns[name]:>8.0f}")
        return
    rows = []
    for name in a.shapes.split(","):
        shape = scaled(SHAPES[name], a.scale)
        rows.append(bench(name, shape))
        print(report(rows[-1:]).splitlines()[-1], flush=True)
        if a.parts:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)  # the default trace's note
                for step, s, peak in parts(shape):
                    print(f"    {step:<18}{s:>6.2f}s/{peak:>4.1f}x", flush=True)
    print(report(rows))


if __name__ == "__main__":
    main()
