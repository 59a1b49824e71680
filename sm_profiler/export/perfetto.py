"""Native Perfetto protobuf export, encoded with numpy: no Python loop per event.

The file is one trusted packet sequence (id 1)::

    packet        SEQ_INCREMENTAL_STATE_CLEARED + interned event names (iid 1..)
    descriptors   the timeline's tracks (sm_profiler.timeline): a root track, under it one track
                  per launch (its span) and one per SM, each SM holding its "resident blocks"
                  counter and its lanes' tracks; children in explicit order (child_ordering
                  EXPLICIT + sibling_order_rank, which the Perfetto UI honours). No process or
                  thread descriptors: the UI would append their pid/tid to every name and order
                  processes by name ('SM 112' before 'SM 8')
    blocks        one per track with events, in nondecreasing reference time:
                    ClockSnapshot: sequence clock 64 (incremental) = BOOTTIME = reference time
                    TrackDescriptor of the track + TracePacketDefaults {clock 64, track uuid}
                    the track's events in time order: TrackEvent {type, name_iid} with
                    timestamp = ns since the previous event of the block (1-3 byte varints)

so a begin/instant packet is ~12 bytes, an end ~10, whatever the trace's absolute times.

Why the details:
  * A ClockSnapshot resets an incremental clock, which lets every block restart its deltas; the
    importer rejects a trace clock that goes backwards, so blocks are ordered by reference time.
  * New TracePacketDefaults keep the interned names, so names are sent once.
  * The importer sorts by timestamp and breaks ties by file order, and SLICE_END closes the
    innermost open slice. So at one timestamp we emit: ends of slices begun earlier (innermost
    first), then begins in row order, each zero-length slice's end right after its begin. Slices
    that only partially overlap their enclosing slice cannot be drawn on one stack: they move to
    an extra "(overlap)" thread instead of being closed by the wrong end.

Field numbers are from perfetto/protos/perfetto/trace/{trace_packet,track_event/*,clock_snapshot,
interned_data/*}.proto.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from ..timeline import SUMMARY_RANK0, Timeline, build
from ..trace import INSTANT, RANGE, UNMATCHED_BEGIN, TraceData

# Rows per encoding chunk: bounds the temporaries (~100 bytes a row) whatever the trace size.
CHUNK_ROWS = 1 << 17
SEQ_ID = 1
CLOCK_ID = 64  # the first sequence-scoped clock id
BOOTTIME = 6  # BuiltinClock.BOOTTIME: the default trace clock
# One lane's tracks: the lane itself plus overlap tracks, at most one per event id of a capture.
LEVELS = 1 << 12
# Passes that move partially overlapping ranges up a level before the one-level-per-id rule.
_MOVE_PASSES = 4

# TrackDescriptor.ChildTracksOrdering.EXPLICIT: children sorted by their sibling_order_rank (the
# Perfetto UI sorts the children of a parent without it by name, 'SM 112' before 'SM 8').
EXPLICIT = 3
# TrackDescriptor.SiblingMergeBehavior.NONE: never merge two tracks because they share a name.
MERGE_NONE = 2
ROOT_UUID = 1

# TrackEvent.Type
SLICE_BEGIN, SLICE_END, TYPE_INSTANT, TYPE_COUNTER = 1, 2, 3, 4

# Tags (field << 3 | wire type) of the fields the vectorized encoder writes.
TAG_PACKET = 0x0A  # Trace.packet = 1, bytes
TAG_TIMESTAMP = 0x40  # TracePacket.timestamp = 8, varint
TAG_SEQ_ID = 0x50  # TracePacket.trusted_packet_sequence_id = 10, varint
TAG_TRACK_EVENT = 0x5A  # TracePacket.track_event = 11, bytes
TAG_TYPE = 0x48  # TrackEvent.type = 9, varint
TAG_NAME_IID = 0x50  # TrackEvent.name_iid = 10, varint
TAG_COUNTER_VALUE = (0xF0, 0x01)  # TrackEvent.counter_value = 30, varint (two-byte tag)
TAG_DOUBLE_COUNTER_VALUE = (0xE1, 0x02)  # TrackEvent.double_counter_value = 44, fixed64


def to_perfetto_bytes(trace: TraceData | Timeline) -> bytes:
    return b"".join(iter_perfetto_chunks(trace))


def iter_perfetto_chunks(trace: TraceData | Timeline) -> Iterator[bytes]:
    """The trace (or its timeline) as consecutive byte strings; write them in order."""
    yield from _Writer(trace if isinstance(trace, Timeline) else build(trace)).chunks()


# -- Python-level protobuf writing, for the few packets that are not per event ----------------


_VARINT_SMALL = [bytes([i]) for i in range(128)]  # tags and small ids: most varints written


def _varint(v: int) -> bytes:
    if 0 <= v < 128:
        return _VARINT_SMALL[v]
    v &= (1 << 64) - 1  # negative int64 -> two's complement, as protobuf does
    out = bytearray()
    while v > 0x7F:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def _fv(field: int, v: int) -> bytes:
    return _varint(field << 3) + _varint(v)


def _fb(field: int, payload: bytes | str) -> bytes:
    if isinstance(payload, str):
        payload = payload.encode()
    return _varint((field << 3) | 2) + _varint(len(payload)) + payload


def _packet(*fields: bytes) -> bytes:
    return _fb(1, _fv(10, SEQ_ID) + b"".join(fields))


def _block_header(ref_ns: int, track_uuid: int, descriptor: bytes = b"") -> bytes:
    """Reset clock 64 to ref_ns and point the defaults at `track_uuid`."""
    clocks = _fb(1, _fv(1, CLOCK_ID) + _fv(2, ref_ns) + _fv(3, 1)) + _fb(
        1, _fv(1, BOOTTIME) + _fv(2, ref_ns)
    )
    defaults = _fb(59, _fv(58, CLOCK_ID) + _fb(11, _fv(11, track_uuid)))
    track = _fb(60, descriptor) if descriptor else b""
    return _packet(_fb(6, clocks)) + _packet(track, defaults)


# -- vectorized varints and event packets --------------------------------------------------------


def _vlen(v: np.ndarray) -> np.ndarray:
    """Bytes of the varint of each uint64 in `v`."""
    n = np.ones(len(v), np.int64)
    if len(v) == 0:
        return n
    vmax = int(v.max())
    k = 1
    while k < 10 and vmax >> (7 * k):
        n += (v >> np.uint64(7 * k)) != 0
        k += 1
    return n


def _put_varint(out: np.ndarray, pos: np.ndarray, v: np.ndarray, n: np.ndarray) -> None:
    """Write varint v[i] (n[i] bytes) at out[pos[i]:], one numpy pass per byte position."""
    k = 0
    while len(v):
        more = n > k + 1
        out[pos + k] = ((v & np.uint64(0x7F)).astype(np.uint8)) | (more.astype(np.uint8) << 7)
        if not more.any():
            break
        pos, v, n = pos[more], v[more] >> np.uint64(7), n[more]
        k += 1


def _encode(
    dt: np.ndarray,
    etype: np.ndarray,
    iid: np.ndarray,
    block: np.ndarray,
    headers: list[bytes],
    counter: np.ndarray | None = None,
) -> bytes:
    """Event packets (sorted by `block`, 0..len(headers)-1) with each block's header before it.

    Packet: 0A len | 40 dt | 50 01 | 5A te_len 48 type [50 name_iid] [F0 01 counter_value]
    """
    n = len(dt)
    has_name = (etype == SLICE_BEGIN) | (etype == TYPE_INSTANT)
    l_dt = _vlen(dt)
    l_iid = np.zeros(n, np.int64)
    l_iid[has_name] = 1 + _vlen(iid[has_name])
    te_len = 2 + l_iid
    is_ctr = etype == TYPE_COUNTER
    double = counter is not None and counter.dtype.kind == "f"
    if double:  # double_counter_value: a fixed 8 bytes
        te_len[is_ctr] += 2 + 8
    elif counter is not None:
        cv = counter.astype(np.int64).view(np.uint64)
        l_cv = _vlen(cv[is_ctr])
        te_len[is_ctr] += 2 + l_cv
    body = 1 + l_dt + 2 + 2 + te_len
    size = 2 + body
    del l_iid

    hsize = np.array([len(h) for h in headers], np.int64)
    pk_before = np.cumsum(size) - size
    h_incl = np.cumsum(hsize)
    pos = pk_before + h_incl[block]
    first_pk = np.searchsorted(block, np.arange(len(headers)))
    hpos = np.where(first_pk < n, pk_before[np.minimum(first_pk, n - 1)], int(size.sum()))
    hpos = hpos + h_incl - hsize
    total = int(size.sum()) + int(hsize.sum())
    out = np.empty(total, np.uint8)
    if len(headers):
        hbytes = np.frombuffer(b"".join(headers), np.uint8)
        hoff = np.repeat(hpos - (h_incl - hsize), hsize) + np.arange(len(hbytes))
        out[hoff] = hbytes
    if n == 0:
        return out.tobytes()

    out[pos] = TAG_PACKET
    out[pos + 1] = body
    out[pos + 2] = TAG_TIMESTAMP
    _put_varint(out, pos + 3, dt, l_dt)
    q = pos + 3 + l_dt
    del pos, l_dt, body, size
    out[q] = TAG_SEQ_ID
    out[q + 1] = SEQ_ID
    out[q + 2] = TAG_TRACK_EVENT
    out[q + 3] = te_len
    out[q + 4] = TAG_TYPE
    out[q + 5] = etype
    r = q[has_name] + 6
    out[r] = TAG_NAME_IID
    named = iid[has_name]
    _put_varint(out, r + 1, named, _vlen(named))
    if double and is_ctr.any():
        r = q[is_ctr] + 6
        out[r] = TAG_DOUBLE_COUNTER_VALUE[0]
        out[r + 1] = TAG_DOUBLE_COUNTER_VALUE[1]
        val = np.ascontiguousarray(counter[is_ctr], "<f8").view(np.uint8).reshape(-1, 8)
        out[(r + 2)[:, None] + np.arange(8)] = val
    elif counter is not None and is_ctr.any():
        r = q[is_ctr] + 6
        out[r] = TAG_COUNTER_VALUE[0]
        out[r + 1] = TAG_COUNTER_VALUE[1]
        _put_varint(out, r + 2, cv[is_ctr], l_cv)
    return out.tobytes()


# -- ordering the rows of lanes into packets -----------------------------------------------------


def order_rows(start: np.ndarray, end: np.ndarray, is_range: np.ndarray, lane: np.ndarray,
               ref: np.ndarray, event: np.ndarray) -> dict[str, np.ndarray]:  # fmt: skip
    """Packets of rows (ranges: begin + end, instants: one) in file order, and overlap levels.

    `lane` (0..) and `ref` (per lane, <= every time of the lane) say where rows go; `event` is
    each row's event id. Rows whose range partially overlaps an enclosing one move up a level (an
    extra track) until every level nests; returns level per row and, per packet in order: row,
    is_end, block = lane*LEVELS+level, time_ns.
    """
    lane64 = lane.astype(np.int64)
    level = np.zeros(len(start), np.int64)
    pk = _sorted_packets(start, end, is_range, lane64 * LEVELS, ref[lane])
    bad = _offenders(pk, is_range)
    if len(bad):
        level, pk = _overlap_levels(start, end, is_range, lane64, ref, event, bad)
        if pk is None:
            pk = _sorted_packets(start, end, is_range, lane64 * LEVELS + level, ref[lane])
    pk["level"] = level
    return pk


def _overlap_levels(start, end, is_range, lane, ref, event, bad):
    """Levels that nest on every track, for the lanes of the rows in `bad`.

    First, a few passes that move each range closed by another's end one level up: that keeps
    nested ranges together and settles in a pass or two for a range overlapping one or two
    others. A lane still unsettled after _MOVE_PASSES (many ranges overlapping each other; 19
    mutually overlapping ranges need 19 levels) gets one level per event id instead: ranges of
    one id always nest (the decoder pairs them with one stack per lane and id), so every level
    nests, in one pass, for any overlap. Only the rows of the lanes concerned are re-sorted.

    Returns (level per row, the packets when they were already sorted for those levels: when
    every lane took part and settled by moves, else None).
    """
    in_bad = np.zeros(int(lane.max()) + 1, bool)
    in_bad[lane[bad]] = True
    rows = np.flatnonzero(in_bad[lane])
    if len(rows) == len(start):  # every lane overlaps: no need to gather
        s, e, r, ln, local = start, end, is_range, lane, bad
    else:
        s, e, r, ln = start[rows], end[rows], is_range[rows], lane[rows]
        local = np.searchsorted(rows, bad)
    lv = np.zeros(len(rows), np.int64)
    for _ in range(_MOVE_PASSES):
        lv[local] += 1
        pk = _sorted_packets(s, e, r, ln * LEVELS + lv, ref[ln])
        local = _offenders(pk, r)
        if len(local) == 0:
            return _spread(lv, rows, len(start)), pk if len(rows) == len(start) else None
    stuck = np.zeros(len(in_bad), bool)
    stuck[ln[local]] = True
    m = stuck[ln] & r
    lv[stuck[ln]] = 0
    lv[m] = _rank_in_lane(ln[m], event[rows][m].astype(np.int64))
    return _spread(lv, rows, len(start)), None


def drop_marks(tl: Timeline) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """(lane rows, times, labels) of the instants that say a shown lane lost records; both
    writers use it, so they say the same thing at the same place. A ring lane that wrapped lost
    its oldest records, before its first; any other lane (ops compiled without RING in a ring
    buffer included) its newest, at its end."""
    t = tl.trace
    dropped = t.lanes["dropped"].astype(np.int64)
    dl = np.flatnonzero((dropped > 0) & tl.lane_shown)
    over = t.lanes_overwritten()[dl]
    at = np.where(over, tl.lane_lo[dl], tl.lane_hi[dl]).astype(np.int64)
    labels = [f"{n} older records overwritten (ring)" if o else f"{n} records dropped (lane full)"
              for n, o in zip(dropped[dl].tolist(), over.tolist(), strict=True)]  # fmt: skip
    return dl, at, labels


def _spread(values: np.ndarray, rows: np.ndarray, n: int) -> np.ndarray:
    """`values` at `rows` of an int64 array of n zeros."""
    out = np.zeros(n, np.int64)
    out[rows] = values
    return out


def _rank_in_lane(lane: np.ndarray, event: np.ndarray) -> np.ndarray:
    """Dense rank (0..) of each row's event id among the ids of its lane."""
    key = lane * (int(event.max()) + 1) + event
    uniq, inv = np.unique(key, return_inverse=True)
    u_lane = uniq // (int(event.max()) + 1)
    first = np.searchsorted(u_lane, u_lane)
    return (np.arange(len(uniq)) - first)[inv.reshape(-1)]


def _sorted_packets(start, end, is_range, block, ref) -> dict[str, np.ndarray]:
    n = len(start)
    rows = np.arange(n, dtype=np.int64)
    zero = is_range & (end == start)
    open_end = is_range & ~zero
    # Begins/instants in row order, a zero-length range's end right after its begin; then the
    # other ends in reverse row order so that equal-time ends come out innermost first.
    first = np.repeat(rows, 1 + zero)
    is_end1 = np.zeros(len(first), bool)
    is_end1[np.cumsum(1 + zero)[zero] - 1] = True
    late = rows[open_end][::-1]
    pk_row = np.concatenate([first, late])
    is_end = np.concatenate([is_end1, np.ones(len(late), bool)])
    cls = np.concatenate([np.ones(len(first), np.int64), np.zeros(len(late), np.int64)])
    t = np.where(is_end, end[pk_row], start[pk_row])
    rel = (t - ref[pk_row]) * 2 + cls
    b = block[pk_row]
    shift = int(rel.max()).bit_length() if len(rel) else 0
    if len(rel) == 0 or int(b.max()).bit_length() + shift <= 62:
        order = np.argsort((b << shift) | rel, kind="stable")
    else:
        order = np.lexsort((rel, b))
    return {"row": pk_row[order], "is_end": is_end[order], "block": b[order], "time_ns": t[order]}


def _offenders(pk: dict[str, np.ndarray], is_range: np.ndarray) -> np.ndarray:
    """Rows that a stack (SLICE_END pops the innermost slice) would close with another's end."""
    m = is_range[pk["row"]]
    row, is_end, block = pk["row"][m], pk["is_end"][m], pk["block"][m]
    if len(row) == 0:
        return row
    delta = np.where(is_end, -1, 1)
    cs = np.cumsum(delta)
    first = np.ones(len(row), bool)
    first[1:] = block[1:] != block[:-1]
    seg = np.flatnonzero(first)
    depth_after = cs - np.repeat((cs - delta)[seg], np.diff(np.append(seg, len(row))))
    lv = depth_after + is_end
    if int(lv.max()) < (1 << 15) and int(lv.min()) > -(1 << 15):
        lv = lv.astype(np.int16)  # radix sort
    o = np.argsort(lv, kind="stable")
    r, e, b, lvo = row[o], is_end[o], block[o], lv[o]
    pair = ~e[:-1] & e[1:] & (b[:-1] == b[1:]) & (lvo[:-1] == lvo[1:])
    wrong = pair & (r[:-1] != r[1:])
    # Of a begin closed by another range's end, the later-opened one is the odd one out.
    return np.unique(np.maximum(r[:-1][wrong], r[1:][wrong]))


# -- the writer ------------------------------------------------------------------------------------


class _Writer:
    def __init__(self, tl: Timeline):
        self.tl = tl
        trace = self.trace = tl.trace
        self.nl = len(trace.lanes["lane"])
        self.ev_lane = tl.ev_lane
        self.lo, self.hi = tl.lane_lo, tl.lane_hi
        self._names()
        self._extras()
        self._lane_index()
        self.sms = tl.sms
        # uuids: the root, one per launch, one per SM (its counter), then one per lane (its
        # row in the lanes table), then overlap tracks as they come.
        n_launch, n_sm = len(tl.launches["capture"]), len(self.sms)
        self.launch_uuid0 = ROOT_UUID + 1
        self.sm_uuid0 = self.launch_uuid0 + n_launch
        self.lane_uuid0 = self.sm_uuid0 + n_sm
        self.next_uuid = self.lane_uuid0 + self.nl
        self.declared: set[int] = set()  # lanes whose track descriptor was written

    # names: iid 1.. for event names, unmatched/dropped labels and kernel names
    def _names(self):
        t = self.trace
        names: dict[str, int] = {}

        def iid(name: str) -> int:
            return names.setdefault(name, len(names) + 1)

        ev_ids = t.events["event"]
        um = t.unmatched
        top = max([int(a.max()) for a in (ev_ids, um["event"]) if len(a)], default=0)
        self.ev_iid = np.zeros(top + 1, np.uint64)
        for e in np.flatnonzero(np.bincount(ev_ids, minlength=1)):
            self.ev_iid[e] = iid(t.event_name(e))
        self.um_iid = np.zeros((3, top + 1), np.uint64)
        if len(um["event"]):
            key = np.unique(um["kind"].astype(np.int64) * (top + 1) + um["event"])
            for k in key.tolist():
                kind, e = divmod(k, top + 1)
                what = "begin" if kind == UNMATCHED_BEGIN else "end"
                self.um_iid[kind, e] = iid(f"unmatched {what}: {t.event_name(e)}")
        self.iid = iid
        self.names = names

    # unmatched records and dropped counts become instants on their lane
    def _extras(self):
        t = self.trace
        um = t.unmatched
        dl, at, labels = drop_marks(self.tl)
        d_iid = np.array([self.iid(name) for name in labels], np.uint64)
        lane = np.concatenate([self.tl.um_lane, dl])
        time = np.concatenate([um["time_ns"].astype(np.int64), at])
        iids = np.concatenate([self.um_iid[um["kind"].astype(np.int64), um["event"]], d_iid])
        order = np.argsort(lane, kind="stable")
        self.x_lane, self.x_time, self.x_iid = lane[order], time[order], iids[order]

    def _lane_index(self):
        ev_lane = self.ev_lane
        self.ev_order = None
        if len(ev_lane) > 1 and bool((ev_lane[1:] < ev_lane[:-1]).any()):
            self.ev_order = np.argsort(ev_lane, kind="stable")
        self.ev_count = np.bincount(ev_lane, minlength=self.nl)
        self.ev_first = np.cumsum(self.ev_count) - self.ev_count
        self.x_count = np.bincount(self.x_lane, minlength=self.nl)
        self.x_first = np.cumsum(self.x_count) - self.x_count
        self.rows_per_lane = self.ev_count + self.x_count

    def _uuid(self) -> int:
        self.next_uuid += 1
        return self.next_uuid - 1

    def chunks(self) -> Iterator[bytes]:
        t = self.trace
        interned = b"".join(
            _fb(2, _fv(1, i) + _fb(2, name)) for name, i in self.names.items()
        )  # InternedData.event_names: EventName {iid = 1, name = 2}
        yield _packet(_fv(13, 1), _fb(12, interned))  # sequence_flags = INCREMENTAL_STATE_CLEARED
        self._sent_names = len(self.names)

        # Top level: the root (GPU-wide 'busy SMs', the launches under it), then one track per
        # SM, each its 'resident blocks' counter with its lanes under it. The UI opens top-level
        # tracks collapsed, showing their own counter, and orders them by name (sm_sort_name).
        tl = self.tl
        used = self.rows_per_lane > 0
        live = self.lo[used | t.lanes["initialized"].astype(bool)]
        ref0 = int(live.min()) if len(live) else 0
        self.origin = min(int(t.start_ns), ref0)
        about = _fb(14, "\n".join(self._about()))  # shown by the track's help
        share = _fb(8, _fb(7, "resident blocks"))  # CounterDescriptor.y_axis_share_key
        root = (_fv(1, ROOT_UUID) + _fb(2, tl.root_name) + about + _fb(8, b"")
                + _fv(11, EXPLICIT))  # fmt: skip
        # A descriptor goes once: with its counter's block, or here when it has no counter.
        occ = tl.occupancy
        busy = tl.busy
        with_counter = set(np.unique(occ["sm_index"]).tolist())
        head = [] if len(busy["time_ns"]) else [_packet(_fb(60, root))]
        sm_desc = []
        for i in range(len(self.sms)):
            sm_desc.append(_fv(1, self.sm_uuid0 + i) + _fb(2, sm_sort_name(tl, i)) + share
                           + _fv(11, EXPLICIT) + _fv(15, MERGE_NONE))  # fmt: skip
            if i not in with_counter:
                head.append(_packet(_fb(60, sm_desc[-1])))
        head.append(self._window())
        blocks = []  # (header, times, types, iids, counter values)
        if len(busy["time_ns"]):
            times, vals = busy["time_ns"], busy["value"]
            if times[0] > ref0:
                times, vals = np.append(ref0, times), np.append(0, vals)
            blocks.append((root, ROOT_UUID, times, np.full(len(times), TYPE_COUNTER), None, vals))
        sms_occ, first = np.unique(occ["sm_index"], return_index=True)
        ends = np.append(first[1:], len(occ["sm_index"]))[: len(first)]
        for i, a, b in zip(sms_occ.tolist(), first.tolist(), ends.tolist(), strict=True):
            u = self.sm_uuid0 + i
            times, vals = occ["time_ns"][a:b], occ["value"][a:b]
            if times[0] > ref0:  # start each counter at 0
                times, vals = np.append(ref0, times), np.append(0, vals)
            blocks.append((sm_desc[i], u, times, np.full(len(times), TYPE_COUNTER), None, vals))
        cut_at = dict(tl.cuts)
        L = tl.launches
        if tl.launch_track is not None:  # packed: launches share tracks
            blocks.extend(self._launch_track_blocks())
            L = {k: v[:0] for k, v in L.items()}
        for i, (c, lo, hi) in enumerate(zip(L["capture"].tolist(), L["start_ns"].tolist(),
                                            L["end_ns"].tolist(), strict=True)):  # fmt: skip
            u = self.launch_uuid0 + i
            label = tl.launch_name(c)
            times, types, iids = [lo, hi], [SLICE_BEGIN, SLICE_END], [self.iid(label), 0]
            if lo in cut_at:  # the host gap before this launch was cut: say so, and by how much
                times, types = [lo, *times], [TYPE_INSTANT, *types]
                iids = [self.iid(f"host gap cut: {cut_at[lo] / 1e6:.3f} ms"), *iids]
            desc = (_fv(1, u) + _fv(5, ROOT_UUID) + _fb(2, label) + _fv(12, i)
                    + _fv(15, MERGE_NONE))  # fmt: skip
            blocks.append((desc, u, np.array(times), np.array(types),
                           np.array(iids, np.uint64), None))  # fmt: skip
        # Kernel names were interned after packet 0: send them (same generation, same table).
        yield self._interned_update()
        yield b"".join(head)
        yield self._encode_blocks(blocks, ref0)
        if tl.summary is not None:
            yield self._encode_blocks(self._summary_blocks(ref0), ref0, double=True)

        # Lanes: in order of reference time, in chunks of about CHUNK_ROWS rows.
        lanes_sorted = np.flatnonzero(used)
        lanes_sorted = lanes_sorted[np.argsort(self.lo[lanes_sorted], kind="stable")]
        csum = np.cumsum(self.rows_per_lane[lanes_sorted])
        cut = np.searchsorted(csum, np.arange(CHUNK_ROWS, int(csum[-1]) if len(csum) else 0,
                                              CHUNK_ROWS), side="left")  # fmt: skip
        for part in np.split(lanes_sorted, np.unique(cut + 1)):
            if len(part):
                yield self._lane_chunk(part)

    def _about(self) -> list[str]:
        """The root's description: the timeline's notes, the time origin, the launch in view."""
        tl = self.tl
        lines = [*tl.notes, f"times are ns from the profile's start: %globaltimer "
                            f"{self.origin} ns"]  # fmt: skip
        if tl.focus is not None and len(tl.launches["capture"]) > 1:
            c = int(tl.launches["capture"][tl.focus])
            lines.append(f"opens on {tl.launch_name(c)}, the longest launch; zoom out (or "
                         "press w/s) for the others")  # fmt: skip
        return lines

    def _window(self) -> bytes:
        """The span the UI opens on: the longest launch, with a margin. The Perfetto UI opens
        on the trace's bounds clipped to the tracing_started / tracing_disabled service events
        (metadata tracing_started_ns / tracing_disabled_ns); they go on a sequence of their own
        with trace-clock timestamps."""
        tl = self.tl
        if tl.focus is None or len(tl.launches["capture"]) < 2:
            return b""
        lo, hi = (int(tl.launches[k][tl.focus]) - self.origin for k in ("start_ns", "end_ns"))
        pad = max(1, (hi - lo) // 50)
        lo, hi = max(0, lo - pad), hi + pad

        def event(ts: int, field: int) -> bytes:
            return _fb(1, _fv(8, ts) + _fv(10, SEQ_ID + 1) + _fb(69, _fv(field, 1)))

        return event(lo, 2) + event(hi, 5)  # tracing_started, tracing_disabled

    def _launch_track_blocks(self) -> list:
        """Packed launches: one track per row of `tl.launch_track`, its launches in time order."""
        tl = self.tl
        L, track = tl.launches, tl.launch_track
        out = []
        for k, name in enumerate(tl.launch_track_names):
            rows = np.flatnonzero(track == k)
            rows = rows[np.argsort(L["start_ns"][rows], kind="stable")]
            u = self.launch_uuid0 + k
            times = np.stack([L["start_ns"][rows], L["end_ns"][rows]], 1).reshape(-1)
            types = np.tile([SLICE_BEGIN, SLICE_END], len(rows))
            iids = np.stack([[self.iid(tl.launch_name(int(c))) for c in L["capture"][rows]],
                             np.zeros(len(rows), np.int64)], 1).reshape(-1)  # fmt: skip
            desc = _fv(1, u) + _fv(5, ROOT_UUID) + _fb(2, name) + _fv(12, k) + _fv(15, MERGE_NONE)
            out.append((desc, u, times, types, iids.astype(np.uint64), None))
        return out

    def _summary_blocks(self, ref0: int) -> list:
        """One counter track per (SM, event) of the summary, under its SM after its occupancy."""
        sm = self.tl.summary
        top = int(sm["event"].max()) + 1 if len(sm["event"]) else 1
        key = sm["sm_index"].astype(np.int64) * top + sm["event"]
        uniq, first = np.unique(key, return_index=True)
        ends = np.append(first[1:], len(key))[: len(first)]  # none when nothing was summarised
        blocks = []
        for k, a, b in zip(uniq.tolist(), first.tolist(), ends.tolist(), strict=True):
            i, e = divmod(k, top)
            u = self.next_uuid
            self.next_uuid += 1
            desc = (_fv(1, u) + _fv(5, self.sm_uuid0 + i)
                    + _fb(2, f"{self.trace.event_name(e)} (active ranges)")
                    + _fb(8, b"") + _fv(12, SUMMARY_RANK0 + e) + _fv(15, MERGE_NONE))  # fmt: skip
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
        return _packet(_fb(12, body))

    _sent_names = 0

    def _encode_blocks(self, blocks, ref0: int, double: bool = False) -> bytes:
        if not blocks:
            return b""
        headers, times, types, iids, ctr, bidx = [], [], [], [], [], []
        for i, (desc, u, tm, ty, ii, cv) in enumerate(blocks):
            headers.append(_block_header(ref0 - self.origin, u, desc))
            times.append(np.asarray(tm, np.int64))
            types.append(np.asarray(ty, np.uint8))
            iids.append(np.zeros(len(tm), np.uint64) if ii is None else ii)
            ctype = np.float64 if double else np.int64
            ctr.append(np.zeros(len(tm), ctype) if cv is None else np.asarray(cv, ctype))
            bidx.append(np.full(len(tm), i))
        tm = np.concatenate(times)
        block = np.concatenate(bidx)
        prev = np.empty_like(tm)
        prev[1:] = tm[:-1]
        starts = np.searchsorted(block, np.arange(len(blocks)))
        prev[starts] = ref0
        return _encode(
            (tm - prev).astype(np.uint64),
            np.concatenate(types),
            np.concatenate(iids),
            block,
            headers,
            counter=np.concatenate(ctr),
        )

    def _lane_chunk(self, lanes: np.ndarray) -> bytes:
        t = self.trace
        ev = t.events
        # Gather this chunk's event rows and extra instants, lane by lane.
        idx = _ranges(self.ev_first[lanes], self.ev_count[lanes])
        if self.ev_order is not None:
            idx = self.ev_order[idx]
        xi = _ranges(self.x_first[lanes], self.x_count[lanes])
        lane_pos = np.concatenate(
            [
                np.repeat(np.arange(len(lanes)), self.ev_count[lanes]),
                np.repeat(np.arange(len(lanes)), self.x_count[lanes]),
            ]
        )
        start = np.concatenate([ev["start_ns"][idx], self.x_time[xi]])
        end = np.concatenate([ev["end_ns"][idx], self.x_time[xi]])
        kind = ev["kind"][idx]
        is_range = np.concatenate([kind == RANGE, np.zeros(len(xi), bool)])
        iid = np.concatenate([self.ev_iid[ev["event"][idx]], self.x_iid[xi]])
        del kind
        ref = self.lo[lanes]
        event = np.concatenate([ev["event"][idx], np.zeros(len(xi), np.int32)])
        pk = order_rows(start, end, is_range, lane_pos, ref, event)
        del event
        del start, end

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
        return names + parents + _encode(dt, etype, iid[row], bidx, headers)

    def _lane_header(self, g: int, level: int, ref_ns: int) -> bytes:
        return _block_header(ref_ns - self.origin, *self._lane_descriptor(g, level))

    def _lane_headers(self, lanes: np.ndarray, bkeys: np.ndarray, ref: np.ndarray) -> list[bytes]:
        """_lane_header of every block key (lane position * LEVELS + level) of a chunk.

        A lane of k mutually overlapping ranges has k overlap tracks, each needing its own block
        header, so this is per track: what does not change within a lane (its clock snapshot,
        name, parent) is built once per lane, and an overlap track's header is then a few byte
        concatenations, the same bytes _block_header(_lane_descriptor) would write."""
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
                    1, _fv(1, BOOTTIME) + _fv(2, ref_ns))
                clock_pk = _packet(_fb(6, clocks))
                base_name = self.tl.lane_name(g, 0).encode()
                parent_f = _fv(5, self.lane_uuid0 + g)
            u = self.next_uuid
            self.next_uuid += 1
            name = base_name + (b" (overlap)" if level == 1 else b" (overlap %d)" % level)
            uv = v(u)
            # _lane_descriptor's fields and _block_header's packets, spelled out.
            desc = (b"\x08" + uv + parent_f + b"\x12" + v(len(name)) + name + b"\x60" + v(level)
                    + merge)  # fmt: skip
            inner = clock_default + tag_track_defaults + v(1 + len(uv)) + b"\x58" + uv
            body = seq + tag_desc + v(len(desc)) + desc + tag_defaults + v(len(inner)) + inner
            out.append(clock_pk + b"\x0a" + v(len(body)) + body)
        return out

    def _lane_descriptor(self, g: int, level: int) -> tuple[int, bytes]:
        """(uuid, TrackDescriptor) of lane row `g` at `level`: the lane's own track under its SM,
        ranked in the timeline's order; an overlap level under the lane's track."""
        tl = self.tl
        name = tl.lane_name(g, level)
        if level == 0:
            u = self.lane_uuid0 + g
            self.declared.add(g)
            parent = self.sm_uuid0 + int(tl.lane_sm_index[g])
            rank = tl.lane_rank(g)
            extra = _fv(11, EXPLICIT)  # its overlap tracks, by level
        else:
            u = self.next_uuid
            self.next_uuid += 1
            parent, rank, extra = self.lane_uuid0 + g, level, b""
        desc = (_fv(1, u) + _fv(5, parent) + _fb(2, name) + extra + _fv(12, rank)
                + _fv(15, MERGE_NONE))  # fmt: skip
        return u, desc

    def _undeclared_parents(self, lanes: np.ndarray, bkeys: np.ndarray) -> bytes:
        """Descriptors of lanes that have overlap tracks but no row at level 0 (their parent)."""
        out = b""
        for k in bkeys.tolist():
            g = int(lanes[k // LEVELS])
            if k % LEVELS and g not in self.declared:
                out += _packet(_fb(60, self._lane_descriptor(g, 0)[1]))
        return out


def sm_sort_name(tl: Timeline, i: int) -> str:
    """SM i's name as a top-level track: the Perfetto UI sorts top-level tracks by name (SQLite
    binary order, 'SM 112' before 'SM 8'), so the number is padded with spaces on the left to
    the widest SM id; the UI's track titles collapse runs of spaces ('SM 8')."""
    name = tl.sm_name(i)
    width = max((len(str(int(s))) for s in tl.sms if s >= 0), default=1)
    sm = int(tl.sms[i])
    if sm < 0:
        return name
    return name.replace(f"SM {sm}", "SM " + str(sm).rjust(width), 1)


def _ranges(first: np.ndarray, count: np.ndarray) -> np.ndarray:
    """Concatenation of arange(first[i], first[i] + count[i]) for all i."""
    total = int(count.sum())
    if total == 0:
        return np.zeros(0, np.int64)
    starts = np.cumsum(count) - count
    return np.arange(total) - np.repeat(starts - first, count)


__all__ = ["to_perfetto_bytes", "iter_perfetto_chunks", "order_rows", "INSTANT"]
