"""The flight recorder's settings and triggers (sm_profiler/auto_mode/flight_triggers.py; issue
54, item 2), with no GPU: settings refused before anything runs, each with the fix; step times
from timing events read only once done (stand-ins over a stream that runs behind the host);
the slow-step verdict against the median; one dump a window and N a run; the stall time."""

from __future__ import annotations

import ctypes
import math

import pytest
from flight_inputs import FakeStream

from sm_profiler.auto_mode.flight_triggers import (
    DumpBudget,
    FlightConfig,
    SlowSteps,
    StepClock,
    stall_after_s,
)
from sm_profiler.errors import ConfigError


@pytest.mark.parametrize(
    "options, says",
    [
        ({"steps": 0}, "flight_recorder must be a whole number of steps from 1"),
        ({"steps": -3}, "flight_recorder must be a whole number of steps from 1"),
        ({"steps": 2.5}, "flight_recorder must be a whole number of steps from 1"),
        ({"steps": True}, "flight_recorder must be a whole number of steps from 1"),
        ({"slow_factor": 1}, r"slow_factor must be a number over 1 .*got 1$"),
        ({"slow_factor": 0.5}, "slow_factor must be a number over 1"),
        ({"slow_factor": -2.0}, "slow_factor must be a number over 1"),
        ({"slow_factor": math.nan}, "slow_factor must be a number over 1"),
        ({"slow_factor": math.inf}, "slow_factor must be a number over 1"),
        ({"stall_s": 0}, "stall_s must be a number of seconds from 1"),
        ({"stall_s": -5.0}, "stall_s must be a number of seconds from 1"),
        ({"stall_s": 0.5}, "above the job's longest step"),
        ({"dump_window_s": -1}, "dump_window_s must be a number of seconds from 0"),
        ({"max_dumps": -1}, "max_dumps must be a whole number from 0"),
        ({"max_dumps": 2.0}, "max_dumps must be a whole number from 0"),
        ({"out": ""}, "out must name a folder"),
    ],
)
def test_settings_that_cannot_work_are_refused_with_the_fix(options, says):
    with pytest.raises(ConfigError, match=says):
        FlightConfig(**options)


def test_flight_recorder_takes_true_a_number_of_steps_or_settings():
    assert FlightConfig.of(None, 4096) is None and FlightConfig.of(False, 4096) is None
    assert FlightConfig.of(True, 4096) == FlightConfig()
    assert FlightConfig.of(3, 4096).steps == 3
    config = FlightConfig(steps=4, slow_factor=2.0, stall_s=5, dump_window_s=0, max_dumps=0)
    assert FlightConfig.of(config, 4096) is config
    with pytest.raises(ConfigError, match="flight_recorder must be a whole number"):
        FlightConfig.of("8", 4096)


def test_more_steps_than_the_ring_has_records_is_refused():
    with pytest.raises(ConfigError, match=r"keeps 9 steps.*ring of 8 records: raise capacity"):
        FlightConfig.of(9, 8)


def test_a_step_time_is_read_once_its_end_has_completed_never_waited_for():
    stream = FakeStream()
    clock = StepClock(stream.event, events=8)
    assert stream.events_made == 0  # made at the first step's start (CUDA is in use), once
    got = []
    for step, ms in enumerate([5.0, 7.0, 6.0, 9.0]):
        clock.mark(step)
        stream.queue(ms)
        got += clock.ready()  # the GPU has run nothing yet: nothing is read
    assert got == [] and clock.done_step == -1
    stream.run_to(12.0)  # steps 0 (0-5 ms) and 1 (5-12 ms) ended
    clock.mark(4)
    assert clock.ready() == [(0, 5_000_000), (1, 7_000_000)] and clock.done_step == 1
    stream.catch_up()
    assert clock.ready() == [(2, 6_000_000), (3, 9_000_000)] and clock.done_step == 3
    assert clock.ready() == []  # each step read once
    assert stream.events_made == 8


def test_the_clock_reuses_its_events_and_leaves_a_boundary_untimed_when_all_are_pending():
    stream = FakeStream()
    clock = StepClock(stream.event, events=4)
    for step in range(10):  # the GPU never catches up: 3 events pending at most
        clock.mark(step)
        stream.queue(1.0)
    events = clock._pool
    assert sum(e.records for e in events) == 3  # the other boundaries went untimed
    stream.catch_up()
    assert clock.ready() == [(0, 1_000_000), (1, 1_000_000)]
    for step in range(10, 1010):  # a long run: the four events, recorded over and over
        clock.mark(step)
        stream.queue(2.0)
        stream.catch_up()
        clock.ready()
    assert stream.events_made == 4 and sum(e.records for e in events) > 1000


def test_a_step_over_the_factor_times_the_median_is_slow_and_only_after_five_steps():
    slow = SlowSteps(1.5)
    assert slow.judge(0, 10_000_000) is None  # no history yet: even a long step 0
    for step in range(1, 5):
        assert slow.judge(step, 100 + step) is None
    verdict = slow.judge(5, 300)
    assert verdict is not None
    assert (verdict.step, verdict.step_ns, verdict.median_ns, verdict.history) == (5, 300, 103, 5)
    assert slow.judge(6, 150) is None  # 1.46x of 103.5 rounded: not over 1.5x


def test_a_job_that_slows_down_for_good_stops_being_slow_once_the_median_follows():
    slow = SlowSteps(1.5)
    flags = [slow.judge(s, 100) for s in range(10)]
    flags += [slow.judge(s, 300) for s in range(10, 60)]
    hits = [v.step for v in flags if v is not None]
    assert hits[0] == 10 and hits == list(range(10, 10 + len(hits)))
    assert len(hits) < 20  # the median of the last 32 steps is 300 before long


def test_one_dump_a_window_and_at_most_max_dumps():
    budget = DumpBudget(window_s=60, max_dumps=3)
    assert budget.allow("slow", 1000.0)
    assert not budget.allow("slow", 1059.9)
    assert budget.allow("stall", 1059.9)  # a slow step never keeps a stall from being written
    assert budget.allow("slow", 1060.0)
    assert not budget.allow("stall", 5000.0)  # three written: no more, however long after
    assert budget.refused == {
        "slow: within --dump-window-s 60 of the last one": 1,
        "over --max-dumps 3": 1,
    }
    assert not DumpBudget(0, 0).allow("slow", 0.0)


def test_the_stall_time_is_the_one_set_or_ten_steps_at_least_a_minute():
    assert stall_after_s(3.0, [100.0]) == 3.0
    assert stall_after_s(None, []) == 60.0
    assert stall_after_s(None, [0.5, 2.0, 1.0]) == 60.0
    assert stall_after_s(None, [0.5, 9.0, 1.0]) == 90.0


def test_the_clock_gives_its_events_back_at_the_end():
    stream = FakeStream()
    destroyed = []
    clock = StepClock(stream.event, events=4)
    clock.mark(0)
    for e in clock._pool:
        e.destroy = lambda e=e: destroyed.append(e)
    pool = list(clock._pool)
    clock.close()
    assert destroyed == pool and clock.ready() == []
    clock.mark(1)  # a region started again makes its events again
    assert stream.events_made == 8


class _FakeDriver:
    """cuEventRecord, cuEventQuery, cuStreamIsCapturing as the driver answers them."""

    def __init__(self, pending=False, capture_status=0):
        self.recorded, self.pending, self.status = [], pending, capture_status

    def calls(self):
        def record(event, stream):
            self.recorded.append((event.value, stream.value))
            return 0

        def query(event):
            return 600 if self.pending else 0  # CUDA_ERROR_NOT_READY

        def capturing(stream, status):
            status._obj.value = self.status
            return 0

        def elapsed(ms, start, end):
            ms._obj.value = (end.value - start.value) / 4  # ms between two events, by handle
            return 0

        return record, query, capturing, elapsed


def test_the_driver_event_records_on_the_stream_given_and_reads_not_ready_as_pending(monkeypatch):
    from sm_profiler.auto_mode import driver

    fake = _FakeDriver(pending=True)
    monkeypatch.setattr(driver, "_event_calls", fake.calls)
    event = driver.TimingEvent.__new__(driver.TimingEvent)
    event.handle = ctypes.c_void_p(0xE0)
    event.record(stream=0x5EA)
    assert fake.recorded == [(0xE0, 0x5EA)]
    assert event.query() is False
    fake.pending = False
    assert event.query() is True
    assert driver.capturing(0x5EA) is False
    fake.status = 1  # CU_STREAM_CAPTURE_STATUS_ACTIVE
    assert driver.capturing(0x5EA) is True
    end = driver.TimingEvent.__new__(driver.TimingEvent)
    end.handle = ctypes.c_void_p(0xE6)
    assert event.elapsed_time(end) == 1.5
