"""Progress messages (sm_profiler/progress.py): silent off a terminal, timed on one."""

from __future__ import annotations

import io

import pytest
from terminal import Tty

from sm_profiler.progress import stage


def test_progress_is_silent_off_a_terminal_and_timed_on_one():
    quiet = io.StringIO()
    with stage("decoding", stream=quiet):
        pass
    assert quiet.getvalue() == ""
    tty = Tty()
    with stage("decoding", stream=tty):
        pass
    assert tty.getvalue().startswith("decoding ... done in ")
    tty = Tty()
    with pytest.raises(RuntimeError), stage("exporting", stream=tty):
        raise RuntimeError("boom")
    assert tty.getvalue() == "exporting ... failed\n"
