"""Reading exported traces back, the way the tools that open them do, to check what they mean.

- `read_trace`: a Perfetto file replayed as trace processor reads it (incremental clock 64 reset
  by each ClockSnapshot, TracePacketDefaults giving the track, events sorted by (timestamp, file
  order), SLICE_END closing the innermost open slice of its track), into a `Read`; with
  torch's rows of a merged trace (their own sequence: torch_perfetto.py), their args,
  categories and flow arrows as trace processor's flow tracker draws them;
- `read_perfetto`: a Perfetto file's process names, thread names and slice counts by name;
- `slices_by_sm`: a `Read`'s slices grouped by SM track;
- `expected_slices`: what a decoded trace says one lane's slices are, to compare with a `Read`;
- `ui_import`: a Chrome JSON file's slices as the Perfetto UI's JSON importer keeps them, and
  what it drops (`UiImport.stats`, named as its "Info and stats" page names them).

Perfetto's protos are imported when a file is read: tests that read skip without them
(`pytest.importorskip("perfetto.protos.perfetto.trace.perfetto_trace_pb2")`).
"""

from __future__ import annotations

import gzip
import json
import math
import re
from collections import Counter, defaultdict

from sm_profiler.export import perfetto as pf
from sm_profiler.export.torch_perfetto import TORCH_SEQ


def has_perfetto() -> bool:
    """Whether Perfetto's protos can be imported (the test extra)."""
    try:
        _pb2()
    except ImportError:
        return False
    return True


def _pb2():
    from perfetto.protos.perfetto.trace import perfetto_trace_pb2

    return perfetto_trace_pb2


class Read:
    def __init__(self):
        self.tracks = {}  # uuid -> TrackDescriptor
        self.slices = defaultdict(list)  # uuid -> [(name, ts, dur)]
        self.instants = defaultdict(list)  # uuid -> [(name, ts)]
        self.counters = defaultdict(list)  # uuid -> [(ts, value)]
        self.snapshots = []
        self.written_names = {}  # uuid -> name as written (SM names are padded to sort)
        self.origin = None  # %globaltimer ns of time 0, from the root's description
        self.window = {}  # service event (tracing_started, tracing_disabled) -> time_ns
        # torch's rows (torch_perfetto.TORCH_SEQ), by (track uuid, name, begin ns) of a slice:
        self.args = {}  # its debug annotations {name: value}
        self.categories = {}  # its category
        self.flows = []  # (from, to): arrows as trace processor draws them, in its order

    def thread(self, name: str):
        """The lane (or overlap) track named `name`."""
        (d,) = [d for d in self.threads() if d.name == name]
        return d

    def threads(self):
        """Lane tracks (children of an SM track, not its counter) and their overlap tracks,
        in rank order under each parent."""
        sms = {d.uuid for d in self.processes()}
        lanes = [
            d for d in self.tracks.values() if d.parent_uuid in sms and not d.HasField("counter")
        ]
        ids = {d.uuid for d in lanes}
        lanes += [d for d in self.tracks.values() if d.parent_uuid in ids]
        return sorted(
            lanes, key=lambda d: (d.parent_uuid in ids, d.parent_uuid, d.sibling_order_rank)
        )

    def processes(self):
        """SM tracks: top-level tracks whose name names an SM, in the UI's order (by the name as
        written: SQLite's binary order), named as the UI titles them (runs of spaces collapsed)."""
        sms = [
            d
            for d in self.tracks.values()
            if not d.HasField("parent_uuid")
            and (d.name.startswith("SM ") or d.name.startswith("unknown SM"))
        ]
        return sorted(sms, key=lambda d: self.written_names[d.uuid].encode())

    def top_level(self):
        """Top-level tracks (roots and SMs) in the UI's order, by the name as written (SQLite's
        binary order), named as the UI titles them (runs of spaces collapsed)."""
        tops = [d for d in self.tracks.values() if not d.HasField("parent_uuid")]
        return sorted(tops, key=lambda d: self.written_names[d.uuid].encode())

    def launches(self):
        """{name: slices} of the launch tracks (children of the root)."""
        return {
            d.name: self.slices[d.uuid]
            for d in self.tracks.values()
            if d.parent_uuid == pf.ROOT_UUID
        }

    def occupancy(self):
        """{SM name: its 'resident blocks' counter}: each SM track is that counter."""
        return {d.name: self.counters[d.uuid] for d in self.processes()}


def read_trace(data: bytes) -> Read:
    pb2 = _pb2()
    trace = pb2.Trace()
    trace.ParseFromString(data)
    r = Read()
    names, clock, track = {}, None, None
    raw = []
    torch = _TorchSequence()
    for i, p in enumerate(trace.packet):
        if p.HasField("service_event"):  # the window the UI opens on, on a sequence of its own
            assert p.trusted_packet_sequence_id == pf.SEQ_ID + 1
            ((field, _),) = p.service_event.ListFields()
            r.window[field.name] = p.timestamp
            continue
        if p.trusted_packet_sequence_id == TORCH_SEQ:
            torch.read(p, i, r, raw)
            continue
        assert p.trusted_packet_sequence_id == pf.SEQ_ID
        if p.sequence_flags & 1:  # SEQ_INCREMENTAL_STATE_CLEARED: names interned anew (a rank)
            names = {}
        for n in p.interned_data.event_names:
            assert names.get(n.iid, n.name) == n.name
            names[n.iid] = n.name
        if p.HasField("clock_snapshot"):
            clocks = {c.clock_id: c for c in p.clock_snapshot.clocks}
            assert clocks[64].is_incremental and clocks[6].timestamp == clocks[64].timestamp
            clock = clocks[64].timestamp
            r.snapshots.append(clock)
            continue
        if p.HasField("trace_packet_defaults"):
            assert p.trace_packet_defaults.timestamp_clock_id == 64
            track = p.trace_packet_defaults.track_event_defaults.track_uuid
        if p.HasField("track_descriptor"):
            _descriptor(r, p.track_descriptor)
        if p.HasField("track_event"):
            clock += p.timestamp
            assert track in r.tracks
            e = p.track_event  # its name as interned now (a rank of several interns anew)
            raw.append((clock, i, track, e, names.get(e.name_iid) if e.name_iid else None))
    for (track, name, ts), args, cats in torch.pending:
        key = (track, name, ts + r.origin)
        r.args[key] = args
        r.categories[key] = [torch.tables["event_categories"][c] for c in cats]
    raw.sort(key=lambda x: (x[0], x[1]))  # trace processor: by timestamp, then file order
    raw = [(ts + r.origin, *rest) for ts, *rest in raw]  # times are written from the origin
    stacks = defaultdict(list)
    flows = {}  # flow id -> the slice it was last on
    for ts, _, track, e, name in raw:
        if e.type == pf.SLICE_BEGIN:
            stacks[track].append((name, ts))
            _flows(r, flows, e, (track, name, ts))
        elif e.type == pf.SLICE_END:
            name, t = stacks[track].pop()
            r.slices[track].append((name, t, ts - t))
        elif e.type == pf.TYPE_INSTANT:
            r.instants[track].append((name, ts))
        else:
            v = e.double_counter_value if e.HasField("double_counter_value") else e.counter_value
            r.counters[track].append((ts, v))
    assert not any(stacks.values()), "slices left open"
    return r


def _descriptor(r: Read, d) -> None:
    assert d.uuid not in r.tracks
    r.written_names[d.uuid] = d.name
    d.name = " ".join(d.name.split(" ")[:1] + [w for w in d.name.split(" ")[1:] if w])
    r.tracks[d.uuid] = d
    origin = re.search(r"(?:%globaltimer|host clock) (\d+) ns", d.description)
    if not d.HasField("parent_uuid") and origin:  # a root
        r.origin = int(origin.group(1))


def _flows(r: Read, flows: dict, e, key) -> None:
    """The arrows a slice's begin adds, as trace processor's flow tracker makes them: from the
    slice each id was last on to this one (terminating ids end there)."""
    for fid in e.flow_ids:
        if fid in flows:
            r.flows.append((flows[fid], key))
        flows[fid] = key
    for fid in e.terminating_flow_ids:
        if fid in flows:
            r.flows.append((flows.pop(fid), key))


class _TorchSequence:
    """torch's packets of a merged trace (torch_perfetto): names interned at the sequence's
    start, times on the trace clock (ns from the origin), each event naming its track."""

    def __init__(self):
        self.tables = defaultdict(dict)
        self.pending = []  # (slice or instant key, its args, its categories' iids)

    def read(self, p, i: int, r: Read, raw: list) -> None:
        if p.sequence_flags & 1:
            self.tables.clear()
        for table in ("event_names", "event_categories", "debug_annotation_names"):
            for n in getattr(p.interned_data, table):
                self.tables[table][n.iid] = n.name
        for n in p.interned_data.debug_annotation_string_values:
            self.tables["strings"][n.iid] = n.str.decode()
        if p.HasField("track_descriptor"):
            _descriptor(r, p.track_descriptor)
        if not p.HasField("track_event"):
            return
        e = p.track_event
        assert e.track_uuid in r.tracks
        name = self.tables["event_names"].get(e.name_iid) if e.name_iid else None
        raw.append((p.timestamp, i, e.track_uuid, e, name))
        if e.type in (pf.SLICE_BEGIN, pf.TYPE_INSTANT):
            key = (e.track_uuid, name, p.timestamp)  # the origin added below, in read_trace
            self.pending.append((key, self._args(e), list(e.category_iids)))

    def _args(self, e) -> dict:
        out = {}
        names, strings = self.tables["debug_annotation_names"], self.tables["strings"]
        for a in e.debug_annotations:
            kind = a.WhichOneof("value")
            value = strings[a.string_value_iid] if kind == "string_value_iid" else getattr(a, kind)
            out[names[a.name_iid]] = value
        return out


def expected_slices(trace, lane: int, capture: int = 0):
    ev = trace.events
    m = (ev["lane"] == lane) & (ev["capture"] == capture) & (ev["kind"] == 0)
    return Counter(
        (trace.event_name(e), int(s), int(t - s))
        for e, s, t in zip(ev["event"][m], ev["start_ns"][m], ev["end_ns"][m], strict=True)
    )


def read_perfetto(path) -> dict:
    """Process names, thread names and slice counts by name, read with Perfetto's own protos."""
    pb2 = _pb2()
    trace = pb2.Trace()
    with open(path, "rb") as f:
        trace.ParseFromString(f.read())
    names, tracks, slices = {}, [], Counter()
    for p in trace.packet:
        for n in p.interned_data.event_names:
            names[n.iid] = n.name
        if p.HasField("track_descriptor"):
            tracks.append(p.track_descriptor)
        if p.HasField("track_event") and p.track_event.type == pb2.TrackEvent.TYPE_SLICE_BEGIN:
            ev = p.track_event
            slices[names[ev.name_iid] if ev.name_iid else ev.name] += 1
    # SM tracks are top-level, each its occupancy counter, ordered by name as written (padded
    # to sort in SM order; the UI shows 'SM 8'); lane tracks sit under an SM track.
    sm = {
        d.uuid: " ".join(d.name.split())
        for d in tracks
        if not d.HasField("parent_uuid") and d.name.startswith("SM ")
    }
    processes = [sm[d.uuid] for d in sorted(tracks, key=lambda d: d.name.encode()) if d.uuid in sm]
    threads = [d.name for d in tracks if d.parent_uuid in sm and not d.HasField("counter")]
    return {"processes": processes, "threads": threads, "slices": slices}


def slices_by_sm(r):
    """{SM track name: Counter of (lane name, slice)} of a read trace."""
    out = {}
    for d in r.threads():
        parent = r.tracks[d.parent_uuid]
        while parent.name not in {p.name for p in r.processes()}:
            parent = r.tracks[parent.parent_uuid]
        out.setdefault(parent.name, Counter()).update((d.name, s) for s in r.slices[d.uuid])
    return out


# -- Chrome JSON as the Perfetto UI imports it -------------------------------------------------


def ui_double(text: str) -> float:
    """A JSON number with a fraction or an exponent as Perfetto's JSON importer reads it
    (trace_processor/importers/json/json_parser.h, StringToDouble): the integer digits summed in
    a double, plus the fraction's digits (a double) over their power of ten, then scaled by
    pow(10, exponent). Not correctly rounded, hence emulated rather than float(text)."""
    m = re.fullmatch(r"(-?)(\d*)(?:\.(\d*))?(?:[eE]([+-]?)(\d+))?", text)
    sign, whole, frac, exp_sign, exp = m.groups()
    out = 0.0
    for c in whole:
        out = out * 10.0 + int(c)
    if frac:
        f, div = 0.0, 1.0
        for c in frac:
            f, div = f * 10.0 + int(c), div * 10.0
        out += f / div
    if exp is not None:
        e = 0.0
        for c in exp:
            e = e * 10 + int(c)
        out = out / math.pow(10.0, e) if exp_sign == "-" else out * math.pow(10.0, e)
    return -out if sign else out


def ui_ns(value) -> int | None:
    """A ts or dur (µs) as the importer turns it into ns (json_trace_tokenizer.cc, CoerceToTs):
    an integer times 1000, a double by llround(value * 1000.0); None where it is no number."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, int):
        return value * 1000
    x = value * 1000.0
    f = math.floor(x)
    r = x - f  # exact for x >= 0 (Sterbenz); a negative time is dropped anyway
    return f + 1 if r > 0.5 or (r == 0.5 and x > 0) else f  # llround: ties away from zero


class UiImport:
    """What the Perfetto UI's JSON importer makes of a Chrome JSON file: `slices` {(pid, tid):
    [(name, ts_ns, dur_ns)] kept, in import order}; `dropped` [(pid, tid, name, ts_ns,
    dur_ns, why)]; `stats` Counter of what it drops, by the UI's stat names."""

    def __init__(self):
        self.slices = defaultdict(list)
        self.dropped = []
        self.stats = Counter()

    def complete_events(self) -> int:
        return sum(len(v) for v in self.slices.values())


def ui_import(data) -> UiImport:
    """The Perfetto UI's import of Chrome JSON `data` (its text or bytes, gzip'd or not, a path,
    or a document as its writer encodes it),
    as far as it decides which slices are kept (trace processor's json tokenizer, trace sorter
    and slice tracker):
      * numbers parsed as ui_double, times as ui_ns;
      * an event with a negative ts is dropped (trace_sorter_negative_timestamp_dropped);
      * events sorted by ts, ties in file order;
      * per thread track (pid, tid; a tid 0 is the pid's main thread), complete events ("X")
        and thread-scoped instants ("i"/"I", a slice of dur 0) on one stack: slices that end
        before the new one begins (or at it, unless both are instants) are popped; a new slice
        that begins inside an open one and ends after it is dropped
        (slice_drop_overlapping_complete_event); a negative dur is dropped
        (slice_negative_duration)."""
    if isinstance(data, dict):  # a document as a writer would encode it
        raw = json.dumps(data, separators=(",", ":"), ensure_ascii=False).encode()
    elif isinstance(data, bytes):
        raw = data
    elif isinstance(data, str) and data.lstrip()[:1] in ("{", "["):
        raw = data.encode()
    else:
        with open(data, "rb") as f:
            raw = f.read()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    doc = json.loads(raw, parse_float=ui_double)
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    out = UiImport()
    timed = []
    for i, e in enumerate(events):
        ts = ui_ns(e.get("ts"))
        if ts is None:
            continue
        if ts < 0:
            out.stats["trace_sorter_negative_timestamp_dropped"] += 1
            continue
        timed.append((ts, i, e))
    timed.sort(key=lambda x: (x[0], x[1]))
    stacks = defaultdict(list)
    for ts, _, e in timed:
        ph = e.get("ph")
        if ph == "X":
            dur = ui_ns(e.get("dur", 0))
        elif ph in ("i", "I") and e.get("s", "t") == "t":
            dur = 0
        else:
            continue
        pid, tid = e.get("pid"), e.get("tid")
        track = (pid, pid if tid == 0 and pid != 0 else tid)
        why = (
            "slice_negative_duration"
            if dur is None or dur < 0
            else _ui_push(stacks[track], ts, dur)
        )
        if why:
            out.stats[why] += 1
            out.dropped.append((*track, e.get("name"), ts, dur, why))
        elif ph == "X":
            out.slices[track].append((e.get("name"), ts, dur))
    return out


def _ui_push(stack: list, ts: int, dur: int) -> str | None:
    """The slice tracker's MaybeCloseStack, then the push: None where (ts, dur) is kept."""
    for i in range(len(stack) - 1, -1, -1):
        start, d = stack[i]
        end = start + d
        if end < ts or (end == ts and not (d == 0 and dur == 0)):
            stack.pop()  # the importer pops the top of the stack (StackPop)
            continue
        if ts < end < ts + dur:
            return "slice_drop_overlapping_complete_event"
    stack.append((ts, dur))
    return None
