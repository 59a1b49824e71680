"""One timeline: sm_profiler captures of one or several GPUs, optionally inside torch.profiler's.

    sm_profiler.merge_torch_trace(prof, profiler, "step.json")      # torch + our SM/warp tracks
    sm_profiler.merge_ranks([caps_rank0, caps_rank1], "ranks.json")  # GPU r · SM s processes

Output is Chrome trace-event JSON (.json / .json.gz), which Perfetto and chrome://tracing open:
torch.profiler writes that format, so its rows are kept as they are and ours are added. Our
processes are renamed `GPU r · SM s` and numbered from PID_BASE, clear of real process ids.

Time axis. Each capture's %globaltimer ns are mapped onto the host's CLOCK_REALTIME (the clock
CUPTI and torch stamp with): t_host = t_gpu - offset, where the offset comes from, in order,
  1. `offset_ns=` given by the caller,
  2. "clock" samples in the captures' metadata (`SmProfiler.calibrate_clock()`, measured by
     `sm_profiler.clock.measure_clock`); two or more samples also give the drift,
  3. (torch merge only) the instrumented kernels' own CUPTI rows: the median distance between
     each launch's first stamp and its CUPTI start ("kernels"),
  4. none: %globaltimer as is (its epoch is the host's, so typically off by micro- to
     milliseconds), said so in the metadata.
Ranks without clock samples are aligned by the "barrier_ns" stamps in their metadata
(`sm_profiler.clock.barrier_stamp`) when every rank has one. The merge reports what it used and,
where torch's kernel rows allow, the alignment error: for every instrumented launch matched to
its CUPTI row, first stamp - CUPTI start and last stamp - CUPTI end.
"""

from __future__ import annotations

import gzip
import json
import os

import numpy as np

from .capture import Capture
from .errors import ConfigError
from .trace import TraceData

PID_BASE = 0x7000_0000  # our pids: PID_BASE + rank * PID_STRIDE + (chrome.py's pid / tid)
PID_STRIDE = 0x10_0000


# -- inputs -----------------------------------------------------------------------------------


def captures_of(source) -> list[Capture]:
    """Captures from an SmProfiler, a Capture, a list of Captures, or a capture file's path."""
    if hasattr(source, "captures") and callable(source.captures):
        return list(source.captures())
    if isinstance(source, Capture):
        return [source]
    if isinstance(source, (str, os.PathLike)):
        from .capture import load

        return load(source)
    if isinstance(source, (list, tuple)) and all(isinstance(c, Capture) for c in source):
        return list(source)
    raise ConfigError(
        f"cannot read captures from {type(source).__name__}: pass an SmProfiler, Captures, or a "
        "capture file written by SmProfiler.save"
    )


def _rank_of(caps: list[Capture], default: int) -> int:
    r = caps[0].metadata.get("rank") if caps else None
    return int(r) if isinstance(r, int) and not isinstance(r, bool) and r >= 0 else default


def clock_offset(caps: list[Capture]):
    """(offset_ns(t_gpu) function, description) from the captures' "clock" samples, or None."""
    samples = []
    for c in caps:
        for s in c.metadata.get("clock", []) or []:
            if isinstance(s, dict) and {"host_ns", "offset_ns"} <= s.keys():
                samples.append((int(s["host_ns"]), int(s["offset_ns"]), int(s.get("error_ns", 0))))
    if not samples:
        return None
    samples = sorted(set(samples))
    h = np.array([s[0] for s in samples], np.float64)
    o = np.array([s[1] for s in samples], np.float64)
    err = max(s[2] for s in samples)
    if len(samples) >= 2 and h[-1] - h[0] > 0:
        slope = float(np.polyfit(h - h[0], o, 1)[0])
    else:
        slope = 0.0
    h0, o0 = float(h[0]), float(o[0]) if len(o) == 1 else float(np.mean(o - slope * (h - h[0])))

    def offset(t_gpu_ns: float) -> float:
        return o0 + slope * (t_gpu_ns - o0 - h0)

    desc = {"method": "clock", "samples": len(samples), "offset_ns": o0,
            "drift_ppm": slope * 1e6, "probe_error_ns": err}  # fmt: skip
    return offset, desc


# -- shifting decoded traces -------------------------------------------------------------------


def shift(trace: TraceData, delta_ns: int) -> TraceData:
    """The same trace with every time moved by `delta_ns` (lanes never initialised stay 0)."""
    ev = dict(trace.events)
    ev["start_ns"] = ev["start_ns"] + delta_ns
    ev["end_ns"] = ev["end_ns"] + delta_ns
    lanes = dict(trace.lanes)
    lanes["anchor_ns"] = np.where(lanes["initialized"], lanes["anchor_ns"] + delta_ns,
                                  lanes["anchor_ns"])  # fmt: skip
    um = dict(trace.unmatched)
    um["time_ns"] = um["time_ns"] + delta_ns
    return TraceData(ev, lanes, um, list(trace.kernels), dict(trace.event_names))


def _decoded(caps: list[Capture], offset) -> list[TraceData]:
    from .decode import decode

    out = []
    for c in caps:
        t = decode([c])
        if offset is not None:
            t = shift(t, -int(round(offset(float(t.start_ns)))))
        out.append(t)
    return out


# -- Chrome JSON assembly ----------------------------------------------------------------------


def _chrome_events(trace: TraceData, rank: int, base_ns: int) -> list[dict]:
    """chrome.py's events of `trace`, moved to µs since base_ns, with rank-prefixed processes."""
    from .export.chrome import to_chrome_json

    doc = to_chrome_json(trace)
    dt_us = (int(doc["otherData"]["start_ns"]) - base_ns) / 1e3
    off = PID_BASE + rank * PID_STRIDE
    out = []
    for e in doc["traceEvents"]:
        e = dict(e)
        e["pid"] = off + int(e["pid"])
        if "tid" in e:
            e["tid"] = off + int(e["tid"])
        if "ts" in e:
            e["ts"] = round(e["ts"] + dt_us, 3)
        if e.get("ph") == "M" and e.get("name") == "process_name":
            e["args"] = {"name": f"GPU {rank} · {e['args']['name']}"}
        if e.get("ph") == "M" and e.get("name") == "process_sort_index":
            e["args"] = {"sort_index": 1000 + rank * 10000 + int(e["args"]["sort_index"])}
        out.append(e)
    return out


def _write_json(doc: dict, path) -> None:
    from .paths import atomic_output, check_writable

    if not os.fspath(path).lower().endswith((".json", ".json.gz")):
        raise ConfigError(
            "merged traces are Chrome JSON (Perfetto opens them): name the output .json or "
            f".json.gz, got {os.fspath(path)!r}"
        )
    check_writable(path)
    data = json.dumps(doc, separators=(",", ":")).encode()
    with atomic_output(path) as tmp:
        opener = gzip.open if os.fspath(path).lower().endswith(".gz") else open
        with opener(tmp, "wb") as f:
            f.write(data)


# -- several ranks -----------------------------------------------------------------------------


def align_ranks(sources, align: str = "auto") -> tuple[list[tuple[int, list[TraceData]]], dict]:
    """[(rank, decoded captures on one time axis)], and what the alignment used."""
    if align not in ("auto", "clock", "barrier", "none"):
        raise ConfigError(f"align={align!r}: use 'auto', 'clock', 'barrier' or 'none'")
    per_rank = [captures_of(s) for s in sources]
    ranks = [_rank_of(c, i) for i, c in enumerate(per_rank)]
    if len(set(ranks)) != len(ranks):
        ranks = list(range(len(per_rank)))  # several files of one rank: number them in order
    clocks = [clock_offset(c) for c in per_rank]
    barriers = [next((c.metadata["barrier_ns"] for c in caps if "barrier_ns" in c.metadata), None)
                for caps in per_rank]  # fmt: skip
    method = align
    if align == "auto":
        method = ("clock" if all(clocks) else "barrier" if all(b is not None for b in barriers)
                  else "none")  # fmt: skip
    if method == "clock" and not all(clocks):
        raise ConfigError("align='clock': a rank has no clock samples (SmProfiler.calibrate_clock)")
    if method == "barrier" and not all(b is not None for b in barriers):
        raise ConfigError("align='barrier': a rank has no barrier_ns stamp (clock.barrier_stamp)")
    out, info = [], {"method": method, "ranks": {}}
    for r, caps, clk, bar in zip(ranks, per_rank, clocks, barriers, strict=True):
        if method == "clock":
            parts = _decoded(caps, clk[0])
            info["ranks"][r] = clk[1]
        elif method == "barrier":
            delta = int(barriers[0]) - int(bar)
            parts = _decoded(caps, lambda t, d=delta: -d)
            info["ranks"][r] = {"method": "barrier", "shift_ns": delta}
        else:
            parts = _decoded(caps, None)
            info["ranks"][r] = {"method": "none"}
        out.append((r, parts))
    return out, info


def merge_ranks(sources, path, align: str = "auto") -> dict:
    """Write the captures of several ranks (one source per rank) as one Chrome JSON trace with
    `GPU r · SM s` processes on one time axis. Returns the alignment info (also in the file)."""
    ranks, info = align_ranks(sources, align)
    base = min(int(p.start_ns) for _, parts in ranks for p in parts if len(p.lanes["lane"]))
    events = []
    for r, parts in ranks:
        events += _chrome_events(TraceData.concat(parts), r, base)
    doc = {"traceEvents": events, "displayTimeUnit": "ns",
           "otherData": {"base_ns": base, "sm_profiler_alignment": info}}  # fmt: skip
    _write_json(doc, path)
    return info


# -- torch.profiler ----------------------------------------------------------------------------


def _torch_doc(torch_trace) -> dict:
    if isinstance(torch_trace, dict):
        return torch_trace
    if hasattr(torch_trace, "export_chrome_trace"):
        import tempfile

        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, "torch.json")
            torch_trace.export_chrome_trace(p)
            return _read_json(p)
    if isinstance(torch_trace, (str, os.PathLike)):
        return _read_json(torch_trace)
    raise ConfigError(
        f"cannot read a torch trace from {type(torch_trace).__name__}: pass a "
        "torch.profiler.profile, its exported JSON's path, or the loaded dict"
    )


def _read_json(path) -> dict:
    try:
        opener = gzip.open if os.fspath(path).lower().endswith(".gz") else open
        with opener(path, "rb") as f:
            doc = json.loads(f.read())
    except (OSError, ValueError) as e:
        raise ConfigError(f"cannot read the torch trace {os.fspath(path)!r}: {e}") from e
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        raise ConfigError(f"{os.fspath(path)!r} is not a Chrome trace (no traceEvents list)")
    return doc


def cupti_kernels(doc: dict) -> dict[str, list[tuple[int, int]]]:
    """{kernel name: [(start_ns, end_ns), ...] in time order} from torch's CUDA kernel rows,
    in absolute ns (baseTimeNanoseconds + ts)."""
    base = int(doc.get("baseTimeNanoseconds", 0))
    out: dict[str, list[tuple[int, int]]] = {}
    for e in doc["traceEvents"]:
        if e.get("cat") == "kernel" and e.get("ph") == "X":
            s = base + round(float(e["ts"]) * 1e3)
            out.setdefault(str(e.get("name")), []).append((s, s + round(float(e["dur"]) * 1e3)))
    for v in out.values():
        v.sort()
    return out


def _span(t: TraceData) -> tuple[int, int]:
    return int(t.start_ns), int(t.end_ns)


def _rows_for(name: str, rows: dict[str, list[tuple[int, int]]]):
    """CUPTI rows of kernel `name` (CUPTI may decorate names: then by prefix)."""
    return rows.get(name) or next(
        (v for k, v in rows.items() if k.startswith(name) or name.startswith(k)), None
    )


def match_launches(parts: list[TraceData], rows: dict[str, list[tuple[int, int]]]):
    """[(part index, cupti start, cupti end)]: each launch paired with the CUPTI row of its
    kernel nearest to its first stamp. Use once the parts are on CUPTI's axis."""
    out = []
    for i, p in enumerate(parts):
        cands = _rows_for(p.kernels[0].name, rows)
        if not cands:
            continue
        j = min(range(len(cands)), key=lambda j: abs(cands[j][0] - p.start_ns))
        out.append((i, cands[j][0], cands[j][1]))
    return out


def match_in_order(parts: list[TraceData], rows: dict[str, list[tuple[int, int]]]):
    """Like match_launches, for parts whose clock is not yet CUPTI's: per kernel name, the
    launches in time order against the window of as many consecutive CUPTI rows whose distances
    to them vary least (the profile may hold launches the buffer did not record)."""
    by_name: dict[str, list[int]] = {}
    for i, p in enumerate(parts):
        by_name.setdefault(p.kernels[0].name, []).append(i)
    out = []
    for name, idx in by_name.items():
        cands = _rows_for(name, rows)
        if not cands or len(cands) < len(idx):
            continue
        idx.sort(key=lambda i: parts[i].start_ns)
        ours = np.array([parts[i].start_ns for i in idx], np.float64)
        starts = np.array([c[0] for c in cands], np.float64)
        best = min(range(len(cands) - len(idx) + 1),
                   key=lambda j: float(np.ptp(ours - starts[j : j + len(idx)])))  # fmt: skip
        out += [(i, *cands[best + k]) for k, i in enumerate(idx)]
    return out


def alignment_error(parts: list[TraceData], rows) -> dict:
    """First stamp - CUPTI start and last stamp - CUPTI end over matched launches (ns)."""
    m = match_launches(parts, rows)
    if not m:
        return {"matched": 0}
    ds = np.array([parts[i].start_ns - s for i, s, _ in m], np.float64)
    de = np.array([parts[i].end_ns - e for i, _, e in m], np.float64)
    return {
        "matched": len(m),
        "start_delta_ns": {"median": float(np.median(ds)), "min": float(ds.min()), "max": float(ds.max())},
        "end_delta_ns": {"median": float(np.median(de)), "min": float(de.min()), "max": float(de.max())},
        "max_abs_ns": float(max(np.abs(ds).max(), np.abs(de).max())),
    }  # fmt: skip


def merge_torch_trace(torch_trace, sources, path, offset_ns: int | None = None) -> dict:
    """Write torch.profiler's trace with our SM/warp tracks added, on torch's time axis.

    torch_trace: a torch.profiler.profile (after it stopped), its exported JSON path, or the dict.
    sources: an SmProfiler, Captures or a capture file (one GPU), or a list of those (ranks).
    offset_ns: %globaltimer - torch's clock, if known; else measured (see the module doc).
    Returns the alignment info, also written into the file as "sm_profiler_alignment"."""
    doc = _torch_doc(torch_trace)
    rows = cupti_kernels(doc)
    multi = isinstance(sources, (list, tuple)) and sources and not isinstance(sources[0], Capture)
    srcs = list(sources) if multi else [sources]
    if offset_ns is not None:
        ranks = [(_rank_of(captures_of(s), i), _decoded(captures_of(s), lambda t: offset_ns))
                 for i, s in enumerate(srcs)]  # fmt: skip
        info = {"method": "given", "offset_ns": offset_ns}
    else:
        ranks, info = align_ranks(srcs, "auto")
        if info["method"] == "none" and len(ranks) == 1:
            # The kernels' own CUPTI rows: the median first-stamp - CUPTI-start distance.
            r, parts = ranks[0]
            m = match_in_order(parts, rows)
            if m:
                off = float(np.median([parts[i].start_ns - s for i, s, _ in m]))
                ranks = [(r, [shift(p, -int(round(off))) for p in parts])]
                info = {"method": "kernels", "offset_ns": off,
                        "note": "offset from the instrumented kernels' CUPTI rows"}  # fmt: skip
    err = {r: alignment_error(parts, rows) for r, parts in ranks}
    info = dict(info, error=err)
    base = int(doc.get("baseTimeNanoseconds", 0))
    events = list(doc["traceEvents"])
    for r, parts in ranks:
        events += _chrome_events(TraceData.concat(parts), r, base)
    out = dict(doc, traceEvents=events, sm_profiler_alignment=info)
    _write_json(out, path)
    return info
