"""Hostile input, round 5 (issue 52): stop signals under `sm-profiler run` (the runner,
sm_profiler/auto_mode/script.py, and its watcher, stop_signals.py): a program that handles the
signal itself, `nohup`, a signal while the runner reports the program's exit. Each runs
`sm-profiler run` in a process of its own with a stand-in region (tests/support/fake_run.py),
whose outputs are written when it ends; the watcher's grace is 0.5 s, and each program's own
work after the signal takes longer than that. Each test names the item of the issue it keeps
fixed; each failed on the main of 2026-11-29."""

from __future__ import annotations

import signal

from fake_run import run_in_process as run
from fake_run import written

from sm_profiler.auto_mode.script import OUTPUTS

# The program's own work after the signal, ten pieces of 0.15 s (three times the grace):
# going on, or saving a checkpoint.
GO_ON = "for _ in range(10):\n    time.sleep(0.15)\n"
CHECKPOINT = """
import time
def save_checkpoint():
    with open("ckpt", "w") as f:
        for i in range(10):
            f.write(f"part {i}\\n")
            f.flush()
            time.sleep(0.15)
        f.write("complete\\n")
"""


def test_15_a_programs_sigterm_handler_saves_its_checkpoint_and_exits_as_it_says(tmp_path):
    # The watcher ended the process with 143 at the grace, half-way through the checkpoint.
    r = run(
        tmp_path,
        CHECKPOINT + "import os, signal, sys\n"
        "def on_term(signum, frame):\n"
        "    save_checkpoint()\n"
        "    sys.exit(7)\n"
        "signal.signal(signal.SIGTERM, on_term)\n"
        "print('handler is ours:', signal.getsignal(signal.SIGTERM) is on_term)\n"
        "os.kill(os.getpid(), signal.SIGTERM)\n"
        "time.sleep(30)\n",
    )
    assert r.returncode == 7, r.stderr
    assert (tmp_path / "ckpt").read_text().endswith("part 9\ncomplete\n")
    assert "handler is ours: True" in r.stdout
    assert "another thread" not in r.stderr
    assert written(tmp_path) == sorted(OUTPUTS)


def test_15_a_program_that_catches_ctrl_c_saves_its_checkpoint(tmp_path):
    # SIGINT's own handler (KeyboardInterrupt) ran, the watcher ended the process with 130.
    r = run(
        tmp_path,
        CHECKPOINT + "import os, signal, sys\n"
        "try:\n"
        "    os.kill(os.getpid(), signal.SIGINT)\n"
        "    time.sleep(30)\n"
        "except KeyboardInterrupt:\n"
        "    save_checkpoint()\n"
        "    sys.exit(5)\n",
    )
    assert r.returncode == 5, r.stderr
    assert (tmp_path / "ckpt").read_text().endswith("part 9\ncomplete\n")
    assert "another thread" not in r.stderr
    assert written(tmp_path) == sorted(OUTPUTS)


def test_15_a_program_goes_on_after_its_own_sighup_handler(tmp_path):
    r = run(
        tmp_path,
        "import os, signal, time\n"
        "seen = []\n"
        "signal.signal(signal.SIGHUP, lambda signum, frame: seen.append(signum))\n"
        "os.kill(os.getpid(), signal.SIGHUP)\n" + GO_ON + "print('finished after', seen)\n",
    )
    assert r.returncode == 0, r.stderr
    assert f"finished after [{int(signal.SIGHUP)}]" in r.stdout
    assert "SIGHUP" not in r.stderr
    assert written(tmp_path) == sorted(OUTPUTS)


def test_15_a_slow_region_end_is_not_rescued_while_the_main_thread_ends_it(tmp_path):
    # SIGTERM stops the program (no handler of its own); the region's end has read its records
    # and takes three graces to build its table: the watcher wrote from its thread meanwhile
    # and ended the process before the main thread had finished.
    script = "import os, signal, time\nos.kill(os.getpid(), signal.SIGTERM)\ntime.sleep(30)\n"
    r = run(tmp_path, script, FAKE_REGION_END_S="1.5")
    assert r.returncode == 128 + signal.SIGTERM, r.stderr
    assert "SIGTERM; writing what it recorded" in r.stderr
    assert "(the fake region's end read its records)" in r.stderr
    assert "another thread" not in r.stderr.replace("it writes them", "")
    assert written(tmp_path) == sorted(OUTPUTS)


def test_15_a_forked_child_stopped_by_sigterm_is_not_the_run_stopped(tmp_path):
    # A child forked from the program (multiprocessing, a DataLoader worker) inherited the
    # handler and the wakeup fd: SIGTERM to the child raised Stopped in it (the child wrote the
    # run's outputs) and its signal number reached the parent's watcher, which ended the run.
    r = run(
        tmp_path,
        "import os, signal, time\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    time.sleep(30)\n"
        "    os._exit(0)\n"
        "time.sleep(0.2)\n"
        "os.kill(pid, signal.SIGTERM)\n"
        "_, status = os.waitpid(pid, 0)\n"
        "print('child ended by signal', os.WTERMSIG(status) if os.WIFSIGNALED(status) else 0)\n"
        + GO_ON
        + "print('parent finished')\n",
    )
    assert r.returncode == 0, r.stderr
    assert f"child ended by signal {int(signal.SIGTERM)}" in r.stdout
    assert "parent finished" in r.stdout and r.stdout.count("wrote") == 1
    assert "SIGTERM" not in r.stderr
    assert written(tmp_path) == sorted(OUTPUTS)


def test_16_sighup_ignored_by_nohup_stays_ignored(tmp_path):
    r = run(
        tmp_path,
        "import os, signal, time\n"
        "print('SIGHUP ignored:', signal.getsignal(signal.SIGHUP) is signal.SIG_IGN)\n"
        "os.kill(os.getpid(), signal.SIGHUP)\n" + GO_ON + "print('finished')\n",
        ignore=(signal.SIGHUP,),
    )
    assert r.returncode == 0, r.stderr
    assert "SIGHUP ignored: True" in r.stdout and "finished" in r.stdout
    assert written(tmp_path) == sorted(OUTPUTS)


# A program's exit whose report (the message of sys.exit, an exception's traceback) runs
# code of the program's own: a stop signal comes while the runner prints it.
SIGNAL_WHILE_PRINTED = """
import os, signal, sys
class SaysStop:
    def __str__(self):
        os.kill(os.getpid(), signal.SIGTERM)
        return "stopping now"
"""


def test_17_a_signal_while_the_sys_exit_message_is_printed(tmp_path):
    r = run(tmp_path, SIGNAL_WHILE_PRINTED + "sys.exit(SaysStop())\n")
    assert r.returncode == 1, r.stderr
    assert "stopping now" in r.stderr
    assert "Traceback" not in r.stderr and "Stopped" not in r.stderr
    assert written(tmp_path) == sorted(OUTPUTS)


def test_17_a_signal_while_the_traceback_is_printed(tmp_path):
    r = run(
        tmp_path,
        SIGNAL_WHILE_PRINTED + "class Failed(Exception):\n"
        "    def __str__(self):\n"
        "        return str(SaysStop())\n"
        "raise Failed()\n",
    )
    assert r.returncode == 1, r.stderr
    assert "Failed: stopping now" in r.stderr
    assert "Stopped" not in r.stderr
    assert r.stderr.endswith("sm-profiler run: the script raised; writing what it recorded\n")
    assert written(tmp_path) == sorted(OUTPUTS)
