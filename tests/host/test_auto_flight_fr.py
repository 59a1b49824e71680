"""PyTorch's own flight recorder read at a dump (issue 54, item 3: "cross-reference PyTorch's own
flight recorder where it is on, without depending on it"): its newest collectives, each with its
sequence number, name, process group, state and the wall-clock time the host queued it (the clock
of our launch log and step starts). A real one on the CPU (gloo records its collectives as NCCL
does, torch 2.8+), in a process of its own: the recorder's size is read once per process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
from repo_paths import ROOT

SCRIPT = """
import json, sys, time
import torch, torch.distributed as dist
from sm_profiler.auto_mode import flight
before = flight.fr_collectives()
dist.init_process_group("gloo", rank=0, world_size=1, init_method="file://" + sys.argv[1])
t0 = time.time_ns()
t = torch.ones(4)
for _ in range(3):
    dist.all_reduce(t)
t1 = time.time_ns()
print(json.dumps({"before": before, "t0": t0, "t1": t1, "trace": flight._nccl_trace()}))
dist.destroy_process_group()
"""


def test_a_dump_reads_pytorchs_flight_recorder_collectives_on_the_wall_clock(tmp_path):
    env = dict(os.environ, TORCH_FR_BUFFER_SIZE="64", PYTHONPATH=str(ROOT))
    env.pop("TORCH_NCCL_TRACE_BUFFER_SIZE", None)
    r = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path / "store")],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert got["before"] == {}  # no process group yet: nothing read
    fr = got["trace"]["nccl_trace"]
    assert (fr["variable"], fr["buffer_size"]) == ("TORCH_FR_BUFFER_SIZE", 64)
    collectives = fr["collectives"]
    if not collectives and "unread" in fr:
        pytest.skip(f"this torch's flight recorder: {fr['unread']}")
    assert [c["seq"] for c in collectives] == [1, 2, 3]
    assert {c["name"] for c in collectives} == {"gloo:all_reduce"}
    assert {c["pg"] for c in collectives} == {"default_pg"}
    assert all(got["t0"] <= c["created_ns"] <= got["t1"] for c in collectives)
    assert set(collectives[0]) <= {"seq", "p2p_seq", "name", "pg", "state"} | {
        "created_ns",
        "started_ns",
        "completed_ns",
    }


def test_a_flight_recorder_that_does_not_answer_holds_a_dump_up_no_longer_than_its_wait(
    monkeypatch,
):
    import types

    from torch._C import _distributed_c10d as c10d

    from sm_profiler.auto_mode import flight

    fake = types.SimpleNamespace(is_available=lambda: True, is_initialized=lambda: True)
    monkeypatch.setitem(sys.modules, "torch.distributed", fake)
    monkeypatch.setattr(c10d, "_dump_fr_trace_json", lambda *a: time.sleep(5), raising=False)
    t = time.monotonic()
    assert flight.fr_collectives(wait_s=0.2) == {"unread": "it did not answer within 0.2 s"}
    assert time.monotonic() - t < 2
    monkeypatch.setattr(c10d, "_dump_fr_trace_json", lambda *a: b"not json", raising=False)
    assert flight.fr_collectives()["unread"].startswith("JSONDecodeError")
