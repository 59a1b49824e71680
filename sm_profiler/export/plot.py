"""The SM occupancy picture: one row per SM, blocks as bars over time, ranges colored by event;
one panel per capture (launch), each on its own time axis from the launch's start.

Each SM's row is split into slots, one per block resident at the same time (greedy interval
assignment), and each slot into one band per group (warp group / lane). A block's residency is a
light grey bar; the top-level ranges of each lane (those not nested in another range of the
same lane) are drawn over it in their event's color. All rectangles of one event go into one
PolyCollection, so drawing costs one call per event name, not per range.

matplotlib is optional (`pip install -e '.[plot]'`) and imported only here.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

import numpy as np

from ..errors import ConfigError, MissingDependencyError
from ..paths import check_writable
from ..trace.drawing import Drawing, launch_drawings, picture_drawing
from ..trace.model import TraceData
from ..units import format_time, time_unit

BLOCK_COLOR = "#d9d9d9"
# Inches per SM row: a whole GPU's SMs fit one tall figure whose rows stay distinguishable.
ROW_INCHES = 0.12
MAX_Y_TICKS = 44
# Image rows per SM row when painting: enough for 4 concurrent blocks x 4 groups to stay apart.
RASTER_ROWS_PER_SM = 48
# Height of all panels together at most (matplotlib refuses images over 2^16 pixels a side).
MAX_PANELS_INCHES = 300.0


@dataclass(frozen=True, eq=False)
class Panel:
    """One launch's panel: what the picture draws of it, all it reads."""

    drawing: Drawing  # the launch's timeline as data (sm_profiler.trace.drawing)
    title: str  # 'gemm (launch 1) · 132 blocks' (the span is added when drawn)


def panels(trace: TraceData, capture: int | None = None) -> list[Panel]:
    """The panels of `trace`, one per capture (launch), or of `capture` alone: each launch's
    drawing and title, as trace/drawing.py lays them out (launch_drawings)."""
    return [Panel(d, title) for title, d in launch_drawings(trace, capture)]


def figure(
    trace: TraceData,
    *,
    width_in: float = 14.0,
    dpi: int = 100,
    colors: dict[str, str] | None = None,
    title: str | None = None,
    max_vector: int = 50_000,
    capture: int | None = None,
):
    """The SM occupancy picture as a matplotlib Figure: one panel per capture (launch), each
    with its own time axis from the launch's start, so that the host time between launches
    does not squeeze them; one time unit (ns, µs, ms or s) for all, picked from the longest.

    colors: event name -> matplotlib color, for some or all events (others get tab10/tab20).
    title: replaces the default title; an emulated trace's marker is added to either.
    max_vector: above this many rectangles the picture is painted as an image (fast for
    millions of ranges) instead of drawn as vector rectangles.
    capture: draw only this capture.

    These keywords are the picture's options everywhere: plot, SmProfiler.plot and
    AutoProfiler.plot pass theirs on to this function.
    """
    _require_matplotlib()
    parts = panels(trace, capture)
    return draw_panels(parts, trace.emulated, width_in, dpi, colors, title, max_vector)


def plot(trace: TraceData, path: str | os.PathLike, **options) -> str:
    """Write the SM occupancy timeline of `trace` to `path` (PNG, or any format matplotlib
    knows by the extension). Returns the path. The keywords are `figure`'s."""
    _require_matplotlib()
    _check_picture_format(path)
    check_writable(path)
    fig = figure(trace, **options)
    fig.savefig(path, dpi=fig.dpi)
    return os.fspath(path)


def _check_picture_format(path) -> None:
    """matplotlib picks the format from the extension and refuses an unknown one with a bare
    ValueError after the figure is drawn: refuse it first, as export does, naming the formats."""
    from matplotlib.backend_bases import FigureCanvasBase

    ext = os.path.splitext(os.fspath(path))[1].lower().lstrip(".")
    known = sorted(FigureCanvasBase.get_supported_filetypes())
    if ext and ext not in known:
        raise ConfigError(
            f"cannot tell the picture format of {os.fspath(path)!r} from its extension .{ext}; "
            f"use one of {', '.join('.' + k for k in known)} (.png for the usual picture)"
        )


def draw_panels(
    parts: list[Panel],
    emulated: bool,
    width_in: float,
    dpi: int,
    colors: dict[str, str] | None,
    title: str | None,
    max_vector: int,
):
    """figure's picture of `parts` (figure's options, in its order): reads the panels alone."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch

    layouts = [layout(p.drawing) for p in parts]
    spans = [lay["t1_ns"] - lay["t0_ns"] for lay in layouts]
    unit, scale = time_unit(max(spans, default=0))
    rows = [max(len(lay["sm_ids"]), 1) for lay in layouts]
    # Inches per SM row, shrunk when many panels would pass matplotlib's pixel limit.
    row_in = max(min(ROW_INCHES, MAX_PANELS_INCHES / max(sum(rows), 1)), 0.01)
    heights = [max(1.6, n * row_in) for n in rows]
    fig = Figure(figsize=(width_in, sum(heights) + 0.9 * len(parts) + 0.8), dpi=dpi)
    FigureCanvasAgg(fig)
    axes = fig.subplots(len(parts), 1, squeeze=False, height_ratios=heights)[:, 0]

    # One palette for every panel: an event has one color in the whole picture.
    names = {e: n for p in parts for e, n in p.drawing.slice_names.items()}
    ev_ids = np.unique(np.concatenate([lay["ranges"]["event"] for lay in layouts])).tolist()
    palette = _palette(names, ev_ids, colors or {})
    n_rects = sum(len(lay["ranges"]["x0"]) + len(lay["blocks"]["x0"]) for lay in layouts)
    for ax, lay, p, span in zip(axes, layouts, parts, spans, strict=True):
        _draw(
            ax,
            lay,
            palette,
            1e3 / scale,
            max(span / scale, 1e-9),
            n_rects <= max_vector,
            width_in,
            dpi,
        )
        if len(parts) > 1:
            ax.set_title(f"{p.title} · span {format_time(span)}", fontsize="medium", loc="left")
    several = len(parts) > 1
    since = "each launch's start" if several else "kernel start"
    axes[-1].set_xlabel(f"time from {since} ({unit})")

    kernels = list(dict.fromkeys(p.drawing.kernel_names[0] for p in parts))  # launch order
    heading = (
        title
        if title is not None
        else (f"SM occupancy: {', '.join(kernels)}" if kernels else "SM occupancy")
    )
    if emulated:  # kept with a title of the caller's: the picture is not GPU timing
        heading += "  (emulated: host clock, SM ids emulated)"
    if several:
        fig.suptitle(heading)
    else:
        axes[0].set_title(heading)
    handles = [Patch(facecolor=BLOCK_COLOR, label="block resident")]
    handles += [Patch(facecolor=col, label=names[e]) for e, col in palette.items()]
    axes[0].legend(handles=handles, loc="upper left", bbox_to_anchor=(1.005, 1.0), fontsize="small")
    fig.tight_layout()
    return fig


def _require_matplotlib() -> None:
    try:
        import matplotlib  # noqa: F401 (fails first, and clearly, when matplotlib is absent)
        from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: F401
    except ImportError as e:
        raise MissingDependencyError("matplotlib", "plot()", extra="plot") from e


def _draw(
    ax,
    layout: dict,
    palette: dict[int, str],
    per_us: float,
    x_max: float,
    vector: bool,
    width_in: float,
    dpi: int,
) -> None:
    """One launch's SM rows on `ax`; x in the figure's unit (`per_us` of it per µs)."""
    from matplotlib.collections import PolyCollection

    b, r = dict(layout["blocks"]), dict(layout["ranges"])
    for rects in (b, r):
        rects["x0"], rects["x1"] = rects["x0"] * per_us, rects["x1"] * per_us
    n_rows = max(len(layout["sm_ids"]), 1)
    if vector:
        # Vector rectangles: crisp at any zoom (SVG/PDF); one collection per event name.
        _add_rects(ax, PolyCollection, b, BLOCK_COLOR)
        for ev, color in palette.items():
            m = r["event"] == ev
            _add_rects(ax, PolyCollection, {k: v[m] for k, v in r.items()}, color)
    else:
        # matplotlib draws rectangles one by one, too slowly for millions: paint an image instead.
        from matplotlib.colors import to_rgb

        cols = max(int(width_in * dpi), 16)
        img = np.ones((n_rows * RASTER_ROWS_PER_SM, cols, 3), np.float32)
        sx, sy = cols / x_max, RASTER_ROWS_PER_SM
        _paint(img, b, sx, sy, np.array(to_rgb(BLOCK_COLOR), np.float32))
        for ev, color in palette.items():
            m = r["event"] == ev
            _paint(
                img, {k: v[m] for k, v in r.items()}, sx, sy, np.array(to_rgb(color), np.float32)
            )
        ax.imshow(
            img, extent=(0, x_max, n_rows - 0.5, -0.5), aspect="auto", interpolation="nearest"
        )
    ax.set_xlim(0, x_max)
    ax.set_ylim(n_rows - 0.5, -0.5)  # SM with the smallest id on top, like a trace viewer
    step = max(1, math.ceil(n_rows / MAX_Y_TICKS))
    ticks = np.arange(0, len(layout["sm_ids"]), step)
    ax.set_yticks(ticks, [str(s) for s in layout["sm_ids"][ticks].tolist()])
    ax.set_ylabel("SM")


def occupancy_layout(trace: TraceData) -> dict:
    """Where everything goes, in data units (x: µs from kernel start, y: SM row), without
    matplotlib: {"sm_ids", "t0_ns", "t1_ns", "blocks": {x0,x1,y0,y1,sm,slot},
    "ranges": {x0,x1,y0,y1,event}}."""
    return layout(picture_drawing(trace))


def layout(d: Drawing) -> dict:
    """occupancy_layout of a drawing (which blocks were resident where, as the trace exports
    show; a block's groups its bands)."""
    b = d.blocks
    t0, t1 = d.start_ns, d.end_ns
    if len(b["sm"]):
        t0 = min(t0, int(b["start_ns"].min()))
        t1 = max(t1, int(b["end_ns"].max()))
    sm_ids = d.sms
    row, slot, n_slots = d.block_slots
    band = 0.8 / n_slots if len(row) else np.zeros(0)
    # A thin gap between slots keeps two blocks resident side by side apart.
    y0 = row - 0.4 + slot * band + 0.04 * band
    blocks = {
        "x0": (b["start_ns"] - t0) / 1e3,
        "x1": (b["end_ns"] - t0) / 1e3,
        "y0": y0,
        "y1": y0 + 0.92 * band,
        "sm": b["sm"],
        "slot": slot,
    }

    ev, lanes = d.slices, d.lanes
    top = d.top_level
    lane = ev["lane"][top]
    cap, blk, sm = (c[lane].astype(np.int64) for c in (lanes.capture, lanes.block, lanes.sm_id))
    # Find each range's block row by its (capture, block, sm) key.
    kb, ks = (
        int(max(blk.max(initial=0), b["block"].max(initial=0))) + 1,
        int(max(sm.max(initial=0), b["sm"].max(initial=0))) + 1,
    )
    bkey = (b["capture"] * kb + b["block"]) * ks + b["sm"]
    order = np.argsort(bkey, kind="stable")
    pos = order[np.searchsorted(bkey[order], (cap * kb + blk) * ks + sm)] if len(cap) else cap
    g = lanes.group[lane].astype(np.int64)
    sub = (blocks["y1"][pos] - blocks["y0"][pos]) / np.maximum(d.groups[cap], 1)
    ry0 = blocks["y0"][pos] + g * sub + 0.1 * sub  # a margin keeps groups and blocks apart
    ranges = {
        "x0": (ev["start_ns"][top] - t0) / 1e3,
        "x1": (ev["end_ns"][top] - t0) / 1e3,
        "y0": ry0,
        "y1": ry0 + 0.8 * sub,
        "event": ev["event"][top],
    }
    return {"sm_ids": sm_ids, "t0_ns": t0, "t1_ns": t1, "blocks": blocks, "ranges": ranges}


def _add_rects(ax, PolyCollection, rects: dict[str, np.ndarray], color) -> None:
    verts = _rects(rects["x0"], rects["x1"], rects["y0"], rects["y1"])
    ax.add_collection(
        PolyCollection(verts, facecolors=color, edgecolors="none", linewidths=0, antialiased=False)
    )


def _paint(img: np.ndarray, rects: dict[str, np.ndarray], sx: float, sy: float, rgb) -> None:
    """Fill rectangles (data units; y rows start at -0.5) into `img`, at least one pixel each.

    Every covered pixel is listed once, vectorized: top-level ranges of one lane do not overlap
    and lanes have their own bands, so the pixel count stays near the image size.
    """
    n_r, n_c = img.shape[:2]
    c0 = np.clip(np.floor(rects["x0"] * sx), 0, n_c - 1).astype(np.int64)
    c1 = np.clip(np.ceil(rects["x1"] * sx), c0 + 1, n_c).astype(np.int64)
    r0 = np.clip(np.round((rects["y0"] + 0.5) * sy), 0, n_r - 1).astype(np.int64)
    r1 = np.clip(np.round((rects["y1"] + 0.5) * sy), r0 + 1, n_r).astype(np.int64)
    w, h = c1 - c0, r1 - r0
    n_pix = w * h
    total = int(n_pix.sum())
    if total == 0:
        return
    rect = np.repeat(np.arange(len(w)), n_pix)
    local = np.arange(total) - np.repeat(np.cumsum(n_pix) - n_pix, n_pix)
    img[r0[rect] + local // w[rect], c0[rect] + local % w[rect]] = rgb


def _rects(x0, x1, y0, y1) -> np.ndarray:
    """(n, 4, 2) vertices of axis-aligned rectangles."""
    v = np.empty((len(x0), 4, 2))
    v[:, 0, 0] = v[:, 3, 0] = x0
    v[:, 1, 0] = v[:, 2, 0] = x1
    v[:, 0, 1] = v[:, 1, 1] = y0
    v[:, 2, 1] = v[:, 3, 1] = y1
    return v


def _palette(names: dict[int, str], event_ids: list[int], given: dict[str, str]) -> dict[int, str]:
    from matplotlib import colormaps

    cmap = colormaps["tab10" if len(event_ids) <= 10 else "tab20"]
    out = {}
    for i, e in enumerate(event_ids):
        out[e] = given.get(names[e], cmap(i % cmap.N))
    return out
