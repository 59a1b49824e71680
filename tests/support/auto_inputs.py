"""Hand-made inputs for auto mode's host tests: a kernel's PTX as Triton writes it, and program
records as the device leaves them in an auto buffer."""

from __future__ import annotations

import numpy as np

from sm_profiler import format as fmt

# A kernel with a helper function, an early exit, a nested scope and a debug section.
PTX = """.version 8.7
.target sm_90a
.address_size 64

.func helper()
{
\tret;
}
.visible .entry k(
\t.param .u64 .ptr .global .align 1 k_param_0
)
.reqntid 128
{
\t.reg .pred \t%p<3>;
\t.reg .b32 \t%r<4>;
\tmov.u32 \t%r1, %ctaid.x;
\tsetp.gt.s32 \t%p1, %r1, 7;
\t@%p1 ret;
\t{ .reg .b32 tmp; mov.u32 tmp, 0; }
\tmov.b64 \t{%r2, %r3}, 0;
\tret;
}
\t.section\t.debug_abbrev
\t{
.b8 1
\t}
"""


def auto_buffer(records, capacity=256 * 16, ring=False, regions=4, step_tag=0):
    """An auto buffer as the device leaves it after `records` (start, duration, sm, grid id,
    kernel id, x, y, z), claimed in this order on their SMs' counters (SM s in region
    min(s, regions - 1)), as the device writes them (ptx.auto_prologue / auto_epilogue)."""
    size = fmt.auto_region_size(capacity, regions, ring)
    words = np.zeros(fmt.auto_words(regions, size), np.uint64)
    words[: fmt.AUTO_HEADER_WORDS] = fmt.auto_header(capacity, ring, regions, step=step_tag)
    counters = np.zeros(regions, np.int64)
    table = words[fmt.AUTO_RECORDS_WORD :].view(fmt.AUTO_RECORD_DTYPE)
    for start, dur, sm, grid_id, kid, x, y, z in records:
        region = min(sm, regions - 1)
        n = int(counters[region])
        counters[region] = n + 1
        if n >= size and not ring:
            continue  # what the device does: limit mode keeps each SM's first records
        table[region * size + (n % size if ring else n)] = (
            start,
            (start + dur) & fmt.LOW32,
            sm | (step_tag << 16),
            grid_id,
            kid,
            x,
            y | (z << 16),
        )
    words[fmt.AUTO_HEADER_WORDS : fmt.AUTO_RECORDS_WORD : fmt.AUTO_COUNTER_WORDS][:regions] = (
        counters
    )
    return words


AUTO_T0 = 7 * 2**32 - 300  # the low word wraps inside the records


def two_kernels():
    """Program records (as auto_buffer takes them) of two kernels, numbered as in KERNELS."""
    # kernel 1: a 4-program launch (grid id 5) and the same kernel on another stream (grid id
    # 6) overlapping it; kernel 2: a 2x1x2 grid replayed twice by a CUDA graph (grid id 9).
    recs = [(AUTO_T0 + 10 * p, 500, p % 3, 5, 1, p, 0, 0) for p in range(4)]
    recs += [(AUTO_T0 + 50 + 10 * p, 400, 3, 6, 1, p, 0, 0) for p in range(4)]
    for replay in range(2):
        base = AUTO_T0 + 2000 + 1000 * replay
        recs += [
            (base + 10 * i, 300, i, 9, 2, x, 0, z)
            for i, (x, z) in enumerate([(0, 0), (1, 0), (0, 1), (1, 1)])
        ]
    return recs


# What the binding knows of each kernel id.
KERNELS = {
    1: {"name": "triton_poi_fused_add_0", "num_warps": 4, "sm_count": 4},
    2: {"name": "gemm", "num_warps": 8},
}


def table_of(records, kernels=None, sm_count=4, session=None, **buffer_options):
    """The AutoTable of one GPU's buffer holding `records` (as auto_buffer takes them);
    `session`: more of what the region knew of that GPU (step_tags, rank, clock)."""
    from sm_profiler.auto_mode.table import AutoTable

    buffer_options.setdefault("regions", sm_count)
    session = {
        "gpu": 0,
        "sm_count": sm_count,
        "device_name": "test GPU",
        "rank": 0,
        **(session or {}),
    }
    words = auto_buffer(records, **buffer_options)
    return AutoTable.from_buffers([(session, words)], KERNELS if kernels is None else kernels)
