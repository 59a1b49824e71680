"""TraceData (sm_profiler/trace/model.py): concat renumbers conflicting event names."""

from __future__ import annotations

from reference_encoder import BEGIN, INSTANT, Lane, Stream, encode

from sm_profiler.trace.decode import decode
from sm_profiler.trace.model import TraceData
from sm_profiler.wire.capture import Capture


def _trace(names: dict[int, str], events: list[int]) -> TraceData:
    recs = [(INSTANT, e, 10 + i) for i, e in enumerate(events)]
    stream = Stream(1, 1, max(1, len(recs)), {(0, 0): Lane(5, 0, recs)})
    return decode(Capture(words=encode(stream), event_names=names))


def _named_events(trace: TraceData) -> list[str]:
    return [trace.event_name(e) for e in trace.events["event"]]


def test_concat_keeps_agreeing_names_and_renumbers_conflicts():
    a = _trace({0: "load", 1: "mma"}, [0, 1])
    b = _trace({0: "store", 1: "mma"}, [0, 1])
    out = TraceData.concat([a, b])
    assert _named_events(out) == ["load", "mma", "store", "mma"]
    assert out.event_names[0] == "load" and out.event_names[1] == "mma"
    assert len(set(out.event_names.values())) == len(out.event_names)


def test_concat_moves_a_known_name_onto_its_existing_id():
    a = _trace({0: "load"}, [0])
    b = _trace({3: "load", 0: "mma"}, [3, 0])
    out = TraceData.concat([a, b])
    assert _named_events(out) == ["load", "load", "mma"]
    assert out.events["event"].tolist()[:2] == [0, 0]
    assert sorted(out.event_names.values()) == ["load", "mma"]


def test_concat_does_not_name_an_earlier_parts_unnamed_id():
    a = _trace({}, [2])  # id 2 used, never named
    b = _trace({2: "mma"}, [2])
    out = TraceData.concat([a, b])
    assert _named_events(out) == ["event 2", "mma"]
    assert out.events["event"].tolist()[0] == 2 and out.events["event"].tolist()[1] != 2


def test_concat_renumbers_unmatched_records_too():
    a = _trace({0: "load"}, [0])
    recs = [(BEGIN, 0, 10)]
    b = decode(
        Capture(words=encode(Stream(1, 1, 1, {(0, 0): Lane(5, 0, recs)})), event_names={0: "x"})
    )
    out = TraceData.concat([a, b])
    assert out.event_name(out.unmatched["event"][0]) == "x"
    assert out.unmatched["capture"].tolist() == [1]
