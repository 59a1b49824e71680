"""Kernels auto mode must instrument without a source change: shapes of the Triton tutorials
(vector add, fused softmax, layer norm, a pipelined matmul), an Inductor-style kernel written the
way Inductor writes them (its helpers, XBLOCK/RBLOCK, masks), a 3D grid, an autotuned kernel and
one that already uses the manual ops. The GPU tests run them; the compile probe compiles them."""

from __future__ import annotations

import triton
import triton.language as tl
from torch._inductor.runtime import triton_helpers


@triton.jit
def vector_add(x, y, out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out + offs, tl.load(x + offs, mask=m) + tl.load(y + offs, mask=m), mask=m)


@triton.jit
def softmax(out, inp, stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    v = tl.load(inp + row * stride + cols, mask=cols < n_cols, other=-float("inf"))
    v = v - tl.max(v, axis=0)
    e = tl.exp(v)
    tl.store(out + row * stride + cols, e / tl.sum(e, axis=0), mask=cols < n_cols)


@triton.jit
def layer_norm(x, y, w, b, stride, n, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    m = cols < n
    v = tl.load(x + row * stride + cols, mask=m, other=0.0).to(tl.float32)
    mean = tl.sum(v, axis=0) / n
    d = tl.where(m, v - mean, 0.0)
    rstd = 1 / tl.sqrt(tl.sum(d * d, axis=0) / n + eps)
    out = d * rstd * tl.load(w + cols, mask=m) + tl.load(b + cols, mask=m)
    tl.store(y + row * stride + cols, out, mask=m)


@triton.jit
def matmul(a, b, c, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid_m, pid_n = tl.program_id(0), tl.program_id(1)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), tl.float32)
    for k in range(0, K, BK):
        x = tl.load(a + rm[:, None] * K + (k + rk)[None, :])
        y = tl.load(b + (k + rk)[:, None] * N + rn[None, :])
        acc += tl.dot(x, y)
    tl.store(c + rm[:, None] * N + rn[None, :], acc.to(tl.float16))


@triton.jit
def inductor_style_reduction(
    in_ptr0, out_ptr0, xnumel, rnumel, XBLOCK: tl.constexpr, RBLOCK: tl.constexpr
):
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:, None]
    xmask = xindex < xnumel
    rbase = tl.arange(0, RBLOCK)[None, :]
    _tmp2 = tl.full([XBLOCK, RBLOCK], float("-inf"), tl.float32)
    for roffset in range(0, rnumel, RBLOCK):
        rindex = roffset + rbase
        rmask = rindex < rnumel
        tmp0 = tl.load(in_ptr0 + (rindex + rnumel * xindex), rmask & xmask, other=0.0)
        tmp1 = tl.broadcast_to(tmp0, [XBLOCK, RBLOCK])
        _tmp2 = tl.where(rmask & xmask, triton_helpers.maximum(_tmp2, tmp1), _tmp2)
    tmp2 = triton_helpers.max2(_tmp2, 1)[:, None]
    tl.store(out_ptr0 + xindex, tmp2, xmask)


@triton.jit
def grid3d(out, BLOCK: tl.constexpr):
    pid = tl.program_id(0) + tl.num_programs(0) * (
        tl.program_id(1) + tl.num_programs(1) * tl.program_id(2)
    )
    tl.store(out + pid * BLOCK + tl.arange(0, BLOCK), pid + tl.zeros((BLOCK,), tl.float32))


@triton.jit
def early_exit(x, n, BLOCK: tl.constexpr):
    """Programs past the end return at once: the rewrite records both ways out."""
    pid = tl.program_id(0)
    if pid * BLOCK >= n:
        return
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    tl.store(x + offs, tl.load(x + offs, mask=offs < n) * 2, mask=offs < n)


@triton.autotune(
    configs=[
        triton.Config({"BLOCK": 256}, num_warps=2),
        triton.Config({"BLOCK": 1024}, num_warps=4),
    ],
    key=["n"],
)
@triton.jit
def autotuned_scale(x, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x + offs, tl.load(x + offs, mask=offs < n) * 1.5, mask=offs < n)


# name, kernel, signature, constexprs, options
CASES = [
    (
        "vector_add",
        vector_add,
        {"x": "*fp32", "y": "*fp32", "out": "*fp32", "n": "i32", "BLOCK": "constexpr"},
        {"BLOCK": 1024},
        {},
    ),
    (
        "softmax",
        softmax,
        {"out": "*fp32", "inp": "*fp32", "stride": "i32", "n_cols": "i32", "BLOCK": "constexpr"},
        {"BLOCK": 1024},
        {"num_warps": 8},
    ),
    (
        "layer_norm",
        layer_norm,
        {
            "x": "*fp16",
            "y": "*fp16",
            "w": "*fp16",
            "b": "*fp16",
            "stride": "i32",
            "n": "i32",
            "eps": "fp32",
            "BLOCK": "constexpr",
        },
        {"BLOCK": 1024},
        {},
    ),
    (
        "matmul",
        matmul,
        {
            "a": "*fp16",
            "b": "*fp16",
            "c": "*fp16",
            "M": "i32",
            "N": "i32",
            "K": "i32",
            "BM": "constexpr",
            "BN": "constexpr",
            "BK": "constexpr",
        },
        {"BM": 128, "BN": 128, "BK": 64},
        {"num_warps": 8, "num_stages": 3},
    ),
    (
        "inductor_style_reduction",
        inductor_style_reduction,
        {
            "in_ptr0": "*fp32",
            "out_ptr0": "*fp32",
            "xnumel": "i32",
            "rnumel": "i32",
            "XBLOCK": "constexpr",
            "RBLOCK": "constexpr",
        },
        {"XBLOCK": 8, "RBLOCK": 128},
        {},
    ),
    ("grid3d", grid3d, {"out": "*fp32", "BLOCK": "constexpr"}, {"BLOCK": 128}, {}),
    (
        "early_exit",
        early_exit,
        {"x": "*fp32", "n": "i32", "BLOCK": "constexpr"},
        {"BLOCK": 256},
        {},
    ),
]
