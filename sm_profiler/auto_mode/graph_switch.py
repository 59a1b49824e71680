"""A captured CUDA graph's instrumented kernels, switched between writing records and not.

A graph keeps the area pointers it was captured with, so left alone its kernels write their
records at every replay, recorded or not: a step outside a schedule's active steps paid the whole
record (+0.6..1.1 % under CUDA graphs, BENCHMARKS.md) against an eager launch's pointer test. So
at capture end, while the capture is still open (PyTorch destroys the captured graph once it has
instantiated it), auto mode clones the captured graph twice: as captured, and with each
instrumented kernel's last parameter (its area) set to null and its function the kernel's plain
binary. A replay whose recording state differs from the graph's updates the instantiated graph
from one clone or the other (cuGraphExecUpdate: the clones differ from what was instantiated in
kernel functions and parameters only), so an off replay runs the plain kernels, as an eager
launch given no area does. The update happens only
where the state changes (a schedule's edges), and affects no launch already queued.

A graph staged on the device (graph_stage.py) has two kernels of ours after its work. Nulled in
the off clone they would still run, empty, at every off replay (1-2.5 us a replay, BENCHMARKS.md),
so they are disabled there too (cuGraphNodeSetEnabled): an off replay then runs the plain kernels
and nothing else. That call takes the nodes of the graph the instantiation was made from, which
PyTorch destroys at capture end, so auto mode makes the graphs constructed while it is on keep
theirs (keep_graph=True) and instantiates them at capture end itself, as PyTorch would have.

Where the clones cannot be made or a kernel's area cannot be found among its parameters, the graph
is left as it was: it writes at every replay, and only recorded replays are copied out.
"""

from __future__ import annotations

import ctypes
import time
import weakref

from .driver import check_rc, libcuda

_CAPTURE_ACTIVE = 1  # CU_STREAM_CAPTURE_STATUS_ACTIVE
_NODE_KERNEL = 0  # CU_GRAPH_NODE_TYPE_KERNEL
_MAX_PARAMS = 4096  # a kernel's parameters are at most 32 KiB: far fewer than this
_NULL = ctypes.c_uint64(0)  # the value a switched-off kernel's area parameter points at
# Every switch of the process: how many graph updates, and the host seconds they took (benchmarks).
UPDATES = {"count": 0, "seconds": 0.0}


class KernelNodeParams(ctypes.Structure):
    """CUDA_KERNEL_NODE_PARAMS_v2 (cuda.h, CUDA 12 and 13)."""

    _fields_ = [
        ("func", ctypes.c_void_p),
        ("grid", ctypes.c_uint * 3),
        ("block", ctypes.c_uint * 3),
        ("shared_bytes", ctypes.c_uint),
        ("kernel_params", ctypes.POINTER(ctypes.c_void_p)),
        ("extra", ctypes.POINTER(ctypes.c_void_p)),
        ("kern", ctypes.c_void_p),
        ("ctx", ctypes.c_void_p),
    ]


class _UpdateResult(ctypes.Structure):
    """CUgraphExecUpdateResultInfo."""

    _fields_ = [("result", ctypes.c_int), ("node", ctypes.c_void_p), ("from_node", ctypes.c_void_p)]


def captured_graph(stream: int) -> int | None:
    """The graph `stream` is capturing into now, or None."""
    cuda = libcuda()
    status, ident, graph = ctypes.c_int(0), ctypes.c_uint64(0), ctypes.c_void_p(0)
    deps, count = ctypes.c_void_p(0), ctypes.c_size_t(0)
    rc = cuda.cuStreamGetCaptureInfo_v2(
        ctypes.c_void_p(stream),
        ctypes.byref(status),
        ctypes.byref(ident),
        ctypes.byref(graph),
        ctypes.byref(deps),
        ctypes.byref(count),
    )
    check_rc(rc, "cuStreamGetCaptureInfo")
    return graph.value if status.value == _CAPTURE_ACTIVE and graph.value else None


def _clone(graph: int) -> int:
    out = ctypes.c_void_p(0)
    check_rc(libcuda().cuGraphClone(ctypes.byref(out), ctypes.c_void_p(graph)), "cuGraphClone")
    return out.value


def _kernel_nodes(graph: int) -> list[int]:
    cuda = libcuda()
    count = ctypes.c_size_t(0)
    check_rc(
        cuda.cuGraphGetNodes(ctypes.c_void_p(graph), None, ctypes.byref(count)), "cuGraphGetNodes"
    )
    nodes = (ctypes.c_void_p * count.value)()
    check_rc(
        cuda.cuGraphGetNodes(ctypes.c_void_p(graph), nodes, ctypes.byref(count)), "cuGraphGetNodes"
    )
    kernels = []
    kind = ctypes.c_int(-1)
    for node in nodes[: count.value]:
        check_rc(
            cuda.cuGraphNodeGetType(ctypes.c_void_p(node), ctypes.byref(kind)), "cuGraphNodeGetType"
        )
        if kind.value == _NODE_KERNEL:
            kernels.append(node)
    return kernels


def _last_param(func: int) -> tuple[int, int] | None:
    """(index, size) of a kernel's last parameter, from the driver (cuFuncGetParamInfo)."""
    cuda = libcuda()
    offset, size, last = ctypes.c_size_t(0), ctypes.c_size_t(0), None
    for i in range(_MAX_PARAMS):
        if cuda.cuFuncGetParamInfo(
            ctypes.c_void_p(func), ctypes.c_size_t(i), ctypes.byref(offset), ctypes.byref(size)
        ):
            break
        last = (i, size.value)
    return last


def null_areas(graph: int, areas: set[int], plain: dict | None = None) -> set[int]:
    """Set to null the area parameter of each kernel node of `graph` whose last parameter is one of
    `areas` (the addresses handed out while it was captured, and graph_stage's counter, the last
    parameter of its two kernels), and make the node run the kernel's plain binary where
    `plain` (instrumented CUfunction -> plain one) names it; the addresses found."""
    cuda = libcuda()
    found: set[int] = set()
    # Per capture, not per process: a function handle of an unloaded module may come back as
    # another kernel's, with other parameters.
    last_params: dict[int, tuple[int, int] | None] = {}
    for node in _kernel_nodes(graph):
        params = KernelNodeParams()
        rc = cuda.cuGraphKernelNodeGetParams_v2(ctypes.c_void_p(node), ctypes.byref(params))
        check_rc(rc, "cuGraphKernelNodeGetParams")
        if not params.func or not params.kernel_params:
            continue  # a kernel given by CUkernel or by `extra`: not one Triton launched
        if params.func not in last_params:
            last_params[params.func] = _last_param(params.func)
        last = last_params[params.func]
        if last is None or last[1] != 8:
            continue
        index = last[0]
        value = ctypes.c_uint64.from_address(params.kernel_params[index]).value
        if value not in areas:
            continue
        values = (ctypes.c_void_p * (index + 1))(*params.kernel_params[: index + 1])
        values[index] = ctypes.addressof(_NULL)  # the driver copies the values it is given
        params.kernel_params = ctypes.cast(values, ctypes.POINTER(ctypes.c_void_p))
        params.func = (plain or {}).get(params.func, params.func)  # same parameters
        rc = cuda.cuGraphKernelNodeSetParams_v2(ctypes.c_void_p(node), ctypes.byref(params))
        check_rc(rc, "cuGraphKernelNodeSetParams")
        found.add(value)
    return found


class Switch:
    """A graph's two clones (recording, not recording) and which one its instantiation follows."""

    def __init__(self, on_graph: int, off_graph: int):
        self.graphs = {True: on_graph, False: off_graph}
        self.on = True  # instantiated as captured: writing its records
        self.updates = 0
        # Nodes of the graph the instantiation was made from, run only while recording (the
        # staging kernels), or none where that graph is not kept.
        self.nodes: list[int] = []
        weakref.finalize(self, _destroy_both, on_graph, off_graph)

    def follow(self, exec_handle: int, on: bool) -> None:
        """Make the instantiated graph write its records (on) or not, before its next launch.
        Raises where the driver refuses: the caller then stops switching this graph."""
        if on == self.on:
            return
        info = _UpdateResult()
        t0 = time.perf_counter()
        rc = libcuda().cuGraphExecUpdate_v2(
            ctypes.c_void_p(exec_handle), ctypes.c_void_p(self.graphs[on]), ctypes.byref(info)
        )
        UPDATES["count"] += 1
        UPDATES["seconds"] += time.perf_counter() - t0
        if rc != 0:  # internal: the binding catches it, warns, and leaves the graph as it is
            raise RuntimeError(
                f"cuGraphExecUpdate failed with CUDA error {rc} (result {info.result})"
            )
        for node in self.nodes:
            rc = libcuda().cuGraphNodeSetEnabled(
                ctypes.c_void_p(exec_handle), ctypes.c_void_p(node), ctypes.c_uint(int(on))
            )
            check_rc(rc, "cuGraphNodeSetEnabled")
        self.on = on
        self.updates += 1


def nodes_of(graph: int, functions: tuple[int, ...]) -> list[int]:
    """The kernel nodes of `graph` that launch one of `functions`."""
    cuda, found = libcuda(), []
    for node in _kernel_nodes(graph):
        params = KernelNodeParams()
        rc = cuda.cuGraphKernelNodeGetParams_v2(ctypes.c_void_p(node), ctypes.byref(params))
        check_rc(rc, "cuGraphKernelNodeGetParams")
        if params.func in functions:
            found.append(node)
    return found


def _destroy_both(on_graph: int, off_graph: int) -> None:
    try:
        cuda = libcuda()
        cuda.cuGraphDestroy(ctypes.c_void_p(on_graph))
        cuda.cuGraphDestroy(ctypes.c_void_p(off_graph))
    except Exception:  # at interpreter exit the driver may be gone
        pass


def prepare(stream: int, areas: set[int], plain: dict | None = None) -> Switch | None:
    """At capture end, before the capture closes: the Switch of the graph `stream` captures (None
    if it captures none). Raises where a kernel's area is not found among its node's parameters:
    the graph then always writes."""
    graph = captured_graph(stream)
    if graph is None or not areas:
        return None
    on_graph = _clone(graph)
    off_graph = _clone(graph)
    try:
        found = null_areas(off_graph, areas, plain)
    except Exception:
        _destroy_both(on_graph, off_graph)
        raise
    if found != areas:  # internal: the binding catches it and warns (the graph runs unswitched)
        _destroy_both(on_graph, off_graph)
        raise RuntimeError(
            f"{len(found)} of the {len(areas)} areas it was given were found among its kernel "
            "nodes' parameters"
        )
    return Switch(on_graph, off_graph)
