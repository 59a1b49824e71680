"""Hostile input, round 5 (issue 52): the torch.profiler trace a rank file carries
(export/auto_torch_parts.py), read by `advise`, `stats` and `merge DIR`. Each test names the item
of the issue it keeps fixed; each failed on the main of 2026-11-29."""

from __future__ import annotations

import gzip
import os
import zipfile

import pytest
from auto_inputs import json_bomb, save_with_member, table_of, two_kernels
from captures import cupti_doc
from cli_runs import run_cli

from sm_profiler.errors import InflationError
from sm_profiler.export import auto_job as jobs
from sm_profiler.export import auto_torch_parts as torch_parts
from sm_profiler.wire import torch_trace

MEMORY_BYTES = 2 << 30  # parsing the 300 MiB trace takes several times this


def _rank(r: int):
    t = table_of(two_kernels(), session={"rank": r, "world_size": 2})
    t.metadata["job"] = dict(jobs.job_identity(), run_id="run-a")
    return t


@pytest.fixture(scope="module")
def bombed(tmp_path_factory):
    """A run folder of two ranks: rank 0's file carries a 0.3 MiB torch trace that inflates to
    300 MiB, rank 1's a real one."""
    d = tmp_path_factory.mktemp("bomb")
    save_with_member(d / "auto.rank0.npz", _rank(0), torch_parts.MEMBER, json_bomb(300 << 20))
    doc = cupti_doc([{"name": "gemm", "start": 0, "end": 10, "launch": 0}], num_sms=4)
    _rank(1).save(d / "auto.rank1.npz", torch_parts.members(doc))
    assert os.path.getsize(d / "auto.rank0.npz") < 1 << 20
    return d


@pytest.mark.parametrize("command", ["advise", "stats", "merge"])
def test_4_a_gzip_bomb_in_a_rank_file_is_left_out_said_and_the_rest_read(bombed, command):
    r = run_cli(command, bombed, timeout=300, memory_bytes=MEMORY_BYTES)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr[-3000:]
    err = " ".join(r.stderr.split())
    with zipfile.ZipFile(bombed / "auto.rank0.npz") as z:  # 64 x 0.3 MiB + 64 MiB
        limit = torch_trace.inflation_limit(z.getinfo(f"{torch_parts.MEMBER}.npy").compress_size)
    assert "auto.rank0.npz' was left out" in err, err
    assert f"inflate past {limit / 2**20:.0f} MiB" in err and limit < 100 << 20, err
    assert "MAX_TORCH_RATIO" in err and "auto.rank1.npz" not in err  # rank 1's trace is read
    if command == "merge":  # rank 1's torch rows merged, rank 0's programs without theirs
        assert (bombed / torch_parts.RANKS_TORCH_PERFETTO).exists()
        assert "rank 0's file carries no torch.profiler trace" in err
    else:  # rank 1's CUPTI rows used
        out = " ".join(r.stdout.split())
        assert ("CUPTI: every kernel on 1 of 2 GPUs" if command == "advise" else "CUPTI") in out


def test_4_a_gzip_bomb_in_a_single_file_is_left_out_by_advise(bombed):
    r = run_cli("advise", bombed / "auto.rank0.npz", timeout=300, memory_bytes=MEMORY_BYTES)
    assert r.returncode == 0 and "was left out" in r.stderr, r.stderr[-3000:]
    assert "What to fix first" in r.stdout


def test_4_the_member_is_held_to_the_limit_of_a_gz_given_to_merge_torch(tmp_path, monkeypatch):
    # Small limits, so that small files cross them: the member's limit is the one a .gz given
    # to `merge --torch` has for the same stored bytes (torch_trace.inflation_limit).
    monkeypatch.setattr(torch_trace, "MAX_TORCH_SLACK", 1 << 20)
    blob = b"".join(json_bomb(8 << 20))
    gz = tmp_path / "t.json.gz"
    gz.write_bytes(blob)
    limit = torch_trace.inflation_limit(len(blob))
    with pytest.raises(InflationError, match=f"more than {limit:,} bytes"):
        torch_trace.read_torch_doc(str(gz))  # merge --torch t.json.gz
    path = tmp_path / "auto.npz"
    save_with_member(path, _rank(0), torch_parts.MEMBER, [blob])
    with zipfile.ZipFile(path) as z:  # the member's stored bytes: its .npy header and the gzip
        stored = z.getinfo(f"{torch_parts.MEMBER}.npy").compress_size
    assert 0 < stored - len(blob) <= 256
    limit = torch_trace.inflation_limit(stored)
    with pytest.raises(InflationError, match=f"more than {limit:,} bytes"):
        torch_parts.read(path)
    notes: list[str] = []
    assert torch_parts.read(path, notes) is None and len(notes) == 1
    assert "was left out" in notes[0] and f"past {limit / 2**20:.0f} MiB" in notes[0]
    # A trace within the limit is read as before.
    small = gzip.compress(b'{"traceEvents": []}')
    save_with_member(path, _rank(0), torch_parts.MEMBER, [small])
    assert torch_parts.read(path, notes) == {"traceEvents": []} and len(notes) == 1


def test_4_a_member_the_zip_itself_inflates_is_held_to_its_stored_size(tmp_path, monkeypatch):
    # A gzip of stored blocks (as large as the trace, and as repetitive), deflated by the zip:
    # 8 MiB of member in a few KiB of file. The limit is of the bytes stored in the file.
    monkeypatch.setattr(torch_trace, "MAX_TORCH_SLACK", 1 << 20)
    path = tmp_path / "auto.npz"
    save_with_member(path, _rank(0), torch_parts.MEMBER, json_bomb(8 << 20, level=0), True)
    assert os.path.getsize(path) < 1 << 20
    with pytest.raises(InflationError, match="inflate past 1 MiB"):
        torch_parts.read(path)
    notes: list[str] = []
    assert torch_parts.read(path, notes) is None and "was left out" in notes[0]
