"""Hand-made AutoTables for the advisor's tests (tests/host/test_advise.py): launches given as
their programs, each (sm, start_ns, end_ns), so that every estimate can be worked out by hand."""

from __future__ import annotations

import numpy as np


def launch(programs, kernel="k", step=0, session=0):
    """One launch: `programs` a list of (sm, start_ns, end_ns), program ids 0, 1, ... in order."""
    return {"programs": list(programs), "kernel": kernel, "step": step, "session": session}


def make_table(launches, sm_count=4, ranks=(0,), metadata=None):
    """The AutoTable of `launches` (in the order given), one session per rank (GPU 0 of each),
    kernels named as the launches name them."""
    from sm_profiler.trace.auto_table import AutoTable

    names = list(dict.fromkeys(la["kernel"] for la in launches)) or ["k"]
    rows = {k: [] for k in ("launch", "sm", "start_ns", "end_ns", "x", "y", "z", "warp")}
    cols = {k: [] for k in ("gpu", "session", "kernel", "grid_id", "step", "tag", "per_warp")}
    cols.update({k: [] for k in ("first_row", "rows", "start_ns", "end_ns", "grid_x")})
    n = 0
    for i, la in enumerate(launches):
        progs = la["programs"]
        for x, (sm, s, e) in enumerate(progs):
            for k, v in zip(rows, (i, sm, s, e, x, 0, 0, 0), strict=True):
                rows[k].append(v)
        cols["gpu"].append(0)
        cols["session"].append(la["session"])
        cols["kernel"].append(names.index(la["kernel"]))
        cols["grid_id"].append(i)
        cols["step"].append(la["step"])
        cols["tag"].append(0)
        cols["per_warp"].append(False)
        cols["first_row"].append(n)
        cols["rows"].append(len(progs))
        cols["start_ns"].append(min(p[1] for p in progs))
        cols["end_ns"].append(max(p[2] for p in progs))
        cols["grid_x"].append(len(progs))
        n += len(progs)
    m = len(launches)
    cols["grid_y"] = [1] * m
    cols["grid_z"] = [1] * m
    from sm_profiler.trace.auto_table import LAUNCH_DTYPES, ROW_DTYPES

    R = {k: np.array(rows[k], ROW_DTYPES[k]) for k in ROW_DTYPES}
    L = {k: np.array(cols[k], LAUNCH_DTYPES[k]) for k in LAUNCH_DTYPES}
    sessions = [
        {"gpu": 0, "sm_count": sm_count, "rank": r, "device_name": "test GPU"} for r in ranks
    ]
    kernels = [{"name": name, "kernel_id": j} for j, name in enumerate(names)]
    return AutoTable(R, L, kernels, sessions, dict(metadata or {}))


def ranks_table(per_rank, sm_count=4):
    """Several ranks' tables joined (AutoTable.concat): per_rank[r] is rank r's launches."""
    from sm_profiler.trace.auto_table import AutoTable

    return AutoTable.concat(
        [make_table(launches, sm_count, ranks=(r,)) for r, launches in enumerate(per_rank)]
    )


def shifted(table, delta_ns: int):
    """`table` with every time (rows' and launches' starts and ends) moved by `delta_ns`: the same
    recording at another clock origin (%globaltimer reads about 1.7e18 ns)."""
    from sm_profiler.trace.auto_table import AutoTable

    rows, launches = dict(table.rows), dict(table.launches)
    for cols in (rows, launches):
        for k in ("start_ns", "end_ns"):
            cols[k] = np.asarray(cols[k], np.int64) + np.int64(delta_ns)
    return AutoTable(rows, launches, table.kernels, table.sessions, table.metadata)


# -- the five planted defects (their estimates worked out in tests/host/test_advise.py) ---------


def one_point_one_waves(steps=3):
    """11 programs of 100 ns on 10 SMs, one resident each: a full wave and one program more;
    steps back to back (200 ns each), so no gaps."""
    out = []
    for k in range(steps):
        t = 200 * k
        progs = [(sm, t, t + 100) for sm in range(10)] + [(0, t + 100, t + 200)]
        out.append(launch(progs, "wave_kernel", step=k))
    return make_table(out, sm_count=10)


def compute_bound_waves(steps=3, alone_ns=1_000, sms=10, resident=16):
    """1.10 waves of a compute-bound kernel (issue 55): an SM's throughput is shared by its
    resident programs, so a program takes `alone_ns` alone and `resident` x that at full
    residency. Each SM runs `resident` programs at once for resident x alone_ns (the full wave,
    sms x resident programs); then the last wave's sms x resident / 10 programs, two at once on
    the first SMs (2 x alone_ns each) and one on the rest (alone_ns). Steps back to back."""
    full_ns = resident * alone_ns
    last = sms * resident // 10
    twos = last - sms  # SMs that run two of the last wave (the others run one)
    out = []
    for k in range(steps):
        t = k * (full_ns + 2 * alone_ns)
        progs = [(sm, t, t + full_ns) for sm in range(sms) for _ in range(resident)]
        for sm in range(sms):
            n = 2 if sm < twos else 1
            progs += [(sm, t + full_ns, t + full_ns + n * alone_ns)] * n
        out.append(launch(progs, "fma_kernel", step=k))
    return make_table(out, sm_count=sms)


def unfair_compute_bound_waves(steps=3, alone_ns=1_000, sms=10, resident=16):
    """compute_bound_waves as an H200 ran it (2026-11-29): the SM's throughput is shared
    unfairly, four programs at a time, so the full wave's programs end in fours at 4, 8, 12 and
    16 x alone_ns (the median program 10 x, the wave 16 x); the last wave's programs start as
    slots free and are served last: the SM ends at 16 + n x alone_ns for n of them."""
    full_ns = resident * alone_ns
    last = sms * resident // 10
    twos = last - sms
    out = []
    for k in range(steps):
        t = k * (full_ns + 2 * alone_ns)
        progs = [
            (sm, t, t + (1 + j // 4) * 4 * alone_ns) for sm in range(sms) for j in range(resident)
        ]
        for sm in range(sms):
            n = 2 if sm < twos else 1
            progs += [(sm, t + 4 * alone_ns, t + full_ns + n * alone_ns)] * n
        out.append(launch(progs, "fma_kernel", step=k))
    return make_table(out, sm_count=sms)


def skewed_work(steps=3):
    """8 programs on 4 SMs (two full waves of 100 ns) but program 7 runs 500 ns: SM 3 ends at
    600 ns, the others at 200 ns. Steps back to back (600 ns)."""
    out = []
    for k in range(steps):
        t = 600 * k
        progs = [(sm, t, t + 100) for sm in range(4)]
        progs += [(sm, t + 100, t + 200) for sm in range(3)] + [(3, t + 100, t + 600)]
        out.append(launch(progs, "skewed_kernel", step=k))
    return make_table(out, sm_count=4)


def too_few_programs(steps=3):
    """2 programs of 1,000 ns on an 8-SM GPU; steps back to back."""
    out = []
    for k in range(steps):
        t = 1000 * k
        out.append(launch([(0, t, t + 1000), (1, t, t + 1000)], "few_kernel", step=k))
    return make_table(out, sm_count=8)


def host_gaps(steps=3):
    """Per step 5 launches of 4 programs (one per SM) of 100 ns, 500 ns apart; steps 2,500 ns
    apart: 400 ns gaps between launches and 400 ns between steps."""
    out = []
    for k in range(steps):
        for j in range(5):
            t = 2500 * k + 500 * j
            out.append(launch([(sm, t, t + 100) for sm in range(4)], "tiny_kernel", step=k))
    return make_table(out, sm_count=4)


def slow_rank(steps=3):
    """Two ranks, one launch a step of 4 programs (one per SM): 100 ns on rank 0, 300 ns on rank
    1, both starting every 300 ns (rank 0 waits for rank 1 at a collective not recorded)."""
    per_rank = []
    for dur in (100, 300):
        per_rank.append(
            [
                launch([(sm, 300 * k, 300 * k + dur) for sm in range(4)], "step_kernel", step=k)
                for k in range(steps)
            ]
        )
    return ranks_table(per_rank)


# -- torch.profiler's kernel rows of the same steps (advise's cupti=) ---------------------------

CUPTI_BASE_NS = 3_000_000_000  # torch's clock: 3 s from ours (an offset to find)
CUPTI_LEAD_NS = 7_000  # our first launch's CUPTI row: ns after CUPTI_BASE_NS


def wave_with_gaps(steps=3, period=10_000):
    """one_point_one_waves' launch (11 programs of 100 ns on 10 SMs: 90 ns of partial wave a
    step) at the start of each `period` ns step: the rest of the step is host gaps by the
    records alone."""
    out = []
    for k in range(steps):
        t = period * k
        progs = [(sm, t, t + 100) for sm in range(10)] + [(0, t + 100, t + 200)]
        out.append(launch(progs, "wave_kernel", step=k))
    return make_table(out, sm_count=10)


def cupti_doc_of(
    table,
    fill="nvjet_sm90_gemm_tn",
    leave=20,
    jitter=None,
    device=0,
    steps=None,
    rank=None,
    session=0,
    fill_shape=None,
    num_sms=None,
):
    """torch.profiler's trace of `table`'s launches of one session: each launch's CUPTI row
    (its kernel's name, its span moved onto torch's clock; `jitter[i]` ns more for launch i),
    and a `fill` kernel (cuBLAS-like, not instrumented) from each launch's end to the next
    launch's start but `leave` ns (none after the last); ProfilerStep#N windows of `steps`
    (default: the table's); distributedInfo naming `rank` where given. fill_shape: the fill
    rows' launch shape (grid, block, registers per thread, shared memory bytes); num_sms:
    deviceProperties' numSms."""
    from captures import cupti_doc

    L = table.launches
    names = table.kernel_names()
    mine = np.flatnonzero(np.asarray(L["session"]) == session)
    start, end = L["start_ns"][mine].astype(np.int64), L["end_ns"][mine].astype(np.int64)
    o = np.argsort(start, kind="stable")
    t0 = int(start.min())
    lead = CUPTI_LEAD_NS - t0
    rows, marks = [], []
    for n, i in enumerate(o.tolist()):
        j = 0 if jitter is None else int(jitter[n])
        s, e = int(start[i]) + lead + j, int(end[i]) + lead + j
        rows.append(dict(name=names[int(L["kernel"][mine[i]])], start=s, end=e, device=device))
        if fill and n + 1 < len(o):
            nxt = int(start[o[n + 1]]) + lead
            if nxt - leave > int(end[i]) + lead:
                row = dict(name=fill, start=int(end[i]) + lead, end=nxt - leave, device=device)
                if fill_shape is not None:
                    grid, block, regs, smem = fill_shape
                    row.update(grid=grid, block=block)
                    row["args"] = {"registers per thread": regs, "shared memory": smem}
                rows.append(row)
    step = np.asarray(L["step"])[mine]
    numbers = sorted(set(step[step >= 0].tolist())) if steps is None else list(steps)
    ours = sorted(set(step[step >= 0].tolist()))
    for n, k in zip(numbers, ours, strict=False):
        m = step == k
        marks.append((n, int(start[m].min()) + lead - 300, int(end[m].max()) + lead + 100))
    for r in rows:
        r["launch"] = r["start"] - 100
    doc = cupti_doc(rows, steps=marks, base_ns=CUPTI_BASE_NS, num_sms=num_sms)
    if rank is not None:
        doc["distributedInfo"] = {"rank": rank, "world_size": rank + 1}
    return doc
