"""cute_ops' argument errors are the project's (sm_profiler.errors), with the fix in the message.

These checks run before any IR is emitted, so no kernel is compiled here; tests/device/test_cute_compile.py
sees the same errors through cute.compile.
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.cute
pytest.importorskip("cutlass", reason="needs CuteDSL: pip install nvidia-cutlass-dsl==4.8.1")

import cute_ops  # noqa: E402
from cute_ops import ops  # noqa: E402
from sm_profiler import format as fmt  # noqa: E402
from sm_profiler.errors import ConfigError, SmProfilerError, UsageError  # noqa: E402


def test_event_ids_out_of_range_are_config_errors():
    for bad in (fmt.MAX_EVENT_ID + 1, -1):
        with pytest.raises(ConfigError, match="use SmProfiler.register_event ids"):
            ops._event_id(bad)
    assert ops._event_id(fmt.MAX_EVENT_ID) == fmt.MAX_EVENT_ID


def test_run_time_values_where_compile_time_ones_belong_are_usage_errors():
    with pytest.raises(UsageError, match="compile-time int"):
        ops._event_id(1.0)
    with pytest.raises(UsageError, match="cutlass.Constexpr"):
        ops._static_bool(1, "enabled")
    with pytest.raises(UsageError, match="scalar run-time value"):
        ops._dependency([1, 2])


def test_init_refuses_a_python_bool_leader_and_leader_with_per_warp():
    with pytest.raises(UsageError, match="pass a run-time comparison"):
        cute_ops.init(object(), leader=True)
    with pytest.raises(ConfigError, match="not both"):
        cute_ops.init(object(), per_warp=True, leader=object())


def test_the_errors_are_what_callers_already_catch():
    # SmProfilerError for sm_profiler's callers; TypeError / ValueError as before.
    assert issubclass(UsageError, SmProfilerError) and issubclass(UsageError, TypeError)
    assert issubclass(ConfigError, SmProfilerError) and issubclass(ConfigError, ValueError)
    with pytest.raises(TypeError):
        ops._buffer_address("not a buffer")


# -- the lane is opened by ptx.OPEN_LANE in every leader mode -----------------------------------


def _open_lane_lines() -> list[str]:
    """OPEN_LANE's statements, with operands ($n) and labels left out (the compiler names those)."""
    from sm_profiler import ptx

    lines = [ln.strip() for ln in ptx.OPEN_LANE.replace("\n\t", "\n").splitlines()]
    return [ln for ln in lines if ln and "$" not in ln and ln not in "{}"]


@pytest.mark.parametrize("mode", ["block", "warp", "leader"])
def test_every_leader_mode_opens_its_lane_with_the_open_lane_text(mode):
    import tempfile

    import cute_kernels as K  # tests/ is on sys.path: no package
    import cutlass
    import cutlass.cute as cute
    from cutlass import Int32
    from cutlass.cute.runtime import make_ptr

    def ptr(dtype=cutlass.Int64):
        return make_ptr(dtype, 0, cute.AddressSpace.gmem, assumed_align=8)

    with tempfile.TemporaryDirectory() as d:
        opts = f"--gpu-arch sm_90a --keep-ptx --dump-dir {d}"
        f32 = cutlass.Float32
        if mode == "leader":
            k = cute.compile(K.launch_group, ptr(f32), ptr(), Int32(5), Int32(8), options=opts)
        else:
            args = (ptr(f32), ptr(), Int32(5), Int32(0), Int32(8), True, mode == "warp")
            k = cute.compile(K.launch_loop, *args, options=opts)
    body = [" ".join(ln.split()) for ln in k.__ptx__.splitlines()]
    at = 0
    for line in _open_lane_lines():  # in order, once
        at = body.index(" ".join(line.split()), at) + 1
    assert k.__ptx__.count("SMP_OPEN_") == 2  # its one branch and its label
