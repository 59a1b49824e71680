"""Which warp should record a per-program lane? An experiment, timed like device_overhead.py.

A Hopper SM issues from 4 sub-partitions (one scheduler each); a warp lives on one of them. If
every program's recording warp is its warp 0, and warp 0 of every co-resident program sits on the
same sub-partition, that one scheduler issues all the recording instructions of the SM while the
other three idle. This script
  1. prints which programs of the loop kernel of device_overhead.py share an SM;
  2. times the per-program ops with the recording warp chosen by different rules, beside base,
     floor, per-warp variants and Proton.

    python benchmarks/leader_rules.py [--launches 30] [--rounds 3] [--json out.json]
"""

from __future__ import annotations

import argparse
import collections
import functools
import json

import torch
import triton
import triton.language as tl
from device_overhead import (  # benchmarks/ (this script's folder)
    _globaltimer,
    loop_kernel_proton,
    proton_timed,
)
from timing import add_timing_args, cupti_medians

from sm_profiler import SmProfiler, ptx
from sm_profiler import format as fmt
from sm_profiler.triton_ops import profiler_event_end, profiler_event_start, profiler_init

EVT = tl.constexpr(0)

# Leader rules: sel = the recording warp's index in the program; b = block index, n = warps per
# program (%ntid.x / 32), s = %nsmid.
RULES = {
    "warp0": "mov.u32 sel, 0;\n\t",
    "b_mod_n": "rem.u32 sel, $3, n;\n\t",
    "b_div_s_mod_n": "mov.u32 s, %nsmid;\n\tdiv.u32 sel, $3, s;\n\trem.u32 sel, sel, n;\n\t",
    "hash": "mul.lo.u32 sel, $3, 0x9E3779B1;\n\tshr.u32 sel, sel, 16;\n\trem.u32 sel, sel, n;\n\t",
}


def leader_asm(rule: str) -> str:
    # $0 leader (out), $1 records, $2 valid, $3 block; stamps anchor and SM id like ptx.INIT.
    return (
        "{\n\t.reg .pred p;\n\t.reg .u32 w, n, s, sel;\n\t.reg .u64 t;\n\t"
        "mov.u32 w, %tid.x;\n\tshr.u32 w, w, 5;\n\tmov.u32 n, %ntid.x;\n\tshr.u32 n, n, 5;\n\t"
        + RULES[rule]
        + "setp.eq.u32 p, w, sel;\n\tsetp.ne.and.u32 p, $2, 0, p;\n\tselp.u32 $0, 1, 0, p;\n\t"
        "mov.u64 t, %globaltimer;\n\tmov.u32 s, %smid;\n\t"
        f"@p st.global.u64 [$1+{ptx.ANCHOR_OFFSET_BYTES}], t;\n\t"
        f"@p st.global.u32 [$1+{ptx.SM_OFFSET_BYTES}], s;\n\t}}"
    )


RULE_ASM = {r: leader_asm(r) for r in RULES}
_ALL_LEAD = tl.constexpr(
    leader_asm("warp0").replace("setp.eq.u32 p, w, sel;", "setp.eq.u32 p, sel, sel;")
)
_HDR_SHAPE = tl.constexpr(fmt.HDR_SHAPE)
_HDR_CAPACITY_FLAGS = tl.constexpr(fmt.HDR_CAPACITY_FLAGS)
_HEADER_WORDS = tl.constexpr(fmt.HEADER_WORDS)
_LANE_HEADER_WORDS = tl.constexpr(fmt.LANE_HEADER_WORDS)

# Per warp, every lane of a warp stores (no lane predicate) and the bounds test has two outputs:
# what the per-warp record would be if out-of-shape lanes' stores went to a scratch word.
_WARP_NOPRED = tl.constexpr(
    "{\n\t.reg .pred pin, pov;\n\t.reg .u32 lo;\n\t.reg .u64 t, r;\n\t"
    "mov.u64 t, %globaltimer;\n\tcvt.u32.u64 lo, t;\n\tsetp.lt.u32 pin|pov, $3, $4;\n\t"
    "mov.b64 r, {lo, $5};\n\t@pin st.global.u64 [$1], r;\n\t"
    f"@pov st.global.u32 [$2+{ptx.LAST_DROPPED_OFFSET_BYTES}], $3;\n\tmov.u32 $0, 0;\n\t}}"
)


# Per warp, a record design with no overflow store (a possible format v3, measured only): the
# slot index is clamped to the lane's last slot, and the record's spare tag bits carry the cursor,
# so the last slot ends up holding the latest attempt and its cursor (the drop count, mod 2**18).
_WARP_CLAMP = tl.constexpr(
    "{\n\t.reg .u32 lo, hi, i;\n\t.reg .u64 t, r, a;\n\t"
    "mov.u64 t, %globaltimer;\n\tcvt.u32.u64 lo, t;\n\tmin.u32 i, $2, $3;\n\t"
    "mad.lo.u32 hi, $2, 16384, $4;\n\tmov.b64 r, {lo, hi};\n\t"
    "mad.wide.u32 a, i, 8, $1;\n\tst.global.u64 [a], r;\n\tmov.u32 $0, 0;\n\t}"
)


# Per warp, the tag and the time as two 4-byte stores into the record's word: the tag store does
# not wait for the timer, and the time store waits for nothing but the timer (no tag move between
# them), as in the floor. Same format; two store instructions instead of a move and one store.
_WARP_SPLIT = tl.constexpr(
    "{\n\t.reg .pred pin, pov;\n\t.reg .u32 lo, tg;\n\t.reg .u64 t, a;\n\t"
    "setp.lt.u32 pin|pov, $2, $3;\n\tmad.wide.u32 a, $2, 8, $1;\n\tmov.u32 tg, $4;\n\t"
    "@pin st.global.u32 [a+4], tg;\n\t"
    "mov.u64 t, %globaltimer;\n\tcvt.u32.u64 lo, t;\n\t@pin st.global.u32 [a], lo;\n\t"
    f"@pov st.global.u32 [$1+{ptx.LAST_DROPPED_OFFSET_BYTES}], $2;\n\tmov.u32 $0, 0;\n\t}}"
)


@triton.jit
def _init(prof, pid, VAR: tl.constexpr, RULE: tl.constexpr, ng_arg, cap_arg):
    if VAR == 4:  # per program, the shape from kernel arguments: no header loads at init
        ngroups = ng_arg
        capacity = cap_arg
    elif VAR == 6:  # header words 1 and 2 through the read-only (non-coherent) path
        shape, cf = tl.inline_asm_elementwise(
            "ld.global.nc.u64 $0, [$2];\n\tld.global.nc.u64 $1, [$2+8];", "=l,=l,l",
            [prof + _HDR_SHAPE], dtype=(tl.int64, tl.int64), is_pure=True, pack=1,
        )  # fmt: skip
        ngroups = (shape >> 32).to(tl.int32)
        capacity = (cf & 0xFFFFFFFF).to(tl.int32)
    else:
        shape = tl.load(prof + _HDR_SHAPE)
        ngroups = (shape >> 32).to(tl.int32)
        capacity = (tl.load(prof + _HDR_CAPACITY_FLAGS) & 0xFFFFFFFF).to(tl.int32)
    group = 0
    if VAR >= 2:  # per warp: warp w writes group w
        group = tl.inline_asm_elementwise(
            "mov.u32 $0, %tid.x;\n\tshr.u32 $0, $0, 5;",
            "=r",
            [],
            dtype=tl.int32,
            is_pure=True,
            pack=1,
        )
    lane = pid.to(tl.int64) * ngroups + group
    records = prof + _HEADER_WORDS + lane * (capacity + _LANE_HEADER_WORDS) + _LANE_HEADER_WORDS
    if VAR == 1 or VAR == 4 or VAR == 6:
        leader = tl.inline_asm_elementwise(
            RULE, "=r,l,r,r", [records, tl.full((), 1, tl.int32), pid], dtype=tl.int32,
            is_pure=False, pack=1,
        )  # fmt: skip
    else:  # per warp: every warp leads (stamp its lane from all of its lanes)
        leader = tl.inline_asm_elementwise(
            _ALL_LEAD,
            "=r,l,r,r", [records, tl.full((), 1, tl.int32), pid], dtype=tl.int32,
            is_pure=False, pack=1,
        )  # fmt: skip
    return records, tl.full((), 0, tl.int32), capacity, leader


@triton.jit
def _ev(ctx, START: tl.constexpr, VAR: tl.constexpr):
    if VAR == 7 or VAR == 8:
        records, cursor, capacity, leader = ctx
        if VAR == 7:
            asm: tl.constexpr = _WARP_CLAMP
            bound = capacity - 1  # the last slot's index
        else:
            asm: tl.constexpr = _WARP_SPLIT
            bound = capacity
        tag = tl.full((), 1 + (not START), tl.int32)
        tl.inline_asm_elementwise(
            asm, "=r,l,r,r,r", [records, cursor, bound, tag], dtype=tl.int32, is_pure=False, pack=1
        )
        return records, cursor + 1, capacity, leader
    elif VAR == 3:
        records, cursor, capacity, leader = ctx
        tl.inline_asm_elementwise(
            _WARP_NOPRED, "=r,l,l,r,r,r", [records + cursor, records, cursor, capacity,
                                           tl.full((), 1 + (not START), tl.int32)],
            dtype=tl.int32, is_pure=False, pack=1,
        )  # fmt: skip
        return records, cursor + 1, capacity, leader
    elif START:
        return profiler_event_start(ctx, EVT)
    else:
        return profiler_event_end(ctx, EVT)


@triton.jit
def loop_rules(out, prof, ITERS: tl.constexpr, INNER: tl.constexpr, VAR: tl.constexpr,
               RULE: tl.constexpr, ng_arg=4, cap_arg=1, BLOCK: tl.constexpr = 1024):  # fmt: skip
    """device_overhead.loop_kernel with a chosen lane rule. VAR 1: per program (RULE picks the
    warp); 3: per warp, all lanes store, no leader predicate at all; 4: as 1, but the shape comes
    from kernel arguments (no header loads); 5: the library's profiler_init; 6: as 1, with
    ld.global.nc header loads; 7: per warp, the clamped record (_WARP_CLAMP); 8: per warp, split
    stores (_WARP_SPLIT); 9: the library per warp."""
    pid = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    acc = (offs + pid).to(tl.float32) * 1e-3
    if VAR == 5:  # the library's init
        ctx = profiler_init(prof, pid, 0)
    elif VAR == 9:  # the library, per warp
        ctx = profiler_init(prof, pid, 0, PER_WARP=True)
    else:
        ctx = _init(prof, pid, VAR, RULE, ng_arg, cap_arg)
    for _ in range(ITERS):
        ctx = _ev(ctx, True, VAR)
        for _j in tl.static_range(INNER):
            acc = acc * 1.000001 + 1e-6
        ctx = _ev(ctx, False, VAR)
    tl.store(out + pid * BLOCK + offs, acc)


@triton.jit
def loop_plain(out, ITERS: tl.constexpr, INNER: tl.constexpr, FLOOR: tl.constexpr, prof,
               BLOCK: tl.constexpr = 1024):  # fmt: skip
    pid = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    acc = (offs + pid).to(tl.float32) * 1e-3
    ptr = prof + pid.to(tl.int64) * (2 * ITERS)
    for i in range(ITERS):
        if FLOOR:
            tl.store(ptr + 2 * i, _globaltimer())
        for _j in tl.static_range(INNER):
            acc = acc * 1.000001 + 1e-6
        if FLOOR:
            tl.store(ptr + 2 * i + 1, _globaltimer())
    tl.store(out + pid * BLOCK + offs, acc)


@triton.jit
def where_kernel(out, ITERS: tl.constexpr, INNER: tl.constexpr, smids, BLOCK: tl.constexpr = 1024):
    """The loop kernel's shape; each program writes its %smid."""
    pid = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    acc = (offs + pid).to(tl.float32) * 1e-3
    for _ in range(ITERS):
        for _j in tl.static_range(INNER):
            acc = acc * 1.000001 + 1e-6
    tl.store(out + pid * BLOCK + offs, acc)
    sm = tl.inline_asm_elementwise(
        "mov.u32 $0, %smid;", "=r", [], dtype=tl.int32, is_pure=False, pack=1
    )
    tl.store(smids + pid, sm)


def placement(grid: int, iters: int, inner: int) -> dict:
    """Which programs run side by side on one SM (the first few SMs)."""
    smids = torch.full((grid,), -1, dtype=torch.int32, device="cuda")
    out = torch.empty(grid * 1024, device="cuda")
    where_kernel[(grid,)](out, ITERS=iters, INNER=inner, smids=smids, num_warps=4)
    sm = smids.cpu().tolist()
    per_sm = collections.defaultdict(list)
    for p, s in enumerate(sm):
        per_sm[s].append(p)
    return {"programs_on_first_sms": {k: per_sm[k] for k in sorted(per_sm)[:6]}}


def main():
    ap = argparse.ArgumentParser()
    add_timing_args(ap)
    args = ap.parse_args()
    grid = args.grid
    dev = torch.cuda.get_device_properties(0)
    info = {"device": dev.name, "sms": dev.multi_processor_count, "torch": torch.__version__,
            "triton": triton.__version__, "cuda": torch.version.cuda}  # fmt: skip
    print(info)
    res = {"info": info, "placement": placement(grid, 64, 16), "rows": []}
    print(json.dumps(res["placement"]))
    out = torch.empty(grid * 1024, device="cuda")
    for iters, inner in [(64, 16), (16, 16), (64, 64)]:
        prof = SmProfiler(grid, 4, 2 * iters)
        buf = prof.get_buffer()
        plain = torch.zeros(grid * 2 * iters, dtype=torch.int64, device="cuda")
        fns = {}
        for name, floor in (("base", False), ("floor", True)):
            fns[name] = functools.partial(
                loop_plain[(grid,)], out, iters, inner, floor, plain, num_warps=4
            )
        for r in RULES:
            fns[f"prog_{r}"] = functools.partial(
                loop_rules[(grid,)], out, buf, iters, inner, 1, RULE_ASM[r], num_warps=4
            )
        fns["prog_warp0_no_header_loads"] = functools.partial(
            loop_rules[(grid,)], out, buf, iters, inner, 4, RULE_ASM["warp0"], 4, 2 * iters,
            num_warps=4,
        )  # fmt: skip
        fns["prog_warp0_nc_loads"] = functools.partial(
            loop_rules[(grid,)], out, buf, iters, inner, 6, RULE_ASM["warp0"], num_warps=4
        )
        fns["library_ours"] = functools.partial(
            loop_rules[(grid,)], out, buf, iters, inner, 5, RULE_ASM["warp0"], num_warps=4
        )
        for name, var in (
            ("warp_all_lanes_nopred", 3),
            ("warp_clamped_no_overflow_store", 7),
            ("warp_split_tag_and_time_stores", 8),
            ("library_warp", 9),
        ):
            fns[name] = functools.partial(
                loop_rules[(grid,)], out, buf, iters, inner, var, RULE_ASM["warp0"], num_warps=4
            )
        for fn in fns.values():
            fn()
            fn()
        torch.cuda.synchronize()
        t = {}
        t.update(cupti_medians(fns, args.launches, args.rounds, "loop_"))
        t["proton"], how = proton_timed(
            lambda i=iters, f=inner: loop_kernel_proton[(grid,)](out, ITERS=i, INNER=f, num_warps=4),
            args.launches, "loop_kernel_proton")  # fmt: skip
        base, floor = t["base"], t["floor"]
        row = {"ITERS": iters, "INNER_FMA": inner, "base_us": round(base, 2), "proton_timing": how}
        for k, v in t.items():
            if v is None or k == "base":
                continue
            row[f"{k}_pct"] = round(100 * (v - base) / base, 2)
            row[f"{k}_vs_floor"] = round((v - base) / (floor - base), 2)
        res["rows"].append(row)
        print(json.dumps(row))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
