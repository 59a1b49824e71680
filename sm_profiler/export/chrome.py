"""Chrome trace-event JSON export, for small traces (chrome://tracing, Perfetto's legacy importer),
and the merged JSON of several ranks (sm_profiler.export.merge decides their time axis).

Times are microseconds since one integer ns origin per file (a single trace's start,
`trace.start_ns`; a merged trace's earliest row, `time_origin`), each written by one division of
an exact int64 difference: a reader's double then gives back every ns (the Perfetto UI computes
llround(ts * 1000) and a slice's end as ts + dur), so programs that follow each other on an SM
slot never overlap there. Absolute %globaltimer values (ns since the epoch) as µs would not: a
double steps by 0.25 µs at 1.7e15 µs, and by about 1 ns already at the 5e12 µs of Kineto's ts
late in a quarter, where the UI drops the later of two slices that meet. pids are 1.. in SM
order plus one "launches" process; tids are unique in the file and never equal a pid, because
the Perfetto importer merges a thread whose tid equals a pid into that process.
"""

from __future__ import annotations

import gzip
import json
import math
import os
from collections.abc import Iterable
from typing import TYPE_CHECKING, BinaryIO

import numpy as np

from ..errors import ConfigError
from ..trace.drawing import LEVELS, Drawing, as_drawing
from ..trace.model import RANGE

if TYPE_CHECKING:
    from ..trace.timeline import Timeline

# Merged ranks' pids: from PID_BASE up, rank after rank; each rank takes as many ids as its
# trace uses, so no rank's ids reach into the next one's however many lanes.
PID_BASE = 0x7000_0000
MAX_ID = (1 << 31) - 1  # Chrome JSON pids and tids are read as int32


def write_chrome_json(
    tl: Drawing | Timeline, path: str | os.PathLike, compress: bool = False
) -> None:
    write_json_bytes(encode_json(to_chrome_json(tl)), path, compress)


def write_trace(d: Drawing, f: BinaryIO) -> None:
    """The Chrome JSON of `d` written to `f` (export's writer: sm_profiler.export.formats)."""
    f.write(encode_json(to_chrome_json(d)))


def encode_json(doc: dict) -> bytes:
    """`doc` as compact UTF-8 JSON, the bytes every Chrome JSON file of sm_profiler holds."""
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode()


def write_json_bytes(data: bytes, path: str | os.PathLike, compress: bool = False) -> None:
    opener = gzip.open if compress else open
    with opener(path, "wb") as f:
        f.write(data)


def to_chrome_json(tl: Drawing | Timeline, origin_ns: int | None = None) -> dict:
    """The drawing (or the Timeline's) as Chrome JSON: one process per SM (its order and names
    from the timeline, as process_sort_index / thread_sort_index), one thread per lane, a
    "launches" process. Times in µs since `origin_ns` (default: the trace's start), which
    otherData's start_ns says."""
    d = as_drawing(tl, "Chrome JSON", "to_chrome_json")
    t0 = d.start_ns if origin_ns is None else int(origin_ns)
    out: list[dict] = []
    for i in range(len(d.sms)):
        out.append(_meta("process_name", i + 1, 0, {"name": d.sm_names[i]}))
        out.append(_meta("process_sort_index", i + 1, 0, {"sort_index": i}))
    tids = _LaneThreads(d, tid0=len(d.sms) + 2)  # pids 1.. the SMs, then the launches'
    out += tids.meta
    out += _slice_events(d, tids, t0)
    out += _mark_events(d, tids, t0)
    out += _counter_events(d, t0)
    out += _launch_events(d, t0, pid=len(d.sms) + 1, tid0=tids.next_tid)
    return {
        "traceEvents": out,
        "displayTimeUnit": "ns",
        "otherData": {
            "start_ns": t0,
            "emulated": d.emulated,
            "dropped_records": d.dropped_total,
            "kernels": d.kernel_names,
            "notes": d.notes,
        },
    }


class _LaneThreads:
    """The threads of the lanes: one per (lane, overlap level) that has a row, and one for each
    lane that has a dropped-records mark; a lane's own thread is tid0 + its row, its overlap
    threads come after all of those (partial overlaps go to an extra thread)."""

    def __init__(self, d: Drawing, tid0: int):
        lanes, ev, marks = d.lanes, d.slices, d.marks
        nl = len(lanes)
        self.pid_of_lane = lanes.sm + 1
        um_lane = marks["lane"][~marks["drop"]]  # a drop mark needs its lane's thread too
        has_rows = np.bincount(ev["lane"], minlength=nl) + np.bincount(um_lane, minlength=nl) > 0
        self.thread_key = ev["lane"].astype(np.int64) * LEVELS + d.levels
        keys = np.unique(
            np.concatenate(
                [
                    self.thread_key,
                    um_lane.astype(np.int64) * LEVELS,
                    np.flatnonzero(has_rows) * LEVELS,
                ]
            )
        )
        self.tid_of: dict[int, int] = {}
        self.meta: list[dict] = []
        extra = tid0 + nl
        for k in keys.tolist():
            g, lv = divmod(k, LEVELS)
            if lv == 0:
                tid = tid0 + g
            else:
                tid, extra = extra, extra + 1
            self.tid_of[k] = tid
            pid = int(self.pid_of_lane[g])
            self.meta.append(_meta("thread_name", pid, tid, {"name": lanes.track_name(g, lv)}))
            sort = int(lanes.rank[g]) * LEVELS + lv
            self.meta.append(_meta("thread_sort_index", pid, tid, {"sort_index": sort}))
        self.next_tid = extra


def _slice_events(d: Drawing, tids: _LaneThreads, t0: int) -> list[dict]:
    """The ranges ('X') and instants ('i') on their lanes' threads."""
    ev, names = d.slices, d.slice_names
    tid_arr = np.array([tids.tid_of[k] for k in tids.thread_key.tolist()], np.int64)
    ts, dur = us_since(ev["start_ns"], t0), us_since(ev["end_ns"], ev["start_ns"])
    is_range = ev["kind"] == RANGE
    out = []
    for e, r, p, t, s, du in zip(
        ev["event"].tolist(),
        is_range.tolist(),
        tids.pid_of_lane[ev["lane"]].tolist(),
        tid_arr.tolist(),
        ts.tolist(),
        dur.tolist(),
        strict=True,
    ):
        if r:
            out.append({"name": names[e], "ph": "X", "pid": p, "tid": t, "ts": s, "dur": du})
        else:
            out.append({"name": names[e], "ph": "i", "s": "t", "pid": p, "tid": t, "ts": s})
    return out


def _mark_events(d: Drawing, tids: _LaneThreads, t0: int) -> list[dict]:
    """Unmatched records, then dropped records (on a lane that has a thread), as instants."""
    marks, out = d.marks, []
    for g, t, n, drop in zip(
        marks["lane"].tolist(),
        us_since(marks["time_ns"], t0).tolist(),
        marks["name"].tolist(),
        marks["drop"].tolist(),
        strict=True,
    ):
        key = g * LEVELS
        if drop and key not in tids.tid_of:
            continue
        out.append(
            {
                "name": d.mark_names[n],
                "ph": "i",
                "s": "t",
                "pid": int(tids.pid_of_lane[g]),
                "tid": tids.tid_of[key],
                "ts": t,
            }
        )
    return out


def _counter_events(d: Drawing, t0: int) -> list[dict]:
    """Each SM's 'resident blocks' counter, then its summary counters ('C')."""
    occ, out = d.occupancy, []
    for p, s, v in zip(
        (occ["sm_index"] + 1).tolist(),
        us_since(occ["time_ns"], t0).tolist(),
        occ["value"].tolist(),
        strict=True,
    ):
        out.append({"name": "resident blocks", "ph": "C", "pid": p, "ts": s, "args": {"blocks": v}})
    if d.summary is not None:
        sm = d.summary
        for i, e, ts, v in zip(
            sm["sm_index"].tolist(),
            sm["event"].tolist(),
            us_since(sm["time_ns"], t0).tolist(),
            sm["value"].tolist(),
            strict=True,
        ):
            out.append(
                {
                    "name": d.summary_names[e],
                    "ph": "C",
                    "pid": i + 1,
                    "ts": ts,
                    "args": {"ranges": v},
                }
            )
    return out


def _launch_events(d: Drawing, t0: int, pid: int, tid0: int) -> list[dict]:
    """The "launches" process: a thread per launch track, each launch a slice after the mark of
    the host gap cut before it (if one was)."""
    out = [
        _meta("process_name", pid, 0, {"name": "launches"}),
        _meta("process_sort_index", pid, 0, {"sort_index": -1}),
    ]
    L = d.launches
    track_names = [name for name, _ in d.launch_tracks]
    spans = zip(L["track"].tolist(), L["start_ns"].tolist(), L["end_ns"].tolist(), strict=True)
    for r, (k, k_lo, k_hi) in enumerate(spans):
        tid = tid0 + k
        out.append(_meta("thread_name", pid, tid, {"name": track_names[k]}))
        ts, dur = float(us_since(k_lo, t0)), float(us_since(k_hi, k_lo))
        name = d.launch_names[r]
        out.append({"name": name, "ph": "X", "pid": pid, "tid": tid, "ts": ts, "dur": dur})
        cut = d.launch_cuts.get(r)
        if cut is not None:
            out.append({"name": cut, "ph": "i", "s": "t", "pid": pid, "tid": tid, "ts": ts})
    return out


def _meta(name: str, pid: int, tid: int, args: dict) -> dict:
    return {"name": name, "ph": "M", "pid": pid, "tid": tid, "args": args}


def us_since(t_ns, origin_ns) -> np.ndarray:
    """µs from `origin_ns` (an int or an array of them) to `t_ns`: the exact int64 difference,
    divided once (a double nearest to its value; every ns of it while under 2**53 ns)."""
    return (np.asarray(t_ns, np.int64) - np.asarray(origin_ns, np.int64)) / 1e3


# -- one time origin for a trace that holds another tool's rows (torch.profiler's) -------------

# Kineto writes ts in µs from the start of the quarter (baseTimeNanoseconds), up to 8e12 µs,
# where a double steps by about 1 ns: the UI reads torch's own rows, and ours put on that axis,
# off by a ns, and two slices that meet overlap. A merged trace counts from its earliest row
# instead (whole seconds), torch's rows moved onto that origin exactly.
ORIGIN_STEP_NS = 10**9
# Torch rows further than this before our earliest program do not pull the origin back (Kineto
# writes rows it has no time for at ts 0, its base): they are put at the origin, as Kineto puts
# them at its base, and counted.
MAX_LEAD_NS = 86_400 * 10**9


def exact_ns(us) -> int | None:
    """A JSON time in µs (an int, or the double a parser made of its digits) as integer ns: an
    int times 1000, a double to the ns nearest its exact value (so the ns Kineto wrote as 3
    decimals, for ts below 2**43 µs); None for what is no finite number."""
    if not _finite(us):
        return None
    if isinstance(us, int):
        return us * 1000
    n, d = us.as_integer_ratio()  # exact; d is a power of two
    q, r = divmod(n * 1000, d)
    return q + (2 * r > d or (2 * r == d and q % 2 == 1))


def time_origin(ours_ns: int | None, docs: Iterable[dict]) -> int:
    """The time origin of a trace holding our programs (from `ours_ns`, their earliest time, None
    without any) and torch.profiler's rows (`docs`: its traces, baseTimeNanoseconds + ts): the
    whole second at or before the earliest of them (earliest_row_ns)."""
    lo = earliest_row_ns(ours_ns, docs)
    return 0 if lo is None else lo // ORIGIN_STEP_NS * ORIGIN_STEP_NS


def earliest_row_ns(ours_ns: int | None, docs: Iterable[dict]) -> int | None:
    """The earliest of `ours_ns` and torch.profiler's rows in `docs` (baseTimeNanoseconds + ts,
    exact ns), leaving out torch rows more than MAX_LEAD_NS before ours; None without any."""
    lows = [] if ours_ns is None else [int(ours_ns)]
    for doc in docs:
        base = int(doc.get("baseTimeNanoseconds", 0))
        floor_us = -math.inf if ours_ns is None else (int(ours_ns) - MAX_LEAD_NS - base) / 1e3
        times = (e.get("ts") for e in doc["traceEvents"])
        lo = min((t for t in times if _finite(t) and t >= floor_us), default=None)
        if lo is not None:
            lows.append(base + exact_ns(lo))
    return min(lows) if lows else None


def moved_ts(ts, delta_ns: int) -> tuple[object, bool]:
    """A torch row's ts (µs) moved by `delta_ns` exactly, and whether it fell before the new
    origin (then put at 0, see MAX_LEAD_NS); a ts that is no finite number stays as it is."""
    t = exact_ns(ts)
    if t is None:
        return ts, False
    t += delta_ns
    return max(t, 0) / 1000, t < 0


def moved_rows(events: list[dict], delta_ns: int) -> tuple[list[dict], int]:
    """Torch's rows with each ts moved by `delta_ns` exactly (moved_ts; the same objects where
    that is 0), and how many fell before the new origin."""
    if not delta_ns:
        return list(events), 0
    out, early = [], 0
    for e in events:
        if "ts" in e:
            ts, before = moved_ts(e["ts"], delta_ns)
            e, early = dict(e, ts=ts), early + before
        out.append(e)
    return out, early


def _finite(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


# -- several ranks on one time axis (sm_profiler.export.merge) ---------------------------------------


def ranks_json(
    ranks: list[tuple[int, Drawing | Timeline]],
    base_ns: int,
    doc: dict | None = None,
    other: dict | None = None,
    **keys,
) -> dict:
    """Chrome JSON of several ranks' drawings on one time axis, µs since `base_ns`: each rank's
    processes named `GPU r · SM s`, their pids and tids after the previous rank's, from
    PID_BASE, and `sm_profiler_dropped_records` (total and per rank). Added after the rows of
    `doc` (another trace, e.g. torch.profiler's, kept as it is; default an empty trace);
    `other`: {rank: kernels we did not record} drawn on the rank's SM processes
    (other_kernel_events); `keys` are set on the document."""
    ranks = [(r, as_drawing(d, "Chrome JSON", "to_chrome_json")) for r, d in ranks]
    events: list[dict] = []
    off = PID_BASE
    for r, d in ranks:
        evs, used = rank_events(d, r, base_ns, off)
        events += evs
        if other and r in other:
            more, extra = other_kernel_events(d, other[r], base_ns, off, off + used)
            events += more
            used += extra
        off += used
    if off - 1 > MAX_ID:
        raise ConfigError(
            f"the merged trace needs {off - PID_BASE:,} process and thread ids, more than Chrome "
            "JSON holds above merge.PID_BASE: merge fewer ranks or launches at a time"
        )
    if doc is None:
        doc = {"traceEvents": [], "displayTimeUnit": "ns"}
    # What each rank's buffers dropped, as to_chrome_json's otherData says it of one trace.
    per_rank = {str(r): d.dropped_total for r, d in ranks}
    dropped = {"total": sum(per_rank.values()), "per_rank": per_rank}
    keys = {"sm_profiler_dropped_records": dropped, **keys}
    return dict(doc, traceEvents=list(doc["traceEvents"]) + events, **keys)


def rank_events(
    tl: Drawing | Timeline, rank: int, base_ns: int, off: int
) -> tuple[list[dict], int]:
    """to_chrome_json's events of `tl` in µs since base_ns, with rank-prefixed processes whose
    pids and tids start at `off`; and how many ids they take."""
    doc = to_chrome_json(tl, base_ns)
    top = max((int(e.get(k, 0)) for e in doc["traceEvents"] for k in ("pid", "tid")), default=0)
    out = []
    for e in doc["traceEvents"]:
        e = dict(e)
        e["pid"] = off + int(e["pid"])
        if "tid" in e:
            e["tid"] = off + int(e["tid"])
        if e.get("ph") == "M" and e.get("name") == "process_name":
            e["args"] = {"name": f"GPU {rank} · {e['args']['name']}"}
        if e.get("ph") == "M" and e.get("name") == "process_sort_index":
            e["args"] = {"sort_index": 1000 + rank * 10000 + int(e["args"]["sort_index"])}
        out.append(e)
    return out, top + 1


OTHER_KERNELS = "other kernels (CUPTI)"


def other_kernel_events(
    d: Drawing, kernels: dict, base_ns: int, pid_off: int, tid_off: int
) -> tuple[list[dict], int]:
    """Slices of kernels we did not record (torch's CUPTI rows, sm_profiler.report.coverage
    .unseen_kernels) on the SM processes rank_events laid out at `pid_off`: kernel k on the
    first kernels["n_sms"][k] SMs of kernels["sms"] (SM ids of `d.sms`), in a thread
    'other kernels (CUPTI)' above each SM's own, one more per level of kernels that overlap
    (concurrent streams: kernels["level"], laid out by unseen_kernels). Thread ids from
    `tid_off`; returns the events and the ids taken."""
    start, end = np.asarray(kernels["start_ns"]), np.asarray(kernels["end_ns"])
    n_sms = np.asarray(kernels["n_sms"])
    if not len(start):
        return [], 0
    pids = (pid_off + np.searchsorted(d.sms, kernels["sms"]) + 1).tolist()
    width = len(pids)
    level = np.asarray(kernels["level"])
    levels = int(level.max()) + 1
    out: list[dict] = []
    for lv in range(levels):
        name = OTHER_KERNELS if lv == 0 else f"{OTHER_KERNELS} {lv + 1}"
        for j in range(int(n_sms[level == lv].max(initial=0))):
            tid = tid_off + lv * width + j
            out.append(_meta("thread_name", pids[j], tid, {"name": name}))
            out.append(_meta("thread_sort_index", pids[j], tid, {"sort_index": lv - levels}))
    ts = us_since(start, base_ns).tolist()
    dur = us_since(end, start).tolist()
    rows = zip(
        kernels["name"], kernels["args"], ts, dur, n_sms.tolist(), level.tolist(), strict=True
    )
    for name, args, t, du, n, lv in rows:
        for j in range(n):
            out.append(
                {
                    "name": name,
                    "ph": "X",
                    "pid": pids[j],
                    "tid": tid_off + lv * width + j,
                    "ts": t,
                    "dur": du,
                    "args": args,
                }
            )
    return out, levels * width
