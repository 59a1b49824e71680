"""Synthetic captures built directly with numpy in the wire format (see sm_profiler.wire.format).

`synthetic_capture` is the host benchmark's capture (host.py, and ui_load.py's traces): 4 groups
per block, nested begin/end ranges and instants, increasing times whose low 32 bits wrap inside
every lane, blocks starting in waves as on a 132-SM GPU.
"""

from __future__ import annotations

import numpy as np

from sm_profiler.wire import format as fmt
from sm_profiler.wire.capture import Capture

# One repeating unit of records per lane: load [ mma ] mma [ mma ] store-instant ] load.
UNIT = [
    (fmt.KIND_BEGIN, 0),
    (fmt.KIND_BEGIN, 1),
    (fmt.KIND_END, 1),
    (fmt.KIND_INSTANT, 2),
    (fmt.KIND_BEGIN, 1),
    (fmt.KIND_END, 1),
    (fmt.KIND_END, 0),
]
NAMES = {0: "load", 1: "mma", 2: "store"}


def synthetic_capture(num_events: int, num_lanes: int = 4096, seed: int = 0) -> Capture:
    """A capture holding about `num_events` records over `num_lanes` lanes (4 groups a block)."""
    rng = np.random.default_rng(seed)
    groups = 4
    blocks = max(1, num_lanes // groups)
    lanes = blocks * groups
    per_lane = max(len(UNIT), -(-num_events // lanes) // len(UNIT) * len(UNIT))
    layout = fmt.Layout.checked(blocks, groups, per_lane)
    words = np.zeros(layout.total_words, np.uint64)
    words[: fmt.HEADER_WORDS] = layout.header()
    lv = layout.lanes(words)

    # Blocks start in waves of 132 SMs x 8 blocks; each lane's low word wraps mid-lane.
    wave = np.arange(blocks) // (132 * 8)
    start = (1 << 62) + (1 << 32) * 7 - 1_000_000 + wave * 2_000_000
    anchor = np.repeat(start, groups) + rng.integers(0, 500, lanes)
    lv["anchor"] = anchor.astype(np.uint64)
    lv["sm_attempted"] = np.repeat(np.arange(blocks) % 132, groups).astype(np.uint64)

    kind = np.array([k for k, _ in UNIT], np.uint64)
    event = np.array([e for _, e in UNIT], np.uint64)
    tag = np.tile((event << np.uint64(fmt.EVENT_SHIFT)) | kind, per_lane // len(UNIT))
    recs = lv["records"]
    for a in range(0, lanes, 256):  # a few lanes at a time keeps the temporaries small
        b = min(lanes, a + 256)
        gaps = rng.integers(20, 400, (b - a, per_lane), dtype=np.int64)
        t = np.cumsum(gaps, axis=1) + anchor[a:b, None]
        recs[a:b] = (tag << np.uint64(fmt.TAG_SHIFT)) | (t.astype(np.uint64) & np.uint64(fmt.LOW32))
    return Capture(words, event_names=NAMES, kernel_name="synthetic")


# kernel tag -> kernel id of synthetic_auto_buffer's kernels (tags 1..kernels, default 20)
SYNTHETIC_AUTO_TAGS = {k: k for k in range(1, 21)}


def synthetic_auto_buffer(
    launches: int,
    programs: int,
    sms: int = 132,
    kernels: int = 20,
    replays: bool = False,
    steps: int = 1,
    program_ns: int = 2_000,
    seed: int = 0,
) -> np.ndarray:
    """An auto-mode buffer (format.py's words, as the host reads it back) of `launches` launches
    of `programs` programs each, one area each, spread over `steps` steps (step tags 1..steps),
    the records as the device writes them: programs in waves over `sms` SMs, each ~program_ns
    long, launches one after another on one stream, kernel tags 1..kernels. replays: one kernel
    (a CUDA graph's node replayed). Read it with records.read_buffer(words, 0, SYNTHETIC_AUTO_TAGS)."""
    rng = np.random.default_rng(seed)
    n = launches * programs
    launch = np.repeat(np.arange(launches, dtype=np.int64), programs)
    p = np.tile(np.arange(programs, dtype=np.int64), launches)
    waves = -(-programs // sms)
    launch_ns = waves * program_ns + 3_000  # a launch's span and the gap to the next
    start = 1_700_000_000_000_000_000 + launch * launch_ns + (p // sms) * program_ns
    start += rng.integers(0, 200, n)
    dur = program_ns - 300 + rng.integers(0, 250, n)
    head = fmt.AUTO_HEADER_WORDS + launches * fmt.AUTO_AREA_WORDS
    words = np.zeros(head + n * fmt.AUTO_RECORD_WORDS, np.uint64)
    words[: fmt.AUTO_HEADER_WORDS] = fmt.auto_header(max(n, 1), False, launches, n)
    d = words[fmt.AUTO_HEADER_WORDS : head].reshape(-1, fmt.AUTO_AREA_WORDS)
    first = np.arange(launches, dtype=np.uint64) * np.uint64(programs)
    d[:, 0] = first | (np.uint64(programs) << np.uint64(32))
    d[:, 1] = (1 + (np.arange(launches) * steps) // max(launches, 1)).astype(np.uint64)
    recs = words[head:].view(fmt.AUTO_RECORD_DTYPE)
    recs["start_ns"] = start.astype(np.uint64)
    recs["end_lo"] = ((start + dur) & fmt.LOW32).astype(np.uint32)
    recs["sm"] = (p % sms).astype(np.uint32)
    recs["kernel_tag"] = 1 if replays else (1 + launch % kernels).astype(np.uint32)
    recs["ctaid_x"] = p.astype(np.uint32)
    return words
