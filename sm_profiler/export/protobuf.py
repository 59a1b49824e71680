"""Protobuf encoding of Perfetto trace packets: varints and fields written by hand, and the
per-event packets encoded with numpy (one pass per byte position, no Python loop per event).

`sm_profiler.export.perfetto` decides which packets a trace has and in what order; this module
only turns them into bytes. Field numbers are from perfetto/protos/perfetto/trace/{trace_packet,
track_event/*,clock_snapshot,interned_data/*}.proto.
"""

from __future__ import annotations

import numpy as np

SEQ_ID = 1
CLOCK_ID = 64  # the first sequence-scoped clock id
BOOTTIME = 6  # BuiltinClock.BOOTTIME: the default trace clock

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


# -- Python-level protobuf writing, for the few packets that are not per event ----------------


_VARINT_SMALL = [bytes([i]) for i in range(128)]  # tags and small ids: most varints written


def varint(v: int) -> bytes:
    if 0 <= v < 128:
        return _VARINT_SMALL[v]
    v &= (1 << 64) - 1  # negative int64 -> two's complement, as protobuf does
    out = bytearray()
    while v > 0x7F:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def field_varint(field: int, v: int) -> bytes:
    return varint(field << 3) + varint(v)


def field_bytes(field: int, payload: bytes | str) -> bytes:
    if isinstance(payload, str):
        payload = payload.encode()
    return varint((field << 3) | 2) + varint(len(payload)) + payload


def packet(*fields: bytes) -> bytes:
    return field_bytes(1, field_varint(10, SEQ_ID) + b"".join(fields))


def block_header(ref_ns: int, track_uuid: int, descriptor: bytes = b"") -> bytes:
    """Reset clock 64 to ref_ns and point the defaults at `track_uuid`."""
    fv, fb = field_varint, field_bytes
    clocks = fb(1, fv(1, CLOCK_ID) + fv(2, ref_ns) + fv(3, 1)) + fb(
        1, fv(1, BOOTTIME) + fv(2, ref_ns)
    )
    defaults = fb(59, fv(58, CLOCK_ID) + fb(11, fv(11, track_uuid)))
    track = fb(60, descriptor) if descriptor else b""
    return packet(fb(6, clocks)) + packet(track, defaults)


# -- vectorized varints and event packets --------------------------------------------------------


def varint_lengths(v: np.ndarray) -> np.ndarray:
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


def put_varints(out: np.ndarray, pos: np.ndarray, v: np.ndarray, n: np.ndarray) -> None:
    """Write varint v[i] (n[i] bytes) at out[pos[i]:], one numpy pass per byte position."""
    k = 0
    while len(v):
        more = n > k + 1
        out[pos + k] = ((v & np.uint64(0x7F)).astype(np.uint8)) | (more.astype(np.uint8) << 7)
        if not more.any():
            break
        pos, v, n = pos[more], v[more] >> np.uint64(7), n[more]
        k += 1


def encode_events(
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
    l_dt = varint_lengths(dt)
    l_iid = np.zeros(n, np.int64)
    l_iid[has_name] = 1 + varint_lengths(iid[has_name])
    te_len = 2 + l_iid
    is_ctr = etype == TYPE_COUNTER
    double = counter is not None and counter.dtype.kind == "f"
    if double:  # double_counter_value: a fixed 8 bytes
        te_len[is_ctr] += 2 + 8
    elif counter is not None:
        cv = counter.astype(np.int64).view(np.uint64)
        l_cv = varint_lengths(cv[is_ctr])
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
    put_varints(out, pos + 3, dt, l_dt)
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
    put_varints(out, r + 1, named, varint_lengths(named))
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
        put_varints(out, r + 2, cv[is_ctr], l_cv)
    return out.tobytes()
