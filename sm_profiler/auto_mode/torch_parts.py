"""torch.profiler's trace in auto mode's files, and the traces merged with it (`sm-profiler run
--torch`, `sm_profiler.auto(torch_profiler=True)`; docs/auto.md, "torch.profiler beside it").

    auto.rank3.npz               rank 3's table, and torch.profiler's trace of its recorded steps
                                 inside (member `torch_trace`: gzip'd Chrome JSON), so that the
                                 file alone carries it from node to node
    auto.rank3.torch.json.gz     rank 3: torch.profiler's rows (CPU ops, every kernel CUPTI saw)
                                 with our per-SM programs, and the kernels we did not record
                                 drawn on the SM tracks (merge_torch_trace); Chrome JSON
    auto.ranks.torch.json.gz     the first rank (or `sm-profiler merge DIR`): every rank's, on
                                 one time axis, rank by rank (merge_job)

(auto.npz and auto.torch.json.gz for one process.) The Perfetto job trace
(auto.ranks.perfetto-trace) holds our programs only: torch's rows are Chrome JSON, which that
writer does not translate.

Time axis of the job's trace: torch stamps with the host's clock (CLOCK_REALTIME), so each rank's
torch rows are moved by the difference of the traces' baseTimeNanoseconds; each rank's programs
are put on its own torch trace's axis by its instrumented kernels' CUPTI rows (as `merge --torch`
does: the median first stamp - CUPTI start), else by its clock samples (host clock), else left
on %globaltimer. Ranks on several nodes are then as far apart as the nodes' clocks are.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import zipfile

import numpy as np

from ..errors import CaptureError
from ..wire.torch_trace import named_processes

MEMBER = "torch_trace"  # the .npz member (uint8: gzip'd Chrome JSON)
TORCH_SUFFIX = ".torch.json.gz"  # auto.torch.json.gz, auto.rank3.torch.json.gz
RANKS_TORCH_TRACE = "auto.ranks.torch.json.gz"
# The job trace's ids for torch's own rows: each rank's processes from TORCH_PID_BASE (at most
# TORCH_PIDS_PER_RANK a rank), every thread one id from TORCH_TID_BASE up; clear of each other
# and of our ranks' ids (export.chrome.PID_BASE up).
TORCH_PID_BASE = 0x1000_0000
TORCH_PIDS_PER_RANK = 4096
TORCH_TID_BASE = 0x4000_0000
FLOW_IDS_PER_RANK = 1 << 40  # flow arrows (launch -> kernel) stay inside their rank


# -- the trace inside a rank's file -----------------------------------------------------------


def members(doc: dict | None) -> dict[str, bytes]:
    """The file members that carry `doc` (AutoTable.save's `members`); none without one."""
    if doc is None:
        return {}
    from ..export.chrome import encode_json

    return {MEMBER: gzip.compress(encode_json(doc), compresslevel=6)}


def read(path) -> dict | None:
    """torch.profiler's trace stored in an auto file, checked as any torch trace is
    (torch_trace.py: bounded, then its rows); None where the file holds none (or is no zip:
    the capture reader says what it is)."""
    from ..wire.capture import _read_member
    from ..wire.torch_trace import MAX_TORCH_BYTES, _check_torch_doc, _read_bounded

    name = repr(os.fspath(path))
    try:
        z = zipfile.ZipFile(path)
    except (OSError, zipfile.BadZipFile):
        return None
    with z:
        if f"{MEMBER}.npy" not in z.namelist():
            return None
        try:
            raw = _read_member(z, MEMBER, name, MAX_TORCH_BYTES, uint8=True)
            data = _read_bounded(io.BytesIO(raw.tobytes()), True, MAX_TORCH_BYTES, name)
            doc = json.loads(data)
        except CaptureError:
            raise
        except (OSError, EOFError, ValueError, zipfile.BadZipFile) as e:
            raise CaptureError(
                f"{name}: its torch.profiler trace is damaged ({type(e).__name__}: "
                f"{str(e)[:120]}): merge without it by copying the file under another name "
                "without its torch_trace member, or re-run with --torch"
            ) from e
        except RecursionError as e:
            raise CaptureError(f"{name}: its torch.profiler trace nests too deeply") from e
    return _check_torch_doc(doc, f"the torch trace in {name}")


def stored(path) -> dict | None:
    """The torch traces an auto file or a run folder carries, for advise(cupti=) and the
    report: a file's trace; a folder's as {rank: trace} of the rank files that carry one (its
    one auto.npz: that file's trace); None where none does."""
    if not os.path.isdir(path):
        return read(path)
    from .job import rank_files

    found = rank_files(os.fspath(path), strict=True)
    if not found:
        single = os.path.join(path, "auto.npz")
        return read(single) if os.path.isfile(single) else None
    docs = {r: read(p) for r, p in found.items()}
    return {r: d for r, d in docs.items() if d is not None} or None


def of(region) -> dict | None:
    """The torch trace a region (AutoProfiler, or a test's stand-in) recorded, if any."""
    get = getattr(region, "torch_trace", None)
    return get() if callable(get) else None


# -- one process ------------------------------------------------------------------------------


def instrumented_names(table) -> list[str]:
    """The kernels of `table` that recorded a launch (the merge's instrumented names)."""
    names = table.kernel_names()
    return [names[k] for k in np.unique(table.launches["kernel"]).tolist() if k < len(names)]


def rank_coverage(doc: dict, table) -> dict:
    """The coverage of one process's torch trace by its table's kernels (torch_coverage), with
    the kernels named as merge_torch_trace names them."""
    from ..report.coverage import torch_coverage

    return torch_coverage(doc, instrumented_names(table))


def merge_rank(doc: dict, table, path) -> dict:
    """One process's torch trace and table as one Chrome JSON trace (merge_torch_trace);
    returns its info (alignment, coverage) with `notes` (steps that disagree)."""
    from ..export.merge import merge_torch_trace

    info = merge_torch_trace(doc, [table], path)
    note = step_note(doc, table)
    return dict(info, notes=[note] if note else [])


def step_note(doc: dict, table, who: str = "") -> str | None:
    """What to say where the torch trace's ProfilerStep#N are not the table's recorded steps
    (a file edited or mixed up): the CUPTI rows are then of other steps than our programs."""
    from ..report.coverage import step_windows

    theirs = sorted(set(step_windows(doc)["step"].tolist()))
    step = np.asarray(table.launches["step"])
    ours = sorted(set(step[step >= 0].tolist()))
    if not ours or set(ours) <= set(theirs):
        return None
    return (
        f"{who}torch.profiler's steps ({_steps(theirs)}) are not the steps recorded "
        f"({_steps(ours)}): its kernel rows and our programs are of different steps"
    )


def _steps(values: list[int]) -> str:
    from .schedule import step_runs

    return step_runs(values) if values else "no ProfilerStep#N"


# -- several ranks ----------------------------------------------------------------------------


def merge_job(tables: list, docs: list, path) -> dict:
    """Every rank's table, and the torch trace of those that have one, as one Chrome JSON trace
    (.json / .json.gz): per rank its torch processes (named `rank r · ...`), then its SMs
    (`GPU r · SM s`, the kernels it did not record drawn on them); see the module doc for the
    time axis. Returns {"ranks": {rank: alignment}, "coverage": {rank: coverage}, "notes"}."""
    from ..export.chrome import ranks_json
    from ..export.merge import _coverage, _timelines, _write_json
    from ..report.coverage import kernel_table

    if len(tables) != len(docs):
        raise ValueError("one torch trace (or None) per table")
    bases = [int(d.get("baseTimeNanoseconds", 0)) for d in docs if d is not None]
    placed, seen = [], set()
    for i, (t, doc) in enumerate(zip(tables, docs, strict=True)):
        r = int(t.ranks()[0]) if len(t.sessions) else i
        r = r if r not in seen else max(seen) + 1
        seen.add(r)
        placed.append((r, t, doc, *_place(t, doc)))
    timelines = _timelines([(r, parts) for r, _, _, parts, _ in placed])
    base = min(bases) if bases else _earliest(timelines)
    torch_doc: dict = {"traceEvents": [], "displayTimeUnit": "ms", "baseTimeNanoseconds": base}
    infos, covs, other, about, notes = {}, {}, {}, {}, []
    next_tid = [TORCH_TID_BASE]
    for k, (r, t, doc, parts, info) in enumerate(placed):
        infos[r] = info
        if doc is None:
            notes.append(
                f"rank {r}'s file carries no torch.profiler trace (run without --torch, or its "
                "trace was not kept): its GPU shows our programs only"
            )
            continue
        table = kernel_table(doc)
        one = [timelines[k]]
        cov, drawn = _coverage(doc, table, [(r, parts)], one)
        timelines[k] = one[0]
        covs[r] = cov
        other.update(drawn)
        torch_doc["traceEvents"] += _torch_events(doc, r, base, next_tid)
        about[r] = {
            key: doc[key]
            for key in ("distributedInfo", "deviceProperties", "trace_id", "host_name")
            if key in doc
        }
        note = step_note(doc, t, f"rank {r}: ")
        if note:
            notes.append(note)
    keys = {
        "sm_profiler_alignment": {"method": "per rank", "ranks": infos},
        "sm_profiler_coverage": {"ranks": covs},
        "sm_profiler_torch": {"ranks": about, "notes": notes},
    }
    out = ranks_json(timelines, base, torch_doc, other=other, **keys)
    _write_json(out, path)
    return {"ranks": infos, "coverage": covs, "notes": notes}


def _earliest(timelines) -> int:
    starts = [int(tl.trace.start_ns) for _, tl in timelines if len(tl.trace)]
    return min(starts) if starts else 0


def _place(table, doc):
    """(the table's per-launch parts on the host clock of its torch trace, how) of one rank:
    by its kernels' CUPTI rows, else its clock samples, else as recorded."""
    from ..export.merge import _launch_parts, alignment_error, cupti_kernels, kernels_offset, shift
    from .table import clock_offset_ns

    clocked = bool(table.sessions) and all(clock_offset_ns(s) is not None for s in table.sessions)
    info: dict = {"torch": doc is not None}
    if doc is not None:
        rows = cupti_kernels(doc)
        parts = _launch_parts(table.decode())
        off = kernels_offset(parts, rows)
        if off is not None:
            parts = [shift(p, -off) for p in parts]
            info.update(method="kernels", offset_ns=off)
        elif clocked:
            parts = _launch_parts(table.on_host_clock().decode())
            info.update(method="clock")
        else:
            info.update(method="none")
        info["error"] = alignment_error(parts, rows)
        return parts, info
    if clocked:
        return [table.on_host_clock().decode()], dict(info, method="clock")
    return [table.decode()], dict(info, method="none")


def _torch_events(doc: dict, rank: int, base_ns: int, next_tid: list[int]) -> list[dict]:
    """A rank's torch rows for the job trace: times moved onto `base_ns`, its processes and
    threads given ids of their own (a pid or tid of one rank is another's on another node),
    processes named and ordered `rank r · ...` before the rank's SMs, flow ids kept apart."""
    from ..errors import ConfigError

    dt_us = (int(doc.get("baseTimeNanoseconds", 0)) - base_ns) / 1e3
    pids: dict = {}
    tids: dict = {}

    def pid_of(p) -> int:
        key = json.dumps(p)
        if key not in pids:
            if len(pids) >= TORCH_PIDS_PER_RANK:
                raise ConfigError(
                    f"rank {rank}'s torch trace has more than {TORCH_PIDS_PER_RANK} processes"
                )
            pids[key] = TORCH_PID_BASE + rank * TORCH_PIDS_PER_RANK + len(pids)
        return pids[key]

    def tid_of(p, t) -> int:
        key = json.dumps([p, t])
        if key not in tids:
            tids[key] = next_tid[0]
            next_tid[0] += 1
        return tids[key]

    out = []
    for e in named_processes(doc["traceEvents"]):
        e = dict(e)
        p = e.get("pid", 0)
        if "tid" in e:
            e["tid"] = tid_of(p, e["tid"])
        e["pid"] = pid_of(p)
        if dt_us and isinstance(e.get("ts"), (int, float)) and not isinstance(e["ts"], bool):
            e["ts"] = round(e["ts"] + dt_us, 3)
        ph = e.get("ph")
        if (
            ph in ("s", "t", "f")
            and isinstance(e.get("id"), int)
            and 0 <= e["id"] < FLOW_IDS_PER_RANK
        ):
            e["id"] = rank * FLOW_IDS_PER_RANK + e["id"]
        elif ph in ("s", "t", "f") and "id" in e:
            e["id"] = f"rank{rank}:{e['id']}"
        if ph == "M" and e.get("name") == "process_name":
            name = (e.get("args") or {}).get("name", "")
            e["args"] = {"name": f"rank {rank} · {name}"}
        if ph == "M" and e.get("name") == "process_sort_index":
            e["args"] = {"sort_index": rank * 10000 + (e["pid"] - TORCH_PID_BASE) % 1000}
        out.append(e)
    # Every process named and ordered, those torch left unnamed too.
    named = {e["pid"] for e in out if e.get("ph") == "M" and e.get("name") == "process_name"}
    for key, pid in pids.items():
        if pid not in named:
            out.append(_meta("process_name", pid, {"name": f"rank {rank} · {json.loads(key)}"}))
            out.append(
                _meta(
                    "process_sort_index",
                    pid,
                    {"sort_index": rank * 10000 + (pid - TORCH_PID_BASE) % 1000},
                )
            )
    return out


def _meta(name: str, pid: int, args: dict) -> dict:
    return {"ph": "M", "name": name, "pid": pid, "tid": 0, "args": args}
