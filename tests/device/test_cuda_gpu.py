"""CUDA C++ kernels on a real GPU, loaded three ways: torch load_inline, CuPy RawKernel (NVRTC)
and a plain nvcc program writing its capture through sm_profiler_host.h. Decoded content, not
'it ran': lanes, SM ids, ordering, exact drops, nothing written outside the buffer.

The kernel is tests/cuda/profiled_kernel.cuh: per lane an instant, `iters` RAII ranges, and a
tail range ended with end_after, so 1 + 2 * iters + 2 records.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess

import numpy as np
import pytest
from repo_paths import CUDA_SOURCES, ROOT

torch = pytest.importorskip("torch")
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]

import sm_profiler  # noqa: E402
from sm_profiler.trace.model import INSTANT, RANGE  # noqa: E402
from sm_profiler.wire import format as fmt  # noqa: E402

HERE = CUDA_SOURCES
EVT_ITER, EVT_TAIL, EVT_START = 1, 2, 3
EVENTS = {EVT_ITER: "iter", EVT_TAIL: "tail", EVT_START: "start"}
GUARD_WORDS = 64  # zeros after the buffer that no lane may touch

# name: (mode, iters, capacity, num_blocks (None: the grid's), num_groups, grid, block)
CASES = {
    "per_block_3d": (0, 6, 16, None, 1, (5, 3, 2), (32, 4, 2)),
    "per_warp_2d": (1, 4, 16, None, 4, (7, 2, 1), (64, 2, 1)),
    "leader_groups": (2, 5, 16, None, 2, (4, 2, 1), (128, 1, 1)),
    "exact_drops": (0, 6, 5, None, 1, (9, 1, 1), (96, 1, 1)),
    "out_of_shape": (1, 3, 16, 6, 2, (4, 2, 1), (128, 1, 1)),
}


def _blocks(grid) -> int:
    return grid[0] * grid[1] * grid[2]


def _warps(block) -> int:
    return -(-(block[0] * block[1] * block[2]) // 32)


def expected_lanes(mode, num_blocks, num_groups, grid, block) -> set[tuple[int, int]]:
    groups = {0: 1, 1: _warps(block), 2: 2}[mode]
    return {
        (b, g)
        for b in range(min(_blocks(grid), num_blocks))
        for g in range(min(groups, num_groups))
    }


def check_trace(t, case, sm_count):
    mode, iters, capacity, num_blocks, num_groups, grid, block = case
    num_blocks = num_blocks or _blocks(grid)
    lanes = t.lanes
    init = lanes["initialized"]
    got = set(zip(lanes["block"][init].tolist(), lanes["group"][init].tolist(), strict=True))
    want = expected_lanes(mode, num_blocks, num_groups, grid, block)
    assert got == want, (
        f"initialised lanes {sorted(got - want)} extra, {sorted(want - got)} missing"
    )
    sm = lanes["sm"][init]
    assert ((sm >= 0) & (sm < sm_count)).all(), f"SM ids {sorted(set(sm.tolist()))} of {sm_count}"
    attempted = 1 + 2 * iters + 2
    assert (lanes["attempted"][init] == attempted).all(), lanes["attempted"][init]
    assert (lanes["dropped"][init] == max(0, attempted - capacity)).all(), lanes["dropped"][init]
    ev = t.events
    for lane in np.flatnonzero(init):
        m = ev["lane"] == lanes["lane"][lane]
        start, end, kind, evt = ev["start_ns"][m], ev["end_ns"][m], ev["kind"][m], ev["event"][m]
        assert (end >= start).all()
        kept = min(attempted, capacity)
        # records are kept in the order they were made: the instant first, then the iterations
        inst = (kind == INSTANT) & (evt == EVT_START)
        assert inst.sum() == 1 and (start >= start[inst][0]).all()
        assert (lanes["anchor_ns"][lane] <= start).all()
        iters_start = np.sort(start[(evt == EVT_ITER) & (kind == RANGE)])
        iters_end = np.sort(end[(evt == EVT_ITER) & (kind == RANGE)])
        assert (iters_end[:-1] <= iters_start[1:]).all(), "iterations overlap"
        n_iter = len(iters_start)
        assert n_iter == (iters if kept == attempted else (kept - 1) // 2), (n_iter, kept)
        if kept == attempted:
            tail = (evt == EVT_TAIL) & (kind == RANGE)
            assert tail.sum() == 1 and start[tail][0] >= iters_end.max()
            assert len(t.unmatched["lane"]) == 0


# ---------------------------------------------------------------------------------------------
# The three loaders
# ---------------------------------------------------------------------------------------------


def _profiler(case):
    mode, iters, capacity, num_blocks, num_groups, grid, block = case
    prof = sm_profiler.SmProfiler(
        num_blocks or _blocks(grid), num_groups, capacity, kernel_name="smp_test_kernel"
    )
    for k, v in EVENTS.items():
        prof.register_event(k, v)
    return prof


def _guarded(prof):
    """The profiler's buffer, and a copy of it followed by GUARD_WORDS zeros that the kernel
    writes instead."""
    buf = prof.get_buffer()
    big = torch.zeros(buf.numel() + GUARD_WORDS, dtype=torch.int64, device="cuda")
    big[: buf.numel()].copy_(buf)
    return buf, big


@functools.cache
def _torch_ext():
    from torch.utils.cpp_extension import load_inline

    # The .cu file holds only the kernel and a plain launcher (no torch headers: it compiles in
    # seconds); the binding that takes tensors is the C++ source.
    cuda_src = (
        '#include "profiled_kernel.cuh"\n'
        "void launch_raw(float* out, unsigned long long* prof, int iters, int mode,"
        " int gx, int gy, int gz, int bx, int by, int bz) {\n"
        "  smp_test_kernel<<<dim3(gx, gy, gz), dim3(bx, by, bz)>>>(out, prof, iters, mode);\n}\n"
    )
    decl = (
        "void launch_raw(float*, unsigned long long*, int, int, int, int, int, int, int, int);\n"
        "void launch(torch::Tensor out, torch::Tensor prof, int64_t iters, int64_t mode,"
        " int64_t gx, int64_t gy, int64_t gz, int64_t bx, int64_t by, int64_t bz) {\n"
        "  launch_raw(out.data_ptr<float>(), (unsigned long long*)prof.data_ptr<int64_t>(),"
        " iters, mode, gx, gy, gz, bx, by, bz);\n}\n"
    )
    return load_inline(
        name="sm_profiler_test_kernel",
        cpp_sources=decl,
        cuda_sources=cuda_src,
        functions=["launch"],
        extra_include_paths=[sm_profiler.cuda_include_dir(), HERE],
    )


def run_torch(case):
    mode, iters, _, _, _, grid, block = case
    prof = _profiler(case)
    buf, big = _guarded(prof)
    out = torch.zeros(_blocks(grid) * block[0] * block[1] * block[2], device="cuda")
    _torch_ext().launch(out, big, iters, mode, *grid, *block)
    torch.cuda.synchronize()
    return prof, buf, big


@functools.cache
def _cupy_kernel():
    cupy = pytest.importorskip("cupy")
    with open(os.path.join(HERE, "profiled_kernel.cuh")) as f:
        src = f.read()
    return cupy.RawKernel(
        src, "smp_test_kernel", options=(f"-I{sm_profiler.cuda_include_dir()}", "--std=c++17")
    )


def run_cupy(case):
    cupy = pytest.importorskip("cupy")
    mode, iters, _, _, _, grid, block = case
    prof = _profiler(case)
    buf, big = _guarded(prof)
    out = cupy.zeros(_blocks(grid) * block[0] * block[1] * block[2], dtype=cupy.float32)
    _cupy_kernel()(grid, block, (out, cupy.from_dlpack(big), np.int32(iters), np.int32(mode)))
    cupy.cuda.get_current_stream().synchronize()
    return prof, buf, big


def decode_guarded(prof, buf, big):
    """Copy the lanes back into the profiler's buffer, check the guard, decode."""
    n = buf.numel()
    guard = big[n:].cpu().numpy()
    assert not guard.any(), f"written past the buffer: {np.flatnonzero(guard)}"
    header = big[: fmt.HEADER_WORDS].cpu().numpy().view(np.uint64)
    assert not header[fmt.HDR_CAPACITY_FLAGS + 1 : fmt.HDR_SCRATCH].any()
    buf.copy_(big[:n])
    return prof.decode(), int(header[fmt.HDR_SCRATCH])


@functools.cache
def _nvcc_binary(tmpdir: str) -> str:
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("needs nvcc")
    exe = os.path.join(tmpdir, "gpu_capture")
    subprocess.run(
        [
            nvcc,
            "-std=c++17",
            "-arch=native",
            f"-I{sm_profiler.cuda_include_dir()}",
            f"-I{HERE}",
            os.path.join(HERE, "gpu_capture.cu"),
            "-o",
            exe,
        ],
        check=True,
    )
    return exe


@pytest.fixture(scope="module")
def nvcc_exe(tmp_path_factory):
    return _nvcc_binary(str(tmp_path_factory.mktemp("nvcc")))


def run_nvcc(exe, case, path):
    mode, iters, capacity, num_blocks, num_groups, grid, block = case
    nb = num_blocks or _blocks(grid)
    args = [mode, iters, capacity, nb, num_groups, *grid, *block]
    subprocess.run([exe, str(path), *map(str, args)], check=True)
    return sm_profiler.load(path)


# ---------------------------------------------------------------------------------------------
# Tests
# ---------------------------------------------------------------------------------------------


def _sm_count() -> int:
    return torch.cuda.get_device_properties(0).multi_processor_count


@pytest.mark.parametrize("name", list(CASES))
def test_torch_load_inline_kernel_decodes(name):
    if shutil.which("nvcc") is None:
        pytest.skip("load_inline needs nvcc")
    case = CASES[name]
    t, scratch = decode_guarded(*run_torch(case))
    check_trace(t, case, _sm_count())
    assert (scratch != 0) == (name == "out_of_shape")  # only out-of-shape lanes touch w7


@pytest.mark.parametrize("name", list(CASES))
def test_cupy_rawkernel_nvrtc_kernel_decodes(name):
    case = CASES[name]
    t, scratch = decode_guarded(*run_cupy(case))
    check_trace(t, case, _sm_count())
    assert (scratch != 0) == (name == "out_of_shape")


@pytest.mark.parametrize("name", list(CASES))
def test_nvcc_program_capture_file_decodes(name, nvcc_exe, tmp_path):
    case = CASES[name]
    caps = run_nvcc(nvcc_exe, case, tmp_path / "c.npz")
    assert len(caps) == 1 and caps[0].kernel_name == "smp_test_kernel"
    assert caps[0].metadata["writer"] == "sm_profiler_host.h"
    assert caps[0].metadata["sm_count"] == _sm_count()
    assert caps[0].event_names == EVENTS
    check_trace(sm_profiler.decode(caps), case, _sm_count())


def test_loaders_agree_on_what_they_record(nvcc_exe, tmp_path):
    """The same case through all three paths: the same lanes, counts and event sequence."""
    case = CASES["leader_groups"]
    a, _ = decode_guarded(*run_torch(case)) if shutil.which("nvcc") else (None, 0)
    b, _ = decode_guarded(*run_cupy(case))
    c = sm_profiler.decode(run_nvcc(nvcc_exe, case, tmp_path / "c.npz"))
    for t in (a, c):
        if t is None:
            continue
        np.testing.assert_array_equal(t.lanes["attempted"], b.lanes["attempted"])
        np.testing.assert_array_equal(t.events["event"], b.events["event"])
        np.testing.assert_array_equal(t.events["kind"], b.events["kind"])


def test_compute_sanitizer_memcheck_is_clean(nvcc_exe, tmp_path):
    sanitizer = shutil.which("compute-sanitizer")
    if sanitizer is None:
        pytest.skip("needs compute-sanitizer")
    for name in ("exact_drops", "out_of_shape", "per_block_3d"):
        mode, iters, capacity, num_blocks, num_groups, grid, block = CASES[name]
        args = [mode, iters, capacity, num_blocks or _blocks(grid), num_groups, *grid, *block]
        r = subprocess.run(
            [
                sanitizer,
                "--tool",
                "memcheck",
                "--error-exitcode",
                "7",
                nvcc_exe,
                str(tmp_path / f"{name}.npz"),
                *map(str, args),
            ],
            capture_output=True,
            text=True,
        )
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
        assert "ERROR SUMMARY: 0 errors" in r.stdout


def test_examples_run(tmp_path):
    """The three examples end in a decoded trace with what they claim."""
    import importlib.util

    root = ROOT

    def load(name):
        spec = importlib.util.spec_from_file_location(
            name, os.path.join(root, "examples", name + ".py")
        )
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod

    if shutil.which("nvcc"):
        res = load("cuda_load_inline").main(str(tmp_path / "li"), n=1024)
        t = res["trace"]
        assert t.lanes["initialized"].sum() == (1024 // 32) ** 2
        assert sorted(set(t.events["event"].tolist())) == [0, 1, 2]
        assert os.path.getsize(res["perfetto"]) > 0
    try:
        import cupy  # noqa: F401
    except ImportError:
        return
    res = load("cupy_rawkernel").main(str(tmp_path / "cp"), n=1 << 20)
    t = res["trace"]
    assert t.lanes["initialized"].sum() == res["blocks"] * 8
    assert int(t.lanes["dropped"].sum()) == 0
    chunks = int((t.events["event"] == 0).sum())
    assert chunks == (1 << 20) // 1024  # every chunk recorded exactly once


def test_makefile_example_writes_a_capture_the_cli_reads(tmp_path):
    if shutil.which("nvcc") is None or shutil.which("make") is None:
        pytest.skip("needs nvcc and make")
    root = ROOT
    work = tmp_path / "cuda"
    shutil.copytree(os.path.join(root, "examples", "cuda"), work)
    env = dict(os.environ, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run(
        ["make", "run", "PYTHON=" + __import__("sys").executable],
        cwd=work,
        capture_output=True,
        text=True,
        env=env,
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "handoff" in r.stdout and "reduce" in r.stdout
    caps = sm_profiler.load(work / "warp_specialized.npz")
    t = sm_profiler.decode(caps)
    assert t.lanes["initialized"].sum() == 256 * 2 and int(t.lanes["dropped"].sum()) == 0
    loads = (t.events["event"] == 0) & (t.events["group"] == 0)
    assert loads.sum() == 256 * 16
    assert (work / "warp_specialized.perfetto-trace").stat().st_size > 0


def test_launch_slots_give_each_cuda_launch_its_own_capture():
    # Issue 12's slots with a C++ kernel: prof.step() after each launch moves the slot on the
    # device (no sync); the third launch finds no slot and writes nothing.
    mode, iters, capacity, _, num_groups, grid, block = CASES["per_block_3d"]
    prof = sm_profiler.SmProfiler(
        _blocks(grid), num_groups, capacity, slots=2, kernel_name="smp_test_kernel"
    )
    for k, v in EVENTS.items():
        prof.register_event(k, v)
    out = torch.zeros(_blocks(grid) * block[0] * block[1] * block[2], device="cuda")
    for n in range(3):
        _torch_ext().launch(out, prof.get_buffer(), iters + n, mode, *grid, *block)
        prof.step(kernel="smp_test_kernel", grid=grid)
    torch.cuda.synchronize()
    with pytest.warns(UserWarning, match="1 launches found all 2 slots used"):
        caps = prof.captures()
    assert len(caps) == 2 and caps[-1].metadata["launches_without_slot"] == 1
    assert [c.kernel_name for c in caps] == ["smp_test_kernel"] * 2
    for n, cap in enumerate(caps):
        t = sm_profiler.decode(cap)
        check_trace(t, (mode, iters + n, capacity, None, num_groups, grid, block), _sm_count())
    # the two launches ran one after the other, in stream order
    first, second = (sm_profiler.decode(c).lanes["anchor_ns"].max() for c in caps)
    assert first < second


RING_KERNEL = r"""
#include <sm_profiler.cuh>
extern "C" __global__ void ring_k(float* out, unsigned long long* prof, int iters) {
    sm_profiler_lane lane = sm_profiler_init(prof);      // a persistent block: one lane
    sm_profiler_event_instant(lane, 3);
    float acc = threadIdx.x;
    for (int i = 0; i < iters; ++i) {
        sm_profiler_event_start(lane, 1);
        acc = acc * 1.0001f + 1.f;
        if (i % 7 == 0) sm_profiler_event_instant(lane, 2);
        sm_profiler_event_end(lane, 1);
    }
    sm_profiler_flush(lane);
    out[blockIdx.x * blockDim.x + threadIdx.x] = acc;
}
"""


def test_ring_build_keeps_exactly_the_newest_records():
    # Issue 13's ring mode in the CUDA header (-DSM_PROFILER_RING), ~10x capacity per lane.
    cupy = pytest.importorskip("cupy")
    from ring_check import check_ring_capture

    iters, cap, sms = 300, 64, _sm_count()
    seq = [(fmt.KIND_INSTANT, 3)]
    for i in range(iters):
        seq.append((fmt.KIND_BEGIN, 1))
        if i % 7 == 0:
            seq.append((fmt.KIND_INSTANT, 2))
        seq.append((fmt.KIND_END, 1))
    kernel = cupy.RawKernel(
        RING_KERNEL,
        "ring_k",
        options=(f"-I{sm_profiler.cuda_include_dir()}", "--std=c++17", "-DSM_PROFILER_RING"),
    )
    prof = sm_profiler.SmProfiler(sms, 1, cap, ring=True)
    out = cupy.zeros(sms * 128, dtype=cupy.float32)
    kernel((sms,), (128,), (out, cupy.from_dlpack(prof.get_buffer()), np.int32(iters)))
    cupy.cuda.get_current_stream().synchronize()
    check_ring_capture(prof.capture(), seq, list(range(sms)))
