"""What a flight-recorder dump says (sm_profiler/report/dump.py; issue 54, item 3), from dumps
built by hand (flight_inputs.flight_table): why it was written; for a stall, each GPU's last
step and kernel that ended and the launches queued after it, in flight or not reached, with
their queue times; the kernel that grew in a slow step; the ranks side by side by step. At 80
columns, compared as exact text; no figure depends on the clock's origin."""

from __future__ import annotations

import pytest
from flight_inputs import flight_table

from sm_profiler.report.auto_report import dump_report
from sm_profiler.report.dump import dump_lines, gpu_state, grown_kernels
from sm_profiler.trace.auto_table import AutoTable
from sm_profiler.wire.capture import load

MS = 10**6
WRITTEN_NS = 1_764_417_785_123_000_000  # 2025-11-29 12:03:05.123 UTC


def steady(steps, kernels=(1, 2)):
    """Launches of `kernels` in each of `steps`, all programs ended, 1 ms a step apart."""
    return [
        (kid, s, 8, 8, s * MS + 100_000 * j, 50_000) for s in steps for j, kid in enumerate(kernels)
    ]


def stall_info(**more):
    return {
        "trigger": "stall",
        "why": "no step ended within 3 s (step 90 began 3.2 s before)",
        "step": 90,
        "steps": [83, 90],
        "host_step": 90,
        "written_ns": WRITTEN_NS,
        "live": True,
        **more,
    }


def spin_table(t0_ns=0, written_ns=WRITTEN_NS):
    # Steps 83-89 ended; step 90 ran the add kernel, then queued a kernel that spins (1
    # program, none ended) and three launches behind it.
    launches = steady(range(83, 90)) + [(1, 90, 8, 8, 90 * MS, 50_000), (3, 90, 1, 0, 0, 0)]
    launches += [(2, 90, 8, 0, 0, 0), (1, 90, 8, 0, 0, 0), (2, 90, 8, 0, 0, 0)]
    return flight_table(launches, stall_info(written_ns=written_ns), t0_ns=t0_ns)


def test_3_a_stall_names_the_kernel_in_flight_and_the_last_that_ended():
    table = spin_table()
    state = gpu_state(table, 0)
    assert (state.host_step, state.last_step_ended) == (90, 89)
    assert (state.last_ended.kernel, state.last_ended.step) == ("triton_poi_fused_add_0", 90)
    assert [q.kernel for q in state.in_flight] == ["spin_kernel"]
    assert [q.kernel for q in state.not_reached] == [
        "triton_red_fused_sum_1",
        "triton_poi_fused_add_0",
        "triton_red_fused_sum_1",
    ]
    lines = dump_lines(table, 80)
    assert lines == [
        "Flight recorder: no step ended within 3 s (step 90 began 3.2 s before)",
        "  written 2025-11-29 12:03:05.123 UTC (trigger: stall); steps 83-90 kept",
        "  cuda:0: the host is in step 90; the last step ended on the GPU: 89; last",
        "    kernel ended: triton_poi_fused_add_0 (step 90)",
        "    in flight: spin_kernel (step 90): 0 of 1 program ended; queued 12:03:04.138",
        "      UTC, 985.00 ms before the dump",
        "    not reached: 3 launches queued after it (step 90): triton_red_fused_sum_1,",
        "      triton_poi_fused_add_0, triton_red_fused_sum_1; the last queued 982.00 ms",
        "      before the dump",
    ]
    assert all(len(line) <= 80 for line in lines)


def test_3_a_gpu_stuck_in_a_kernel_we_do_not_instrument_has_nothing_of_ours_in_flight():
    # torch.cuda._sleep at step 90: every launch of ours the host queued had ended.
    table = flight_table(steady(range(83, 90)), stall_info())
    state = gpu_state(table, 0)
    assert state.in_flight == [] and state.not_reached == []
    assert state.last_step_ended == 89
    assert state.last_ended.kernel == "triton_red_fused_sum_1" and state.last_ended.step == 89
    text = "\n".join(dump_lines(table, 80))
    assert "last kernel ended: triton_red_fused_sum_1 (step 89)" in " ".join(text.split())
    assert "nothing of ours in flight" in text


def test_3_a_launch_with_some_programs_ended_is_in_flight_with_the_count():
    launches = steady(range(87, 90)) + [(4, 90, 132, 37, 90 * MS, 20_000), (2, 90, 8, 0, 0, 0)]
    table = flight_table(launches, stall_info())
    state = gpu_state(table, 0)
    assert [(q.kernel, q.ended, q.records) for q in state.in_flight] == [("work_kernel", 37, 132)]
    assert [q.kernel for q in state.not_reached] == ["triton_red_fused_sum_1"]
    assert state.last_step_ended == 89
    assert "in flight: work_kernel (step 90): 37 of 132 programs ended" in "\n".join(
        dump_lines(table, 80)
    )


def slow_table():
    # Steps 130-137; the work kernel takes 2 ms a step, 5 ms in step 137.
    launches = []
    for s in range(130, 138):
        work = 5 * MS if s == 137 else 2 * MS + 1000 * (s % 3)
        launches += [(1, s, 8, 8, s * 10 * MS, 100_000), (4, s, 8, 8, s * 10 * MS + MS, work)]
    info = {
        "trigger": "slow",
        "why": "step 137 was slow: 5.15 ms on the GPU, 1.68x the median 3.07 ms of the 32 "
        "steps before (threshold 1.5x)",
        "step": 137,
        "steps": [130, 137],
        "host_step": 139,
        "written_ns": WRITTEN_NS,
    }
    return flight_table(launches, info)


def test_3_a_slow_step_names_the_step_and_the_kernel_that_grew():
    table = slow_table()
    grown = grown_kernels(table, 137)
    assert [g[0] for g in grown] == ["work_kernel"]
    name, took, median = grown[0]
    assert took == 5 * MS + 70 and median == 2 * MS + 1070  # a span: first start to last end
    assert dump_lines(table, 80) == [
        "Flight recorder: step 137 was slow: 5.15 ms on the GPU, 1.68x the median 3.07 ms",
        "  of the 32 steps before (threshold 1.5x)",
        "  written 2025-11-29 12:03:05.123 UTC (trigger: slow); steps 130-137 kept",
        "  grew in step 137, beside the median of steps 130-136:",
        "    work_kernel  5.00 ms (median 2.00 ms, +3.00 ms)",
    ]


def test_3_the_ranks_side_by_side_say_which_is_behind_and_where():
    rank0 = spin_table()
    launches = steady(range(82, 89)) + [(1, 89, 8, 8, 89 * MS, 50_000), (3, 89, 1, 0, 0, 0)]
    rank1 = flight_table(launches, stall_info(step=89, steps=[82, 89], host_step=89), rank=1)
    both = AutoTable.concat([rank0, rank1])
    lines = dump_lines(both, 80)
    assert lines[:5] == [
        "Flight recorder: 2 ranks side by side by step",
        "  rank 0: last step ended: 89; last kernel ended: triton_poi_fused_add_0 (step",
        "    90); in flight: spin_kernel",
        "  rank 1 is one step behind (its last step ended: 88; rank 0's: 89); last kernel",
        "    ended: triton_poi_fused_add_0 (step 89); in flight: spin_kernel",
    ]
    assert "Flight recorder (rank 1): no step ended within 3 s" in "\n".join(lines)


def test_3_a_rank_that_never_queued_the_steps_kernels_its_peer_ran_is_behind_in_that_step():
    # As an H200 ran it (two ranks on one GPU, 2026-11-29): rank 1 sleeps at the start of step
    # 90; rank 0 runs step 90's kernels, then waits in its all-reduce for rank 1. Both GPUs
    # ended step 89 (no step boundary after it); only rank 0's ended a kernel of step 90.
    ahead = flight_table(steady(range(83, 91)), stall_info())
    behind = flight_table(steady(range(83, 90)), stall_info(host_step=90), rank=1)
    assert gpu_state(ahead, 0).last_step_ended == gpu_state(behind, 0).last_step_ended == 89
    lines = dump_lines(AutoTable.concat([ahead, behind]), 80)
    assert lines[:5] == [
        "Flight recorder: 2 ranks side by side by step",
        "  rank 0: last step ended: 89; last kernel ended: triton_red_fused_sum_1 (step",
        "    90)",
        "  rank 1 is behind in step 90 (its last step ended: 89, as rank 0's; its GPU",
        "    ended no kernel of step 90, rank 0's did); last kernel ended:",
    ]


def fr_info(**more):
    """PyTorch's flight recorder as a dump of step 90 read it: collectives 41-43, queued in steps
    88, 89 and 90 (the wall clock, as the host's step starts), the last one not started."""
    starts = [[s, WRITTEN_NS - (91 - s) * 10**9] for s in range(83, 91)]
    made = [(41, 88, "completed"), (42, 89, "completed"), (43, 90, "scheduled")]
    collectives = [
        {"seq": q, "name": "nccl:all_reduce", "pg": "default_pg", "state": state}
        | {"created_ns": WRITTEN_NS - (91 - step) * 10**9 + 5 * 10**8}
        for q, step, state in made
    ]
    nccl = {"buffer_size": 2000, "variable": "TORCH_FR_BUFFER_SIZE", "collectives": collectives}
    return stall_info(step_starts_ns=starts, nccl_trace=dict(nccl, **more))


def test_3_pytorchs_flight_recorder_says_which_collective_and_which_of_our_steps():
    table = flight_table(steady(range(83, 90)), fr_info())
    text = " ".join(" ".join(dump_lines(table, 80)).split())
    assert (
        "PyTorch's flight recorder is on (TORCH_FR_BUFFER_SIZE=2000): the last collective "
        "queued: #43 nccl:all_reduce (default_pg), scheduled, queued in step 90; the last "
        "completed: #42 (queued in step 89)"
    ) in text
    assert all(len(line) <= 80 for line in dump_lines(table, 80))


@pytest.mark.parametrize(
    "nccl, said",
    [
        ({"collectives": [], "unread": "it did not answer within 2 s"}, "not read (it did"),
        ({"collectives": "x"}, "no collective read; its dump (None0) says which"),
        ({"collectives": [{"seq": 7, "created_ns": 5, "name": 3, "pg": None}]}, "#7 ?, state"),
    ],
)
def test_3_pytorchs_flight_recorder_unread_or_damaged_reads_as_far_as_it_can(nccl, said):
    info = fr_info()
    info["nccl_trace"].update(nccl)
    text = " ".join(" ".join(dump_lines(flight_table(steady(range(83, 90)), info), 80)).split())
    assert said in text
    if "#7" in said:
        assert "its time not within this dump's steps" in text


@pytest.mark.parametrize("t0_ns", [0, 10**12, 1_700_000_000_000_000_000])
def test_3_no_figure_of_a_dump_depends_on_the_clock_origin(t0_ns):
    # The records' clock (the GPU's) and the host's queue times move together or apart: the
    # text is the same but for the clock readings themselves.
    base = "\n".join(dump_lines(spin_table(), 80))
    moved = "\n".join(dump_lines(spin_table(t0_ns=t0_ns), 80))
    assert moved == base
    later = "\n".join(dump_lines(spin_table(written_ns=WRITTEN_NS + t0_ns), 80))
    assert "985.00 ms before the dump" in later and "982.00 ms" in " ".join(later.split())


def test_3_a_dump_file_keeps_what_its_report_says(tmp_path):
    table = spin_table()
    table.save(tmp_path / "d.npz")
    again = load(tmp_path / "d.npz")
    assert dump_lines(again, 80) == dump_lines(table, 80)
    report = dump_report(again, 80)
    assert report.startswith("Flight recorder: no step ended within 3 s")
    assert "triton_poi_fused_add_0" in report.split("\n\n", 1)[1]  # the kernel report follows


def test_3_a_dump_of_a_region_that_ended_says_no_gpu_state():
    # An exception: the region's end waited for the GPU, which had done everything queued.
    info = stall_info(trigger="exception", why="the program raised ValueError: x", live=False)
    lines = dump_lines(flight_table(steady(range(83, 90)), info), 80)
    assert lines == [
        "Flight recorder: the program raised ValueError: x",
        "  written 2025-11-29 12:03:05.123 UTC (trigger: exception); steps 83-90 kept",
    ]


@pytest.mark.parametrize(
    "damage",
    [
        {"queued": "x"},
        {"queued": [[0, "k", 90], ["0", "k", 90, 1, 0], [0, 7, 90, 1, 0], [0, "k", 90, 0, 0]]},
        {"queued": [[0, "k", 90, 1, -1], [True, "k", 90, 1, 0], [0, "k", 2**70, 1, 0]]},
        {"host_step": "90", "written_ns": -5, "steps": "83-90", "step": None},
        {"written_ns": 2**80, "steps": [1], "read": ["a", 2, "why"], "nccl_trace": "on"},
    ],
)
def test_3_a_dump_whose_flight_record_is_damaged_reads_as_far_as_it_can(tmp_path, damage, capsys):
    # A file may hold anything: `sm-profiler stats` of it prints, never a traceback.
    from sm_profiler.cli import main

    table = spin_table()
    table.sessions[0]["flight"].update(damage)
    lines = dump_lines(table, 80)
    assert lines[0].startswith("Flight recorder: no step ended within 3 s")
    table.save(tmp_path / "d.npz")
    assert main(["stats", str(tmp_path / "d.npz"), "--width", "80"]) == 0
    assert capsys.readouterr().out.startswith("Flight recorder: ")
