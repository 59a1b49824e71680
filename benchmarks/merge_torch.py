"""Host timing: `merge --torch` of many launches of one kernel (issue 23, item 13).

Builds N one-lane captures of one kernel (a range per launch, launches 5 µs apart) and a torch
trace with a CUPTI kernel row for each, then times merge_torch_trace (align by the kernels' own
rows: match in order, then every launch matched to its nearest row for the alignment error) and,
for comparison, merge_ranks of the same captures. Before issue 23 the torch merge looked for each
launch's row with a minimum over every row of its kernel (launches x rows).

Run:  python -m benchmarks run merge_torch [--launches 10000]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time

import numpy as np

import sm_profiler
from sm_profiler.wire import format as fmt
from sm_profiler.wire.capture import Capture

T0 = 1_700_000_000_000_000_000


def launch(i: int) -> Capture:
    words = np.zeros(fmt.buffer_words(1, 1, 2), np.uint64)
    words[: fmt.HEADER_WORDS] = fmt.encode_header(1, 1, 2)
    t = T0 + 5000 * i
    lane = words[fmt.HEADER_WORDS :]
    lane[0] = t
    lane[1] = 7
    lane[2] = fmt.make_record(t + 100, 1, fmt.KIND_BEGIN)
    lane[3] = fmt.make_record(t + 2100, 1, fmt.KIND_END)
    return Capture(words, {1: "work"}, {}, "gemm")


def torch_doc(n: int, offset_ns: int = 40_000) -> dict:
    base = T0 - 10**6
    rows = [
        {
            "ph": "X",
            "cat": "kernel",
            "name": "gemm",
            "pid": 0,
            "tid": 7,
            "ts": (T0 + 5000 * i + 50 - offset_ns - base) / 1e3,
            "dur": 2.2,
        }
        for i in range(n)
    ]
    return {"schemaVersion": 1, "baseTimeNanoseconds": base, "traceEvents": rows}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--launches", type=int, default=10_000)
    args = ap.parse_args()
    caps = [launch(i) for i in range(args.launches)]
    with tempfile.TemporaryDirectory() as tmp:
        tpath = os.path.join(tmp, "torch.json")
        with open(tpath, "w") as f:
            json.dump(torch_doc(args.launches), f)
        t = time.perf_counter()
        info = sm_profiler.merge_torch_trace(tpath, caps, os.path.join(tmp, "m.json"))
        torch_s = time.perf_counter() - t
        t = time.perf_counter()
        sm_profiler.merge_ranks([caps], os.path.join(tmp, "r.json"), align="none")
        ranks_s = time.perf_counter() - t
    err = info["error"][0]
    print(
        f"merge --torch  {args.launches:,} launches x {args.launches:,} CUPTI rows: "
        f"{torch_s:6.2f} s  ({info['method']}, {err['matched']:,} matched, "
        f"within {err['max_abs_ns']:.0f} ns)"
    )
    print(f"merge (ranks)  {args.launches:,} launches:                    {ranks_s:6.2f} s")


if __name__ == "__main__":
    main()
