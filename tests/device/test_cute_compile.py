"""What the CuteDSL ops compile to, checked on a CPU: sm_90a PTX (and SASS) from cute.compile.

CuteDSL compiles without a GPU; these pin the cost of an event so that it cannot grow silently,
and check the protocol against the Triton ops' text.
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile

import pytest

pytestmark = pytest.mark.cute
cutlass = pytest.importorskip(
    "cutlass", reason="needs CuteDSL: pip install nvidia-cutlass-dsl==4.8.1"
)

import cute_kernels as K  # noqa: E402  (tests/support is on sys.path: no package)
import cutlass.cute as cute  # noqa: E402
from cutlass import Int32  # noqa: E402
from cutlass.cute.runtime import make_ptr  # noqa: E402

import cute_ops  # noqa: E402
from sm_profiler.record import ptx as _ptx  # noqa: E402
from sm_profiler.wire import format as fmt  # noqa: E402

# SASS instructions one event adds in straight-line code, on the path of the warp that records
# (per block, warp 0): the branch the other warps take, timer read, bounds predicate, tag move,
# the record store and the predicated-off overflow store. Measured 7, as for the Triton ops (the
# packed spelling of ptx.record: CuteDSL 4.8.1's ptxas, like 12.8, copies registers for the
# vector one); the other warps run 1 (the branch). Raise only with a reason in the commit.
MAX_SASS_PER_EVENT = 7


def _ptr(dtype=cutlass.Int64):
    # Address 0: only the type matters for compiling.
    return make_ptr(dtype, 0, cute.AddressSpace.gmem, assumed_align=8)


def _nvdisasm() -> str | None:
    try:
        import triton
    except ImportError:
        return None
    path = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "nvdisasm")
    return path if os.path.exists(path) else None


def _sass(cubin: bytes) -> list[str]:
    """Instructions of a cubin, without the NOP/BRA padding after the end."""
    nvdisasm = _nvdisasm()
    if nvdisasm is None:
        pytest.skip("no nvdisasm (it comes with triton's NVIDIA backend) to read the SASS")
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        out = subprocess.run([nvdisasm, "-c", f.name], capture_output=True, text=True, check=True)
    ins = re.findall(r"/\*[0-9a-f]{4}\*/\s+(.*?)\s*;", out.stdout)
    while ins and ins[-1].startswith(("NOP", "BRA")):
        ins.pop()
    return ins


class Built:
    """Compiled kernels, once per test module (each compile takes a fraction of a second)."""

    def __init__(self, dump_dir: str):
        self.opts = f"--gpu-arch sm_90a --keep-ptx --keep-cubin --dump-dir {dump_dir}"
        f32 = cutlass.Float32
        add_args = (_ptr(f32), _ptr(f32), _ptr(f32), _ptr(), Int32(8))
        self.add_on = self.compile(K.launch_add, *add_args, True)
        self.add_off = self.compile(K.launch_add, *add_args, False)
        self.add_plain = self.compile(K.launch_plain_add, *add_args, False)
        self.straight = {n: self.compile(K.launch_straight, _ptr(), n) for n in (4, 12)}
        loop_args = (_ptr(f32), _ptr(), Int32(5), Int32(0), Int32(8))
        self.loop_block = self.compile(K.launch_loop, *loop_args, True, False)
        self.loop_warp = self.compile(K.launch_loop, *loop_args, True, True)
        self.loop_off = self.compile(K.launch_loop, *loop_args, False, False)
        self.group = self.compile(K.launch_group, _ptr(f32), _ptr(), Int32(5), Int32(8))
        self.ring = self.compile(K.launch_ring, _ptr(), Int32(5), Int32(8), False)

    def compile(self, fn, *args):
        return cute.compile(fn, *args, options=self.opts)


@pytest.fixture(scope="module")
def built():
    with tempfile.TemporaryDirectory() as d:
        yield Built(d)


def _kernel_body(ptx: str) -> str:
    """PTX without what differs between two kernels of one body: names, comments, spacing."""
    names = set(re.findall(r"\.entry\s+(\w+)", ptx))
    for name in names:
        ptx = ptx.replace(name, "KERNEL")
    lines = [ln for ln in ptx.splitlines() if not ln.strip().startswith(("//", ".loc", ".file"))]
    return "\n".join(" ".join(ln.split()) for ln in lines if ln.strip())


# -- the protocol: the same instructions as the Triton ops --------------------------------------


def test_one_ptx_text_serves_both_front_ends():
    triton_ops = pytest.importorskip("sm_profiler.triton_ops")
    # Triton's copy is the shared text with operands shifted past its dummy output.
    texts = triton_ops._RECORD_TEXTS.value  # Triton's and Gluon's
    assert texts[_ptx.elementwise_index(True, False, False)] == _ptx.record(
        False, first=1, mode="all"
    )
    assert texts[_ptx.elementwise_index(False, False, False)] == _ptx.record(
        False, first=1, mode="warp"
    )
    assert "[$1+-4], $2;" in _ptx.record(False, first=1)  # records, cursor
    for mode in _ptx.RECORD_MODES:
        assert "[$0+-4], $1;" in _ptx.RECORD[mode]
        assert "mad.wide.u32 a, $1, 8, $0;" in _ptx.RECORD[mode]  # &records[cursor]
    for store in ("st.global.u64 [{}+-16], t;", "st.global.u32 [{}+-8], s;"):
        assert store.format("$1") in triton_ops._INIT_PROGRAM_ASM.value
        assert "@p " + store.format("$0") in _ptx.INIT  # CuteDSL
        assert "@ps " + store.format("a") in _ptx.OPEN_LANE  # Gluon, CUDA C++
    assert _ptx.ANCHOR_OFFSET_BYTES == -fmt.LANE_HEADER_WORDS * fmt.WORD_BYTES
    assert _ptx.LAST_DROPPED_OFFSET_BYTES == -4


# -- what one event costs ---------------------------------------------------------------------


def test_disabled_build_is_the_plain_kernel(built):
    off, plain = built.add_off.__ptx__, built.add_plain.__ptx__
    assert _kernel_body(off) == _kernel_body(plain)
    assert "globaltimer" not in off and "globaltimer" not in built.loop_off.__ptx__
    assert "globaltimer" in built.add_on.__ptx__  # the comparison above can fail


@pytest.mark.parametrize("n", [4, 12])
def test_one_timer_read_and_one_record_store_per_event_in_ptx(built, n):
    ptx = built.straight[n].__ptx__
    # +1 each: the lane's anchor at init
    assert ptx.count("mov.u64 t, %globaltimer;") == n + 1, ptx
    assert len(re.findall(r"\bst\.global\.(u64|v2\.u32)\b", ptx)) == n + 1  # 8-byte stores
    assert ptx.count("%smid") == 1  # the SM id is read once per lane, at init
    assert len(re.findall(r"\bst\.global\.u32\b", ptx)) == n + 1  # n overflow cursors + SM id


def test_sass_per_event_is_pinned(built):
    a, b = _sass(built.straight[4].__cubin__), _sass(built.straight[12].__cubin__)
    per_event = (len(b) - len(a)) / 8
    print(f"SASS instructions per event: {per_event}")
    assert 0 < per_event <= MAX_SASS_PER_EVENT, "\n".join(b)
    for n, ins in ((4, a), (12, b)):
        timer = [i for i in ins if "SR_GLOBALTIMER" in i]
        stores64 = [i for i in ins if re.search(r"\bSTG\.E\.64\b", i)]
        assert len(timer) == n + 1 and all(i.startswith("CS2R") for i in timer), timer
        assert len(stores64) == n + 1, stores64
        assert sum("SR_VIRTUALSMID" in i or "SR_SMID" in i for i in ins) == 1
        # ptxas sees the branch over each event as warp-uniform: no convergence barrier around it
        # (a `tid & 96` leader test costs a BSSY/BSYNC pair per event; ptx.WARP_ZERO avoids it).
        assert not [i for i in ins if i.startswith(("BSSY", "BSYNC"))], ins


def test_no_atomics_fences_or_loads_per_event(built):
    ins = _sass(built.straight[12].__cubin__)
    bad = [i for i in ins if re.match(r"(@!?P\d+\s+)?(ATOM|RED|MEMBAR|FENCE|BAR|ERRBAR)", i)]
    assert not bad, bad
    # Three loads in all: the buffer header's shape, capacity and slot control, once, at init.
    assert len([i for i in ins if re.match(r"(@!?P\d+\s+)?LDG", i)]) == 3, ins


@pytest.mark.parametrize("variant", ["loop_block", "loop_warp", "group"])
def test_cursor_lives_in_a_register_through_loops_and_ifs(built, variant):
    ptx = getattr(built, variant).__ptx__
    assert not re.search(r"\b(atom|red|membar|fence)\.", ptx), "no atomics or fences"
    # The only global loads are the three header words (shape, capacity, slot control): the
    # cursor is never read from memory.
    assert len(re.findall(r"\bld\.global", ptx)) == 3, re.findall(r".*ld\.global.*", ptx)
    assert ptx.count("%smid") == 1


def test_loop_kernel_emits_each_event_site_once(built):
    # loop_kernel has 7 event sites (loop begin/end, iter begin/end, tick, tail begin/end) and is
    # built with unroll=1: one record asm each (plus the init), none duplicated or dropped.
    ptx = built.loop_block.__ptx__
    assert ptx.count("pin|pov") == 7
    assert ptx.count("%globaltimer") == 1 + 6 + 2  # end(LOOP, after=acc) reads it twice


def test_warp_zero_leads_per_block_and_every_warp_per_warp(built):
    block, warp = built.loop_block.__ptx__, built.loop_warp.__ptx__
    assert "%laneid" not in block and "%tid.x" in block
    assert "%laneid" in warp  # lane 0 stamps the anchor
    # Per block, the other warps branch over each event; per warp, nobody tests a leader flag.
    assert block.count("bra.uni SMP_DONE_") == 7
    assert "setp.ne.u32 pl" not in warp and "bra.uni SMP_DONE_" not in warp
    # No warp-wide shuffle: the warp index must be safe to compute in a divergent branch.
    assert "shfl" not in warp


def test_after_makes_the_timer_read_wait_for_the_value(built):
    ptx = built.loop_block.__ptx__
    assert re.search(r"@pd mov\.u64 t, %globaltimer", ptx)
    assert re.search(r"@!pd mov\.u64 t, %globaltimer", ptx)


def test_out_of_shape_lanes_are_rejected_with_unsigned_compares(built):
    ptx = built.group.__ptx__
    # block < num_blocks and group < num_groups as u32: negative indices are out of shape too
    # (tests/device/test_lane_rule.py runs the compiled rule on negative indices).
    assert len(re.findall(r"setp\.(lt|gt)\.u32", ptx)) >= 2, ptx


# -- errors: clear messages at compile time ---------------------------------------------------


@pytest.mark.parametrize(
    ("event_id", "error", "message"),
    [
        (fmt.MAX_EVENT_ID + 1, ValueError, "event id 4096 is out of range"),
        (-1, ValueError, "event id -1 is out of range"),
        (1.0, TypeError, "event id must be a compile-time int"),
    ],
)
def test_bad_event_ids_fail_at_compile_time(built, event_id, error, message):
    with pytest.raises(Exception) as info:
        built.compile(launch_one_event, _ptr(), event_id)
    assert _caused_by(info.value, error, message), _chain(info.value)


def test_max_event_id_compiles(built):
    ptx = built.compile(launch_one_event, _ptr(), fmt.MAX_EVENT_ID).__ptx__
    assert str(fmt.make_tag(fmt.MAX_EVENT_ID, fmt.KIND_INSTANT)) in ptx


def test_tensor_buffer_is_accepted_and_wrong_dtype_rejected(built):
    torch = pytest.importorskip("torch")
    from cutlass.cute.runtime import from_dlpack

    ok = built.compile(launch_tensor_kernel, from_dlpack(torch.zeros(64, dtype=torch.int64)))
    assert ok.__ptx__.count("mov.u64 t, %globaltimer;") == 2
    with pytest.raises(Exception) as info:
        built.compile(launch_tensor_kernel, from_dlpack(torch.zeros(64, dtype=torch.float32)))
    assert _caused_by(info.value, TypeError, "holds 64-bit words"), _chain(info.value)


def test_run_time_enabled_is_rejected(built):
    with pytest.raises(Exception) as info:
        built.compile(launch_dynamic_enabled, _ptr(), Int32(1))
    assert _caused_by(info.value, TypeError, "enabled must be known when the kernel is compiled")


def _chain(e: BaseException) -> list[str]:
    out = []
    while e is not None:
        out.append(f"{type(e).__name__}: {e}")
        e = e.__cause__ or e.__context__
    return out


def _caused_by(e: BaseException, error: type, message: str) -> bool:
    while e is not None:
        if isinstance(e, error) and message in str(e):
            return True
        e = e.__cause__ or e.__context__
    return False


# -- small kernels for the error tests ----------------------------------------------------------


@cute.kernel
def one_event_kernel(prof_buf: cute.Pointer, E: cutlass.Constexpr):
    prof = cute_ops.init(prof_buf)
    prof.instant(E)


@cute.jit
def launch_one_event(prof_buf, E: cutlass.Constexpr):
    one_event_kernel(prof_buf, E).launch(grid=(1, 1, 1), block=(32, 1, 1))


@cute.kernel
def tensor_kernel(prof_buf: cute.Tensor):
    prof = cute_ops.init(prof_buf, per_warp=True)
    prof.instant(1)


@cute.jit
def launch_tensor_kernel(prof_buf: cute.Tensor):
    tensor_kernel(prof_buf).launch(grid=(1, 1, 1), block=(64, 1, 1))


@cute.kernel
def dynamic_enabled_kernel(prof_buf: cute.Pointer, flag: Int32):
    prof = cute_ops.init(prof_buf, enabled=flag)
    prof.instant(1)


@cute.jit
def launch_dynamic_enabled(prof_buf, flag: Int32):
    dynamic_enabled_kernel(prof_buf, flag).launch(grid=(1, 1, 1), block=(32, 1, 1))


def test_ring_events_wrap_the_slot_and_the_flush_closes_the_lane(built):
    ptx = built.ring.__ptx__
    # The instant before the loop and three event sites in it each wrap the slot with the mask.
    assert len(re.findall(r"and\.b32\s+s,", ptx)) == 4
    assert len(re.findall(r"or\.b32\s+v,.*0x80000000", ptx)) == 1
