"""Back-to-back programs at a real clock reading and torch.profiler's trace of them on a clock
that is off ours by no whole µs: what the Perfetto UI dropped when ns were rounded into each
other (issue 52, item 8). Shared by tests/host/test_export_chrome_hostile5.py (the UI's importer
as trace_readers.ui_import reads it) and tests/e2e/test_browser.py (the UI itself)."""

from __future__ import annotations

from auto_inputs import table_of
from captures import cupti_doc

# %globaltimer at time 0, at 1e12 ns, and as a GPU read it (clock_alignment.py on an H200).
ORIGINS = [0, 10**12, 1_795_442_356_354_036_189]
SKEW_NS = 123_456_789  # torch's clock (CLOCK_REALTIME) - %globaltimer: no whole µs
DAY_NS = 86_400 * 10**9
KERNELS = {1: {"name": "sq_relu_scale", "num_warps": 4}, 2: {"name": "mm_tail", "num_warps": 4}}


def programs(t0: int) -> list[tuple]:
    """Program records (auto_buffer's) of two launches: on SM 0 sq_relu_scale's programs one
    after another, each beginning the ns the one before ends, then mm_tail's the same way from
    the ns the last one ends; on SM 1 two at a time (two slots), each slot's back to back."""
    recs, t = [], t0
    for p in range(40):
        dur = 1001 + (p * 37) % 300  # ns: durations and starts that are no whole µs
        recs.append((t, dur, 0, 1, 1, p, 0, 0))
        t += dur
    recs += [(t0 + 500 * k + 1, 1000, 1, 1, 1, 40 + k, 0, 0) for k in range(40)]
    for p in range(20):
        recs.append((t, 777, 0, 2, 2, p, 0, 0))
        t += 777
    return recs


def back_to_back_table(t0: int, rank: int = 0, world: int = 1):
    session = {"rank": rank, "world_size": world, "gpu": rank}
    return table_of(programs(t0), kernels=KERNELS, sm_count=2, session=session)


def torch_doc(table, rank: int = 0) -> dict:
    """torch.profiler's trace of the same launches on the host clock: each launch's CUPTI row,
    times since a baseTimeNanoseconds as Kineto picks it (the start of the quarter: ts of
    5e12 µs and more at a real clock reading, where a double steps by about 1 ns)."""
    names = table.kernel_names()
    L = table.launches
    host0 = int(L["start_ns"].min()) + SKEW_NS
    base = max(0, (host0 - 59 * DAY_NS) // 10**9 * 10**9)
    rows = [
        dict(name=names[int(k)], start=int(s) + SKEW_NS - base, end=int(e) + SKEW_NS - base)
        for k, s, e in zip(L["kernel"], L["start_ns"], L["end_ns"], strict=True)
    ]
    # A kernel we did not record, twice back to back: its bars on the SM tracks meet too.
    end = rows[-1]["end"]
    for k in range(2):
        rows.append(
            dict(name="ncclDevKernel_AllReduce", start=end + k * 2_345, end=end + (k + 1) * 2_345)
        )
    for r in rows:
        r.update(launch=r["start"] - 3_000, device=rank, grid=(40, 1, 1))
    doc = cupti_doc(rows, base_ns=base, num_sms=2)
    doc["distributedInfo"] = {"rank": rank, "world_size": 2}
    return doc
