"""The flight recorder (sm_profiler/auto_mode/flight.py; issue 54, items 2-4) on the CPU: a real
AutoProfiler over a simulated GPU (flight_inputs.SimGpu: its buffer a numpy array read through a
stand-in copier, a stream that runs launches when told, timing events on it, a host clock the
test moves). A planted slow step gives exactly one dump, holding it and the K - 1 steps before;
one dump a window and N a run; a stall names the kernel in flight, also where the ring has
wrapped (stale records of its last lap are not taken for programs that ended); SIGUSR1 writes
and the job goes on; a bad end writes; settings that cannot work are refused before anything
runs; host memory stays flat over 10,000 steps, nothing copied to the host per step.
tests/device/test_auto_flight_gpu.py runs it on a GPU."""

from __future__ import annotations

import os
import re
import signal
import threading
import time
import tracemalloc

import numpy as np
import pytest
from flight_inputs import (
    FLIGHT_KERNELS,
    SimGpu,
    flight_table,
    flight_words,
    patch_flight_auto,
    steady_step,
)

from sm_profiler.auto_mode.flight import (
    clear_stale,
    descriptor_areas,
    drop_overwritten,
    dump_stem,
    end_of,
)
from sm_profiler.auto_mode.flight_triggers import EVENTS, FlightConfig
from sm_profiler.errors import ConfigError
from sm_profiler.report.dump import dump_lines, gpu_state
from sm_profiler.wire.capture import load

ADD, SUM, SPIN, WORK = 1, 2, 3, 4  # flight_inputs.FLIGHT_KERNELS
NAME = re.compile(r"^flight\.rank0\.\d{8}T\d{6}\.\d{3}Z\.(\w+)\.npz$")


@pytest.fixture
def sim(monkeypatch, tmp_path):
    made = []

    def make(capacity=4096, **settings):
        config = FlightConfig(out=str(tmp_path / "dumps"), **settings)
        made.append(SimGpu(monkeypatch, config, capacity))
        return made[-1]

    yield make
    for gpu in made:
        gpu.close()


def dumps_in(folder) -> list[str]:
    return sorted(f for f in os.listdir(folder) if f.endswith(".npz"))


def test_2_a_planted_slow_step_writes_one_dump_of_it_and_the_steps_before(sim, tmp_path):
    gpu = sim(steps=8)
    for s in range(60):
        steady_step(gpu, work_ms=9.0 if s == 37 else 3.0)  # step 37: 11 ms, 2.2x the others
    written = gpu.wait_for_dumps(1)
    gpu.close()
    time.sleep(0.1)
    assert len(written) == 1
    files = dumps_in(tmp_path / "dumps")
    assert len(files) == 1 and NAME.match(files[0]).group(1) == "slow"
    table = load(tmp_path / "dumps" / files[0])
    assert sorted(set(table.launches["step"].tolist())) == list(range(30, 38))
    assert table.num_launches == 16 and (table.launches["rows"] == 8).all()
    stem = written[0][: -len(".npz")]
    text = open(stem + "_stats.txt").read()
    assert text.startswith(
        "Flight recorder: step 37 was slow: 11.00 ms on the GPU, 2.20x the median 5.00 ms of"
    )
    assert re.search(r"\n    work_kernel  9\.00 ms \(median 3\.00 ms, \+6\.00 ms\)\n", text)
    assert os.path.getsize(stem + ".perfetto-trace") > 0
    assert gpu.copier.copies > 0 and gpu.prof.flight.budget.written == 1


def test_2_a_slow_step_the_gpu_ends_after_the_last_step_is_judged_at_the_regions_end(sim):
    # A loop that never syncs: the host queued every step before the GPU ran step 37.
    gpu = sim(steps=4)
    for s in range(40):
        gpu.launch(1, 8, 2.0)
        gpu.launch(4, 8, 9.0 if s == 37 else 3.0)
        gpu.step()
    assert gpu.prof.flight.written == []
    gpu.run_gpu()  # the region's end waits for the GPU, then stops the flight recorder
    gpu.close()
    assert len(gpu.prof.flight.written) == 1
    assert sorted(set(load(gpu.prof.flight.written[0]).launches["step"].tolist())) == [
        34,
        35,
        36,
        37,
    ]


def test_2_one_dump_a_window_and_at_most_max_dumps_a_run(sim, tmp_path):
    # Each dump is written before the next slow step (the steps a dump overlaps are not judged).
    gpu = sim(steps=4, dump_window_s=300)
    for s in range(45):
        steady_step(gpu, work_ms=9.0 if s in (10, 20) else 3.0)
        if s == 12:
            assert len(gpu.wait_for_dumps(1)) == 1
    gpu.close()
    assert len(gpu.prof.flight.written) == 1
    assert gpu.prof.flight.budget.refused == {"slow: within --dump-window-s 300 of the last one": 1}
    gpu = sim(steps=4, dump_window_s=0, max_dumps=2)
    for s in range(45):
        steady_step(gpu, work_ms=9.0 if s in (10, 20, 30) else 3.0)
        if s in (12, 22):
            gpu.wait_for_dumps(1 + (s == 22))
    gpu.close()
    assert len(gpu.prof.flight.written) == 2
    assert gpu.prof.flight.budget.refused == {"over --max-dumps 2": 1}


def stuck(gpu, steps):
    """`steps` steady steps, then a step whose add kernel runs, whose spin kernel never ends
    and whose two launches after it wait."""
    for _ in range(steps):
        steady_step(gpu)
    gpu.launch(ADD, 8, 2.0)
    gpu.run_gpu()
    end = gpu.stream.queued_ms
    gpu.launch(SPIN, 1, 1e9)
    gpu.launch(SUM, 8, 1.0)
    gpu.launch(WORK, 8, 1.0)
    gpu.run_gpu(end)


@pytest.mark.parametrize("capacity", [4096, 256])  # 256: the ring has wrapped 3 times
def test_2_a_stall_writes_what_each_gpu_was_in_while_the_main_thread_is_blocked(sim, capacity):
    gpu = sim(capacity, steps=4, stall_s=5, dump_window_s=0)
    stuck(gpu, 50)
    assert gpu.prof.flight.written == []
    gpu.now_s += 5.5  # no step ended for 5.5 s: the watchdog writes from its own thread
    written = gpu.wait_for_dumps(1)
    assert len(written) == 1 and NAME.match(os.path.basename(written[0])).group(1) == "stall"
    table = load(written[0])
    state = gpu_state(table, 0)
    assert (state.host_step, state.last_step_ended) == (50, 49)
    assert (state.last_ended.kernel, state.last_ended.step) == ("triton_poi_fused_add_0", 50)
    assert [(q.kernel, q.ended, q.records) for q in state.in_flight] == [("spin_kernel", 0, 1)]
    assert [q.kernel for q in state.not_reached] == ["triton_red_fused_sum_1", "work_kernel"]
    assert sorted(set(table.launches["step"].tolist())) == [47, 48, 49, 50]
    text = "\n".join(dump_lines(table, 80))
    assert text.startswith("Flight recorder: no step ended within 5 s (step 50 began 5.5 s")
    gpu.now_s += 5.5
    time.sleep(0.6)
    assert len(gpu.prof.flight.written) == 1  # one dump a stall: the next one waits for a step
    gpu.run_gpu()
    for _ in range(4):  # a stall that passed: the job goes on, nothing said, no slow dump of it
        steady_step(gpu)
    time.sleep(0.6)
    assert len(gpu.prof.flight.written) == 1


def test_2_a_stall_time_set_near_the_jobs_own_step_time_is_said_once_with_the_fix(sim):
    gpu = sim(steps=4, stall_s=5)
    for _ in range(8):
        gpu.now_s += 3.0  # steps of 3 s: a stall time of 5 s is too near
        steady_step(gpu)
    gpu.now_s += 5.5
    assert len(gpu.wait_for_dumps(1)) == 1
    with pytest.warns(Warning, match=r"stall_s=5 is below twice this job's median step \(3"):
        steady_step(gpu)


def test_2_records_a_wrapped_ring_left_in_a_launch_that_has_not_run_read_as_unwritten():
    # Slots 0-7 held a launch of step 1 (the last lap); a launch of step 3 was given them and
    # has not run. Step 2 is the newest the GPU finished.
    words, areas = flight_words([(ADD, 1, 8, 8, 0, 100), (WORK, 2, 8, 8, 10_000, 100)], 16)
    words = words.copy()
    ring = areas.take(8, step=4)  # step 3 (tag 4): the ring wraps onto slot 0
    assert ring == 0
    words = np.concatenate([areas.header_and_areas(), words[-16 * 4 :]])
    assert clear_stale(words, done_tag=3) == 8
    a = descriptor_areas(words)
    assert a[:, 2].tolist() == [3, 4]  # step 1's area is the ring's no more
    assert clear_stale(words, done_tag=3) == 0


def test_2_a_launch_the_ring_gave_away_while_it_was_read_is_left_out():
    words, areas = flight_words([(ADD, 1, 8, 8, 0, 100), (WORK, 2, 8, 8, 10_000, 100)])
    after = areas.areas()[1:]  # the first area's slots went to a launch queued meanwhile
    kept, dropped = drop_overwritten(words, after)
    assert dropped == 1 and descriptor_areas(kept)[:, 2].tolist() == [3]
    assert drop_overwritten(words, areas.areas()) == (words, 0)


def test_2_sigusr1_writes_the_ring_and_the_job_goes_on_after_the_programs_own_handler(
    sim, monkeypatch
):
    theirs = []
    old = signal.signal(signal.SIGUSR1, lambda *a: theirs.append(a[0]))
    try:
        gpu = sim(steps=4)
        for _ in range(10):
            steady_step(gpu)
        os.kill(os.getpid(), signal.SIGUSR1)
        for _ in range(10):
            steady_step(gpu)  # the job goes on
        written = gpu.wait_for_dumps(1)
        assert theirs == [signal.SIGUSR1]
        assert len(written) == 1 and NAME.match(os.path.basename(written[0])).group(1) == "SIGUSR1"
        assert set(load(written[0]).launches["step"].tolist()) <= set(range(7, 21))
        gpu.close()
        assert signal.getsignal(signal.SIGUSR1) is not gpu.prof.flight._on_demand
    finally:
        signal.signal(signal.SIGUSR1, old)


def _native_ignore(signum: int) -> None:
    """What libtriton.so's LLVM does at its first compile in a process: a handler set with
    sigaction behind Python's back (here SIG_IGN; LLVM's swallows SIGUSR1 the same way), so that
    signal.getsignal still names Python's."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.signal.restype = ctypes.c_void_p
    libc.signal.argtypes = (ctypes.c_int, ctypes.c_void_p)
    libc.signal(signum, 1)  # SIG_IGN


def _a_kernel_compiles(monkeypatch) -> None:
    """The binding loads one more kernel in the step now running (a compile)."""
    from sm_profiler.auto_mode import binding

    kernels = dict(binding.STATE.kernels)
    kernels[99] = next(iter(kernels.values()))
    monkeypatch.setattr(binding.STATE, "kernels", kernels)


def test_2_sigusr1_still_writes_after_a_compile_hid_its_handler(sim, monkeypatch):
    """Issue 54 (H200, 2026-11-29): Triton's LLVM replaced the SIGUSR1 handler at the first
    compile in the region, and `kill -USR1` wrote nothing, silently. A step that compiled now
    sets ours again."""
    gpu = sim(steps=4)
    for _ in range(5):
        steady_step(gpu)
    _native_ignore(signal.SIGUSR1)
    _a_kernel_compiles(monkeypatch)
    steady_step(gpu)  # its end: ours again
    os.kill(os.getpid(), signal.SIGUSR1)
    for _ in range(5):
        steady_step(gpu)
    written = gpu.wait_for_dumps(1)
    gpu.close()
    assert len(written) == 1 and NAME.match(os.path.basename(written[0])).group(1) == "SIGUSR1"


def test_2_a_compile_leaves_a_handler_the_program_set_since_alone(sim, monkeypatch):
    theirs = []
    gpu = sim(steps=4)
    steady_step(gpu)
    old = signal.signal(signal.SIGUSR1, lambda *a: theirs.append(a[0]))
    try:
        _a_kernel_compiles(monkeypatch)
        steady_step(gpu)
        os.kill(os.getpid(), signal.SIGUSR1)
        steady_step(gpu)
        gpu.close()  # the thread writes what was asked before it ends
        assert theirs == [signal.SIGUSR1] and gpu.prof.flight.written == []
    finally:
        gpu.close()
        signal.signal(signal.SIGUSR1, old)


def test_2_a_bad_end_writes_the_last_steps_of_the_regions_table(sim, tmp_path):
    gpu = sim(steps=3)
    for _ in range(12):
        steady_step(gpu)
    words = {i: r[0] for i, r in gpu.prof.read_live().items()}
    gpu.prof._table = region = gpu.prof.live_table(words)  # what the region's end read back
    gpu.close()
    path = gpu.prof.flight.ended_by(ValueError("loss is nan"))
    assert "flight" not in region.sessions[0] and "job" not in region.metadata  # the user's
    assert NAME.match(os.path.basename(path)).group(1) == "exception"
    table = load(path)
    assert sorted(set(table.launches["step"].tolist())) == [9, 10, 11]
    assert (
        open(path[:-4] + "_stats.txt")
        .read()
        .startswith("Flight recorder: the program raised ValueError: loss is nan\n")
    )
    assert gpu.prof.flight.ended_by(SystemExit(0)) is None


def test_2_what_a_bad_end_is():
    assert end_of(ValueError("x\ny")) == ("exception", "the program raised ValueError: x y")
    assert end_of(KeyboardInterrupt())[0] == "SIGINT"
    assert end_of(SystemExit(0)) is None and end_of(SystemExit(None)) is None
    assert end_of(SystemExit(3)) == ("exit", "the program exited with status 3")
    assert end_of(SystemExit("bye"))[0] == "exit"
    assert end_of(status=130)[0] == "SIGINT"
    assert end_of(status=0) is None
    assert end_of(status=1, signum=signal.SIGTERM) == ("SIGTERM", "SIGTERM: the program stopped")


@pytest.mark.parametrize("written_ns", [0, 10**12, 1_764_417_785_123_456_789])
def test_2_a_dump_is_named_by_rank_time_and_trigger_and_never_overwrites_one(tmp_path, written_ns):
    stem = dump_stem(str(tmp_path), 3, "stall", written_ns)
    sec, ns = divmod(written_ns, 10**9)
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(sec)) + f".{ns // 10**6:03d}Z"
    assert os.path.basename(stem) == f"flight.rank3.{stamp}.stall"
    open(stem + ".npz", "w").close()
    assert dump_stem(str(tmp_path), 3, "stall", written_ns) == stem + ".2"


def test_2_the_ring_says_once_when_k_steps_do_not_fit_with_the_fix(sim):
    gpu = sim(256, steps=8)
    with pytest.warns(Warning) as got:
        for _ in range(20):
            steady_step(gpu, programs=20)  # 40 records a step; 8 + 2 steps need 400
    ours = [str(w.message) for w in got if "flight recorder" in str(w.message)]
    assert len(ours) == 1
    assert ours[0].endswith(
        "a dump would hold 4 whole steps. Raise capacity (--capacity 400) or lower "
        "flight_recorder (--flight-recorder 4)"
    )
    assert "8 steps of up to 40 records need 400 records (0 MiB of GPU memory)" in ours[0]


def test_4_host_memory_stays_flat_over_10000_steps_and_nothing_is_copied_per_step(sim):
    gpu = sim(4096, steps=8)
    tracemalloc.start()
    try:
        for s in range(10_000):
            steady_step(gpu, programs=2)
            if s == 3_000:
                base = tracemalloc.take_snapshot()
        grown = tracemalloc.take_snapshot().compare_to(base, "filename")
    finally:
        tracemalloc.stop()
    growth = sum(d.size_diff for d in grown)
    assert growth < 64 << 10, "\n".join(str(d) for d in grown[:8])
    assert gpu.copier.copies == 0 and gpu.prof.flight.written == []
    assert gpu.stream.events_made == EVENTS  # the step clock's events, made once


def test_2_settings_that_cannot_work_are_refused_before_anything_runs():
    import sm_profiler

    with pytest.raises(ConfigError, match="flight_recorder must be a whole number of steps"):
        sm_profiler.auto(flight_recorder=0)
    with pytest.raises(ConfigError, match="records every step: leave out schedule="):
        sm_profiler.auto(flight_recorder=8, schedule="1-2")
    with pytest.raises(ConfigError, match="leave out torch_profiler="):
        sm_profiler.auto(flight_recorder=8, torch_profiler=True)
    with pytest.raises(ConfigError, match="ring of 4 records: raise capacity"):
        sm_profiler.auto(4, flight_recorder=8)
    with pytest.raises(ConfigError, match="slow_factor must be a number over 1"):
        sm_profiler.auto(flight_recorder=sm_profiler.flight_recorder(slow_factor=-1))
    prof = sm_profiler.auto(flight_recorder=True)
    assert prof.ring is True and prof.flight_config.steps == 8


def test_2_flight_recorder_names_the_settings_defaults_once():
    import inspect

    import sm_profiler

    params = inspect.signature(sm_profiler.flight_recorder).parameters
    assert sm_profiler.flight_recorder() == FlightConfig()
    assert list(params) == list(FlightConfig.__dataclass_fields__)
    assert FLIGHT_KERNELS  # the stand-in's kernels are the report's names


# -- sm-profiler run --flight-recorder --------------------------------------------------------


def run_flight(tmp_path, monkeypatch, body: str, *options):
    """`sm-profiler run --flight-recorder=4 OPTIONS -- s.py` of a script that runs 12 steady
    steps on the simulated GPU, then `body`; (status, stderr's lines, the dumps written)."""
    from sm_profiler.cli import main

    patch_flight_auto(monkeypatch)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "s.py").write_text(
        "import os, signal, sys\nimport flight_inputs\n"
        "for _ in range(12):\n    flight_inputs.steady_step(flight_inputs.CURRENT[0])\n" + body
    )
    status = main(["run", "--flight-recorder=4", *options, "--out", "o", "--", "s.py"])
    found = dumps_in(tmp_path / "o") if os.path.isdir(tmp_path / "o") else []
    return status, found


@pytest.mark.parametrize(
    "body, status, trigger, why",
    [
        ("raise ValueError('loss is nan')\n", 1, "exception", "the program raised ValueError"),
        ("sys.exit(3)\n", 3, "exit", "the program exited with status 3"),
        ("raise KeyboardInterrupt\n", 130, "SIGINT", "SIGINT: the program was interrupted"),
        ("os.kill(os.getpid(), signal.SIGTERM)\n", 143, "SIGTERM", "SIGTERM: the program stopped"),
    ],
)
def test_2_run_writes_the_ring_when_the_program_ends_badly(
    tmp_path, monkeypatch, capsys, body, status, trigger, why
):
    got, found = run_flight(tmp_path, monkeypatch, body)
    assert got == status
    assert len(found) == 1 and NAME.match(found[0]).group(1) == trigger
    table = load(tmp_path / "o" / found[0])
    assert sorted(set(table.launches["step"].tolist())) == [8, 9, 10, 11]
    text = (tmp_path / "o" / found[0].replace(".npz", "_stats.txt")).read_text()
    assert text.startswith(f"Flight recorder: {why}")
    err = capsys.readouterr().err
    assert f"sm-profiler run: flight recorder: 1 dump(s) in {tmp_path / 'o'}" in err


def test_2_run_writes_nothing_when_the_program_ends_well(tmp_path, monkeypatch, capsys):
    assert run_flight(tmp_path, monkeypatch, "sys.exit(0)\n") == (0, [])
    assert not os.path.exists(tmp_path / "o")
    assert "flight recorder: no dump written (no slow step, stall or bad end)" in (
        capsys.readouterr().err
    )


@pytest.mark.parametrize(
    "options, says",
    [
        (["--slow-factor", "2"], "--slow-factor is a setting of the flight recorder: add"),
        (["--max-dumps", "3"], "--max-dumps is a setting of the flight recorder"),
        (["--flight-recorder=0"], "flight_recorder must be a whole number of steps from 1"),
        (["--flight-recorder", "--slow-factor", "0.9"], "slow_factor must be a number over 1"),
        (["--flight-recorder", "--stall-s", "-1"], "stall_s must be a number of seconds from 1"),
        (["--flight-recorder", "--steps", "3-4"], "records every step: leave out schedule="),
        (["--flight-recorder", "--torch"], "leave out torch_profiler= (--torch, --torch-json)"),
        (
            ["--flight-recorder", "--torch-json"],
            "leave out torch_profiler= (--torch, --torch-json)",
        ),
        (["--flight-recorder=9", "--capacity", "8"], "ring of 8 records: raise capacity"),
    ],
)
def test_2_run_refuses_flight_settings_that_cannot_work_before_anything_runs(
    tmp_path, capsys, options, says
):
    from sm_profiler.cli import main

    script = tmp_path / "s.py"
    script.write_text("open('ran', 'w').close()\n")
    assert main(["run", *options, "--out", str(tmp_path / "o"), "--", str(script)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("sm-profiler: error: ") and says in err and err.count("\n") == 1
    assert not os.path.exists(tmp_path / "ran") and not os.path.exists(tmp_path / "o")


def test_3_stats_of_a_folder_of_dumps_sets_each_ranks_newest_side_by_side(tmp_path, capsys):
    from sm_profiler.auto_mode.flight import write_dump
    from sm_profiler.cli import main

    t0 = 1_764_417_785_123_000_000
    steady = [(k, s, 8, 8, s * 10**6 + 1000 * k, 500) for s in range(82, 90) for k in (1, 2)]
    stuck0 = steady + [(1, 90, 8, 8, 90 * 10**6, 500), (3, 90, 1, 0, 0, 0)]
    stuck1 = steady[:-2] + [(1, 89, 8, 8, 89 * 10**6, 500), (3, 89, 1, 0, 0, 0)]

    def info(step, written_ns):
        why = f"no step ended within 60 s (step {step} began 61.0 s before)"
        return {"trigger": "stall", "why": why, "step": step, "steps": [step - 7, step],
                "host_step": step, "written_ns": written_ns, "live": True}  # fmt: skip

    folder = str(tmp_path / "d")
    write_dump(flight_table(steady[:4], info(83, t0 - 10**12)), folder, "slow", t0 - 10**12)
    write_dump(flight_table(stuck0, info(90, t0)), folder, "stall", t0)
    write_dump(flight_table(stuck1, info(89, t0 + 10**9), rank=1), folder, "stall", t0 + 10**9)
    assert len(dumps_in(folder)) == 3
    assert main(["stats", folder, "--width", "80"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(
        "Flight recorder: 2 ranks side by side by step\n"
        "  rank 0: last step ended: 89; last kernel ended: triton_poi_fused_add_0 (step\n"
        "    90); in flight: spin_kernel\n"
        "  rank 1 is one step behind (its last step ended: 88; rank 0's: 89); last kernel\n"
        "    ended: triton_poi_fused_add_0 (step 89); in flight: spin_kernel\n"
    )
    assert "(trigger: slow)" not in out  # rank 0's older dump is left out
    assert main(["merge", folder]) == 0
    assert os.path.getsize(os.path.join(folder, "auto.ranks.perfetto-trace")) > 0


def test_2_steps_a_dump_overlaps_are_not_judged(sim, monkeypatch):
    # A dump's read and write hold the host (and the GIL) up: the steps it overlaps look slow.
    from sm_profiler.auto_mode import flight

    writing, release = threading.Event(), threading.Event()
    real = flight.write_dump

    def slow_write(*args, **kwargs):
        writing.set()
        release.wait(10)  # the write goes on until the test has run its steps
        return real(*args, **kwargs)

    monkeypatch.setattr(flight, "write_dump", slow_write)
    gpu = sim(steps=4, dump_window_s=0)
    for _ in range(10):
        steady_step(gpu)
    gpu.prof.flight.ask(flight.Dump("SIGUSR1", gpu.prof.step_num, "asked"))
    assert writing.wait(5)
    for _ in range(5):
        steady_step(gpu, work_ms=9.0)  # 2.2x, while the dump is written
    release.set()
    assert len(gpu.wait_for_dumps(1)) == 1
    for _ in range(8):
        steady_step(gpu)
    steady_step(gpu, work_ms=9.0)  # now it counts
    steady_step(gpu)
    steady_step(gpu)
    gpu.close()  # every dump asked for is written
    written = gpu.prof.flight.written
    assert [NAME.match(os.path.basename(p)).group(1) for p in written] == ["SIGUSR1", "slow"]
