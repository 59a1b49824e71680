"""Auto mode on the host: the PTX rewrite's edge cases, records -> one capture per launch
(launches apart by grid id and by CUDA graph replay, drops counted), the report and the packed
trace."""

from __future__ import annotations

import numpy as np
import pytest

from sm_profiler import format as fmt
from sm_profiler import ptx
from sm_profiler.auto_mode.records import read_buffer, to_captures
from sm_profiler.auto_mode.report import format_report, launch_reports
from sm_profiler.auto_mode.rewrite import RewriteError, instrument
from sm_profiler.decode import decode
from sm_profiler.timeline import build

PTX = """.version 8.7
.target sm_90a
.address_size 64

.func helper()
{
\tret;
}
.visible .entry k(
\t.param .u64 .ptr .global .align 1 k_param_0
)
.reqntid 128
{
\t.reg .pred \t%p<3>;
\t.reg .b32 \t%r<4>;
\tmov.u32 \t%r1, %ctaid.x;
\tsetp.gt.s32 \t%p1, %r1, 7;
\t@%p1 ret;
\t{ .reg .b32 tmp; mov.u32 tmp, 0; }
\tmov.b64 \t{%r2, %r3}, 0;
\tret;
}
\t.section\t.debug_abbrev
\t{
.b8 1
\t}
"""


def test_rewrite_records_every_way_out_and_leaves_functions_alone():
    out = instrument(PTX)
    assert out.count("// sm_profiler auto: start") == 1
    assert out.count("// sm_profiler auto: end") == 2  # the predicated ret and the last one
    assert "@!%p1 bra $SMPA_SKIP_0;" in out
    head, entry = out.split(".visible .entry k(")
    assert "sm_profiler auto" not in head  # .func helper's ret untouched
    assert ptx.auto_module_global() in head
    # The prologue comes after the entry's declarations, before its first instruction.
    body = entry.split("{", 1)[1]
    assert body.index(".reg .b32 \t%r<4>;") < body.index("sm_profiler auto: start")
    assert body.index("sm_profiler auto: start") < body.index("mov.u32 \t%r1, %ctaid.x;")
    w = instrument(PTX, "warp")
    assert "and.b32 %smpa_r0, %smpa_r0, 31;" in w and str(fmt.AUTO_PER_WARP) in w


@pytest.mark.parametrize("text, why", [
    (PTX.replace(".visible .entry k(", ".visible .entry k(\n)\n{\nret;\n}\n.visible .entry k2("),
     "one .entry"),
    (PTX.replace(".address_size 64", ".address_size 32"), "address_size"),
    (PTX.replace("\tret;\n}\n\t.section", "}\n\t.section").replace("\t@%p1 ret;", ""), "no ret"),
])  # fmt: skip
def test_rewrite_refuses_what_it_does_not_know(text, why):
    with pytest.raises(RewriteError, match=why):
        instrument(text)
    with pytest.raises(RewriteError, match="instrumented already"):
        instrument(instrument(PTX))


def _buffer(records, capacity=256 * 16, ring=False):
    """An auto buffer as the device leaves it after `records` (start, duration, sm, grid id,
    kernel id, x, y, z), claimed in this order on their SMs' counters."""
    words = np.zeros(fmt.auto_words(capacity), np.uint64)
    words[: fmt.AUTO_HEADER_WORDS] = fmt.auto_header(capacity, ring)
    size = capacity // fmt.AUTO_REGIONS
    counters = words[fmt.AUTO_HEADER_WORDS : fmt.AUTO_RECORDS_WORD : fmt.AUTO_COUNTER_WORDS]
    table = words[fmt.AUTO_RECORDS_WORD :].view(fmt.AUTO_RECORD_DTYPE)
    for start, dur, sm, grid_id, kid, x, y, z in records:
        region = sm % fmt.AUTO_REGIONS
        n = int(counters[region])
        counters[region] = n + 1
        words[fmt.AUTO_HEADER_WORDS : fmt.AUTO_RECORDS_WORD : fmt.AUTO_COUNTER_WORDS] = counters
        if n >= size and not ring:
            continue  # what the device does: limit mode keeps each SM's first records
        table[region * size + n % size] = (start, (start + dur) & fmt.LOW32, sm, grid_id, kid,
                                           x, y | (z << 16))  # fmt: skip
    return words


T0 = 7 * 2**32 - 300  # the low word wraps inside the records


def _two_kernels():
    # kernel 1: a 4-program launch (grid id 5) and the same kernel on another stream (grid id
    # 6) overlapping it; kernel 2: a 2x1x2 grid replayed twice by a CUDA graph (grid id 9).
    recs = [(T0 + 10 * p, 500, p % 3, 5, 1, p, 0, 0) for p in range(4)]
    recs += [(T0 + 50 + 10 * p, 400, 3, 6, 1, p, 0, 0) for p in range(4)]
    for replay in range(2):
        base = T0 + 2000 + 1000 * replay
        recs += [(base + 10 * i, 300, i, 9, 2, x, 0, z) for i, (x, z) in
                 enumerate([(0, 0), (1, 0), (0, 1), (1, 1)])]  # fmt: skip
    return recs


KERNELS = {1: {"name": "triton_poi_fused_add_0", "num_warps": 4, "sm_count": 4},
           2: {"name": "gemm", "num_warps": 8}}  # fmt: skip


def test_records_become_one_capture_per_launch():
    recs, info = read_buffer(_buffer(_two_kernels()))
    assert info == {"claimed": 16, "capacity": 4096, "ring": False, "dropped": 0, "unwritten": 0}
    caps = to_captures(recs, info, KERNELS, {"sm_count": 4})
    assert [c.kernel_name for c in caps] == ["triton_poi_fused_add_0"] * 2 + ["gemm"] * 2
    assert [c.metadata["grid"] for c in caps] == [[4, 1, 1], [4, 1, 1], [2, 1, 2], [2, 1, 2]]
    assert [c.metadata["grid_id"] for c in caps] == [5, 6, 9, 9]  # replays share the grid id
    trace = decode(caps)
    assert len(trace.events["kind"]) == 16 and trace.lanes["initialized"].all()
    # Times rebuilt across the low word's wrap; each program's start and duration exact.
    first = trace.events["capture"] == 0
    assert trace.events["start_ns"][first].tolist() == [T0 + 10 * p for p in range(4)]
    assert (trace.duration_ns[first] == 500).all()
    r = launch_reports(trace)
    assert [x.programs for x in r] == [4, 4, 4, 4]
    assert r[0].last_sm == 0 and r[0].span_ns == 30 + 500  # programs 0 and 3 ran on SM 0


def test_drops_are_counted_exactly_in_both_modes():
    # Three launches of 4 programs, all on SM 0, and one program on SM 300 (region 44: SM ids
    # wrap); capacity 512 is 2 records per region.
    recs = [(T0 + 100 * i, 50, 0, 1 + i // 4, 1, i % 4, 0, 0) for i in range(12)]
    recs.append((T0 + 5000, 50, 300, 4, 1, 0, 0, 0))
    for ring, grid_ids in ((False, [1]), (True, [3, 4])):
        got, info = read_buffer(_buffer(recs, capacity=512, ring=ring))
        assert info["claimed"] == 13 and info["dropped"] == 10 and len(got) == 3
        caps = to_captures(got, info, KERNELS)
        assert sorted({c.metadata["grid_id"] for c in caps}) == sorted(grid_ids + ([4] if not ring else []))
        text = format_report(decode(caps), width=80)
        assert "10 of 13 program records dropped" in text
        assert ("newest" if ring else "first") in text
    with pytest.raises(ValueError, match="power of two"):
        fmt.auto_header(100, False)


def test_unwritten_slot_is_left_out_and_counted():
    words = _buffer(_two_kernels()[:4])
    words[fmt.AUTO_HEADER_WORDS] += 1  # SM 0 claimed one more, not yet written
    recs, info = read_buffer(words)
    assert len(recs) == 4 and info["unwritten"] == 1


def test_report_fits_80_columns_and_sorts_by_time():
    caps = to_captures(*read_buffer(_buffer(_two_kernels())), KERNELS, {"sm_count": 4})
    text = format_report(decode(caps), width=80)
    assert all(len(line) <= 80 for line in text.splitlines())
    rows = [ln.split()[0] for ln in text.splitlines() if ln.startswith(("triton_", "gemm"))]
    # kernel 1: spans of 530 and 430 ns; gemm: two replays of 330 ns
    assert rows[0].startswith("triton_poi") and rows[1] == "gemm"
    assert "960 ns" in text and "660 ns" in text
    assert "longest tails:" in text


def test_packed_timeline_slots_per_sm_and_shared_launch_tracks():
    caps = to_captures(*read_buffer(_buffer(_two_kernels())), KERNELS, {"sm_count": 4})
    tl = build(decode(caps))
    assert tl.lane_labels is not None
    assert len(tl.lane_labels) < 16  # programs share slot tracks
    # No two programs on one slot track overlap.
    ev = tl.trace.events
    for row in np.unique(tl.ev_lane):
        m = tl.ev_lane == row
        s, e = np.sort(ev["start_ns"][m]), ev["end_ns"][m][np.argsort(ev["start_ns"][m])]
        assert (s[1:] >= e[:-1]).all()
    # The two overlapping launches of kernel 1 need two launch tracks; the replays reuse one.
    assert tl.launch_track_names == ["launches", "launches (overlap 1)"]
    assert sorted(tl.launch_track.tolist()) == [0, 0, 0, 1]


def test_packed_trace_exports(tmp_path):
    from sm_profiler.export import export

    caps = to_captures(*read_buffer(_buffer(_two_kernels())), KERNELS, {"sm_count": 4})
    trace = decode(caps)
    export(trace, tmp_path / "a.perfetto-trace")
    export(trace, tmp_path / "a.json")
    import json

    doc = json.loads((tmp_path / "a.json").read_text())
    names = {e["args"]["name"] for e in doc["traceEvents"] if e["name"] == "thread_name"}
    assert {"slot 0", "launches", "launches (overlap 1)"} <= names
    x = [e["name"] for e in doc["traceEvents"] if e.get("ph") == "X"]
    assert x.count("gemm") == 8  # its programs
    assert sum(n.startswith("gemm (launch") for n in x) == 2  # its launches
    assert (tmp_path / "a.perfetto-trace").stat().st_size > 0


def test_bad_options_and_impossible_settings_are_config_errors(monkeypatch):
    import sm_profiler
    from sm_profiler import ConfigError

    for bad in (100, 128, 0, -256, 2**32):
        with pytest.raises(ConfigError, match="power of two"):
            sm_profiler.auto(bad)
    for bad in (True, "4096", 4096.0):
        with pytest.raises(ConfigError, match="must be an int"):
            sm_profiler.auto(bad)
    with pytest.raises(ConfigError, match="ring must be"):
        sm_profiler.auto(ring="yes")
    with pytest.raises(ConfigError, match="level must be one of program, warp"):
        sm_profiler.auto(level="block")
    # Under the interpreter nothing is compiled: say so before touching anything.
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    with pytest.raises(ConfigError, match="TRITON_INTERPRET"):
        sm_profiler.auto().start()
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    import triton

    monkeypatch.delattr(triton.knobs.runtime_knobs, "add_stages_inspection_hook", raising=False)
    monkeypatch.delattr(triton.knobs.runtime, "add_stages_inspection_hook", raising=False)
    with pytest.raises(ConfigError, match="Triton 3.6 or newer"):
        sm_profiler.auto().start()


def test_results_before_the_region_ends_say_when_to_read_them():
    import sm_profiler
    from sm_profiler import ConfigError

    with pytest.raises(ConfigError, match="after the `with sm_profiler.auto"):
        sm_profiler.auto().records()


def test_cli_run_needs_a_script(capsys):
    from sm_profiler.cli import main

    assert main(["run"]) == 2
    assert "needs a script" in capsys.readouterr().err
    assert main(["run", "--", "/no/such/train.py"]) == 2
    assert "no script" in capsys.readouterr().err


def test_a_kernel_the_rewrite_does_not_know_runs_plain_with_a_warning():
    from types import SimpleNamespace

    from sm_profiler.auto_mode import binding

    stages = {"ptx": lambda src, metadata: ".version 8.7\n.target sm_90a\n// no entry here\n"}
    options = SimpleNamespace(instrumentation_mode=binding.mode_name("program"))
    binding._stages_hook(None, stages, options, None, 90)
    with pytest.warns(binding.AutoWarning, match="'odd_kernel' runs uninstrumented"):
        out = stages["ptx"](None, {"name": "odd_kernel"})
    assert out.endswith("// no entry here\n")  # the plain PTX, untouched
    assert "odd_kernel" in binding.STATE.skipped
    # Compiles without auto mode's instrumentation_mode are left alone.
    plain = {"ptx": lambda src, metadata: PTX}
    binding._stages_hook(None, plain, SimpleNamespace(instrumentation_mode=""), None, 90)
    assert plain["ptx"](None, {}) == PTX
    key, digest = binding._stages_hook()  # Triton 3.7+: the hook's part of the cache key
    assert binding.MODE_PREFIX in key and len(digest) == 64


def test_partitions_of_a_warp_specialized_kernel_name_its_warps():
    from sm_profiler.auto_mode.binding import partitions_of
    from sm_profiler.auto_mode.records import _warp_names

    ttgir = """module attributes {"ttg.num-ctas" = 1 : i32, "ttg.num-warps" = 4 : i32} {
    ttg.warp_specialize(%out, %iters) attributes {requestedRegisters = array<i32: 48, 24>}
    partition0(%arg3: !tt.ptr<f32> loc(unknown), %arg4: i32 loc(unknown)) num_warps(2) {
    partition1(%arg3: !tt.ptr<f32> loc(unknown)) num_warps(1) {
    """
    parts = partitions_of(ttgir)
    assert parts == [("default", 0, 4), ("worker 0", 4, 2), ("worker 1", 6, 1)]
    names = _warp_names(8, parts)
    assert names[0] == "default · warp 0" and names[5] == "worker 0 · warp 5"
    assert names[6] == "worker 1 · warp 6" and names[7] == "warp 7"  # Triton's padding warp
    assert partitions_of('module attributes {"ttg.num-warps" = 4 : i32} {') == []


def test_a_tag_reaches_the_launch_metadata():
    recs = [(T0 + 10 * p, 50, p, 3, 1 | (5 << 24), p, 0, 0) for p in range(4)]
    recs += [(T0 + 900 + 10 * p, 50, p, 4, 1, p, 0, 0) for p in range(4)]
    caps = to_captures(*read_buffer(_buffer(recs)), KERNELS)
    assert [c.metadata.get("tag") for c in caps] == [5, None]
    assert {c.kernel_name for c in caps} == {"triton_poi_fused_add_0"}  # a tag names nothing
