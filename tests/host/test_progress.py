"""Progress messages (sm_profiler/progress.py): silent off a terminal, timed on one."""

from __future__ import annotations

import io

import pytest
from terminal import Tty

from sm_profiler.progress import LONG_ROWS, stage, stage_for


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


def test_progress_of_short_work_is_not_announced():
    tty = Tty()
    with stage_for("reporting", LONG_ROWS - 1, stream=tty):
        pass
    assert tty.getvalue() == ""
    with stage_for("reporting", LONG_ROWS, stream=tty):
        pass
    assert tty.getvalue().startswith("reporting ... done in ")
    quiet = io.StringIO()
    with stage_for("reporting", 10 * LONG_ROWS, stream=quiet):
        pass
    assert quiet.getvalue() == ""
