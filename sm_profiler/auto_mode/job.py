"""Auto mode under torchrun: each rank writes its own files, rank 0 merges them (docs/auto.md,
"Several GPUs and ranks").

    auto.rank3.npz         rank 3's table (every GPU it used; its rank, host and clock inside)
    auto.rank3_stats.txt   rank 3's report
    auto_stats.txt         rank 0, after the others saved: the report of every rank, per rank
    auto.ranks.json.gz     rank 0: one trace of every rank, `GPU r · SM s`, on one time axis

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
from .schedule import whole_number

RANK_FILE = re.compile(r"^auto\.rank(\d+)\.npz$")
MERGED_TRACE = "auto.ranks.json.gz"
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
    try:
        ranks = sorted({int(x) for x in text.split(",") if x.strip()})
    except ValueError as e:
        raise ConfigError(
            f"--ranks {text!r}: give rank numbers separated by commas, e.g. 0,3"
        ) from e
    if not ranks:
        raise ConfigError(f"--ranks {text!r}: name at least one rank, e.g. --ranks 0")
    bad = [r for r in ranks if not 0 <= r < job.world_size]
    if bad:
        raise ConfigError(
            f"--ranks {text!r}: rank {bad[0]} is not in this job of {job.world_size} rank"
            f"{'s' if job.world_size != 1 else ''} (0..{job.world_size - 1})"
        )
    return ranks


def rank_files(folder: str) -> dict[int, str]:
    """{rank: path} of the rank files in `folder`."""
    out = {}
    for path in glob.glob(os.path.join(glob.escape(folder), "auto.rank*.npz")):
        m = RANK_FILE.match(os.path.basename(path))
        if m:
            out[int(m.group(1))] = path
    return dict(sorted(out.items()))


def wait_for(folder: str, ranks: list[int], since: float, timeout_s: float) -> dict[int, str]:
    """The rank files of `ranks` written since `since` (a time.time()), waiting up to
    `timeout_s` for the missing ones; what is there when time is up."""
    deadline = time.monotonic() + timeout_s
    while True:
        found = {r: p for r, p in rank_files(folder).items() if r in ranks and _mtime(p) >= since}
        if len(found) == len(ranks) or time.monotonic() >= deadline:
            return found
        time.sleep(0.2)


def _mtime(path: str) -> float:
    try:
        return os.path.getmtime(path)
    except OSError:
        return 0.0


def load_ranks(paths) -> list:
    """The AutoTables of rank files (or folders of them), by rank."""
    from ..capture import load

    files: list[str] = []
    for p in paths:
        p = os.fspath(p)
        if os.path.isdir(p):
            found = rank_files(p)
            if not found:
                single = os.path.join(p, "auto.npz")
                if os.path.isfile(single):
                    found = {0: single}
            if not found:
                raise CaptureError(
                    f"{p!r} holds no auto.rank*.npz (or auto.npz) files: give the --out folder of "
                    "`sm-profiler run`, with every rank's files copied into it"
                )
            files += list(found.values())
        else:
            files.append(p)
    tables = []
    for f in files:
        t = load(f)
        if not getattr(t, "is_auto_table", False):
            raise CaptureError(f"{f!r} is not an auto-mode file (sm-profiler run / prof.save)")
        tables.append(t)
    return tables


def merged_table(tables):
    """One AutoTable of several ranks' tables, each moved onto the host clock where its
    sessions carry clock samples (sm_profiler.clock), so that ranks of several nodes line up."""
    from .table import AutoTable

    return AutoTable.concat([t.on_host_clock() for t in tables])
