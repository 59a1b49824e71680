"""The SM occupancy PNG: a real image with the expected colours where the ranges are, rows that
scale with the SM count, and a clear error without matplotlib."""

from __future__ import annotations

import sys

import numpy as np
import pytest
from captures import build_capture, tiny_capture
from extras import need

from sm_profiler import MissingDependencyError
from sm_profiler.export.plot import occupancy_layout, plot
from sm_profiler.trace.decode import decode

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _pixels(path) -> np.ndarray:
    from matplotlib.image import imread

    return (imread(path)[..., :3] * 255).round().astype(int)


def _has_colour(img: np.ndarray, rgb: tuple[int, int, int], min_pixels: int = 50) -> bool:
    return int((np.abs(img - np.array(rgb)).max(axis=-1) <= 2).sum()) >= min_pixels


def test_png_has_the_event_colours(tmp_path):
    need("matplotlib", "plot")
    path = tmp_path / "tiny.png"
    colors = {"load": "#ff0000", "compute": "#0000ff"}
    assert plot(decode(tiny_capture()), path, colors=colors) == str(path)
    assert path.read_bytes()[:8] == PNG_SIGNATURE
    img = _pixels(path)
    assert _has_colour(img, (255, 0, 0)) and _has_colour(img, (0, 0, 255))
    assert _has_colour(img, (0xD9, 0xD9, 0xD9))  # block residency bars
    # compute runs longer than load in both blocks: more blue than red.
    red = (np.abs(img - (255, 0, 0)).max(axis=-1) <= 2).sum()
    blue = (np.abs(img - (0, 0, 255)).max(axis=-1) <= 2).sum()
    assert blue > 2 * red


def test_a_missing_event_leaves_no_colour(tmp_path):
    need("matplotlib", "plot")
    lanes = {0: {"sm": 0, "anchor": 10, "records": [("B", 0, 20), ("E", 0, 900)]}}
    path = tmp_path / "one.png"
    plot(
        decode(build_capture(lanes, 1, event_names={0: "load"})),
        path,
        colors={"load": "#ff0000", "compute": "#0000ff"},
    )
    img = _pixels(path)
    assert _has_colour(img, (255, 0, 0))
    assert not _has_colour(img, (0, 0, 255), min_pixels=1)


def test_default_colours_come_from_tab10(tmp_path):
    need("matplotlib", "plot")
    path = tmp_path / "tiny.png"
    plot(decode(tiny_capture()), path)
    img = _pixels(path)
    assert _has_colour(img, (0x1F, 0x77, 0xB4))  # tab10 C0: event 0, load
    assert _has_colour(img, (0xFF, 0x7F, 0x0E))  # tab10 C1: event 1, compute


def _many_sms(n_sms: int):
    lanes = {
        b: {
            "sm": b % n_sms,
            "anchor": 1 + 1000 * (b // n_sms),
            "records": [
                ("B", b % 3, 1 + 1000 * (b // n_sms) + 10),
                ("E", b % 3, 1000 * (b // n_sms) + 900),
            ],
        }
        for b in range(2 * n_sms)
    }
    return decode(build_capture(lanes, 2 * n_sms, event_names={0: "a", 1: "b", 2: "c"}))


def test_figure_grows_with_the_sm_count(tmp_path):
    need("matplotlib", "plot")
    small, big = tmp_path / "small.png", tmp_path / "big.png"
    plot(_many_sms(2), small)
    plot(_many_sms(132), big)
    h_small, h_big = _pixels(small).shape[0], _pixels(big).shape[0]
    assert h_big > 4 * h_small
    assert h_big >= 132 * 10  # at least 10 pixels per SM row at the default dpi


def test_layout_stacks_concurrent_blocks_and_draws_top_level_ranges_only():
    lanes = {
        # Blocks 0 and 1 overlap on SM 4; block 2 starts after block 0 ended: it reuses slot 0.
        0: {
            "sm": 4,
            "anchor": 100,
            "records": [("B", 0, 110), ("B", 1, 120), ("E", 1, 130), ("E", 0, 200)],
        },
        1: {"sm": 4, "anchor": 150, "records": [("B", 0, 160), ("E", 0, 400)]},
        2: {"sm": 4, "anchor": 250, "records": [("B", 1, 260), ("E", 1, 300)]},
        3: {"sm": 9, "anchor": 100, "records": []},
    }
    lay = occupancy_layout(decode(build_capture(lanes, 4)))
    assert lay["sm_ids"].tolist() == [4, 9]
    assert lay["blocks"]["slot"].tolist() == [0, 1, 0, 0]
    r = lay["ranges"]
    # The nested range (event 1 inside event 0 in block 0) is not drawn on its own.
    assert sorted(zip(r["x0"].tolist(), r["x1"].tolist(), strict=True)) == [
        (0.01, 0.1),
        (0.06, 0.3),
        (0.16, 0.2),
    ]
    blk = lay["blocks"]
    # Concurrent blocks on SM 4 share row 0 without overlapping; SM 9's block sits in row 1.
    assert blk["y1"][0] <= blk["y0"][1]
    assert -0.5 < blk["y0"][0] < blk["y1"][1] < 0.5 and 0.5 < blk["y0"][3] < 1.5


def test_missing_matplotlib_says_how_to_install(tmp_path, monkeypatch):
    for name in list(sys.modules):
        if name == "matplotlib" or name.startswith("matplotlib."):
            monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(MissingDependencyError, match=r"pip install -e '\.\[plot\]'") as e:
        plot(decode(tiny_capture()), tmp_path / "x.png")
    assert "plot() needs the optional package 'matplotlib'" in str(e.value)
    assert not (tmp_path / "x.png").exists()


def test_painted_image_path_shows_the_same_colours(tmp_path):
    need("matplotlib", "plot")
    path = tmp_path / "raster.png"
    colors = {"load": "#ff0000", "compute": "#0000ff"}
    plot(decode(tiny_capture()), path, colors=colors, max_vector=0)  # force painting
    img = _pixels(path)
    assert _has_colour(img, (255, 0, 0)) and _has_colour(img, (0, 0, 255))
    assert _has_colour(img, (0xD9, 0xD9, 0xD9))
    red = (np.abs(img - (255, 0, 0)).max(axis=-1) <= 2).sum()
    blue = (np.abs(img - (0, 0, 255)).max(axis=-1) <= 2).sum()
    assert blue > 2 * red


def test_plot_one_capture_of_several(tmp_path):
    from sm_profiler.trace.model import TraceData

    t1 = 10**9
    a = decode(
        build_capture({0: {"sm": 1, "anchor": 10, "records": [("B", 0, 20), ("E", 0, 90)]}}, 1)
    )
    b = decode(
        build_capture(
            {0: {"sm": 2, "anchor": t1, "records": [("B", 1, t1 + 5), ("E", 1, t1 + 50)]}}, 1
        )
    )
    both = TraceData.concat([a, b])
    assert both.select_capture(1).events["sm"].tolist() == [2]
    with pytest.raises(IndexError, match="capture 2 out of range"):
        both.select_capture(2)
    out = plot(both, tmp_path / "one.png", capture=1)
    assert open(out, "rb").read(8) == b"\x89PNG\r\n\x1a\n"


def _two_launches(emulated: bool = False, gap_ns: int = 10**9, span_ns: int = 900):
    """Two launches `gap_ns` apart, each `span_ns` long: event 0 in the first, 1 in the second."""
    a = build_capture(
        {0: {"sm": 1, "anchor": 10, "records": [("B", 0, 20), ("E", 0, span_ns)]}},
        1,
        event_names={0: "load", 1: "compute"},
        emulated=emulated,
        kernel_name="gemm",
    )
    t1 = gap_ns
    b = build_capture(
        {0: {"sm": 2, "anchor": t1, "records": [("B", 1, t1 + 5), ("E", 1, t1 + span_ns)]}},
        1,
        event_names={0: "load", 1: "compute"},
        emulated=emulated,
        kernel_name="gemm",
    )
    return decode([a, b])


def test_every_launch_gets_a_panel_from_its_own_start(tmp_path):
    need("matplotlib", "plot")
    from sm_profiler.export.plot import figure

    trace = _two_launches()
    fig = figure(trace)
    panels = [ax for ax in fig.axes if ax.get_ylabel() == "SM"]
    assert [ax.get_title(loc="left") for ax in panels] == [
        "gemm (launch 0) · 1 block · span 890 ns",
        "gemm (launch 1) · 1 block · span 900 ns",
    ]
    # Each panel starts at its launch: the second second of host time is not drawn.
    assert [ax.get_xlim() for ax in panels] == [(0.0, 890.0), (0.0, 900.0)]
    assert panels[-1].get_xlabel() == "time from each launch's start (ns)"
    # Both launches are drawn wide, not as slivers 1 s apart: plenty of each colour.
    path = tmp_path / "two.png"
    plot(trace, path, colors={"load": "#ff0000", "compute": "#0000ff"})
    img = _pixels(path)
    assert _has_colour(img, (255, 0, 0), min_pixels=5000)
    assert _has_colour(img, (0, 0, 255), min_pixels=5000)


@pytest.mark.parametrize(
    "span_ns, unit, x_max",
    [(900, "ns", 890.0), (50_000, "µs", 49.99), (3_000_000, "ms", 2.99999), (2 * 10**9, "s", 2.0)],
)
def test_the_time_unit_follows_the_span(span_ns, unit, x_max):
    need("matplotlib", "plot")
    from sm_profiler.export.plot import figure

    fig = figure(_two_launches(span_ns=span_ns, gap_ns=10 * span_ns), capture=0)
    (ax,) = [ax for ax in fig.axes if ax.get_ylabel() == "SM"]
    assert ax.get_xlabel() == f"time from kernel start ({unit})"
    assert ax.get_xlim()[1] == pytest.approx(x_max, rel=1e-3)


@pytest.mark.parametrize("title", [None, "my kernels"])
def test_an_emulated_trace_keeps_its_marker_with_any_title(title):
    need("matplotlib", "plot")
    from sm_profiler.export.plot import figure

    for trace, emulated in ((_two_launches(emulated=True), True), (_two_launches(), False)):
        for cap in (None, 0):
            fig = figure(trace, title=title, capture=cap)
            heading = fig.get_suptitle() if cap is None else fig.axes[0].get_title()
            start = title or "SM occupancy: gemm"
            assert heading.startswith(start)
            assert heading.endswith("(emulated: host clock, SM ids emulated)") == emulated


def test_an_unknown_picture_extension_is_a_config_error_naming_the_formats(tmp_path):
    # Like export: a ConfigError that lists the formats, not matplotlib's bare ValueError after
    # the figure was drawn; nothing is written.
    need("matplotlib", "plot")
    from sm_profiler import ConfigError

    trace = decode(tiny_capture())
    with pytest.raises(ConfigError, match=r"extension \.xyz; use one of .*\.png.*\.svg"):
        plot(trace, tmp_path / "a.xyz")
    assert not (tmp_path / "a.xyz").exists()
    assert plot(trace, tmp_path / "a.svg").endswith("a.svg")  # the extension still decides
