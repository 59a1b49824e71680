"""What re-pointing a CUDA graph's kernel nodes at fresh record space would cost a replay, against
the copy-out auto mode makes (issue 54, item 4).

A graph's kernels write their records into the areas they were captured with. Auto mode copies a
recorded replay out of them (one cuMemcpyDtoDAsync; graph_stage.py stages up to 16 replays on the
device first where the buffer has room). The alternative the issue names: before each recorded
replay, point each instrumented kernel node's area parameter at fresh ring space
(cuGraphExecKernelNodeSetParams on the instantiated graph), so nothing is copied. That is one
driver call per kernel node per replay. Here: a CUDA graph of N launches of a small Triton kernel
(N = --nodes), and per replay, on the host, (1) every node's last parameter (where auto mode's
area goes) set to a new address, (2) the replay, (3) one device-to-device copy call of 1 MiB;
median microseconds of each over --replays replays.

    python -m benchmarks run graph_repoint --json $OUT/graph_repoint.json

Needs an NVIDIA GPU, torch and Triton; without a GPU it says so and exits 0.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import statistics
import sys
import time

from benchmarks.env import environment, no_cuda_gpu


def _add_kernel():
    import triton
    import triton.language as tl

    @triton.jit
    def add_one(x, y, n, BLOCK: tl.constexpr):
        i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = i < n
        tl.store(y + i, tl.load(x + i, mask=m) + 1, mask=m)

    return add_one


def measure(nodes: int, replays: int) -> dict:
    import torch

    from sm_profiler.auto_mode import driver, graph_switch
    from sm_profiler.auto_mode.driver import check_rc, libcuda

    cuda, add_one = libcuda(), _add_kernel()
    x = torch.zeros(4096, device="cuda")
    ys = [torch.zeros(4096, device="cuda") for _ in range(nodes)]
    space = torch.zeros(1 << 22, dtype=torch.int64, device="cuda")  # the "ring"
    graph = torch.cuda.CUDAGraph(keep_graph=True)
    torch.cuda.synchronize()
    with torch.cuda.graph(graph, stream=torch.cuda.Stream()):
        for y in ys:
            add_one[(4,)](x, y, 4096, BLOCK=1024)
    graph.instantiate()
    exe = ctypes.c_void_p(graph.raw_cuda_graph_exec())
    found = []
    for node in graph_switch._kernel_nodes(graph.raw_cuda_graph()):
        p = graph_switch.KernelNodeParams()
        check_rc(cuda.cuGraphKernelNodeGetParams_v2(ctypes.c_void_p(node), ctypes.byref(p)), "get")
        found.append((ctypes.c_void_p(node), p, graph_switch._last_param(p.func)[0]))
    graph.replay()
    torch.cuda.synchronize()
    where = ctypes.c_uint64(0)

    def repoint(replay: int) -> None:
        for k, (node, p, last) in enumerate(found):
            values = (ctypes.c_void_p * (last + 1))(*p.kernel_params[: last + 1])
            where.value = space.data_ptr() + 8 * ((replay * nodes + k) % (1 << 20))
            values[last] = ctypes.addressof(where)  # the driver copies the value
            q = graph_switch.KernelNodeParams.from_buffer_copy(p)
            q.kernel_params = ctypes.cast(values, ctypes.POINTER(ctypes.c_void_p))
            check_rc(cuda.cuGraphExecKernelNodeSetParams_v2(exe, node, ctypes.byref(q)), "set")

    stream = driver.current_stream(driver.current_device())
    ns = {"repoint": [], "replay": [], "copy": []}
    for r in range(replays):
        a = time.perf_counter_ns()
        repoint(r)
        b = time.perf_counter_ns()
        graph.replay()
        c = time.perf_counter_ns()
        driver.copy_device(space.data_ptr(), space.data_ptr() + (1 << 24), 1 << 20, stream)
        d = time.perf_counter_ns()
        ns["repoint"].append(b - a)
        ns["replay"].append(c - b)
        ns["copy"].append(d - c)
        if r % 20 == 19:
            torch.cuda.synchronize()  # never more than 20 replays queued
    torch.cuda.synchronize()
    us = {k: statistics.median(v) / 1e3 for k, v in ns.items()}
    return {
        "nodes": len(found),
        "repoint_us": us["repoint"],
        "repoint_per_node_us": us["repoint"] / max(len(found), 1),
        "replay_us": us["replay"],
        "copy_call_us": us["copy"],
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", default="8,64,256", help="kernel nodes per graph, comma-separated")
    ap.add_argument("--replays", type=int, default=200)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    if no_cuda_gpu("graph_repoint"):
        return 0
    rows = [measure(int(n), args.replays) for n in args.nodes.split(",") if n]
    print(f"{'nodes':>6}{'re-point (us)':>15}{'per node':>10}{'replay':>9}{'one copy call':>15}")
    for r in rows:
        print(
            f"{r['nodes']:>6}{r['repoint_us']:>15.1f}{r['repoint_per_node_us']:>10.2f}"
            f"{r['replay_us']:>9.1f}{r['copy_call_us']:>15.1f}"
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"environment": environment(), "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
