"""Trace exporters: native Perfetto protobuf and Chrome JSON, chosen by name or file extension.

Exporters read a decoded `TraceData` and write bytes; they import nothing from the device side.
The track model both formats share lives here: one process per SM (pids ordered by SM id), one
thread per (capture, block, group) lane, a "resident blocks" counter per SM.
"""

from __future__ import annotations

import gzip
import os

import numpy as np

from ..errors import ConfigError
from ..paths import atomic_output, check_writable
from ..trace import TraceData

__all__ = ["export", "to_perfetto_bytes", "to_chrome_json", "EXTENSIONS"]

# Extension -> format name. Longest suffix first, so ".json.gz" wins over ".gz".
EXTENSIONS = {
    ".perfetto-trace": "perfetto",
    ".pftrace": "perfetto",
    ".json.gz": "chrome",
    ".json": "chrome",
}
FORMATS = ("perfetto", "chrome")


def export(trace: TraceData, path: str | os.PathLike, format: str | None = None) -> None:
    """Write `trace` to `path` as Perfetto protobuf or Chrome JSON.

    The format follows the extension (.perfetto-trace / .pftrace, .json / .json.gz) unless
    `format` ("perfetto" or "chrome") is given. The path is checked before any work, and the
    file is written under a temporary name and renamed, so a bad path or a failed write raises
    CaptureError and an existing file is never half-overwritten.
    """
    fmt_name = _format_for(path, format)
    check_writable(path)
    gz = os.fspath(path).lower().endswith(".gz")
    # Written to a temporary name and renamed: a failure part-way leaves an older file intact.
    with atomic_output(path) as tmp:
        if fmt_name == "perfetto":
            from .perfetto import iter_perfetto_chunks

            opener = gzip.open if gz else open
            with opener(tmp, "wb") as f:
                for chunk in iter_perfetto_chunks(trace):
                    f.write(chunk)
        else:
            from .chrome import write_chrome_json

            write_chrome_json(trace, tmp, compress=gz)


def to_perfetto_bytes(trace: TraceData) -> bytes:
    """The whole Perfetto trace (a serialized `perfetto.protos.Trace`) as bytes."""
    from .perfetto import to_perfetto_bytes as impl

    return impl(trace)


def to_chrome_json(trace: TraceData) -> dict:
    """The Chrome trace-event JSON object ({"traceEvents": [...], ...})."""
    from .chrome import to_chrome_json as impl

    return impl(trace)


def _format_for(path: str | os.PathLike, format: str | None) -> str:
    if format is not None:
        if format not in FORMATS:
            raise ConfigError(f"unknown export format {format!r}; use one of {', '.join(FORMATS)}")
        return format
    name = os.fspath(path).lower()
    for ext, fmt_name in EXTENSIONS.items():
        if name.endswith(ext):
            return fmt_name
    raise ConfigError(
        f"cannot tell the trace format of {os.fspath(path)!r} from its extension; use one of "
        f"{', '.join(EXTENSIONS)} or pass format='perfetto' / format='chrome'"
    )


# -- the track model shared by both formats ---------------------------------------------------


def _lane_base(trace: TraceData) -> np.ndarray:
    lanes = trace.lanes
    n_caps = max(
        len(trace.kernels), int(lanes["capture"].max()) + 1 if len(lanes["capture"]) else 0
    )
    base = np.zeros(n_caps, np.int64)
    cap = lanes["capture"]
    if len(cap):
        first = np.ones(len(cap), bool)
        first[1:] = cap[1:] != cap[:-1]
        rows = np.flatnonzero(first)
        base[cap[rows]] = rows - lanes["lane"][rows]
    return base


def lane_row_of(trace: TraceData, table: dict[str, np.ndarray]) -> np.ndarray:
    """Row in `trace.lanes` of each row of `table` (events or unmatched).

    int32 while the lanes table allows: this column is as long as the events table.
    """
    base = _lane_base(trace)
    if len(trace.lanes["lane"]) < 2**31:
        return base.astype(np.int32)[table["capture"]] + table["lane"].astype(np.int32)
    return base[table["capture"]] + table["lane"].astype(np.int64)


def sm_pids(lane_sm: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(sorted distinct SM ids, pid of each) with pids 1.. in SM order; SM -1 (unknown) first."""
    sms = np.unique(lane_sm)
    return sms, np.arange(1, len(sms) + 1, dtype=np.int64)


def process_name(trace: TraceData, sm: int) -> str:
    name = f"SM {sm}" if sm >= 0 else "unknown SM"
    # Under the CPU interpreter SM ids are program id modulo a constant and times are host
    # clock: say so where the reader looks first.
    return f"{name} (emulated)" if trace.emulated else name


def thread_name(trace: TraceData, capture: int, block: int, group: int, level: int = 0) -> str:
    """'block 3 · producer'; with several captures the launch comes first, since an SM's
    process holds the lanes of every launch: 'gemm · block 3', 'gemm (launch 2) · block 3'."""
    label = trace.lane_label(capture, block, group)
    if len(trace.kernels) > 1:
        label = f"{trace.capture_name(capture)} · {label}"
    if level == 1:
        label += " (overlap)"
    elif level > 1:
        label += f" (overlap {level})"
    return label


def kernel_label(trace: TraceData, capture: int) -> str:
    return trace.capture_name(capture)


def lane_extent(trace: TraceData, ev_lane: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(earliest, latest) time of each lane: anchor, events and unmatched records.

    Lanes with nothing at all get (anchor, anchor); uninitialised empty lanes (0, 0).
    """
    lanes = trace.lanes
    big = np.iinfo(np.int64).max
    anchor = lanes["anchor_ns"].astype(np.int64)
    init = lanes["initialized"].astype(bool)
    lo = np.where(init, anchor, big)
    hi = np.where(init, anchor, np.iinfo(np.int64).min)
    ev = trace.events
    if len(ev_lane):
        seg, counts = _segments(ev_lane)
        if seg is not None:
            lane_ids = ev_lane[seg]
            lo[lane_ids] = np.minimum(lo[lane_ids], np.minimum.reduceat(ev["start_ns"], seg))
            hi[lane_ids] = np.maximum(hi[lane_ids], np.maximum.reduceat(ev["end_ns"], seg))
        else:
            np.minimum.at(lo, ev_lane, ev["start_ns"])
            np.maximum.at(hi, ev_lane, ev["end_ns"])
    um = trace.unmatched
    if len(um["time_ns"]):
        rows = lane_row_of(trace, um)
        np.minimum.at(lo, rows, um["time_ns"])
        np.maximum.at(hi, rows, um["time_ns"])
    empty = lo == big
    lo[empty] = 0
    hi[empty] = 0
    return lo, hi


def _segments(keys: np.ndarray):
    """Start index of each run of equal keys if `keys` is sorted, else None."""
    if len(keys) > 1 and bool((keys[1:] < keys[:-1]).any()):
        return None, None
    first = np.ones(len(keys), bool)
    first[1:] = keys[1:] != keys[:-1]
    seg = np.flatnonzero(first)
    return seg, np.diff(np.append(seg, len(keys)))


def resident_blocks(
    trace: TraceData, lane_lo: np.ndarray, lane_hi: np.ndarray
) -> dict[str, np.ndarray]:
    """SM occupancy timeline: value of each SM's "resident blocks" counter after each change.

    A block is resident on its SM from its lanes' earliest time (the anchor) to their latest
    event end. Returns sm, time_ns, value; sorted by (sm, time_ns); one row per distinct time.
    """
    lanes = trace.lanes
    used = lanes["initialized"].astype(bool) | (lane_hi > 0)
    cap = lanes["capture"][used].astype(np.int64)
    blk = lanes["block"][used].astype(np.int64)
    sm = lanes["sm"][used].astype(np.int64)
    lo, hi = lane_lo[used], lane_hi[used]
    if len(cap) == 0:
        z = np.zeros(0, np.int64)
        return {"sm": z, "time_ns": z, "value": z}
    # One interval per (capture, block, sm): groups of a block share its residency.
    order = np.lexsort((blk, cap, sm))
    cap, blk, sm, lo, hi = cap[order], blk[order], sm[order], lo[order], hi[order]
    first = np.ones(len(cap), bool)
    first[1:] = (cap[1:] != cap[:-1]) | (blk[1:] != blk[:-1]) | (sm[1:] != sm[:-1])
    g = np.flatnonzero(first)
    b_sm, b_lo, b_hi = sm[g], np.minimum.reduceat(lo, g), np.maximum.reduceat(hi, g)
    # +1 when a block arrives, -1 when it leaves; net change per (sm, time), then a running sum.
    s = np.concatenate([b_sm, b_sm])
    t = np.concatenate([b_lo, b_hi])
    d = np.concatenate([np.ones(len(g), np.int64), -np.ones(len(g), np.int64)])
    order = np.lexsort((t, s))
    s, t, d = s[order], t[order], d[order]
    last = np.ones(len(s), bool)
    last[:-1] = (s[1:] != s[:-1]) | (t[1:] != t[:-1])
    cs = np.cumsum(d)
    sm_first = np.ones(len(s), bool)
    sm_first[1:] = s[1:] != s[:-1]
    starts = np.flatnonzero(sm_first)
    before = (cs - d)[starts]
    value = cs - np.repeat(before, np.diff(np.append(starts, len(s))))
    return {"sm": s[last], "time_ns": t[last], "value": value[last]}


def kernel_spans(trace: TraceData, lane_lo: np.ndarray, lane_hi: np.ndarray):
    """(start_ns, end_ns) of each capture over its lanes; (0, 0) for a capture with nothing."""
    n = len(trace.kernels)
    lanes = trace.lanes
    used = lanes["initialized"].astype(bool) | (lane_hi > 0)
    lo = np.full(n, np.iinfo(np.int64).max, np.int64)
    hi = np.full(n, np.iinfo(np.int64).min, np.int64)
    cap = lanes["capture"][used].astype(np.int64)
    np.minimum.at(lo, cap, lane_lo[used])
    np.maximum.at(hi, cap, lane_hi[used])
    empty = lo > hi
    lo[empty] = 0
    hi[empty] = 0
    return lo, hi
