"""The rescue (sm_profiler/auto_mode/rescue.py, AutoProfiler.rescue) on the CPU: a GPU's buffer
read by a stop signal's watcher while the main thread is blocked in a GPU wait (issue 54, item
1), through a stand-in for driver.HostCopier over a bytes array that stands for the device
buffer; tests/device/test_auto_rescue_gpu.py runs it on a GPU with a kernel that never ends."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import numpy as np
import pytest

from sm_profiler.auto_mode import binding
from sm_profiler.auto_mode.rescue import Copied, read_device
from sm_profiler.auto_mode.session import AutoProfiler
from sm_profiler.wire import format as fmt
from sm_profiler.wire.auto_areas import Areas

STALL_S = 0.2


class FakeCopier:
    """driver.HostCopier as the rescue calls it, over `device` (uint8): a copy arrives at once,
    except from copy number `stuck_at` on, which never arrives (`hang`: whose call never
    returns; `error`: which raises it)."""

    def __init__(self, device, chunk_bytes, stuck_at=None, hang=False, error=None):
        self.device, self.chunk = device, np.zeros(chunk_bytes, np.uint8)
        self.stuck_at, self.hang, self.error = stuck_at, hang, error
        self.copies, self.arrived, self.bound_in = 0, True, None

    def bind(self):
        self.bound_in = threading.current_thread().name

    def copy(self, offset, nbytes):
        self.copies += 1
        if self.stuck_at is not None and self.copies > self.stuck_at:
            if self.error is not None:
                raise self.error
            if self.hang:
                threading.Event().wait()
            self.arrived = False
            return
        self.chunk[:nbytes] = self.device[offset : offset + nbytes]

    def done(self):
        return self.arrived


def device_bytes(n=10_000):
    return np.random.default_rng(0).integers(0, 256, n, dtype=np.uint8)


def test_a_buffer_is_read_whole_a_chunk_at_a_time_from_a_thread_of_its_own():
    device = device_bytes()
    copier, out = FakeCopier(device, 4096), np.zeros(device.size, np.uint8)
    assert read_device(copier, out, STALL_S) == Copied(device.size, device.size)
    assert (out == device).all()
    assert copier.copies == 3  # 4096 + 4096 + 1808
    assert copier.bound_in == "sm-profiler-rescue-copy"  # the context made current there


@pytest.mark.parametrize("stuck_at", [0, 1, 2])
def test_a_copy_that_does_not_arrive_ends_the_read_with_the_chunks_that_did(stuck_at):
    # A copy queued behind a kernel that never ends (a blocking stream, a wedged device).
    device = device_bytes()
    copier, out = FakeCopier(device, 4096, stuck_at=stuck_at), np.zeros(device.size, np.uint8)
    t0 = time.monotonic()
    got = read_device(copier, out, STALL_S)
    assert time.monotonic() - t0 < STALL_S + 2
    assert got.nbytes == 4096 * stuck_at and got.total == device.size
    assert got.why == f"the copy did not finish within {STALL_S:g} s (queued behind a kernel " + (
        "that does not end?)"
    )
    assert (out[: got.nbytes] == device[: got.nbytes]).all() and not out[got.nbytes :].any()


def test_a_driver_call_that_never_returns_ends_the_read():
    device = device_bytes()
    copier = FakeCopier(device, 4096, stuck_at=1, hang=True)
    out = np.zeros(device.size, np.uint8)
    t0 = time.monotonic()
    got = read_device(copier, out, STALL_S)
    assert time.monotonic() - t0 < STALL_S + 2.5
    assert got.nbytes == 4096 and "a CUDA call did not return within 0.2 s" in got.why


def test_a_copy_that_fails_says_why():
    error = RuntimeError("cuMemcpyDtoHAsync failed with CUDA error 700")
    copier = FakeCopier(device_bytes(), 4096, stuck_at=0, error=error)
    got = read_device(copier, np.zeros(10_000, np.uint8), STALL_S)
    assert got == Copied(0, 10_000, f"the copy failed: {error}")


# -- AutoProfiler.rescue ---------------------------------------------------------------------------

CAPACITY = 4096  # record slots
T0 = 1_700_000_000_000_000_000  # a %globaltimer reading of today


def stuck_region(monkeypatch, copier_options=None):
    """An AutoProfiler whose region recorded, on GPU 0, a launch of kernel `add` (4 programs) in
    step 2 and one of `mul` (4 programs) in step 3; its buffer's copier a FakeCopier over the
    records as the device holds them. Nothing of torch.cuda may be called from here on."""
    import torch

    for name in ("Stream", "Event", "synchronize", "current_stream", "set_stream"):
        monkeypatch.setattr(torch.cuda, name, _forbidden(name), raising=False)
    kernels = {
        1: binding.KernelEntry(1, "add", "program", tag=11, devices={0}),
        2: binding.KernelEntry(2, "mul", "program", tag=12, devices={0}),
    }
    monkeypatch.setattr(binding.STATE, "kernels", kernels)
    prof = AutoProfiler(CAPACITY)
    areas = Areas(CAPACITY, ring=False)
    slots = np.zeros(CAPACITY, fmt.AUTO_RECORD_DTYPE)
    for step_tag, kernel in ((1, kernels[1]), (2, kernels[2])):
        first = areas.take(4, step=step_tag)
        for p in range(4):
            start = T0 + 1000 * step_tag + 10 * p
            slots[first + p] = (start, (start + 100) & fmt.LOW32, p, kernel.tag, 0, p, 0)
    prof._step_tags = {1: 2, 2: 3}
    props = SimpleNamespace(name="test GPU", multi_processor_count=4, major=9, minor=0)
    device = slots.view(np.uint8)
    prof._buffers[0] = {
        "buffer": SimpleNamespace(numel=lambda: CAPACITY * fmt.AUTO_RECORD_WORDS),
        "areas": areas,
        "props": props,
        "copier": FakeCopier(device, 1 << 16, **(copier_options or {})),
    }
    return prof


def _forbidden(name):
    def call(*args, **kwargs):
        raise AssertionError(f"torch.cuda.{name} called at the signal")

    return call


def test_a_rescue_writes_every_recorded_step_and_calls_nothing_of_torch_cuda(monkeypatch):
    prof = stuck_region(monkeypatch)
    assert prof.rescue() is True
    table = prof.table()
    assert table.launches["step"].tolist() == [2, 3]
    assert [table.kernels[k]["name"] for k in table.launches["kernel"]] == ["add", "mul"]
    assert table.counts()["unwritten"] == 0 and len(table.rows["sm"]) == 8
    assert prof.notes == [] and "rescue" not in table.metadata


def test_a_rescue_whose_copy_cannot_run_writes_what_the_host_knows(monkeypatch, tmp_path):
    prof = stuck_region(monkeypatch, {"stuck_at": 0})
    monkeypatch.setattr("sm_profiler.auto_mode.rescue.STALL_S", STALL_S)
    assert prof.rescue() is True
    note = (
        "cuda:0: no record read (the copy did not finish within 0.2 s (queued behind a kernel "
        "that does not end?)); what the host knows: 2 launches queued, in steps 2-3, 8 "
        "records; kernels: add, mul"
    )
    assert prof.notes == [note]
    table = prof.table()
    assert table.num_launches == 0 and table.metadata["rescue"] == [note]
    assert table.counts()["claimed"] == 8
    # `run` writes that table and the notes as the report (script.write_known).
    from sm_profiler.auto_mode import script
    from sm_profiler.wire.capture import load

    script.write_known(prof, str(tmp_path / "o"))
    assert load(tmp_path / "o" / "auto.npz").metadata["rescue"] == [note]
    assert (tmp_path / "o" / "auto_stats.txt").read_text() == f"sm_profiler auto: {note}\n"


def test_a_rescue_leaves_the_records_to_a_region_end_that_claimed_them(monkeypatch):
    # One reader: AutoProfiler.stop claims the records once its GPU waits are over.
    prof = stuck_region(monkeypatch)
    assert prof.reading.claim("stop")
    assert prof.rescue() is False
    assert prof._buffers[0]["copier"].copies == 0
    with pytest.raises(Exception, match="has not ended yet"):
        prof.table()
