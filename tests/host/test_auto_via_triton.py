"""auto_mode/via_triton.py on the CPU: what it switches on and back, which SDPA calls it keeps,
and that a kept call is the original's. (Its GPU side, FlexAttention and the Triton matmul
templates recorded by auto mode, is in tests/device/test_auto_gpu.py.)"""

from __future__ import annotations

import pytest
import torch
import torch._inductor.config as inductor
import torch.nn.functional as F

from sm_profiler.auto_mode import AutoProfiler
from sm_profiler.auto_mode.via_triton import ViaTriton, flex_unsupported
from sm_profiler.errors import ConfigError


def test_apply_routes_matmuls_and_attention_and_undo_restores_both():
    before = (inductor.max_autotune_gemm, inductor.max_autotune_gemm_backends)
    original = F.scaled_dot_product_attention
    via = ViaTriton()
    via.apply()
    try:
        assert inductor.max_autotune_gemm is True
        assert inductor.max_autotune_gemm_backends == "TRITON"
        assert F.scaled_dot_product_attention == via.attention
    finally:
        via.undo()
    assert (inductor.max_autotune_gemm, inductor.max_autotune_gemm_backends) == before
    assert F.scaled_dot_product_attention is original
    via.undo()  # twice: nothing left to undo
    assert F.scaled_dot_product_attention is original


def qkv(*shape):
    g = torch.Generator().manual_seed(0)
    return [torch.randn(*shape, generator=g) for _ in range(3)]


@pytest.mark.parametrize(
    "change, reason",
    [
        (dict(attn_mask=torch.ones(8, 8, dtype=torch.bool)), "an attention mask"),
        (dict(dropout_p=0.1), "dropout"),
        (dict(dim3=True), "inputs that are not"),
        (dict(head=8), "a head dim under 16"),
        ({}, "CPU tensors"),
    ],
)
def test_the_calls_flex_attention_cannot_take_are_named(change, reason):
    shape = (2, 8, 16) if change.pop("dim3", False) else (1, 2, 8, change.pop("head", 16))
    q, k, v = qkv(*shape)
    why = flex_unsupported(q, k, v, change.get("attn_mask"), change.get("dropout_p", 0.0))
    assert why is not None and why.startswith(reason)


def test_a_kept_call_is_the_original_sdpa():
    q, k, v = qkv(1, 2, 8, 16)
    via = ViaTriton()
    via.apply()
    try:
        got = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    finally:
        via.undo()
    want = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert torch.equal(got, want)


def test_via_triton_must_be_a_bool():
    with pytest.raises(ConfigError, match="via_triton must be True or False"):
        AutoProfiler(via_triton="yes")


def test_the_region_s_patches_route_and_put_back_only_with_via_triton():
    from types import SimpleNamespace

    from sm_profiler.auto_mode.session import _Patches

    original = F.scaled_dot_product_attention
    for via in (False, True):
        patches = _Patches(SimpleNamespace(level="program", via_triton=via))
        patches.apply()
        try:
            assert (F.scaled_dot_product_attention is not original) is via
            assert (inductor.max_autotune_gemm_backends == "TRITON") is via
        finally:
            patches.undo()
        assert F.scaled_dot_product_attention is original
