"""Auto mode's process-wide state (sm_profiler/auto_mode/state.py, issue 53, item 5): a GPU's
buffer is a named, slotted DeviceBuffer, not a tuple read as b[0], b[1], b[2] on the launch
path, and the state itself is slotted (a misspelt field fails instead of adding one)."""

from __future__ import annotations

import os
import re

import pytest
from repo_paths import ROOT

from sm_profiler.auto_mode import binding
from sm_profiler.auto_mode.state import STATE, DeviceBuffer
from sm_profiler.wire import format as fmt
from sm_profiler.wire.auto_areas import Areas


def test_a_buffer_and_the_state_are_named_and_slotted():
    b = DeviceBuffer(4096, Areas(10, ring=False), None)
    assert (b.address, b.areas.slots, b.buffer) == (4096, 10, None)
    for obj in (b, STATE):
        assert not hasattr(obj, "__dict__")
        with pytest.raises(AttributeError):
            obj.adress = 1  # a misspelt field: refused, not added


def test_the_launch_path_gives_areas_of_the_named_buffer(monkeypatch):
    areas = Areas(100, ring=False)
    b = DeviceBuffer(1 << 20, areas, None)
    for k, v in dict(on=True, capturing=None, single=b, buffers={0: b}).items():
        monkeypatch.setattr(STATE, k, v)
    assert binding.area_for_launch(4 * fmt.AUTO_RECORD_BYTES, 32, 0) == 1 << 20
    second = binding.area_for_launch(2 * fmt.AUTO_RECORD_BYTES, 32, 0)
    assert second == (1 << 20) + 4 * fmt.AUTO_RECORD_BYTES
    assert areas.counts == [4, 2]


def test_no_module_reads_a_buffer_by_position():
    """b[0] (the address), b[1] (the Areas), b[2] (the buffer) were read in binding.py,
    state.py and graph_stage.py."""
    folder = os.path.join(ROOT, "sm_profiler", "auto_mode")
    positional = re.compile(r"\bb\[[0-2]\]|buffers\[[^\]]*\]\[[0-2]\]|single\[[0-2]\]")
    found = [
        f"{name}:{i}: {line.strip()}"
        for name in sorted(os.listdir(folder))
        if name.endswith(".py")
        for i, line in enumerate(open(os.path.join(folder, name), encoding="utf-8"), 1)
        if positional.search(line)
    ]
    assert not found, found
