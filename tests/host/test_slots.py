"""Launch slots (sm_profiler/record/slots.py): many launches into one buffer without a host sync, each
labelled by its launcher (kernel, grid, warps, call site), slot overflow counted, snapshots, the
manual step, in the interpreter (CI). The GPU side is tests/e2e/test_workload_gpu.py."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from workload_kernels import instants, ranged, slotted_profiler

import sm_profiler
from sm_profiler.errors import ConfigError, FormatError
from sm_profiler.report.stats import compute_stats, format_stats
from sm_profiler.wire import format as fmt

pytestmark = pytest.mark.skipif(torch.cuda.is_available(), reason="interpreter tests")


def test_launches_without_a_sync_get_a_slot_and_a_label_each():
    p = slotted_profiler(8)
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
    assert caps[0].metadata["call_site"] == f"test_slots.py:{line} " + (
        "(test_launches_without_a_sync_get_a_slot_and_a_label_each)"
    )
    # Each slot holds its own launch: n instants per program in launch n.
    for k, n in enumerate((1, 2, 3)):
        t = sm_profiler.decode([caps[2 * k]])
        assert len(t) == 2 * n and int(t.lanes["initialized"].sum()) == 2
    assert not caps[0].words[fmt.HDR_SLOTS] and int(caps[3].words[fmt.HDR_LABEL]) > 0
    p.close()


def test_equal_launches_share_a_label_id():
    p = slotted_profiler(4)
    for _ in range(3):
        ranged[(1,)](p.get_buffer())
    ids = {int(c.words[fmt.HDR_LABEL]) for c in p.captures()}
    assert len(ids) == 1 and len(p._labels) == 1
    p.close()


def test_slots_that_run_out_are_counted_and_never_overwritten():
    p = slotted_profiler(3)
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
    p = slotted_profiler(4)
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
    p = slotted_profiler(4)
    p.close()  # no hook: as for a CuteDSL or raw CUDA launch
    ranged[(2,)](p.get_buffer())
    p.step("my_cute_kernel", grid=(2,), num_warps=8)
    ranged[(2,)](p.get_buffer())  # a last launch with no step yet: its slot is still read
    caps = p.captures()
    assert [c.kernel_name for c in caps] == ["my_cute_kernel", "kernel"]  # no label: the default
    assert caps[0].metadata["grid"] == [2, 1, 1] and caps[0].metadata["num_warps"] == 8
    assert "test_slots.py" in caps[0].metadata["call_site"]
    assert "grid" not in caps[1].metadata


def test_plain_profilers_are_unchanged_and_refuse_step():
    p = sm_profiler.SmProfiler(2, 1, 8, device="cpu")
    buf = p.get_buffer()  # once: a second hand-out without snapshot() warns
    assert buf.numel() == p.layout.total_words
    assert not int(buf[fmt.HDR_SLOTS])
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
    p = slotted_profiler(12)
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


def test_a_slotted_buffer_nothing_ran_into_reads_as_one_empty_launch():
    p = slotted_profiler(4)
    caps = p.captures()
    assert len(caps) == 1 and not sm_profiler.decode(caps).lanes["initialized"].any()
    assert "no lane was initialised" in " ".join(compute_stats(p.decode()).warnings)
    p.close()


def test_a_disabled_slotted_profiler_observes_nothing():
    from sm_profiler.record import slots

    p = sm_profiler.SmProfiler(2, 1, 8, device="cpu", slots=4, enabled=False)
    ranged[(2,)](p.get_buffer())
    assert p.get_buffer().data_ptr() not in slots._registry and not p._labels
    # The header of a disabled buffer: shape 0 x 0, no slots; the interpreter flags the
    # out-of-shape lanes in the scratch word.
    assert not p.get_buffer()[1 : fmt.HDR_SCRATCH].any()
