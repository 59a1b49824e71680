"""What a flight-recorder dump says (auto_mode/flight.py writes dumps; docs/auto.md, "Flight
recorder"): why it was written and, for each GPU, what it was doing. This is the opening of the
dump's report, the first section of the run's report of the steps it keeps (report/
auto_report.py: `dump_report`, `sm-profiler stats` of a dump).

    opening = dump_opening(table)             # its numbers, found once (None: not a dump)
    opening_lines(opening, 80)                # drawn at 80 columns
    dump_lines(table, 80)                     # both at once
    gpu_state(table, session)                 # one GPU's last step and kernel, what is queued

Each GPU's buffer (a session of the table) carries what its dump knew (`flight`): the trigger,
the step, the host's step, whether the ring was read while the GPU ran (`live`: a stall, on
demand, a stop signal with the main thread blocked; else the region had ended and the GPU was
done), and the launches the host queued in the kept steps as [grid_id, kernel, step, records,
queued_ns] (queued_ns: the host's clock, time.time_ns). A
launch whose records are all in the table ended; the first queued after the last that ended,
and any with some programs ended, are in flight (the kernel the GPU is in); the rest were not
reached. Launches run in the order queued on one stream; on several, "in flight" may name one
that waits on another stream's.
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass

import numpy as np

from ..text import middle, plural, printable, wrap
from ..units import format_time

GROWN_SHOWN = 3  # kernels that grew most in a slow step
# A dump's name: flight.rankR.<UTC date and time to the ms>Z.<trigger>[.N].npz (flight.py).
DUMP_FILE = re.compile(
    r"^flight\.rank(0|[1-9][0-9]*)\.(\d{8}T\d{6}\.\d{3}Z)\.([A-Za-z0-9_]+)(?:\.(\d+))?\.npz$",
    re.ASCII,
)
QUEUED_SHOWN = 4  # launches named of those not reached


@dataclass(frozen=True)
class Queued:
    """A launch the host queued: its area's number in its buffer (-1: not kept), kernel, step,
    records asked for, when it was queued (host clock, ns) and how many of its records the
    dump holds (programs ended)."""

    grid_id: int
    kernel: str
    step: int
    records: int
    queued_ns: int
    ended: int

    @property
    def done(self) -> bool:
        return self.ended >= self.records


@dataclass(frozen=True)
class GpuState:
    """What one GPU was doing when its dump was written."""

    rank: int
    gpu: int
    host_step: int  # the step the host was in
    last_step_ended: int  # the newest step whose launches had all ended (-1: none)
    last_ended: Queued | None  # the newest launch (in queue order) whose programs all ended
    in_flight: list[Queued]
    not_reached: list[Queued]


def dump_name(rank: int, written_ns: int, trigger: str) -> str:
    """The stem of a dump's files: flight.rankR.<UTC time>.<trigger> (sorted by time)."""
    sec, ns = divmod(int(written_ns), 10**9)
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(sec)) + f".{ns // 10**6:03d}Z"
    return f"flight.rank{rank}.{stamp}.{trigger}"


def newest_dumps(folder: str) -> dict[int, str]:
    """{rank: path} of the newest dump of each rank in `folder` (by the time in its name):
    what `sm-profiler stats DIR` and `merge DIR` read of a folder of dumps."""
    found: dict[int, tuple] = {}
    try:
        names = os.listdir(folder)
    except OSError:
        return {}
    for name in names:
        m = DUMP_FILE.match(name)
        if m:
            key = (m.group(2), int(m.group(4) or 1))
            rank = int(m.group(1))
            if rank not in found or key > found[rank][0]:
                found[rank] = (key, os.path.join(folder, name))
    return {r: found[r][1] for r in sorted(found)}


def flight_sessions(table) -> list[int]:
    """The sessions of `table` that carry what a dump knew, in order."""
    return [i for i, s in enumerate(table.sessions) if isinstance(s.get("flight"), dict)]


def gpu_state(table, session: int) -> GpuState:
    """GPU `session` of a dump's table: its last finished step and kernel, the launches after."""
    s = table.sessions[session]
    info = s["flight"]
    mine = np.flatnonzero(np.asarray(table.launches["session"]) == session)
    rows = dict(
        zip(
            np.asarray(table.launches["grid_id"])[mine].tolist(),
            np.asarray(table.launches["rows"])[mine].tolist(),
            strict=True,
        )
    )
    queued = [Queued(g, str(k), st, n, t, int(rows.get(g, 0))) for g, k, st, n, t in _queued(info)]
    ended = [i for i, q in enumerate(queued) if q.done]
    last = ended[-1] if ended else -1
    unended = [i for i, q in enumerate(queued) if not q.done]
    first_after = next((i for i in unended if i > last), None)
    flying = {i for i in unended if i < last or i == first_after or queued[i].ended > 0}
    in_flight = [queued[i] for i in sorted(flying)]
    not_reached = [queued[i] for i in unended if i not in flying]
    host_step = _whole(info, "host_step", -1)
    if unended:
        last_step = min(queued[i].step for i in unended) - 1
    else:  # everything of ours that the host queued ended
        last_step = host_step - 1
    return GpuState(
        int(s.get("rank", 0)) if isinstance(s.get("rank"), int) else 0,
        int(s.get("gpu", 0)) if isinstance(s.get("gpu"), int) else 0,
        host_step,
        last_step,
        queued[last] if last >= 0 else None,
        in_flight,
        not_reached,
    )


# -- the text --------------------------------------------------------------------------------


@dataclass(frozen=True)
class DumpOpening:
    """What a dump's opening says, found once (dump_opening): its table, each rank's sessions
    (in order), the state of each GPU its lines name, and per rank of a slow step the kernels
    that grew."""

    table: object
    by_rank: dict[int, list[int]]
    states: dict[int, GpuState]
    grown: dict[int, list[tuple[str, int, int]]]


def dump_opening(table) -> DumpOpening | None:
    """The numbers of a dump's opening (None for a table no flight recorder wrote): the GPUs'
    states where several ranks stand side by side or the ring was read live, the kernels that
    grew in a slow step."""
    sessions = flight_sessions(table)
    if not sessions:
        return None
    by_rank: dict[int, list[int]] = {}
    for i in sessions:
        by_rank.setdefault(_rank(table.sessions[i]), []).append(i)
    needed = [mine[0] for mine in by_rank.values()] if len(by_rank) > 1 else []
    grown = {}
    for rank, mine in by_rank.items():
        info = table.sessions[mine[0]]["flight"]
        if info.get("trigger") == "slow":
            grown[rank] = grown_kernels(table, _whole(info, "step", -1))
        elif info.get("live"):
            needed += mine
    states = {i: gpu_state(table, i) for i in dict.fromkeys(needed)}
    return DumpOpening(table, by_rank, states, grown)


def dump_lines(table, width: int) -> list[str]:
    """Why the dump (or each rank's, in a table of several) was written, what each GPU was
    doing, what grew in a slow step; the ranks side by side by step where there are several."""
    opening = dump_opening(table)
    return [] if opening is None else opening_lines(opening, width)


def opening_lines(opening: DumpOpening, width: int) -> list[str]:
    """dump_lines of the numbers dump_opening found."""
    table, by_rank = opening.table, opening.by_rank
    lines: list[str] = []
    several = len(by_rank) > 1
    if several:
        lines += ranks_lines(opening, width) + [""]
    for rank, mine in by_rank.items():
        if several and rank != next(iter(by_rank)):
            lines.append("")
        info = table.sessions[mine[0]]["flight"]
        head = f"Flight recorder{f' (rank {rank})' if several else ''}: {info.get('why', '')}"
        lines += _wrap(head, width, 0)
        lines += _wrap(_written(table, info), width, 2)
        if info.get("trigger") == "slow":
            lines += grown_lines(table, info, opening.grown[rank], width)
        elif info.get("live"):  # read while the GPUs ran (a stall, on demand, a blocked stop)
            for i in mine:
                lines += state_lines(table, i, opening.states[i], width)
        lines += _notes(table, mine, width)
    return lines


def ranks_lines(opening: DumpOpening, width: int) -> list[str]:
    """The ranks side by side by step: 'rank 1 is one step behind (its last step ended: 88;
    rank 0's: 89); last kernel ended: X'."""
    states = {r: opening.states[mine[0]] for r, mine in opening.by_rank.items()}
    lead = max(s.last_step_ended for s in states.values())
    leaders = [r for r, s in states.items() if s.last_step_ended == lead]
    # Within the lead step, a rank whose GPU ended a kernel of a later step is further on: a
    # rank blocked in a collective ran the step's kernels its peer never queued.
    on = {r: _kernel_step(s) for r, s in states.items() if r in leaders}
    front = max(on.values())
    first = next(r for r in leaders if on[r] == front)
    lines = [f"Flight recorder: {plural(len(states), 'rank')} side by side by step"]
    for r, s in states.items():
        behind = lead - s.last_step_ended
        if behind:
            where = (
                f"rank {r} is {_steps(behind)} behind (its last step ended: {s.last_step_ended}; "
                f"rank {leaders[0]}'s: {lead})"
            )
        elif on[r] < front:
            where = (
                f"rank {r} is behind in step {front} (its last step ended: {lead}, as rank "
                f"{first}'s; its GPU ended no kernel of step {front}, rank {first}'s did)"
            )
        else:
            where = f"rank {r}: last step ended: {s.last_step_ended}"
        text = f"{where}; last kernel ended: {_kernel(s.last_ended)}"
        if s.in_flight:
            text += f"; in flight: {', '.join(q.kernel for q in s.in_flight[:2])}"
        lines += _wrap(text, width, 2)
    return lines


def state_lines(table, session: int, s: GpuState, width: int) -> list[str]:
    """One GPU's state (`s`, its gpu_state): the host's step, its last step and kernel ended,
    the launches after."""
    written_ns = _whole(table.sessions[session]["flight"], "written_ns", 0)
    lines = _wrap(
        f"cuda:{s.gpu}: the host is in step {s.host_step}; the last step ended on the GPU: "
        f"{s.last_step_ended}; last kernel ended: {_kernel(s.last_ended)}",
        width,
        2,
    )
    for q in s.in_flight:
        lines += _wrap(
            f"in flight: {q.kernel} (step {q.step}): {q.ended:,} of {plural(q.records, 'program')}"
            f" ended; queued {_clock(q.queued_ns)}, {_before(written_ns - q.queued_ns)}",
            width,
            4,
        )
    if s.not_reached:
        names = ", ".join(q.kernel for q in s.not_reached[:QUEUED_SHOWN])
        more = len(s.not_reached) - QUEUED_SHOWN
        steps = sorted({q.step for q in s.not_reached})
        lines += _wrap(
            f"not reached: {plural(len(s.not_reached), 'launch', 'launches')} queued after it (step"
            f"{'s' if len(steps) > 1 else ''} {_span(steps)}): {names}"
            + (f" and {more} more" if more > 0 else "")
            + f"; the last queued {_before(written_ns - s.not_reached[-1].queued_ns)}",
            width,
            4,
        )
    if not s.in_flight and not s.not_reached:
        lines += _wrap(
            "nothing of ours in flight: every launch of an instrumented kernel the host queued "
            "had ended; the GPU is in a kernel auto mode does not instrument (a library's, "
            "a collective), or the host queued nothing since",
            width,
            4,
        )
    return lines


def grown_lines(table, info: dict, grown: list[tuple[str, int, int]], width: int) -> list[str]:
    """The kernels whose GPU time grew most in the slow step (`grown`: grown_kernels), beside
    the median of the steps kept before it."""
    step = _whole(info, "step", -1)
    before = sorted({int(x) for x in np.asarray(table.launches["step"]).tolist()} - {step})
    if not grown:
        return _wrap(f"no kernel took longer in step {step} than in the steps before", width, 2)
    lines = _wrap(
        f"grew in step {step}, beside the median of step{'s' if len(before) > 1 else ''} "
        f"{_span(before)}:",
        width,
        2,
    )
    name_w = min(max(len(name) for name, _, _ in grown), max(width // 2, 20))
    for name, took, median in grown:
        lines.append(
            f"    {middle(name, name_w):<{name_w}}  {format_time(took)} (median "
            f"{format_time(median)}, +{format_time(took - median)})"
        )
    return lines


def grown_kernels(table, step: int) -> list[tuple[str, int, int]]:
    """(kernel, its GPU time in `step`, the median of its time in the other steps of the table)
    of the kernels that took longer in `step`, most grown first (a kernel's time in a step: the
    sum of its launches' spans; 0 in a step that did not run it)."""
    L = table.launches
    steps = np.asarray(L["step"], np.int64)
    others = sorted(set(steps.tolist()) - {step})
    if not len(steps) or step not in steps:
        return []
    span = np.asarray(L["end_ns"], np.int64) - np.asarray(L["start_ns"], np.int64)
    kernel = np.asarray(L["kernel"], np.int64)
    out = []
    for k in np.unique(kernel[steps == step]).tolist():
        mine = kernel == k
        took = int(span[mine & (steps == step)].sum())
        per_step = [int(span[mine & (steps == s)].sum()) for s in others]
        median = int(np.median(per_step)) if per_step else 0
        if took > median:
            out.append((str(table.kernels[k].get("name", f"kernel {k}")), took, median))
    out.sort(key=lambda g: g[2] - g[1])
    return out[:GROWN_SHOWN]


# -- pieces ----------------------------------------------------------------------------------


def _written(table, info: dict) -> str:
    steps = info.get("steps")
    lo, hi = steps if _is_steps(steps) else (None, None)
    have = sorted({int(x) for x in np.asarray(table.launches["step"]).tolist()})
    text = f"written {_date(_whole(info, 'written_ns', 0))} (trigger: {info.get('trigger')})"
    if lo is not None and hi is not None:
        text += f"; steps {_span(range(max(int(lo), 0), int(hi) + 1))} kept"
        if have and int(lo) >= 0 and have[0] > int(lo):
            text += (
                f" (steps {_span(range(int(lo), have[0]))} were not in the ring any more: "
                "raise --capacity)"
            )
    return text


def _notes(table, sessions: list[int], width: int) -> list[str]:
    lines = []
    for i in sessions:
        info = table.sessions[i]["flight"]
        read = info.get("read")
        if isinstance(read, list) and len(read) == 3 and all(_is_whole(v) for v in read[:2]):
            lines += _wrap(
                f"cuda:{table.sessions[i].get('gpu')}: {read[0]:,} of {read[1]:,} bytes of "
                f"records read ({read[2]}): the launches after them are counted unwritten",
                width,
                2,
            )
    info = table.sessions[sessions[0]]["flight"]
    nccl = info.get("nccl_trace")
    if isinstance(nccl, dict):
        lines += _wrap(fr_text(info, nccl, _rank(table.sessions[sessions[0]])), width, 2)
    return lines


def fr_text(info: dict, nccl: dict, rank) -> str:
    """What PyTorch's flight recorder said at the dump: its newest collective (sequence number,
    name, process group, state) and the step of ours the host queued it in (its clock and the
    host's are one: the wall clock), and the newest one completed where that is another."""
    var = nccl.get("variable") if isinstance(nccl.get("variable"), str) else None
    head = (
        f"PyTorch's flight recorder is on ({var or 'TORCH_NCCL_TRACE_BUFFER_SIZE'}="
        f"{nccl.get('buffer_size')})"
    )
    given = nccl.get("collectives")
    rows = [
        c
        for c in (given if isinstance(given, list) else [])
        if isinstance(c, dict) and _is_whole(c.get("seq")) and _is_whole(c.get("created_ns"))
    ]
    if not rows:
        why = nccl.get("unread")
        said = f"not read ({printable(why)})" if isinstance(why, str) else "no collective read"
        return (
            f"{head}: {said}; its dump ({nccl.get('file_prefix')}{rank}) says which collective "
            f"each rank was in; this dump's host was in step {info.get('host_step')}"
        )
    step_of = _step_join(info)
    last = rows[-1]
    text = f"{head}: the last collective queued: {_collective(last)}, {step_of(last)}"
    done = [c for c in rows if c.get("state") == "completed"]
    if done and done[-1] is not last:
        text += f"; the last completed: #{done[-1]['seq']} ({step_of(done[-1])})"
    return text


def _collective(c: dict) -> str:
    name = printable(c.get("name")) if isinstance(c.get("name"), str) else "?"
    pg = f" ({printable(str(c['pg']))})" if isinstance(c.get("pg"), (str, int)) else ""
    state = printable(c.get("state")) if isinstance(c.get("state"), str) else "state unknown"
    return f"#{c['seq']} {name}{pg}, {state}"


def _step_join(info: dict):
    """c -> 'queued in step S' for a collective `c`, from the host's step starts the dump kept
    (step_starts_ns: [step, wall clock ns]); what it can say where the time is outside them."""
    raw = info.get("step_starts_ns")
    starts = sorted(
        (ns, s) for s, ns in (x for x in (raw if isinstance(raw, list) else []) if _is_pair(x))
    )
    written = _whole(info, "written_ns", 0)

    def step_of(c: dict) -> str:
        t = c["created_ns"]
        if not starts or (written and t > written + 60 * 10**9) or t < starts[0][0] - 3600 * 10**9:
            return "its time not within this dump's steps"
        if t < starts[0][0]:
            return f"queued before step {starts[0][1]}"
        i = max(j for j, (ns, _) in enumerate(starts) if ns <= t)
        return f"queued in step {starts[i][1]}"

    return step_of


def _is_pair(x) -> bool:
    return isinstance(x, list) and len(x) == 2 and all(_is_whole(v) and v >= 0 for v in x)


def _is_whole(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _whole(info: dict, key: str, default: int) -> int:
    """info[key] where it is a whole number (a file may hold anything), else `default`."""
    v = info.get(key)
    return v if _is_whole(v) and 0 <= v < 2**63 else default


def _is_steps(v) -> bool:
    return isinstance(v, list) and len(v) == 2 and all(_is_whole(x) for x in v)


def _queued(info: dict) -> list[tuple]:
    """The well-formed entries of info["queued"]: [grid_id, kernel, step, records, queued_ns]
    (a damaged entry is left out, never a traceback)."""
    out = []
    entries = info.get("queued")
    for e in entries if isinstance(entries, list) else []:
        if isinstance(e, list) and len(e) == 5 and isinstance(e[1], str):
            g, k, st, n, t = e
            if all(_is_whole(v) and abs(v) < 2**63 for v in (g, st, n, t)) and n > 0 <= t:
                out.append((g, k, st, n, t))
    return out


def _rank(session: dict) -> int:
    r = session.get("rank")
    return r if isinstance(r, int) and not isinstance(r, bool) else 0


def _kernel_step(s: GpuState) -> int:
    """The step of the last kernel the GPU ended (-1: none kept)."""
    return s.last_ended.step if s.last_ended is not None else -1


def _kernel(q: Queued | None) -> str:
    return "none in the kept steps" if q is None else f"{q.kernel} (step {q.step})"


def _steps(n: int) -> str:
    return "one step" if n == 1 else f"{n} steps"


def _span(steps) -> str:
    steps = sorted(steps)
    if not steps:
        return "none"
    return str(steps[0]) if steps[0] == steps[-1] else f"{steps[0]}-{steps[-1]}"


def _before(ns: int) -> str:
    return f"{format_time(max(ns, 0))} before the dump"


def _clock(ns: int) -> str:
    sec, rest = divmod(int(ns), 10**9)
    return time.strftime("%H:%M:%S", time.gmtime(sec)) + f".{rest // 10**6:03d} UTC"


def _date(ns: int) -> str:
    sec, rest = divmod(int(ns), 10**9)
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(sec)) + f".{rest // 10**6:03d} UTC"


def _wrap(text: str, width: int, indent: int) -> list[str]:
    """`text` wrapped at `width` (at least 40) from `indent` columns, its later lines 2 more."""
    pad = " " * indent
    return [pad + line for line in wrap(text, max(width, 40) - indent)]
