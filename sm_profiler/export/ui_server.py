"""Serving one trace file to the Perfetto UI (`sm-profiler open`): a one-shot HTTP server on
127.0.0.1 that ui.perfetto.dev fetches the trace from, as Perfetto's own open_trace_in_ui does.
"""

from __future__ import annotations

import http.server
import os
import re
import shutil
import socketserver
import stat
import sys
import threading
import time
import urllib.parse
from collections.abc import Callable
from typing import TextIO

from ..errors import CaptureError, ConfigError

PERFETTO_UI = "https://ui.perfetto.dev"
# ui.perfetto.dev's content security policy lets it fetch from this port only (Perfetto's own
# open_trace_in_ui uses it for the same reason).
PERFETTO_PORT = 9001
# How long one connection may take over its request, or over reading what we send: then it is
# closed. The server's own deadline (--timeout) does not wait on any connection.
REQUEST_TIMEOUT_S = 30.0
# How often the server looks at the clock and at whether the trace was fetched.
_POLL_S = 0.5
# The Host headers served: the loopback names, any port (an ssh -L forward may give the port
# ui.perfetto.dev fetches from, 9001, to a server on another). A page whose own domain name
# resolves to 127.0.0.1 (DNS rebinding) sends its name, and is refused.
_LOOPBACK_HOST = re.compile(r"(?:127\.0\.0\.1|localhost|\[::1\])(?::\d{1,5})?", re.IGNORECASE)


class _TraceServer(socketserver.ThreadingMixIn, http.server.HTTPServer):
    """Serves one file, at /<its name>, to the Perfetto UI; remembers when it was fetched. Each
    connection has a thread of its own, so that one that sends nothing (a browser's preconnect,
    any local process) holds up neither the fetch nor the deadline."""

    daemon_threads = True  # a connection still open does not keep the process
    block_on_close = False  # nor the server's close waiting

    def __init__(self, port: int, path: str):
        self.trace_path = path
        self.url_path = "/" + urllib.parse.quote(os.path.basename(path))
        self.fetched = threading.Event()
        super().__init__(("127.0.0.1", port), _TraceHandler)

    def handle_error(self, request, client_address) -> None:
        pass  # a client that left or timed out mid-request: no traceback on the user's terminal


class _TraceHandler(http.server.BaseHTTPRequestHandler):
    server: _TraceServer

    def setup(self) -> None:
        self.timeout = REQUEST_TIMEOUT_S  # the connection's socket timeout
        super().setup()

    def parse_request(self) -> bool:
        """The request line and headers, served only when one Host header names the loopback:
        no other method runs otherwise."""
        if not super().parse_request():
            return False
        hosts = self.headers.get_all("Host") or []
        if len(hosts) != 1 or not _LOOPBACK_HOST.fullmatch(hosts[0].strip()):
            self.send_error(
                403,
                "Host not served",
                "this server answers requests for 127.0.0.1 or localhost only",
            )
            return False
        return True

    def end_headers(self) -> None:
        # The UI runs at https://ui.perfetto.dev and fetches from us: allow that origin only.
        self.send_header("Access-Control-Allow-Origin", PERFETTO_UI)
        self.send_header("Cache-Control", "no-cache")
        super().end_headers()

    def do_OPTIONS(self) -> None:  # CORS preflight, should a browser send one
        self.send_response(204)
        self.send_header("Access-Control-Allow-Methods", "GET")
        self.end_headers()

    def do_HEAD(self) -> None:
        self._send(body=False)

    def do_GET(self) -> None:
        if self._send(body=True):
            self.server.fetched.set()

    def do_POST(self) -> None:
        self.send_error(404, "File not found")

    def _send(self, body: bool) -> bool:
        if urllib.parse.urlsplit(self.path).path != self.server.url_path:
            self.send_error(404, "File not found")
            return False
        try:
            f = open(self.server.trace_path, "rb")
        except OSError:
            self.send_error(404, "File not found")
            return False
        with f:
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(os.fstat(f.fileno()).st_size))
            self.end_headers()
            if body:
                shutil.copyfileobj(f, self.wfile)
        return True

    def log_message(self, format: str, *args) -> None:  # noqa: A002 (the base class's name)
        pass  # no access log on stderr: the command prints what matters itself


def serve_trace(
    path: str | os.PathLike,
    port: int = PERFETTO_PORT,
    open_browser: bool = True,
    timeout_s: float | None = None,
    out: TextIO | None = None,
    on_ready: Callable[[int], None] | None = None,
) -> bool:
    """Serve `path` on 127.0.0.1:`port` until ui.perfetto.dev (or anyone asking for 127.0.0.1 or
    localhost by that name) has fetched it once.

    Returns True once fetched, False if `timeout_s` passed first. `port=0` picks a free port;
    `on_ready(port)` is called once the server listens.
    """
    out = sys.stdout if out is None else out
    path = os.path.abspath(os.fspath(path))
    check_regular_file(path)
    from ..wire.capture import is_capture_file

    if is_capture_file(path):
        raise CaptureError(
            f"{path!r} is a capture, not a trace: export it first (sm-profiler export CAPTURE "
            "trace.perfetto-trace), or run sm-profiler open on the capture, which does"
        )
    _check_trace(path)
    try:
        httpd = _TraceServer(port, path)
    except OSError as e:
        raise ConfigError(
            f"cannot serve on 127.0.0.1:{port}: {e.strerror or e}; is another trace being "
            "served? Stop it, or pass --port N"
        ) from e
    with httpd:
        actual = httpd.server_address[1]
        url = f"{PERFETTO_UI}/#!/?url=http://127.0.0.1:{actual}{httpd.url_path}"
        out.write(f"Serving {path} on http://127.0.0.1:{actual}{httpd.url_path}\n")
        out.write(f"Open in the Perfetto UI: {url}\n")
        out.write(
            f"On a remote machine, forward the port first: ssh -L {actual}:127.0.0.1:{actual} "
            "<this host>, then open the URL in a local browser.\n"
        )
        if actual != PERFETTO_PORT:
            out.write(
                f"Note: ui.perfetto.dev only fetches from 127.0.0.1:{PERFETTO_PORT}; with port "
                f"{actual}, use the URL with a port-forward (ssh -L {PERFETTO_PORT}:127.0.0.1:"
                f"{actual}) or another client.\n"
            )
        limit = "" if timeout_s is None else f"; giving up after {timeout_s:g} s"
        out.write(f"Waiting for the trace to be fetched (Ctrl-C to stop{limit}) ...\n")
        out.flush()
        if on_ready is not None:
            on_ready(actual)
        if open_browser:
            import webbrowser

            if not webbrowser.open_new_tab(url):
                out.write(
                    "No browser found here: open the URL above in a browser (on another "
                    "machine, forward the port first).\n"
                )
                out.flush()
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        # handle_request returns after httpd.timeout without a connection, to look at the
        # clock, and at once after one: its thread serves it.
        httpd.timeout = _POLL_S
        while not httpd.fetched.is_set():
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    out.write(f"Timed out after {timeout_s:g} s: nothing fetched the trace.\n")
                    return False
                httpd.timeout = min(left, _POLL_S)
            httpd.handle_request()
        out.write("Trace fetched; stopping the server.\n")
    return True


def check_regular_file(path: str) -> None:
    """Refuse what is not a regular file before anything opens it: opening a FIFO waits for a
    writer, before anything is printed and whatever --timeout says."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise CaptureError(
            f"trace file {path!r} does not exist; write one with sm-profiler export"
        ) from None
    except (OSError, ValueError) as e:
        why = getattr(e, "strerror", None) or e
        raise CaptureError(f"cannot open trace file {path!r}: {why}") from e
    if not stat.S_ISREG(mode):
        what = "a directory" if stat.S_ISDIR(mode) else "not a regular file (a pipe or device?)"
        raise CaptureError(
            f"{path!r} is {what}: sm-profiler open serves a trace file (.perfetto-trace, "
            ".pftrace, .json, .json.gz) or a capture file"
        )


def _check_trace(path: str) -> None:
    """Refuse a file the Perfetto UI cannot open as a trace (a text file, a numpy array): by its
    first bytes, as `sm_profiler.load` tells a file that is not a capture."""
    from ..wire.capture import foreign_kind

    if os.path.getsize(path) == 0:
        raise CaptureError(f"{path!r} is empty, not a trace")
    kind = foreign_kind(path)
    if kind is not None and not kind[1] and kind[0] != "a JSON file":
        raise CaptureError(
            f"{path!r} is {kind[0]}, not a trace: sm-profiler open serves Perfetto traces "
            "(.perfetto-trace, .pftrace), Chrome JSON traces (.json, .json.gz) and captures "
            "(exported first)"
        )
