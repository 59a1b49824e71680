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
    from sm_profiler.auto_mode.table import AutoTable

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
    from sm_profiler.auto_mode.table import LAUNCH_DTYPES, ROW_DTYPES

    R = {k: np.array(rows[k], ROW_DTYPES[k]) for k in ROW_DTYPES}
    L = {k: np.array(cols[k], LAUNCH_DTYPES[k]) for k in LAUNCH_DTYPES}
    sessions = [
        {"gpu": 0, "sm_count": sm_count, "rank": r, "device_name": "test GPU"} for r in ranks
    ]
    kernels = [{"name": name, "kernel_id": j} for j, name in enumerate(names)]
    return AutoTable(R, L, kernels, sessions, dict(metadata or {}))


def ranks_table(per_rank, sm_count=4):
    """Several ranks' tables joined (AutoTable.concat): per_rank[r] is rank r's launches."""
    from sm_profiler.auto_mode.table import AutoTable

    return AutoTable.concat(
        [make_table(launches, sm_count, ranks=(r,)) for r, launches in enumerate(per_rank)]
    )


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
