"""The timeline model decides the layout every writer serialises: overlap levels, launch tracks,
drop marks; the writers take a Timeline and refuse anything else with the fix."""

from __future__ import annotations

import pytest
from reference_encoder import BEGIN, END, Lane, Stream, encode

from sm_profiler.capture import Capture
from sm_profiler.decode import decode
from sm_profiler.errors import ConfigError
from sm_profiler.export import chrome, perfetto, timeline, to_chrome_json, to_perfetto_bytes
from sm_profiler.timeline import order_rows

T0 = 1_700_000_000_000_000_000
GAP_NS = 10**9  # between the launches: far more than a cut keeps


def _launch(t0: int, overlap: bool) -> Capture:
    """Two blocks; with `overlap`, block 0's ranges 1 and 2 partially overlap (an overlap track)."""
    recs = [(BEGIN, 1, t0 + 10), (BEGIN, 2, t0 + 20), (END, 1, t0 + 30), (END, 2, t0 + 40)]
    if not overlap:
        recs = [(BEGIN, 1, t0 + 10), (END, 1, t0 + 30)]
    s = Stream(2, 1, 8, {(0, 0): Lane(t0, 3, recs),
                         (1, 0): Lane(t0 + 5, 4, [(BEGIN, 1, t0 + 6), (END, 1, t0 + 50)])})  # fmt: skip
    return Capture(encode(s), event_names={1: "load", 2: "mma"}, kernel_name="k")


def _trace():
    return decode([_launch(T0, True), _launch(T0 + GAP_NS, False)])


@pytest.mark.parametrize("writer", [perfetto.to_perfetto_bytes, chrome.to_chrome_json])
def test_writers_take_a_timeline_and_refuse_trace_data_with_the_fix(writer):
    trace = _trace()
    with pytest.raises(ConfigError, match=r"takes a Timeline, not a TraceData: call "
                       r"sm_profiler\.export\.to_"):  # fmt: skip
        writer(trace)
    # Given the timeline the facade builds, the writer writes what the facade writes.
    tl = timeline(trace, cut_gaps=True)
    got = writer(tl)
    want = (to_perfetto_bytes if writer is perfetto.to_perfetto_bytes else to_chrome_json)(
        trace, cut_gaps=True
    )
    assert got == want


def test_event_levels_are_order_rows_levels():
    tl = timeline(_trace())
    ev = tl.trace.events
    levels = tl.event_levels()
    want = order_rows(ev["start_ns"], ev["end_ns"], ev["kind"] == 0, tl.ev_lane, tl.lane_lo,
                      ev["event"])["level"]  # fmt: skip
    assert levels.tolist() == want.tolist()
    assert levels.max() == 1  # the partial overlap went up one level
    # The Chrome writer puts that range on the lane's '(overlap)' thread.
    doc = to_chrome_json(_trace())
    names = {e["args"]["name"] for e in doc["traceEvents"] if e["name"] == "thread_name"}
    assert any(n.endswith("(overlap)") for n in names)


@pytest.mark.parametrize("pack", [False, True])
def test_launch_tracks_carry_the_cut_marks_in_both_writers(pack):
    trace = _trace()
    tl = timeline(trace, cut_gaps=True, pack=pack)
    tracks = tl.launch_tracks()
    if pack:  # the launches do not overlap: they share one track
        assert [(name, rows.tolist()) for name, rows in tracks] == [("launches", [0, 1])]
    else:
        assert [rows.tolist() for _, rows in tracks] == [[0], [1]]
    cut = tl.cut_name(1)
    assert tl.cut_name(0) is None and cut is not None and cut.startswith("host gap cut: ")
    doc = to_chrome_json(trace, cut_gaps=True, pack=pack)
    assert [e["name"] for e in doc["traceEvents"] if e["name"].startswith("host gap")] == [cut]
    assert to_perfetto_bytes(trace, cut_gaps=True, pack=pack).count(cut.encode()) == 1


def test_drop_marks_are_decided_once_and_both_writers_show_them():
    # Six records into a lane of four: two dropped, marked at the lane's last kept time.
    recs = [(BEGIN, 1, T0 + 10 * i) if i % 2 == 0 else (END, 1, T0 + 10 * i) for i in range(6)]
    s = Stream(1, 1, 4, {(0, 0): Lane(T0, 3, recs)})
    trace = decode(Capture(encode(s), event_names={1: "load"}, kernel_name="k"))
    tl = timeline(trace)
    lanes, at, labels = tl.drop_marks()
    assert lanes.tolist() == [0] and at.tolist() == [T0 + 30]
    assert labels == ["2 records dropped (lane full)"]
    doc = to_chrome_json(trace)
    assert [e["name"] for e in doc["traceEvents"] if "dropped" in e["name"]] == labels
    assert to_perfetto_bytes(trace).count(labels[0].encode()) == 1


def test_no_launch_left_means_no_launch_track():
    tl = timeline(_trace(), sms=[99])  # no lane ran there
    assert tl.launch_tracks() == [] and len(tl.launches["capture"]) == 0
    assert len(to_perfetto_bytes(_trace(), sms=[99])) > 0
