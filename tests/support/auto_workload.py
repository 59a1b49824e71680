"""A small auto-mode workload for compute-sanitizer (test_auto_gpu.py runs it under memcheck):
the tutorial-shaped kernels of auto_kernels.py, with a buffer far too small (limit and ring), so
that the drop paths run too. Prints the records kept and dropped as JSON."""

import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(1, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
import auto_kernels as K  # noqa: E402

import sm_profiler  # noqa: E402


def work():
    n = 1 << 16
    x, y, out = (torch.rand(n, device="cuda") for _ in range(3))
    K.vector_add[(n // 1024,)](x, y, out, n, BLOCK=1024)
    m = torch.rand(64, 1000, device="cuda")
    K.softmax[(64,)](torch.empty_like(m), m, m.stride(0), 1000, BLOCK=1024, num_warps=8)
    a = torch.randn(256, 256, device="cuda", dtype=torch.float16)
    c = torch.empty_like(a)
    K.matmul[(2, 2)](a, a, c, 256, 256, 256, BM=128, BN=128, BK=64, num_warps=8, num_stages=3)
    K.grid3d[(5, 3, 2)](out, BLOCK=128)
    K.early_exit[(300,)](x, n, BLOCK=256)
    torch.cuda.synchronize()


def main():
    res = {}
    for name, kw in (
        ("limit", {"capacity": 256}),
        ("ring", {"capacity": 256, "ring": True}),
        ("warp", {"capacity": 1 << 12, "level": "warp"}),
    ):
        torch._dynamo.reset()
        with sm_profiler.auto(**kw) as prof:
            work()
        _, info = prof.records()
        res[name] = info
    json.dump(res, sys.stdout)


if __name__ == "__main__":
    main()
