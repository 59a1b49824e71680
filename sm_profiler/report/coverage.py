"""What the instrumented kernels cover, exactly: from torch.profiler's CUPTI kernel rows.

    cov = sm_profiler.torch_coverage("torch_trace.json", table)   # or a list of kernel names
    cov["devices"][0]["share"]     # median over steps: instrumented kernels' time / step's span

Auto mode's report estimates coverage from its own records (its launches against the step's
span). A torch.profiler trace holds every kernel the GPU ran, instrumented or not, so merged
with it the figure is exact. Per GPU (CUPTI's device id) and per step:

- the steps are torch's `ProfilerStep#N` annotations (a kernel belongs to the step whose window
  holds its launch: the CUDA runtime/driver row of the same correlation id, else its own start);
  without them the whole profile is one step;
- a step's span runs from its first kernel's start to the next step's first (when that step
  follows at once; never shorter than its own kernels' span), as the report's period does;
- busy: the union of all its kernel rows; instrumented: the union of the rows whose name is an
  instrumented kernel's (named as merge matches launches to rows, torch_trace.kernel_key);
- share = instrumented / span, share_of_busy = instrumented / busy, idle = 1 - busy / span;
- the largest unseen kernels: total time of each other name's rows (summed, so kernels that
  overlap on several streams count in full), as a share of the steps' spans.

`unseen_kernels` lays the unseen rows out for the merged trace's SM tracks (merge_torch_trace).
"""

from __future__ import annotations

import math
import re

import numpy as np

from ..errors import CaptureError
from ..text import middle, plural, printable, wrap
from ..trace.timeline import assign_slots
from .stats import step_periods, union_length

# A CPU-side annotation of torch.profiler's schedule: one per profiled step.
STEP_NAME = re.compile(r"ProfilerStep#([0-9]+)\Z", re.ASCII)
MAX_NS = 2**63 - 1  # times and step numbers are int64
# The rows whose correlation id names a kernel's launch.
LAUNCH_CATS = ("cuda_runtime", "cuda_driver")
# Unseen kernels listed per GPU.
TOP_UNSEEN = 10
FIX = "re-export it with prof.export_chrome_trace(path)"


# -- reading torch's rows ---------------------------------------------------------------------


def _bad(name: str, where: str, what: str, value, expected: str) -> CaptureError:
    text = "missing" if value is _MISSING else ascii(value)
    text = text if len(text) <= 40 else text[:37] + "..."
    return CaptureError(f"{name}: {where} has {what} {text}, not {expected}; {FIX}")


_MISSING = object()


def _int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _args(e: dict, name: str, i: int) -> dict:
    a = e.get("args", {})
    if not isinstance(a, dict):
        raise _bad(name, f"traceEvents[{i}]", "args", a, "an object")
    return a


def _dims(a: dict, key: str, name: str, i: int) -> list[int]:
    """args' grid or block: three positive ints, or [-1, -1, -1] where CUPTI did not say."""
    v = a.get(key, _MISSING)
    if v is _MISSING or v is None:
        return [-1, -1, -1]
    ok = isinstance(v, list) and len(v) == 3 and all(_int(x) and 0 < x < 2**31 for x in v)
    if not ok:
        raise _bad(name, f"kernel row traceEvents[{i}]", f"args.{key}", v, "three positive ints")
    return v


def _time_us(e: dict, key: str, name: str, i: int) -> float:
    v = e.get(key, _MISSING)
    ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
    if not ok or abs(v) >= 2.0**62 / 1e3 or (key == "dur" and v < 0):
        raise _bad(
            name,
            f"traceEvents[{i}] ({printable(str(e.get('name')))[:40]})",
            key,
            v,
            "a finite time in µs",
        )
    return float(v)


def _span_ns(base: int, e: dict, name: str, i: int) -> tuple[int, int]:
    """(start, end) in ns of row `e` (base + ts, + dur), in Python ints checked to lie in
    0..2**63-1: an end past int64 would wrap negative in the columns."""
    start = base + round(_time_us(e, "ts", name, i) * 1e3)
    end = start + round(_time_us(e, "dur", name, i) * 1e3)
    if not 0 <= start <= end <= MAX_NS:
        what = f"traceEvents[{i}] ({printable(str(e.get('name')))[:40]})"
        raise CaptureError(
            f"{name}: {what} runs from {start:,} to {end:,} ns (baseTimeNanoseconds + ts, + dur), "
            f"outside 0..2**63 ns; {FIX}"
        )
    return start, end


def kernel_table(doc: dict, name: str = "the torch trace") -> dict:
    """torch's CUPTI kernel rows (a doc torch_trace.check_torch_doc passed) as columns: `names` (each
    distinct name once) and per row `name` (index into names), `device`, `start_ns`, `end_ns`,
    `launch_ns` (its launch row's time, else its start), `grid` and `block` (n x 3; -1: not
    said), `event` (index into traceEvents). Malformed fields raise CaptureError naming the row."""
    base = int(doc.get("baseTimeNanoseconds", 0))
    launch_us: dict[int, float] = {}
    rows = []
    for i, e in enumerate(doc["traceEvents"]):
        if e.get("ph") != "X":
            continue
        cat = e.get("cat")
        if cat in LAUNCH_CATS:
            c = _args(e, name, i).get("correlation")
            if _int(c):
                launch_us.setdefault(c, _time_us(e, "ts", name, i))
        elif cat == "kernel":
            rows.append((i, e, _args(e, name, i)))
    names: dict[str, int] = {}
    n = len(rows)
    out = {k: np.zeros(n, np.int64) for k in ("name", "device", "start_ns", "end_ns", "event")}
    launch = np.zeros(n, np.float64)
    grid, block = np.full((n, 3), -1, np.int64), np.full((n, 3), -1, np.int64)
    for j, (i, e, a) in enumerate(rows):
        out["name"][j] = names.setdefault(str(e.get("name")), len(names))
        out["device"][j] = _device(e, a, name, i)
        ts = float(e["ts"])  # checked by torch_trace.check_torch_doc
        out["start_ns"][j], out["end_ns"][j] = _span_ns(base, e, name, i)
        c = a.get("correlation")
        if c is not None and not _int(c):
            raise _bad(name, f"kernel row traceEvents[{i}]", "args.correlation", c, "an integer")
        launch[j] = launch_us.get(c, ts) if c is not None else ts
        grid[j], block[j] = _dims(a, "grid", name, i), _dims(a, "block", name, i)
        out["event"][j] = i
    out["launch_ns"] = base + np.round(launch * 1e3).astype(np.int64)
    out["grid"], out["block"] = grid, block
    out["names"] = list(names)
    return out


def kernel_rows_doc(doc: dict) -> dict:
    """What the report's share seen and the advisor read of a torch trace (one check_torch_doc
    passed): its kernel rows, the launch rows of their correlation ids (the first of each),
    its ProfilerStep#N annotations, and its baseTimeNanoseconds, deviceProperties and
    distributedInfo: a trace whose kernel_table, step_windows and sm_counts are the whole one's,
    and each kernel row's args, in kilobytes where the whole trace's CPU ops are megabytes (a
    rank's summary carries it: report/rank_summary.py)."""
    events = doc["traceEvents"]
    kernels = [e for e in events if e.get("ph") == "X" and e.get("cat") == "kernel"]
    wanted = {
        c
        for e in kernels
        if isinstance(e.get("args"), dict)
        for c in [e["args"].get("correlation")]
    }
    kept, seen = [], set()
    for e in events:
        if e.get("ph") != "X":
            continue
        cat = e.get("cat")
        if cat in LAUNCH_CATS:
            c = (e.get("args") or {}).get("correlation")
            if _int(c) and c in wanted and c not in seen:
                seen.add(c)
                kept.append(e)
        elif cat == "kernel" or (
            cat != "gpu_user_annotation" and STEP_NAME.match(str(e.get("name", "")))
        ):
            kept.append(e)
    keys = ("baseTimeNanoseconds", "deviceProperties", "distributedInfo")
    return {**{k: doc[k] for k in keys if k in doc}, "traceEvents": kept}


def _device(e: dict, a: dict, name: str, i: int) -> int:
    """CUPTI's device id: args.device, else the row's pid (Kineto's GPU rows use the device id)."""
    d = a.get("device", _MISSING)
    if d is _MISSING or d is None:
        pid = e.get("pid")
        return pid if _int(pid) and 0 <= pid < 2**31 else 0
    if not _int(d) or not 0 <= d < 2**31:
        raise _bad(name, f"kernel row traceEvents[{i}]", "args.device", d, "a device number")
    return d


def step_windows(doc: dict, name: str = "the torch trace") -> dict[str, np.ndarray]:
    """torch's ProfilerStep#N annotations (CPU side) as `step`, `start_ns`, `end_ns`, sorted by
    start; a step annotated on several threads spans all of them."""
    base = int(doc.get("baseTimeNanoseconds", 0))
    spans: dict[int, list[int]] = {}
    for i, e in enumerate(doc["traceEvents"]):
        if e.get("ph") != "X" or e.get("cat") in ("kernel", "gpu_user_annotation"):
            continue
        m = STEP_NAME.match(str(e.get("name", "")))
        if m is None:
            continue
        s, t = _span_ns(base, e, name, i)
        step = int(m.group(1))
        if step > MAX_NS:
            raise _bad(name, f"traceEvents[{i}]", "a step number", step, "below 2**63")
        lo_hi = spans.setdefault(step, [s, t])
        lo_hi[0], lo_hi[1] = min(lo_hi[0], s), max(lo_hi[1], t)
    order = sorted(spans, key=lambda k: (spans[k][0], k))
    return {
        "step": np.array(order, np.int64),
        "start_ns": np.array([spans[k][0] for k in order], np.int64),
        "end_ns": np.array([spans[k][1] for k in order], np.int64),
    }


def sm_counts(doc: dict, name: str = "the torch trace") -> dict[int, int]:
    """{device id: SM count} from the trace's deviceProperties (Kineto writes numSms)."""
    props = doc.get("deviceProperties", [])
    if props is None:
        return {}
    if not isinstance(props, list):
        raise _bad(name, "the trace", "deviceProperties", props, "a list")
    out = {}
    for k, p in enumerate(props):
        if not isinstance(p, dict) or "numSms" not in p:
            continue
        d, n = p.get("id", k), p["numSms"]
        if not _int(d) or not _int(n) or not 0 < n < 2**20:
            raise _bad(name, f"deviceProperties[{k}]", "id/numSms", [d, n], "two integers")
        out[d] = n
    return out


def instrumented_mask(table: dict, names) -> np.ndarray:
    """Per kernel row: its name is an instrumented kernel's, as merge matches them."""
    from ..wire.torch_trace import kernel_key

    keys = {k: None for k in table["names"]}
    hit = {kernel_key(str(n), keys) for n in names} - {None}
    return np.array([k in hit for k in table["names"]], bool)[table["name"]]


# -- coverage -----------------------------------------------------------------------------------


def step_of(table: dict, steps: dict[str, np.ndarray]) -> np.ndarray:
    """Per kernel row, the index in `steps` of the step whose window holds its launch (-1: in no
    step); every row in step 0 when there are no step windows."""
    if not len(steps["step"]):
        return np.zeros(len(table["launch_ns"]), np.int64)
    t = table["launch_ns"]
    i = np.searchsorted(steps["start_ns"], t, side="right") - 1
    inside = (i >= 0) & (t <= steps["end_ns"][np.maximum(i, 0)])
    return np.where(inside, i, -1)


def coverage(table: dict, steps: dict[str, np.ndarray], seen: np.ndarray, top=TOP_UNSEEN) -> dict:
    """The coverage of each device of `table` (see the module doc); `seen`: instrumented_mask."""
    step_i = step_of(table, steps)
    numbered = len(steps["step"]) > 0
    devices = []
    for d in np.unique(table["device"]).tolist():
        on = table["device"] == d
        devices.append(_device_coverage(table, on & (step_i >= 0), step_i, steps, seen, top))
        devices[-1] = dict(device=d, **devices[-1], outside_steps=int((on & (step_i < 0)).sum()))
    return {
        "source": "CUPTI kernel rows of the torch trace",
        "steps_from": "ProfilerStep#N annotations" if numbered else "the whole profile",
        "devices": devices,
    }


def _device_coverage(table, rows, step_i, steps, seen, top) -> dict:
    """Per step of one device's `rows` (a mask): span, busy, instrumented; the unseen kernels."""
    idx = np.flatnonzero(rows)
    s, e, g = table["start_ns"][idx], table["end_ns"][idx], step_i[idx]
    present, g = np.unique(g, return_inverse=True)
    n = len(present)
    o = np.lexsort((s, g))
    s, e, g, inst = s[o], e[o], g[o], seen[idx][o]
    lo = np.full(n, np.iinfo(np.int64).max)
    hi = np.full(n, np.iinfo(np.int64).min)
    np.minimum.at(lo, g, s)
    np.maximum.at(hi, g, e)
    # The span: the step's period, as the report takes it (stats.step_periods).
    span = hi - lo
    if len(steps["step"]):
        span = step_periods(steps["step"][present], lo, span)
    busy = union_length(g, s, e, n)
    ours = union_length(g[inst], s[inst], e[inst], n)
    safe = np.maximum(span, 1)
    out_steps = [
        {
            "step": int(steps["step"][p]) if len(steps["step"]) else None,
            "start_ns": int(lo[k]),
            "span_ns": int(span[k]),
            "busy_ns": int(busy[k]),
            "instrumented_ns": int(ours[k]),
            "share": float(ours[k] / safe[k]),
            "share_of_busy": float(ours[k] / max(busy[k], 1)),
            "idle_share": float(1 - busy[k] / safe[k]),
            "kernels": int((g == k).sum()),
            "instrumented_kernels": int((inst & (g == k)).sum()),
        }
        for k, p in enumerate(present.tolist())
    ]
    med = {
        key: float(np.median([x[key] for x in out_steps])) if out_steps else 0.0
        for key in ("share", "share_of_busy", "idle_share")
    }
    return dict(
        med,
        steps=out_steps,
        span_ns=int(span.sum()),
        unseen=_unseen_top(table, idx[o][~inst], int(span.sum()), top),
    )


def _unseen_top(table: dict, rows: np.ndarray, span_ns: int, top: int) -> list[dict]:
    """The `top` unseen kernel names of `rows` by total time: name, launches, total_ns, share
    (of the steps' summed span)."""
    name = table["name"][rows]
    dur = table["end_ns"][rows] - table["start_ns"][rows]
    ids, inv = np.unique(name, return_inverse=True)
    total = np.zeros(len(ids), np.int64)
    np.add.at(total, inv, dur)
    launches = np.bincount(inv, minlength=len(ids))
    names = [table["names"][i] for i in ids.tolist()]
    order = sorted(range(len(ids)), key=lambda k: (-int(total[k]), names[k]))[:top]
    return [
        {
            "name": names[k],
            "launches": int(launches[k]),
            "total_ns": int(total[k]),
            "share": float(total[k] / max(span_ns, 1)),
        }
        for k in order
    ]


def torch_coverage(torch_trace, instrumented, top: int = TOP_UNSEEN) -> dict:
    """The exact coverage of a torch.profiler trace's steps by the instrumented kernels.

    torch_trace: a torch.profiler.profile (stopped), its exported JSON's path, or the dict.
    instrumented: kernel names, or what merge takes as a source (an auto table, an SmProfiler,
    a capture file's path): its kernels' names.
    Returns {"source", "steps_from", "devices": [per device: device, share, share_of_busy,
    idle_share (medians over steps), steps (each step's figures), span_ns, unseen (the `top`
    largest unseen kernels), outside_steps (rows launched in no step)]}."""
    from ..wire.torch_trace import read_torch_doc

    doc = read_torch_doc(torch_trace)
    table = kernel_table(doc)
    return coverage(table, step_windows(doc), instrumented_mask(table, _names(instrumented)), top)


def _names(instrumented) -> list[str]:
    if isinstance(instrumented, (list, tuple, set, frozenset)) and all(
        isinstance(n, str) for n in instrumented
    ):
        return list(instrumented)
    from ..trace.auto_table import AutoTable
    from ..wire.capture import captures_of

    caps = captures_of(instrumented)
    if isinstance(caps, AutoTable):
        return list(caps.kernel_names())
    return [c.kernel_name for c in caps]


def report_share(covs: list[dict], top: int = TOP_UNSEEN) -> dict | None:
    """The report's figures from the coverages (torch_coverage's dicts) of one or several
    processes' torch traces (a job's ranks): per step (ProfilerStep#N; the whole profile where
    there are none), every GPU's instrumented time summed over the GPUs' spans summed, as the
    records' own figure sums them; share, share_of_busy and idle_share are medians over the
    steps (for one GPU, exactly that GPU's `share`); `per_step` {step: share}; `unseen` the
    `top` kernels of the GPUs' unseen lists (each GPU's top TOP_UNSEEN), summed by name, as a
    share of the spans summed. None where no GPU has a kernel row."""
    per: dict = {}
    spans, unseen = 0, {}
    gpus = 0
    for cov in covs:
        for d in cov.get("devices", []):
            gpus += 1
            spans += int(d.get("span_ns", 0))
            for st in d.get("steps", []):
                acc = per.setdefault(st.get("step"), [0, 0, 0])
                acc[0] += int(st["instrumented_ns"])
                acc[1] += int(st["span_ns"])
                acc[2] += int(st["busy_ns"])
            for u in d.get("unseen", []):
                got = unseen.setdefault(u["name"], [0, 0])
                got[0] += int(u["launches"])
                got[1] += int(u["total_ns"])
    if not per:
        return None
    steps = sorted(per, key=lambda k: (k is None, k or 0))
    share = {k: per[k][0] / max(per[k][1], 1) for k in steps}
    of_busy = [per[k][0] / max(per[k][2], 1) for k in steps]
    idle = [1 - per[k][2] / max(per[k][1], 1) for k in steps]
    order = sorted(unseen, key=lambda n: (-unseen[n][1], n))[:top]
    return {
        "source": "CUPTI kernel rows of torch.profiler's trace",
        "gpus": gpus,
        "steps": len(steps),
        "share": float(np.median(list(share.values()))),
        "share_of_busy": float(np.median(of_busy)),
        "idle_share": float(np.median(idle)),
        "per_step": {k: float(v) for k, v in share.items() if k is not None},
        "unseen": [
            {
                "name": n,
                "launches": unseen[n][0],
                "total_ns": unseen[n][1],
                "share": unseen[n][1] / max(spans, 1),
            }
            for n in order
        ],
    }


# -- the unseen kernels on the SM tracks ------------------------------------------------------

# Slices of unseen kernels in a merged trace (a kernel drawn on k SMs takes k): beyond it the
# longest kernels are kept and the metadata says how many were left out.
MAX_UNSEEN_SLICES = 50_000


def unseen_kernels(table: dict, rows: np.ndarray, n_sms: int | None, shown_sms, cap: int):
    """The kernel rows in `rows` (a mask: one device's unseen rows) laid out for the SM tracks:
    (kernels, info). CUPTI gives a kernel's time, grid and block but not its SMs, so a kernel of
    at least as many blocks as the GPU has SMs (`n_sms`) is drawn on every SM; one of fewer
    blocks B on SMs 0..B-1, named '(any B of N SMs)' with args saying which is unknown (the GPU
    time it took is shown right, where it ran is not known); without a grid, on every SM, named
    '(SMs unknown)'. Without an SM count, every SM is each of `shown_sms` (the SMs our programs
    ran on), and every kernel is '(SMs unknown)'. At most `cap` slices: the longest kernels.
    Kernels that overlap in time (concurrent streams) go on levels: each takes the lowest level
    free when it starts (timeline.assign_slots).
    kernels: name, start_ns, end_ns, n_sms (drawn on the first n of `sms`), level, args; sms."""
    idx = np.flatnonzero(rows)
    sms = np.arange(n_sms) if n_sms else np.unique(np.asarray(shown_sms, np.int64))
    grid = table["grid"][idx]
    blocks = np.where((grid > 0).all(axis=1), grid.prod(axis=1), -1)
    known = (blocks > 0) & bool(n_sms)
    n_draw = np.where(known, np.minimum(blocks, n_sms or 1), len(sms))
    dur = table["end_ns"][idx] - table["start_ns"][idx]
    # The longest kernels first, while their slices fit the cap.
    order = np.lexsort((table["start_ns"][idx], -dur))
    fits = np.cumsum(n_draw[order]) <= cap
    keep = order[: int(np.argmin(fits)) if not fits.all() else len(order)]
    keep = keep[np.argsort(table["start_ns"][idx][keep], kind="stable")]
    info = {
        "kernels": len(idx),
        "drawn": len(keep),
        "slices": int(n_draw[keep].sum()),
        "left_out_kernels": len(idx) - len(keep),
        "left_out_slices": int(n_draw.sum() - n_draw[keep].sum()),
        "max_slices": cap,
        "sms": int(n_sms) if n_sms else None,
    }
    kernels = {
        "name": [],
        "args": [],
        "start_ns": table["start_ns"][idx][keep],
        "end_ns": table["end_ns"][idx][keep],
        "n_sms": n_draw[keep],
        "sms": sms,
    }
    start, end = kernels["start_ns"], kernels["end_ns"]  # in start order
    kernels["level"] = assign_slots(np.zeros(len(start), np.int64), start, end, 1)[0]
    for k in keep.tolist():
        row = idx[k]
        name = table["names"][table["name"][row]]
        b = int(blocks[k])
        if not known[k]:
            label, where = f"{name} (SMs unknown)", "unknown: drawn on every SM"
        elif b >= n_sms:
            label, where = name, f"all {n_sms} (grid of {b} blocks)"
        else:
            label = f"{name} (any {b} of {n_sms} SMs)"
            drawn = "SM 0" if b == 1 else f"SMs 0-{b - 1}"
            where = f"{b} of {n_sms}; CUPTI does not say which: drawn on {drawn}"
        kernels["name"].append(label)
        kernels["args"].append(
            {
                "source": "CUPTI (torch.profiler); not instrumented",
                "kernel": name,
                "device": int(table["device"][row]),
                "grid": table["grid"][row].tolist() if b > 0 else "unknown",
                "block": table["block"][row].tolist() if table["block"][row, 0] > 0 else "unknown",
                "dur_ns": int(dur[k]),
                "sms": where,
            }
        )
    return kernels, info


# -- the lines merge prints -------------------------------------------------------------------


def coverage_lines(cov: dict, width: int = 80, top: int = 5) -> list[str]:
    """What `sm-profiler merge --torch` prints of a coverage: per GPU the exact share (median over
    steps), the `top` unseen kernels with their share of a step, and what the trace draws."""

    out, width = [], width - 2  # every line is indented by 2 below
    for d in cov["devices"]:
        n = len(d["steps"])
        steps = (
            f"median of {plural(n, 'step')}" if cov["steps_from"].startswith("ProfilerStep") else ""
        )
        steps = steps or "the whole profile as one step"
        out += wrap(
            f"cuda:{d['device']}, from CUPTI ({steps}): instrumented kernels ran "
            f"{100 * d['share']:.1f}% of a step ({100 * d['share_of_busy']:.1f}% of its busy "
            f"time; idle {100 * d['idle_share']:.1f}%)",
            width,
        )
        if d["unseen"]:
            out.append("  not seen inside (share of a step, launches, kernel):")
        for u in d["unseen"][:top]:
            head = f"    {100 * u['share']:5.1f}%  {u['launches']:>7,}x  "
            out.append(head + middle(printable(u["name"]), max(width - len(head), 8)))
    bars = cov.get("bars") or {}
    for b in bars.get("drawn", []):
        text = (
            f"unseen kernels on GPU {b['rank']}'s SM tracks: {b['drawn']:,} of {b['kernels']:,} "
            f"({b['slices']:,} slices"
        )
        if b["left_out_kernels"]:
            text += f", the longest; {b['left_out_kernels']:,} left out past {b['max_slices']:,}"
        out += wrap(text + ")", width)
    if bars.get("note"):
        out += wrap(f"unseen kernels not drawn: {bars['note']}", width)
    return ["  " + line for line in out]
