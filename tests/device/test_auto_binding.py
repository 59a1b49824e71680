"""Auto mode's binding to Triton (sm_profiler/auto_mode/binding.py), without a GPU: the compile
stage hook runs a kernel the rewrite does not know plain, with a warning; the partitions of a
warp-specialized kernel name its warps."""

from __future__ import annotations

import cuda_tools
import pytest
from auto_inputs import PTX

from sm_profiler.auto_mode.state import DeviceBuffer


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
    from sm_profiler.trace.auto_table import _warp_names

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
    from sm_profiler.wire.auto_areas import Areas

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
    monkeypatch.setattr(binding.STATE, "single", DeviceBuffer(1 << 20, areas, None))
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
    from sm_profiler.wire.auto_areas import Areas

    def no_driver():
        raise RuntimeError("no driver")

    cls, copies, _, s = _fake_graphs(  # not staged: copied out a replay at a time
        monkeypatch,
        lambda stream, areas, plain=None: _FakeSwitch((stream, areas)),
        no_driver,
        False,
        100,
    )
    a1, buf1 = s.buffers[0].areas, s.buffers[0].buffer
    g = cls()
    with pytest.warns(binding.AutoWarning, match="copied out one at a time .* no driver"):
        g.capture_begin()  # captured in a step that records nothing: the graph still gets areas
    assert binding.area_for_launch(4 * 32, 32, 0) == 1000 + 96 * 32
    assert binding.area_for_launch(2 * 32, 32, 0) == 1000 + 94 * 32
    g.capture_end()
    assert s.capturing is None and g._sm_profiler_keep == [buf1]  # the buffer lives with it
    assert g._sm_profiler_stage is None
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
    s.buffers = {0: DeviceBuffer(5000, a2, object())}
    g.replay()
    assert copies[-1] == (5000, 1000 + 94 * 32, 6 * 32, 99)
    assert a2.claimed == 6 and a2.kept() == 6
    assert switch.asked[-1] == (7, True)  # on still: not switched again
    binding.pause()  # as Inductor's autotuner is paused
    g.replay()
    assert len(copies) == 2  # an autotuner's benchmark: nothing
    assert switch.asked[-1] == (7, False)  # and its kernels write nothing


def _fake_graphs(monkeypatch, prepare, load=lambda: (11, 12), recording=True, slots=1000):
    """A fake graph class wrapped as install() wraps CUDAGraph, with graph_switch's `prepare`,
    graph_stage's `load` and the driver calls faked, K = 3, one buffer of `slots` at 1000:
    (class, copies made, kernels launched, the State)."""
    from sm_profiler.auto_mode import binding, driver, graph_stage, graph_switch
    from sm_profiler.wire.auto_areas import Areas

    cls = type("Graph", (_FakeGraph,), {})
    cls.capture_begin = binding._wrap_capture_begin(cls.capture_begin)
    cls.capture_end = binding._wrap_capture_end(cls.capture_end)
    cls.replay = binding._wrap_replay(cls.replay)
    copies, launched = [], []
    monkeypatch.setattr(graph_stage, "STAGE_REPLAYS", 3)
    monkeypatch.setattr(graph_stage, "PENDING", [])
    monkeypatch.setattr(graph_stage, "load", load)
    monkeypatch.setattr(graph_stage, "_launch", lambda *a: launched.append(a))
    monkeypatch.setattr(driver, "copy_device", lambda *a: copies.append(a))
    monkeypatch.setattr(driver, "current_stream", lambda device: 99)
    monkeypatch.setattr(binding, "_capture_stream", lambda: 98)
    monkeypatch.setattr(graph_switch, "prepare", prepare)
    monkeypatch.setattr(binding, "_current_device", lambda: 0)
    s = binding.STATE
    for k, v in dict(
        level="program",
        paused=0,
        pauses=0,
        recording=recording,
        on=recording,
        capturing=None,
        buffers={0: DeviceBuffer(1000, Areas(slots, ring=False), object())},
        single=None,
        step_tag=3,
        tag=0,
        allocate=lambda device: None,
    ).items():
        monkeypatch.setattr(s, k, v)
    return cls, copies, launched, s


def test_a_staged_graph_is_copied_out_once_every_k_recorded_replays(monkeypatch):
    """The host counts a staged graph's replays as its BUMP kernel does (modulo K) and copies
    the K slots out in one call when full; what a region holds at its end is copied by drain."""
    from sm_profiler.auto_mode import binding, graph_stage

    cls, copies, launched, s = _fake_graphs(
        monkeypatch, lambda stream, areas, plain=None: _FakeSwitch((stream, areas))
    )
    areas = s.buffers[0].areas
    g = cls()
    g.capture_begin()
    binding.area_for_launch(4 * 32, 32, 0)  # slots 996..999
    binding.area_for_launch(2 * 32, 32, 0)  # slots 994..995: the graph's span is 6
    g.capture_end()
    # K = 3 slots of 6 below the counter's slot (975), and the two kernels captured after the
    # graph's work in the capture's stream: STAGE(staging, src, 16-byte units, counter), BUMP.
    counter, staging = 1000 + 975 * 32, 1000 + 976 * 32
    assert areas.graph_slots == 6 + 1 + 3 * 6
    assert [(a[0], a[1], a[4]) for a in launched] == [
        (98, 11, [staging, 1000 + 994 * 32, 12, counter]),
        (98, 12, [3, counter]),
    ]
    switch = g._sm_profiler_switch  # the counter is switched off with the areas
    assert switch.areas == (98, {1000 + 996 * 32, 1000 + 994 * 32, counter})
    for step in (3, 4):
        s.step_tag = step
        g.replay()
    assert copies == [] and graph_stage.PENDING == [g._sm_profiler_stage]
    s.step_tag = 5
    g.replay()  # the third: the slots are full, copied out as one area of three replays
    assert copies == [(1000 + 0, staging, 3 * 6 * 32, 99)] and graph_stage.PENDING == []
    assert areas.areas().tolist() == [
        [0, 2, 3, 0], [2, 4, 3, 0], [6, 2, 4, 0], [8, 4, 4, 0], [12, 2, 5, 0], [14, 4, 5, 0]
    ]  # fmt: skip
    g.replay()  # slot 0 again
    s.recording = False
    binding.rebind()
    g.replay()  # switched off: STAGE and BUMP do nothing, and the host does not count it
    assert switch.asked == [(7, False)] and not g._sm_profiler_stage.runs
    graph_stage.drain()  # the region ends: the one held replay is copied out
    assert copies[-1] == (1000 + 18 * 32, staging, 6 * 32, 99)
    s.recording = True
    binding.rebind()
    g.replay()
    g.replay()  # slots 1 and 2: full again, counted from where the device's counter is
    assert copies[-1] == (1000 + 24 * 32, staging + 1 * 6 * 32, 2 * 6 * 32, 99)
    assert areas.kept() == 6 * 6 and areas.claimed == 6 * 6


def test_a_staged_graph_that_cannot_be_switched_keeps_only_its_recorded_replays(monkeypatch):
    """With no switch its STAGE runs at every replay: the host counts every replay (or its
    count would drift from the device's) and keeps the recorded ones."""
    from sm_profiler.auto_mode import binding

    def refuse(stream, areas):
        raise RuntimeError("no clone")

    cls, copies, _, s = _fake_graphs(monkeypatch, refuse)
    areas = s.buffers[0].areas
    g = cls()
    g.capture_begin()
    binding.area_for_launch(2 * 32, 32, 0)
    with pytest.warns(binding.AutoWarning, match="every replay"):
        g.capture_end()
    assert g._sm_profiler_switch is None and g._sm_profiler_stage.k == 3
    for recorded in (False, True, False):
        s.recording = recorded
        binding.rebind()
        g.replay()
    assert len(copies) == 1 and copies[0][2] == 3 * 2 * 32  # the three slots, in one copy
    assert areas.areas().tolist() == [[2, 2, 3, 0]]  # the second replay only
    s.recording = False
    binding.rebind()
    for _ in range(3):
        g.replay()
    assert len(copies) == 1  # nothing recorded: nothing copied


def test_staging_leaves_graphs_captured_later_room_for_their_areas():
    from sm_profiler.auto_mode.graph_stage import STAGE_REPLAYS, replays_to_stage

    assert replays_to_stage(10, 10_000, 10) == STAGE_REPLAYS
    assert replays_to_stage(100, 10_000, 50) == 12  # a quarter of the graph space: 1250 / 100
    assert replays_to_stage(100, 10_000, 4000) == 2  # a quarter of what is free: 999 / 4 / 100
    assert replays_to_stage(100, 1000, 250) == 0  # room for one: copied a replay at a time
    assert replays_to_stage(600, 1000, 600) == 0


def test_kernel_node_params_lay_out_as_cuda_h():
    """The ctypes CUDA_KERNEL_NODE_PARAMS_v2 the graph switch reads and writes: the offsets of
    cuda.h on a 64-bit host (a wrong one would hand the driver garbage for kernelParams)."""
    import ctypes

    from sm_profiler.auto_mode.graph_switch import KernelNodeParams as P

    assert (P.grid.offset, P.block.offset, P.shared_bytes.offset) == (8, 20, 32)
    assert (P.kernel_params.offset, P.extra.offset, P.kern.offset, P.ctx.offset) == (40, 48, 56, 64)
    assert ctypes.sizeof(P) == 72


def test_graphs_made_while_on_keep_their_graph_and_are_instantiated_at_capture_end(monkeypatch):
    """A CUDAGraph constructed while auto mode is on is made with keep_graph=True (the staging
    kernels' nodes can then be disabled at off replays) and instantiated at capture end, as
    PyTorch does without keep_graph; one made before, or asking to keep its graph, is as asked."""
    from sm_profiler.auto_mode import binding, graph_switch

    class Graph(_FakeGraph):
        def __init__(self, keep_graph=False):
            self.keep_graph, self.instantiated = keep_graph, 0

        def raw_cuda_graph(self):
            return 55

        def instantiate(self):
            self.instantiated += 1

    Graph.__init__ = binding._wrap_graph_init(Graph.__init__)
    Graph.capture_end = binding._wrap_capture_end(Graph.capture_end)
    monkeypatch.setattr(binding.STATE, "capturing", None)
    monkeypatch.setattr(binding.STATE, "level", None)
    before, asked = Graph(), Graph(keep_graph=True)
    monkeypatch.setattr(binding.STATE, "level", "program")
    made = Graph()
    assert (before.keep_graph, asked.keep_graph, made.keep_graph) == (False, True, True)
    for g in (before, asked, made):
        g.capture_end()  # captured nothing of ours
    assert (before.instantiated, asked.instantiated, made.instantiated) == (0, 0, 1)
    # Staged: the staging kernels' nodes are found in the kept graph before it is instantiated.
    seen = []
    monkeypatch.setattr(
        graph_switch, "nodes_of", lambda graph, fns: seen.append((graph, fns)) or [7, 8]
    )
    switch, stage = _FakeSwitch(None), type("Stage", (), {"functions": (11, 12)})()
    g = Graph()
    binding._instantiate(g, switch, stage)
    assert seen == [(55, (11, 12))] and switch.nodes == [7, 8] and g.instantiated == 1

    class OldGraph(_FakeGraph):  # a PyTorch whose graphs take no keep_graph
        def __init__(self):
            self.made = True

    OldGraph.__init__ = binding._wrap_graph_init(OldGraph.__init__)
    old = OldGraph()
    assert old.made and not getattr(old, "_sm_profiler_instantiate", False)


def test_a_switch_disables_the_staging_nodes_off_and_enables_them_on(monkeypatch):
    """Switch.follow updates the instantiated graph from the off or on clone, then disables (off)
    or enables (on) the staging kernels' nodes through the driver."""
    from sm_profiler.auto_mode import graph_switch

    calls = []

    class Driver:
        def cuGraphExecUpdate_v2(self, exec_handle, graph, info):
            calls.append(("update", exec_handle.value, graph.value))
            return 0

        def cuGraphNodeSetEnabled(self, exec_handle, node, on):
            calls.append(("enabled", exec_handle.value, node.value, on.value))
            return 0

    monkeypatch.setattr(graph_switch, "libcuda", lambda: Driver())
    monkeypatch.setattr(graph_switch, "_destroy_both", lambda *a: None)
    switch = graph_switch.Switch(101, 102)
    switch.nodes = [7, 8]
    switch.follow(9, False)
    switch.follow(9, False)  # no change: nothing asked
    switch.follow(9, True)
    assert calls == [
        ("update", 9, 102), ("enabled", 9, 7, 0), ("enabled", 9, 8, 0),
        ("update", 9, 101), ("enabled", 9, 7, 1), ("enabled", 9, 8, 1),
    ]  # fmt: skip
    assert switch.on and switch.updates == 2


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


@pytest.mark.skipif(
    cuda_tools.triton_bin("ptxas") is None or cuda_tools.triton_bin("nvdisasm") is None,
    reason="needs Triton's ptxas and nvdisasm",
)
@pytest.mark.parametrize("arch", ["sm_90", "sm_100a"])
def test_the_staging_kernels_read_the_counter_once_and_copy_16_bytes_a_unit(arch):
    """ptx.AUTO_STAGE_PTX compiles for Hopper and Blackwell: STAGE reads its counter once and
    its loop is one 16-byte load and one 16-byte store; BUMP one load and one store; no atomic."""
    from sm_profiler.record import ptx

    code = cuda_tools.sass(ptx.AUTO_STAGE_PTX, arch)
    memory = [
        ln.split()[0]
        for ln in code.splitlines()
        if ln.split() and ln.split()[0].startswith(("LDG", "STG", "ATOM", "RED", "LD.", "ST."))
    ]
    assert sorted(memory) == sorted(["LDG.E", "LDG.E.128", "STG.E.128", "LDG.E", "STG.E"]), memory


def _on_state(monkeypatch, on: bool):
    """The binding's state with one buffer of 100 slots at 1000 (no GPU), recording or not."""
    from sm_profiler.auto_mode import binding
    from sm_profiler.wire.auto_areas import Areas

    buf = DeviceBuffer(1000, Areas(100, ring=False), object())
    for k, v in dict(
        level="program",
        paused=0,
        recording=on,
        on=on,
        capturing=None,
        buffers={0: buf},
        single=buf,
        plain={111: 222},
        plain_of_module={5: 111},
    ).items():
        monkeypatch.setattr(binding.STATE, k, v)
    monkeypatch.setattr(binding, "_current_device", lambda: 0)
    return buf


@pytest.mark.parametrize("on", [False, True])
def test_a_launch_that_records_nothing_runs_the_plain_binary(monkeypatch, on):
    """Issue 43, off means plain: Triton's launcher, wrapped, launches the kernel's plain binary
    where the launch gets no area, the instrumented one with its area where it does; the
    profile scratch allocator hands out what the wrapper took, once."""
    from sm_profiler.auto_mode import binding

    _on_state(monkeypatch, on)
    launched = []

    class Launcher:
        num_ctas, profile_scratch_size = 1, 32

        def __call__(self, gx, gy, gz, stream, function, *args):  # as Triton's asks for scratch
            launched.append((function, binding.profile_scratch(gx * gy * gz * 32, 32, stream)))

    Launcher.__call__ = binding._wrap_launcher_call(Launcher.__call__)
    Launcher()(4, 1, 1, 0, 111, "x")
    assert launched == ([(111, 1000)] if on else [(222, None)])
    Launcher()(2, 1, 1, 0, 333, "x")  # a kernel with no plain binary: as before
    assert launched[-1] == ((333, 1000 + 4 * 32) if on else (333, None))
    assert not binding._HANDED.set  # nothing left over for another launcher's launch


@pytest.mark.parametrize("on", [False, True])
def test_inductors_static_launch_that_records_nothing_runs_the_plain_binary(monkeypatch, on):
    from sm_profiler.auto_mode import binding

    _on_state(monkeypatch, on)
    launched = []

    class Static:
        function, _sm_profiler_scratch = 111, (32, False)

        def run(self, gx, gy, gz, stream, *args):
            launched.append((self.function, args[-1]))

    Static.run = binding._wrap_static_run(Static.run)
    k = Static()
    k.run(3, 1, 1, 0, "x")
    assert launched == ([(111, 1000)] if on else [(222, 0)])
    assert k.function == 111  # the launcher's own handle, put back
    binding.forget(5)  # its module unloaded: its plain binary is forgotten with it
    assert binding.STATE.plain == {}
