"""The runner behind `sm-profiler run`: a user's script (or `-m module`) run inside a profiler
region, and what the region recorded written at the end (docs/cli.md, "run").

    program = find_program(["train.py", "--steps", "20"])
    out_dir = output_folder("prof_out")     # checked, not created
    status = run_program(program, region)   # any context manager: auto mode's, or a test's fake
    write_outputs(prof, out_dir, width)     # the report, auto.npz, auto.perfetto-trace, ...
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import runpy
import shlex
import sys
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass

from ..errors import CaptureError, ConfigError, SmProfilerError
from ..paths import atomic_output, check_writable
from ..progress import stage_for
from .stop_signals import Stopped, StopSignals

# auto.npz.summary.json: its summary, what `stats DIR` and `advise DIR` read (issue 57).
OUTPUTS = ("auto.npz", "auto.npz.summary.json", "auto.perfetto-trace", "auto_stats.txt")


@dataclass(frozen=True)
class Program:
    """What `sm-profiler run` runs: a script's absolute path or a module's name, and its
    arguments."""

    args: tuple[str, ...] = ()
    script: str | None = None
    module: str | None = None


def find_program(command: Sequence[str]) -> Program:
    """The program of `sm-profiler run -- SCRIPT [ARGS]` (or `-- -m MODULE [ARGS]`)."""
    argv = list(command)
    if argv and argv[0] == "--":
        argv = argv[1:]
    if not argv or (argv[0] == "-m" and len(argv) < 2):
        raise ConfigError(
            "sm-profiler run needs a script: sm-profiler run [options] -- "
            "train.py [args] (or -m package.module [args])"
        )
    if argv[0] == "-m":
        _check_module(argv[1])
        return Program(module=argv[1], args=tuple(argv[2:]))
    if not os.path.isfile(argv[0]):
        raise ConfigError(f"no script {argv[0]!r}: give the path of a Python file")
    return Program(script=os.path.abspath(argv[0]), args=tuple(argv[1:]))


def _check_module(name: str) -> None:
    """Refuse a module that `python -m name` could not run, as Python looks it up: the current
    folder first on sys.path. Runs no code of the module or of its packages."""
    if not name or any(not part for part in name.split(".")):
        raise ConfigError(f"-m {name!r} is not a module name: give one like package.module")
    saved_path = list(sys.path)
    sys.path.insert(0, os.getcwd())
    try:
        spec = _find_spec(name)
        if spec is not None and spec.submodule_search_locations is not None:
            if _find_spec(name + ".__main__") is None:
                raise ConfigError(
                    f"-m {name!r} is a package without a __main__ module: run one of its "
                    f"modules (-m {name}.MODULE) or add {name.replace('.', '/')}/__main__.py"
                )
    finally:
        sys.path[:] = saved_path
    if spec is None:
        raise ConfigError(
            f"no module {name!r} in the current folder or on sys.path: check its spelling, "
            "or give a script's path (sm-profiler run -- path/to/train.py)"
        )


def _find_spec(name: str):
    """The module spec of `name` or None, found as `import` would but without importing its
    packages: importlib.util.find_spec("a.b") would run a/__init__.py, before the region."""
    parts = name.split(".")
    spec = None
    for i in range(1, len(parts) + 1):
        full, parent = ".".join(parts[:i]), ".".join(parts[: i - 1])
        try:
            if not parent or parent in sys.modules:  # nothing left to import
                spec = importlib.util.find_spec(full)
            else:  # what importlib asks, given the parent's spec instead of the parent
                spec = _meta_path_spec(full, spec.submodule_search_locations)
        except (ImportError, ValueError):
            return None
        if spec is None or (i < len(parts) and spec.submodule_search_locations is None):
            return None  # not found, or a parent that is not a package
    return spec


def _meta_path_spec(name: str, path):
    for finder in sys.meta_path:
        find = getattr(finder, "find_spec", None)
        spec = find(name, path, None) if find is not None else None
        if spec is not None:
            return spec
    return None


def output_folder(out: str) -> str:
    """The absolute path of the `--out` folder, checked before anything runs: an existing
    folder whose OUTPUTS can be written, or one that can be created. Creates nothing."""
    if not out:
        raise ConfigError("--out is empty: name a folder for the outputs, e.g. --out prof_out")
    if "\0" in out:
        raise ConfigError(f"--out {out!r} holds a NUL character: name a folder without one")
    folder = os.path.abspath(out)
    if os.path.isdir(folder):
        for name in OUTPUTS:
            try:
                check_writable(os.path.join(folder, name))
            except CaptureError as e:
                raise ConfigError(f"{e}; name another folder with --out") from None
        return folder
    if os.path.lexists(folder):
        raise ConfigError(
            f"--out {out!r} is a file, not a folder: name a folder (new or existing) for "
            + ", ".join(OUTPUTS)
        )
    parent = os.path.dirname(folder)
    while not os.path.isdir(parent):  # the root is a folder: this ends
        if os.path.lexists(parent):
            raise ConfigError(
                f"cannot create --out {out!r}: {parent!r} is not a folder; "
                "name a folder under an existing folder"
            )
        parent = os.path.dirname(parent)
    if not os.access(parent, os.W_OK | os.X_OK):
        raise ConfigError(
            f"cannot create --out {out!r}: no permission to write in {parent!r}; "
            "name a folder you can write to"
        )
    return folder


def run_program(program: Program, region: AbstractContextManager, stops=None) -> int:
    """Run `program` inside `with region:` as `python script.py ARGS` (or `python -m module
    ARGS`) runs it, and return its exit status: 0, its `sys.exit` status (a message printed to
    stderr, status 1), 1 if it raised, 130 on Ctrl-C, 128 + the signal's number on a stop signal
    (`stops`: stop_signals.StopSignals). The region ends normally in every case, so what it
    recorded can still be written. sys.argv, sys.path and the working folder are the caller's
    again afterwards."""
    argv, path, saved_path, cwd = sys.argv, sys.path, list(sys.path), os.getcwd()
    if program.module:
        sys.argv = [program.module, *program.args]  # runpy makes argv[0] the module's file
        sys.path.insert(0, cwd)
    else:
        sys.argv = [program.script, *program.args]
        sys.path.insert(0, os.path.dirname(os.path.realpath(program.script)))
    try:
        with region:
            return _run(program, stops)
    finally:
        sys.argv, sys.path = argv, path
        path[:] = saved_path
        with contextlib.suppress(OSError):
            os.chdir(cwd)


def _run(program: Program, stops=None) -> int:
    """The program's exit status, reported as Python reports it. Signals act on the program
    only while it runs (StopSignals.program): one that comes while its exit is reported here is
    noted, and what it recorded is still written."""
    try:
        if stops is None:
            _execute(program)
        else:
            stops.program(lambda: _execute(program))
    except Stopped as e:  # torchrun stopping this rank, a batch system, a closed terminal
        print(f"sm-profiler run: {e.name}; writing what it recorded", file=sys.stderr)
        return 128 + e.signum
    except SystemExit as e:
        if e.code is None or isinstance(e.code, int):
            return e.code or 0
        print(e.code, file=sys.stderr)  # what Python does with sys.exit("message")
        return 1
    except KeyboardInterrupt as e:
        _print_exception(e)
        print("sm-profiler run: interrupted; writing what it recorded", file=sys.stderr)
        return 130
    except Exception as e:  # the script failed: say so, keep what it recorded until then
        _print_exception(e)
        print("sm-profiler run: the script raised; writing what it recorded", file=sys.stderr)
        return 1
    return 0


def _execute(program: Program) -> None:
    if program.module:
        runpy.run_module(program.module, run_name="__main__", alter_sys=True)
    else:  # __file__ and sys.argv[0]: the script's absolute path
        runpy.run_path(program.script, run_name="__main__")


def _print_exception(e: BaseException) -> None:
    """The traceback Python prints, from the program's first frame (not runpy's or ours)."""
    import traceback

    tb = e.__traceback__
    ours = ("runpy", __name__, Stopped.__module__)
    while tb is not None and tb.tb_frame.f_globals.get("__name__") in ours:
        tb = tb.tb_next
    traceback.print_exception(type(e), e, tb)


def profile(
    program: Program,
    prof,
    out_dir: str,
    width: int | None = None,
    job=None,
    ranks=None,
    torch_json: bool = False,
) -> int:
    """Run `program` in the auto region `prof`, then write what it recorded into `out_dir`;
    return the program's exit status (1 if it succeeded but nothing was recorded). Under
    torchrun (`job` of several ranks) each rank writes its own files and the first of `ranks`
    merges them (export/auto_job.py). torch_json: the traces merged with torch's as Chrome JSON."""
    several = job is not None and job.several

    def write(stopped: bool) -> None:
        if not several:
            write_outputs(prof, out_dir, width, torch_json)
            return
        # A stopped rank writes its own files only: the others are being stopped too.
        ranks_ = ranks or [job.rank]
        write_rank_outputs(prof, out_dir, width, job, ranks_, not stopped, torch_json)
        if stopped and (ranks or [job.rank])[0] == job.rank:
            print(
                "sm-profiler run: stopped before the other ranks' files could be merged: run "
                f"sm-profiler merge {out_dir} once they are there",
                file=sys.stderr,
            )

    def rescue(signum: int) -> None:  # the watcher's thread: the main one is blocked
        prof.rescue()
        for note in prof.notes:
            print(f"sm-profiler run: {note}", file=sys.stderr)
        if prof.captures():
            write(stopped=True)
        else:
            write_known(prof, out_dir, job if several else None)

    with StopSignals(rescue, reading=prof.reading) as stops:
        status = run_program(program, prof, stops)
        stops.region_ended()  # waits for the process to end while the watcher writes
        if not prof.captures():
            print(
                "sm-profiler run: no instrumented kernel ran; " + " ".join(prof.notes),
                file=sys.stderr,
            )
            return status or 1
        write(stopped=stops.signum is not None)
    return status


def write_known(prof, out_dir: str, job=None) -> None:
    """A rescue that read no record: the table of what the host knows (its sessions' counts,
    kernels, steps and notes) and the notes as the report, under the run's or the rank's names."""
    _make_folder(out_dir)
    stem = os.path.join(out_dir, job.stem() if job is not None else "auto")
    prof.save(f"{stem}.npz")
    notes = prof.notes or ["no instrumented kernel ran before the signal"]
    _write_text(f"{stem}_stats.txt", "".join(f"sm_profiler auto: {n}\n" for n in notes))
    print(f"sm-profiler run: wrote {stem}.npz (no record read: what the host knows)")


def _write_summary(prof, path: str, doc) -> None:
    """The summary of the records just written to `path`, beside it (path.summary.json): what
    `stats DIR` and `advise DIR` read of this rank (issue 57)."""
    from ..report.rank_summary import summarize
    from ..wire.summary_file import write_summary

    with stage_for("writing its summary", prof.captures().num_rows):
        write_summary(path, summarize(prof.captures(), doc))


def _make_folder(out_dir: str) -> None:
    try:
        os.makedirs(out_dir, exist_ok=True)
    except OSError as e:
        raise CaptureError(f"cannot create {out_dir!r}: {e.strerror or e}") from e


def _write_text(path: str, text: str) -> None:
    with atomic_output(path) as tmp, open(tmp, "w", encoding="utf-8") as f:
        f.write(text)


def _report(
    trace, out_dir: str, width: int | None, cupti: dict | None = None, docs=None, job=None
) -> None:
    """Print the report of `trace` at `width` and write it at 100 columns to auto_stats.txt
    (`cupti`: the share seen from torch.profiler's CUPTI rows, coverage.report_share; `docs`:
    the torch trace, or {rank: trace}, whose kernel rows its host gaps take; `job`: the
    JobLaunches `trace` is of, from the ranks' summaries)."""
    from ..report.auto_report import report_parts, run_report

    # One report, each section computed once, drawn at the terminal's width and at the file's.
    with stage_for(f"reporting {len(trace):,} programs", len(trace)):
        parts = report_parts(trace, chunks=[job.report]) if job is not None else None
        measures = job.measures if job is not None else None
        report = run_report(trace, parts=parts, cupti=cupti, torch_trace=docs, measures=measures)
    print(report.text(width), end="")
    _write_text(os.path.join(out_dir, "auto_stats.txt"), report.text(100))


def _merge_torch(prof, stem: str, torch_json: bool = False) -> dict | None:
    """With a torch trace: one trace of its rows and our programs, `stem`.torch.perfetto-trace
    (`stem`.torch.json.gz with torch_json; torch_parts.merge_rank); returns its info, or None
    without a torch trace or when the merge failed (said on stderr: the rank's own files are
    written already)."""
    from ..export import auto_torch_parts as torch_parts

    doc = torch_parts.of(prof)
    if doc is None:
        _torch_notes(prof)
        return None
    path = stem + _torch_suffix(torch_json)
    try:
        with stage_for(f"writing {os.path.basename(path)}", 1):
            info = torch_parts.merge_rank(doc, prof.captures(), path)
    except SmProfilerError as e:
        print(f"sm-profiler run: torch trace not merged: {e}", file=sys.stderr)
        return None
    for note in info.get("notes", []):
        print(f"sm-profiler run: note: {note}", file=sys.stderr)
    return info


def _torch_notes(prof) -> None:
    """Why a region started with torch.profiler has no torch trace (its notes), on stderr."""
    from ..trace.auto_table import AutoTable

    caps = prof.captures()  # a region that recorded nothing may give no table
    about = (caps.metadata or {}).get("torch_profiler") if isinstance(caps, AutoTable) else None
    if isinstance(about, dict):
        for note in about.get("notes") or []:
            print(f"sm-profiler run: torch.profiler: {note}", file=sys.stderr)


def _cupti(info: dict | None) -> dict | None:
    if not info or not info.get("coverage"):
        return None
    from ..report.coverage import report_share

    return report_share([info["coverage"]])


def _torch_written(info: dict | None, path: str) -> str:
    return f", {os.path.basename(path)}" if info else ""


def _torch_suffix(torch_json: bool) -> str:
    """The suffix of a trace merged with torch's: Perfetto, or Chrome JSON with torch_json."""
    from ..export.auto_torch_parts import TORCH_PERFETTO_SUFFIX, TORCH_SUFFIX

    return TORCH_SUFFIX if torch_json else TORCH_PERFETTO_SUFFIX


def write_outputs(prof, out_dir: str, width: int | None, torch_json: bool = False) -> None:
    """Print the kernel report of `prof` and write OUTPUTS into the folder `out_dir`, created
    here: only when there is something to write (with a torch trace, the trace merged with it:
    Perfetto, or Chrome JSON with torch_json)."""

    from ..export import auto_torch_parts as torch_parts

    trace = prof.decode()
    _make_folder(out_dir)
    with stage_for("writing auto.npz", len(trace)):  # first: a stopped run's time is short
        prof.save(os.path.join(out_dir, "auto.npz"))
    _write_summary(prof, os.path.join(out_dir, "auto.npz"), torch_parts.of(prof))
    merged = _merge_torch(prof, os.path.join(out_dir, "auto"), torch_json)
    _report(trace, out_dir, width, _cupti(merged), torch_parts.of(prof))
    with stage_for("writing auto.perfetto-trace", len(trace)):
        prof.export(os.path.join(out_dir, "auto.perfetto-trace"))
    torch_file = "auto" + _torch_suffix(torch_json)
    print(
        f"sm-profiler run: wrote {out_dir}/auto.npz, auto.perfetto-trace, auto_stats.txt"
        f"{_torch_written(merged, torch_file)} "
        f"(open with: sm-profiler open {out_dir}/auto.perfetto-trace)"
    )
    if merged:
        print(
            f"sm-profiler run: {torch_file}: torch.profiler's CPU ops and CUDA kernels with our "
            f"programs on the SM tracks (open with: sm-profiler open {out_dir}/{torch_file})"
        )


def merge_torch_job(
    paths: list[str], tables: list, out_dir: str, got: dict | None = None, torch_json=False
):
    """Where rank files carry torch traces: the job's trace of them and our programs,
    DIR/auto.ranks.torch.perfetto-trace (.json.gz with torch_json; torch_parts.merge_job), its
    notes on stderr; returns the report's CUPTI figures over the ranks (coverage.report_share),
    or None without any torch trace or when the merge failed (said: the rank files are whole).
    got: filled with {rank: trace} of the ranks whose file carries one, for the report's host
    gaps."""
    from ..export import auto_torch_parts as torch_parts
    from ..export.auto_job import MERGED_TRACE
    from ..report.coverage import report_share

    notes: list[str] = []
    try:
        docs = [torch_parts.read(p, notes) for p in paths]
        for note in notes:
            print(f"sm-profiler run: note: {note}", file=sys.stderr)
        if not any(d is not None for d in docs):
            return None
        if got is not None:
            for t, d in zip(tables, docs, strict=True):
                if d is not None and len(t.sessions):
                    got[int(t.ranks()[0])] = d
        name = "auto.ranks" + _torch_suffix(torch_json)
        with stage_for(f"writing {name}", 1):
            info = torch_parts.merge_job(tables, docs, os.path.join(out_dir, name))
    except SmProfilerError as e:
        print(f"sm-profiler run: torch traces not merged: {e}", file=sys.stderr)
        return None
    for note in info["notes"]:
        print(f"sm-profiler run: note: {note}", file=sys.stderr)
    print(
        f"sm-profiler run: {name}: every rank's torch.profiler rows with its programs; "
        f"{MERGED_TRACE} holds our programs only"
    )
    return report_share(list(info["coverage"].values()))


def _job_report(found: dict[int, str], out_dir: str, width, torch_json: bool) -> dict | None:
    """The job's report (auto_stats.txt) of the rank files `found`: from the summaries each rank
    wrote beside its file (issue 57: never every rank's records at once); with torch traces
    (`run --torch`), from every rank's table, which the job's torch trace joins too. Returns
    the report's CUPTI figures over the ranks, or None."""
    from ..export import auto_job as jobs
    from ..export.job_summaries import carry_torch_traces, load_ranks_of

    paths = [found[r] for r in sorted(found)]
    too_big = None
    torch_traces = carry_torch_traces(paths)  # each rank file's zip directory, read once
    if torch_traces:
        name = os.path.join(out_dir, "auto.ranks" + _torch_suffix(torch_json))
        too_big = jobs.whole_merge_refusal(paths, name)
        if too_big is not None:  # the job's report from the summaries; no job torch trace
            print(
                f"sm-profiler run: note: the ranks' torch traces are not merged: {too_big}; "
                "each rank's file keeps its own (`sm-profiler merge` of a few ranks' files "
                "joins theirs), and the job's report is made from the ranks' summaries",
                file=sys.stderr,
            )
    if too_big is not None or not torch_traces:
        # Read here, not by forked workers: this process ran the job (CUDA, its threads).
        job = load_ranks_of(dict(sorted(found.items())), out_dir, workers=1).launches
        _report(job.job_table.decode(), out_dir, width, job=job)
        return None
    tables = jobs.load_ranks(paths)
    trace = jobs.merged_table(tables).decode()
    docs: dict = {}
    job_torch = merge_torch_job(paths, tables, out_dir, docs, torch_json)
    _report(trace, out_dir, width, job_torch, docs or None)
    return job_torch


def _job_trace(found: dict[int, str], out_dir: str) -> None:
    """The job's trace of the rank files `found` (export/job_trace.py: the ranks that matter in
    full, the others as counters, within the default budget); where they do not fit, said on
    stderr, the rank files whole (`sm-profiler merge DIR --max-mb` draws them)."""
    from ..errors import ConfigError
    from ..export import auto_job as jobs
    from ..export.job_trace import write_job_trace

    try:
        write_job_trace(
            found,
            os.path.join(out_dir, jobs.MERGED_TRACE),
            folder=out_dir,
            command=f"sm-profiler merge {shlex.quote(out_dir)}",
        )
    except ConfigError as e:
        print(f"sm-profiler run: the job's trace was not written: {e}", file=sys.stderr)


def write_rank_outputs(
    prof, out_dir: str, width, job, ranks: list[int], merge: bool = True, torch_json=False
) -> None:
    """One rank of a job: its table, then its report, under its own names; the first profiled
    rank then waits (bounded) for the others' tables of this run and writes the job's report and
    trace (not with merge=False: a rank being stopped writes its own files alone). torch_json:
    the traces merged with torch's as Chrome JSON."""
    from ..export import auto_job as jobs
    from ..export import auto_torch_parts as torch_parts
    from ..report.auto_report import format_report

    _make_folder(out_dir)
    stem = os.path.join(out_dir, job.stem())
    mine = jobs.job_identity()
    prof.captures().metadata["job"] = mine  # which run the file is of (export/auto_job.py)
    prof.captures().metadata[jobs.PROFILED_RANKS] = list(ranks)
    prof.save(f"{stem}.npz")  # first (a killed rank's time is short); whole, then renamed
    doc = torch_parts.of(prof)
    _write_summary(prof, f"{stem}.npz", doc)
    merged = _merge_torch(prof, stem, torch_json) if merge else None
    text = format_report(prof.decode(), width=100, cupti=_cupti(merged), torch_trace=doc)
    _write_text(f"{stem}_stats.txt", text)
    torch_file = os.path.basename(stem) + _torch_suffix(torch_json)
    print(
        f"sm-profiler run: rank {job.rank} wrote {stem}.npz, {os.path.basename(stem)}_stats.txt"
        + _torch_written(merged, torch_file)
    )
    if job.rank != ranks[0] or not merge:
        return
    # Files of another run (an earlier one's, however recent) are never merged: a file is this
    # run's when it carries this run's identity.
    local = [r for r in ranks if r in job.node_ranks()]
    wait_s = float(os.environ.get("SM_PROFILER_MERGE_TIMEOUT_S", jobs.DEFAULT_WAIT_S))

    def ours(path: str) -> bool:
        return jobs.same_run(mine, jobs.file_identity(path))

    found = jobs.wait_for(out_dir, local, ours, wait_s)
    found.update(jobs.wait_for(out_dir, ranks, ours, 0.0))
    missing = [r for r in ranks if r not in found]
    others = [r for r, p in jobs.rank_files(out_dir).items() if r in missing]
    if others:
        print(
            f"sm-profiler run: not merged: the file of rank{'s' if len(others) > 1 else ''} "
            f"{', '.join(map(str, others))} is of another run (or this run's on another node "
            "without a torchrun run id)",
            file=sys.stderr,
        )
    job_torch = _job_report(found, out_dir, width, torch_json)
    _job_trace(found, out_dir)
    print(
        f"sm-profiler run: merged {len(found)} of {len(ranks)} ranks into "
        f"{out_dir}/{jobs.MERGED_TRACE}"
        + (f", auto.ranks{_torch_suffix(torch_json)}" if job_torch else "")
        + " and auto_stats.txt"
    )
    if missing:
        print(
            f"sm-profiler run: no file from rank{'s' if len(missing) > 1 else ''} "
            f"{', '.join(map(str, missing))} (failed, killed, or on another node): copy their "
            f"auto.rank*.npz here and run: sm-profiler merge {out_dir}",
            file=sys.stderr,
        )
