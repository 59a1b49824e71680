"""Many launches without a sync, CUDA graphs, the torch.profiler merge and two GPUs, on a GPU.

Each test asserts decoded content (labels, stream order, alignment figures) and prints the figures
it measured (run with -s to see them)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
import triton
import triton.language as tl

import sm_profiler
from sm_profiler.triton_ops import profiler_event_end, profiler_event_start, profiler_init

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]

WORK = tl.constexpr(0)


@triton.jit
def scale_kernel(x, prof, N: tl.constexpr, ITERS: tl.constexpr):
    ctx = profiler_init(prof, tl.program_id(0), 0)
    ctx = profiler_event_start(ctx, WORK)
    offs = tl.program_id(0) * N + tl.arange(0, N)
    v = tl.load(x + offs)
    for _ in range(ITERS):
        v = v * 1.0001 + 1e-4
    tl.store(x + offs, v)
    ctx = profiler_event_end(ctx, WORK, after=v)


@triton.jit
def shift_kernel(x, prof, N: tl.constexpr):
    ctx = profiler_init(prof)
    ctx = profiler_event_start(ctx, WORK)
    offs = tl.program_id(0) * N + tl.arange(0, N)
    v = tl.load(x + offs) - 1e-4
    tl.store(x + offs, v)
    ctx = profiler_event_end(ctx, WORK, after=v)


def _step(x, buf):
    scale_kernel[(8,)](x, buf, N=1024, ITERS=200, num_warps=4)
    shift_kernel[(4,)](x, buf, N=1024, num_warps=2)


def _check_twenty(caps):
    assert len(caps) == 20
    names = [c.kernel_name for c in caps]
    assert names == ["scale_kernel", "shift_kernel"] * 10
    assert [c.metadata["grid"] for c in caps[:2]] == [[8, 1, 1], [4, 1, 1]]
    assert [c.metadata["num_warps"] for c in caps[:2]] == [4, 2]
    assert all("test_workload_gpu.py" in c.metadata["call_site"] for c in caps)
    traces = [sm_profiler.decode([c]) for c in caps]
    for c, t in zip(caps, traces, strict=True):
        want = 8 if c.kernel_name == "scale_kernel" else 4
        assert len(t) == want and t.dropped_total == 0
        assert (t.duration_ns > 0).all()
    # One stream: each launch starts after the one before it ended.
    for a, b in zip(traces, traces[1:], strict=False):
        assert b.start_ns >= a.end_ns - 1000, (a.end_ns, b.start_ns)
    return traces


def test_twenty_launches_without_a_sync_decode_to_twenty_labelled_captures():
    prof = sm_profiler.SmProfiler(8, 1, 4, slots=32)
    prof.register_event(0, "work")
    x = torch.rand(8 * 1024, device="cuda")
    _step(x, prof.get_buffer())  # compile outside the counted launches
    torch.cuda.synchronize()
    prof.init_buffer()
    for _ in range(10):
        _step(x, prof.get_buffer())
    _check_twenty(prof.captures())
    text = sm_profiler.report.stats.format_stats(prof.stats(), width=100)
    assert "launches by kernel" in text and "scale_kernel" in text and "shift_kernel" in text
    prof.close()


def test_the_same_through_a_cuda_graph_replay():
    prof = sm_profiler.SmProfiler(8, 1, 4, slots=24)
    x = torch.rand(8 * 1024, device="cuda")
    buf = prof.get_buffer()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        _step(x, buf)  # warm up (compile) outside the capture
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        _step(x, buf)
    prof.init_buffer()
    for _ in range(10):
        g.replay()
    _check_twenty(prof.captures())
    prof.close()


def test_slots_that_run_out_are_counted_not_overwritten():
    prof = sm_profiler.SmProfiler(8, 1, 4, slots=3)
    x = torch.rand(8 * 1024, device="cuda")
    for _ in range(3):
        _step(x, prof.get_buffer())  # 6 launches into 3 slots
    with pytest.warns(UserWarning, match="3 launches found all 3 slots used"):
        caps = prof.captures()
    assert [c.kernel_name for c in caps] == ["scale_kernel", "shift_kernel", "scale_kernel"]
    assert caps[-1].metadata["launches_without_slot"] == 3
    assert len(sm_profiler.decode([caps[-1]])) == 8  # the third launch's, not a later one's
    prof.close()


def test_torch_profiler_merge_aligns_within_a_microsecond(tmp_path):
    from torch.profiler import ProfilerActivity, profile

    prof = sm_profiler.SmProfiler(8, 1, 4, slots=16)
    x = torch.rand(8 * 1024, device="cuda")
    _step(x, prof.get_buffer())
    torch.cuda.synchronize()
    prof.init_buffer()
    prof.calibrate_clock()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as tp:
        for _ in range(5):
            _step(x, prof.get_buffer())
        torch.cuda.synchronize()
    prof.calibrate_clock()
    out = tmp_path / "merged.json"
    info = sm_profiler.merge_torch_trace(tp, prof, out)
    clock = prof.metadata["clock"]
    err = info["error"][0]
    print("\nclock samples:", clock)
    print("alignment:", json.dumps(info, indent=1))
    assert info["method"] == "clock" and err["matched"] == 10
    assert all(s["error_ns"] < 5000 for s in clock)
    # CUPTI's kernel span vs our first / last stamp on the mapped axis
    assert err["max_abs_ns"] < 1000, err
    doc = json.loads(out.read_text())
    names = {e["args"]["name"] for e in doc["traceEvents"] if e.get("name") == "process_name"}
    assert any(n.startswith("GPU 0 · SM ") for n in names)
    assert any(e.get("cat") == "kernel" for e in doc["traceEvents"])  # torch's rows kept
    prof.close()


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs 2 GPUs")
def test_two_gpus_clock_agreement_and_merge(tmp_path):
    from sm_profiler.record.clock import compare_gpus, measure_clock

    cmp = compare_gpus(["cuda:0", "cuda:1"])
    offsets = [measure_clock(f"cuda:{i}") for i in range(2)]
    print("\ncompare_gpus:", cmp)
    print("offsets vs CLOCK_REALTIME:", offsets)
    d = cmp["diff_ns"]["cuda:1"]
    # The same flag releases both probes: the spread of the difference bounds the method.
    assert d["max"] - d["min"] < 20_000, d
    host_diff = offsets[1]["offset_ns"] - offsets[0]["offset_ns"]
    bound = offsets[0]["error_ns"] + offsets[1]["error_ns"] + (d["max"] - d["min"])
    assert abs(host_diff - d["median"]) <= bound + 2000, (host_diff, d, bound)
    profs = []
    for r in range(2):
        with torch.cuda.device(r):
            p = sm_profiler.SmProfiler(8, 1, 4, slots=8, device=f"cuda:{r}")
            p.metadata["rank"] = r
            p.calibrate_clock()
            x = torch.rand(8 * 1024, device=f"cuda:{r}")
            for _ in range(2):
                _step(x, p.get_buffer())
            torch.cuda.synchronize()
            profs.append(p)
    info = sm_profiler.merge_ranks(profs, tmp_path / "ranks.json")
    assert info["method"] == "clock"
    doc = json.loads((tmp_path / "ranks.json").read_text())
    names = {e["args"]["name"] for e in doc["traceEvents"] if e.get("name") == "process_name"}
    assert any(n.startswith("GPU 0 · SM") for n in names)
    assert any(n.startswith("GPU 1 · SM") for n in names)
    ts = [e["ts"] for e in doc["traceEvents"] if e.get("ph") == "X"]
    assert min(ts) >= 0 and np.isfinite(ts).all()
    for p in profs:
        p.close()
