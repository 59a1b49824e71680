"""Native Perfetto protobuf export, encoded with numpy: no Python loop per event.

The file is one trusted packet sequence (id 1); a trace of several ranks (iter_ranks_chunks) is
each rank's such packets in turn, on the same sequence::

    packet        SEQ_INCREMENTAL_STATE_CLEARED + interned event names (iid 1..)
    descriptors   the timeline's tracks (sm_profiler.trace.drawing): a root track, under it one track
                  per launch (its span) and one per SM, each SM holding its "resident blocks"
                  counter and its lanes' tracks; children in explicit order (child_ordering
                  EXPLICIT + sibling_order_rank, which the Perfetto UI honours). No process or
                  thread descriptors: the UI would append their pid/tid to every name and order
                  processes by name ('SM 112' before 'SM 8')
    blocks        one per track with events, in nondecreasing reference time:
                    ClockSnapshot: sequence clock 64 (incremental) = BOOTTIME = reference time
                    TrackDescriptor of the track + TracePacketDefaults {clock 64, track uuid}
                    the track's events in time order: TrackEvent {type, name_iid} with
                    timestamp = ns since the previous event of the block (short varints)

so an event packet stays a few bytes whatever the trace's absolute times (BENCHMARKS.md,
"Host", for bytes per record).

Why the details:
  * A ClockSnapshot resets an incremental clock, which lets every block restart its deltas; the
    importer rejects a trace clock that goes backwards, so blocks are ordered by reference time.
  * New TracePacketDefaults keep the interned names, so names are sent once.
  * The importer sorts by timestamp and breaks ties by file order, and SLICE_END closes the
    innermost open slice. So at one timestamp we emit: ends of slices begun earlier (innermost
    first), then begins in row order, each zero-length slice's end right after its begin. Slices
    that only partially overlap their enclosing slice cannot be drawn on one stack: the timeline
    moves them to an extra "(overlap)" track (timeline.order_rows, run by the drawing's
    lane_rows, which gives the rows in that order) instead of letting them be closed by the
    wrong end.

The bytes are written by protobuf.py. Field numbers are from perfetto/protos/perfetto/trace/
{trace_packet,track_event/*,clock_snapshot,interned_data/*}.proto.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, BinaryIO

import numpy as np

from ..trace.drawing import LEVELS, SUMMARY_RANK0, Drawing, Focus, as_drawing
from .protobuf import (
    BOOTTIME,
    CLOCK_ID,
    SEQ_ID,
    SLICE_BEGIN,
    SLICE_END,
    TYPE_COUNTER,
    TYPE_INSTANT,
    block_header,
    encode_events,
    packet,
)
from .protobuf import field_bytes as _fb
from .protobuf import field_varint as _fv
from .protobuf import varint as _varint

if TYPE_CHECKING:
    from ..trace.timeline import Timeline

# Rows per encoding chunk: bounds the temporaries whatever the trace size (BENCHMARKS.md,
# "Host", peak memory).
CHUNK_ROWS = 1 << 17

# TrackDescriptor.ChildTracksOrdering.EXPLICIT: children sorted by their sibling_order_rank (the
# Perfetto UI sorts the children of a parent without it by name, 'SM 112' before 'SM 8').
EXPLICIT = 3
# TrackDescriptor.SiblingMergeBehavior.NONE: never merge two tracks because they share a name.
MERGE_NONE = 2
ROOT_UUID = 1
# The clock a trace's times are read from, as the roots' description names it.
GLOBALTIMER = "%globaltimer"


def to_perfetto_bytes(tl: Drawing | Timeline) -> bytes:
    """The whole Perfetto trace of `tl` (a serialized `perfetto.protos.Trace`)."""
    return b"".join(iter_perfetto_chunks(tl))


def write_trace(d: Drawing, f: BinaryIO) -> None:
    """The Perfetto trace of `d` written to `f` (export's writer: sm_profiler.export.formats)."""
    for chunk in iter_perfetto_chunks(d):
        f.write(chunk)


def iter_perfetto_chunks(tl: Drawing | Timeline) -> Iterator[bytes]:
    """The Perfetto trace of `tl` (a Drawing, or the Timeline to draw) as consecutive byte
    strings; write them in order."""
    yield from _Writer(as_drawing(tl, "Perfetto", "to_perfetto_bytes")).chunks()


def iter_ranks_chunks(
    ranks: list[tuple[int, Drawing | Timeline]], about: Sequence[str] = ()
) -> Iterator[bytes]:
    """One Perfetto trace of several ranks' drawings, already on one time axis (sm_profiler
    .merge), as consecutive byte strings: per rank a root 'GPU r  · kernels' (its busy SMs, its
    launches) and its SMs 'GPU r · SM s', GPU by GPU and SM by SM in the UI's order (names
    sort so; a rank number is padded to the widest). The trace opens on the first rank's span;
    `about`: lines for every root's description (how the ranks were aligned)."""
    yield from ranks_chunks(rank_writers(ranks), about)


def rank_writers(ranks: list[tuple[int, Drawing | Timeline]]) -> list[_Writer]:
    """The writers of iter_ranks_chunks, one per rank: rank i's uuids from i << 40."""
    width = max((len(str(r)) for r, _ in ranks), default=1)
    return [rank_writer(r, d, i, width) for i, (r, d) in enumerate(ranks)]


def rank_writer(rank: int, d: Drawing | Timeline, index: int, width: int) -> _Writer:
    """The writer of rank `rank`, the `index`-th of a trace of several: labelled 'GPU r' (r
    padded to `width` digits, so that names sort in rank order), its uuids from index << 40."""
    label = f"GPU {str(rank).rjust(width)}"
    return _Writer(as_drawing(d, "Perfetto", "to_perfetto_bytes"), label, index << 40)


def ranks_chunks(
    writers: list[_Writer],
    about: Sequence[str] = (),
    origin_ns: int | None = None,
    focus: Focus | None = None,
    clock: str = GLOBALTIMER,
) -> Iterator[bytes]:
    """The packets of rank_writers' `writers`, written from `origin_ns` (default: the ranks'
    earliest time; at most that), opening on `focus` (default: the first rank's own span).

    The ranks are written one after another on one sequence, each from its own interned names
    (the sequence's state cleared at its start). The importer takes clock snapshots in file
    order and refuses a trace clock that goes backwards, so every block of every rank snapshots
    the clock at one time, the origin, where a single trace snapshots each lane's. `clock`
    names the clock the times are of, in the roots' description."""
    origin = min((w.origin for w in writers), default=0) if origin_ns is None else origin_ns
    if focus is None:
        opens = next((w for w in writers if w._window()), None)
    else:
        opens = writers[0] if writers else None
    for w in writers:
        join(w, origin, w is opens, about, clock, focus)
    for w in writers:
        yield from w.chunks()


def join(
    w: _Writer,
    origin_ns: int,
    opens: bool,
    about: Sequence[str] = (),
    clock: str = GLOBALTIMER,
    focus: Focus | None = None,
) -> _Writer:
    """`w` made one rank of a trace of several (ranks_chunks, or a job's trace written a rank
    at a time: export/job_trace.py): its times from `origin_ns`, every block's clock snapshot
    there (at or before its own earliest time); `opens`: the trace opens on its span (`focus`,
    default its own); `about`, `clock`: as ranks_chunks'. Returns `w`."""
    w.origin = w.ref0 = origin_ns
    w.one_ref, w.window, w.about, w.clock = True, opens, list(about), clock
    w.focus = w.focus if focus is None else focus
    return w


# Events encoded at a time by the writer's blocks (counters, launches, summaries).
ENCODE_EVENTS = 1 << 16

# -- the writer ------------------------------------------------------------------------------------


class _Writer:
    """The packets of one drawing. `label` ('GPU 3') and `uuid_base` place it in a trace of
    several (iter_ranks_chunks): its root and SM tracks named after the label, its uuids from
    the base."""

    def __init__(self, d: Drawing, label: str | None = None, uuid_base: int = 0):
        self.d = d
        self.nl = len(d.lanes)
        self.lo, self.hi = d.lanes.lo, d.lanes.hi
        self.label = label
        self._names()
        self.rows_per_lane = d.rows_per_lane
        self.sms = d.sms
        # Times are written from the origin; every block's clock snapshot is at ref0, or at the
        # lane's earliest time for a lane's block (unless one_ref: see iter_ranks_chunks).
        self.used = used = self.rows_per_lane > 0
        live = self.lo[used | d.lanes.initialized]
        self.ref0 = int(live.min()) if len(live) else 0
        self.origin = min(d.start_ns, self.ref0)
        self.one_ref = False
        self.window = True  # the span the UI opens on (one writer's, in a trace of several)
        self.focus = d.focus  # that span, and what it is
        self.clock = GLOBALTIMER
        self.about: list[str] = []  # more lines for the root's description
        # uuids: the root, one per launch, one per SM (its counter), then one per lane (its
        # row in the lanes table), then overlap tracks as they come.
        n_launch, n_sm = len(d.launches["start_ns"]), len(self.sms)
        self.root_uuid = uuid_base + ROOT_UUID
        self.launch_uuid0 = self.root_uuid + 1
        self.sm_uuid0 = self.launch_uuid0 + n_launch
        self.lane_uuid0 = self.sm_uuid0 + n_sm
        self.next_uuid = self.lane_uuid0 + self.nl
        self.declared: set[int] = set()  # lanes whose track descriptor was written

    # names: iid 1.. for event names, unmatched/dropped labels and kernel names
    def _names(self):
        d = self.d
        names: dict[str, int] = {}

        def iid(name: str) -> int:
            return names.setdefault(name, len(names) + 1)

        top = max(d.slice_names, default=0)
        self.ev_iid = np.zeros(top + 1, np.uint64)
        for e, name in d.slice_names.items():
            self.ev_iid[e] = iid(name)
        self.mark_iid = np.array([iid(name) for name in d.mark_names], np.uint64)
        self.iid = iid
        self.names = names

    def _uuid(self) -> int:
        self.next_uuid += 1
        return self.next_uuid - 1

    def chunks(self) -> Iterator[bytes]:
        interned = b"".join(
            _fb(2, _fv(1, i) + _fb(2, name)) for name, i in self.names.items()
        )  # InternedData.event_names: EventName {iid = 1, name = 2}
        yield packet(_fv(13, 1), _fb(12, interned))  # sequence_flags = INCREMENTAL_STATE_CLEARED
        self._sent_names = len(self.names)

        # Top level: the root (GPU-wide 'busy SMs', the launches under it), then one track per
        # SM, each its 'resident blocks' counter with its lanes under it. The UI opens top-level
        # tracks collapsed, showing their own counter, and orders them by name (sm_sort_name).
        d = self.d
        used, ref0, root_uuid = self.used, self.ref0, self.root_uuid
        about = _fb(14, "\n".join(self._about()))  # shown by the track's help
        share = _fb(8, _fb(7, "resident blocks"))  # CounterDescriptor.y_axis_share_key
        root = _fv(1, root_uuid) + _fb(2, self._root_name()) + about + _fb(8, b"")
        root += _fv(11, EXPLICIT)
        # A descriptor goes once: with its counter's block, or here when it has no counter.
        occ = d.occupancy
        busy = d.busy
        with_counter = set(np.unique(occ["sm_index"]).tolist())
        head = [] if len(busy["time_ns"]) else [packet(_fb(60, root))]
        sm_desc = []
        for i in range(len(self.sms)):
            sm_desc.append(
                _fv(1, self.sm_uuid0 + i)
                + _fb(2, self._sm_name(i))
                + share
                + _fv(11, EXPLICIT)
                + _fv(15, MERGE_NONE)
            )
            if i not in with_counter:
                head.append(packet(_fb(60, sm_desc[-1])))
        if self.window:
            head.append(self._window())
        blocks = []  # (header, times, types, iids, counter values)
        if len(busy["time_ns"]):
            times, vals = busy["time_ns"], busy["value"]
            if times[0] > ref0:
                times, vals = np.append(ref0, times), np.append(0, vals)
            blocks.append((root, root_uuid, times, np.full(len(times), TYPE_COUNTER), None, vals))
        sms_occ, first = np.unique(occ["sm_index"], return_index=True)
        ends = np.append(first[1:], len(occ["sm_index"]))[: len(first)]
        for i, a, b in zip(sms_occ.tolist(), first.tolist(), ends.tolist(), strict=True):
            u = self.sm_uuid0 + i
            times, vals = occ["time_ns"][a:b], occ["value"][a:b]
            if times[0] > ref0:  # start each counter at 0
                times, vals = np.append(ref0, times), np.append(0, vals)
            blocks.append((sm_desc[i], u, times, np.full(len(times), TYPE_COUNTER), None, vals))
        blocks.extend(self._launch_blocks())
        # Kernel names were interned after packet 0: send them (same generation, same table).
        yield self._interned_update()
        yield b"".join(head)
        yield self._encode_blocks(blocks, ref0)
        if d.summary is not None:
            yield self._encode_blocks(self._summary_blocks(ref0), ref0, double=True)

        # Lanes: in order of reference time, in chunks of about CHUNK_ROWS rows.
        lanes_sorted = np.flatnonzero(used)
        lanes_sorted = lanes_sorted[np.argsort(self.lo[lanes_sorted], kind="stable")]
        csum = np.cumsum(self.rows_per_lane[lanes_sorted])
        cut = np.searchsorted(
            csum, np.arange(CHUNK_ROWS, int(csum[-1]) if len(csum) else 0, CHUNK_ROWS), side="left"
        )
        for part in np.split(lanes_sorted, np.unique(cut + 1)):
            if len(part):
                yield self._lane_chunk(part)

    def _root_name(self) -> str:
        """The root's name; in a trace of several, 'GPU 3  · gemm, ...': a space more than its
        SMs' names have before the '·' puts it above them (the UI orders top-level tracks by
        name and shows runs of spaces as one)."""
        name = self.d.root_name
        if self.label is None:
            return name
        kernels = name.partition(": ")[2]
        return f"{self.label}  · {kernels}" if kernels else self.label

    def _sm_name(self, i: int) -> str:
        name = sm_sort_name(self.d, i)
        return name if self.label is None else f"{self.label} · {name}"

    def _about(self) -> list[str]:
        """The root's description: the timeline's notes, the time origin, the launch in view."""
        d = self.d
        lines = [*d.notes, *self.about]
        lines.append(f"times are ns from the profile's start: {self.clock} {self.origin} ns")
        if self.focus is not None:
            f = self.focus
            lines.append(f"opens on {f.label}; zoom out (or press w/s) for {f.rest}")
        return lines

    def _window(self) -> bytes:
        """The span the UI opens on: the longest launch, with a margin. The Perfetto UI opens
        on the trace's bounds clipped to the tracing_started / tracing_disabled service events
        (metadata tracing_started_ns / tracing_disabled_ns); they go on a sequence of their own
        with trace-clock timestamps."""
        focus = self.focus
        if focus is None:
            return b""
        lo, hi = focus.start_ns - self.origin, focus.end_ns - self.origin
        pad = max(1, (hi - lo) // 50)
        lo, hi = max(0, lo - pad), hi + pad

        def event(ts: int, field: int) -> bytes:
            return _fb(1, _fv(8, ts) + _fv(10, SEQ_ID + 1) + _fb(69, _fv(field, 1)))

        return event(lo, 2) + event(hi, 5)  # tracing_started, tracing_disabled

    def _launch_blocks(self) -> list:
        """One block per launch track of the timeline, its launches in time order, each a slice
        after the mark of the host gap cut before it (if one was)."""
        d = self.d
        L, names, cuts = d.launches, d.launch_names, d.launch_cuts
        out = []
        for k, (name, rows) in enumerate(d.launch_tracks):
            u = self.launch_uuid0 + k
            desc = _fv(1, u) + _fv(5, self.root_uuid) + _fb(2, name) + _fv(12, k)
            desc += _fv(15, MERGE_NONE)
            if not cuts:  # no cut marks: each launch a slice, its columns at once
                m = len(rows)
                labels = [self.iid(names[r]) for r in rows.tolist()]
                times = np.empty(2 * m, np.int64)
                times[0::2], times[1::2] = L["start_ns"][rows], L["end_ns"][rows]
                iids = np.zeros(2 * m, np.uint64)
                iids[0::2] = labels
                types = np.tile(np.array([SLICE_BEGIN, SLICE_END]), m)
                out.append((desc, u, times, types, iids, None))
                continue
            times, types, iids = [], [], []
            for r in rows.tolist():
                lo, hi = int(L["start_ns"][r]), int(L["end_ns"][r])
                label = self.iid(names[r])
                cut = cuts.get(r)
                if cut is not None:  # the host gap before this launch was cut: say so
                    times.append(lo)
                    types.append(TYPE_INSTANT)
                    iids.append(self.iid(cut))
                times += [lo, hi]
                types += [SLICE_BEGIN, SLICE_END]
                iids += [label, 0]
            events = (np.array(times, np.int64), np.array(types), np.array(iids, np.uint64))
            out.append((desc, u, *events, None))
        return out

    def _summary_blocks(self, ref0: int) -> list:
        """One counter track per (SM, event) of the summary, under its SM after its occupancy."""
        sm = self.d.summary
        top = int(sm["event"].max()) + 1 if len(sm["event"]) else 1
        key = sm["sm_index"].astype(np.int64) * top + sm["event"]
        # One track per (SM, event): its samples together, in time order. The table holds each
        # launch's samples in turn, so a trace of several launches has a key more than once.
        order = np.lexsort((sm["time_ns"], key))
        sm = {k: v[order] for k, v in sm.items()}
        key = key[order]
        uniq, first = np.unique(key, return_index=True)
        ends = np.append(first[1:], len(key))[: len(first)]  # none when nothing was summarised
        blocks = []
        for k, a, b in zip(uniq.tolist(), first.tolist(), ends.tolist(), strict=True):
            i, e = divmod(k, top)
            u = self.next_uuid
            self.next_uuid += 1
            desc = (
                _fv(1, u)
                + _fv(5, self.sm_uuid0 + i)
                + _fb(2, self.d.summary_names[e])
                + _fb(8, b"")
                + _fv(12, SUMMARY_RANK0 + e)
                + _fv(15, MERGE_NONE)
            )
            times, vals = sm["time_ns"][a:b], sm["value"][a:b]
            if times[0] > ref0:
                times, vals = np.append(ref0, times), np.append(0.0, vals)
            blocks.append((desc, u, times, np.full(len(times), TYPE_COUNTER), None, vals))
        return blocks

    def _interned_update(self) -> bytes:
        extra = [(n, i) for n, i in self.names.items() if i > self._sent_names]
        self._sent_names = len(self.names)
        if not extra:
            return b""
        body = b"".join(_fb(2, _fv(1, i) + _fb(2, n)) for n, i in extra)
        return packet(_fb(12, body))

    _sent_names = 0

    def _encode_blocks(self, blocks, ref0: int, double: bool = False) -> bytes:
        return encode_blocks(blocks, ref0, ref0 - self.origin, double)

    def _lane_chunk(self, lanes: np.ndarray) -> bytes:
        # This chunk's slices and marks (unmatched and dropped records: instants on their
        # lane), lane by lane, in the order the drawing lays them out.
        d = self.d
        ref = np.full(len(lanes), self.ref0) if self.one_ref else self.lo[lanes]
        rows = d.lane_rows(lanes, ref)
        is_range = rows.is_range
        iid = np.concatenate(
            [self.ev_iid[d.slices["event"][rows.slice]], self.mark_iid[d.marks["name"][rows.mark]]]
        )
        pk = rows.packets
        row, is_end, block, time = pk["row"], pk["is_end"], pk["block"], pk["time_ns"]
        etype = np.where(is_end, SLICE_END, np.where(is_range[row], SLICE_BEGIN, TYPE_INSTANT))
        etype = etype.astype(np.uint8)
        first = np.ones(len(block), bool)
        first[1:] = block[1:] != block[:-1]
        bstart = np.flatnonzero(first)
        bkeys = block[bstart]
        prev = np.empty_like(time)
        prev[1:] = time[:-1]
        prev[bstart] = ref[bkeys // LEVELS]
        dt = (time - prev).astype(np.uint64)
        bidx = np.cumsum(first) - 1
        headers = self._lane_headers(lanes, bkeys, ref)
        names = self._interned_update()
        parents = self._undeclared_parents(lanes, bkeys)
        return names + parents + encode_events(dt, etype, iid[row], bidx, headers)

    def _lane_header(self, g: int, level: int, ref_ns: int) -> bytes:
        return block_header(ref_ns - self.origin, *self._lane_descriptor(g, level))

    def _lane_headers(self, lanes: np.ndarray, bkeys: np.ndarray, ref: np.ndarray) -> list[bytes]:
        """_lane_header of every block key (lane position * LEVELS + level) of a chunk.

        A lane of k mutually overlapping ranges has k overlap tracks, each needing its own block
        header, so this is per track: what does not change within a lane (its clock snapshot,
        name, parent) is built once per lane, and an overlap track's header is then a few byte
        concatenations, the same bytes block_header(_lane_descriptor) would write."""
        out = []
        lane_of = (bkeys // LEVELS).tolist()
        levels = (bkeys % LEVELS).tolist()
        cur, clock_pk, base_name, parent_f = -1, b"", b"", b""
        seq = _fv(10, SEQ_ID)
        merge = _fv(15, MERGE_NONE)
        clock_default = _fv(58, CLOCK_ID)
        v = _varint
        tag_desc, tag_defaults, tag_track_defaults = v(60 << 3 | 2), v(59 << 3 | 2), v(11 << 3 | 2)
        for lp, level in zip(lane_of, levels, strict=True):
            if level == 0:
                out.append(self._lane_header(int(lanes[lp]), 0, int(ref[lp])))
                continue
            if lp != cur:
                cur, g = lp, int(lanes[lp])
                ref_ns = int(ref[lp]) - self.origin  # as _lane_header: times from the origin
                clocks = _fb(1, _fv(1, CLOCK_ID) + _fv(2, ref_ns) + _fv(3, 1)) + _fb(
                    1, _fv(1, BOOTTIME) + _fv(2, ref_ns)
                )
                clock_pk = packet(_fb(6, clocks))
                base_name = self.d.lanes.names[g].encode()
                parent_f = _fv(5, self.lane_uuid0 + g)
            u = self.next_uuid
            self.next_uuid += 1
            name = base_name + (b" (overlap)" if level == 1 else b" (overlap %d)" % level)
            uv = v(u)
            # _lane_descriptor's fields and _block_header's packets, spelled out.
            desc = (
                b"\x08" + uv + parent_f + b"\x12" + v(len(name)) + name + b"\x60" + v(level) + merge
            )
            inner = clock_default + tag_track_defaults + v(1 + len(uv)) + b"\x58" + uv
            body = seq + tag_desc + v(len(desc)) + desc + tag_defaults + v(len(inner)) + inner
            out.append(clock_pk + b"\x0a" + v(len(body)) + body)
        return out

    def _lane_descriptor(self, g: int, level: int) -> tuple[int, bytes]:
        """(uuid, TrackDescriptor) of lane row `g` at `level`: the lane's own track under its SM,
        ranked in the timeline's order; an overlap level under the lane's track."""
        lanes = self.d.lanes
        name = lanes.track_name(g, level)
        if level == 0:
            u = self.lane_uuid0 + g
            self.declared.add(g)
            parent = self.sm_uuid0 + int(lanes.sm[g])
            rank = int(lanes.rank[g])
            extra = _fv(11, EXPLICIT)  # its overlap tracks, by level
        else:
            u = self.next_uuid
            self.next_uuid += 1
            parent, rank, extra = self.lane_uuid0 + g, level, b""
        desc = (
            _fv(1, u) + _fv(5, parent) + _fb(2, name) + extra + _fv(12, rank) + _fv(15, MERGE_NONE)
        )
        return u, desc

    def _undeclared_parents(self, lanes: np.ndarray, bkeys: np.ndarray) -> bytes:
        """Descriptors of lanes that have overlap tracks but no row at level 0 (their parent)."""
        out = b""
        for k in bkeys.tolist():
            g = int(lanes[k // LEVELS])
            if k % LEVELS and g not in self.declared:
                out += packet(_fb(60, self._lane_descriptor(g, 0)[1]))
        return out


def encode_blocks(blocks, ref0: int, snapshot_ns: int, double: bool = False) -> bytes:
    """Blocks (descriptor, track uuid, times, types, name iids or None, counter values or None)
    as packets: each block its clock snapshot (at `snapshot_ns`, the trace clock's reading of
    `ref0`) and track defaults, then its events, their times as deltas from `ref0` on. double:
    counter values as doubles."""
    if not blocks:
        return b""
    headers, times, types, iids, ctr, bidx = [], [], [], [], [], []
    for i, (desc, u, tm, ty, ii, cv) in enumerate(blocks):
        headers.append(block_header(snapshot_ns, u, desc))
        times.append(np.asarray(tm, np.int64))
        types.append(np.asarray(ty, np.uint8))
        iids.append(np.zeros(len(tm), np.uint64) if ii is None else ii)
        ctype = np.float64 if double else np.int64
        ctr.append(np.zeros(len(tm), ctype) if cv is None else np.asarray(cv, ctype))
        bidx.append(np.full(len(tm), i))
    tm = np.concatenate(times)
    del times
    block = np.concatenate(bidx)
    del bidx
    prev = np.empty_like(tm)
    prev[1:] = tm[:-1]
    starts = np.searchsorted(block, np.arange(len(blocks)))
    prev[starts] = ref0
    dt = (tm - prev).astype(np.uint64)
    del tm, prev
    types, iids, ctr = np.concatenate(types), np.concatenate(iids), np.concatenate(ctr)
    n = len(dt)
    if n <= ENCODE_EVENTS:
        return encode_events(dt, types, iids, block, headers, counter=ctr)
    # ENCODE_EVENTS events at a time (encode_events' temporaries are some 100 bytes an
    # event): each part holds the headers of the blocks that start in it, the same bytes.
    out, lo = [], 0
    for a in range(0, n, ENCODE_EVENTS):
        b = min(n, a + ENCODE_EVENTS)
        hi = len(blocks) - 1 if b == n else int(block[b - 1])
        hdr = [headers[i] if starts[i] >= a else b"" for i in range(lo, hi + 1)]
        out.append(
            encode_events(dt[a:b], types[a:b], iids[a:b], block[a:b] - lo, hdr, counter=ctr[a:b])
        )
        lo = min(hi + 1, int(block[b])) if b < n else hi + 1  # a block may go on
    return b"".join(out)


def counter_group(uuid: int, name: str, about: Sequence[str]) -> bytes:
    """The descriptor of a top-level track `name` (description: the lines of `about`) whose
    children (counter_tracks) are in explicit order."""
    return packet(
        _fb(60, _fv(1, uuid) + _fb(2, name) + _fb(14, "\n".join(about)) + _fv(11, EXPLICIT))
    )


def counter_tracks(
    parent: int,
    uuid0: int,
    tracks: Sequence[tuple[str, np.ndarray, np.ndarray]],
    origin_ns: int,
    share: str,
) -> bytes:
    """Counter tracks under `parent`, one per (name, time_ns, value) of `tracks`, uuids and
    ranks among its children from uuid0 on, values as doubles on one y-axis scale (`share`):
    each its descriptor, then its samples, times from `origin_ns` (at or before each)."""
    blocks = []
    for k, (name, times, values) in enumerate(tracks):
        u = uuid0 + k
        desc = _fv(1, u) + _fv(5, parent) + _fb(2, name) + _fb(8, _fb(7, share))
        desc += _fv(12, u - parent) + _fv(15, MERGE_NONE)
        blocks.append((desc, u, times, np.full(len(times), TYPE_COUNTER), None, values))
    return encode_blocks(blocks, origin_ns, 0, double=True)


def sm_sort_name(d: Drawing, i: int) -> str:
    """SM i's name as a top-level track: the Perfetto UI sorts top-level tracks by name (SQLite
    binary order, 'SM 112' before 'SM 8'), so the number is padded with spaces on the left to
    the widest SM id; the UI's track titles collapse runs of spaces ('SM 8')."""
    name = d.sm_names[i]
    width = max((len(str(int(s))) for s in d.sms if s >= 0), default=1)
    sm = int(d.sms[i])
    if sm < 0:
        return name
    return name.replace(f"SM {sm}", "SM " + str(sm).rjust(width), 1)


__all__ = ["to_perfetto_bytes", "iter_perfetto_chunks", "iter_ranks_chunks"]
