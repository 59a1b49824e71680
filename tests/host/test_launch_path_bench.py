"""benchmarks/auto_host.py --launch-path (issues 53 and 54): the host's part of an instrumented
launch, timed through auto mode's real launcher wrapper on the CPU. Its timings are the
benchmark's to print; here, that each variant takes the path it names and the binding's state
is left as it was."""

from __future__ import annotations

from benchmarks.auto_host import launch_path
from sm_profiler.auto_mode.state import STATE


def test_launch_path_times_each_variant_and_puts_the_state_back(monkeypatch):
    from sm_profiler.auto_mode import binding

    seen = []
    original = binding.area_for_launch

    def counted(size, alignment, stream):
        seen.append(size)
        return original(size, alignment, stream)

    monkeypatch.setattr(binding, "area_for_launch", counted)
    before = (STATE.buffers, STATE.single, STATE.plain, STATE.on, STATE.launch_log)
    ns = launch_path(launches=100, repeats=2)
    assert set(ns) == {"off", "on", "flight"} and all(v > 0 for v in ns.values())
    # off takes no area; on and flight one each launch, 132 programs of 8 bytes
    assert seen == [132 * 8] * 400
    assert (STATE.buffers, STATE.single, STATE.plain, STATE.on, STATE.launch_log) == before
