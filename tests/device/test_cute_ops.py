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
from sm_profiler.errors import ConfigError, SmProfilerError, UsageError  # noqa: E402
from sm_profiler.wire import format as fmt  # noqa: E402


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
