"""`auto(via_triton=True)` / `sm-profiler run --via-triton`: a torch.compile'd model's matmuls and
attention run as Triton kernels, so auto mode sees inside them.

By default a transformer's matmuls run in cuBLAS and its attention in cuDNN or FlashAttention:
machine code auto mode cannot instrument (a fifth to a third of a training step is Triton;
docs/auto.md, "What auto mode sees"). While the region is on:

- Inductor autotunes every matmul it compiles over its Triton templates only
  (`max_autotune_gemm`, `max_autotune_gemm_backends="TRITON"`, the persistent TMA template where
  this torch has it): cuBLAS is left out of the choices; a shape no template takes still falls
  back to ATen.
- `torch.nn.functional.scaled_dot_product_attention` is FlexAttention (a Triton template,
  forward and backward) for the calls it can take: no attention mask (or `is_causal`), no
  dropout, 4-D inputs of head dim 16 or more; other calls keep the original.

This profiles Triton kernels in place of the production ones: what the trace shows is how the
Triton matmuls and attention run, not how cuBLAS's and cuDNN's do, and the step time differs
(BENCHMARKS.md, "Auto mode": coverage and cost). Only code compiled while the region is on is
routed: compile inside it, as auto mode already asks. A module that imported
`scaled_dot_product_attention` by name before the region keeps the original.
"""

from __future__ import annotations

MIN_HEAD_DIM = 16  # FlexAttention's smallest head dim


def _causal(b, h, q_idx, kv_idx):
    # SDPA's is_causal: a query sees the keys at or before its own index (top-left aligned)
    return q_idx >= kv_idx


def flex_unsupported(q, k, v, attn_mask, dropout_p) -> str | None:
    """Why FlexAttention cannot stand in for this SDPA call, or None."""
    if attn_mask is not None:
        return "an attention mask"
    if dropout_p:
        return "dropout"
    if q.dim() != 4 or k.dim() != 4 or v.dim() != 4:
        return "inputs that are not (batch, heads, sequence, head dim)"
    if q.shape[-1] < MIN_HEAD_DIM or v.shape[-1] < MIN_HEAD_DIM:
        return f"a head dim under {MIN_HEAD_DIM}"
    if not q.is_cuda:
        return "CPU tensors"
    return None


class ViaTriton:
    """Applied by the AutoProfiler at start, undone at stop."""

    def __init__(self):
        self._config = None
        self._sdpa = None
        self.settings: dict = {}

    def apply(self) -> None:
        import torch
        import torch._inductor.config as inductor

        settings = {"max_autotune_gemm": True, "max_autotune_gemm_backends": "TRITON"}
        if hasattr(inductor.triton, "enable_persistent_tma_matmul"):
            settings["triton.enable_persistent_tma_matmul"] = True
        self._config = inductor.patch(settings)
        self._config.__enter__()
        self.settings = settings
        functional = torch.nn.functional
        self._sdpa = functional.scaled_dot_product_attention
        functional.scaled_dot_product_attention = self.attention

    def undo(self) -> None:
        import torch

        if self._sdpa is not None:
            torch.nn.functional.scaled_dot_product_attention = self._sdpa
            self._sdpa = None
        if self._config is not None:
            self._config.__exit__(None, None, None)
            self._config = None

    def attention(
        self,
        query,
        key,
        value,
        attn_mask=None,
        dropout_p=0.0,
        is_causal=False,
        scale=None,
        enable_gqa=False,
        **kwargs,
    ):
        """scaled_dot_product_attention's signature, run as FlexAttention where it can be."""
        if kwargs or flex_unsupported(query, key, value, attn_mask, dropout_p):
            return self._sdpa(
                query,
                key,
                value,
                attn_mask=attn_mask,
                dropout_p=dropout_p,
                is_causal=is_causal,
                scale=scale,
                enable_gqa=enable_gqa,
                **kwargs,
            )
        from torch.nn.attention.flex_attention import create_block_mask, flex_attention

        block_mask = None
        if is_causal:
            q_len, kv_len = query.shape[-2], key.shape[-2]
            block_mask = create_block_mask(_causal, None, None, q_len, kv_len, device=query.device)
        return flex_attention(
            query, key, value, block_mask=block_mask, scale=scale, enable_gqa=enable_gqa
        )
