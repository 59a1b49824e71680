"""Auto mode's binding to Triton (sm_profiler/auto_mode/binding.py), without a GPU: the compile
stage hook runs a kernel the rewrite does not know plain, with a warning; the partitions of a
warp-specialized kernel name its warps."""

from __future__ import annotations

import pytest
from auto_inputs import PTX


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
    from sm_profiler.auto_mode.table import _warp_names

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


def test_an_instrumented_kernel_asks_for_a_record_per_program_at_each_launch():
    from types import SimpleNamespace

    from sm_profiler.auto_mode import binding

    stages = {"ptx": lambda src, metadata: PTX}
    options = SimpleNamespace(instrumentation_mode=binding.mode_name("warp"))
    binding._stages_hook(None, stages, options, None, 90)
    meta = {"name": "k", "num_warps": 8}
    stages["ptx"](None, meta)
    assert meta["profile_scratch_size"] == 8 * 32  # per warp: warps x 32 bytes a program


class _FakeStaticLauncher:
    """Inductor's static launcher as far as the binding relies on it (torch 2.11's shape):
    refuses profile scratch, appends a None per scratch parameter at each run."""

    def __init__(self, kernel):
        m = kernel.metadata
        if m.profile_scratch_size > 0:
            raise NotImplementedError("Profile scratch not yet supported")
        self.has_global_scratch = self.has_profile_scratch = True
        self.arg_tys = "OOi"
        self.launched = []

    def run(self, grid_x, grid_y, grid_z, stream, *args):
        arg_tys = self.arg_tys
        for has in (self.has_global_scratch, self.has_profile_scratch):
            if has:
                arg_tys, args = arg_tys + "O", (*args, None)
        assert len(args) == len(arg_tys)
        self.launched.append((arg_tys, args))


def test_the_static_launcher_passes_each_launch_its_area(monkeypatch):
    from collections import namedtuple

    from sm_profiler.auto_mode import binding
    from sm_profiler.auto_mode.areas import Areas

    Meta = namedtuple("Meta", "instrumentation_mode profile_scratch_size num_warps shared hash")
    cls = type("Launcher", (_FakeStaticLauncher,), {})
    cls.__init__ = binding._wrap_static_init(cls.__init__)
    cls.run = binding._wrap_static_run(cls.run)
    ours = SimpleKernel(Meta(binding.mode_name("program"), 32, 4, 0, "h"))
    plain = SimpleKernel(Meta("", 0, 4, 0, "h"))
    a, p = cls(ours), cls(plain)
    assert ours.metadata.profile_scratch_size == 32  # put back as it was
    areas = Areas(1000, ring=False)
    monkeypatch.setattr(binding.STATE, "on", True)
    monkeypatch.setattr(binding.STATE, "single", (1 << 20, areas))
    a.run(3, 2, 1, 0, "x", "y", 5)
    a.run(4, 1, 1, 0, "x", "y", 5)
    p.run(4, 1, 1, 0, "x", "y", 5)
    (t0, a0), (t1, a1) = a.launched
    assert t0 == "OOiOK" and a0 == ("x", "y", 5, None, 1 << 20)  # global scratch None, area
    assert a1[-1] == (1 << 20) + 6 * 32  # the next launch's area follows the 6 programs
    assert p.launched == [("OOiOO", ("x", "y", 5, None, None))]  # plain kernels untouched
    assert areas.areas()[:, :2].tolist() == [[0, 6], [6, 4]]
    monkeypatch.setattr(binding.STATE, "on", False)
    a.run(4, 1, 1, 0, "x", "y", 5)
    assert a.launched[-1][1][-1] == 0  # not recording: a null area


class SimpleKernel:
    def __init__(self, metadata):
        self.metadata = metadata
        self.src = None


class _FakeGraph:
    """torch.cuda.CUDAGraph as far as the binding wraps it."""

    def capture_begin(self, *args, **kwargs):
        pass

    def capture_end(self):
        pass

    def replay(self):
        pass

    def raw_cuda_graph_exec(self):
        return 7


class _FakeSwitch:
    """graph_switch.Switch as far as the binding drives it: which state each update asked for."""

    def __init__(self, areas):
        self.areas, self.on, self.asked = areas, True, []

    def follow(self, exec_handle, on):
        self.asked.append((exec_handle, on))
        self.on = on


def test_a_graph_replay_is_copied_out_when_recorded_into_the_region_of_the_day(monkeypatch):
    from sm_profiler.auto_mode import binding
    from sm_profiler.auto_mode.areas import Areas

    cls = type("Graph", (_FakeGraph,), {})
    cls.capture_begin = binding._wrap_capture_begin(cls.capture_begin)
    cls.capture_end = binding._wrap_capture_end(cls.capture_end)
    cls.replay = binding._wrap_replay(cls.replay)
    from sm_profiler.auto_mode import graph_switch

    copies = []
    monkeypatch.setattr(binding, "copy_device", lambda *a: copies.append(a))
    monkeypatch.setattr(binding, "_stream", lambda device: 99)
    monkeypatch.setattr(binding, "_capture_stream", lambda: 98)
    monkeypatch.setattr(graph_switch, "prepare", lambda stream, areas: _FakeSwitch((stream, areas)))
    monkeypatch.setattr(binding, "_current_device", lambda: 0)
    a1, buf1 = Areas(100, ring=False), object()
    s = binding.STATE
    for k, v in dict(
        level="program",
        paused=0,
        pauses=0,
        recording=False,
        on=False,
        capturing=None,
        buffers={0: (1000, a1, buf1)},
        single=None,
        step_tag=3,
        tag=0,
        allocate=lambda device: None,
    ).items():
        monkeypatch.setattr(s, k, v)
    g = cls()
    g.capture_begin()  # captured in a step that records nothing: the graph still gets areas
    assert binding.area_for_launch(4 * 32, 32, 0) == 1000 + 96 * 32
    assert binding.area_for_launch(2 * 32, 32, 0) == 1000 + 94 * 32
    g.capture_end()
    assert s.capturing is None and g._sm_profiler_keep == [buf1]  # the buffer lives with it
    switch = g._sm_profiler_switch  # made from the capture's stream and its two areas
    assert switch.areas == (98, {1000 + 96 * 32, 1000 + 94 * 32}) and switch.asked == []
    g.replay()
    assert copies == []  # not recording: switched off, nothing to copy
    assert switch.asked == [(7, False)]
    s.recording = s.on = True
    g.replay()
    assert switch.asked == [(7, False), (7, True)]  # switched on, at the edge
    assert copies == [(1000 + 0 * 32, 1000 + 94 * 32, 6 * 32, 99)]
    assert a1.areas().tolist() == [[0, 2, 3, 0], [2, 4, 3, 0]]  # its two launches, step 3
    # A later region (another buffer) records the replays of a graph captured before.
    a2 = Areas(50, ring=False)
    s.buffers = {0: (5000, a2, object())}
    g.replay()
    assert copies[-1] == (5000, 1000 + 94 * 32, 6 * 32, 99)
    assert a2.claimed == 6 and a2.kept() == 6
    assert switch.asked[-1] == (7, True)  # on still: not switched again
    binding.pause()  # as Inductor's autotuner is paused
    g.replay()
    assert len(copies) == 2  # an autotuner's benchmark: nothing
    assert switch.asked[-1] == (7, False)  # and its kernels write nothing


def test_kernel_node_params_lay_out_as_cuda_h():
    """The ctypes CUDA_KERNEL_NODE_PARAMS_v2 the graph switch reads and writes: the offsets of
    cuda.h on a 64-bit host (a wrong one would hand the driver garbage for kernelParams)."""
    import ctypes

    from sm_profiler.auto_mode.graph_switch import KernelNodeParams as P

    assert (P.grid.offset, P.block.offset, P.shared_bytes.offset) == (8, 20, 32)
    assert (P.kernel_params.offset, P.extra.offset, P.kern.offset, P.ctx.offset) == (40, 48, 56, 64)
    assert ctypes.sizeof(P) == 72


def test_a_graph_the_driver_will_not_switch_warns_once_and_is_left_alone(monkeypatch):
    from sm_profiler.auto_mode import binding

    class Refusing(_FakeSwitch):
        def follow(self, exec_handle, on):
            self.asked.append((exec_handle, on))
            raise RuntimeError("cuGraphExecUpdate failed with CUDA error 910")

    cls = type("Graph", (_FakeGraph,), {})
    cls.replay = binding._wrap_replay(cls.replay)
    monkeypatch.setattr(binding.STATE, "on", True)
    g = cls()
    g._sm_profiler_switch = switch = Refusing(None)
    switch.on = False  # switched off when the driver began refusing
    with pytest.warns(binding.AutoWarning, match="no longer switched and write no records"):
        g.replay()
    assert switch.asked == [(7, True)] and g._sm_profiler_switch is None
    g.replay()  # nothing more is asked of the driver
    assert switch.asked == [(7, True)]
