"""Serving one trace file to the Perfetto UI (`sm-profiler open`): a one-shot HTTP server on
127.0.0.1 that ui.perfetto.dev fetches the trace from, as Perfetto's own open_trace_in_ui does.
"""

from __future__ import annotations

import http.server
import os
import shutil
import sys
import time
import urllib.parse
from collections.abc import Callable
from typing import TextIO

from ..errors import CaptureError, ConfigError

PERFETTO_UI = "https://ui.perfetto.dev"
# ui.perfetto.dev's content security policy lets it fetch from this port only (Perfetto's own
# open_trace_in_ui uses it for the same reason).
PERFETTO_PORT = 9001


class _TraceServer(http.server.HTTPServer):
    """Serves one file, at /<its name>, to the Perfetto UI; remembers when it was fetched."""

    def __init__(self, port: int, path: str):
        self.trace_path = path
        self.url_path = "/" + urllib.parse.quote(os.path.basename(path))
        self.fetched = False
        super().__init__(("127.0.0.1", port), _TraceHandler)


class _TraceHandler(http.server.BaseHTTPRequestHandler):
    server: _TraceServer

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
            self.server.fetched = True

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
    """Serve `path` on 127.0.0.1:`port` until ui.perfetto.dev (or anyone) has fetched it once.

    Returns True once fetched, False if `timeout_s` passed first. `port=0` picks a free port;
    `on_ready(port)` is called once the server listens.
    """
    out = sys.stdout if out is None else out
    path = os.path.abspath(os.fspath(path))
    if not os.path.isfile(path):
        raise CaptureError(f"trace file {path!r} does not exist; write one with sm-profiler export")
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
        while not httpd.fetched:
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    out.write(f"Timed out after {timeout_s:g} s: nothing fetched the trace.\n")
                    return False
                # handle_request returns after this long without a request, to check the clock.
                httpd.timeout = min(left, 0.5)
            httpd.handle_request()
        out.write("Trace fetched; stopping the server.\n")
    return True


def _check_trace(path: str) -> None:
    """Refuse a file the Perfetto UI cannot open as a trace (a text file, a numpy array): by its
    first bytes, as `sm_profiler.load` tells a file that is not a capture."""
    from ..wire.capture import _foreign_kind

    if os.path.getsize(path) == 0:
        raise CaptureError(f"{path!r} is empty, not a trace")
    kind = _foreign_kind(path)
    if kind is not None and not kind[1] and kind[0] != "a JSON file":
        raise CaptureError(
            f"{path!r} is {kind[0]}, not a trace: sm-profiler open serves Perfetto traces "
            "(.perfetto-trace, .pftrace), Chrome JSON traces (.json, .json.gz) and captures "
            "(exported first)"
        )
