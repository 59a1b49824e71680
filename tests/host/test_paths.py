"""Writing files (sm_profiler/paths.py): every writer checks the path first, writes atomically
(a failure leaves the old file), never follows a symlink at its temporary name, and gives the
output the usual permissions. Regression tests of issues 15 and 23, named test_<item>_..."""

from __future__ import annotations

import os

import pytest
from captures import kernel_capture

from sm_profiler.errors import CaptureError
from sm_profiler.export import export
from sm_profiler.trace.decode import decode
from sm_profiler.wire.capture import save_many


@pytest.mark.parametrize("ext", [".json", ".json.gz", ".perfetto-trace"])
def test_6_a_failed_export_leaves_the_old_file(tmp_path, small_capture, monkeypatch, ext):
    path = tmp_path / f"t{ext}"
    path.write_bytes(b"old trace")
    trace = decode(small_capture)
    from dataclasses import replace

    from sm_profiler.export import FORMATS

    def full(*a, **k):
        raise OSError(28, "No space left on device")

    for name, fmt in FORMATS.items():  # every format's writer fails part-way
        monkeypatch.setitem(FORMATS, name, replace(fmt, write=full))
    with pytest.raises(CaptureError, match=f"cannot write .*t{ext}'.*No space left on device"):
        export(trace, path)
    assert path.read_bytes() == b"old trace"
    assert os.listdir(tmp_path) == [path.name]  # no temporary file left behind
    monkeypatch.undo()
    export(trace, path)
    assert path.read_bytes() != b"old trace" and os.listdir(tmp_path) == [path.name]


@pytest.mark.parametrize("path", ["/sys/t.json", "/proc/t.json", "nul\0here.json"])
def test_7_unwritable_paths_are_capture_errors(small_capture, path):
    if not os.path.isdir(os.path.dirname(path) or ".") and "\0" not in path:
        pytest.skip(f"no {os.path.dirname(path)} here")
    trace = decode(small_capture)
    with pytest.raises(CaptureError, match="cannot write"):
        export(trace, path)
    with pytest.raises(CaptureError, match="cannot write"):
        save_many([small_capture], path.replace(".json", ".npz"))


@pytest.mark.parametrize("writer", ["export_json", "export_perfetto", "save", "merge"])
def test_15_writers_never_follow_a_symlink_at_a_temporary_name(tmp_path, writer, monkeypatch):
    import os

    from sm_profiler.export import export
    from sm_profiler.export.merge import merge_ranks
    from sm_profiler.wire.capture import save_many

    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    ext = {
        "export_json": ".json",
        "export_perfetto": ".perfetto-trace",
        "save": ".smp",
        "merge": ".json",
    }[writer]
    out = tmp_path / f"out{ext}"
    # The names the old writer would have used (and a spread of pids around this one).
    for pid in range(max(1, os.getpid() - 5), os.getpid() + 6):
        os.symlink(victim, f"{out}.{pid}.tmp")
    cap = kernel_capture()
    if writer.startswith("export"):
        export(decode(cap), out)
    elif writer == "save":
        save_many([cap], out)
    else:
        merge_ranks([[cap]], out, align="none")
    assert victim.read_text() == "precious\n"
    assert out.stat().st_size > 0 and not out.is_symlink()
    leftovers = [
        p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp") and not p.is_symlink()
    ]
    assert leftovers == []


def test_15_the_output_keeps_the_usual_permissions(tmp_path):
    import os
    import stat

    from sm_profiler.wire.capture import save_many

    old = os.umask(0o022)
    try:
        save_many([kernel_capture()], tmp_path / "c.smp")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "c.smp").stat().st_mode) == 0o644
