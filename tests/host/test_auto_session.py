"""sm_profiler.auto(): the options it refuses and when its results can be read."""

from __future__ import annotations

import pytest


def test_bad_options_and_impossible_settings_are_config_errors(monkeypatch):
    import sm_profiler
    from sm_profiler import ConfigError

    for bad in (0, -256, 2**31 + 1, 2**32):  # any count in 1..2**31 is rounded up per SM
        with pytest.raises(ConfigError, match=r"must be in 1\.\.2,147,483,648 records per GPU"):
            sm_profiler.auto(bad)
    for bad in (True, "4096", 4096.0):
        with pytest.raises(ConfigError, match="must be an int"):
            sm_profiler.auto(bad)
    with pytest.raises(ConfigError, match="ring must be"):
        sm_profiler.auto(ring="yes")
    with pytest.raises(ConfigError, match="level must be one of program, warp"):
        sm_profiler.auto(level="block")
    # Under the interpreter nothing is compiled: say so before touching anything.
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    with pytest.raises(ConfigError, match="TRITON_INTERPRET"):
        sm_profiler.auto().start()
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    import triton

    monkeypatch.delattr(triton.knobs.runtime_knobs, "add_stages_inspection_hook", raising=False)
    monkeypatch.delattr(triton.knobs.runtime, "add_stages_inspection_hook", raising=False)
    with pytest.raises(ConfigError, match="Triton 3.6 or newer"):
        sm_profiler.auto().start()


def test_results_before_the_region_ends_say_when_to_read_them():
    import sm_profiler
    from sm_profiler import ConfigError

    with pytest.raises(ConfigError, match="after the `with sm_profiler.auto"):
        sm_profiler.auto().records()


def test_auto_passes_every_option_on_to_auto_profiler_and_names_each_in_its_doc():
    # sm_profiler.auto forwards its options (one signature: AutoProfiler's); its docstring
    # names each of them, so the two stay in step.
    import inspect
    import re

    import sm_profiler
    from sm_profiler.auto_mode import DEFAULT_CAPACITY, AutoProfiler

    params = inspect.signature(AutoProfiler).parameters
    assert list(params)[0] == "capacity"
    options = [n for n, p in params.items() if p.kind is inspect.Parameter.KEYWORD_ONLY]
    named = re.findall(r"(?<!\()\b(\w+): ", sm_profiler.auto.__doc__.split("AutoProfiler")[1])
    assert named == ["capacity", *options]
    assert sm_profiler.auto().capacity == DEFAULT_CAPACITY
    prof = sm_profiler.auto(4096, ring=True, level="warp", device=1, schedule="3-4")
    assert (prof.capacity, prof.ring, prof.level, prof.device) == (4096, True, "warp", 1)
    assert str(prof.schedule) == str(AutoProfiler(schedule="3-4").schedule)
    prof = sm_profiler.auto(count_optimizer_steps=True, via_triton=True)
    assert prof.count_optimizer_steps and prof.via_triton
    with pytest.raises(TypeError, match="levels"):
        sm_profiler.auto(levels="warp")
