"""Chrome trace-event JSON export, for small traces (chrome://tracing, Perfetto's legacy importer).

Times are microseconds since the trace start (`trace.start_ns`): a double holds a few hours of
nanoseconds exactly that way, while absolute %globaltimer values (~1.7e18 ns) would lose them.
pids are 1.. in SM order plus one "launches" process; tids are unique in the file and never equal
a pid, because the Perfetto importer merges a thread whose tid equals a pid into that process.
"""

from __future__ import annotations

import gzip
import json
import os

import numpy as np

from ..timeline import Timeline, build
from ..trace import RANGE, UNMATCHED_BEGIN, TraceData
from .perfetto import LEVELS, drop_marks, order_rows


def write_chrome_json(trace: TraceData | Timeline, path: str | os.PathLike,
                      compress: bool = False) -> None:  # fmt: skip
    data = json.dumps(to_chrome_json(trace), separators=(",", ":"), ensure_ascii=False).encode()
    opener = gzip.open if compress else open
    with opener(path, "wb") as f:
        f.write(data)


def to_chrome_json(trace: TraceData | Timeline) -> dict:
    """The timeline as Chrome JSON: one process per SM (its order and names from the timeline,
    as process_sort_index / thread_sort_index), one thread per lane, a "launches" process."""
    tl = trace if isinstance(trace, Timeline) else build(trace)
    trace = tl.trace
    lanes, ev, um = trace.lanes, trace.events, trace.unmatched
    t0 = trace.start_ns
    ev_lane, um_lane = tl.ev_lane, tl.um_lane
    lo = tl.lane_lo
    nl = len(lanes["lane"])
    has_rows = np.bincount(ev_lane, minlength=nl) + np.bincount(um_lane, minlength=nl) > 0
    sms = tl.sms
    pid_of_lane = tl.lane_sm_index + 1
    kernels_pid = len(sms) + 1
    tid0 = kernels_pid + 1

    def us(t_ns) -> np.ndarray:
        return (np.asarray(t_ns, np.int64) - t0) / 1e3

    out: list[dict] = []
    for i in range(len(sms)):
        out.append(_meta("process_name", i + 1, 0, {"name": tl.sm_name(i)}))
        out.append(_meta("process_sort_index", i + 1, 0, {"sort_index": i}))

    # Lanes: one thread per (lane, overlap level); partial overlaps go to an extra thread.
    level = np.zeros(len(ev_lane), np.int64)
    if len(ev_lane):
        level = order_rows(
            ev["start_ns"], ev["end_ns"], ev["kind"] == RANGE, ev_lane, lo, ev["event"]
        )["level"]
    thread_key = ev_lane.astype(np.int64) * LEVELS + level
    keys = np.unique(
        np.concatenate(
            [thread_key, um_lane.astype(np.int64) * LEVELS, np.flatnonzero(has_rows) * LEVELS]
        )
    )
    tid_of = {}
    extra = tid0 + nl
    for k in keys.tolist():
        g, lv = divmod(k, LEVELS)
        if lv == 0:
            tid = tid0 + g
        else:
            tid, extra = extra, extra + 1
        tid_of[k] = tid
        pid = int(pid_of_lane[g])
        out.append(_meta("thread_name", pid, tid, {"name": tl.lane_name(g, lv)}))
        out.append(_meta("thread_sort_index", pid, tid, {"sort_index": tl.lane_rank(g) * LEVELS + lv}))
    tid_arr = np.array([tid_of[k] for k in thread_key.tolist()], np.int64)

    names = {e: trace.event_name(e) for e in np.unique(ev["event"]).tolist()}
    ts, dur = us(ev["start_ns"]), (ev["end_ns"] - ev["start_ns"]) / 1e3
    is_range = ev["kind"] == RANGE
    for e, r, p, t, s, d in zip(
        ev["event"].tolist(),
        is_range.tolist(),
        pid_of_lane[ev_lane].tolist(),
        tid_arr.tolist(),
        ts.tolist(),
        dur.tolist(),
        strict=True,
    ):
        if r:
            out.append({"name": names[e], "ph": "X", "pid": p, "tid": t, "ts": s, "dur": d})
        else:
            out.append({"name": names[e], "ph": "i", "s": "t", "pid": p, "tid": t, "ts": s})
    for e, k, g, s in zip(
        um["event"].tolist(), um["kind"].tolist(), um_lane.tolist(), us(um["time_ns"]).tolist(),
        strict=True,
    ):  # fmt: skip
        what = "begin" if k == UNMATCHED_BEGIN else "end"
        out.append(
            {
                "name": f"unmatched {what}: {trace.event_name(e)}",
                "ph": "i",
                "s": "t",
                "pid": int(pid_of_lane[g]),
                "tid": tid_of[g * LEVELS],
                "ts": s,
            }
        )
    d_lanes, d_at, d_labels = drop_marks(tl)
    for g, t, label in zip(d_lanes.tolist(), us(d_at).tolist(), d_labels, strict=True):
        key = g * LEVELS
        if key not in tid_of:
            continue
        out.append(
            {
                "name": label,
                "ph": "i",
                "s": "t",
                "pid": int(pid_of_lane[g]),
                "tid": tid_of[key],
                "ts": float(t),
            }
        )

    occ = tl.occupancy
    for p, s, v in zip((occ["sm_index"] + 1).tolist(), us(occ["time_ns"]).tolist(),
                       occ["value"].tolist(), strict=True):  # fmt: skip
        out.append({"name": "resident blocks", "ph": "C", "pid": p, "ts": s, "args": {"blocks": v}})

    if tl.summary is not None:
        sm = tl.summary
        for i, e, ts, v in zip(sm["sm_index"].tolist(), sm["event"].tolist(),
                               us(sm["time_ns"]).tolist(), sm["value"].tolist(), strict=True):  # fmt: skip
            out.append({"name": f"{trace.event_name(e)} (active ranges)", "ph": "C",
                        "pid": i + 1, "ts": ts, "args": {"ranges": v}})  # fmt: skip

    out.append(_meta("process_name", kernels_pid, 0, {"name": "launches"}))
    out.append(_meta("process_sort_index", kernels_pid, 0, {"sort_index": -1}))
    ktid = extra
    cut_at = dict(tl.cuts)
    L = tl.launches
    for c, k_lo, k_hi in zip(L["capture"].tolist(), L["start_ns"].tolist(), L["end_ns"].tolist(),
                             strict=True):  # fmt: skip
        label = tl.launch_name(c)
        tid, thread = ktid + c, label
        if tl.launch_track is not None:  # packed: launches share threads
            k = int(tl.launch_track[np.searchsorted(L["capture"], c)])
            tid, thread = ktid + k, tl.launch_track_names[k]
        out.append(_meta("thread_name", kernels_pid, tid, {"name": thread}))
        out.append({"name": label, "ph": "X", "pid": kernels_pid, "tid": tid,
                    "ts": float(us(k_lo)), "dur": (k_hi - k_lo) / 1e3})  # fmt: skip
        if k_lo in cut_at:
            out.append({"name": f"host gap cut: {cut_at[k_lo] / 1e6:.3f} ms", "ph": "i",
                        "s": "t", "pid": kernels_pid, "tid": tid, "ts": float(us(k_lo))})  # fmt: skip
    return {
        "traceEvents": out,
        "displayTimeUnit": "ns",
        "otherData": {
            "start_ns": t0,
            "emulated": trace.emulated,
            "dropped_records": trace.dropped_total,
            "kernels": [k.name for k in trace.kernels],
            "notes": tl.notes,
        },
    }


def _meta(name: str, pid: int, tid: int, args: dict) -> dict:
    return {"name": name, "ph": "M", "pid": pid, "tid": tid, "args": args}
