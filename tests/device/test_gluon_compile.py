"""What the Gluon ops compile to, checked on a CPU: sm_90 (and sm_100) PTX and SASS of kernels with
a default and a worker partition, both recording."""

import re

import pytest
from compile_probes import run_probe, strip_names

pytest.importorskip("triton.experimental.gluon")

# SASS one event adds in straight-line code of one partition, per ptxas release (as for the
# Triton ops). Per partition: the branch the other warps take, the timer read, the bound's
# compare, the tag move, the cursor move, the two predicated stores. Per warp: no branch.
SASS_PER_EVENT = {"12.8": 7, "12.9": 7, "13.4": 7}
SASS_PER_WARP_EVENT = {"12.8": 6, "12.9": 6, "13.4": 6}


@pytest.fixture(scope="module")
def probe():
    return run_probe("gluon_compile_probe.py")


def _strip_name(ptx: str) -> str:
    """The code only: comment lines go too."""
    return strip_names(ptx, "ws_loop_kernel", skip=(".loc", ".file", "//"))


@pytest.mark.parametrize("arch", [90, 100])
def test_disabled_build_is_the_plain_kernel(probe, arch):
    off, plain = probe[f"loop_off_ptx_{arch}"], probe[f"loop_plain_ptx_{arch}"]
    assert _strip_name(off) == _strip_name(plain)
    assert "globaltimer" not in off
    assert "globaltimer" in probe[f"loop_on_ptx_{arch}"]  # the comparison above can fail


@pytest.mark.parametrize("arch", [90, 100])
@pytest.mark.parametrize("mode", ["on", "warp"])
def test_both_partitions_record(probe, arch, mode):
    # Per partition: the anchor, and ws_loop_kernel's events (partition and loop begin/end,
    # iteration begin, tick, and the iteration end with after=, which reads the timer under
    # both values of a predicate): 9 reads in the PTX, in each of the two partitions.
    ptx = probe[f"loop_{mode}_ptx_{arch}"]
    assert ptx.count("%globaltimer") == 2 * 9
    assert ptx.count("%smid") == 2  # the SM id once per lane, at each partition's init


def _counts(ins, pattern):
    return len([i for i in ins if re.search(pattern, i)])


@pytest.mark.parametrize("per_warp", [0, 1])
def test_sass_per_event_is_pinned(probe, per_warp):
    a, b = probe[f"straight_4_{per_warp}"], probe[f"straight_12_{per_warp}"]
    per_event = (len(b) - len(a)) / 8
    release = probe["ptxas_release"]
    pins = SASS_PER_WARP_EVENT if per_warp else SASS_PER_EVENT
    print(f"Gluon SASS per event (per warp: {bool(per_warp)}), ptxas {release}: {per_event}")
    assert release in pins, f"ptxas {release} is not pinned: measured {per_event} SASS per event"
    assert per_event == pins[release]


@pytest.mark.parametrize("per_warp", [0, 1])
def test_one_timer_read_and_one_8_byte_store_per_event_in_each_partition(probe, per_warp):
    for n in (4, 12):
        ins = probe[f"ws_straight_{n}_{per_warp}"]
        # two partitions, each: n events + its anchor
        assert _counts(ins, "SR_GLOBALTIMER") == 2 * (n + 1)
        assert all(i.startswith("CS2R") for i in ins if "SR_GLOBALTIMER" in i)
        assert _counts(ins, r"\bSTG\.E\.64\b") == 2 * (n + 1)
        assert _counts(ins, "SR_VIRTUALSMID|SR_SMID") == 2
        # the header's three words (shape; capacity and slot control in one 16-byte load), once
        # per partition; no atomics or fences at all
        assert _counts(ins, r"^(@!?U?P\d+ )?LDG\.E\.64\b") == 2
        assert _counts(ins, r"^(@!?U?P\d+ )?LDG\.E\.128\b") == 2
        assert _counts(ins, r"^(@!?U?P\d+ )?LDG") == 4
        assert not [i for i in ins if re.match(r"(@!?U?P\d+\s+)?(ATOM|RED|MEMBAR|FENCE)", i)]
    # Per partition, the non-leading warps branch past each event: no convergence barrier.
    assert not [i for i in probe[f"ws_straight_12_{per_warp}"] if i.startswith("BSSY")]


def test_a_one_warp_partition_records_without_a_leader_test(probe):
    # ws_straight_kernel: a 4-warp default partition and a 1-warp worker, 4 or 12 events each.
    # Per partition, one warp-uniform branch per event in the default partition (its warps 1-3
    # skip the event) and none in the worker, whose only warp writes the lane as per warp does.
    def branches(n):
        return _counts(probe[f"ws_straight_{n}_0"], r"^@!?U?P\d+ BRA")

    assert (branches(12) - branches(4)) / 8 == 1


def test_each_partition_counts_its_warps_from_its_first(probe):
    # The leader is warp 0 of the partition, from a Gluon arange (which the compiler numbers from
    # the partition's first thread) voted across the warp; a raw %tid.x would pick warp 0 of
    # the block, which the worker partition does not have.
    ptx = probe["loop_on_ptx_90"]
    assert ptx.count("vote.sync.any.pred") == 2


def test_a_stage_in_gluon_shared_memory_costs_a_barrier_per_event(probe):
    # The finding behind "no staged lanes in Gluon" (gluon_ops' docstring): Gluon counts its
    # own allocation (metadata.shared), but in a loop of events it puts a barrier before every
    # store into it (Triton 3.6 to 3.9). If this fails, staged Gluon lanes may have become
    # possible: see gluon_ops.
    ptx_text, shared = probe["smem_stage"]["ptx"], probe["smem_stage"]["shared"]
    assert shared >= 64 * 4 * 8
    body = ptx_text[ptx_text.index("%globaltimer") :]
    store = body.index("st.shared")
    assert "bar.sync" in body[:store], "no barrier before the staged store any more"


@pytest.mark.parametrize("per_warp", [0, 1])
def test_ring_ops_wrap_the_slot_and_close_the_lane(probe, per_warp):
    ptx = probe[f"ring_ptx_{per_warp}"]
    # Three records in the loop and one before it, each wrapping its slot; one close.
    assert len(re.findall(r"and\.b32\s+s,", ptx)) == 4
    assert len(re.findall(r"or\.b32\s+v,.*0x80000000", ptx)) == 1
