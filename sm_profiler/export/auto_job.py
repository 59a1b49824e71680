"""Auto mode under torchrun: each rank writes its own files, rank 0 merges them (docs/auto.md,
"Several GPUs and ranks").

    auto.rank3.npz         rank 3's table (every GPU it used; its rank, host and clock inside)
    auto.rank3_stats.txt   rank 3's report
    auto_stats.txt         rank 0, after the others saved: the report of every rank, per rank
    auto.ranks.perfetto-trace   rank 0: one trace of every rank on one time axis, GPU by GPU
                                and SM by SM (`GPU r · SM s`) in the Perfetto UI

Nothing here talks to the other ranks: a rank's files are whole once they exist (written under a
temporary name and renamed), and rank 0 waits for them a bounded time, so a rank that failed or
was killed leaves its own files (or none) and never hangs another. Ranks on other nodes, whose
files rank 0 cannot see, are merged afterwards by `sm-profiler merge DIR` once the files are
copied together.
"""

from __future__ import annotations

import glob
import os
import re
import time
from dataclasses import dataclass

from ..errors import CaptureError, ConfigError
from ..wire.auto_schedule import whole_number

# The names rank files have: auto.rank0.npz, auto.rank12.npz (ASCII digits, no leading zero).
RANK_FILE = re.compile(r"^auto\.rank(0|[1-9][0-9]*)\.npz$", re.ASCII)
MERGED_TRACE = "auto.ranks.perfetto-trace"
# A merge of whole recordings holds about this many bytes at its peak per byte of their files
# (2 CPU cores, 2026-11-29: 4 and 16 rank files of 7.5 MB, `merge FILES -o X`: Perfetto 5.6x;
# Chrome JSON 35-37x, 4.0 GB for 16 ranks, a 571 MB file).
WHOLE_MERGE_PEAK = {"perfetto": 6, "json": 37}
MERGE_ANY_SIZE_ENV = "SM_PROFILER_MERGE_ANY_SIZE"  # =1: merge whole whatever the estimate
# A rank file's metadata key: the ranks `run --ranks` profiled (every rank by default), so that
# a job's answer names those of them without a file, not the ranks left out on purpose.
PROFILED_RANKS = "profiled_ranks"
# How long rank 0 waits for the other ranks' files after its own (SM_PROFILER_MERGE_TIMEOUT_S).
DEFAULT_WAIT_S = 120.0


@dataclass(frozen=True)
class Job:
    """This process's place in a torchrun job, from torchrun's environment."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    local_world_size: int = 1

    @classmethod
    def from_env(cls, env=None) -> Job:
        env = os.environ if env is None else env

        def num(key: str, default: int) -> int:
            v = env.get(key, "")
            if v == "":
                return default
            n = whole_number(v)
            if n is None:
                raise ConfigError(
                    f"{key}={v!r} is not a number: torchrun sets it; unset it to run alone"
                )
            return n

        world = num("WORLD_SIZE", 1)
        job = cls(num("RANK", 0), world, num("LOCAL_RANK", 0), num("LOCAL_WORLD_SIZE", world))
        if not 0 <= job.rank < max(job.world_size, 1):
            raise ConfigError(f"RANK={job.rank} is outside WORLD_SIZE={job.world_size}")
        return job

    @property
    def several(self) -> bool:
        return self.world_size > 1

    def stem(self) -> str:
        """'auto' alone, 'auto.rank3' in a job of several ranks."""
        return f"auto.rank{self.rank}" if self.several else "auto"

    def node_ranks(self) -> list[int]:
        """The ranks torchrun starts on this node (it numbers them in blocks per node)."""
        first = self.rank - self.local_rank
        return list(range(first, min(first + self.local_world_size, self.world_size)))


def parse_ranks(text: str | None, job: Job) -> list[int]:
    """`--ranks 0,3` -> [0, 3], checked against the job; None -> every rank."""
    if text is None:
        return list(range(job.world_size))
    ranks = rank_numbers(text)
    bad = [r for r in ranks if not 0 <= r < job.world_size]
    if bad:
        raise ConfigError(
            f"--ranks {text!r}: rank {bad[0]} is not in this job of {job.world_size} rank"
            f"{'s' if job.world_size != 1 else ''} (0..{job.world_size - 1})"
        )
    return ranks


def rank_numbers(text: str) -> list[int]:
    """`--ranks 0,3` -> [0, 3] (sorted, each once): a ConfigError for anything but rank numbers
    separated by commas."""
    try:
        ranks = sorted({int(x) for x in text.split(",") if x.strip()})
    except ValueError as e:
        raise ConfigError(
            f"--ranks {text!r}: give rank numbers separated by commas, e.g. 0,3"
        ) from e
    if not ranks:
        raise ConfigError(f"--ranks {text!r}: name at least one rank, e.g. --ranks 0")
    return ranks


def rank_files(folder: str, strict: bool = False) -> dict[int, str]:
    """{rank: path} of the rank files in `folder`, named as `sm-profiler run` names them.
    strict: a name that only looks like one (auto.rank01.npz, a digit outside ASCII) is a
    CaptureError naming it, not a file silently left out or taken for another rank's."""
    out, odd = {}, []
    for path in glob.glob(os.path.join(glob.escape(folder), "auto.rank*.npz")):
        m = RANK_FILE.match(os.path.basename(path))
        if m:
            out[int(m.group(1))] = path
        else:
            odd.append(os.path.basename(path))
    if strict and odd:
        names = ", ".join(sorted(odd)[:5]) + (" ..." if len(odd) > 5 else "")
        raise CaptureError(
            f"{folder!r} holds files named like rank files that `sm-profiler run` does not "
            f"write ({names}): rename each to auto.rankN.npz (N its rank, ASCII digits, no "
            "leading zero) or move it out of the folder"
        )
    return dict(sorted(out.items()))


# -- which run a rank file belongs to -----------------------------------------------------------
# torchrun gives every worker of one run its run id (--rdzv-id; a fresh uuid with --standalone
# or on one node), its restart count and its rendezvous' master; a worker's parent is the node's
# agent. A rank file carries these (its table's metadata "job"), so that the first rank merges
# the files of its own run and never an earlier run's, however recent, and `merge DIR` can say
# when files of several runs are mixed.
_NO_RUN_ID = ("", "none")


def job_identity(env=None) -> dict:
    """This process's run: torchrun's run id, restart count and master, and its agent (host,
    parent pid and the parent's start time)."""
    env = os.environ if env is None else env
    ident = {
        "run_id": env.get("TORCHELASTIC_RUN_ID", ""),
        "restart": env.get("TORCHELASTIC_RESTART_COUNT", ""),
        "master": f"{env.get('MASTER_ADDR', '')}:{env.get('MASTER_PORT', '')}",
    }
    ident["agent"] = _agent()
    return ident


def _agent() -> str:
    """host:pid:start of this process's parent (torchrun's agent on this node): the start time
    tells a parent apart from a later process given the same pid."""
    import socket

    ppid = os.getppid()
    start = ""
    try:
        with open(f"/proc/{ppid}/stat", "rb") as f:
            start = f.read().rsplit(b")", 1)[1].split()[19].decode()
    except (OSError, IndexError):
        pass
    return f"{socket.gethostname()}:{ppid}:{start}"


def run_key(ident) -> str | None:
    """The run an identity names, as text (None: the file names none)."""
    if not isinstance(ident, dict):
        return None
    return "/".join(str(ident.get(k, "")) for k in ("run_id", "restart", "master"))


def same_run(mine: dict, theirs) -> bool:
    """Whether a rank file of identity `theirs` is of the run `mine`: the same run id, restart
    and master, and where torchrun gave no run id of its own (a static rendezvous), the same
    agent too (so only this node's files are taken; merge the others with `sm-profiler merge`)."""
    if not isinstance(theirs, dict) or run_key(mine) != run_key(theirs):
        return False
    if str(mine.get("run_id", "")) not in _NO_RUN_ID:
        return True
    return bool(mine.get("agent")) and mine.get("agent") == theirs.get("agent")


def file_identity(path: str):
    """The job identity written in a rank file (its metadata "job"), or None."""
    import zipfile

    from ..wire.capture import read_meta

    try:
        with zipfile.ZipFile(path) as z:
            meta = read_meta(z, path)
    except Exception:  # noqa: BLE001 - a file being replaced, or not ours: not this run's
        return None
    md = meta.get("metadata") if isinstance(meta, dict) else None
    return md.get("job") if isinstance(md, dict) else None


def wait_for(folder: str, ranks: list[int], accept, timeout_s: float) -> dict[int, str]:
    """The rank files of `ranks` that `accept(path)` takes (of this run), waiting up to
    `timeout_s` for the missing ones; what is there when time is up."""
    deadline = time.monotonic() + timeout_s
    seen: dict[tuple, bool] = {}  # (path, mtime) -> accepted: each version read once
    while True:
        found = {}
        for r, p in rank_files(folder).items():
            if r not in ranks:
                continue
            key = (p, _mtime(p))
            if key not in seen:
                seen[key] = bool(accept(p))
            if seen[key]:
                found[r] = p
        if len(found) == len(ranks) or time.monotonic() >= deadline:
            return found
        time.sleep(0.2)


def _mtime(path: str) -> int:
    """The file's modification time in ns (0 where it is gone): a new version of it is read."""
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return 0


def load_ranks(paths) -> list:
    """The AutoTables of rank files (or folders of them), by rank: what `advise DIR`, `stats
    DIR` and `merge DIR` read (the torch traces inside: torch_parts, from the same files).
    Files of several runs, or two files of one rank, are a CaptureError saying which."""
    from ..trace.auto_table import AutoTable
    from ..wire.capture import load

    files = rank_paths(paths)
    tables = []
    for f in files:
        t = load(f)
        if not isinstance(t, AutoTable):
            raise CaptureError(f"{f!r} is not an auto-mode file (sm-profiler run / prof.save)")
        tables.append(t)
    _check_one_run(files, tables)
    check_a_rank_each(files, tables)
    return tables


def rank_paths(paths) -> list[str]:
    """The files load_ranks reads, in its order: each folder's rank files (or its auto.npz),
    each file as given."""
    files: list[str] = []
    for p in paths:
        p = os.fspath(p)
        files += list(folder_files(p).values()) if os.path.isdir(p) else [p]
    return files


def folder_files(folder: str) -> dict[int, str]:
    """{rank: path} of a run folder's rank files (rank_files, strict), else its one auto.npz as
    rank 0, else each rank's newest flight-recorder dump; a CaptureError saying what the folder
    holds where it has none of them."""
    found = rank_files(folder, strict=True)
    single = os.path.join(folder, "auto.npz")
    if not found and os.path.isfile(single):
        found = {0: single}
    if not found:  # a folder of flight-recorder dumps: each rank's newest
        from ..report.dump import newest_dumps

        found = newest_dumps(folder)
    if not found:
        raise CaptureError(_no_rank_files(folder))
    return found


def _no_rank_files(folder: str) -> str:
    """Why `folder` is not a run's folder, naming the capture files it holds (a demo's or an
    example's folder), which the commands take one by one."""
    from ..wire.capture import is_capture_file

    why = f"{folder!r} holds no auto.rank*.npz (or auto.npz) files"
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        names = []
    caps = [n for n in names if os.path.isfile(os.path.join(folder, n))]
    caps = [n for n in caps if is_capture_file(os.path.join(folder, n))]
    if not caps:
        return (
            f"{why}: give the --out folder of `sm-profiler run`, with every rank's files "
            "copied into it, or a capture file"
        )
    shown = ", ".join(caps[:5]) + (f" and {len(caps) - 5} more" if len(caps) > 5 else "")
    return (
        f"{why}, the files of `sm-profiler run`; it holds capture file"
        f"{'s' if len(caps) > 1 else ''} {shown}: give one as the file, e.g. "
        f"{os.path.join(folder, caps[0])}"
    )


def _check_one_run(files: list[str], tables: list) -> None:
    check_one_run(files, [t.metadata.get("job") for t in tables])


def check_one_run(files: list[str], identities: list) -> None:
    """A CaptureError where the files' job identities (file_identity) name several runs (files
    without a run, written before runs were named, are taken as they are)."""
    runs: dict[str, tuple[dict, list[str]]] = {}  # run key -> (its identity, its files)
    for f, ident in zip(files, identities, strict=True):
        key = run_key(ident)
        if key is not None:
            runs.setdefault(key, (ident, []))[1].append(os.path.basename(f))
    if len(runs) > 1:
        listed = "; ".join(
            f"run {ident.get('run_id') or '?'} (restart {ident.get('restart') or '?'}): "
            + ", ".join(names[:4])
            for ident, names in runs.values()
        )
        raise CaptureError(
            f"these files are of {len(runs)} runs, not one: {listed}. Merge one run's files at a "
            "time: move the others to a folder of their own"
        )


def check_a_rank_each(files: list[str], tables: list) -> None:
    """A CaptureError where two files hold the recording of one rank: a job's ranks each write
    their own, so these are of two runs (every process `sm-profiler run` profiles alone is rank
    0), which read as one would fuse two recordings into one GPU. Sessions that name no rank
    are not compared."""
    owner: dict[int, str] = {}
    for f, t in zip(files, tables, strict=True):
        ranks = {s["rank"] for s in t.sessions if type(s.get("rank")) is int}
        for r in sorted(ranks):
            if r in owner:
                a, b = os.path.basename(owner[r]), os.path.basename(f)
                raise CaptureError(
                    f"{a} and {b} both hold rank {r}'s recording: a job's ranks each write their "
                    "own file, so these are of two runs (a process that `sm-profiler run` "
                    "profiles alone is rank 0). Read each file alone (sm-profiler advise FILE, "
                    "stats FILE), or move each run's files to a folder of their own"
                )
            owner[r] = f


def merged_table(tables):
    """One AutoTable of several ranks' tables, each moved onto the host clock where its
    sessions carry clock samples (sm_profiler.record.clock), so that ranks of several nodes line up."""
    from ..trace.auto_table import AutoTable

    return AutoTable.concat([t.on_host_clock() for t in tables])


def whole_merge_refusal(paths, out: str) -> str | None:
    """Why merging the recordings `paths` whole into `out` would not fit in this machine's
    memory: its estimate (WHOLE_MERGE_PEAK of their files' bytes, by `out`'s format) over half
    of what this process may use (its cgroup's limit, else the machine's); None where it fits,
    where the memory cannot be read, or where MERGE_ANY_SIZE_ENV is 1."""
    if os.environ.get(MERGE_ANY_SIZE_ENV, "").strip() == "1":
        return None
    files = sum(os.path.getsize(p) for p in paths if os.path.isfile(p))
    kind = "json" if str(out).endswith((".json", ".json.gz")) else "perfetto"
    need, have = files * WHOLE_MERGE_PEAK[kind], memory_bytes()
    if not have or need <= have // 2:
        return None
    fmt = "Chrome JSON" if kind == "json" else "a Perfetto trace"
    return (
        f"merged whole into {out}, {len(paths):,} recordings ({files / 1e6:,.0f} MB of files) "
        f"would take about {need / 1e9:,.1f} GB of memory ({fmt}: about "
        f"{WHOLE_MERGE_PEAK[kind]}x the files), more than half of the {have / 1e9:,.1f} GB this "
        f"process may use"
    )


def memory_bytes() -> int:
    """The memory this process may use: its cgroup's limit (v2 memory.max, v1
    limit_in_bytes) where lower than the machine's, else the machine's; 0 where unknown."""
    try:
        total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        total = 0
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            with open(path) as f:
                text = f.read().strip()
        except OSError:
            continue
        if text.isdigit() and 0 < int(text) < (total or 2**62):
            return int(text)
    return total
