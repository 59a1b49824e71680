"""What the Triton ops compile to, checked on a CPU: sm_90 PTX and SASS from triton.compile.

These pin the cost of an event so that it cannot grow silently.
"""

import re

import pytest
from compile_probes import run_probe, strip_names

pytest.importorskip("triton")

# SASS instructions one event adds in straight-line code (timer read, bounds/leader predicate,
# record assembly, the record store and the predicated-off overflow store), per ptxas release:
# the SASS is ptxas's, and each Triton release bundles its own. ptx.record picks its spelling per
# release (packed register below 13, vector store from 13: see there) so that each stays at 7.
# Change a number only with a reason in the commit message; pin each new ptxas release here.
SASS_PER_EVENT = {"12.8": 7, "12.9": 7, "13.4": 7}
# Ring-capable ops (profiler_init(..., RING=True)) in straight-line code: the AND that wraps the
# slot, and the slot's address (LEA + LEA.HI.X), which a constant cursor folds into the direct
# build's store offsets; in a loop, where the direct build computes the address too, a ring
# event costs exactly one instruction more (test_ring_events_cost_one_and_more_in_a_loop).
RING_SASS_PER_EVENT = {"12.8": 10, "12.9": 10, "13.4": 10}


@pytest.fixture(scope="module")
def probe():
    return run_probe("triton_compile_probe.py")


def _strip_name(ptx: str) -> str:
    return strip_names(ptx, "add_kernel")


def test_disabled_build_is_the_plain_kernel(probe):
    assert _strip_name(probe["add_ptx_off"]) == _strip_name(probe["add_ptx_plain"])
    assert "globaltimer" not in probe["add_ptx_off"]
    assert "globaltimer" in probe["add_ptx_on"]  # the comparison above can fail


def test_sass_per_event_is_pinned(probe):
    a, b = probe["straight_4"], probe["straight_12"]
    per_event = (len(b) - len(a)) / 8
    release = probe["ptxas_release"]
    print(f"SASS instructions per event with ptxas {release}: {per_event}")
    assert release in SASS_PER_EVENT, (
        f"ptxas {release} (Triton {probe['triton']}) is not pinned: measured {per_event} SASS "
        "per event; add it to SASS_PER_EVENT with the reason for any difference"
    )
    assert per_event == SASS_PER_EVENT[release]


def test_ring_sass_per_event_is_pinned(probe):
    a, b = probe["ring_straight_4"], probe["ring_straight_12"]
    per_event = (len(b) - len(a)) / 8
    print(f"ring SASS per event (straight-line) with ptxas {probe['ptxas_release']}: {per_event}")
    assert per_event == RING_SASS_PER_EVENT[probe["ptxas_release"]]
    assert "and.b32" in probe["ring_straight_4_ptx"]


def _event_blocks(sass: list[str]) -> list[list[str]]:
    """Each timer read with what follows up to its second store (an event, or the init)."""
    out = []
    for i, ins in enumerate(sass):
        if "SR_GLOBALTIMER" in ins:
            near = range(i, min(i + 12, len(sass)))
            stores = [j for j in near if sass[j].lstrip("@!P0123456789 ").startswith("STG")]
            if len(stores) >= 2:
                out.append(sass[i : stores[1] + 1])
    return out


def test_ring_events_cost_one_and_more_in_a_loop(probe):
    direct = _event_blocks(probe["ring_loop_0"])
    ring = _event_blocks(probe["ring_loop_1"])
    assert len(direct) == len(ring) >= 4  # the init, the tail instant, three events in the loop
    extra = [len(r) - len(d) for d, r in zip(direct, ring, strict=True)]
    # Every event in the loop costs one LOP3 (the AND) more. (The init is scheduled apart
    # from the mask's loads, and the first event, at cursor 0, folds the mask away.)
    assert extra[2:] == [1] * (len(extra) - 2), extra
    assert all(sum("LOP3" in x for x in r) == 1 for r in ring[2:])


def test_the_timer_is_read_into_a_vector_register(probe):
    # CS2R has a fixed latency; S2UR (the uniform datapath) needed a NOP and a move back.
    for key in ("straight_12", "loop_sass_warp0", "loop_sass_warp1"):
        reads = [i for i in probe[key] if "SR_GLOBALTIMER" in i]
        assert reads and all(i.startswith("CS2R") for i in reads), (key, reads)


def test_one_timer_read_and_one_record_store_per_event(probe):
    for n in (4, 12):
        ins = probe[f"straight_{n}"]
        timer_reads = [i for i in ins if "SR_GLOBALTIMER" in i]
        stores64 = [i for i in ins if re.search(r"\bSTG\.E\.64\b", i)]
        # +1 each: the lane's anchor at init
        assert len(timer_reads) == n + 1, timer_reads
        assert len(stores64) == n + 1, stores64
        # the SM id is read once per lane, at init
        assert sum("SR_VIRTUALSMID" in i or "SR_SMID" in i for i in ins) == 1


def test_no_atomics_fences_or_loads_per_event(probe):
    ins = probe["straight_12"]
    assert not [i for i in ins if i.startswith(("ATOM", "RED", "MEMBAR", "FENCE", "BAR"))]
    # Three loads in all: the buffer header's shape, capacity and slot control, once, at init.
    assert len([i for i in ins if i.startswith(("LDG", "LD."))]) == 3


def test_leader_is_thread_zero_per_program_and_lane_zero_per_warp(probe):
    assert "%laneid" not in probe["loop_ptx_warp0"] and "%tid.x" in probe["loop_ptx_warp0"]
    assert "%laneid" in probe["loop_ptx_warp1"]
    assert any("SR_LANEID" in i for i in probe["loop_sass_warp1"])


def test_after_makes_the_timer_read_wait_for_the_value(probe):
    # loop_kernel ends each iteration with after=acc: the timer reads are predicated on a test
    # of acc, which ptxas cannot hoist above the computation of acc.
    ptx = probe["loop_ptx_warp0"]
    assert re.search(r"@pd mov\.u64 t, %globaltimer", ptx)
    assert re.search(r"@!pd mov\.u64 t, %globaltimer", ptx)


def test_per_program_events_let_the_other_warps_branch_over_them(probe):
    # Per program, warp 0 records and the other warps skip each event with one uniform branch:
    # one conditional branch per event in straight-line code (ptxas turns the last one, right
    # before the end of the kernel, into a predicated exit).
    for n in (4, 12):
        branches = [i for i in probe[f"straight_{n}"] if re.match(r"@!?U?P\d+ BRA", i)]
        assert n - 1 <= len(branches) <= n, branches
    # Per warp, every warp records: predicated stores and no branch per event.
    loop_w = probe["loop_sass_warp1"]
    loop_p = probe["loop_sass_warp0"]
    n_br = lambda ins: len([i for i in ins if re.match(r"@!?U?P\d+ BRA", i)])  # noqa: E731
    assert n_br(loop_p) > n_br(loop_w)


# -- staged warp lanes (PER_WARP, STAGE > 0) ------------------------------------------------------

# SASS per staged event in straight-line code: the timer read, the tag's move and the shared
# store (the compiler pairs two events into one 16-byte store and adds moves for it).
MAX_SASS_PER_STAGED_EVENT = 4


def test_staged_events_cost_a_timer_read_and_a_shared_store(probe):
    a, b = probe["staged_straight_4"], probe["staged_straight_12"]
    per_event = (len(b) - len(a)) / 8
    print(f"staged SASS per event: {per_event}")
    assert 0 < per_event <= MAX_SASS_PER_STAGED_EVENT
    count = lambda ins, pat: len([i for i in ins if re.search(pat, i)])  # noqa: E731
    # One timer read per event (+1: the anchor), no global store or load per event: the
    # global stores are the flush's (copy, anchor, word 1), the loads the header's three.
    assert count(b, "SR_GLOBALTIMER") == 12 + 1 and count(a, "SR_GLOBALTIMER") == 4 + 1
    assert count(b, r"\bSTG") == count(a, r"\bSTG") == 3
    assert count(b, r"\bLDG") == count(a, r"\bLDG") == 3
    assert count(b, r"\bSTS") > count(a, r"\bSTS")
    assert not [i for i in b if i.startswith(("ATOM", "RED", "MEMBAR", "FENCE", "BAR.SYNC"))]


def test_the_stage_is_static_shared_memory_of_the_documented_size(probe):
    from sm_profiler.record import ptx

    sizes = re.findall(
        r"\.shared \.align 16 \.b8 smp_stage_\d+\[(\d+)\]", probe["staged_straight_4_ptx"]
    )
    assert [int(x) for x in sizes] == [ptx.stage_bytes(4, 32)]  # straight_kernel: 4 warps
    assert int(sizes[0]) % ptx.STAGE_ALIGN_BYTES == 0


def test_a_staged_loop_kernel_stores_to_global_memory_only_in_the_flush(probe):
    direct, staged = probe["loop_sass_warp1"], probe["staged_loop"]
    stg = lambda ins: len([i for i in ins if "STG" in i])  # noqa: E731
    # flush: the copy loop's store and the two lane-header words; the kernel's own output store
    assert stg(staged) == 3 + 1 < stg(direct)


def test_declared_stage_bytes_are_read_from_the_ptx(probe):
    # what the kernel-load occupancy check reads (sm_profiler/record/occupancy.py)
    from sm_profiler.record import occupancy, ptx

    assert occupancy.declared_stage_bytes(probe["staged_straight_4_ptx"]) == ptx.stage_bytes(4, 32)
    assert occupancy.declared_stage_bytes(probe["loop_ptx_warp1"]) == 0
