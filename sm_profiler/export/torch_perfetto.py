"""torch.profiler's trace and our programs as one native Perfetto trace: `merge --torch` to a
.perfetto-trace, and `sm-profiler run --torch`'s auto.torch.perfetto-trace (merge.py decides
the time axis and what is drawn; this module writes it).

Our ranks are written by perfetto.py as a job's trace is (ranks_chunks: per rank a root
'GPU r  · kernels' and its SMs 'GPU r · SM s', in SM order, no pid in any name). torch's rows
(Chrome JSON, as torch.profiler exports them) become track events of their own::

    processes   each a top-level track named as named_processes names it ('CPU · python3
                (pid 531)', 'GPU 0 · CUDA streams'; rank r's of a job 'GPU r · ...', so that they
                sort beside rank r's SMs: the UI orders top-level tracks by name); its counter
                series ('C', one track each) and its threads under it, in torch's order
                (thread_sort_index, else the tid), named as torch named them (its first name)
    slices      'X' rows: SLICE_BEGIN / SLICE_END at their exact ns (chrome.exact_ns of torch's
                µs, moved onto the trace's origin). A slice that only partly overlaps one that
                encloses it on its thread goes to a sibling '(overlap)' track
                (timeline.order_rows, as our lanes' do): no slice is dropped or closed by
                another's end
    instants    'i' / 'I': on their thread ('t', the default), on their process's track ('p',
                'g': Kineto's global instants name a process of their own)
    flows       's' / 't' / 'f' (Kineto's launch -> kernel 'ac2g', forward -> backward
                'fwdbwd'), each bound as the Perfetto UI binds Chrome's: to the innermost slice
                of its thread holding its time (an 'f' without bp 'e': the next slice to begin
                there), written as flow_ids on those slices' begins, the last terminating_flow_ids
    args        debug annotations (numbers, text, booleans; lists and objects as JSON text)
    left out    rows of other phases ('B' / 'E', async 'b' / 'e', ...), rows without a finite
                time, flow ends with no slice to bind to: counted in the roots' description

The kernels we did not record (coverage.unseen_kernels) are slices on 'other kernels (CUPTI)'
tracks under each SM, above its lanes, as the Chrome JSON merge draws them. The trace opens on
the span the caller gives (merge.recorded_steps: torch's ProfilerStep#N rows and our programs),
through the writer's window (perfetto._Writer._window: the tracing_started / tracing_disabled bounds that the UI
opens on; a TracePacket's UiState is not read by the UI for that).

torch's packets are on a sequence of their own (TORCH_SEQ): its names, categories and
annotation names interned once at its start, timestamps on the trace clock (BOOTTIME, which our
sequence's clock snapshots make ns from the origin), track descriptors before any event.
"""

from __future__ import annotations

import json
import math
import struct
from collections import Counter, defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..trace.drawing import LEVELS, Drawing, Focus, order_rows, overlap_name
from ..wire.torch_trace import named_processes
from .chrome import OTHER_KERNELS, earliest_row_ns, exact_ns
from .perfetto import EXPLICIT, MERGE_NONE, rank_writers, ranks_chunks
from .protobuf import SEQ_ID, SLICE_BEGIN, SLICE_END, TYPE_COUNTER, TYPE_INSTANT
from .protobuf import field_bytes as _fb
from .protobuf import field_varint as _fv
from .protobuf import varint as _varint

TORCH_SEQ = SEQ_ID + 2  # ours: SEQ_ID; the window's service events: SEQ_ID + 1
UUIDS_PER_PART = 1 << 40  # rank i's tracks from i << 40, then each torch trace's, the bars'
HOST_CLOCK = "host clock"  # what the merged trace's times are (torch's, CLOCK_REALTIME)
COUNTER_RANK0 = -(1 << 30)  # a process's counters above its threads
# InternedData fields of the tables the torch sequence interns.
EVENT_CATEGORIES, EVENT_NAMES, ANNOTATION_NAMES, ANNOTATION_STRINGS = 1, 2, 3, 29
DRAWN = ("X", "i", "I", "s", "t", "f", "C")  # Chrome JSON phases drawn; 'M' read as names
TAG_FLOW = _varint(47 << 3 | 1)  # TrackEvent.flow_ids, fixed64
TAG_FLOW_END = _varint(48 << 3 | 1)  # TrackEvent.terminating_flow_ids, fixed64
TAG_DOUBLE = _varint(5 << 3 | 1)  # DebugAnnotation.double_value, fixed64
TAG_COUNTER_DOUBLE = _varint(44 << 3 | 1)  # TrackEvent.double_counter_value, fixed64


def write_merged(
    path,
    ranks: list[tuple[int, Drawing]],
    docs: list[tuple[int | None, dict]],
    other: dict | None = None,
    about: Sequence[str] = (),
    focus: Focus | None = None,
) -> None:
    """Write the merged trace to `path` (whole, then renamed): `ranks`' drawings, already on
    torch's time axis; `docs`: torch traces as torch wrote them, each with the rank it is of
    (its tracks named 'GPU r · ...', beside the rank's; None: as named_processes names them);
    `other`: {rank: kernels we did not record} for the SM tracks; `focus`: the span the trace
    opens on (merge.recorded_steps)."""
    from ..paths import atomic_output, check_writable

    check_writable(path)
    merged = Merged(ranks, docs, other or {}, about, focus)
    with atomic_output(path) as tmp, open(tmp, "wb") as f:
        for chunk in merged.chunks():
            f.write(chunk)


class Merged:
    """One merged trace: the ranks' writers, torch's rows of each doc, the unseen kernels'
    slices, the window on the recorded steps."""

    def __init__(self, ranks, docs, other: dict, about: Sequence[str] = (), focus=None):
        self.writers = rank_writers(ranks)
        self.ranks = [r for r, _ in ranks]
        self.other = other
        ours = min((w.origin for w in self.writers), default=None)
        lo = earliest_row_ns(ours, [d for _, d in docs])
        self.origin = 0 if lo is None else lo
        self.names = _Names()
        first = len(self.writers) * UUIDS_PER_PART
        label = {r: w.label for r, w in zip(self.ranks, self.writers, strict=True)}
        self.parts = [
            _TorchDoc(doc, label.get(r), self.origin, first + k * UUIDS_PER_PART, self.names)
            for k, (r, doc) in enumerate(docs)
        ]
        self.focus = focus
        self.about = [*about, *self._left_out()]

    def chunks(self) -> Iterator[bytes]:
        yield from ranks_chunks(self.writers, self.about, self.origin, self.focus, HOST_CLOCK)
        descs, events = [], []
        for part in self.parts:
            d, e = part.packets()
            descs += d
            events += e
        bars = _Bars(self.names, (len(self.writers) + len(self.parts)) * UUIDS_PER_PART)
        for w, r in zip(self.writers, self.ranks, strict=True):
            if r in self.other:
                bars.add(w, self.other[r], self.origin)
        yield self.names.packet()
        yield b"".join(descs + bars.descs)
        yield b"".join(events + bars.events)

    def _left_out(self) -> list[str]:
        lines = []
        for part in self.parts:
            lines += part.left_out()
        return lines


# -- interned names -------------------------------------------------------------------------------


class _Names:
    """The torch sequence's state: its interned strings (event names, categories, annotation
    names) and the flow ids given."""

    def __init__(self):
        self.tables: dict[int, dict[str, int]] = {
            EVENT_NAMES: {},
            EVENT_CATEGORIES: {},
            ANNOTATION_NAMES: {},
            ANNOTATION_STRINGS: {},  # an unseen kernel's args repeat on each of its SMs
        }
        self.flows = 0  # flow ids given: one trace's flows never share one

    def flow_id(self) -> int:
        self.flows += 1
        return self.flows

    def iid(self, table: int, name: str) -> int:
        t = self.tables[table]
        return t.setdefault(name, len(t) + 1)

    def packet(self) -> bytes:
        """The sequence's first packet: its state cleared, every name interned."""
        body = b"".join(
            _fb(table, _fv(1, i) + _fb(2, name))
            for table, names in self.tables.items()
            for name, i in names.items()
        )
        return _packet(_fv(13, 1), _fb(12, body))  # SEQ_INCREMENTAL_STATE_CLEARED


def _packet(*fields: bytes) -> bytes:
    return _fb(1, _fv(10, TORCH_SEQ) + b"".join(fields))


def _event(ts_ns: int, event: bytes) -> bytes:
    return _packet(_fv(8, ts_ns), _fb(11, event))


def _descriptor(
    uuid: int,
    name: str,
    parent: int | None = None,
    rank: int | None = None,
    children: bool = False,
    counter: bool = False,
    description: str = "",
) -> bytes:
    d = _fv(1, uuid) + (_fv(5, parent) if parent is not None else b"") + _fb(2, name)
    d += _fb(14, description) if description else b""
    d += _fb(8, b"") if counter else b""
    d += _fv(11, EXPLICIT) if children else b""
    d += _fv(12, rank) if rank is not None else b""
    return _packet(_fb(60, d + _fv(15, MERGE_NONE)))


def _annotations(names: _Names, args) -> bytes:
    """torch's args as debug annotations: numbers, text and booleans as themselves, anything
    else (lists, objects, numbers past int64, NaN) as its JSON text."""
    if not isinstance(args, dict):
        return b""
    out = []
    for key, v in args.items():
        a = _fv(1, names.iid(ANNOTATION_NAMES, str(key)))
        if isinstance(v, bool):
            a += _fv(2, int(v))
        elif isinstance(v, int) and -(2**63) <= v < 2**63:
            a += _fv(4, v)
        elif isinstance(v, float) and math.isfinite(v):
            a += TAG_DOUBLE + struct.pack("<d", v)
        else:
            if not isinstance(v, str):
                v = json.dumps(v, separators=(",", ":"), ensure_ascii=False, default=str)
            a += _fv(17, names.iid(ANNOTATION_STRINGS, v))  # string_value_iid
        out.append(_fb(4, a))
    return b"".join(out)


def _begin(uuid: int, name_iid: int, cat_iid: int | None, extra: bytes = b"") -> bytes:
    e = _fv(9, SLICE_BEGIN) + _fv(11, uuid) + _fv(10, name_iid)
    return e + (_fv(3, cat_iid) if cat_iid else b"") + extra


def _end(uuid: int) -> bytes:
    return _fv(9, SLICE_END) + _fv(11, uuid)


# -- one torch trace ------------------------------------------------------------------------------


@dataclass
class _Process:
    name: str
    uuid: int = 0
    labels: str = ""
    threads: dict = field(default_factory=dict)  # tid -> _Thread
    counters: dict = field(default_factory=dict)  # (name, key) -> [(ts, value)]
    instants: list = field(default_factory=list)  # (ts, name, cat, args)


@dataclass
class _Thread:
    name: str | None = None
    sort: float | None = None
    lane: int = -1  # its index among the trace's threads with rows


class _TorchDoc:
    """torch's rows of one trace on the merged trace's axis: `origin_ns` is time 0; rows more
    than chrome.MAX_LEAD_NS early (Kineto's rows it had no time for) are put at 0, counted."""

    def __init__(self, doc: dict, label: str | None, origin_ns: int, uuid0: int, names: _Names):
        self.label, self.names = label, names
        self.base = int(doc.get("baseTimeNanoseconds", 0)) - origin_ns
        self.next_uuid = uuid0
        self.skipped: Counter = Counter()  # what was left out, and how many
        self.early = 0  # rows before the origin, put at 0
        self.procs: dict = {}
        self.rows: list = []  # X rows: (process key, tid, start, end, name, cat, args)
        self.marks: list = []  # thread instants: (process key, tid, ts, name, cat, args)
        self.flow_rows: list = []  # (key, phase, process key, tid, ts, bp, order)
        events = named_processes(doc["traceEvents"])
        self._metadata(events)
        for e in events:
            self._row(e)
        self.slices = _Slices(self, self._lanes())  # laid out, flows bound
        self.skipped.update(self.slices.unbound)

    # reading

    def _proc(self, pid) -> _Process:
        if pid not in self.procs:  # named by its pid until torch names it
            self.procs[pid] = _Process(str(pid) or "torch.profiler")
        return self.procs[pid]

    def _thread(self, pid, tid) -> _Thread:
        return self._proc(pid).threads.setdefault(tid, _Thread())

    def _metadata(self, events: list) -> None:
        for e in events:
            if e.get("ph") != "M":
                continue
            args, what = e.get("args") or {}, e.get("name")
            pid, tid = e.get("pid"), e.get("tid")
            if what == "process_name":
                self._proc(pid).name = str(args.get("name", pid))
            elif what == "process_labels":
                self._proc(pid).labels = str(args.get("labels", ""))
            elif what == "thread_name":
                t = self._thread(pid, tid)
                t.name = t.name or str(args.get("name", "")).strip() or None  # its first name
            elif what == "thread_sort_index" and _finite(args.get("sort_index")):
                self._thread(pid, tid).sort = args["sort_index"]

    def _row(self, e: dict) -> None:
        ph = e.get("ph")
        if ph not in DRAWN:
            if ph != "M":
                self.skipped[f"'{ph}' rows, a phase not drawn"] += 1
            return
        t = exact_ns(e.get("ts"))
        dur = exact_ns(e.get("dur")) if ph == "X" else 0
        lacks = _lacks(e, t, dur)
        if lacks:
            self.skipped[f"'{ph}' rows without {lacks}"] += 1
            return
        t += self.base
        if t < 0:  # see MAX_LEAD_NS: at the start, as Kineto put it at its base
            self.early += 1
            t = 0
        pid, tid, name, cat = e.get("pid"), e.get("tid"), str(e.get("name", "")), e.get("cat")
        if ph == "X":
            self._thread(pid, tid)
            self.rows.append((pid, tid, t, t + dur, name, cat, e.get("args")))
        elif ph in ("i", "I"):
            if e.get("s") in ("p", "g"):
                self._proc(pid).instants.append((t, name, cat, e.get("args")))
            else:
                self._thread(pid, tid)
                self.marks.append((pid, tid, t, name, cat, e.get("args")))
        elif ph == "C":
            for k, v in (e.get("args") or {}).items():
                if _finite(v):
                    self._proc(pid).counters.setdefault((name, str(k)), []).append((t, v))
        else:
            key = (str(cat), name, json.dumps(e["id"]))
            order = len(self.flow_rows)
            self.flow_rows.append((key, ph, pid, tid, t, e.get("bp"), order))

    def left_out(self) -> list[str]:
        who = f"{self.label}: " if self.label else ""
        lines = []
        if self.early:
            lines.append(
                f"{who}torch rows more than a day before our programs, put at the trace's start "
                f"({self.early:,}): Kineto writes rows it had no time for at its base"
            )
        if self.skipped:
            what = "; ".join(f"{k} ({n:,})" for k, n in sorted(self.skipped.items()))
            lines.append(f"{who}left out of torch's trace: {what}")
        return lines

    # writing

    def _uuid(self) -> int:
        self.next_uuid += 1
        return self.next_uuid

    def _name(self, p: _Process) -> str:
        return p.name if self.label is None else f"{self.label} · {p.name}"

    def packets(self) -> tuple[list[bytes], list[bytes]]:
        """(track descriptors, events) of this trace's rows."""
        descs, events, slices = [], [], self.slices
        for p in self.procs.values():
            own = [t.lane for t in p.threads.values() if t.lane >= 0]
            if not (own or p.counters or p.instants):
                continue  # a process with nothing drawn (Kineto names every GPU)
            p.uuid = self._uuid()
            descs.append(self._process(p, own, slices, events))
            descs += self._counters(p, events)
            on = p.uuid
            if own and p.instants:  # its track is a counter: its instants on a track beside
                on = self._uuid()
                descs.append(_descriptor(on, "instants", p.uuid, COUNTER_RANK0 - 1))
            for ts, name, cat, args in sorted(p.instants, key=lambda x: x[0]):
                events.append(_event(ts, self._instant(on, name, cat, args)))
        descs += slices.descriptors(self)
        events += slices.events(self)
        return descs, events

    def _process(self, p: _Process, lanes: list[int], slices: _Slices, events: list) -> bytes:
        """The process's track: where it has threads with rows, the number of them inside a row
        at each time, so that its row shows when it ran before it is expanded (as an SM's
        shows its resident blocks)."""
        about = [p.labels] if p.labels else []
        if lanes:
            times, busy = slices.busy(lanes)
            for t, v in zip([0, *times.tolist()], [0, *busy.tolist()], strict=True):
                events.append(_event(t, _fv(9, TYPE_COUNTER) + _fv(11, p.uuid) + _fv(30, v)))
            about.append("its row: how many of its threads (streams) are inside a torch row")
        return _descriptor(
            p.uuid, self._name(p), children=True, counter=bool(lanes), description="\n".join(about)
        )

    def _instant(self, uuid: int, name: str, cat, args) -> bytes:
        n = self.names
        e = _fv(9, TYPE_INSTANT) + _fv(11, uuid) + _fv(10, n.iid(EVENT_NAMES, name))
        if cat is not None:
            e += _fv(3, n.iid(EVENT_CATEGORIES, str(cat)))
        return e + _annotations(n, args)

    def _counters(self, p: _Process, events: list) -> list[bytes]:
        descs = []
        for k, ((name, key), values) in enumerate(sorted(p.counters.items())):
            u = self._uuid()
            descs.append(_descriptor(u, f"{name} {key}", p.uuid, COUNTER_RANK0 + k, counter=True))
            for ts, v in sorted(values, key=lambda x: x[0]):
                te = _fv(9, TYPE_COUNTER) + _fv(11, u) + TAG_COUNTER_DOUBLE
                events.append(_event(ts, te + struct.pack("<d", float(v))))
        return descs

    def _lanes(self) -> list[tuple[object, object]]:
        """(pid, tid) of every thread with rows, in each process's order: lane i is its index."""
        used = {(r[0], r[1]) for r in self.rows} | {(m[0], m[1]) for m in self.marks}
        out = []
        for pid, p in self.procs.items():
            tids = [t for t in p.threads if (pid, t) in used]
            tids.sort(key=lambda t: _thread_order(p.threads[t], t))
            for t in tids:
                p.threads[t].lane = len(out)
                out.append((pid, t))
        return out


def _lacks(e: dict, t: int | None, dur: int | None) -> str | None:
    """What row `e` (its time t and duration as exact ns, None where no finite number) lacks to
    be drawn, or None."""
    if t is None:
        return "a finite ts"
    if dur is None or dur < 0:
        return "a finite duration"
    if e["ph"] in ("s", "t", "f") and "id" not in e:
        return "an id"
    return None


def _thread_order(t: _Thread, tid) -> tuple:
    """A thread's place among its process's: torch's sort index, else its tid."""
    number = tid if _finite(tid) else math.inf
    return (t.sort if t.sort is not None else number, number, str(tid))


def _finite(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


class _Slices:
    """A torch trace's thread rows laid out: 'X' rows and thread instants per thread (lane), at
    timeline.order_rows' levels and in its order, flows bound to their slices."""

    def __init__(self, doc: _TorchDoc, lanes: list):
        self.doc, self.lanes = doc, lanes
        rows = [(*r[:5], r[5], r[6], True) for r in doc.rows]
        rows += [(m[0], m[1], m[2], m[2], m[3], m[4], m[5], False) for m in doc.marks]
        lane_of = {key: i for i, key in enumerate(lanes)}
        # Rows by thread, then start, longest first: at one time a parent begins before its
        # child (order_rows begins equal times in row order, and ends them innermost first).
        rows.sort(key=lambda r: (lane_of[(r[0], r[1])], r[2], -r[3], not r[7]))
        self.rows = rows
        self.lane = np.array([lane_of[(r[0], r[1])] for r in rows], np.int64)
        self.start = np.array([r[2] for r in rows], np.int64)
        self.end = np.array([r[3] for r in rows], np.int64)
        self.is_range = np.array([r[7] for r in rows], bool)
        names = [doc.names.iid(EVENT_NAMES, r[4]) for r in rows]
        self.name_iid = names
        ref = np.full(len(lanes), np.iinfo(np.int64).max)
        np.minimum.at(ref, self.lane, self.start)  # each lane's earliest row: every lane has one
        self.pk = order_rows(
            self.start, self.end, self.is_range, self.lane, ref, np.asarray(names, np.int64)
        )
        self.unbound: Counter = Counter()  # flow rows that draw no arrow, by why
        self.flow_ids: dict[int, bytes] = defaultdict(bytes)  # row -> flow fields of its begin
        self._bind_flows()

    def busy(self, lanes: list[int]) -> tuple[np.ndarray, np.ndarray]:
        """(times, how many of `lanes` are inside a slice from each time on)."""
        edges, steps = [], []
        for lane in lanes:
            m = self.is_range & (self.lane == lane)
            s, e = self.start[m], self.end[m]  # by start
            if not len(s):
                continue
            reach = np.maximum.accumulate(e)
            new = np.ones(len(s), bool)
            new[1:] = s[1:] > reach[:-1]  # a gap before it: a new busy stretch
            last = np.append(np.flatnonzero(new)[1:] - 1, len(s) - 1)
            lo, hi = s[new], reach[last]
            keep = hi > lo
            edges += [lo[keep], hi[keep]]
            steps += [np.ones(int(keep.sum()), np.int64), -np.ones(int(keep.sum()), np.int64)]
        if not edges:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        t, d = np.concatenate(edges), np.concatenate(steps)
        o = np.argsort(t, kind="stable")
        t, level = t[o], np.cumsum(d[o])
        last = np.append(t[1:] != t[:-1], True)  # the count after every change at a time
        return t[last], level[last]

    # tracks: each lane's own, and its overlap levels beside it

    def descriptors(self, doc: _TorchDoc) -> list[bytes]:
        blocks = np.unique(self.pk["block"]) if len(self.rows) else np.zeros(0, np.int64)
        self.uuid_of: dict[int, int] = {}
        out = []
        rank_in_proc: dict = defaultdict(int)
        for b in blocks.tolist():
            lane, level = divmod(b, LEVELS)
            pid, tid = self.lanes[lane]
            p = doc.procs[pid]
            t = p.threads[tid]
            u = doc._uuid()
            self.uuid_of[b] = u
            name = overlap_name(t.name or (f"thread {tid}" if _finite(tid) else str(tid)), level)
            rank = rank_in_proc[pid]
            rank_in_proc[pid] += 1
            out.append(_descriptor(u, name, p.uuid, rank))
        return out

    def events(self, doc: _TorchDoc) -> list[bytes]:
        pk, out, n = self.pk, [], doc.names
        for row, is_end, block, t in zip(
            pk["row"].tolist(),
            pk["is_end"].tolist(),
            pk["block"].tolist(),
            pk["time_ns"].tolist(),
            strict=True,
        ):
            u = self.uuid_of[block]
            if is_end:
                out.append(_event(t, _end(u)))
                continue
            r = self.rows[row]
            if not r[7]:
                out.append(_event(t, doc._instant(u, r[4], r[5], r[6])))
                continue
            cat = None if r[5] is None else n.iid(EVENT_CATEGORIES, str(r[5]))
            extra = _annotations(n, r[6]) + self.flow_ids.get(row, b"")
            out.append(_event(t, _begin(u, self.name_iid[row], cat, extra)))
        return out

    # flows

    def _bind_flows(self) -> None:
        """Each flow's rows bound to slices (innermost holding its time on its thread; an 'f'
        without bp 'e' the next to begin), chained in the order the importer meets their
        begins (time, then file order): flow_ids on each but the last, which terminates it."""
        doc = self.doc
        if not doc.flow_rows:
            return
        pos = np.empty(len(self.rows), np.int64)  # each begin's place in the file's order
        begins = ~self.pk["is_end"]
        pos[self.pk["row"][begins]] = np.arange(int(begins.sum()))
        by_lane = self._ranges_by_lane()
        chains: list[list[int]] = []
        open_chain: dict = {}
        for key, ph, pid, tid, t, bp, _ in sorted(doc.flow_rows, key=lambda f: (f[4], f[6])):
            lane = self._lane_of(pid, tid)
            row = None if lane is None else self._bind(by_lane[lane], t, ph == "f" and bp != "e")
            if row is None:
                self.unbound[f"flow ends ('{ph}') with no slice to bind to"] += 1
                continue
            if ph == "s" or key not in open_chain:
                open_chain[key] = chain = []
                chains.append(chain)
            open_chain[key].append(row)
            if ph == "f":
                del open_chain[key]
        for chain in chains:
            if len(chain) < 2:  # Kineto's window cut it
                self.unbound["flows with one end, the other outside torch's window"] += 1
                continue
            if len(set(chain)) < 2:
                self.unbound["flows with both ends on one slice"] += 1
                continue
            fid = struct.pack("<Q", doc.names.flow_id())
            chain = sorted(set(chain), key=lambda r: (self.start[r], pos[r]))
            for r in chain[:-1]:
                self.flow_ids[r] += TAG_FLOW + fid
            self.flow_ids[chain[-1]] += TAG_FLOW_END + fid

    def _lane_of(self, pid, tid):
        p = self.doc.procs.get(pid)
        t = p.threads.get(tid) if p is not None else None
        return t.lane if t is not None and t.lane >= 0 else None

    def _ranges_by_lane(self) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """Per lane, (starts, ends, rows) of its slices sorted by start, outermost first."""
        out = []
        rng = np.flatnonzero(self.is_range)
        for i in range(len(self.lanes)):
            rows = rng[self.lane[rng] == i]  # already by start, longest first
            out.append((self.start[rows], self.end[rows], rows))
        return out

    @staticmethod
    def _bind(ranges, t: int, next_slice: bool) -> int | None:
        starts, ends, rows = ranges
        if next_slice:
            k = int(np.searchsorted(starts, t, side="left"))
            return int(rows[k]) if k < len(rows) else None
        k = int(np.searchsorted(starts, t, side="right")) - 1
        while k >= 0:  # the latest-begun slice that still holds t: the innermost
            if ends[k] >= t:
                return int(rows[k])
            k -= 1
        return None


# -- the kernels we did not record, on the SM tracks ---------------------------------------------


class _Bars:
    """Slices of kernels we did not record (coverage.unseen_kernels) on 'other kernels (CUPTI)'
    tracks under each SM track, above its lanes (chrome.other_kernel_events' layout): kernel k on
    the first kernels["n_sms"][k] SMs of kernels["sms"], one more track a level of kernels
    that overlap (concurrent streams)."""

    def __init__(self, names: _Names, uuid0: int):
        self.names, self.next_uuid = names, uuid0
        self.descs: list[bytes] = []
        self.events: list[bytes] = []
        self.slices = 0

    def add(self, writer, kernels: dict, origin_ns: int) -> None:
        start = np.asarray(kernels["start_ns"], np.int64)
        end = np.asarray(kernels["end_ns"], np.int64)
        n_sms = np.asarray(kernels["n_sms"], np.int64)
        if not len(start):
            return
        sm_index = np.searchsorted(writer.sms, kernels["sms"])
        level = np.asarray(kernels["level"])  # laid out by unseen_kernels
        levels = int(level.max()) + 1
        tracks: dict = {}
        for lv in range(levels):
            name = OTHER_KERNELS if lv == 0 else f"{OTHER_KERNELS} {lv + 1}"
            for j in range(int(n_sms[level == lv].max(initial=0))):
                self.next_uuid += 1
                tracks[(lv, j)] = u = self.next_uuid
                parent = writer.sm_uuid0 + int(sm_index[j])
                self.descs.append(_descriptor(u, name, parent, lv - levels))
        per_track = defaultdict(list)
        rows = zip(kernels["name"], kernels["args"], start.tolist(), end.tolist(), strict=True)
        for k, (name, args, s, e) in enumerate(rows):
            iid = self.names.iid(EVENT_NAMES, name)
            ann = _annotations(self.names, args)
            for j in range(int(n_sms[k])):
                per_track[(int(level[k]), j)].append((s - origin_ns, e - origin_ns, iid, ann))
        for key, slices in per_track.items():
            u = tracks[key]
            for s, e, iid, ann in sorted(slices, key=lambda x: x[0]):
                self.events.append(_event(s, _begin(u, iid, None, ann)))
                self.events.append(_event(e, _end(u)))
                self.slices += 1


__all__ = ["write_merged", "Merged", "TORCH_SEQ", "HOST_CLOCK"]
