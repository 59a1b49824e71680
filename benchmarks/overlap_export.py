"""Host timing: Perfetto and Chrome export of ~1 M records in lanes whose ranges overlap.

Prints the time of each export for three shapes of lane (issue 15, item 3):

    nested   b0 b1 e1 e0 ...             ranges nest: one track per lane (the typical case)
    pairs    b0 b1 e0 e1 ...             each range overlaps the next: two tracks per lane
    clique   b0 .. b24 e0 .. e24 ...     25 ranges that all overlap each other: 25 tracks
    fanout   b0 .. b4094 e0 .. e4094     4,095-way fan-out (issue 23): 4,095 tracks per lane

Run:  python -m benchmarks run overlap_export [--records 1000000] [--lanes 64] [--chrome]
      [--shapes nested,pairs,clique,fanout]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import numpy as np

from sm_profiler.export import export
from sm_profiler.trace.decode import decode
from sm_profiler.wire import format as fmt
from sm_profiler.wire.capture import Capture

ANCHOR = 1 << 60


def unit(shape: str) -> list[tuple[int, int]]:
    """One repeat of a lane's (kind, event id) records."""
    b, e = fmt.KIND_BEGIN, fmt.KIND_END
    if shape == "nested":
        return [(b, 0), (b, 1), (e, 1), (e, 0)]
    if shape == "pairs":
        return [(b, 0), (b, 1), (e, 0), (e, 1)]
    width = 4095 if shape == "fanout" else 25
    return [(b, i) for i in range(width)] + [(e, i) for i in range(width)]


def overlap_capture(shape: str, records: int, lanes: int) -> Capture:
    u = unit(shape)
    cap = records // lanes // len(u) * len(u)
    kinds = np.array([k for k, _ in u] * (cap // len(u)), np.uint64)
    ids = np.array([i for _, i in u] * (cap // len(u)), np.uint64)
    times = ANCHOR + 10 * np.arange(1, cap + 1, dtype=np.uint64)
    recs = ((ids << np.uint64(fmt.EVENT_SHIFT)) | kinds) << np.uint64(fmt.TAG_SHIFT)
    recs |= times & np.uint64(fmt.LOW32)
    layout = fmt.Layout(lanes, 1, cap)
    words = np.zeros(layout.total_words, np.uint64)
    words[: fmt.HEADER_WORDS] = layout.header()
    lane = words[fmt.HEADER_WORDS :].reshape(lanes, layout.lane_words)
    lane[:, fmt.LANE_ANCHOR] = ANCHOR
    lane[:, fmt.LANE_SM_ATTEMPTED] = np.arange(lanes, dtype=np.uint64) % 132
    lane[:, fmt.LANE_HEADER_WORDS :] = recs
    return Capture(words, event_names={i: f"e{i}" for i in range(4095)}, kernel_name=shape)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--lanes", type=int, default=64)
    ap.add_argument("--chrome", action="store_true", help="also time Chrome JSON (slow)")
    ap.add_argument("--shapes", default="nested,pairs,clique,fanout")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for shape in args.shapes.split(","):
            trace = decode(overlap_capture(shape, args.records, args.lanes))
            n = int(trace.lanes["written"].sum())
            line = f"{shape:<7} {n:>9,} records"
            for ext in (".perfetto-trace", ".json") if args.chrome else (".perfetto-trace",):
                path = os.path.join(tmp, "t" + ext)
                t0 = time.perf_counter()
                export(trace, path)
                line += f"   {ext[1:]} {time.perf_counter() - t0:6.2f} s"
            print(line, flush=True)


if __name__ == "__main__":
    main()
