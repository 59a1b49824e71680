"""Auto mode's binding to Triton (sm_profiler/auto_mode/binding.py), without a GPU: the compile
stage hook runs a kernel the rewrite does not know plain, with a warning; the partitions of a
warp-specialized kernel name its warps."""

from __future__ import annotations

import pytest
from auto_inputs import PTX


def test_a_kernel_the_rewrite_does_not_know_runs_plain_with_a_warning():
    from types import SimpleNamespace

    from sm_profiler.auto_mode import binding

    stages = {"ptx": lambda src, metadata: ".version 8.7\n.target sm_90a\n// no entry here\n"}
    options = SimpleNamespace(instrumentation_mode=binding.mode_name("program"))
    binding._stages_hook(None, stages, options, None, 90)
    with pytest.warns(binding.AutoWarning, match="'odd_kernel' runs uninstrumented"):
        out = stages["ptx"](None, {"name": "odd_kernel"})
    assert out.endswith("// no entry here\n")  # the plain PTX, untouched
    assert "odd_kernel" in binding.STATE.skipped
    # Compiles without auto mode's instrumentation_mode are left alone.
    plain = {"ptx": lambda src, metadata: PTX}
    binding._stages_hook(None, plain, SimpleNamespace(instrumentation_mode=""), None, 90)
    assert plain["ptx"](None, {}) == PTX
    key, digest = binding._stages_hook()  # Triton 3.7+: the hook's part of the cache key
    assert binding.MODE_PREFIX in key and len(digest) == 64


def test_partitions_of_a_warp_specialized_kernel_name_its_warps():
    from sm_profiler.auto_mode.binding import partitions_of
    from sm_profiler.auto_mode.table import _warp_names

    ttgir = """module attributes {"ttg.num-ctas" = 1 : i32, "ttg.num-warps" = 4 : i32} {
    ttg.warp_specialize(%out, %iters) attributes {requestedRegisters = array<i32: 48, 24>}
    partition0(%arg3: !tt.ptr<f32> loc(unknown), %arg4: i32 loc(unknown)) num_warps(2) {
    partition1(%arg3: !tt.ptr<f32> loc(unknown)) num_warps(1) {
    """
    parts = partitions_of(ttgir)
    assert parts == [("default", 0, 4), ("worker 0", 4, 2), ("worker 1", 6, 1)]
    names = _warp_names(8, parts)
    assert names[0] == "default · warp 0" and names[5] == "worker 0 · warp 5"
    assert names[6] == "worker 1 · warp 6" and names[7] == "warp 7"  # Triton's padding warp
    assert partitions_of('module attributes {"ttg.num-warps" = 4 : i32} {') == []
