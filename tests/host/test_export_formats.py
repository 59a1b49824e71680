"""The registry of output formats (sm_profiler/export/formats.py, issue 53, item 4): export(),
the CLI's --format choices and help, and docs/architecture.md's recipe read it. The recipe is
run as written: its toy format, registered in the command line's process, exports a capture
through `sm-profiler export` (today's export() gave any format but Perfetto the Chrome writer)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
from captures import saved, tiny_capture
from repo_paths import ROOT

from sm_profiler.errors import ConfigError
from sm_profiler.export import formats
from sm_profiler.trace.decode import decode


def _recipe() -> str:
    """The python block of docs/architecture.md's "Adding an output format"."""
    text = open(os.path.join(ROOT, "docs", "architecture.md"), encoding="utf-8").read()
    section = text.split("## Adding an output format", 1)[1].split("\n## ", 1)[0]
    (block,) = re.findall(r"```python\n(.*?)```", section, re.S)
    return block


def _cli_with_recipe(cwd, *args: str) -> subprocess.CompletedProcess:
    """`sm-profiler ARGS` in a process of its own that ran the recipe first."""
    code = (
        _recipe() + "\nimport sys\nfrom sm_profiler.cli import main\nsys.exit(main(sys.argv[1:]))"
    )
    env = dict(os.environ, PYTHONPATH=ROOT)
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_architecture_recipe_adds_a_format_the_cli_exports(tmp_path):
    path = saved(tmp_path, tiny_capture(origin_ns=1_700_000_000_000_000_000), "cap.npz")
    out = _cli_with_recipe(tmp_path, "export", path, "trace.toy")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("wrote trace.toy (")
    lines = (tmp_path / "trace.toy").read_text().splitlines()
    trace = decode(tiny_capture(origin_ns=1_700_000_000_000_000_000))
    ev = trace.events
    # One line a slice, as the toy writer wrote it from the drawing (not Chrome's JSON).
    assert len(lines) == len(ev["start_ns"]) > 0
    got = sorted((name, int(a), int(b)) for _, name, a, b in (ln.split("\t") for ln in lines))
    want = sorted(
        (trace.event_name(int(e)), int(a), int(b))
        for e, a, b in zip(ev["event"], ev["start_ns"], ev["end_ns"], strict=True)
    )
    assert got == want
    # Its name is a --format choice, its extension in the help; a text format may go to stdout.
    helped = _cli_with_recipe(tmp_path, "export", "--help")
    assert "toy" in helped.stdout and ".toy" in helped.stdout
    piped = _cli_with_recipe(tmp_path, "export", path, "-", "--format", "toy")
    assert piped.returncode == 0 and piped.stdout.splitlines() == lines


@pytest.fixture
def registry(monkeypatch):
    """The registry, restored after the test."""
    for name in ("FORMATS", "EXTENSIONS", "_NAMES"):
        monkeypatch.setattr(formats, name, dict(getattr(formats, name)))
    import sm_profiler.export as export_pkg

    monkeypatch.setattr(export_pkg, "FORMATS", formats.FORMATS)
    monkeypatch.setattr(export_pkg, "EXTENSIONS", formats.EXTENSIONS)
    return formats


def test_export_writes_a_registered_format_with_its_own_writer(registry, tmp_path):
    from sm_profiler.export import export

    def write(d, f):
        f.write(b"%d slices" % len(d.slices["lane"]))

    registry.register(registry.Format("n", (".n.txt",), write, False, "count", "a count"))
    export(decode(tiny_capture()), tmp_path / "a.n.txt")
    export(decode(tiny_capture()), tmp_path / "b.json.gz", format="n")  # .gz: gzipped
    import gzip

    n = len(decode(tiny_capture()).events["kind"])
    assert (tmp_path / "a.n.txt").read_bytes() == b"%d slices" % n
    assert gzip.open(tmp_path / "b.json.gz").read() == b"%d slices" % n


def test_a_name_or_extension_taken_is_refused(registry):
    def write(d, f):
        pass

    with pytest.raises(ConfigError, match="json taken already"):
        registry.register(registry.Format("x", (".x",), write, False, "x", "x", aliases=("json",)))
    with pytest.raises(ConfigError, match=r"\.pftrace taken already"):
        registry.register(registry.Format("x", (".pftrace",), write, True, "x", "x"))
    with pytest.raises(ConfigError, match="lower-case extensions with their dot"):
        registry.register(registry.Format("x", ("X",), write, True, "x", "x"))
    with pytest.raises(ConfigError, match="not ending .gz"):
        registry.register(registry.Format("x", (".x.gz",), write, True, "x", "x"))
    assert list(registry.FORMATS) == ["perfetto", "chrome"]


def test_the_built_in_formats_keep_their_names_extensions_and_errors():
    assert list(formats.EXTENSIONS.items()) == [
        (".perfetto-trace", "perfetto"),
        (".pftrace", "perfetto"),
        (".json.gz", "chrome"),
        (".json", "chrome"),
    ]
    assert formats.names() == ["chrome", "json", "perfetto", "pftrace"]
    assert formats.of_path("A.JSON.GZ").name == "chrome" and formats.of_path("a.gz") is None
    err = formats.unknown_extension("a.xyz", "--format {}")
    assert str(err).endswith(
        "use one of .perfetto-trace, .pftrace, .json.gz, .json or pass --format perfetto / "
        "--format chrome"
    )
    assert [f.suffix for f in formats.FORMATS.values()] == [".perfetto-trace", ".json"]
