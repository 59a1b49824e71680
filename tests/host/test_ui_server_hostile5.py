"""Hostile input, round 5 (issue 52): `sm-profiler open` (export/ui_server.py) against clients
that send nothing, a FIFO given as the trace, and pages that reach 127.0.0.1 by another name (DNS
rebinding). Each test names the item of the issue it keeps fixed; each failed on the main of
2026-11-29.

A command that could hang runs in a process of its own, killed past its time: a hang fails the
test instead of stopping the suite."""

from __future__ import annotations

import io
import os
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.request

import pytest
from repo_paths import ROOT

from sm_profiler.cli import PERFETTO_UI
from sm_profiler.export import ui_server
from sm_profiler.export.ui_server import serve_trace

PAYLOAD = b"\x0a" + b"SECRET-TRACE-BYTES" * 64  # starts as a Perfetto trace does
MARGIN_S = 3.0  # how long past its deadline a command may take to end (a busy CI machine)


@pytest.fixture
def trace(tmp_path):
    path = tmp_path / "t.perfetto-trace"
    path.write_bytes(PAYLOAD)
    return path


def _env():
    return dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))


def _start_open(path, timeout_s: float):
    """`sm-profiler open PATH --no-browser --port 0 --timeout S` in a process of its own; returns
    it and the port it serves on, once it says it serves."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "sm_profiler", "open", str(path), "--no-browser", "--port", "0",
         "--timeout", str(timeout_s)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(),
    )  # fmt: skip
    for line in proc.stdout:
        m = re.match(r"Serving .* on http://127\.0\.0\.1:(\d+)/", line)
        if m:
            return proc, int(m.group(1))
    proc.kill()
    raise AssertionError(f"open never served: {proc.communicate()}")


def _ended(proc, within_s: float) -> tuple[int | None, str, str]:
    """The exit status, stdout and stderr of `proc`; status None if it was still running after
    `within_s` (it is killed then)."""
    try:
        out, err = proc.communicate(timeout=within_s)
        return proc.returncode, out, err
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        return None, out, err


def _serving(trace):
    """serve_trace(trace) on a thread of this process, on a free port: the thread, the port, and
    the dict that gets serve_trace's result under "fetched"."""
    ports, result = [], {}
    server = threading.Thread(
        target=lambda: result.setdefault(
            "fetched",
            serve_trace(trace, 0, open_browser=False, timeout_s=30, out=io.StringIO(),
                        on_ready=ports.append),
        ),
        daemon=True,
    )  # fmt: skip
    server.start()
    while not ports and server.is_alive():
        time.sleep(0.01)
    assert ports, "serve_trace never listened"
    return server, ports[0], result


def test_11_a_client_that_sends_nothing_does_not_stop_the_timeout(trace):
    # The single-threaded server waited in the silent client's request line for good:
    # `--timeout 2` never fired.
    proc, port = _start_open(trace, 2)
    t0 = time.monotonic()
    silent = socket.create_connection(("127.0.0.1", port), timeout=10)
    partial = socket.create_connection(("127.0.0.1", port), timeout=10)
    partial.sendall(b"GET /t.perfetto-trace HTTP/1.1\r\nHost: 127.0.0.1")  # and nothing more
    try:
        rc, out, err = _ended(proc, 2 + MARGIN_S)
    finally:
        silent.close()
        partial.close()
    assert rc == 1, (rc, out, err)
    assert time.monotonic() - t0 < 2 + MARGIN_S
    assert out.endswith("Timed out after 2 s: nothing fetched the trace.\n") and err == ""


def test_11_a_client_that_sends_nothing_does_not_hold_up_the_fetch(trace):
    proc, port = _start_open(trace, 60)
    silent = socket.create_connection(("127.0.0.1", port), timeout=10)
    try:
        url = f"http://127.0.0.1:{port}/t.perfetto-trace"
        with urllib.request.urlopen(url, timeout=10) as r:
            assert r.status == 200 and r.read() == PAYLOAD
        rc, out, err = _ended(proc, MARGIN_S)
    finally:
        silent.close()
        proc.kill()
    assert rc == 0, (rc, out, err)
    assert out.endswith("Trace fetched; stopping the server.\n") and err == ""


def test_11_a_silent_client_is_let_go_after_a_while(trace, monkeypatch):
    # Its connection (and the thread serving it) ends: a client cannot hold one for good.
    monkeypatch.setattr(ui_server, "REQUEST_TIMEOUT_S", 0.5, raising=False)
    server, port, result = _serving(trace)
    with socket.create_connection(("127.0.0.1", port), timeout=5) as silent:
        t0 = time.monotonic()
        assert silent.recv(1) == b""  # the server closed it
        assert time.monotonic() - t0 < 0.5 + MARGIN_S
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/t.perfetto-trace", timeout=10) as r:
        assert r.read() == PAYLOAD
    server.join(10)
    assert result == {"fetched": True}


def test_12_a_fifo_or_a_folder_is_refused_at_once(tmp_path):
    # `open FIFO` waited in the file check, before anything was printed, ignoring --timeout.
    fifo = tmp_path / "t.perfetto-trace"
    os.mkfifo(fifo)
    folder = tmp_path / "traces.json"
    folder.mkdir()
    for path, what in ((fifo, "not a regular file (a pipe or device?)"), (folder, "a directory")):
        proc = subprocess.Popen(
            [sys.executable, "-m", "sm_profiler", "open", str(path), "--no-browser", "--port",
             "0", "--timeout", "60"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(),
        )  # fmt: skip
        rc, out, err = _ended(proc, 30)
        assert rc == 2 and out == "", (rc, out, err)
        assert err == (
            f"sm-profiler: error: {str(path)!r} is {what}: sm-profiler open serves a trace "
            "file (.perfetto-trace, .pftrace, .json, .json.gz) or a capture file\n"
        )


def _request(port: int, head: str) -> tuple[int, bytes]:
    """The status and the whole response of one raw HTTP request (`head`: its request line and
    headers, CRLF-separated)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(head.encode("latin-1") + b"\r\n\r\n")
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    return int(data.split(b" ", 2)[1]), data


def test_14_only_a_loopback_host_is_served(trace):
    # Any Host header was served: a page whose domain name rebinds to 127.0.0.1 read the trace.
    server, port, result = _serving(trace)
    get = "GET /t.perfetto-trace HTTP/1.1"
    for method in ("GET", "HEAD", "OPTIONS"):
        for host in (
            f"Host: evil.example:{port}",
            "Host: evil.example",
            f"Host: 127.0.0.1.evil.example:{port}",
            f"Host: localhost.evil.example:{port}",
            f"Host: evil.example:{port}\r\nHost: 127.0.0.1:{port}",  # two: which one counts?
            f"Host: 127.0.0.1:{port}@evil.example",
            "",  # none at all (HTTP/1.0)
        ):
            head = f"{method} /t.perfetto-trace HTTP/1.{1 if host else 0}"
            status, data = _request(port, f"{head}\r\n{host}" if host else head)
            assert status == 403, (method, host, data)
            assert b"SECRET-TRACE" not in data
    assert server.is_alive()  # a refused request is no fetch
    for host in (f"localhost:{port}", f"LOCALHOST:{port}", f"[::1]:{port}", "127.0.0.1:9001"):
        # 127.0.0.1:9001: ssh -L 9001:127.0.0.1:PORT forwards the port ui.perfetto.dev needs
        status, data = _request(port, f"HEAD /t.perfetto-trace HTTP/1.1\r\nHost: {host}")
        assert status == 200 and f"Content-Length: {len(PAYLOAD)}".encode() in data, data
    status, data = _request(port, f"{get}\r\nHost: 127.0.0.1:{port}\r\nOrigin: {PERFETTO_UI}")
    assert status == 200 and data.endswith(b"\r\n\r\n" + PAYLOAD)
    assert f"Access-Control-Allow-Origin: {PERFETTO_UI}".encode() in data
    server.join(10)
    assert result == {"fetched": True}
