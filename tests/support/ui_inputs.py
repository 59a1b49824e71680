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


def kineto_doc(table, rank: int = 0, span_ns: int | None = None) -> dict:
    """torch_doc's trace as Kineto writes a whole one (issue 56, item 11): its processes and
    threads named, a ProfilerStep#0 around the launches, each cudaLaunchKernel inside an aten::mm
    and joined to its kernel by an 'ac2g' flow, two CPU ops on a thread of their own that only
    partly overlap (torch's rounding does that), an instant on a thread and a global one, a
    memory counter, and a 'B'/'E' pair (no phase we draw). span_ns: Kineto's 'PyTorch Profiler'
    span runs that long from the first row, the recorded steps at its start (a long recording)."""
    doc = torch_doc(table, rank)
    ev = doc["traceEvents"]
    us = _us
    kernels = [e for e in ev if e["cat"] == "kernel"]
    launches = {e["args"]["correlation"]: e for e in ev if e["cat"] == "cuda_runtime"}
    first = min(exact(e["ts"]) for e in ev) - 5_000
    last = max(exact(e["ts"]) + exact(e["dur"]) for e in ev) + 5_000
    cpu, gpu = 11, rank
    for k in kernels:
        c = k["args"]["correlation"]
        t = exact(launches[c]["ts"])
        ev.append(_x("aten::mm", "cpu_op", cpu, cpu, t - 200, 1_000))
        ev.append(dict(ph="s", id=c, pid=cpu, tid=cpu, ts=us(t), cat="ac2g", name="ac2g"))
        kt = exact(k["ts"])
        ev.append(dict(ph="f", id=c, pid=gpu, tid=7, ts=us(kt), cat="ac2g", name="ac2g", bp="e"))
    ev.append(_x("ProfilerStep#0", "user_annotation", cpu, 0x0FFF_FFF0, first, last - first))
    ev.append(_x("aten::copy_", "cpu_op", cpu, 12, first + 1_000, 1_000))
    ev.append(_x("aten::add", "cpu_op", cpu, 12, first + 1_500, 1_000))  # half inside copy_
    ev.append(dict(ph="i", s="t", name="mark", pid=cpu, tid=cpu, ts=us(first + 2_000)))
    ev.append(dict(ph="i", s="g", name="Iteration Start", pid="Traces", tid="t", ts=us(first)))
    for k, t in enumerate((first, last)):
        args = {"Total Allocated": 1024.5 * (k + 1)}
        ev.append(dict(ph="C", name="[memory]", pid=cpu, tid=cpu, ts=us(t), args=args))
    ev.append(dict(ph="B", name="open", pid=cpu, tid=cpu, ts=us(first + 3_000)))
    ev.append(dict(ph="E", name="open", pid=cpu, tid=cpu, ts=us(first + 4_000)))
    if span_ns is not None:
        span = _x("PyTorch Profiler (0)", "Trace", "Spans", "PyTorch Profiler", first, span_ns)
        ev.append(span)
    meta = [
        (cpu, 0, "process_name", {"name": "python3"}),
        (gpu, 0, "process_name", {"name": "python3"}),
        (cpu, cpu, "thread_name", {"name": f"thread {cpu} (python3)"}),
        (cpu, 12, "thread_name", {"name": "thread 12 (pt_autograd_0)"}),
        (cpu, 0x0FFF_FFF0, "thread_name", {"name": "steps (sm_profiler)"}),
        (cpu, 0x0FFF_FFF0, "thread_sort_index", {"sort_index": -1}),
        (gpu, 7, "thread_name", {"name": "stream 7 "}),
    ]
    ev[:0] = [dict(ph="M", pid=p, tid=t, name=n, args=a) for p, t, n, a in meta]
    return doc


def _us(ns: int) -> float:
    """ns as Kineto writes them: µs with three decimals (json reads back the nearest double)."""
    return float(f"{ns // 1000}.{ns % 1000:03d}")


def exact(us: float) -> int:
    from sm_profiler.export.chrome import exact_ns

    return exact_ns(us)


def _x(name: str, cat: str, pid, tid, start_ns: int, dur_ns: int) -> dict:
    return dict(ph="X", name=name, cat=cat, pid=pid, tid=tid, ts=_us(start_ns), dur=_us(dur_ns))
