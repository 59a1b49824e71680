"""Hostile input, round 5 (issue 52): auto files whose times span more than int64 nanoseconds can
hold (item 5). Each test names the item of the issue it keeps fixed; each failed on the main of
2026-11-29."""

from __future__ import annotations

import advise_inputs as ai
import pytest
from cli_runs import run_cli

from sm_profiler.errors import CaptureError
from sm_profiler.report.advise import advise
from sm_profiler.wire.capture import load

FAR = 2**62  # 146 years of ns


def _two_steps(t0_ns: int, t1_ns: int, ranks=(0,)):
    """Two steps of one launch each (2 programs of 100 ns on a 4-SM GPU), from t0_ns and to
    t1_ns."""
    return ai.make_table(
        [
            ai.launch([(0, t0_ns, t0_ns + 100), (1, t0_ns, t0_ns + 100)], step=0),
            ai.launch([(0, t1_ns - 100, t1_ns), (1, t1_ns - 100, t1_ns)], step=1),
        ],
        ranks=ranks,
    )


SPANS = {
    # the issue's: programs from -2**62 to 2**62 ns (a step of "-4611686018.43 s")
    "programs_from_-2**62_to_2**62": ai.make_table([ai.launch([(0, -FAR, FAR), (1, -FAR, 0)])]),
    "steps_from_-2**62_to_2**62": _two_steps(-FAR, FAR),
    "steps_2**62_apart": _two_steps(1, FAR + 1),
    "a_time_past_int64_as_uint64": _two_steps(-(2**63), -(2**63) + 1000),
}


@pytest.mark.parametrize("table", SPANS.values(), ids=SPANS.keys())
def test_5_a_file_whose_times_span_past_int64_is_refused_at_load(tmp_path, table):
    path = tmp_path / "far.npz"
    table.save(path)
    with pytest.raises(CaptureError, match=r"int64 nanoseconds cannot hold.*record again"):
        load(path)
    for cmd in ("stats", "advise"):
        r = run_cli(cmd, path)
        assert r.returncode == 2 and "cannot hold" in r.stderr, r.stderr
        assert "Traceback" not in r.stderr and not r.stdout


def test_5_rank_files_that_span_past_int64_together_are_refused(tmp_path):
    # Each file alone spans 100 ns; together 2**62 ns.
    _two_steps(1, 201, ranks=(0,)).save(tmp_path / "auto.rank0.npz")
    _two_steps(FAR, FAR + 200, ranks=(1,)).save(tmp_path / "auto.rank1.npz")
    r = run_cli("advise", tmp_path)
    assert r.returncode == 2 and "cannot hold" in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_5_a_clock_sample_that_moves_times_past_int64_is_refused():
    # Times near 2**62 moved by a clock offset of -(2**62 - 1) ns would wrap past 2**63.
    table = _two_steps(FAR + 1000, FAR + 3000)
    table.sessions[0]["clock"] = [{"offset_ns": -(FAR - 1), "error_ns": 10}]
    with pytest.raises(CaptureError, match="clock .*int64 nanoseconds cannot hold"):
        advise([table])
