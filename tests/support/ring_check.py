"""What a ring capture must hold: each lane's newest records, exactly (shared by the
interpreter and GPU tests of ring mode)."""

from __future__ import annotations

import numpy as np
from reference_encoder import Lane, Stream, expected

from sm_profiler.trace.decode import decode
from sm_profiler.wire import format as fmt


def check_ring_capture(capture, seq: list[tuple[int, int]], lanes: list[int]) -> None:
    """The raw lanes `lanes` of `capture` hold the newest records of `seq`, oldest at slot
    len(seq) % capacity, closed with RING_MARK | len(seq); the decode keeps them in order,
    counts the rest as overwritten and reports the ends whose begins were overwritten."""
    words = capture.words
    layout = fmt.Layout.from_header(words)
    cap = layout.capacity
    assert layout.ring
    lv = layout.lanes(words)
    n = len(seq)
    want = seq[-cap:]
    for li in lanes:
        word1 = int(lv["sm_attempted"][li])
        assert word1 >> 32 == fmt.RING_MARK | n, (li, hex(word1))
        recs = lv["records"][li].astype(np.uint64)
        tags = [(int(r) >> 32) & 0xFFFFFFFF for r in recs]
        order = [(n + k) % cap for k in range(min(n, cap))] if n > cap else list(range(n))
        got = [(t & fmt.KIND_MASK, t >> fmt.EVENT_SHIFT) for t in (tags[i] for i in order)]
        assert got == want, (li, got[:6], want[:6])
    trace = decode(capture)
    ln = trace.lanes
    # What a correct decode of the kept records pairs and leaves unmatched (times made up).
    ref = expected(
        Stream(1, 1, cap, {(0, 0): Lane(1, 0, [(k, e, 10 + i) for i, (k, e) in enumerate(want)])})
    )
    for li in lanes:
        assert int(ln["written"][li]) == len(want)
        assert int(ln["dropped"][li]) == n - len(want)
        ev = trace.events["lane"] == li
        assert int((trace.events["kind"][ev] == 0).sum()) == len(ref.ranges)
        assert int((trace.events["kind"][ev] == 1).sum()) == len(ref.instants)
        um = trace.unmatched["lane"] == li
        assert sorted(
            zip(
                trace.unmatched["kind"][um].tolist(),
                trace.unmatched["event"][um].tolist(),
                strict=True,
            )
        ) == sorted((u[2], u[1]) for u in ref.unmatched)
        t = trace.events["start_ns"][ev]
        assert (np.diff(t) >= 0).all()
