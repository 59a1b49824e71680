"""The command line, run in-process through main() and once as `python -m sm_profiler`."""

from __future__ import annotations

import io
import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import zipfile

import pytest
from captures import TINY_REPORT, build_capture, saved, tiny_capture
from repo_paths import ROOT as REPO
from terminal import Tty

from sm_profiler import save_many
from sm_profiler.cli import PERFETTO_UI, main, serve_trace
from sm_profiler.trace.decode import decode


@pytest.fixture
def capture_file(tmp_path):
    path = tmp_path / "tiny.npz"
    tiny_capture().save(path)
    return str(path)


def test_stats_prints_the_report(capture_file, capsys):
    assert main(["stats", capture_file, "--width", "100"]) == 0
    assert capsys.readouterr().out == TINY_REPORT


@pytest.mark.parametrize("width", [60, 80])
def test_stats_width_narrows_every_line(tmp_path, capsys, width):
    first = tiny_capture()
    first.event_names[1] = "a_very_long_event_name_" * 4
    lanes = {
        b: {"sm": b, "anchor": 50, "records": [("B", 0, 60), ("E", 0, 90 + b)]} for b in range(20)
    }
    path = tmp_path / "two.npz"
    save_many([first, build_capture(lanes, num_blocks=20, kernel_name="wide" * 30)], path)
    assert main(["stats", str(path), "--width", str(width)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) > 30
    assert max(len(line) for line in lines) <= width
    wide = main(["stats", str(path), "--width", "200"]) == 0 and capsys.readouterr().out
    assert max(len(line) for line in wide.splitlines()) > width  # so the width did something


def test_python_dash_m_runs_the_same_command(capture_file):
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run(
        [sys.executable, "-m", "sm_profiler", "stats", capture_file, "--width", "100"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout == TINY_REPORT
    assert r.stderr == ""  # not a terminal: no progress messages


def test_info_describes_each_capture(tmp_path, capsys):
    lanes = {0: {"sm": 3, "anchor": 100, "records": [("B", 7, 150), ("E", 7, 400)] * 3}}
    other = build_capture(
        lanes,
        num_blocks=4,
        num_groups=2,
        capacity=4,
        emulated=True,
        kernel_name="other",
        event_names={7: "mma"},
        group_names={0: "producer", 1: "consumer"},
    )
    other.metadata = {"device_name": "H100"}
    path = tmp_path / "two.npz"
    save_many([tiny_capture(), other], path)
    assert main(["info", str(path)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"{path}: 2 captures\n")
    second = out.split("capture 1: other\n")[1]
    # Values line up after the longest key of the file ("device_name", 11 characters).
    assert "  layout       4 blocks x 2 groups x 4 records per lane (" in second
    assert "  emulated     yes (CPU interpreter" in second
    assert "  device_name  H100" in second
    assert "  groups       0 producer, 1 consumer" in second
    assert "  events       7 mma" in second
    assert "  lanes        1 of 8 initialised, on 1 SMs; 4 records" in second
    assert "  recorded     2 ranges, 0 instants; 2 dropped; unmatched: 0 begins, 0 ends" in second
    first = out.split("capture 1: other\n")[0]
    assert "  emulated     no (GPU %globaltimer and %smid)" in first
    assert "  span         4.30 µs" in first
    rows = [line for line in out.splitlines() if line.startswith("  ")]
    assert len(rows) == 6 + 8
    assert all(r[13:15] == "  " and r[15] != " " for r in rows)  # every value at column 15


def test_version(capsys):
    import sm_profiler

    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0
    assert capsys.readouterr().out == f"sm-profiler {sm_profiler.__version__}\n"


def _foreign_files(tmp_path) -> dict[str, tuple[object, str, bool]]:
    """name -> (path, what the error must say it looks like, whether that is a trace)."""

    import numpy as np

    trace = decode(tiny_capture())
    from sm_profiler.export import export

    export(trace, tmp_path / "t.json")
    export(trace, tmp_path / "t.perfetto-trace")
    export(trace, tmp_path / "t.json.gz")
    (tmp_path / "random.bin").write_bytes(bytes(range(7, 200)))
    np.save(tmp_path / "a.npy", np.arange(3))
    np.savez(tmp_path / "other.npz", x=np.arange(3))
    return {
        "json": (tmp_path / "t.json", "it looks like a Chrome JSON trace", True),
        "perfetto": (tmp_path / "t.perfetto-trace", "it looks like a Perfetto trace", True),
        "gz": (tmp_path / "t.json.gz", "it looks like a gzip file", True),
        "random": (tmp_path / "random.bin", "it looks like another kind of file", False),
        "npy": (tmp_path / "a.npy", "it looks like a single numpy array", False),
        "npz": (tmp_path / "other.npz", "a .npz archive but not an sm_profiler capture", False),
    }


@pytest.mark.parametrize("command", ["stats", "info", "export"])
def test_a_file_that_is_not_a_capture_says_what_it_is(tmp_path, capsys, command):
    for path, what, is_trace in _foreign_files(tmp_path).values():
        extra = [str(tmp_path / "out.json")] if command == "export" else []
        assert main([command, str(path)] + extra) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "pickle" not in err, err
        assert err.startswith(f"sm-profiler: error: {str(path)!r} ")
        assert what in err and "SmProfiler.save(path)" in err
        # Traces are pointed at the command that shows them.
        assert ("sm-profiler open" in err) == is_trace
    assert not (tmp_path / "out.json").exists()


@pytest.mark.parametrize("content", [None, b"not a capture at all"])
def test_bad_capture_is_one_line_on_stderr_and_status_2(tmp_path, capsys, content):
    path = tmp_path / "bad.npz"
    if content is not None:
        path.write_bytes(content)
    assert main(["stats", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("sm-profiler: error: ")
    assert str(path) in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_no_command_prints_help_and_fails(capsys):
    assert main([]) == 2
    assert "info" in capsys.readouterr().err


def test_binary_export_to_a_terminal_is_refused(capture_file, monkeypatch, capsys):
    monkeypatch.setattr(sys, "stdout", Tty())
    assert main(["export", capture_file, "-"]) == 2
    err = capsys.readouterr().err
    assert "refusing to write a binary Perfetto trace to the terminal" in err
    assert sys.stdout.getvalue() == ""


# -- export (needs sm_profiler.export, written separately) ---------------------------------------


def _need_exporter() -> None:
    mod = pytest.importorskip("sm_profiler.export")
    if not hasattr(mod, "export"):  # the package directory exists before its code lands
        pytest.skip("sm_profiler.export.export is not written yet")


def test_export_json_file_and_stdout_agree(capture_file, tmp_path, capsysbinary):
    _need_exporter()
    out = tmp_path / "trace.json"
    assert main(["export", capture_file, str(out)]) == 0
    assert f"wrote {out}" in capsysbinary.readouterr().out.decode()
    data = json.loads(out.read_text())
    # The tiny capture's 2 load and 2 compute ranges, as complete ("X") events.
    names = [e["name"] for e in data["traceEvents"] if e.get("ph") == "X"]
    assert names.count("load") == 2 and names.count("compute") == 2
    assert main(["export", capture_file, "-", "--format", "json"]) == 0
    assert json.loads(capsysbinary.readouterr().out) == data
    assert main(["export", capture_file, "-", "--format", "chrome"]) == 0
    assert json.loads(capsysbinary.readouterr().out) == data


def test_json_to_a_terminal_is_allowed(capture_file, monkeypatch, capsys):
    _need_exporter()
    monkeypatch.setattr(sys, "stdout", Tty())
    monkeypatch.setattr(Tty, "buffer", property(lambda self: _TextBuffer(self)), raising=False)
    assert main(["export", capture_file, "-", "--format", "json"]) == 0
    assert json.loads(sys.stdout.getvalue())


class _TextBuffer:
    def __init__(self, text: io.StringIO):
        self.text = text

    def write(self, b: bytes) -> int:
        return self.text.write(b.decode())

    def flush(self) -> None:
        pass


def test_export_perfetto_file_and_stdout_agree(capture_file, tmp_path, capsysbinary):
    _need_exporter()
    out = tmp_path / "trace.perfetto-trace"
    assert main(["export", capture_file, str(out)]) == 0
    capsysbinary.readouterr()
    file_bytes = out.read_bytes()
    assert len(file_bytes) > 0
    assert main(["export", capture_file, "-"]) == 0  # stdout is captured, not a terminal
    assert capsysbinary.readouterr().out == file_bytes


# -- open ----------------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str):
    with urllib.request.urlopen(url, timeout=10) as r:
        return r.status, dict(r.headers), r.read()


def test_open_serves_the_file_once_with_the_cors_header(tmp_path, capsys):
    trace = tmp_path / "my trace.perfetto-trace"
    payload = b"\x0a" + bytes(range(256)) * 100  # starts as a Perfetto trace does
    trace.write_bytes(payload)
    port = _free_port()
    result = {}
    args = ["open", str(trace), "--no-browser", "--port", str(port), "--timeout", "30"]
    t = threading.Thread(target=lambda: result.setdefault("rc", main(args)))
    t.start()
    base = f"http://127.0.0.1:{port}"
    for _ in range(200):  # wait for the server to listen
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            time.sleep(0.05)
    with pytest.raises(urllib.error.HTTPError) as e:
        _get(f"{base}/other-file")
    assert e.value.code == 404
    assert t.is_alive()  # a wrong path does not count as the fetch
    status, headers, body = _get(f"{base}/my%20trace.perfetto-trace")
    t.join(10)
    assert not t.is_alive() and result["rc"] == 0
    assert status == 200 and body == payload
    assert headers["Access-Control-Allow-Origin"] == PERFETTO_UI
    out = capsys.readouterr().out
    url = f"https://ui.perfetto.dev/#!/?url=http://127.0.0.1:{port}/my%20trace.perfetto-trace"
    assert url in out
    assert f"ssh -L {port}:127.0.0.1:{port}" in out
    assert "only fetches from 127.0.0.1:9001" in out  # we were not on 9001


def test_open_of_a_capture_serves_a_perfetto_trace_exported_from_it(capture_file, capsys):
    from sm_profiler.export import to_perfetto_bytes

    port = _free_port()
    result = {}
    args = ["open", capture_file, "--no-browser", "--port", str(port), "--timeout", "30"]
    t = threading.Thread(target=lambda: result.setdefault("rc", main(args)))
    t.start()
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            time.sleep(0.05)
    status, _, body = _get(f"http://127.0.0.1:{port}/tiny.perfetto-trace")
    t.join(10)
    assert not t.is_alive() and result["rc"] == 0
    assert status == 200 and body == to_perfetto_bytes(decode(tiny_capture()))
    out = capsys.readouterr().out
    assert f"{capture_file} is a capture: serving a Perfetto trace exported from it" in out


def test_serve_trace_refuses_a_capture(capture_file):
    from sm_profiler.errors import CaptureError

    with pytest.raises(CaptureError, match="is a capture, not a trace: export it first"):
        serve_trace(capture_file, port=0, open_browser=False, timeout_s=0.1, out=io.StringIO())


def test_open_times_out_when_nobody_fetches(tmp_path):
    trace = tmp_path / "t.json"
    trace.write_text("{}")
    ports = []
    out = io.StringIO()
    t0 = time.monotonic()
    served = serve_trace(
        trace, port=0, open_browser=False, timeout_s=0.3, out=out, on_ready=ports.append
    )
    assert served is False and time.monotonic() - t0 < 5
    assert ports and ports[0] != 0
    assert "Timed out after 0.3 s" in out.getvalue()


def test_open_missing_file_is_an_error(tmp_path, capsys):
    assert main(["open", str(tmp_path / "nope.perfetto-trace"), "--no-browser"]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_open_port_in_use_says_what_to_do(tmp_path, capsys):
    trace = tmp_path / "t.json"
    trace.write_text("{}")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        assert main(["open", str(trace), "--no-browser", "--port", str(port)]) == 2
    err = capsys.readouterr().err
    assert f"cannot serve on 127.0.0.1:{port}" in err and "--port" in err


def test_decode_of_the_fixture_is_sane():
    # Guards the builder the CLI tests rely on.
    assert len(decode(tiny_capture())) == 5


def test_export_one_capture_or_launches_end_to_end(tmp_path, capsys):
    from reference_encoder import BEGIN, END, Lane, Stream, encode

    from sm_profiler.wire.capture import Capture

    caps = []
    for i in range(2):
        s = Stream(1, 1, 8)
        t = 1_000_000_000 + i * 10_000_000
        s.lanes[(0, 0)] = Lane(t, 1, [(BEGIN, 0, t + 5), (END, 0, t + 105)])
        caps.append(Capture(encode(s), event_names={0: "work"}, kernel_name="k"))
    path = tmp_path / "two.npz"
    save_many(caps, path)
    out = tmp_path / "one.json"
    assert main(["export", str(path), str(out), "--capture", "1"]) == 0
    ev = json.loads(out.read_text())["traceEvents"]
    assert [e["name"] for e in ev if e.get("ph") == "X" and e["name"] == "work"] == ["work"]
    assert main(["export", str(path), str(out), "--cut-gaps"]) == 0
    ev = json.loads(out.read_text())["traceEvents"]
    works = sorted(e["ts"] for e in ev if e.get("name") == "work")
    assert works[1] - works[0] < 2.0  # µs: the 10 ms host gap is cut down to 1 µs
    assert any(e["name"].startswith("host gap cut") for e in ev)
    assert main(["export", str(path), str(out), "--capture", "5"]) == 2
    assert "2 captures (0..1)" in capsys.readouterr().err


def test_stats_by_sm_fits_80_columns(capture_file, capsys):
    assert main(["stats", capture_file, "--by", "sm", "--width", "80"]) == 0
    out = capsys.readouterr().out
    assert "by sm (times in" in out
    table = out[out.index("by sm") :].split("\n\n")[0].splitlines()
    assert table[1].split() == ["sm", "event", "count", "total", "self", "mean"]
    assert all(line.split()[0] == "SM" for line in table[2:])
    assert max(len(line) for line in out.splitlines()) <= 80


def test_6_stats_by_follows_the_event_table_it_breaks_down(tmp_path, capsys):
    """Issue 32, item 6: not after the sections per capture, where nobody looks for it."""
    path = tmp_path / "two.npz"
    save_many([tiny_capture(), tiny_capture()], path)
    assert main(["stats", str(path), "--by", "sm", "--width", "80"]) == 0
    blocks = capsys.readouterr().out.split("\n\n")
    events = next(i for i, b in enumerate(blocks) if b.startswith("events (times in"))
    assert blocks[events + 1].startswith("by sm (times in ns)\nsm    event")
    assert "-- capture 0: tiny" in "\n\n".join(blocks[events + 2 :])


def test_export_filters_and_summary_from_the_command_line(capture_file, tmp_path, capsys):
    out = tmp_path / "t.json"
    assert main(["export", capture_file, str(out), "--sms", "1", "--events", "load"]) == 0
    ev = json.loads(out.read_text())["traceEvents"]
    names = {e["name"] for e in ev if e.get("ph") == "X"} - {"tiny"}
    assert names == {"load"}
    procs = [e["args"]["name"] for e in ev if e.get("name") == "process_name"]
    assert procs == ["SM 1", "launches"]
    capsys.readouterr()
    assert main(["export", capture_file, str(out), "--summary", "--detail-sms", "0"]) == 0
    err = capsys.readouterr().err
    assert err.startswith("note: summarised (summary asked for)") and "SM 0" in err
    with pytest.raises(SystemExit) as e:
        main(["export", capture_file, str(out), "--sms", "x"])
    assert e.value.code == 2 and "give ints separated by commas" in capsys.readouterr().err


# -- hostile input (issue 15): one-line errors, escaped metadata ----------------------------------


def test_13_a_long_npy_header_error_is_one_line(tmp_path, capsys):
    path = tmp_path / "long.npz"
    with zipfile.ZipFile(path, "w") as z:
        header = b"\x93NUMPY\x02\x00" + (200_000).to_bytes(4, "little") + b" " * 200_000
        z.writestr("meta.npy", header)
    assert main(["stats", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("sm-profiler: error: ") and err.count("\n") == 1, err
    assert "max_header_size" in err


def test_15_info_escapes_what_a_file_says(tmp_path, small_capture, capsys):
    small_capture.metadata = {"device\x1b]0;pwn\x07": "H100\x1b[2J\r\nfake: line", "s": "\ud800"}
    path = saved(tmp_path, small_capture)
    assert main(["info", path]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\r" not in out and "\x07" not in out
    assert "device\\x1b]0;pwn\\x07" in out
    assert "H100\\x1b[2J\\r\\nfake: line" in out and "\\ud800" in out
    out.encode("utf-8")  # nothing unencodable reaches stdout


# -- run (auto mode) ----------------------------------------------------------------------------


def test_cli_run_needs_a_script(capsys):
    from sm_profiler.cli import main

    assert main(["run"]) == 2
    assert "needs a script" in capsys.readouterr().err
    assert main(["run", "--", "/no/such/train.py"]) == 2
    assert "no script" in capsys.readouterr().err


@pytest.mark.parametrize(
    "out, problem",
    [
        ("a_file", "is a file, not a folder"),
        ("/dev/null/x", "'/dev/null' is not a folder"),
        ("/dev/null/x/y", "'/dev/null' is not a folder"),
        ("", "--out is empty"),
        ("a_file/sub", "is not a folder"),
        ("taken", "auto.npz': it is a directory; name another folder with --out"),
    ],
)
def test_cli_run_refuses_an_unusable_out_in_one_line(tmp_path, monkeypatch, capsys, out, problem):
    # Issue 31, item 15: these ended in a traceback from the folder's creation.
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a_file").write_text("x")
    (tmp_path / "taken" / "auto.npz").mkdir(parents=True)
    (tmp_path / "s.py").write_text("raise SystemExit('the script ran')\n")
    before = sorted(os.listdir(tmp_path))
    assert main(["run", "--out", out, "--", "s.py"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("sm-profiler: error: ") and err.count("\n") == 1, err
    assert problem in err and ("--out" in err), err
    assert sorted(os.listdir(tmp_path)) == before


def test_cli_run_checks_everything_before_creating_the_out_folder(tmp_path, monkeypatch, capsys):
    # Issue 31, item 16: without a GPU it refused, but only after creating --out.
    from sm_profiler import ConfigError
    from sm_profiler.auto_mode import session

    def no_gpu():
        raise ConfigError("sm_profiler.auto needs an NVIDIA GPU (test)")

    monkeypatch.chdir(tmp_path)
    (tmp_path / "s.py").write_text("raise SystemExit('the script ran')\n")
    monkeypatch.setattr(session, "check_can_run", no_gpu)
    assert main(["run", "--out", "new/deeper", "--", "s.py"]) == 2
    assert "needs an NVIDIA GPU (test)" in capsys.readouterr().err
    assert main(["run", "--out", "new", "--capacity", "0", "--", "s.py"]) == 2
    assert "capacity must be in 1..2,147,483,648" in capsys.readouterr().err
    # The script's and the folder's problems come first: they are the user's to fix.
    assert main(["run", "--out", "new", "--", "nosuch.py"]) == 2
    assert "no script 'nosuch.py'" in capsys.readouterr().err
    assert os.listdir(tmp_path) == ["s.py"]


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="the CPU's refusal")
def test_cli_run_on_a_cpu_refuses_and_creates_nothing(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "s.py").write_text("raise SystemExit('the script ran')\n")
    assert main(["run", "--", "s.py"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("sm-profiler: error: sm_profiler.auto ") and err.count("\n") == 1
    assert os.listdir(tmp_path) == ["s.py"]


def test_cli_run_names_a_misspelled_module_before_anything_else(tmp_path, monkeypatch, capsys):
    # Issue 31, item 17: a module that cannot be found ended in a traceback (on a GPU) or behind
    # the GPU's refusal; a missing script got a clear error first.
    from sm_profiler import ConfigError
    from sm_profiler.auto_mode import session

    def no_gpu():
        raise ConfigError("sm_profiler.auto needs an NVIDIA GPU (test)")

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(session, "check_can_run", no_gpu)
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("raise SystemExit('pkg was imported')\n")
    (tmp_path / "pkg" / "train.py").write_text("")
    for name in ("pkg.trian", "pgk.train", "pkg.train.step"):
        assert main(["run", "--", "-m", name]) == 2
        err = capsys.readouterr().err
        assert err == (
            f"sm-profiler: error: no module {name!r} in the current folder or on sys.path: "
            "check its spelling, or give a script's path (sm-profiler run -- path/to/train.py)\n"
        )
    assert main(["run", "--", "-m", "pkg"]) == 2
    assert "'pkg' is a package without a __main__ module" in capsys.readouterr().err
    assert main(["run", "--", "-m", ".train"]) == 2
    assert "is not a module name" in capsys.readouterr().err
    # Found in the current folder (not on sys.path from the console script): next, the GPU.
    assert main(["run", "--", "-m", "pkg.train"]) == 2
    assert "needs an NVIDIA GPU (test)" in capsys.readouterr().err
    assert os.listdir(tmp_path) == ["pkg"]


# -- the first hour, round 2 (issue 32) ----------------------------------------------------------


def test_4_an_unknown_extension_names_the_format_flag(capture_file, tmp_path, capsys):
    assert main(["export", capture_file, str(tmp_path / "out.txt")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--format perfetto" in err
    assert "format='" not in err  # the Python argument, not the flag
    assert not (tmp_path / "out.txt").exists()


def test_4_a_mistyped_option_shows_the_commands_usage_and_names_it(capture_file, capsys):
    with pytest.raises(SystemExit) as e:
        main(["export", capture_file, "--capure", "1", "x.json"])
    err = capsys.readouterr().err
    assert e.value.code == 2
    assert err.startswith("usage: sm-profiler export ")
    assert err.splitlines()[-1] == (
        "sm-profiler export: error: unknown option --capure (did you mean --capture?)"
    )
    with pytest.raises(SystemExit):
        main(["stats", capture_file, "extra"])
    err = capsys.readouterr().err
    assert err.startswith("usage: sm-profiler stats ")
    assert err.splitlines()[-1] == "sm-profiler stats: error: unrecognized arguments: extra"


@pytest.mark.parametrize(
    "argv, hint",
    [
        # Issue 56, item 8: `--by-group` for `--by group` got no hint: an option's value spelt
        # into its name is matched against `--opt value` for the option's choices.
        (["stats", "CAP", "--by-group"], "--by-group (did you mean --by group?)"),
        (["stats", "CAP", "--by_sm"], "--by_sm (did you mean --by sm?)"),
        (["stats", "CAP", "--bylaunch"], "--bylaunch (did you mean --by launch?)"),
        (["export", "CAP", "x.json", "--format-json"], "(did you mean --format json?)"),
        (["stats", "CAP", "--widht", "80"], "--widht (did you mean --width?)"),
        # an option of another command: said where it belongs
        (["stats", "CAP", "--cut-gaps"], "--cut-gaps (an option of sm-profiler export)"),
        (["stats", "CAP", "--zzzz"], "unknown option --zzzz"),
    ],
)
def test_8_an_unknown_option_names_the_near_one(capture_file, capsys, argv, hint):
    argv = [capture_file if a == "CAP" else a for a in argv]
    with pytest.raises(SystemExit) as e:
        main(argv)
    last = capsys.readouterr().err.splitlines()[-1]
    assert e.value.code == 2 and last.startswith(f"sm-profiler {argv[0]}: error: unknown option")
    assert last.endswith(hint)


def test_5_an_sm_no_lane_ran_on_is_an_error_like_an_unknown_event(capture_file, tmp_path, capsys):
    out = tmp_path / "t.json"
    for flag, value, what, choices in (
        ("--sms", "99", "no lane ran on SM 99", "the trace's SMs: "),
        ("--events", "foo", "no event named 'foo'", "events: "),
    ):
        assert main(["export", capture_file, str(out), flag, value]) == 2
        err = capsys.readouterr().err
        assert err.startswith("sm-profiler: error: ") and err.count("\n") == 1
        assert what in err and choices in err
    assert not out.exists()


def test_5_one_capture_does_not_first_claim_the_whole_trace(tmp_path, capsys):
    caps = [tiny_capture(), tiny_capture()]
    path = tmp_path / "two.npz"
    save_many(caps, path)
    out = tmp_path / "one.json"
    assert main(["export", str(path), str(out), "--capture", "1"]) == 0
    got = capsys.readouterr()
    assert got.out == f"wrote {out} ({out.stat().st_size:,} bytes)\n"
    assert got.err == "note: capture 1 only: 5 of 10 ranges and instants\n"
    assert main(["export", str(path), str(out)]) == 0  # no note: the line says how many
    assert capsys.readouterr().out.endswith("bytes; 10 ranges and instants)\n")


def test_run_passes_via_triton_to_auto(monkeypatch, tmp_path):
    """`sm-profiler run --via-triton` asks auto() for it (the routing itself: test_auto_via_triton)."""
    import sm_profiler
    from sm_profiler import cli

    got = {}

    def fake_auto(*args, **kwargs):
        got.update(kwargs)
        raise SystemExit(0)

    monkeypatch.setattr(sm_profiler, "auto", fake_auto)
    script = tmp_path / "s.py"
    script.write_text("print('hi')\n")
    with pytest.raises(SystemExit):
        cli.main(["run", "--out", str(tmp_path / "o"), "--via-triton", "--", str(script)])
    assert got["via_triton"] is True


# -- the first hour, round 3 (issue 46) ----------------------------------------------------------


def test_11_a_window_that_ends_before_it_starts_is_named_as_the_option(
    capture_file, tmp_path, capsys
):
    out = tmp_path / "t.json"
    with pytest.raises(SystemExit) as e:
        main(["export", capture_file, str(out), "--window-us", "5:1"])
    err = capsys.readouterr().err
    assert e.value.code == 2 and not out.exists()
    assert err.splitlines()[-1] == (
        "sm-profiler export: error: argument --window-us: '5:1': the end (1 µs) is before the "
        "start (5 µs); give START:END, e.g. 100:250.5"
    )
    assert "window_ns" not in err
    assert main(["export", capture_file, str(out), "--window-us", "1:1"]) == 0  # an instant


def test_12_every_command_has_a_description_and_the_top_level_names_run(capsys):
    from sm_profiler.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    assert [c for c, p in sub.choices.items() if not p.description] == []
    assert "run" in parser.description and "merge" in parser.description
    for command in ("info", "stats", "export"):
        with pytest.raises(SystemExit):
            main([command, "--help"])
        usage, description = capsys.readouterr().out.split("\n\n")[:2]
        assert usage.startswith(f"usage: sm-profiler {command} ") and len(description) > 40


def test_13_info_lists_a_kernel_once_with_all_its_launches(tmp_path, capsys):
    # A kernel of one name held twice in a file (two binaries of it, or one per GPU) was listed
    # twice, once with "(0)" launches, where the report counts it once.
    from auto_inputs import KERNELS, auto_buffer, two_kernels

    from sm_profiler.trace.auto_table import AutoTable

    kernels = {**KERNELS, 3: dict(KERNELS[2], kernel_tag=3), 4: {"name": "only_autotuned"}}
    gpu0 = two_kernels()
    gpu1 = [r[:4] + (3 if r[4] == 2 else r[4],) + r[5:] for r in gpu0]  # gemm: tag 3 on GPU 1
    buffers = [
        ({"gpu": g, "sm_count": 4, "rank": 0}, auto_buffer(r)) for g, r in enumerate([gpu0, gpu1])
    ]
    path = tmp_path / "auto.npz"
    AutoTable.from_buffers(buffers, kernels).save(path)
    assert main(["info", str(path)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"{path}: auto mode, 8 launches of 3 kernels, ")
    assert out.endswith(
        "  kernels (launches):\n"
        "    triton_poi_fused_add_0 (4)\n"
        "    gemm (4)\n"
        "    only_autotuned (0: loaded, no launch recorded)\n"
    )


def test_9_open_refuses_what_is_not_a_trace_and_gives_up_by_default(tmp_path, capsys, monkeypatch):
    # `sm-profiler open notes.txt` served the text to the UI; with no browser here it waited
    # for a fetch forever.
    import webbrowser

    from sm_profiler.cli import OPEN_TIMEOUT_S, build_parser

    for name, data, what in (
        ("notes.txt", b"step 1 took 3 ms\n", "another kind of file"),
        ("empty.json", b"", "empty"),
        ("a.npy", b"\x93NUMPY\x01\x00", "a single numpy array"),
    ):
        (tmp_path / name).write_bytes(data)
        assert main(["open", str(tmp_path / name), "--no-browser", "--timeout", "5"]) == 2
        err = capsys.readouterr().err
        assert err.startswith("sm-profiler: error: ") and what in err and "not a trace" in err
    assert build_parser().parse_args(["open", "t.json"]).timeout == OPEN_TIMEOUT_S
    monkeypatch.setattr(webbrowser, "open_new_tab", lambda url: False)  # none on this machine
    trace = tmp_path / "t.json"
    trace.write_text('{"traceEvents": []}')
    assert main(["open", str(trace), "--port", str(_free_port()), "--timeout", "0.2"]) == 1
    out = capsys.readouterr().out
    assert "No browser found here: open the URL above in a browser" in out
    assert "(Ctrl-C to stop; giving up after 0.2 s) ..." in out
    assert out.endswith("Timed out after 0.2 s: nothing fetched the trace.\n")
