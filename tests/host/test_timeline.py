"""The timeline (sm_profiler/trace/timeline.py), every layout decision the writers serialise: SMs in id
order and lanes in block-then-group order, host gaps cut, one capture alone, the first screen,
and the filters (SMs, blocks, groups, events, a time window), read back from the Perfetto file
the way trace processor reads it (tests/support/trace_readers.py)."""

from __future__ import annotations

import numpy as np
import pytest
from captures import T0, capture, kernel_capture, synthetic_trace
from reference_encoder import BEGIN, END, Lane, Stream, encode
from trace_readers import has_perfetto, read_trace, slices_by_sm

from sm_profiler.errors import ConfigError
from sm_profiler.export import chrome, export, perfetto, to_chrome_json, to_perfetto_bytes
from sm_profiler.export import perfetto as pf
from sm_profiler.export import timeline as build_timeline
from sm_profiler.trace import timeline
from sm_profiler.trace.decode import decode
from sm_profiler.trace.model import RANGE
from sm_profiler.trace.timeline import order_rows
from sm_profiler.wire.capture import Capture

# Perfetto's protos read the files back (the test extra); the API checks run without them.
needs_perfetto = pytest.mark.skipif(not has_perfetto(), reason="needs perfetto (the test extra)")


# -- order and options -------------------------------------------------------------------------


@needs_perfetto
def test_sms_are_in_id_order_and_lanes_in_block_then_group_order():
    lanes = {}
    for blk, sm in enumerate([112, 8, 22, 113, 8, 124]):
        for grp in range(2):
            lanes[(blk, grp)] = (T0 + blk, sm, [(BEGIN, 0, 10 + blk), (END, 0, 20 + blk)])
    trace = decode(capture(lanes, num_blocks=6, num_groups=2, groups={1: "consumer"}))
    r = read_trace(to_perfetto_bytes(trace))
    assert [d.name for d in r.processes()] == ["SM 8", "SM 22", "SM 112", "SM 113", "SM 124"]
    sm8 = next(d.uuid for d in r.processes() if d.name == "SM 8")
    kids = sorted(
        (d for d in r.tracks.values() if d.parent_uuid == sm8), key=lambda d: d.sibling_order_rank
    )
    assert [d.name for d in kids] == [
        "block 1 · group 0",
        "block 1 · consumer",
        "block 4 · group 0",
        "block 4 · consumer",
    ]
    ranks = [d.sibling_order_rank for d in kids]
    assert len(set(ranks)) == len(ranks)
    # No stray numbers: names are exactly the timeline's, with no pid or tid to append.
    assert all(d.sibling_merge_behavior == pf.MERGE_NONE for d in kids)
    # Written padded, so that the UI's sort by name is SM order; shown as 'SM 8'.
    assert [r.written_names[d.uuid] for d in r.processes()][:2] == ["SM   8", "SM  22"]


def three_launches(gap_ns=50_000_000):
    parts = []
    for i in range(3):
        t = T0 + i * gap_ns
        lanes = {(0, 0): (t, 3, [(BEGIN, 0, i * gap_ns + 10), (END, 0, i * gap_ns + 1010)])}
        parts.append(capture(lanes, num_blocks=1, num_groups=1, name="gemm"))
    return decode(parts)


@needs_perfetto
def test_cut_gaps_lays_launches_end_to_end_and_marks_the_cuts():
    trace = three_launches()
    whole = read_trace(to_perfetto_bytes(trace))
    cut = read_trace(to_perfetto_bytes(trace, cut_gaps=True))
    spans = [cut.launches()[f"gemm (launch {i})"][0] for i in range(3)]
    assert [s[2] for s in spans] == [1010, 1010, 1010]  # launches keep their lengths
    gaps = [b[1] - (a[1] + a[2]) for a, b in zip(spans, spans[1:], strict=False)]
    assert gaps == [timeline.GAP_KEPT_MIN_NS] * 2
    marks = [n for u, ins in cut.instants.items() for n, _ in ins if n.startswith("host gap")]
    assert marks == ["host gap cut: 49.998 ms"] * 2  # 50 ms - 1010 ns span - 1 µs kept
    # Ranges keep their durations; only their start moves.
    slices = sorted(s for d in cut.threads() for s in cut.slices[d.uuid])
    assert [s[2] for s in slices] == [1000] * 3
    assert slices[1][1] - slices[0][1] == 1010 + timeline.GAP_KEPT_MIN_NS
    assert len(whole.launches()) == 3 and not any(
        n.startswith("host gap") for ins in whole.instants.values() for n, _ in ins
    )


def launches_apart(gaps_ns: list[int], origin_ns: int):
    """1 µs launches of one program, the first at `origin_ns` (its lane's anchor 1 ns later: an
    anchor of 0 is a lane never initialised), each next `gaps_ns[i]` after the one before ends."""
    parts, t = [], origin_ns
    for gap in [0, *gaps_ns]:
        t += gap
        lane = Lane(t + 1, 3, [(BEGIN, 0, t + 10), (END, 0, t + 1010)])
        stream = Stream(1, 1, 4, lanes={(0, 0): lane})
        parts.append(Capture(encode(stream), event_names={0: "load"}, kernel_name="gemm"))
        t += 1010
    return decode(parts)


@pytest.mark.parametrize("origin_ns", [0, 10**12, 17 * 10**17])
@pytest.mark.parametrize(
    "gaps_ns, note",
    [
        ([50_000_000, 50_000_000], "host gaps cut: 2 gaps, 99.998 ms in all; "),
        ([50_000_000], "host gaps cut: 1 gap, 49.999 ms in all; "),
        # a gap under CUT_FACTOR times what a cut keeps stays: said, and not counted as cut
        (
            [50_000_000, 3_000],
            "host gaps cut: 1 of 2 gaps (gaps up to 4.00 µs kept), 49.999 ms in all; ",
        ),
    ],
)
def test_7_the_cut_note_counts_the_gaps_cut_of_those_between_launches(gaps_ns, note, origin_ns):
    """Issue 56, item 7: the demo's three launches said 'host gaps cut: 1 gaps': one of its two
    gaps was cut (the other is short beside its launches, and kept), in the wrong number."""
    notes = build_timeline(launches_apart(gaps_ns, origin_ns), cut_gaps=True).notes
    (cut,) = [n for n in notes if n.startswith("host gaps cut")]
    assert cut.startswith(note)


@needs_perfetto
def test_one_capture_exports_alone(tmp_path):
    trace = three_launches()
    r = read_trace(to_perfetto_bytes(trace, capture=1))
    assert list(r.launches()) == ["gemm"]
    (d,) = r.threads()
    assert r.slices[d.uuid] == [("load", T0 + 50_000_000 + 10, 1000)]
    with pytest.raises(ConfigError, match=r"3 captures \(0\.\.2\)"):
        export(trace, tmp_path / "t.pftrace", capture=3)
    assert not (tmp_path / "t.pftrace").exists()


@needs_perfetto
def test_the_first_screen_busy_sms_times_from_the_start_and_the_longest_launch_in_view():
    trace = decode(
        [
            capture(
                {
                    (0, 0): (T0, 4, [(BEGIN, 0, 10), (END, 0, 100)]),
                    (1, 0): (T0 + 50, 9, [(BEGIN, 0, 60), (END, 0, 200)]),
                },
                num_groups=1,
                name="short",
            ),
            capture(
                {(0, 0): (T0 + 10**6, 4, [(BEGIN, 0, 10**6 + 5), (END, 0, 10**6 + 9000)])},
                num_blocks=1,
                num_groups=1,
                name="long",
            ),
        ]
    )
    data = to_perfetto_bytes(trace)
    r = read_trace(data)
    # The root counts the SMs holding a block: SM 4 from T0, SM 9 too from T0+50, ...
    assert r.counters[pf.ROOT_UUID] == [
        (T0, 1),
        (T0 + 50, 2),
        (T0 + 100, 1),
        (T0 + 200, 0),
        (T0 + 10**6, 1),
        (T0 + 10**6 + 9000, 0),
    ]
    assert r.origin == trace.start_ns == T0  # written as 0: the UI's clock starts there
    root = r.tracks[pf.ROOT_UUID]
    assert "long" in root.description.splitlines()[-1]
    # The window the UI opens on: the longest launch ('long'), with a 2 % margin.
    assert r.window == {"tracing_started": 10**6 - 180, "tracing_disabled": 10**6 + 9180}
    assert [d.name for d in r.processes()] == ["SM 4", "SM 9"]
    assert not any(d.HasField("parent_uuid") for d in r.processes())


# -- filters -----------------------------------------------------------------------------------


@needs_perfetto
def test_sm_filters_partition_the_full_export():
    trace = synthetic_trace()
    full = slices_by_sm(read_trace(to_perfetto_bytes(trace, summary=False)))
    sms = sorted(int(n.split()[1]) for n in full)
    parts = {}
    for half in (sms[::2], sms[1::2]):
        parts.update(slices_by_sm(read_trace(to_perfetto_bytes(trace, sms=half, summary=False))))
    assert parts == full


@needs_perfetto
def test_block_group_event_and_window_filters():
    trace = synthetic_trace()
    ev = trace.events
    r = read_trace(
        to_perfetto_bytes(trace, blocks=[0, 1], groups=[2], events=["mma"], summary=False)
    )
    got = sorted(s[1:] for d in r.threads() for s in r.slices[d.uuid])
    m = np.isin(ev["block"], [0, 1]) & (ev["group"] == 2) & (ev["event"] == 1) & (ev["kind"] == 0)
    assert got == sorted(
        zip(ev["start_ns"][m].tolist(), (ev["end_ns"] - ev["start_ns"])[m].tolist(), strict=True)
    )
    assert {d.name.split(" · ")[1] for d in r.threads()} == {"group 2"}
    # A window keeps every range touching it, whole.
    a, b = 2_000, 5_000
    t0 = trace.start_ns
    r = read_trace(to_perfetto_bytes(trace, window_ns=(a, b), summary=False))
    got = sum(len(r.slices[d.uuid]) for d in r.threads())
    m = (ev["kind"] == RANGE) & (ev["end_ns"] >= t0 + a) & (ev["start_ns"] <= t0 + b)
    assert got == int(m.sum()) > 0
    with pytest.raises(ConfigError, match="no event named 'nope'"):
        to_perfetto_bytes(trace, events=["nope"])
    with pytest.raises(ConfigError, match="not an int"):
        to_perfetto_bytes(trace, sms=["3"])


@needs_perfetto
def test_filters_and_one_capture_say_what_they_kept(tmp_path):
    from sm_profiler.export import export

    trace = synthetic_trace()
    sm0 = int(trace.lanes["sm"][0])
    notes = export(trace, tmp_path / "t.json", sms=[sm0], summary=False)
    kept = int(np.isin(trace.lanes["sm"][trace.events["lane"]], [sm0]).sum())
    assert notes == [f"filtered (sms): {kept:,} of {len(trace):,} ranges and instants kept"]
    assert 0 < kept < len(trace)
    assert export(trace, tmp_path / "u.json", summary=False) == []


@pytest.mark.parametrize(
    "args,usage",
    [
        (["--window-us", "inf:1"], True),
        (["--window-us", "nan:1"], True),
        (["--window-us", "0:1e300"], True),
        (["--sms", str(2**70)], True),
        (["--blocks", str(-(2**63) - 1)], True),
        (["--groups", "1," + str(2**31)], True),
        (["--events", "²"], False),
        (["--events", "٣"], False),
        (["--events", str(2**70)], False),
        (["--events", "4096"], False),
    ],
)
def test_8_hostile_export_filters_are_usage_or_one_line_errors(tmp_path, capsys, args, usage):
    from sm_profiler.cli import main
    from sm_profiler.wire.capture import save_many

    save_many([kernel_capture()], tmp_path / "c.smp")
    argv = ["export", str(tmp_path / "c.smp"), str(tmp_path / "t.json"), *args]
    if usage:
        with pytest.raises(SystemExit) as e:
            main(argv)
        assert e.value.code == 2
        assert "usage:" in capsys.readouterr().err
    else:
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.startswith("sm-profiler: error: events filter") and err.count("\n") == 1
    assert not (tmp_path / "t.json").exists()


def test_8_filters_given_to_the_api_are_config_errors():
    from sm_profiler.errors import ConfigError
    from sm_profiler.trace.timeline import build

    trace = decode(kernel_capture())
    for kw in ({"sms": [2**70]}, {"blocks": [2**40]}, {"events": [2**70]}, {"events": [-1]}):
        with pytest.raises(ConfigError):
            build(trace, **kw)


# -- the layout every writer serialises: overlap levels, launch tracks, drop marks --------------

T1 = 1_700_000_000_000_000_000  # an absolute %globaltimer start
GAP_NS = 10**9  # between the launches: far more than a cut keeps


def _launch(t0: int, overlap: bool) -> Capture:
    """Two blocks; with `overlap`, block 0's ranges 1 and 2 partially overlap (an overlap track)."""
    recs = [(BEGIN, 1, t0 + 10), (BEGIN, 2, t0 + 20), (END, 1, t0 + 30), (END, 2, t0 + 40)]
    if not overlap:
        recs = [(BEGIN, 1, t0 + 10), (END, 1, t0 + 30)]
    s = Stream(
        2,
        1,
        8,
        {
            (0, 0): Lane(t0, 3, recs),
            (1, 0): Lane(t0 + 5, 4, [(BEGIN, 1, t0 + 6), (END, 1, t0 + 50)]),
        },
    )
    return Capture(encode(s), event_names={1: "load", 2: "mma"}, kernel_name="k")


def _trace():
    return decode([_launch(T1, True), _launch(T1 + GAP_NS, False)])


@pytest.mark.parametrize("writer", [perfetto.to_perfetto_bytes, chrome.to_chrome_json])
def test_writers_take_a_timeline_and_refuse_trace_data_with_the_fix(writer):
    trace = _trace()
    with pytest.raises(
        ConfigError,
        match=r"takes a Timeline, not a TraceData: call "
        r"sm_profiler\.export\.to_",
    ):
        writer(trace)
    # Given the timeline the facade builds, the writer writes what the facade writes.
    tl = build_timeline(trace, cut_gaps=True)
    got = writer(tl)
    want = (to_perfetto_bytes if writer is perfetto.to_perfetto_bytes else to_chrome_json)(
        trace, cut_gaps=True
    )
    assert got == want


def test_event_levels_are_order_rows_levels():
    tl = build_timeline(_trace())
    ev = tl.trace.events
    levels = tl.event_levels()
    want = order_rows(
        ev["start_ns"], ev["end_ns"], ev["kind"] == 0, tl.ev_lane, tl.lane_lo, ev["event"]
    )["level"]
    assert levels.tolist() == want.tolist()
    assert levels.max() == 1  # the partial overlap went up one level
    # The Chrome writer puts that range on the lane's '(overlap)' thread.
    doc = to_chrome_json(_trace())
    names = {e["args"]["name"] for e in doc["traceEvents"] if e["name"] == "thread_name"}
    assert any(n.endswith("(overlap)") for n in names)


@pytest.mark.parametrize("pack", [False, True])
def test_launch_tracks_carry_the_cut_marks_in_both_writers(pack):
    trace = _trace()
    tl = build_timeline(trace, cut_gaps=True, pack=pack)
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
    recs = [(BEGIN, 1, T1 + 10 * i) if i % 2 == 0 else (END, 1, T1 + 10 * i) for i in range(6)]
    s = Stream(1, 1, 4, {(0, 0): Lane(T1, 3, recs)})
    trace = decode(Capture(encode(s), event_names={1: "load"}, kernel_name="k"))
    tl = build_timeline(trace)
    lanes, at, labels = tl.drop_marks()
    assert lanes.tolist() == [0] and at.tolist() == [T1 + 30]
    assert labels == ["2 records dropped (lane full)"]
    doc = to_chrome_json(trace)
    assert [e["name"] for e in doc["traceEvents"] if "dropped" in e["name"]] == labels
    assert to_perfetto_bytes(trace).count(labels[0].encode()) == 1


def test_no_launch_left_means_no_launch_track():
    tl = build_timeline(_trace(), sms=[3], blocks=[1])  # block 1 ran on SM 4
    assert tl.launch_tracks() == [] and len(tl.launches["capture"]) == 0
    assert len(to_perfetto_bytes(_trace(), sms=[3], blocks=[1])) > 0


@pytest.mark.parametrize(
    "filters, message",
    [
        ({"sms": [99]}, "sms filter: no lane ran on SM 99; the trace's SMs: 3..4"),
        ({"sms": [3, 7, 8]}, "sms filter: no lane ran on SMs 7..8; the trace's SMs: 3..4"),
        ({"blocks": [5]}, "blocks filter: no block 5 in the trace; the trace's blocks: 0..1"),
        ({"groups": [1, 3]}, "groups filter: no groups 1, 3 in the trace; the trace's groups: 0"),
    ],
)
def test_lane_filters_that_match_no_lane_are_errors_like_an_unknown_event(filters, message):
    """Issue 32, item 5: an id no lane has is refused with the ids there are, as an unknown
    event name is; before, it exported an empty trace with a note."""
    with pytest.raises(ConfigError) as e:
        build_timeline(_trace(), **filters)
    assert str(e.value) == message


def test_summary_counters_give_up_per_launch_keys_exactly_past_the_bins_they_allow(monkeypatch):
    """Per (launch, SM, event) counters while there are at most SUMMARY_POINTS // MIN_LAUNCH_BINS
    keys, each SM's counter of all kernels past that; the keys are merged a part at a time, so a
    run of a million one-program launches never holds them all."""
    import numpy as np

    from sm_profiler.trace import timeline

    monkeypatch.setattr(timeline, "SUMMARY_POINTS", 64)
    most = timeline.SUMMARY_POINTS // timeline.MIN_LAUNCH_BINS  # 4 keys

    def run(n_launches):
        cap = np.arange(n_launches, dtype=np.int64)

        def parts():  # one launch a part, each one program on SM 0, event 0
            for c in cap.tolist():
                one = np.array([c], np.int64)
                yield one * 100, one * 100 + 50, one, np.zeros(1, np.int64), np.zeros(1, np.int64)

        return timeline._summary_counters_of(parts, cap * 100, cap * 100 + 50, 1)[1]

    assert run(most).startswith("active ranges per event")
    assert run(most + 1).startswith("each SM's programs of all kernels")


@pytest.mark.parametrize("how", ["plain", "packed", "summarised", "budgeted"])
def test_5_a_timeline_is_made_whole_by_keyword_and_never_changed(how, monkeypatch):
    """Issue 53, item 5: Timeline(...) took 13 positional arguments and build() filled in six
    more fields afterwards (packing and summarising changed it in place). Every field is now
    passed once, by keyword; a built timeline cannot be changed, whichever way it was built."""
    import dataclasses

    from auto_inputs import table_of, two_kernels

    from sm_profiler.trace.timeline import Timeline, build

    if how == "budgeted":  # a long run's default: the first programs, the rest in counters
        monkeypatch.setattr(timeline, "AUTO_DETAIL_ROWS", 4)
    trace = decode(kernel_capture()) if how == "plain" else table_of(two_kernels()).decode()
    options = {"summarised": {"summary": True}}.get(how, {})
    tl = build(trace, **options)
    assert (tl.lane_labels is not None) == (how != "plain")
    assert (tl.summary is not None) == (how in ("summarised", "budgeted"))
    assert (tl.focus_ns is not None) == (how == "budgeted")
    given = {f.name: getattr(tl, f.name) for f in dataclasses.fields(Timeline)}
    with pytest.raises(TypeError):
        Timeline(*given.values())
    assert Timeline(**given).notes == tl.notes
    with pytest.raises(dataclasses.FrozenInstanceError):
        tl.focus = 0
