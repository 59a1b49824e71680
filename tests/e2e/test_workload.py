"""Launch slots, labels and call sites, slot overflow, torch-trace and multi-rank merges, in the
interpreter (CI). The GPU side is tests/test_workload_gpu.py."""

from __future__ import annotations

import dataclasses
import json
import warnings

import numpy as np
import pytest
import repo_paths
import torch
import triton
import triton.language as tl

import sm_profiler
from sm_profiler import format as fmt
from sm_profiler import merge
from sm_profiler.capture import Capture
from sm_profiler.cli import main as cli_main
from sm_profiler.errors import ConfigError, FormatError
from sm_profiler.stats import compute_stats, format_stats
from sm_profiler.triton_ops import (
    profiler_event_end,
    profiler_event_instant,
    profiler_event_start,
    profiler_init,
)

pytestmark = pytest.mark.skipif(torch.cuda.is_available(), reason="interpreter tests")


@triton.jit
def instants(prof, N: tl.constexpr):
    ctx = profiler_init(prof, tl.program_id(0), 0)
    for _ in tl.static_range(N):
        ctx = profiler_event_instant(ctx, 1)


@triton.jit
def ranged(prof):
    ctx = profiler_init(prof)
    ctx = profiler_event_start(ctx, 0)
    ctx = profiler_event_end(ctx, 0)


def _prof(slots, blocks=2):
    p = sm_profiler.SmProfiler(blocks, 1, 8, device="cpu", slots=slots)
    p.register_event(0, "work")
    p.register_event(1, "tick")
    return p


def test_launches_without_a_sync_get_a_slot_and_a_label_each():
    p = _prof(8)
    for n in (1, 2, 3):
        instants[(2,)](p.get_buffer(), N=n)  # LINE_A
        ranged[(1,)](p.get_buffer(), num_warps=2)
    caps = p.captures()
    assert [c.kernel_name for c in caps] == ["instants", "ranged"] * 3
    assert [c.metadata["launch"] for c in caps] == list(range(6))
    assert caps[0].metadata["grid"] == [2, 1, 1] and caps[1].metadata["grid"] == [1, 1, 1]
    assert caps[1].metadata["num_warps"] == 2
    src = open(__file__).read().splitlines()
    line = next(i for i, t in enumerate(src, 1) if t.strip().endswith("# LINE_A"))
    assert caps[0].metadata["call_site"] == f"test_workload.py:{line} " + (
        "(test_launches_without_a_sync_get_a_slot_and_a_label_each)"
    )
    # Each slot holds its own launch: n instants per program in launch n.
    for k, n in enumerate((1, 2, 3)):
        t = sm_profiler.decode([caps[2 * k]])
        assert len(t) == 2 * n and int(t.lanes["initialized"].sum()) == 2
    assert not caps[0].words[fmt.HDR_SLOTS] and int(caps[3].words[fmt.HDR_LABEL]) > 0
    p.close()


def test_equal_launches_share_a_label_id():
    p = _prof(4)
    for _ in range(3):
        ranged[(1,)](p.get_buffer())
    ids = {int(c.words[fmt.HDR_LABEL]) for c in p.captures()}
    assert len(ids) == 1 and len(p._labels) == 1
    p.close()


def test_slots_that_run_out_are_counted_and_never_overwritten():
    p = _prof(3)
    for n in (1, 2, 3, 4, 5):
        instants[(2,)](p.get_buffer(), N=n)
    with pytest.warns(UserWarning, match="2 launches found all 3 slots used"):
        caps = p.captures()
    assert len(caps) == 3 and caps[-1].metadata["launches_without_slot"] == 2
    assert len(sm_profiler.decode([caps[-1]])) == 2 * 3  # launch 3's records, not 4's or 5's
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        text = " ".join(compute_stats(sm_profiler.decode(caps)).warnings)
    assert "2 launches after this one found every launch slot (3) used" in text
    p.close()


def test_snapshot_keeps_every_slot_and_starts_over():
    p = _prof(4)
    for _ in range(2):
        ranged[(1,)](p.get_buffer())
    first = p.snapshot()
    assert [c.kernel_name for c in first] == ["ranged", "ranged"]
    instants[(2,)](p.get_buffer(), N=1)
    caps = p.captures()
    assert [c.kernel_name for c in caps] == ["ranged", "ranged", "instants"]
    assert int(p.get_buffer()[fmt.HDR_SLOTS]) == fmt.slot_control(1, 4)
    p.close()


def test_manual_step_labels_launches_no_hook_sees():
    p = _prof(4)
    p.close()  # no hook: as for a CuteDSL or raw CUDA launch
    ranged[(2,)](p.get_buffer())
    p.step("my_cute_kernel", grid=(2,), num_warps=8)
    ranged[(2,)](p.get_buffer())  # a last launch with no step yet: its slot is still read
    caps = p.captures()
    assert [c.kernel_name for c in caps] == ["my_cute_kernel", "kernel"]  # no label: the default
    assert caps[0].metadata["grid"] == [2, 1, 1] and caps[0].metadata["num_warps"] == 8
    assert "test_workload.py" in caps[0].metadata["call_site"]
    assert "grid" not in caps[1].metadata


def test_plain_profilers_are_unchanged_and_refuse_step():
    p = sm_profiler.SmProfiler(2, 1, 8, device="cpu")
    assert p.get_buffer().numel() == p.layout.total_words
    assert not int(p.get_buffer()[fmt.HDR_SLOTS])
    with pytest.raises(ConfigError, match="slots=N"):
        p.step("k")
    for bad in (0, -1, True, 2.0):
        with pytest.raises(ConfigError, match="slots must be a positive int"):
            sm_profiler.SmProfiler(2, 1, 8, device="cpu", slots=bad)


def test_split_slots_checks_the_size_and_passes_plain_buffers():
    layout = fmt.Layout.checked(2, 1, 3)
    plain = np.zeros(layout.total_words, np.uint64)
    plain[: fmt.HEADER_WORDS] = layout.header()
    parts, missed = fmt.split_slots(plain)
    assert len(parts) == 1 and missed == 0 and parts[0] is plain
    words = np.zeros(fmt.slotted_words(layout.total_words, 3), np.uint64)
    for k in range(3):
        words[k * layout.total_words : k * layout.total_words + 8] = layout.header()
    words[fmt.HDR_SLOTS] = fmt.slot_control(5, 3)
    parts, missed = fmt.split_slots(words)
    assert len(parts) == 3 and missed == 2
    with pytest.raises(FormatError, match="3 slots"):
        fmt.split_slots(words[:-1])


def test_print_stats_groups_many_launches_by_kernel():
    p = _prof(12)
    for _ in range(5):
        ranged[(2,)](p.get_buffer())
        instants[(2,)](p.get_buffer(), N=1)
    stats = compute_stats(p.decode())
    rows = {r.kernel: r for r in stats.launches}
    assert rows["ranged"].count == 5 and rows["instants"].count == 5
    text = format_stats(stats, width=100)
    assert "launches by kernel" in text and "-- ranged: 5 launches" in text
    assert "capture 7" not in text  # per kernel, not per capture, past MAX_CAPTURE_SECTIONS
    p.close()


# -- merges ---------------------------------------------------------------------------------------


def _rank(r, clock=None, barrier=None, launches=2):
    p = _prof(4)
    p.metadata["rank"] = r
    if clock is not None:
        p.metadata["clock"] = clock
    if barrier is not None:
        p.metadata["barrier_ns"] = barrier
    for _ in range(launches):
        ranged[(2,)](p.get_buffer())
    caps = p.captures()
    p.close()
    return caps


def _procs(doc):
    return {
        e["pid"]: e["args"]["name"] for e in doc["traceEvents"] if e.get("name") == "process_name"
    }


def test_ranks_merge_by_barrier_stamps_into_gpu_sm_processes(tmp_path):
    a, b = _rank(0, barrier=10_000), _rank(1, barrier=13_000)
    info = merge.merge_ranks([a, b], tmp_path / "m.json")
    assert info["method"] == "barrier" and info["ranks"][1]["shift_ns"] == -3000
    doc = json.loads((tmp_path / "m.json").read_text())
    names = set(_procs(doc).values())
    assert {"GPU 0 · SM 0 (emulated)", "GPU 1 · SM 0 (emulated)", "GPU 1 · launches"} <= names
    # rank 1's kernel spans moved 3 µs earlier than their own times
    spans = {e["pid"]: e for e in doc["traceEvents"] if e.get("ph") == "X"
             and "launches" in _procs(doc).get(e["pid"], "")}  # fmt: skip
    tb = sm_profiler.decode([b[0]])
    base = doc["otherData"]["base_ns"]
    k1 = min((e for e in doc["traceEvents"] if e.get("ph") == "X"
              and _procs(doc).get(e["pid"]) == "GPU 1 · launches"), key=lambda e: e["ts"])  # fmt: skip
    assert k1["ts"] == pytest.approx((tb.start_ns - 3000 - base) / 1e3, abs=1e-3)
    assert len(spans) == 2


def test_ranks_merge_by_clock_samples_with_drift():
    clock0 = [{"host_ns": 0, "offset_ns": 5000, "error_ns": 400}]
    clock1 = [
        {"host_ns": 0, "offset_ns": -2000, "error_ns": 300},
        {"host_ns": 10**9, "offset_ns": -1000, "error_ns": 300},
    ]  # 1 ppm drift
    ranks, info = merge.align_ranks([_rank(0, clock=clock0), _rank(1, clock=clock1)])
    assert info["method"] == "clock"
    assert info["ranks"][1]["drift_ppm"] == pytest.approx(1.0)
    raw = sm_profiler.decode([_rank(1, clock=clock1)[0]])
    off = merge.clock_offset(_rank(1, clock=clock1))[0]
    assert off(raw.start_ns) == pytest.approx(-2000 + 1e-6 * (raw.start_ns + 2000), abs=1)
    assert ranks[0][1][0].start_ns < sm_profiler.decode([_rank(0)[0]]).start_ns


def test_merge_refuses_what_it_cannot_align(tmp_path):
    with pytest.raises(ConfigError, match="no clock samples"):
        merge.merge_ranks([_rank(0), _rank(1)], tmp_path / "m.json", align="clock")
    with pytest.raises(ConfigError, match=".json"):
        merge.merge_ranks([_rank(0)], tmp_path / "m.perfetto-trace")
    assert not (tmp_path / "m.perfetto-trace").exists()
    with pytest.raises(ConfigError, match="cannot read captures"):
        merge.merge_ranks([42], tmp_path / "m.json")


def _torch_doc(parts, offset_ns, base_ns, lead_ns=300, tail_ns=200):
    """A torch.profiler trace as Kineto writes it: kernel rows at ts = µs since base."""
    ev = [{"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 11, "tid": 11, "ts": 1.0,
           "dur": 2.0}]  # fmt: skip
    for t in parts:
        s = t.start_ns - offset_ns - lead_ns
        e = t.end_ns - offset_ns + tail_ns
        ev.append({"ph": "X", "cat": "kernel", "name": t.kernels[0].name, "pid": 0, "tid": 7,
                   "ts": (s - base_ns) / 1e3, "dur": (e - s) / 1e3})  # fmt: skip
    return {"schemaVersion": 1, "baseTimeNanoseconds": base_ns, "traceEvents": ev}


def test_torch_merge_aligns_by_the_kernels_own_rows(tmp_path):
    caps = _rank(0, launches=3)
    parts = [sm_profiler.decode([c]) for c in caps]
    base = parts[0].start_ns - 5_000_000
    doc = _torch_doc(parts, offset_ns=77_000, base_ns=base)
    info = sm_profiler.merge_torch_trace(doc, caps, tmp_path / "t.json")
    assert info["method"] == "kernels" and info["offset_ns"] == pytest.approx(77_300)
    err = info["error"][0]
    assert err["matched"] == 3 and err["max_abs_ns"] <= 501
    out = json.loads((tmp_path / "t.json").read_text())
    assert (
        out["baseTimeNanoseconds"] == base and out["sm_profiler_alignment"]["method"] == "kernels"
    )
    assert any(e.get("name") == "aten::add" for e in out["traceEvents"])  # torch rows kept
    ours = [e for e in out["traceEvents"] if e.get("pid", 0) >= merge.PID_BASE and e.get("ph") == "X"
            and e["name"] != "work"]  # fmt: skip
    first = min(e["ts"] for e in ours)
    assert first == pytest.approx((parts[0].start_ns - 77_300 - base) / 1e3, abs=2e-3)


def test_torch_merge_uses_clock_samples_and_a_given_offset(tmp_path):
    clock = [{"host_ns": 0, "offset_ns": 40_000, "error_ns": 500}]
    caps = _rank(0, clock=clock)
    parts = [sm_profiler.decode([c]) for c in caps]
    doc = _torch_doc(parts, offset_ns=40_000, base_ns=parts[0].start_ns - 10**6, lead_ns=0,
                     tail_ns=0)  # fmt: skip
    info = sm_profiler.merge_torch_trace(doc, caps, tmp_path / "a.json")
    assert info["method"] == "clock" and info["error"][0]["max_abs_ns"] <= 1
    info = sm_profiler.merge_torch_trace(doc, caps, tmp_path / "b.json", offset_ns=39_000)
    assert info["method"] == "given"
    assert info["error"][0]["start_delta_ns"]["median"] == pytest.approx(1000, abs=1)


def test_cli_merges_saved_rank_captures(tmp_path, capsys):
    files = []
    for r in range(2):
        f = tmp_path / f"rank{r}.smp"
        sm_profiler.save_many(_rank(r, barrier=1000 * r), f)
        files.append(str(f))
    out = tmp_path / "all.json"
    assert cli_main(["merge", *files, "-o", str(out)]) == 0
    assert "2 ranks, aligned by barrier" in capsys.readouterr().out
    names = set(_procs(json.loads(out.read_text())).values())
    assert any(n.startswith("GPU 1 · SM") for n in names)
    tdoc = _torch_doc([sm_profiler.decode([c]) for c in sm_profiler.load(files[0])], 0, 0)
    (tmp_path / "torch.json").write_text(json.dumps(tdoc))
    assert (
        cli_main(["merge", files[0], "--torch", str(tmp_path / "torch.json"), "-o", str(out)]) == 0
    )
    assert "launches matched" in capsys.readouterr().out


def test_capture_files_keep_labels_and_clock_metadata(tmp_path):
    caps = _rank(0, clock=[{"host_ns": 1, "offset_ns": 2, "error_ns": 3}])
    sm_profiler.save_many(caps, tmp_path / "c.smp")
    back = sm_profiler.load(tmp_path / "c.smp")
    assert [c.kernel_name for c in back] == ["ranged", "ranged"]
    assert back[0].metadata["clock"][0]["offset_ns"] == 2 and back[0].metadata["grid"] == [2, 1, 1]
    assert dataclasses.replace(back[0]).metadata["call_site"].startswith("test_workload.py:")
    assert isinstance(back[0], Capture)


def test_the_multi_gpu_example_runs_one_rank_in_the_interpreter(tmp_path, monkeypatch):
    from example_scripts import load_example

    for var in ("WORLD_SIZE", "RANK", "LOCAL_RANK"):
        monkeypatch.delenv(var, raising=False)
    # The form the README gives every example: python examples/NAME.py [OUT_DIR]
    merged = load_example("multi_gpu_workload").main([str(tmp_path), "--steps", "3"])
    doc = json.loads(open(merged).read())
    assert doc["otherData"]["sm_profiler_alignment"]["method"] == "none"
    names = set(_procs(doc).values())
    assert "GPU 0 · launches" in names and any(n.startswith("GPU 0 · SM ") for n in names)
    caps = sm_profiler.load(tmp_path / "rank0.smp")
    assert [c.kernel_name for c in caps] == ["scale_kernel", "shift_kernel"] * 3
    assert all(c.metadata["rank"] == 0 for c in caps)


FIXTURES = __import__("pathlib").Path(repo_paths.FIXTURES)


def test_merge_of_a_recorded_h200_torch_trace_agrees_within_a_microsecond(tmp_path):
    """Recorded on an H200 (benchmarks/clock_alignment.py --fixture): two launches of
    busy_kernel under torch.profiler, with clock samples taken before and after."""
    caps = sm_profiler.load(FIXTURES / "captures_h200.smp")
    assert [c.kernel_name for c in caps] == ["busy_kernel", "busy_kernel"]
    info = sm_profiler.merge_torch_trace(
        FIXTURES / "torch_trace_h200.json", caps, tmp_path / "m.json"
    )
    assert info["method"] == "clock" and info["ranks"][0]["samples"] == 2
    err = info["error"][0]
    assert err["matched"] == 2 and err["max_abs_ns"] < 1000, err
    # Without the probe: the kernels' own rows, matched in order, give nearly the same offset.
    bare = [dataclasses.replace(c, metadata={k: v for k, v in c.metadata.items() if k != "clock"})
            for c in caps]  # fmt: skip
    by_rows = sm_profiler.merge_torch_trace(FIXTURES / "torch_trace_h200.json", bare,
                                            tmp_path / "k.json")  # fmt: skip
    assert by_rows["method"] == "kernels" and by_rows["error"][0]["matched"] == 2
    clk = merge.clock_offset(caps)[0](float(sm_profiler.decode([caps[0]]).start_ns))
    assert abs(by_rows["offset_ns"] - clk) < 1000
    out = json.loads((tmp_path / "m.json").read_text())
    rows = [
        e for e in out["traceEvents"] if e.get("cat") == "kernel" and e["name"] == "busy_kernel"
    ]
    ours = [e for e in out["traceEvents"] if e.get("name") == "busy" and e.get("ph") == "X"]
    assert len(rows) == 2 and len(ours) == 8
    for r in rows:  # every range of the launch lies inside its CUPTI row (±1 µs)
        inside = [e for e in ours if r["ts"] - 1 <= e["ts"] <= r["ts"] + r["dur"] + 1]
        assert len(inside) == 4


def test_a_slotted_buffer_nothing_ran_into_reads_as_one_empty_launch():
    p = _prof(4)
    caps = p.captures()
    assert len(caps) == 1 and not sm_profiler.decode(caps).lanes["initialized"].any()
    assert "no lane was initialised" in " ".join(compute_stats(p.decode()).warnings)
    p.close()


def test_a_disabled_slotted_profiler_observes_nothing():
    from sm_profiler import slots

    p = sm_profiler.SmProfiler(2, 1, 8, device="cpu", slots=4, enabled=False)
    ranged[(2,)](p.get_buffer())
    assert p.get_buffer().data_ptr() not in slots._registry and not p._labels
    # The header of a disabled buffer: shape 0 x 0, no slots; the interpreter flags the
    # out-of-shape lanes in the scratch word.
    assert not p.get_buffer()[1 : fmt.HDR_SCRATCH].any()
