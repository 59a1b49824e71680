"""The Gluon examples (examples/gluon_*.py): they compile on a CPU, and on a GPU their trace says
what the example claims.

CPU: each example's kernel is compiled with triton.compile for its target in a subprocess without
TRITON_INTERPRET (Gluon has no interpreter, and conftest.py switches the interpreter on in this
process when there is no GPU). PROFILE=False must leave no %globaltimer in the PTX; PROFILE=True
must put timer reads in every partition. Partitions are found in the TTGIR, where
`ttg.warp_specialize(...)` holds the default partition's region first, then `partition0(...)`,
`partition1(...)`, ... one region per worker in the order of the warp_specialize list (the PTX
has them too, but as branches on the warp index, without names).

GPU (sm_90 only): the warp-specialized matmul's decoded trace: lanes, SM ids, time order, no
drops, and causality between the partitions (see test_ws_matmul_causality).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

from repo_paths import ROOT  # noqa: E402

EXAMPLES = os.path.join(ROOT, "examples")

# Runs in the subprocess: compile one example for `arch` with PROFILE off and on, print the PTX
# and TTGIR as JSON.
_PROBE = r"""
import importlib.util, json, sys
import triton
sys.path.insert(0, {root!r})
spec = importlib.util.spec_from_file_location("gluon_example", {path!r})
ex = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ex)
res = {{"triton": triton.__version__}}
for profile in (False, True):
    k = ex.compile_for(profile, arch={arch})
    res[str(profile)] = {{"ptx": k.asm["ptx"], "ttgir": k.asm["ttgir"]}}
json.dump(res, sys.stdout)
"""


def _has_gluon() -> bool:
    try:
        return importlib.util.find_spec("triton.experimental.gluon") is not None
    except ImportError:
        return False


needs_gluon = pytest.mark.skipif(not _has_gluon(), reason="needs triton.experimental.gluon")


def _compile_example(name: str, arch: int) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    code = _PROBE.format(root=ROOT, path=os.path.join(EXAMPLES, f"{name}.py"), arch=arch)
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600
    )
    assert out.returncode == 0, out.stderr[-4000:]
    return json.loads(out.stdout)


def partitions(ttgir: str) -> dict[str, str]:
    """{"default": text, "partition0": text, ...}: the regions of the (single) warp_specialize."""
    start = ttgir.index("ttg.warp_specialize(")
    marks = [(m.group(1), m.start()) for m in re.finditer(r"\b(partition\d+)\(", ttgir)]
    marks = [(n, p) for n, p in marks if p > start]
    bounds = [("default", start)] + marks + [("end", len(ttgir))]
    return {n: ttgir[p:q] for (n, p), (_, q) in zip(bounds, bounds[1:], strict=False)}


# -- gluon_ws_matmul: compile (CPU) ------------------------------------------------------------


@pytest.fixture(scope="module")
def ws_matmul_compiled():
    return _compile_example("gluon_ws_matmul", 90)


@needs_gluon
def test_ws_matmul_unprofiled_has_no_timer(ws_matmul_compiled):
    off = ws_matmul_compiled["False"]
    assert "globaltimer" not in off["ptx"]
    assert "globaltimer" not in off["ttgir"]
    assert "wgmma" in off["ptx"] and "cp.async.bulk.tensor" in off["ptx"]


@needs_gluon
def test_ws_matmul_profiled_times_every_partition(ws_matmul_compiled):
    on = ws_matmul_compiled["True"]
    parts = partitions(on["ttgir"])
    # Which region is which, by what it does: the default partition runs the wgmma, the first
    # worker issues the TMA loads, the second the TMA store.
    assert set(parts) == {"default", "partition0", "partition1"}
    assert "ttng.warp_group_dot" in parts["default"]
    assert "ttng.async_tma_copy_global_to_local" in parts["partition0"]
    assert "ttng.async_tma_copy_local_to_global" in parts["partition1"]
    # Timer reads per partition, one per op in the source: init + tile (2) + the partition's
    # ranges and instants: mma wait_full, mma, wait_epilogue (6); producer wait_empty (2) and
    # load (1); epilogue wait_acc and epilogue (4).
    reads = {name: text.count("%globaltimer") for name, text in parts.items()}
    assert reads == {"default": 9, "partition0": 6, "partition1": 7}, reads
    # All of them survive into the PTX (no op was folded away or de-duplicated).
    assert on["ptx"].count("%globaltimer") == sum(reads.values())
    # The profiled kernel keeps the unprofiled one's pipeline.
    off = ws_matmul_compiled["False"]
    for op in ("wgmma.mma_async", "cp.async.bulk.tensor", "mbarrier.try_wait"):
        assert on["ptx"].count(op) == off["ptx"].count(op), op


# -- gluon_blackwell_matmul: compile only (CPU; no sm_100 GPU here) ---------------------------


@pytest.fixture(scope="module")
def bw_matmul_compiled():
    return _compile_example("gluon_blackwell_matmul", 100)


@needs_gluon
def test_blackwell_matmul_compiles(bw_matmul_compiled):
    off, on = bw_matmul_compiled["False"], bw_matmul_compiled["True"]
    assert "globaltimer" not in off["ptx"] and "tcgen05.mma" in off["ptx"]
    parts = partitions(on["ttgir"])
    # Default: the epilogue (tensor memory load, TMA store); workers: producer, then mma.
    assert set(parts) == {"default", "partition0", "partition1"}
    assert "ttng.tmem_load" in parts["default"]
    assert "ttng.async_tma_copy_global_to_local" in parts["partition0"]
    assert "ttng.tc_gen5_mma" in parts["partition1"]
    reads = {name: text.count("%globaltimer") for name, text in parts.items()}
    assert reads == {"default": 7, "partition0": 6, "partition1": 9}, reads
    # LLVM may duplicate an op's asm into two paths (seen for sm_100: 26 in the PTX for 22 in
    # the TTGIR); each execution still records once. None may disappear.
    assert on["ptx"].count("%globaltimer") >= sum(reads.values())


# -- gluon_ws_matmul: run (GPU, sm_90) ---------------------------------------------------------


def _is_hopper() -> bool:
    return torch.cuda.is_available() and torch.cuda.get_device_capability()[0] == 9


hopper_only = pytest.mark.skipif(not _is_hopper(), reason="needs a CUDA sm_90 (Hopper) GPU")


def _load_example(name: str):
    mod_name = f"sm_profiler_example_{name}"
    if mod_name not in sys.modules:
        path = os.path.join(EXAMPLES, f"{name}.py")
        spec = importlib.util.spec_from_file_location(mod_name, path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[mod_name] = mod
        spec.loader.exec_module(mod)
    return sys.modules[mod_name]


# M, N, K: not multiples of the tiles in M and N (TMA clips), several tiles per program, and
# more K steps than stages (the ring wraps, the phases flip).
SHAPE = (1000, 2000, 1024)


@pytest.fixture(scope="module")
def ws_run():
    ex = _load_example("gluon_ws_matmul")
    M, N, K = SHAPE
    torch.manual_seed(0)
    a = torch.randn(M, K, device="cuda", dtype=torch.float16)
    b = torch.randn(K, N, device="cuda", dtype=torch.float16)
    c_plain = ex.matmul(a, b)
    prof = ex.make_profiler(M, N, K)
    c = ex.matmul(a, b, prof)
    torch.cuda.synchronize()
    return {
        "ex": ex,
        "a": a,
        "b": b,
        "c": c,
        "c_plain": c_plain,
        "prof": prof,
        "trace": prof.decode(),
        "shape": SHAPE,
    }


def _rows(trace, block, group, event, kind=0):
    """(start_ns, end_ns) of one lane's rows of `event`, in record order (decode keeps it)."""
    ev = trace.events
    m = (ev["block"] == block) & (ev["group"] == group) & (ev["event"] == event)
    m &= ev["kind"] == kind
    return ev["start_ns"][m].astype(np.int64), ev["end_ns"][m].astype(np.int64)


@pytest.mark.gpu
@hopper_only
@needs_gluon
def test_ws_matmul_result(ws_run):
    a, b, c, c_plain = ws_run["a"], ws_run["b"], ws_run["c"], ws_run["c_plain"]
    ref = torch.matmul(a, b)
    torch.testing.assert_close(c_plain.float(), ref.float(), atol=0.5, rtol=0.02)
    # Profiling changes timing only: the result is the same bits.
    assert torch.equal(c, c_plain)


@pytest.mark.gpu
@hopper_only
@needs_gluon
def test_ws_matmul_lanes(ws_run):
    ex, trace, prof = ws_run["ex"], ws_run["trace"], ws_run["prof"]
    M, N, K = ws_run["shape"]
    n_sms = torch.cuda.get_device_properties(0).multi_processor_count
    grid = ex.grid_size(M, N)
    assert prof.num_blocks == grid and prof.num_groups == 3
    lanes = trace.lanes
    assert int(lanes["initialized"].sum()) == grid * 3  # every partition of every program
    sm = lanes["sm"][lanes["initialized"]]
    assert sm.min() >= 0 and sm.max() < n_sms
    assert trace.dropped_total == 0 and int(lanes["dropped"].sum()) == 0
    assert len(trace.unmatched["kind"]) == 0
    ev = trace.events
    assert np.all(ev["end_ns"] >= ev["start_ns"])
    same_lane = ev["lane"][1:] == ev["lane"][:-1]
    assert np.all(np.diff(ev["start_ns"].astype(np.int64))[same_lane] >= 0)
    assert np.all(ev["start_ns"] >= lanes["anchor_ns"][ev["lane"]])
    # The three partitions of one program run on the same SM.
    for blk in range(grid):
        assert len(set(ev["sm"][ev["block"] == blk].tolist())) == 1
    # Counts per lane: every partition walks the same tiles and K steps.
    tiles_total = ex.num_tiles(M, N)
    k_steps = -(-K // ex.BLOCK_K)
    P, C, E = (int(g) for g in (ex.PRODUCER, ex.MMA_GROUP, ex.EPILOGUE_GROUP))
    for blk in range(grid):
        tiles = len(range(blk, tiles_total, grid))
        for g in (P, C, E):
            assert len(_rows(trace, blk, g, ex.TILE.value)[0]) == tiles
        assert len(_rows(trace, blk, P, ex.WAIT_EMPTY.value)[0]) == tiles * k_steps
        assert len(_rows(trace, blk, P, ex.LOAD.value, kind=1)[0]) == tiles * k_steps
        assert len(_rows(trace, blk, C, ex.WAIT_FULL.value)[0]) == tiles * k_steps
        assert len(_rows(trace, blk, C, ex.MMA.value)[0]) == tiles * k_steps
        assert len(_rows(trace, blk, E, ex.EPILOGUE.value)[0]) == tiles


@pytest.mark.gpu
@hopper_only
@needs_gluon
def test_ws_matmul_causality(ws_run):
    """Hand-offs seen from both sides, per block.

    Matching: the producer and the mma partition walk the same sequence of (tile, k) steps, and
    step i uses slot i % NUM_STAGES. Their lanes record one `load` instant and one `wait_full`
    range per step, in step order (decode keeps a lane's record order), so the i-th `load` and
    the i-th `wait_full` of a block are the same step and the same slot. Likewise the i-th `mma`
    frees the slot that the producer's (i + NUM_STAGES)-th `wait_empty` waits for, and the mma's
    t-th `wait_epilogue` precedes the hand-off that ends the epilogue's t-th `wait_acc`.
    """
    ex, trace = ws_run["ex"], ws_run["trace"]
    S = ex.NUM_STAGES
    P, C, E = (int(g) for g in (ex.PRODUCER, ex.MMA_GROUP, ex.EPILOGUE_GROUP))
    for blk in range(ws_run["prof"].num_blocks):
        load_t, _ = _rows(trace, blk, P, ex.LOAD.value, kind=1)
        _, full_end = _rows(trace, blk, C, ex.WAIT_FULL.value)
        assert len(load_t) == len(full_end) > S
        # The load is stamped before its TMA is issued; the slot is full only after the TMA.
        assert np.all(load_t <= full_end), blk
        # The mma ends (and then frees the slot) before the producer's wait for that slot ends.
        _, mma_end = _rows(trace, blk, C, ex.MMA.value)
        _, empty_end = _rows(trace, blk, P, ex.WAIT_EMPTY.value)
        assert np.all(mma_end[:-S] <= empty_end[S:]), blk
        # The accumulator reaches the epilogue after the mma partition got the C buffer.
        _, epi_wait_end = _rows(trace, blk, C, ex.WAIT_EPILOGUE.value)
        _, acc_end = _rows(trace, blk, E, ex.WAIT_ACC.value)
        assert len(epi_wait_end) == len(acc_end)
        assert np.all(epi_wait_end <= acc_end), blk


@pytest.mark.gpu
@hopper_only
@needs_gluon
def test_ws_matmul_main(tmp_path, capsys):
    ex = _load_example("gluon_ws_matmul")
    trace = ex.main(out_dir=str(tmp_path), M=1024, N=1024, K=512)
    out = capsys.readouterr().out
    assert "bit-identical" in out
    assert (tmp_path / "gluon_ws_matmul.perfetto-trace").stat().st_size > 0
    assert trace.dropped_total == 0
    names = {trace.event_name(int(e)) for e in set(trace.events["event"].tolist())}
    assert names == set(ex.EVENT_NAMES)
