"""`sm-profiler run` on the CPU: a stand-in for auto mode's region, whose captures are two
kernels' launches once it has ended, and `main` running the command with it in this process
(auto mode's GPU check passed), so that a test can run it as a process of its own and send it
signals: `python fake_run.py [run options] -- script.py [args]`."""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from auto_inputs import table_of, two_kernels  # noqa: E402


class FakeRegion:
    """A stand-in for AutoProfiler: a context manager whose captures are auto mode's, of two
    kernels, once the region has ended (none if `records` is False). Its end reads the records
    back at once and then takes `end_s` seconds (FAKE_REGION_END_S; AutoProfiler's table
    building a large buffer); a stop signal's rescue gets the records if it claims them first,
    as AutoProfiler's does."""

    def __init__(self, records: bool = True, end_s: float | None = None):
        from sm_profiler.auto_mode.stop_signals import OneReader

        self.records, self.inside, self.entered, self.exited = records, False, 0, 0
        self.notes = ["(a note of the fake region)"]
        self.end_s = float(os.environ.get("FAKE_REGION_END_S", 0)) if end_s is None else end_s
        self.reading = OneReader()

    def __enter__(self):
        self.inside, self.entered = True, self.entered + 1
        return self

    def __exit__(self, *exc):
        import time

        if self.reading.claim("stop") and self.end_s:
            time.sleep(self.end_s)
            print("(the fake region's end read its records)", file=sys.stderr)
        self.inside, self.exited = False, self.exited + 1

    def rescue(self) -> bool:
        return self.reading.claim("rescue")  # the watcher claimed them first already

    def captures(self):
        if not self.records:
            return []
        return table_of(two_kernels())

    def decode(self):
        from sm_profiler.trace.decode import decode

        return decode(self.captures())

    def save(self, path):
        self.captures().save(path)

    def export(self, path):
        from sm_profiler.export import export

        return export(self.decode(), path)


def patch_auto(make=FakeRegion, setattr=setattr) -> list:
    """sm_profiler.auto made to return `make()` (the regions made are appended to the list
    returned) and auto mode's GPU check passed; `setattr`: e.g. pytest's monkeypatch.setattr."""
    import sm_profiler
    from sm_profiler.auto_mode import session

    regions: list = []

    def auto(capacity=None, **options):
        regions.append(make())
        return regions[-1]

    setattr(sm_profiler, "auto", auto)
    setattr(session, "check_can_run", lambda: None)
    return regions


GRACE_S = 0.5  # the stop watcher's grace in run_in_process


def run_in_process(tmp_path, script: str, ignore=(), **env):
    """`sm-profiler run --out o -- s.py` (s.py: `script`) in `tmp_path`, in a process of its
    own (this file's main), with the watcher's grace GRACE_S and `env` added to its
    environment; `ignore`: signals it inherits ignored, as `nohup` leaves SIGHUP. Returns the
    subprocess.CompletedProcess."""
    import subprocess

    from repo_paths import ROOT, SUPPORT

    (tmp_path / "s.py").write_text(script)
    env = dict(os.environ, SM_PROFILER_STOP_GRACE_S=str(GRACE_S), **env)
    env["PYTHONPATH"] = os.pathsep.join([ROOT, SUPPORT, env.get("PYTHONPATH", "")])
    command = [sys.executable, os.path.abspath(__file__), "--width", "80", "--out", "o"]
    command += ["--", "s.py"]
    if ignore:  # the runner's process starts with these ignored, as after exec from nohup
        nums = ", ".join(str(int(s)) for s in ignore)
        start = f"import os, signal, sys\nfor s in ({nums},): signal.signal(s, signal.SIG_IGN)\n"
        exec_ = [sys.executable, "-c", start + "os.execv(sys.executable, sys.argv[1:])"]
        command = [*exec_, *command]
    return subprocess.run(
        command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
    )


def written(tmp_path) -> list[str]:
    """The files in `tmp_path`/o, sorted ([] without the folder)."""
    out = tmp_path / "o"
    return sorted(os.listdir(out)) if out.is_dir() else []


def main(argv: list[str]) -> int:
    from sm_profiler.cli import main as cli

    patch_auto()
    return cli(["run", *argv])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
