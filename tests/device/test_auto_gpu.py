"""Auto mode on a GPU: every program of every instrumented kernel recorded, launches kept apart
(streams, CUDA graph replays), torch.compile'd models bit-identical to their plain runs.

Each test asserts decoded content; run with -s to see the figures."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
import torch
import triton
import triton.language as tl
from auto_models import Block, train_step
from repo_paths import SUPPORT

import sm_profiler
import sm_profiler.report.auto_report
from sm_profiler.auto_mode import binding

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]


@triton.jit
def axpy_kernel(x, y, out, n, a, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    v = a * tl.load(x + offs, mask=m) + tl.load(y + offs, mask=m)
    for _ in range(8):
        v = v * 1.0001 + 1e-4
    tl.store(out + offs, v, mask=m)


@triton.jit
def grid3d_kernel(out, BLOCK: tl.constexpr):
    pid = tl.program_id(0) + tl.num_programs(0) * (
        tl.program_id(1) + tl.num_programs(1) * tl.program_id(2)
    )
    tl.store(out + pid * BLOCK + tl.arange(0, BLOCK), pid + tl.zeros((BLOCK,), tl.float32))


def _sm_count() -> int:
    return torch.cuda.get_device_properties(0).multi_processor_count


def _launches(trace, name):
    return [c for c, k in enumerate(trace.kernels) if k.name == name]


def _check_launch(trace, c, grid):
    """Every program of launch `c` recorded once, on a real SM, with start <= end."""
    k = trace.kernels[c]
    assert tuple(k.metadata["grid"]) == tuple(grid)
    lanes = trace.lanes
    m = lanes["capture"] == c
    assert int(m.sum()) == int(np.prod(grid)) * k.num_groups
    assert lanes["initialized"][m].all()
    assert (lanes["sm"][m] >= 0).all() and (lanes["sm"][m] < _sm_count()).all()
    ev = trace.events
    e = ev["capture"] == c
    assert int(e.sum()) == int(m.sum())  # one range per program
    assert (ev["end_ns"][e] >= ev["start_ns"][e]).all()
    return ev["start_ns"][e].min(), ev["end_ns"][e].max()


def test_every_program_of_every_launch_streams_kept_apart():
    n = 1 << 20
    x, y = torch.rand(n, device="cuda"), torch.rand(n, device="cuda")
    plain = torch.empty_like(x)
    axpy_kernel[(triton.cdiv(n, 1024),)](x, y, plain, n, 2.0, BLOCK=1024)
    outs = [torch.empty_like(x) for _ in range(4)]
    s2 = torch.cuda.Stream()
    with sm_profiler.auto() as prof:
        axpy_kernel[(triton.cdiv(n, 1024),)](x, y, outs[0], n, 2.0, BLOCK=1024)
        axpy_kernel[(triton.cdiv(n, 512),)](x, y, outs[1], n, 2.0, BLOCK=512)
        with torch.cuda.stream(s2):  # overlaps the launch below: two launches, never merged
            axpy_kernel[(triton.cdiv(n, 1024),)](x, y, outs[2], n, 2.0, BLOCK=1024)
        axpy_kernel[(triton.cdiv(n, 1024),)](x, y, outs[3], n, 2.0, BLOCK=1024)
        grid3d_kernel[(5, 3, 2)](outs[0], BLOCK=128)
        torch.cuda.synchronize()
    torch.cuda.synchronize()
    assert (
        torch.equal(outs[1], plain) and torch.equal(outs[2], plain) and torch.equal(outs[3], plain)
    )
    trace = prof.decode()
    axpy = _launches(trace, "axpy_kernel")
    assert len(axpy) == 4
    grids = sorted(tuple(trace.kernels[c].metadata["grid"]) for c in axpy)
    assert grids == sorted([(1024, 1, 1), (2048, 1, 1), (1024, 1, 1), (1024, 1, 1)])
    ids = {trace.kernels[c].metadata["grid_id"] for c in axpy}
    assert len(ids) == 4
    for c in axpy:
        _check_launch(trace, c, trace.kernels[c].metadata["grid"])
    (g3,) = _launches(trace, "grid3d_kernel")
    _check_launch(trace, g3, (5, 3, 2))
    meta = trace.kernels[axpy[0]].metadata
    assert meta["num_warps"] == 4 and meta["source"].startswith("test_auto_gpu.py:")
    assert "test_auto_gpu.py" in meta["call_site"]
    # Outside the region the same call compiles and runs the plain kernel.
    out = torch.empty_like(x)
    k = axpy_kernel[(triton.cdiv(n, 1024),)](x, y, out, n, 2.0, BLOCK=1024)
    assert "sm_profiler auto" not in k.asm["ptx"]
    assert torch.equal(out, plain)


def _axpy_graph(n, x, y, out):
    """One eager launch of axpy_kernel (it compiles and loads), then a CUDA graph of one."""
    axpy_kernel[(n // 1024,)](x, y, out, n, 3.0, BLOCK=1024)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        axpy_kernel[(n // 1024,)](x, y, out, n, 3.0, BLOCK=1024)
    return g


def test_cuda_graph_replays_are_separate_launches():
    n = 1 << 18
    x, y, out = (torch.rand(n, device="cuda") for _ in range(3))
    with sm_profiler.auto() as prof:
        g = _axpy_graph(n, x, y, out)
        for _ in range(3):
            g.replay()
    trace = prof.decode()
    launches = _launches(trace, "axpy_kernel")
    assert len(launches) == 4  # the eager launch and three replays (capture runs nothing)
    spans = sorted(_check_launch(trace, c, (n // 1024, 1, 1)) for c in launches)
    for (_, e0), (s1, _) in zip(spans, spans[1:], strict=False):
        assert e0 <= s1  # one stream: each replay after the one before
    # A replay outside the region writes only the graph's own areas and is not copied out.
    g.replay()
    torch.cuda.synchronize()


def test_a_graph_captured_in_one_region_is_recorded_in_the_next():
    n = 1 << 18
    x, y, out = (torch.rand(n, device="cuda") for _ in range(3))
    with sm_profiler.auto() as first:
        g = _axpy_graph(n, x, y, out)
        g.replay()
    g.replay()  # between regions: writes the graph's own areas (its buffer lives with it)
    with sm_profiler.auto() as second:
        for _ in range(2):
            g.replay()
    torch.cuda.synchronize()
    assert len(_launches(first.decode(), "axpy_kernel")) == 2  # the eager launch, one replay
    trace = second.decode()
    launches = _launches(trace, "axpy_kernel")
    assert len(launches) == 2  # the second region's two replays, named by their tag
    for c in launches:
        _check_launch(trace, c, (n // 1024, 1, 1))
    want = 3.0 * x + y
    for _ in range(8):
        want = want * 1.0001 + 1e-4
    assert torch.allclose(out, want, rtol=1e-5, atol=1e-5)  # the replays computed as plain


def _graph_area_bytes(g) -> torch.Tensor:
    """A copy of the records a graph's kernels write into its own areas (one device)."""
    ((replay, base),) = g._sm_profiler_areas.values()
    first, span = replay[0], replay[1]
    nbytes = span * sm_profiler.wire.format.AUTO_RECORD_BYTES
    out = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
    binding.copy_device(
        out.data_ptr(),
        base + first * sm_profiler.wire.format.AUTO_RECORD_BYTES,
        nbytes,
        torch.cuda.current_stream().cuda_stream,
    )
    torch.cuda.synchronize()
    return out


def _zero_graph_areas(g) -> None:
    ((replay, base),) = g._sm_profiler_areas.values()
    n = sm_profiler.wire.format.AUTO_RECORD_BYTES
    zero = torch.zeros(replay[1] * n, dtype=torch.uint8, device="cuda")
    binding.copy_device(
        base + replay[0] * n, zero.data_ptr(), zero.numel(), torch.cuda.current_stream().cuda_stream
    )
    torch.cuda.synchronize()


def test_a_graph_replayed_outside_active_steps_writes_nothing():
    n = 1 << 18
    x, y, out = (torch.rand(n, device="cuda") for _ in range(3))
    sched = sm_profiler.schedule(wait=1, active=1, repeat=3)  # steps 1, 3, 5 recorded
    with sm_profiler.auto(schedule=sched) as prof:
        g = _axpy_graph(n, x, y, out)  # step 0 (off): the eager launch records nothing
        switch = g._sm_profiler_switch
        assert switch is not None and switch.on  # captured writing its records
        prof.step()
        written = []
        for _ in range(1, 6):
            _zero_graph_areas(g)
            g.replay()
            written.append(bool(_graph_area_bytes(g).any()))
            prof.step()
    # Only the recorded replays wrote. Captured writing, the graph was switched at each edge
    # after: off at steps 2 and 4, on at 3 and 5.
    assert written == [True, False, True, False, True]
    assert switch.updates == 4 and switch.on
    trace = prof.decode()
    launches = _launches(trace, "axpy_kernel")
    assert len(launches) == 3  # the replays of steps 1, 3 and 5, each whole
    for c in launches:
        _check_launch(trace, c, (n // 1024, 1, 1))
    assert sorted(int(k.metadata["step"]) for k in trace.kernels) == [1, 3, 5]
    g.replay()  # after the region: switched off, writes nothing
    _zero_graph_areas(g)
    g.replay()
    assert not _graph_area_bytes(g).any() and not switch.on
    want = 3.0 * x + y
    for _ in range(8):
        want = want * 1.0001 + 1e-4
    assert torch.allclose(out, want, rtol=1e-5, atol=1e-5)  # switched or not: computed as plain


def test_an_off_launch_and_an_off_graph_replay_run_the_plain_binary():
    """Issue 43, off means plain: a launch outside the schedule's active steps runs the
    kernel's plain binary (the function Triton's launcher launches), a recorded one the
    instrumented binary; a graph's off clone, which an off replay runs, launches the plain
    binaries (read back through the driver); outputs as plain, records only where recorded."""
    import ctypes

    from sm_profiler.auto_mode import graph_switch

    n = 1 << 18
    x, y, out = (torch.rand(n, device="cuda") for _ in range(3))
    grid = (n // 1024,)
    seen = []
    with sm_profiler.auto(schedule="1-1") as prof:
        k = axpy_kernel[grid](x, y, out, n, 3.0, BLOCK=1024)  # step 0: loads, records nothing
        instr = k.function
        plain = binding.STATE.plain[instr]
        assert plain not in (0, instr)
        launcher = k.run
        launch = launcher.launch
        launcher.launch = lambda *a: (seen.append(a[4]), launch(*a))[1]
        axpy_kernel[grid](x, y, out, n, 3.0, BLOCK=1024)  # step 0: off
        prof.step()
        axpy_kernel[grid](x, y, out, n, 3.0, BLOCK=1024)  # step 1: recorded
        prof.step()
        axpy_kernel[grid](x, y, out, n, 3.0, BLOCK=1024)  # step 2: off
        launcher.launch = launch
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            axpy_kernel[grid](x, y, out, n, 3.0, BLOCK=1024)
        switch = g._sm_profiler_switch
        _zero_graph_areas(g)
        g.replay()  # step 2: off, from the off clone
        torch.cuda.synchronize()
        assert not switch.on and not _graph_area_bytes(g).any()
    assert seen == [plain, instr, plain]
    # The off clone's kernel nodes launch the plain binaries, through the driver's eyes.
    cuda = binding.libcuda()
    funcs = {True: [], False: []}
    for on in (True, False):
        for node in graph_switch._kernel_nodes(switch.graphs[on]):
            params = graph_switch.KernelNodeParams()
            rc = cuda.cuGraphKernelNodeGetParams_v2(ctypes.c_void_p(node), ctypes.byref(params))
            assert rc == 0
            funcs[on].append(params.func)
    assert instr in funcs[True] and plain not in funcs[True]
    assert plain in funcs[False] and instr not in funcs[False]
    trace = prof.decode()
    launches = _launches(trace, "axpy_kernel")
    assert len(launches) == 1 and int(trace.kernels[launches[0]].metadata["step"]) == 1
    assert torch.equal(out, axpy_plain(x, y, n))  # bit for bit as the plain kernel computes


def test_an_off_graph_replay_runs_no_kernel_of_ours():
    """Issue 43: an off replay of a staged graph runs the graph's own kernels and nothing else
    (its staging kernels disabled, as CUPTI sees the replay); a recorded replay runs them."""
    from torch.profiler import ProfilerActivity, profile

    n = 1 << 18
    x, y, out = (torch.rand(n, device="cuda") for _ in range(3))

    def kernels_of_one_replay(g) -> list[str]:
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as p:
            g.replay()
            torch.cuda.synchronize()
        return sorted(
            e.name
            for e in p.events()
            if e.device_type == torch.autograd.DeviceType.CUDA and "Memcpy" not in e.name
        )

    with sm_profiler.auto(schedule="1-1") as prof:
        g = _axpy_graph(n, x, y, out)  # step 0
        assert g._sm_profiler_stage is not None and len(g._sm_profiler_switch.nodes) == 2
        off0 = kernels_of_one_replay(g)
        prof.step()
        on1 = kernels_of_one_replay(g)
        prof.step()
        off2 = kernels_of_one_replay(g)
    assert off0 == off2 == ["axpy_kernel"]
    assert on1 == ["axpy_kernel", "sm_profiler_auto_bump", "sm_profiler_auto_stage"]
    trace = prof.decode()
    launches = _launches(trace, "axpy_kernel")
    assert len(launches) == 1 and int(trace.kernels[launches[0]].metadata["step"]) == 1
    _check_launch(trace, launches[0], (n // 1024, 1, 1))


def axpy_plain(x, y, n):
    """axpy_kernel's output compiled and run without auto mode."""
    out = torch.empty_like(x)
    axpy_kernel[(n // 1024,)](x, y, out, n, 3.0, BLOCK=1024)
    return out


def test_staged_graph_replays_each_recorded_once_and_whole(monkeypatch):
    """A graph's recorded replays staged on the device, K = 3 at a time: over two active windows
    (steps 1-4 and 6-9), one replay on another stream right after a copy-out, and a region end
    with replays still staged, every recorded replay is kept once, whole, in order, with its step."""
    from sm_profiler.auto_mode import graph_stage

    monkeypatch.setattr(graph_stage, "STAGE_REPLAYS", 3)
    n = 1 << 18
    x, y, out = (torch.rand(n, device="cuda") for _ in range(3))
    side = torch.cuda.Stream()
    with sm_profiler.auto(schedule=sm_profiler.schedule(wait=1, active=4, repeat=2)) as prof:
        g = _axpy_graph(n, x, y, out)  # step 0: off
        assert g._sm_profiler_stage is not None and g._sm_profiler_stage.k == 3
        prof.step()
        for i in range(1, 10):
            if i == 8:  # the first replay after the copy-out of steps 4, 6 and 7
                assert g._sm_profiler_stage.copied_on is not None
                side.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(side):
                    g.replay()
                torch.cuda.current_stream().wait_stream(side)
            else:
                g.replay()
            prof.step()
        assert g._sm_profiler_stage.held  # step 9's replay, staged: copied out at the end
    trace = prof.decode()
    launches = _launches(trace, "axpy_kernel")
    assert sorted(int(trace.kernels[c].metadata["step"]) for c in launches) == [
        1, 2, 3, 4, 6, 7, 8, 9
    ]  # fmt: skip
    spans = sorted(_check_launch(trace, c, (n // 1024, 1, 1)) for c in launches)
    for (_, e0), (s1, _) in zip(spans, spans[1:], strict=False):
        assert e0 <= s1  # eight distinct replays, one after another: none kept twice
    want = 3.0 * x + y
    for _ in range(8):
        want = want * 1.0001 + 1e-4
    assert torch.allclose(out, want, rtol=1e-5, atol=1e-5)


def test_limit_and_ring_keep_whole_launches_and_count_drops_exactly():
    n = 1 << 16
    x, y, out = (torch.rand(n, device="cuda") for _ in range(3))
    kept = []
    for ring in (False, True):
        with sm_profiler.auto(capacity=100, ring=ring) as prof:  # room for one launch of 64
            for _ in range(3):
                axpy_kernel[(n // 1024,)](x, y, out, n, 1.0, BLOCK=1024)  # 64 programs each
        rows, counts = prof.records()
        assert counts["capacity"] == 100
        assert counts["claimed"] == 192 and len(rows["sm"]) == 64 == counts["kept"]
        assert counts["dropped"] == 128
        trace = prof.decode()
        assert len(trace.events["kind"]) == 64 and trace.dropped_total == 128
        assert trace.kernels[0].metadata["auto_session"]["dropped"] == 128
        (launch,) = _launches(trace, "axpy_kernel")
        _check_launch(trace, launch, (64, 1, 1))  # whole: every program once
        kept.append(int(trace.events["start_ns"].min()))
    # Limit mode kept the first launch; ring mode the last (both regions ran 3 launches).
    assert kept[0] < kept[1]


def test_a_limit_buffer_keeps_the_first_whole_launches_that_fit():
    n = 1 << 22
    x, y, out = (torch.rand(n, device="cuda") for _ in range(3))
    grid = n // 256  # 16,384 programs a launch
    capacity = 3 * grid + 100
    with sm_profiler.auto(capacity=capacity) as prof:
        for _ in range(4):
            axpy_kernel[(grid,)](x, y, out, n, 1.0, BLOCK=256)
    rows, counts = prof.records()
    assert counts["claimed"] == 4 * grid
    assert counts["kept"] == len(rows["sm"]) == 3 * grid
    assert counts["dropped"] == grid
    assert np.bincount(rows["x"], minlength=grid).tolist() == [3] * grid
    assert len(np.unique(rows["sm"])) == _sm_count()  # the programs ran on every SM
    text = sm_profiler.report.auto_report.format_report(prof.decode(), width=100)
    assert f"kept the first {3 * grid:,} of capacity {capacity:,}" in " ".join(text.split())


def test_every_gpu_of_a_process_is_recorded_each_on_its_buffer():
    if torch.cuda.device_count() < 2:
        pytest.skip("needs 2 GPUs")
    n = 1 << 18
    with sm_profiler.auto() as prof:
        for dev in (0, 1):
            with torch.cuda.device(dev):
                x, y, out = (torch.rand(n, device=f"cuda:{dev}") for _ in range(3))
                axpy_kernel[(n // 1024,)](x, y, out, n, 1.0, BLOCK=1024)
        torch.cuda.synchronize(0)
        torch.cuda.synchronize(1)
    table = prof.table()
    assert sorted(int(s["gpu"]) for s in table.sessions) == [0, 1]
    assert sorted(table.launches["gpu"].tolist()) == [0, 1]
    trace = prof.decode()
    for c in range(2):
        _check_launch(trace, c, (n // 1024, 1, 1))
        assert trace.kernels[c].metadata["device"] == f"cuda:{trace.kernels[c].metadata['gpu']}"
    # device= restricts the region to one GPU: the other records nothing.
    with sm_profiler.auto(device=1) as prof:
        for dev in (0, 1):
            with torch.cuda.device(dev):
                x, y, out = (torch.rand(n, device=f"cuda:{dev}") for _ in range(3))
                axpy_kernel[(n // 1024,)](x, y, out, n, 1.0, BLOCK=1024)
    assert prof.table().launches["gpu"].tolist() == [1]


def test_per_warp_level_records_every_warp():
    n = 1 << 16
    x, y, out = (torch.rand(n, device="cuda") for _ in range(3))
    with sm_profiler.auto(level="warp") as prof:
        axpy_kernel[(n // 1024,)](x, y, out, n, 1.0, BLOCK=1024, num_warps=8)
    trace = prof.decode()
    (c,) = _launches(trace, "axpy_kernel")
    assert trace.kernels[c].num_groups == 8
    _check_launch(trace, c, (64, 1, 1))
    lanes = trace.lanes
    # The warps of one program ran on one SM.
    sm = lanes["sm"].reshape(64, 8)
    assert (sm == sm[:, :1]).all()


def test_torch_compile_model_every_kernel_and_bit_identical():
    torch.manual_seed(0)
    model = torch.nn.Sequential(Block(256), Block(256)).cuda()
    x = torch.randn(8, 128, 256, device="cuda")
    torch._dynamo.reset()
    plain = train_step(torch.compile(model), x)
    torch._dynamo.reset()
    with sm_profiler.auto() as prof:
        compiled = torch.compile(model)
        got = train_step(compiled, x)
        got2 = train_step(compiled, x)
    for a, b, c in zip(plain, got, got2, strict=True):
        assert torch.equal(a, b) and torch.equal(a, c)
    assert not binding.STATE.plain_loaded, binding.STATE.plain_loaded
    trace = prof.decode()
    names = {k.name for k in trace.kernels}
    assert len(names) >= 4 and all(n.startswith("triton_") for n in names), names
    for c in range(len(trace.kernels)):
        _check_launch(trace, c, trace.kernels[c].metadata["grid"])
    # Two steps: every kernel launched an even number of times (once per step at least).
    from collections import Counter

    counts = Counter(k.name for k in trace.kernels)
    assert all(v % 2 == 0 for v in counts.values()), counts
    origins = [k.metadata.get("origins", "") for k in trace.kernels]
    assert any("aten" in o.lower() or "Source Nodes" in o for o in origins), origins[:3]
    text = sm_profiler.report.auto_report.format_report(trace, width=80)
    print(text)
    assert all(len(line) <= 80 for line in text.splitlines())
    assert "triton_" in text


def test_records_lie_within_cupti_kernel_spans(tmp_path):
    n = 1 << 20
    x, y, out = (torch.rand(n, device="cuda") for _ in range(3))
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as tp:
        with sm_profiler.auto() as prof:
            for _ in range(3):
                axpy_kernel[(n // 1024,)](x, y, out, n, 1.0, BLOCK=1024)
    info = sm_profiler.merge_torch_trace(tp, prof.captures(), str(tmp_path / "merged.json"))
    (err,) = info["error"].values()
    print(info)
    # Our first/last program stamps of each launch sit at CUPTI's kernel start/end.
    assert err["matched"] == 3 and err["max_abs_ns"] < 5_000, info


def test_gluon_warp_specialized_kernel_every_warp_of_every_partition():
    pytest.importorskip("triton.experimental.gluon")
    if torch.cuda.get_device_capability()[0] < 9:
        pytest.skip("the Gluon kernels here need sm_90+")
    import gluon_kernels as G

    grid, iters = 64, 200
    with sm_profiler.auto(level="warp") as prof:
        out = torch.zeros(2 * grid, device="cuda")
        G.plain_ws_loop_kernel[(grid,)](out, iters, out, PROFILE=False, WORKER_WARPS=2, num_warps=4)
    trace = prof.decode()
    (c,) = _launches(trace, "plain_ws_loop_kernel")
    k = trace.kernels[c]
    lanes = trace.lanes
    m = lanes["capture"] == c
    ran = lanes["initialized"][m].reshape(grid, k.num_groups)
    # Every program: the default partition's 4 warps and the worker's 2 at least (Triton may
    # add warps of its own); the same warps in each program, all on one SM.
    assert (ran == ran[:1]).all() and ran[0].sum() >= 6, ran[0]
    sm = lanes["sm"][m].reshape(grid, k.num_groups)
    assert all((row[r] == row[r][0]).all() for row, r in zip(sm, ran, strict=True))
    e = trace.events["capture"] == c
    assert int(e.sum()) == int(ran.sum())
    assert k.group_names[0] == "default · warp 0" and k.group_names[4] == "worker 0 · warp 4"


def test_autotune_benchmark_launches_are_left_out_and_the_runs_recorded():
    import auto_kernels as K

    n = 1 << 20
    x = torch.ones(n, device="cuda")
    with sm_profiler.auto() as prof:
        prof.set_tag(7)  # tags pass through: the two real runs carry it
        for _ in range(2):
            K.autotuned_scale[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, n)
    assert binding.STATE.pauses >= 1 and "benchmark runs recorded nothing" in prof.notes_info
    trace = prof.decode()
    names = [k.name for k in trace.kernels]
    assert names == ["autotuned_scale", "autotuned_scale"], names  # only the runs, not the bench
    k = trace.kernels[0]
    block = 1024 if k.metadata["num_warps"] == 4 else 256
    for c in range(2):
        _check_launch(trace, c, (triton.cdiv(n, block), 1, 1))
    assert set(prof.table().launches["tag"].tolist()) == {7}


def test_manual_ops_and_auto_mode_record_together():
    import triton_kernels as T

    n, block = 1 << 16, 1024
    x, y, out = (torch.rand(n, device="cuda") for _ in range(3))
    manual = sm_profiler.SmProfiler(n // block, 1, 8)
    manual.register_event(0, "load")
    manual.register_event(1, "store")
    with sm_profiler.auto() as prof:
        T.add_kernel[(n // block,)](x, y, out, n, manual.get_buffer(), BLOCK=block, PROFILE=True)
    assert torch.equal(out, x + y)
    trace = prof.decode()
    (c,) = _launches(trace, "add_kernel")
    s, e = _check_launch(trace, c, (n // block, 1, 1))
    m = manual.decode()
    assert len(m.ranges["kind"]) == 2 * (n // block)
    # The manual ranges sit inside the programs' auto records.
    assert m.events["start_ns"].min() >= s and m.events["end_ns"].max() <= e


def test_reduce_overhead_cuda_graph_replays_recorded():
    torch.manual_seed(0)
    model = Block(256).cuda()
    x = torch.randn(4, 64, 256, device="cuda")
    torch._dynamo.reset()
    with torch.no_grad(), sm_profiler.auto() as prof:
        f = torch.compile(model, mode="reduce-overhead")
        for _ in range(6):
            y = f(x)
        torch.cuda.synchronize()
    assert torch.allclose(y, model(x), atol=1e-4, rtol=1e-4)
    trace = prof.decode()
    from collections import Counter

    counts = Counter(k.name for k in trace.kernels)
    assert counts and min(counts.values()) >= 6, counts  # warm-up runs and every replay
    for c in range(len(trace.kernels)):
        _check_launch(trace, c, trace.kernels[c].metadata["grid"])


def test_sm_profiler_run_profiles_an_unchanged_script(tmp_path):
    import subprocess
    import sys

    script = tmp_path / "train.py"
    script.write_text(
        "import sys, torch\n"
        "m = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.GELU(), torch.nn.LayerNorm(256)).cuda()\n"
        "f = torch.compile(m)\n"
        "for _ in range(int(sys.argv[1])):\n"
        "    f(torch.randn(32, 64, device='cuda')).sum().backward()\n"
    )
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "sm_profiler",
            "run",
            "--out",
            str(tmp_path / "o"),
            "--width",
            "80",
            "--",
            str(script),
            "3",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert "sm_profiler auto:" in out.stdout and "triton_" in out.stdout
    for name in ("auto.npz", "auto.perfetto-trace", "auto_stats.txt"):
        assert (tmp_path / "o" / name).stat().st_size > 0
    # Again: Triton's and Inductor's caches now hold the instrumented build; it is served, bound
    # and records the same kernels.
    again = subprocess.run(
        [
            sys.executable,
            "-m",
            "sm_profiler",
            "run",
            "--out",
            str(tmp_path / "o2"),
            "--width",
            "80",
            "--",
            str(script),
            "3",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert again.returncode == 0, again.stderr[-3000:]
    kernels = [
        set(ln.split()[0] for ln in o.stdout.splitlines() if ln.startswith("triton_"))
        for o in (out, again)
    ]
    assert kernels[0] and kernels[0] == kernels[1], kernels
    stats = subprocess.run(
        [
            sys.executable,
            "-m",
            "sm_profiler",
            "stats",
            str(tmp_path / "o" / "auto.npz"),
            "--width",
            "80",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert stats.returncode == 0 and "sm_profiler auto:" in stats.stdout, stats.stderr[-2000:]


def test_max_autotune_benchmarked_choices_are_left_out():
    torch._dynamo.reset()
    a = torch.randn(512, 512, device="cuda", dtype=torch.float16)
    b = torch.randn(512, 512, device="cuda", dtype=torch.float16)
    from torch._inductor import config as inductor_config

    # A compile or choice timings cached on disk by an earlier run would leave nothing to benchmark.
    with inductor_config.patch(force_disable_caches=True), sm_profiler.auto() as prof:
        f = torch.compile(lambda a, b: torch.relu(a @ b), mode="max-autotune-no-cudagraphs")
        y = f(a, b)
        y2 = f(a, b)
    assert torch.equal(y, y2)
    assert binding.STATE.pauses >= 1
    trace = prof.decode()
    from collections import Counter

    counts = Counter(k.name for k in trace.kernels)
    print(counts)
    # Each kernel of the compiled function ran twice (the two calls); no benchmark run is left.
    assert counts and set(counts.values()) == {2}, counts


def test_compute_sanitizer_memcheck_is_clean():
    import json
    import os
    import shutil
    import subprocess
    import sys

    sanitizer = shutil.which("compute-sanitizer")
    if sanitizer is None:
        pytest.skip("needs compute-sanitizer")
    script = os.path.join(SUPPORT, "auto_workload.py")
    r = subprocess.run(
        [sanitizer, "--tool", "memcheck", "--error-exitcode", "7", sys.executable, script],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "ERROR SUMMARY: 0 errors" in r.stdout
    res = json.loads(r.stdout[r.stdout.index("{") : r.stdout.rindex("}") + 1])
    assert res["limit"]["dropped"] > 0 and res["ring"]["dropped"] > 0


@pytest.mark.parametrize("static_launcher", [True, False])
def test_inductor_either_launcher_every_kernel_bound(static_launcher):
    """Inductor's static launcher loads cubins itself (no Triton hook); Triton's launcher calls
    kernel_load_end_hook. Either way every kernel is bound and records every program."""
    from torch._inductor import config as inductor_config

    torch._dynamo.reset()
    # A width of each case's own: Inductor keeps the kernels it compiled in the process by their
    # source (and on disk), so with one width the second case ran the first case's kernels
    # through the first case's launcher (seen with --shuffle).
    d = 128 if static_launcher else 192
    model = Block(d).cuda()
    x = torch.randn(4, 32, d, device="cuda")
    with inductor_config.patch(use_static_cuda_launcher=static_launcher):
        with sm_profiler.auto() as prof:
            train_step(torch.compile(model), x)
    assert not binding.STATE.plain_loaded
    # The static launcher kept its instrumented kernels (it passes their areas itself).
    assert (binding.STATE.static_loaded > 0) == static_launcher
    # Either launcher loaded each instrumented kernel's plain binary (off launches run it).
    assert len(binding.STATE.plain) >= len(binding.STATE.by_module) > 0
    trace = prof.decode()
    assert len({k.name for k in trace.kernels}) >= 4
    for c in range(len(trace.kernels)):
        _check_launch(trace, c, trace.kernels[c].metadata["grid"])


def test_a_schedule_records_exactly_its_active_steps():
    n = 1 << 18
    x, y, out = (torch.rand(n, device="cuda") for _ in range(3))
    buf = torch.empty(30 * 128, device="cuda")
    sched = sm_profiler.schedule(wait=1, active=2, repeat=2, skip_first=2)
    with sm_profiler.auto(schedule=sched) as prof:
        for _ in range(12):
            axpy_kernel[(n // 1024,)](x, y, out, n, 1.0, BLOCK=1024)
            grid3d_kernel[(5, 3, 2)](buf, BLOCK=128)
            prof.step()
    table = prof.table()
    L = table.launches
    # skip 2 steps, then (1 off, 2 on) twice: steps 3, 4, 6 and 7.
    assert sorted(set(L["step"].tolist())) == [3, 4, 6, 7]
    per_step = Counter(
        (int(s), table.kernel_names()[int(k)]) for s, k in zip(L["step"], L["kernel"], strict=True)
    )
    assert all(v == 1 for v in per_step.values()) and len(per_step) == 8
    # Steps off recorded nothing, not even a claim: the counters hold the active steps alone.
    counts = table.counts()
    assert counts["claimed"] == counts["kept"] == 4 * (n // 1024 + 30) == table.num_rows
    trace = prof.decode()
    for c in range(len(trace.kernels)):
        _check_launch(trace, c, trace.kernels[c].metadata["grid"])
    text = sm_profiler.report.auto_report.format_report(trace, width=100)
    assert "steps: 4 recorded (3-4, 6-7)" in " ".join(text.split())


@pytest.mark.filterwarnings("ignore:Profiler won't be using warmup")
def test_a_schedule_records_the_launches_cupti_saw_in_its_active_steps():
    """A torch.compile'd training loop under a schedule and torch.profiler together: in each
    active step the launches recorded equal CUPTI's rows of the instrumented kernels in that step,
    kernel by kernel; the steps off ran those kernels too (CUPTI) and recorded none."""
    from torch.profiler import ProfilerActivity, profile
    from torch.profiler import schedule as torch_schedule

    from sm_profiler.export.merge import kernel_key, read_torch_doc
    from sm_profiler.report.coverage import instrumented_mask, kernel_table, step_of, step_windows

    torch.manual_seed(0)
    model = torch.nn.Sequential(Block(256), Block(256)).cuda()
    x = torch.randn(8, 128, 256, device="cuda")
    torch._dynamo.reset()
    warm, profiled = 2, 8
    # auto's steps: 0..1 warm-up, then profiled step i is auto step 2 + i. skip_first=3, then
    # (1 off, 2 on) twice: auto steps 4, 5, 7, 8 = profiled steps 2, 3, 5, 6.
    sched = sm_profiler.schedule(wait=1, active=2, repeat=2, skip_first=3)
    with sm_profiler.auto(schedule=sched) as prof:
        compiled = torch.compile(model)
        for _ in range(warm):
            train_step(compiled, x)
            prof.step()
        torch.cuda.synchronize()
        acts = [ProfilerActivity.CPU, ProfilerActivity.CUDA]
        with profile(
            activities=acts, schedule=torch_schedule(wait=0, warmup=0, active=profiled, repeat=1)
        ) as tp:
            for _ in range(profiled):
                train_step(compiled, x)
                prof.step()
                tp.step()
            torch.cuda.synchronize()
    table = prof.table()
    names = table.kernel_names()
    doc = read_torch_doc(tp)
    rows = kernel_table(doc)
    windows = step_windows(doc)
    assert len(windows["step"]) == profiled, windows
    seen = instrumented_mask(rows, names)
    step_i = step_of(rows, windows)
    cupti = Counter(
        (int(windows["step"][i]), rows["names"][n])
        for i, n, s in zip(step_i, rows["name"], seen, strict=True)
        if s and i >= 0
    )
    keys = {k: None for k in rows["names"]}
    L = table.launches
    ours = Counter(
        (int(s) - warm, kernel_key(names[int(k)], keys))
        for s, k in zip(L["step"], L["kernel"], strict=True)
    )
    active = [2, 3, 5, 6]
    assert sorted({s for s, _ in ours}) == active, ours
    assert None not in {k for _, k in ours}  # every kernel recorded is one CUPTI saw
    for s in range(profiled):
        want = {k: v for (t, k), v in cupti.items() if t == s}
        got = {k: v for (t, k), v in ours.items() if t == s}
        assert sum(want.values()) >= 4, (s, want)  # the step ran instrumented kernels
        assert got == (want if s in active else {}), (s, got, want)
    counts = table.counts()
    assert counts["claimed"] == counts["kept"] == table.num_rows


def test_a_long_run_keeps_host_and_gpu_memory_flat():
    def rss_bytes() -> int:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * 4096

    n = 1 << 16
    x, y, out = (torch.rand(n, device="cuda") for _ in range(3))
    sched = sm_profiler.schedule(wait=300, active=2, repeat=3, skip_first=50)
    with sm_profiler.auto(schedule=sched) as prof:
        for step in range(1200):
            axpy_kernel[(n // 1024,)](x, y, out, n, 1.0, BLOCK=1024)
            prof.step()
            if step == 200:
                torch.cuda.synchronize()
                rss0, gpu0 = rss_bytes(), torch.cuda.memory_allocated()
        torch.cuda.synchronize()
        rss1, gpu1 = rss_bytes(), torch.cuda.memory_allocated()
    assert gpu1 == gpu0
    assert rss1 - rss0 < 16 << 20, (rss0, rss1)
    assert sorted(set(prof.table().launches["step"].tolist())) == [
        50 + 300 + k + 302 * r for r in range(3) for k in (0, 1)
    ]


def test_via_triton_records_the_matmuls_and_attention_as_triton(tmp_path):
    """auto(via_triton=True): a Linear and causal SDPA compiled in the region run as Inductor's
    Triton matmul template and FlexAttention, both recorded (every program), with outputs close
    to cuBLAS/cuDNN's (bf16: within 3e-2 of the output's scale); a torch.profiler trace of the
    same steps then says every kernel of the step but the block mask's is one auto mode sees."""
    from torch.profiler import ProfilerActivity, profile

    torch.manual_seed(0)
    proj = torch.nn.Linear(256, 3 * 256, bias=False, device="cuda", dtype=torch.bfloat16)
    x = torch.randn(4, 512, 256, device="cuda", dtype=torch.bfloat16)

    def attend(x):
        q, k, v = proj(x).view(4, 512, 3, 4, 64).permute(2, 0, 3, 1, 4)
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)

    torch._dynamo.reset()
    with torch.no_grad():
        want = torch.compile(attend)(x)
    torch._dynamo.reset()
    sdpa = torch.nn.functional.scaled_dot_product_attention
    with sm_profiler.auto(via_triton=True) as prof, torch.no_grad():
        compiled = torch.compile(attend)
        got = compiled(x)
        with profile(activities=[ProfilerActivity.CUDA]) as tp:
            compiled(x)
            torch.cuda.synchronize()
    assert torch.nn.functional.scaled_dot_product_attention is sdpa  # undone at the end
    scale = want.float().abs().max().item()
    assert (got.float() - want.float()).abs().max().item() < 3e-2 * scale
    trace = prof.decode()
    names = {k.name for k in trace.kernels}
    print(names)
    assert any("flex_attention" in n for n in names), names
    assert any(
        n.startswith(("triton_tem_fused_mm", "triton_mm", "triton_tem_fused_")) and "flex" not in n
        for n in names
    ), names
    for c in range(len(trace.kernels)):
        _check_launch(trace, c, trace.kernels[c].metadata["grid"])
    cov = sm_profiler.torch_coverage(tp, prof.table())
    (dev,) = cov["devices"]
    print(cov)
    assert dev["share_of_busy"] > 0.9, dev
