"""torch.profiler's trace in auto mode's files, and the traces merged with it (`sm-profiler run
--torch`, `sm_profiler.auto(torch_profiler=True)`; docs/auto.md, "torch.profiler beside it").

    auto.rank3.npz               rank 3's table, and torch.profiler's trace of its recorded steps
                                 inside (member `torch_trace`: gzip'd Chrome JSON), so that the
                                 file alone carries it from node to node
    auto.rank3.torch.perfetto-trace
                                 rank 3: torch.profiler's rows (CPU ops, every kernel CUPTI saw)
                                 with our per-SM programs, and the kernels we did not record
                                 drawn on the SM tracks (merge_torch_trace); native Perfetto
                                 (export.torch_perfetto), or Chrome JSON as
                                 auto.rank3.torch.json.gz (`run --torch-json`)
    auto.ranks.torch.perfetto-trace
                                 the first rank (or `sm-profiler merge DIR`): every rank's, on
                                 one time axis, rank by rank (merge_job); .json.gz likewise

(auto.npz and auto.torch.perfetto-trace for one process.) The job trace
(auto.ranks.perfetto-trace) holds our programs only.

Time axis of the job's trace: torch stamps with the host's clock (CLOCK_REALTIME), so each rank's
torch rows are moved by whole ns onto the trace's own origin (export.chrome.time_origin, its
baseTimeNanoseconds); each rank's programs
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

from ..errors import CaptureError, InflationError
from ..wire.torch_trace import named_processes

MEMBER = "torch_trace"  # the .npz member (uint8: gzip'd Chrome JSON)
TORCH_SUFFIX = ".torch.json.gz"  # auto.torch.json.gz, auto.rank3.torch.json.gz (--torch-json)
RANKS_TORCH_TRACE = "auto.ranks.torch.json.gz"
TORCH_PERFETTO_SUFFIX = ".torch.perfetto-trace"  # auto.torch.perfetto-trace: the default
RANKS_TORCH_PERFETTO = "auto.ranks.torch.perfetto-trace"
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
    from .chrome import encode_json

    return {MEMBER: gzip.compress(encode_json(doc), compresslevel=6)}


def read(path, notes: list[str] | None = None) -> dict | None:
    """torch.profiler's trace stored in an auto file, checked as any torch trace is
    (torch_trace.py: bounded, then its rows); None where the file holds none (or is no zip:
    the capture reader says what it is). The member and the JSON it inflates to are held to
    what its stored bytes may inflate to, as a .gz given to `merge --torch` is
    (inflation_limit): a gzip bomb is refused while it inflates. notes: where given, a trace
    past that limit is left out (None) and said there, so that the rest is read without it."""
    from ..wire.capture import read_member
    from ..wire.torch_trace import check_torch_doc, inflation_limit, read_bounded

    name = repr(os.fspath(path))
    try:
        z = zipfile.ZipFile(path)
    except (OSError, zipfile.BadZipFile):
        return None
    with z:
        if f"{MEMBER}.npy" not in z.namelist():
            return None
        stored_bytes = z.getinfo(f"{MEMBER}.npy").compress_size
        limit = inflation_limit(stored_bytes)
        try:
            if z.getinfo(f"{MEMBER}.npy").file_size > limit:
                raise InflationError(f"{name}: {_too_large(stored_bytes, limit)}")
            raw = read_member(z, MEMBER, name, limit, uint8=True)
            data = read_bounded(io.BytesIO(raw.tobytes()), True, limit, name)
            del raw
            doc = json.loads(data)
        except InflationError:
            if notes is None:
                raise
            notes.append(
                f"the torch.profiler trace in {name} was left out (the rest is read without "
                f"it): {_too_large(stored_bytes, limit)}"
            )
            return None
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
    return check_torch_doc(doc, f"the torch trace in {name}")


def _too_large(stored_bytes: int, limit: int) -> str:
    """Why a rank file's torch trace of `stored_bytes` is not read, and how to read it."""
    from ..wire import torch_trace as tt

    return (
        f"its {stored_bytes / 2**20:.1f} MiB inflate past {limit / 2**20:.0f} MiB, the limit "
        f"for a torch trace ({tt.MAX_TORCH_RATIO}x its stored size plus "
        f"{tt.MAX_TORCH_SLACK >> 20} MiB, at most {tt.MAX_TORCH_BYTES >> 20} MiB): a damaged "
        "or hostile file; to read a trace this large, raise MAX_TORCH_RATIO, MAX_TORCH_SLACK "
        "and MAX_TORCH_BYTES in sm_profiler.wire.torch_trace"
    )


def stored(path, notes: list[str] | None = None) -> dict | None:
    """The torch traces an auto file or a run folder carries, for advise(cupti=) and the
    report: a file's trace; a folder's (the files job.load_ranks reads: folder_files) as
    {rank: trace} of the rank files that carry one, or its one auto.npz's trace; None where
    none does. notes: as read's."""
    if not os.path.isdir(path):
        return read(path, notes)
    from .auto_job import folder_files

    found = folder_files(os.fspath(path))
    if os.path.basename(found.get(0, "")) == "auto.npz":
        return read(found[0], notes)  # one process's folder: its trace, as its file's
    docs = {r: read(p, notes) for r, p in found.items()}
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
    from .merge import merge_torch_trace

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
    from ..wire.auto_schedule import step_runs

    return step_runs(values) if values else "no ProfilerStep#N"


# -- several ranks ----------------------------------------------------------------------------


def merge_job(tables: list, docs: list, path) -> dict:
    """Every rank's table, and the torch trace of those that have one, as one trace: Chrome JSON
    (.json / .json.gz), per rank its torch processes (named `rank r · ...`), then its SMs
    (`GPU r · SM s`, the kernels it did not record drawn on them); or native Perfetto
    (.perfetto-trace, export.torch_perfetto: rank r's torch tracks `GPU r · ...` beside its
    SMs). See the module doc for the time axis. Returns {"ranks": {rank: alignment}, "coverage": {rank: coverage}, "notes"}."""
    from ..report.coverage import kernel_table
    from .chrome import moved_rows, ranks_json, time_origin
    from .merge import earliest_ns, rank_timelines, torch_coverage_bars, torch_format, write_json

    if len(tables) != len(docs):  # internal: the CLI reads one per rank file
        raise ValueError("one torch trace (or None) per table")
    native = torch_format(path) == "perfetto"
    placed, seen = [], set()
    for i, (t, doc) in enumerate(zip(tables, docs, strict=True)):
        r = int(t.ranks()[0]) if len(t.sessions) else i
        r = r if r not in seen else max(seen) + 1
        seen.add(r)
        placed.append((r, t, doc, *_place(t, doc)))
    ranks = [(r, parts) for r, _, _, parts, _ in placed]
    timelines = rank_timelines(ranks)
    # One time origin near the rows, every rank's torch rows moved onto it exactly.
    base = time_origin(earliest_ns(ranks), [d for d in docs if d is not None])
    torch_doc: dict = {"traceEvents": [], "displayTimeUnit": "ms", "baseTimeNanoseconds": base}
    moved: dict = {"ns": base, "torch_base_ns": {}, "rows_before": 0}
    infos, covs, other, about, notes, rank_docs = {}, {}, {}, {}, [], []
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
        cov, drawn = torch_coverage_bars(doc, table, [(r, parts)], one)
        timelines[k] = one[0]
        covs[r] = cov
        other.update(drawn)
        rank_docs.append((r, doc))
        doc_base = int(doc.get("baseTimeNanoseconds", 0))
        if not native:
            rows, early = moved_rows(named_processes(doc["traceEvents"]), doc_base - base)
            moved["rows_before"] += early
            torch_doc["traceEvents"] += _torch_events(rows, r, next_tid)
        moved["torch_base_ns"][r] = doc_base
        about[r] = {
            key: doc[key]
            for key in ("distributedInfo", "deviceProperties", "trace_id", "host_name")
            if key in doc
        }
        note = step_note(doc, t, f"rank {r}: ")
        if note:
            notes.append(note)
    if native:
        from .merge import rank_drawings, recorded_steps
        from .torch_perfetto import write_merged

        lines = [f"rank {r}: aligned by {a['method']}" for r, a in infos.items()]
        drawings = rank_drawings(timelines)
        focus = recorded_steps([d for _, d in rank_docs], drawings)
        if len(timelines) == 1:  # one rank: its tracks named as `run --torch` names them
            rank_docs = [(None, d) for _, d in rank_docs]
        write_merged(path, drawings, rank_docs, other, lines + notes, focus)
        return {"ranks": infos, "coverage": covs, "notes": notes}
    keys = {
        "sm_profiler_alignment": {"method": "per rank", "ranks": infos},
        "sm_profiler_coverage": {"ranks": covs},
        "sm_profiler_torch": {"ranks": about, "notes": notes},
        "sm_profiler_time_origin": moved,
    }
    out = ranks_json(timelines, base, torch_doc, other=other, **keys)
    write_json(out, path)
    return {"ranks": infos, "coverage": covs, "notes": notes}


def _place(table, doc):
    """(the table's per-launch parts on the host clock of its torch trace, how) of one rank:
    by its kernels' CUPTI rows, else its clock samples, else as recorded."""
    from ..trace.auto_table import clock_offset_ns
    from .merge import alignment_error, cupti_kernels, kernels_offset, launch_parts, shift

    clocked = bool(table.sessions) and all(clock_offset_ns(s) is not None for s in table.sessions)
    info: dict = {"torch": doc is not None}
    if doc is not None:
        rows = cupti_kernels(doc)
        parts = launch_parts(table.decode())
        off = kernels_offset(parts, rows)
        if off is not None:
            parts = [shift(p, -off) for p in parts]
            info.update(method="kernels", offset_ns=off)
        elif clocked:
            parts = launch_parts(table.on_host_clock().decode())
            info.update(method="clock")
        else:
            info.update(method="none")
        info["error"] = alignment_error(parts, rows)
        return parts, info
    if clocked:
        return [table.on_host_clock().decode()], dict(info, method="clock")
    return [table.decode()], dict(info, method="none")


def _torch_events(rows: list[dict], rank: int, next_tid: list[int]) -> list[dict]:
    """A rank's torch rows (named_processes', on the job trace's time origin) for the job trace:
    its processes and threads given ids of their own (a pid or tid of one rank is another's on
    another node), processes named and ordered `rank r · ...` before the rank's SMs, flow ids
    kept apart."""
    from ..errors import ConfigError

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
    for e in rows:
        e = dict(e)
        p = e.get("pid", 0)
        if "tid" in e:
            e["tid"] = tid_of(p, e["tid"])
        e["pid"] = pid_of(p)
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
