"""Gluon device code that both Gluon benchmarks time: the floor's timer read and a diagnostic.

  timer        one %globaltimer read: the floor's whole event (with one store)
  record_pred  a per-partition record whose stores the leader flag predicates instead of a
               branch around them (`ptx.record(mode="thread")`): the `ours_pred` diagnostic,
               not offered as an op

Used by gluon_overhead.py and gluon_matmul_overhead.py.
"""

from __future__ import annotations

from triton.experimental import gluon
from triton.experimental.gluon import language as gl

from sm_profiler.record import ptx

_VECTOR = ptx.vector_store_for(ptx.triton_ptxas_release())
_PRED_ASM = gl.constexpr(ptx.record(after=False, first=1, mode="thread", vector=_VECTOR))


@gluon.jit
def timer():
    return gl.inline_asm_elementwise(
        "mov.u64 $0, %globaltimer;", "=l", [], dtype=gl.int64, is_pure=False, pack=1
    )


@gluon.jit
def record_pred(ctx, TAG: gl.constexpr):
    """A per-partition record whose stores the leader flag predicates (no branch)."""
    records, cursor, capacity, leader, stage, last = ctx
    tag = gl.full((), TAG, gl.int32)
    gl.inline_asm_elementwise(
        _PRED_ASM,
        "=r,l,r,r,r,r",
        [records, cursor, capacity, leader, tag],
        dtype=gl.int32,
        is_pure=False,
        pack=1,
    )
    return records, cursor + 1, capacity, leader, stage, last
