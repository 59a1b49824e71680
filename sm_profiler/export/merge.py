"""One timeline: sm_profiler captures of one or several GPUs, optionally inside torch.profiler's.

    sm_profiler.merge_torch_trace(prof, profiler, "step.perfetto-trace")  # torch + our SMs
    sm_profiler.merge_ranks([caps_rank0, caps_rank1], "ranks.perfetto-trace")  # GPU r · SM s

Both write by the path's extension. Perfetto protobuf (.perfetto-trace, .pftrace), which the
Perfetto UI shows GPU by GPU and SM by SM with the names as written (with torch.profiler's rows
as track events beside them: torch_perfetto.py); or Chrome trace-event JSON (.json /
.json.gz), whose processes the UI orders its own way and names with their pid appended: there
torch's rows are kept as torch wrote them (moved by whole ns onto the file's own time origin,
chrome.time_origin) and ours are added, processes named `GPU r · SM s` and numbered from
PID_BASE, clear of real process ids.

Time axis. Each capture's %globaltimer ns are mapped onto the host's CLOCK_REALTIME (the clock
CUPTI and torch stamp with): t_host = t_gpu - offset, where the offset comes from, in order,
  1. `offset_ns=` given by the caller,
  2. "clock" samples in the captures' metadata (`SmProfiler.calibrate_clock()`, measured by
     `sm_profiler.record.clock.measure_clock`); two or more samples also give the drift,
  3. (torch merge only) the instrumented kernels' own CUPTI rows: the median distance between
     each launch's first stamp and its CUPTI start ("kernels"),
  4. none: %globaltimer as is (its epoch is the host's, so typically off by micro- to
     milliseconds), said so in the metadata.
Ranks without clock samples are aligned by the "barrier_ns" stamps in their metadata
(`sm_profiler.record.clock.barrier_stamp`) when every rank has one. The merge reports what it used and,
where torch's kernel rows allow, the alignment error: for every instrumented launch matched to
its CUPTI row, first stamp - CUPTI start and last stamp - CUPTI end.
"""

from __future__ import annotations

import math
import os
from dataclasses import replace

import numpy as np

from ..errors import CaptureError, ConfigError, FormatError
from ..report.alignment import (  # noqa: F401 (merge.cupti_kernels: as before)
    PROFILE_MARGIN_NS,
    WINDOW_SAMPLES,
    cupti_kernels,
    kernel_offset_ns,
    match_nearest,
)
from ..report.alignment import alignment_error as _alignment_error
from ..report.alignment import match_in_order as _match_in_order
from ..text import plural
from ..trace.auto_table import AutoTable, clock_offset_ns
from ..trace.drawing import Drawing, drawing_of
from ..trace.model import TraceData
from ..trace.timeline import Timeline, with_sms
from ..wire import format as fmt
from ..wire.capture import Capture, captures_of  # noqa: F401 (merge.captures_of, as before)
from ..wire.torch_trace import (  # noqa: F401 (merge.MAX_TORCH_*, kernel_key: as before)
    MAX_TORCH_BYTES,
    MAX_TORCH_RATIO,
    MAX_TORCH_SLACK,
    MAX_TORCH_US,
    check_torch_doc,
    kernel_key,
    named_processes,
    read_torch_doc,
)
from .chrome import PID_BASE, moved_rows, ranks_json, time_origin  # noqa: F401 (merge.PID_BASE)
from .formats import FORMATS

# -- inputs -----------------------------------------------------------------------------------


def _rank_of(caps: list[Capture], default: int) -> int:
    r = caps[0].metadata.get("rank") if caps else None
    return int(r) if isinstance(r, int) and not isinstance(r, bool) and r >= 0 else default


def _ns(value, what: str) -> int:
    """An ns value read from a capture's metadata: an int (or an integral float) inside int64."""
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    if ok and isinstance(value, float):
        ok = math.isfinite(value) and value == int(value)
    if not ok or not -(2**63) <= int(value) < 2**63:
        text = ascii(value)
        text = text if len(text) <= 40 else text[:37] + "..."
        raise FormatError(
            f"capture metadata {what} is {text}, not a time in ns (an integer within int64): a "
            "damaged or hand-edited capture; remove the key to merge without it"
        )
    return int(value)


def clock_offset(caps: list[Capture]):
    """(offset_ns(t_gpu) function, description) from the captures' "clock" samples, or None."""
    samples = []
    for c in caps:
        clock = c.metadata.get("clock", [])
        if clock is None:
            continue
        if not isinstance(clock, list):
            raise FormatError(
                f"capture metadata 'clock' is a {type(clock).__name__}, not a list of samples "
                "(SmProfiler.calibrate_clock writes one): remove the key to merge without it"
            )
        for s in clock:
            if isinstance(s, dict) and {"host_ns", "offset_ns"} <= s.keys():
                samples.append(
                    (
                        _ns(s["host_ns"], "clock host_ns"),
                        _ns(s["offset_ns"], "clock offset_ns"),
                        _ns(s.get("error_ns", 0), "clock error_ns"),
                    )
                )
    if not samples:
        return None
    samples = sorted(set(samples))
    # The fit is made relative to the first sample, in exact integers before any float: at real
    # clock readings (about 1.7e18 ns) a float64 of the absolute time steps by 256 ns.
    h0, o_first = samples[0][0], samples[0][1]
    h = np.array([s[0] - h0 for s in samples], np.float64)
    o = np.array([s[1] - o_first for s in samples], np.float64)
    err = max(s[2] for s in samples)
    if len(samples) >= 2 and h[-1] > 0:
        slope = float(np.polyfit(h, o, 1)[0])
    else:
        slope = 0.0
    o0 = 0.0 if len(o) == 1 else float(np.mean(o - slope * h))  # the fit's, after o_first

    def offset(t_gpu_ns: int) -> int:
        """%globaltimer - host clock at GPU time t_gpu_ns, in ns."""
        since_ns = int(round(t_gpu_ns)) - o_first - h0 - o0  # host time after the first sample
        return o_first + round(o0 + slope * since_ns)

    desc = {
        "method": "clock",
        "samples": len(samples),
        "offset_ns": o_first + round(o0),
        "drift_ppm": slope * 1e6,
        "probe_error_ns": err,
    }
    return offset, desc


# -- shifting decoded traces -------------------------------------------------------------------


def shift(trace: TraceData, delta_ns: int) -> TraceData:
    """The same trace with every time moved by `delta_ns` (lanes never initialised stay 0)."""
    ev = dict(trace.events)
    ev["start_ns"] = ev["start_ns"] + delta_ns
    ev["end_ns"] = ev["end_ns"] + delta_ns
    lanes = dict(trace.lanes)
    lanes["anchor_ns"] = np.where(
        lanes["initialized"], lanes["anchor_ns"] + delta_ns, lanes["anchor_ns"]
    )
    um = dict(trace.unmatched)
    um["time_ns"] = um["time_ns"] + delta_ns
    return replace(trace, events=ev, lanes=lanes, unmatched=um, event_names=dict(trace.event_names))


def _decoded(caps: list[Capture], offset, what: str = "") -> list[TraceData]:
    """Each capture decoded, moved by -offset(its start) where `offset` is given (`what`: where
    the offset comes from, for the message)."""
    from ..trace.decode import decode

    out = []
    for c in caps:
        t = decode([c])
        if offset is not None:
            delta = -offset(t.start_ns)
            if _has_time(t):
                _check_moved(t, delta, what)
            t = shift(t, delta)
        out.append(t)
    return out


def _check_moved(t: TraceData, delta_ns: int, what: str) -> None:
    """Times moved by delta_ns stay in 0..2**63 - 1 ns, as decoded times do: else they would
    wrap in int64 (a trace placed centuries away, spans of negative time)."""
    lo, hi = int(t.start_ns) + delta_ns, int(t.end_ns) + delta_ns  # Python ints: no wrap
    if not 0 <= lo <= hi <= fmt.MAX_TIME_NS:
        raise FormatError(
            f"{what} move{'s' if not what.endswith('s') else ''} its times to {lo:,}..{hi:,} ns, "
            "outside 0..2**63 - 1 ns, which int64 nanoseconds cannot hold: a damaged or "
            "hand-edited capture; remove the key to merge without it"
        )


# -- the merged file ---------------------------------------------------------------------------


def earliest_ns(ranks) -> int | None:
    """The earliest time of the ranks' traces, None where none has any; a part with nothing in
    it (no lane initialised: a rank or slot that ran nothing) has no time and does not count."""
    starts = [int(p.start_ns) for _, parts in ranks for p in parts if _has_time(p)]
    return min(starts) if starts else None


def _has_time(t: TraceData) -> bool:
    return bool(len(t.events["kind"]) or len(t.unmatched["kind"]) or t.lanes["initialized"].any())


def rank_timelines(ranks) -> list[tuple[int, Timeline]]:
    """Each rank's captures as one timeline, laid out as a plain export would lay them out."""
    from ..trace.timeline import build

    return [
        (r, build(parts[0] if len(parts) == 1 else TraceData.concat(parts))) for r, parts in ranks
    ]


def rank_drawings(timelines: list[tuple[int, Timeline]]) -> list[tuple[int, Drawing]]:
    """What the writers draw of each rank's timeline (trace.drawing), built once."""
    return [(r, drawing_of(tl)) for r, tl in timelines]


# Merges write these two formats (each has a writer of several ranks: iter_ranks_chunks,
# ranks_json; with torch.profiler's rows, torch_perfetto.write_merged and ranks_json).
PERFETTO_SUFFIXES = FORMATS["perfetto"].extensions
JSON_SUFFIXES = FORMATS["chrome"].extensions


def torch_format(path) -> str:
    """The format of a trace merged with torch.profiler's, by `path`'s extension: 'perfetto'
    (.perfetto-trace, .pftrace) or 'chrome' (.json, .json.gz); ConfigError for any other."""
    name = os.fspath(path).lower()
    if name.endswith(PERFETTO_SUFFIXES):
        return "perfetto"
    if name.endswith(JSON_SUFFIXES):
        return "chrome"
    raise ConfigError(
        "name a trace merged with torch.profiler's .perfetto-trace (Perfetto: SM tracks in "
        "order, opening on the recorded steps) or .json / .json.gz (Chrome JSON, as torch "
        f"writes), got {os.fspath(path)!r}"
    )


def recorded_steps(docs: list[dict], drawings: list[tuple[int, Drawing]]):
    """The span a trace merged with torch's opens on (a drawing.Focus): the recorded steps,
    torch's ProfilerStep#N rows of `docs` and our programs (the ranks' drawings), on torch's
    clock; None where neither has any."""
    from ..report.coverage import step_windows
    from ..trace.drawing import Focus
    from ..wire.auto_schedule import step_runs

    lows, highs, steps = [], [], set()
    for doc in docs:
        w = step_windows(doc)
        if len(w["step"]):
            lows.append(int(w["start_ns"].min()))
            highs.append(int(w["end_ns"].max()))
            steps.update(w["step"].tolist())
    ours = [d for _, d in drawings if len(d.launches["start_ns"])]
    lows += [d.start_ns for d in ours]
    highs += [d.end_ns for d in ours]
    if not lows:
        return None
    label = f"the recorded steps ({step_runs(sorted(steps))})" if steps else "our programs"
    return Focus(min(lows), max(highs), label, "the rest")


def about_lines(info: dict) -> list[str]:
    """How a torch merge put our programs on torch's clock, for a Perfetto trace's description
    (a Chrome JSON trace keeps `info` as its sm_profiler_alignment)."""
    line = f"our programs on torch.profiler's clock (the host's), aligned by {info['method']}"
    if "offset_ns" in info:
        line += f": %globaltimer - host clock = {info['offset_ns']:,} ns"
    lines = [line]
    for r, e in (info.get("error") or {}).items():
        if e.get("matched"):
            lines.append(
                f"GPU {r}: {e['matched']} launches matched to torch's kernel rows; first and "
                f"last stamps within {e['max_abs_ns']:,.0f} ns of CUPTI's start and end"
            )
    return lines


def write_json(doc: dict, path) -> None:
    from ..paths import atomic_output, check_writable
    from .chrome import encode_json, write_json_bytes

    if torch_format(path) != "chrome":
        raise ConfigError(f"Chrome JSON is written to .json or .json.gz, not {os.fspath(path)!r}")
    check_writable(path)
    try:
        data = encode_json(doc)
    except (ValueError, TypeError, RecursionError) as e:
        raise CaptureError(
            f"cannot write {os.fspath(path)!r}: the torch trace's rows cannot be "
            f"written back as JSON ({type(e).__name__})"
        ) from e
    with atomic_output(path) as tmp:
        write_json_bytes(data, tmp, compress=os.fspath(path).lower().endswith(".gz"))


# -- several ranks -----------------------------------------------------------------------------


def align_ranks(
    sources, align: str = "auto", per_launch: bool = False
) -> tuple[list[tuple[int, list[TraceData]]], dict]:
    """[(rank, decoded captures on one time axis)], and what the alignment used. An auto-mode
    table is decoded whole, as one part (per_launch: one part per launch, as torch's rows are
    matched)."""
    if align not in ("auto", "clock", "barrier", "none"):
        raise ConfigError(f"align={align!r}: use 'auto', 'clock', 'barrier' or 'none'")
    per_rank = [captures_of(s) for s in sources]
    tables = [isinstance(c, AutoTable) for c in per_rank]
    if any(tables):
        if not all(tables):
            raise ConfigError(
                "merge takes auto-mode files or capture files, not both: merge each kind alone"
            )
        return _align_tables(per_rank, align, per_launch)
    ranks = [_rank_of(c, i) for i, c in enumerate(per_rank)]
    if len(set(ranks)) != len(ranks):
        ranks = list(range(len(per_rank)))  # several files of one rank: number them in order
    clocks = [clock_offset(c) for c in per_rank]
    barriers = [
        next(
            (
                _ns(c.metadata["barrier_ns"], "barrier_ns")
                for c in caps
                if c.metadata.get("barrier_ns") is not None
            ),
            None,
        )
        for caps in per_rank
    ]
    method = align
    if align == "auto":
        method = (
            "clock"
            if all(clocks)
            else "barrier"
            if all(b is not None for b in barriers)
            else "none"
        )
    if method == "clock" and not all(clocks):
        raise ConfigError("align='clock': a rank has no clock samples (SmProfiler.calibrate_clock)")
    if method == "barrier" and not all(b is not None for b in barriers):
        raise ConfigError("align='barrier': a rank has no barrier_ns stamp (clock.barrier_stamp)")
    out, info = [], {"method": method, "ranks": {}}
    for r, caps, clk, bar in zip(ranks, per_rank, clocks, barriers, strict=True):
        if method == "clock":
            parts = _decoded(caps, clk[0], f"rank {r}'s clock samples")
            info["ranks"][r] = clk[1]
        elif method == "barrier":
            delta = int(barriers[0]) - int(bar)
            parts = _decoded(caps, lambda t, d=delta: -d, f"rank {r}'s barrier_ns")
            info["ranks"][r] = {"method": "barrier", "shift_ns": delta}
        else:
            parts = _decoded(caps, None)
            info["ranks"][r] = {"method": "none"}
        out.append((r, parts))
    return out, info


def _align_tables(tables, align: str, per_launch: bool):
    """align_ranks of auto-mode tables: each decoded whole; 'clock' moves each onto the host
    clock by the samples its GPUs took when its region ended."""

    clocked = all(clock_offset_ns(s) is not None for t in tables for s in t.sessions)
    # One rank against torch's rows (per_launch): its launches are matched to their CUPTI rows
    # (merge_torch_trace), which lines them up closer than the clock probe does.
    alone = per_launch and len(tables) == 1
    method = {"auto": "clock" if clocked and not alone else "none"}.get(align, align)
    if method == "clock" and not clocked:
        raise ConfigError("align='clock': a rank's file has no clock samples")
    if method == "barrier":
        raise ConfigError("align='barrier': auto-mode files carry clock samples; use 'clock'")
    out, info = [], {"method": method, "ranks": {}}
    seen: set[int] = set()
    for i, t in enumerate(tables):
        r = int(t.ranks()[0]) if len(t.sessions) else i
        r = r if r not in seen else max(seen) + 1
        seen.add(r)
        if method == "clock":
            t = t.on_host_clock()
        info["ranks"][r] = {"method": method, "gpus": len(t.sessions), "launches": t.num_launches}
        trace = t.decode()
        out.append((r, launch_parts(trace) if per_launch else [trace]))
    return out, info


def launch_parts(trace: TraceData) -> list[TraceData]:
    """An auto trace (rows sorted by launch) as one TraceData per launch, by slicing."""
    out = []
    ev, ln = trace.events, trace.lanes
    e_at = np.searchsorted(ev["capture"], np.arange(len(trace.kernels) + 1))
    l_at = np.searchsorted(ln["capture"], np.arange(len(trace.kernels) + 1))
    empty = {k: v[:0] for k, v in trace.unmatched.items()}
    for c in range(len(trace.kernels)):
        e = {k: v[e_at[c] : e_at[c + 1]] for k, v in ev.items()}
        lanes = {k: v[l_at[c] : l_at[c + 1]] for k, v in ln.items()}
        e["capture"] = np.zeros(len(e["capture"]), np.int32)
        lanes["capture"] = np.zeros(len(lanes["capture"]), np.int32)
        out.append(TraceData(e, lanes, empty, [trace.kernels[c]], trace.event_names))
    return out


def merge_ranks(sources, path, align: str = "auto") -> dict:
    """Write the captures of several ranks (one source per rank) as one trace on one time axis,
    by `path`'s extension: Perfetto protobuf (.perfetto-trace, .pftrace), per rank a root 'GPU r'
    and its SMs 'GPU r · SM s', in that order in the Perfetto UI; or Chrome JSON (.json,
    .json.gz), `GPU r · SM s` processes. Returns the alignment info (also in the file: the
    roots' description, or the JSON's otherData)."""
    from ..paths import check_writable

    name = os.fspath(path).lower()
    if not name.endswith((*PERFETTO_SUFFIXES, *JSON_SUFFIXES)):
        raise ConfigError(
            "name the merged trace .perfetto-trace (Perfetto: GPU by GPU, SM by SM in the "
            f"Perfetto UI), .json or .json.gz (Chrome JSON), got {os.fspath(path)!r}"
        )
    check_writable(path)
    ranks, info = align_ranks(sources, align)
    base = earliest_ns(ranks) or 0  # nothing recorded: any origin
    drawings = rank_drawings(rank_timelines(ranks))
    if name.endswith(PERFETTO_SUFFIXES):
        _write_perfetto(drawings, path, info)
        return info
    other = {"base_ns": base, "sm_profiler_alignment": info}
    doc = ranks_json(drawings, base, otherData=other)
    write_json(doc, path)
    return info


def _write_perfetto(drawings: list[tuple[int, Drawing]], path, info: dict) -> None:
    """The ranks' drawings as one Perfetto trace, saying in each root's description how they
    were aligned and what each rank's buffers dropped (as the JSON's keys say)."""
    from ..paths import atomic_output
    from .perfetto import iter_ranks_chunks

    dropped = {r: d.dropped_total for r, d in drawings}
    about = [
        f"{plural(len(drawings), 'rank')} on one time axis, aligned by {info['method']}",
        f"records dropped: {sum(dropped.values()):,} ("
        + ", ".join(f"rank {r}: {n:,}" for r, n in dropped.items())
        + ")",
    ]
    with atomic_output(path) as tmp, open(tmp, "wb") as f:
        for chunk in iter_ranks_chunks(drawings, about):
            f.write(chunk)


# -- torch.profiler ----------------------------------------------------------------------------


def _launches(parts: list[TraceData]) -> tuple[list[str], list[int], list[int]]:
    """(kernel names, first stamps, last stamps) of `parts`, one launch each: what
    report/alignment.py matches to CUPTI's rows."""
    names, starts, ends = [], [], []
    for p in parts:
        names.append(p.kernels[0].name)
        starts.append(int(p.start_ns))
        ends.append(int(p.end_ns))
    return names, starts, ends


def match_launches(parts: list[TraceData], rows: dict[str, list[tuple[int, int]]]):
    """[(part index, cupti start, cupti end)]: alignment.match_nearest of the parts (one launch
    each), once they are on CUPTI's axis."""
    names, starts, _ = _launches(parts)
    return match_nearest(names, starts, rows)


def match_in_order(parts: list[TraceData], rows: dict[str, list[tuple[int, int]]]):
    """alignment.match_in_order of the parts (one launch each), whose clock is not yet CUPTI's."""
    names, starts, _ = _launches(parts)
    return _match_in_order(names, starts, rows)


def kernels_offset(parts: list[TraceData], rows) -> int | None:
    """alignment.kernel_offset_ns of the parts: %globaltimer - CUPTI's clock from their own
    CUPTI rows, or None."""
    names, starts, _ = _launches(parts)
    return kernel_offset_ns(names, starts, rows)


def alignment_error(parts: list[TraceData], rows) -> dict:
    """alignment.alignment_error of the parts (one launch each) on CUPTI's axis."""
    return _alignment_error(*_launches(parts), rows)


def merge_torch_trace(torch_trace, sources, path, offset_ns: int | None = None) -> dict:
    """Write torch.profiler's trace with our SM/warp tracks added, on torch's time axis.

    torch_trace: a torch.profiler.profile (after it stopped), its exported JSON path, or the dict.
    sources: an SmProfiler, Captures or a capture file (one GPU), or a list of those (ranks).
    offset_ns: %globaltimer - torch's clock, if known; else measured (see the module doc).
    Returns the alignment info, also written into the file as "sm_profiler_alignment". The
    file's times count from its own origin (baseTimeNanoseconds, chrome.time_origin), torch's
    rows moved onto it by whole ns; "sm_profiler_time_origin" says from where.

    `path`'s extension says the format: .perfetto-trace / .pftrace, native Perfetto
    (torch_perfetto.py: torch's rows as track events, our SMs as a job's trace draws them, in SM
    order, opening on the recorded steps; the info in the roots' description), or .json /
    .json.gz, Chrome JSON as torch writes (the info as the keys above)."""
    native = torch_format(path) == "perfetto"
    doc = read_torch_doc(torch_trace)
    from ..report.coverage import kernel_table

    table = kernel_table(doc)  # read once: for the alignment and for the coverage
    rows = cupti_kernels(doc, table)
    multi = isinstance(sources, (list, tuple)) and sources and not isinstance(sources[0], Capture)
    srcs = list(sources) if multi else [sources]
    if offset_ns is not None:
        aligned, _ = align_ranks(srcs, "none", per_launch=True)
        ranks = [(r, [shift(p, -offset_ns) for p in parts]) for r, parts in aligned]
        info = {"method": "given", "offset_ns": offset_ns}
    else:
        ranks, info = align_ranks(srcs, "auto", per_launch=True)
        if info["method"] == "none" and len(ranks) == 1:
            # The kernels' own CUPTI rows: the median first-stamp - CUPTI-start distance.
            r, parts = ranks[0]
            off = kernels_offset(parts, rows)
            if off is not None:
                ranks = [(r, [shift(p, -off) for p in parts])]
                info = {
                    "method": "kernels",
                    "offset_ns": off,
                    "note": "offset from the instrumented kernels' CUPTI rows",
                }
    err = {r: alignment_error(parts, rows) for r, parts in ranks}
    info = dict(info, error=err)
    timelines = rank_timelines(ranks)
    cov, other = torch_coverage_bars(doc, table, ranks, timelines)
    if native:
        from .torch_perfetto import write_merged

        drawings = rank_drawings(timelines)
        focus = recorded_steps([doc], drawings)
        write_merged(path, drawings, [(None, doc)], other, about_lines(info), focus)
        return dict(info, coverage=cov)
    # One time origin near the rows, torch's moved onto it exactly (chrome.time_origin).
    base = int(doc.get("baseTimeNanoseconds", 0))
    origin = time_origin(earliest_ns(ranks), [doc])
    events, early = moved_rows(named_processes(doc.get("traceEvents", [])), base - origin)
    moved = {"ns": origin, "torch_base_ns": base, "rows_before": early}
    keys = {"sm_profiler_alignment": info, "sm_profiler_coverage": cov}
    keys["sm_profiler_time_origin"] = moved
    doc = dict(doc, traceEvents=events, baseTimeNanoseconds=origin)
    out = ranks_json(rank_drawings(timelines), origin, doc, other=other, **keys)
    write_json(out, path)
    return dict(info, coverage=cov)


# -- what the instrumented kernels cover (sm_profiler.report.coverage) -------------------------------


def torch_coverage_bars(doc: dict, table: dict, ranks, timelines: list) -> tuple[dict, dict]:
    """The torch trace's exact coverage by the ranks' kernels (`table`: its kernel_table), with
    what was drawn of the unseen kernels ("bars"); and {rank: unseen kernels} for ranks_json
    (`timelines` widened in place to every SM a kernel is drawn on, so that each has a track)."""
    from ..report import coverage as cv

    names = {p.kernels[0].name for _, parts in ranks for p in parts}
    seen = cv.instrumented_mask(table, names)
    cov = cv.coverage(table, cv.step_windows(doc), seen)
    devices, note = _bar_devices(doc, table, [r for r, _ in ranks])
    counts = cv.sm_counts(doc)
    cap, bars, other = cv.MAX_UNSEEN_SLICES, [], {}
    for k, (r, tl) in enumerate(timelines):
        if r not in devices:
            continue
        d = devices[r]
        unseen = (table["device"] == d) & ~seen
        kernels, drawn = cv.unseen_kernels(table, unseen, counts.get(d), tl.sms, cap)
        # The SMs drawn on get a track each (those none of our programs ran on too).
        timelines[k] = (r, with_sms(tl, kernels["sms"][: kernels["n_sms"].max(initial=0)]))
        cap -= drawn["slices"]
        other[r] = kernels
        bars.append(dict(rank=r, device=d, **drawn))
    cov["bars"] = {"drawn": bars, "note": note}
    return cov, other


def _bar_devices(doc: dict, table: dict, ranks: list[int]) -> tuple[dict[int, int], str | None]:
    """{rank: CUPTI device id} of the ranks whose SM tracks get the torch trace's unseen kernels,
    and why not where none does: only where the rank is certain (one GPU in the torch trace,
    and one rank merged or the trace's distributedInfo naming it)."""
    devices = np.unique(table["device"]).tolist()
    if not devices:
        return {}, "the torch trace has no kernel rows"
    if len(devices) > 1:
        return {}, (
            f"the torch trace holds kernels of {len(devices)} GPUs (devices "
            f"{', '.join(map(str, devices[:8]))}): which rank's SMs ran them is not known"
        )
    dist = doc.get("distributedInfo")
    rank = dist.get("rank") if isinstance(dist, dict) else None
    if len(ranks) == 1:
        return {ranks[0]: devices[0]}, None
    if isinstance(rank, int) and not isinstance(rank, bool) and rank in ranks:
        return {rank: devices[0]}, None
    return {}, (
        "the torch trace does not say which of the merged ranks it is (distributedInfo.rank): "
        "its kernels are drawn on no rank's SMs"
    )
