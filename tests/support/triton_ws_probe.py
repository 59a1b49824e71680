"""Which instrumentation survives Triton's automatic warp specialization? (issue 10's question)

Compiles a TMA-descriptor matmul with `tl.range(..., warp_specialize=True)` for sm_90 and sm_100
on the CPU, instrumented four ways, and prints {"sm_<cap> <mode> <outside|inside>": "ok" | error}
as JSON. Run as a subprocess by test_triton_ws.py (no TRITON_INTERPRET). The modes:

  none    no instrumentation (does Triton specialize this kernel at all?)
  ops     how sm_profiler's ops are built: each event an asm with side effects whose result (a
          dummy) reaches nothing; the anchor stored inside the init's asm
  stored  the same events, the anchor read by an asm and written with a Triton store
  chain   every asm's result reaches a Triton store: each event returns the next cursor, and the
          last cursor is stored (masked, as the lane's drop word) after the kernel's work
"""

import json
import sys

import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget

TIMER = tl.constexpr("{\n\t.reg .u64 t;\n\tmov.u64 t, %globaltimer;\n\tmov.b64 $0, t;\n\t}")
_STORE = (
    "{\n\t.reg .pred p;\n\t.reg .u64 t, a;\n\t.reg .u32 lo;\n\tmov.u64 t, %globaltimer;\n\t"
    "cvt.u32.u64 lo, t;\n\tsetp.lt.u32 p, $2, $3;\n\tmul.wide.u32 a, $2, 8;\n\tadd.u64 a, a, $1;\n\t"
    "@p st.global.v2.u32 [a], {lo, $4};\n\t"
)
EVENT_CHAINED = tl.constexpr(_STORE + "add.u32 $0, $2, 1;\n\t}")  # returns the next cursor
EVENT_DUMMY = tl.constexpr(_STORE + "mov.u32 $0, 0;\n\t}")  # returns nothing of use


@triton.jit
def _event(records, cursor, cap, tag: tl.constexpr, MODE: tl.constexpr):
    args = [records, cursor, cap, tl.full((), tag, tl.int32)]
    if MODE == "chain":
        return tl.inline_asm_elementwise(
            EVENT_CHAINED, "=r,l,r,r,r", args, dtype=tl.int32, is_pure=False, pack=1
        )
    else:
        tl.inline_asm_elementwise(
            EVENT_DUMMY, "=r,l,r,r,r", args, dtype=tl.int32, is_pure=False, pack=1
        )
        return cursor + 1


@triton.jit
def ws_matmul(
    a_desc,
    b_desc,
    c,
    K,
    prof,
    BM: tl.constexpr,
    BN: tl.constexpr,
    BK: tl.constexpr,
    MODE: tl.constexpr,
    INSIDE: tl.constexpr,
):
    pid = tl.program_id(0)
    lane = prof + 8 + pid * 66
    records = lane + 2
    cap = 64
    if MODE != "none":
        t = tl.inline_asm_elementwise(TIMER, "=l", [], dtype=tl.int64, is_pure=False, pack=1)
        if MODE != "ops":
            tl.store(lane, t)  # the anchor through a Triton store
    cursor = pid * 0
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in tl.range(0, K, BK, warp_specialize=True):
        if INSIDE and MODE != "none":
            cursor = _event(records, cursor, cap, 5, MODE)
        acc = tl.dot(a_desc.load([pid * BM, k]), b_desc.load([k, 0]), acc)
        if INSIDE and MODE != "none":
            cursor = _event(records, cursor, cap, 6, MODE)
    rm = pid * BM + tl.arange(0, BM)
    tl.store(c + rm[:, None] * BN + tl.arange(0, BN)[None, :], acc.to(tl.float16))
    if MODE != "none":
        cursor = _event(records, cursor, cap, 7, MODE)
        if MODE == "chain":
            tl.store(lane + 1, (cursor - 1).to(tl.int64) << 32, mask=cursor > cap)


SIG = {
    "a_desc": "tensordesc<fp16[128,64]>",
    "b_desc": "tensordesc<fp16[64,128]>",
    "c": "*fp16",
    "K": "i32",
    "prof": "*i64",
    "BM": "constexpr",
    "BN": "constexpr",
    "BK": "constexpr",
    "MODE": "constexpr",
    "INSIDE": "constexpr",
}


def main():
    res = {"triton": triton.__version__}
    for cap in (90, 100):
        for mode in ("none", "ops", "stored", "chain"):
            for inside in (False, True):
                if mode == "none" and inside:
                    continue
                consts = dict(BM=128, BN=128, BK=64, MODE=mode, INSIDE=inside)
                key = f"sm_{cap} {mode} {'inside' if inside else 'outside'}"
                try:
                    k = triton.compile(
                        triton.compiler.ASTSource(ws_matmul, SIG, consts),
                        target=GPUTarget("cuda", cap, 32),
                        options={"num_warps": 4},
                    )
                    specialized = "ttg.warp_specialize" in k.asm["ttgir"]
                    res[key] = "ok" if specialized else "not specialized"
                except Exception as e:  # the compiler raises RuntimeError and CompilationError
                    res[key] = (str(e).strip().splitlines() or [type(e).__name__])[-1][:120]
    json.dump(res, sys.stdout)


if __name__ == "__main__":
    main()
