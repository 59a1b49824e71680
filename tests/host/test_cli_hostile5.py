"""Hostile input, round 5 (issue 52): numbers on the command line that are out of range, not a
number, infinite or huge. Each test names the item of the issue it keeps fixed; each failed on
the main of 2026-11-29."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from repo_paths import ROOT

from sm_profiler.cli import build_parser, main

# The files need not exist: a bad number is refused before anything is read (on the main of
# 2026-11-29 each of these went on to the command: a traceback, a hang, or nonsense output).
BAD_NUMBERS = [
    (["open", "t.json"], "--port", ["70000", "-1", "99999999999999999999", "1.5"]),
    (["open", "t.json"], "--timeout", ["nan", "inf", "-inf", "1e400", "-1", "0"]),
    (["stats", "a.npz"], "--width", ["-5", "0"]),
    (["advise", "a.npz"], "--width", ["-1"]),
    (["advise", "a.npz"], "--top", ["-1"]),
    (["query", "a.npz", "select 1"], "--max-rows", ["-1", "99999999999999999999"]),
    (["run", "--out", "o"], "--width", ["-4", "0"]),
]
CASES = [
    pytest.param(command, option, value, id=f"{command[0]}{option}={value}")
    for command, option, values in BAD_NUMBERS
    for value in values
]


def _argv(command: list[str], option: str, value: str) -> list[str]:
    argv = [*command, f"{option}={value}"]  # = so that -1 is not read as an option
    return [*argv, "--", "x.py"] if command[0] == "run" else argv


@pytest.mark.parametrize("command, option, value", CASES)
def test_13_a_number_out_of_range_is_one_line_and_exit_2(command, option, value, capsys):
    with pytest.raises(SystemExit) as e:
        main(_argv(command, option, value))
    assert e.value.code == 2
    err = capsys.readouterr().err
    last = err.rstrip("\n").splitlines()[-1]
    assert last.startswith(f"sm-profiler {command[0]}: error: argument {option}: '{value}': give")
    assert "Traceback" not in err


def test_13_the_range_ends_where_it_should(capsys):
    parse = build_parser().parse_args
    for argv in (["open", "t.json", "--timeout", "inf"], ["open", "t.json", "--port", "65536"]):
        with pytest.raises(SystemExit):
            parse(argv)
    args = parse(["open", "t.json", "--port", "0", "--timeout", "0.25"])
    assert (args.port, args.timeout) == (0, 0.25)
    assert parse(["open", "t.json", "--port", "65535", "--timeout", "1e9"]).port == 65535
    assert parse(["stats", "a.npz", "--width", "1"]).width == 1
    assert parse(["advise", "a.npz", "--top", "0"]).top == 0
    assert parse(["query", "a.npz", "x", "--max-rows", "0"]).max_rows == 0


@pytest.mark.parametrize("option", ["--port=70000", "--port=-1", "--timeout=nan"])
def test_13_open_says_it_in_one_line_not_a_traceback(tmp_path, option):
    # `open --port 70000` and `--port -1` ended in an OverflowError traceback from bind(),
    # `--timeout nan` in a ValueError from select(), both with exit status 1.
    trace = tmp_path / "t.json"
    trace.write_text('{"traceEvents": []}')
    r = subprocess.run(
        [sys.executable, "-m", "sm_profiler", "open", str(trace), "--no-browser", option],
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")),
    )
    assert r.returncode == 2 and r.stdout == "", (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr
    assert r.stderr.splitlines()[-1].startswith("sm-profiler open: error: argument --")
