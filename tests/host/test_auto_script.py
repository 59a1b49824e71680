"""`sm-profiler run`'s runner (sm_profiler/auto_mode/script.py) on the CPU: a script run in a fake
region that records two kernels' launches when it ends, through the runner and through main()
(auto mode's GPU check stubbed); tests/device/test_auto_gpu.py runs it on a GPU."""

from __future__ import annotations

import os
import sys

import pytest
from fake_run import GRACE_S, FakeRegion, patch_auto, run_in_process, written

from sm_profiler.auto_mode import script
from sm_profiler.auto_mode.script import Program, find_program, run_program


@pytest.fixture
def region():
    return FakeRegion()


def write_script(folder, text, name="s.py"):
    path = folder / name
    path.write_text(text)
    return str(path)


def test_the_script_runs_inside_the_region_with_its_arguments(tmp_path, region, capsys):
    seen = tmp_path / "seen"
    path = write_script(
        tmp_path,
        "import sys\n"
        "from pathlib import Path\n"
        f"Path({str(seen)!r}).write_text(repr((__name__, sys.argv[1:])))\n",
    )
    argv = sys.argv
    program = find_program(["--", path, "a", "--b"])
    assert program == Program(script=program.script, args=("a", "--b"))
    assert run_program(program, region) == 0
    assert seen.read_text() == "('__main__', ['a', '--b'])"
    assert (region.entered, region.exited) == (1, 1) and sys.argv is argv


def test_profile_writes_the_report_and_the_files(tmp_path, region, capsys):
    path = write_script(tmp_path, "pass\n")
    out = tmp_path / "out"
    out.mkdir()
    assert script.profile(find_program([path]), region, str(out), width=80) == 0
    stdout = capsys.readouterr().out
    assert stdout.startswith("sm_profiler auto: 4 launches of 2 kernels")
    assert "wrote" in stdout and sorted(os.listdir(out)) == sorted(script.OUTPUTS)
    assert (out / "auto_stats.txt").read_text().startswith("sm_profiler auto:")


def test_profile_says_when_nothing_was_recorded(tmp_path, capsys):
    path = write_script(tmp_path, "pass\n")
    assert script.profile(find_program([path]), FakeRegion(records=False), str(tmp_path)) == 1
    assert "no instrumented kernel ran; (a note of the fake region)" in capsys.readouterr().err


def test_output_folder_is_absolute_and_checked_without_creating_anything(tmp_path, monkeypatch):
    from sm_profiler import ConfigError

    monkeypatch.chdir(tmp_path)
    assert script.output_folder("o/p") == str(tmp_path / "o" / "p")
    assert script.output_folder(".") == str(tmp_path)
    assert os.listdir(tmp_path) == []
    with pytest.raises(ConfigError, match="NUL"):
        script.output_folder("a\0b")
    (tmp_path / "link").symlink_to(tmp_path / "gone")
    with pytest.raises(ConfigError, match="is a file, not a folder"):
        script.output_folder("link")  # a dangling link cannot become the folder
    if os.geteuid() != 0:  # root may write anywhere
        (tmp_path / "ro").mkdir(mode=0o555)
        with pytest.raises(ConfigError, match="no permission to write in"):
            script.output_folder("ro/out")


def test_dash_m_finds_a_package_in_the_current_folder_and_imports_it_in_the_region(
    tmp_path, monkeypatch, region
):
    # Issue 31, item 17: `python -m` puts the current folder first on sys.path; the console
    # script's sys.path[0] is its own folder, so `-m pkg.mod` did not see ./pkg.
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    path = list(sys.path)
    (tmp_path / "pkg").mkdir()
    log = tmp_path / "log"
    (tmp_path / "pkg" / "__init__.py").write_text(f"open({str(log)!r}, 'a').write('init ')\n")
    (tmp_path / "pkg" / "mod.py").write_text(
        f"import sys\nopen({str(log)!r}, 'a').write(repr((__name__, sys.argv, sys.path[0])))\n"
    )
    program = find_program(["-m", "pkg.mod", "x"])
    assert program == Program(module="pkg.mod", args=("x",))
    assert not log.exists() and "pkg" not in sys.modules  # looked up, nothing run
    assert sys.path == path
    calls = []

    class Watch(FakeRegion):
        def __enter__(self):
            calls.append(log.exists())
            return super().__enter__()

    try:
        assert run_program(program, Watch()) == 0
    finally:
        for name in [n for n in sys.modules if n == "pkg" or n.startswith("pkg.")]:
            del sys.modules[name]
    assert calls == [False]  # pkg/__init__.py ran in the region, not before it
    argv = [str(tmp_path / "pkg" / "mod.py"), "x"]
    assert log.read_text() == "init " + repr(("__main__", argv, str(tmp_path)))
    assert sys.path == path


@pytest.fixture
def fake_auto(monkeypatch):
    """main(["run", ...]) with a FakeRegion for auto mode's region, its GPU check passed."""
    return patch_auto(setattr=monkeypatch.setattr)


def run_cli(*argv):
    from sm_profiler.cli import main

    return main(["run", "--width", "80", *argv])


def test_ctrl_c_in_the_script_still_writes_the_recording(tmp_path, monkeypatch, fake_auto, capsys):
    # Issue 31, item 18: a KeyboardInterrupt left the run with nothing written.
    monkeypatch.chdir(tmp_path)
    write_script(tmp_path, "print('step 1')\nraise KeyboardInterrupt\n")
    assert run_cli("--out", "o", "--", "s.py") == 130
    out, err = capsys.readouterr()
    assert sorted(os.listdir(tmp_path / "o")) == sorted(script.OUTPUTS)
    assert out.startswith("step 1\nsm_profiler auto: 4 launches")
    assert fake_auto[0].exited == 1
    # Python's traceback, from the script's own frame, then what happens next.
    assert err.startswith(
        f'Traceback (most recent call last):\n  File "{tmp_path / "s.py"}", line 2, in <module>\n'
    )
    assert err.endswith(
        "KeyboardInterrupt\nsm-profiler run: interrupted; writing what it recorded\n"
    )


@pytest.mark.parametrize(
    "code, status, message",
    [
        ("sys.exit('it failed: no data')", 1, "it failed: no data\n"),
        ("sys.exit(['a'])", 1, "['a']\n"),
        ("sys.exit(3)", 3, ""),
        ("sys.exit(0)", 0, ""),
        ("sys.exit()", 0, ""),
        ("sys.exit(None)", 0, ""),
        ("raise SystemExit(False)", 0, ""),
        ("pass", 0, ""),
    ],
)
def test_sys_exit_is_the_status_and_its_message_is_printed(
    tmp_path, region, capsys, code, status, message
):
    # Issue 31, item 19: sys.exit("message") kept status 1 but swallowed the message.
    path = write_script(tmp_path, f"import sys\n{code}\n")
    assert run_program(find_program([path]), region) == status
    assert capsys.readouterr().err == message
    assert region.exited == 1


def test_a_script_that_raises_gets_pythons_traceback(tmp_path, region, capsys):
    path = write_script(tmp_path, "def f():\n    1 / 0\n\nf()\n")
    assert run_program(find_program([path]), region) == 1
    err = capsys.readouterr().err
    assert err.startswith(f'Traceback (most recent call last):\n  File "{path}", line 4')
    assert "ZeroDivisionError" in err and "runpy" not in err and "script.py" not in err
    assert err.endswith("sm-profiler run: the script raised; writing what it recorded\n")


def test_a_script_that_changes_folder_keeps_a_relative_out(tmp_path, monkeypatch, fake_auto):
    # Issue 31, item 20: a relative --out was then looked up from the script's folder, which
    # failed with a traceback, and auto.npz was lost.
    monkeypatch.chdir(tmp_path)
    (tmp_path / "elsewhere").mkdir()
    write_script(tmp_path, "import os\nos.chdir('elsewhere')\n")
    assert run_cli("--out", "o", "--", "s.py") == 0
    assert sorted(os.listdir(tmp_path / "o")) == sorted(script.OUTPUTS)
    assert os.getcwd() == str(tmp_path)


def test_the_script_runs_as_python_runs_it_and_the_caller_gets_its_state_back(
    tmp_path, monkeypatch, region, capsys
):
    (tmp_path / "real").mkdir()
    write_script(
        tmp_path / "real",
        "import os, sys\n"
        "print(repr((__name__, __file__, sys.argv, sys.path[0])))\n"
        "sys.argv.append('more'); sys.path.insert(0, 'junk'); sys.path = ['other']\n"
        "os.chdir('/')\n",
    )
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "link.py").symlink_to(tmp_path / "real" / "s.py")
    monkeypatch.chdir(tmp_path / "run")
    argv, path, saved_path = sys.argv, sys.path, list(sys.path)
    program = find_program(["link.py", "--x"])
    assert run_program(program, region) == 0
    link = str(tmp_path / "run" / "link.py")
    # __file__ and sys.argv[0]: the script's absolute path; sys.path[0]: its real folder.
    out = capsys.readouterr().out
    assert out == repr(("__main__", link, [link, "--x"], str(tmp_path / "real"))) + "\n"
    assert sys.argv is argv and sys.path is path and sys.path == saved_path
    assert os.getcwd() == str(tmp_path / "run")


@pytest.mark.parametrize("signame", ["SIGTERM", "SIGHUP"])
def test_a_stop_signal_in_the_script_still_writes_the_recording(
    tmp_path, monkeypatch, fake_auto, capsys, signame
):
    # Issue 42: torchrun stops a job's other ranks with SIGTERM; they wrote nothing before.
    import signal

    monkeypatch.chdir(tmp_path)
    write_script(
        tmp_path,
        "import os, signal, time\nprint('step 1')\n"
        f"os.kill(os.getpid(), signal.{signame})\n"
        "for _ in range(100):\n    time.sleep(0.1)\nprint('not reached')\n",
    )
    assert run_cli("--out", "o", "--", "s.py") == 128 + getattr(signal, signame)
    out, err = capsys.readouterr()
    assert sorted(os.listdir(tmp_path / "o")) == sorted(script.OUTPUTS)
    assert "not reached" not in out and "sm_profiler auto: 4 launches" in out
    assert f"sm-profiler run: {signame}; writing what it recorded" in err
    assert fake_auto[0].exited == 1
    assert signal.getsignal(getattr(signal, signame)) is not None  # put back: not ours
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL


def test_a_stop_signal_while_the_program_is_blocked_is_written_by_the_watcher(tmp_path):
    # A stop noted outside the program (here no program runs) and a region that does not end
    # (its own GPU wait blocked): the watcher waits its grace, writes what was recorded from
    # its own thread, and ends the process as the signal asked.
    import subprocess
    import time

    code = f"""
import os, signal, sys, time
from sm_profiler.auto_mode.stop_signals import StopSignals

def rescue(signum):
    open({str(tmp_path / "rescued")!r}, "w").write(str(signum))

with StopSignals(rescue, grace_s=0.5):
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(30)
print("not reached")
"""
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert time.monotonic() - t0 < 20
    assert r.returncode == 128 + 15, (r.returncode, r.stderr)
    assert (tmp_path / "rescued").read_text() == "15"
    assert "SIGTERM, and the region did not end within 0.5 s" in r.stderr
    assert "not reached" not in r.stdout


def test_sm_profilers_warnings_print_as_plain_lines_the_scripts_as_python_prints_them(
    tmp_path, monkeypatch, fake_auto, capsys, recwarn
):
    # Issue 46, item 5: `run` printed its own warnings as Python does, with a file, a line and
    # the source (`.../auto_mode/session.py:305: UserWarning: summarised ...`).
    import warnings

    from sm_profiler.auto_mode import session
    from sm_profiler.auto_mode.binding import AutoWarning

    def warns_at_exit(self, *exc):
        self.inside, self.exited = False, self.exited + 1
        for text, category, line in (
            ("sm_profiler.auto: 3 launches dropped", AutoWarning, 403),
            ("summarised 5 programs into counters", UserWarning, 305),
        ):
            module = "sm_profiler.auto_mode.session"
            warnings.warn_explicit(text, category, session.__file__, line, module=module)

    monkeypatch.setattr(FakeRegion, "__exit__", warns_at_exit)
    monkeypatch.chdir(tmp_path)
    write_script(tmp_path, "import warnings\nwarnings.warn('the script warns')\n")
    shown = warnings.showwarning
    assert run_cli("--out", "o", "--", "s.py") == 0
    err = capsys.readouterr().err
    assert err == (
        "sm-profiler run: 3 launches dropped\nsm-profiler run: summarised 5 programs into counters\n"
    )
    assert [str(w.message) for w in recwarn] == ["the script warns"]  # Python's, untouched
    assert warnings.showwarning is shown


def test_a_stop_signal_while_the_main_thread_runs_no_python_is_written_by_the_watcher(tmp_path):
    # A main thread blocked where no handler runs (a GPU wait whose peer died): here in a C call
    # (os.system) with SIGTERM blocked, so the signal, sent from the shell once the main thread
    # is in the call, goes to the watcher's thread. The watcher finds the signal's number unread
    # after its grace, writes what was recorded from its own thread and ends the process as the
    # signal asked.
    import signal

    r = run_in_process(
        tmp_path,
        "import os, signal\n"
        "signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})\n"
        "os.system('exec </dev/null >/dev/null 2>&1; kill -TERM $PPID; exec sleep 10')\n"
        "print('not reached')\n",
    )
    assert r.returncode == 128 + signal.SIGTERM, r.stderr
    assert "not reached" not in r.stdout
    assert (
        f"sm-profiler run: SIGTERM, and the main thread ran no Python within {GRACE_S:g} s "
        "(blocked in a GPU wait?); writing what it recorded from another thread\n"
    ) in r.stderr
    assert written(tmp_path) == sorted(script.OUTPUTS)


def test_a_stop_signal_while_the_region_starts_stops_the_program_before_it_runs(
    tmp_path, monkeypatch, fake_auto, capsys
):
    # Noted while the region starts (auto mode's own code: never interrupted), raised as the
    # program is about to start: the program does not run, the region ends and writes.
    import signal

    def signalled_at_start(self):
        os.kill(os.getpid(), signal.SIGTERM)
        self.inside, self.entered = True, self.entered + 1
        return self

    monkeypatch.setattr(FakeRegion, "__enter__", signalled_at_start)
    monkeypatch.chdir(tmp_path)
    write_script(tmp_path, "print('the program ran')\n")
    assert run_cli("--out", "o", "--", "s.py") == 128 + signal.SIGTERM
    out, err = capsys.readouterr()
    assert "the program ran" not in out
    assert err.startswith("sm-profiler run: SIGTERM; writing what it recorded\n")
    assert sorted(os.listdir(tmp_path / "o")) == sorted(script.OUTPUTS)
    assert fake_auto[0].exited == 1
