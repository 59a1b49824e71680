"""Bounded, seeded fuzzing of capture files (issue 15): damaged bytes give CaptureError or
FormatError, or a capture that loads, decodes, summarizes and exports like any other.

Two kinds of damage over a real two-capture file: random bytes flipped anywhere in the file
(zip structure, .npy headers, data; most data flips fail the zip's CRC), and random bytes
flipped inside the members, written back as a well-formed zip (so the JSON, the names, the
metadata and the buffers themselves are what is damaged). Run longer with SM_PROFILER_FUZZ=20.
"""

from __future__ import annotations

import io
import json
import zipfile

import numpy as np
from reference_encoder import BEGIN, END, INSTANT, Lane, Stream, encode, examples

from sm_profiler.cli import printable
from sm_profiler.errors import CaptureError, FormatError
from sm_profiler.export import to_chrome_json
from sm_profiler.report.stats import compute_stats, format_stats
from sm_profiler.trace.decode import decode
from sm_profiler.wire.capture import Capture, load, save_many


def real_file(path) -> bytes:
    t0 = 5 * 2**32 - 10
    s = Stream(2, 2, 6)
    s.lanes[(0, 0)] = Lane(
        t0,
        3,
        [
            (BEGIN, 1, t0 + 5),
            (BEGIN, 2, t0 + 20),
            (END, 1, t0 + 30),
            (END, 2, t0 + 40),
            (INSTANT, 7, t0 + 41),
        ],
    )
    s.lanes[(1, 1)] = Lane(t0 + 9, 4, [(BEGIN, 1, t0 + 10)] * 3 + [(END, 1, t0 + 50)] * 5)
    a = Capture(
        encode(s),
        {1: "load", 2: "mma", 7: "tick"},
        {0: "producer"},
        "k1",
        {"device": "H100", "sm_count": 132},
    )
    b = Capture(encode(Stream(1, 1, 2, {(0, 0): Lane(99, 1, [(INSTANT, 3, 100)])})), {3: "x"})
    save_many([a, b, a], path)
    return path.read_bytes()


def use(path) -> str:
    """Load `path` and do what the CLI does with it; the outcome, for the tally."""
    try:
        caps = load(path)
    except (CaptureError, FormatError) as e:
        assert "\n" not in str(e)
        return type(e).__name__
    for c in caps:
        for k, v in c.metadata.items():
            printable(f"{k} {v}").encode()
    try:
        trace = decode(caps)
    except FormatError:
        return "decode FormatError"
    format_stats(compute_stats(trace), width=100).encode()
    json.dumps(to_chrome_json(trace)).encode()
    return "ok"


def test_random_byte_flips_anywhere_in_the_file(tmp_path):
    good = real_file(tmp_path / "good.npz")
    rng = np.random.default_rng(1515)
    path = tmp_path / "t.npz"
    seen: dict[str, int] = {}
    for _ in range(examples(1500)):
        data = bytearray(good)
        for _ in range(int(rng.integers(1, 4))):
            at = int(rng.integers(0, len(data)))
            data[at] ^= (
                1 << int(rng.integers(0, 8)) if rng.random() < 0.7 else int(rng.integers(1, 256))
            )
        if rng.random() < 0.05:
            data = data[: int(rng.integers(0, len(data)))]
        path.write_bytes(bytes(data))
        outcome = use(path)
        seen[outcome] = seen.get(outcome, 0) + 1
    print(seen)
    assert seen.get("CaptureError", 0) > 100, seen  # the damage was seen, not ignored


def _members(data: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        return {n: z.read(n) for n in z.namelist()}


def _write_flipped(
    path, members: dict[str, bytes], names: list[str], rng, header_share: float
) -> None:
    """Write the capture file `members` to `path` with one or two bits flipped in one member:
    inside its first 128 bytes (the .npy header) with probability `header_share`, else past."""
    damaged = dict(members)
    name = names[int(rng.integers(0, len(names)))]
    body = bytearray(damaged[name])
    lo = 0 if rng.random() < header_share else min(128, len(body) - 1)
    for _ in range(int(rng.integers(1, 3))):
        body[int(rng.integers(lo, len(body)))] ^= 1 << int(rng.integers(0, 8))
    damaged[name] = bytes(body)
    with zipfile.ZipFile(path, "w") as z:
        for n, b in damaged.items():
            z.writestr(n, b)


def test_random_byte_flips_inside_well_formed_members(tmp_path):
    members = _members(real_file(tmp_path / "good.npz"))
    rng = np.random.default_rng(15)
    path = tmp_path / "t.npz"
    seen: dict[str, int] = {}
    names = sorted(members)
    for _ in range(examples(1500)):
        # Mostly past the .npy header (the JSON text and the words), sometimes inside it.
        _write_flipped(path, members, names, rng, header_share=0.2)
        outcome = use(path)
        seen[outcome] = seen.get(outcome, 0) + 1
    print(seen)
    assert seen.get("ok", 0) > 50 and len(seen) >= 3, seen


# -- wire format v4: launch slots and ring lanes (issue 23) ----------------------------------------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from strategies import SETTINGS, ring_streams, streams  # noqa: E402

from sm_profiler.errors import SmProfilerError  # noqa: E402
from sm_profiler.wire import format as fmt  # noqa: E402


def slotted(words_per_slot: list[np.ndarray], used: int, labels: list[int]) -> np.ndarray:
    """A slotted buffer (format v4) holding these slots, `used` launches counted in slot 0's
    w3 and each slot's label id in its w4, then the spare header."""
    plain = len(words_per_slot[0])
    out = np.concatenate(
        [w.copy() for w in words_per_slot] + [words_per_slot[0][: fmt.HEADER_WORDS]]
    )
    for k, lab in enumerate(labels):
        out[k * plain + fmt.HDR_LABEL] = lab
    out[fmt.HDR_SLOTS] = fmt.slot_control(used, len(words_per_slot))
    assert len(out) == fmt.slotted_words(plain, len(words_per_slot))
    return out


@st.composite
def slotted_streams(draw):
    """(slotted buffer words, the streams of its slots, launches counted): slots of one shape,
    direct or ring, some never reached (used < slots) or overrun (used > slots)."""
    first = draw(st.one_of(streams(), ring_streams()))
    n = draw(st.integers(1, 3))
    slots = [first]
    for _ in range(n - 1):
        s = draw(st.one_of(streams(), ring_streams()))
        s.num_blocks, s.num_groups, s.capacity, s.flags = (
            first.num_blocks,
            first.num_groups,
            first.capacity,
            first.flags,
        )
        s.lanes = {
            k: v for k, v in s.lanes.items() if k[0] < first.num_blocks and k[1] < first.num_groups
        }
        if first.flags & fmt.FLAG_RING and first.capacity & (first.capacity - 1):
            s.flags = 0
        slots.append(s)
    used = draw(st.integers(0, n + 2))
    for k in range(n):
        if k >= max(used, 1):
            slots[k].lanes = {}  # never reached
    labels = [draw(st.integers(0, 5)) for _ in range(n)]
    return slotted([encode(s) for s in slots], used, labels), slots, used


@settings(max_examples=examples(150), **SETTINGS)
@given(slotted_streams())
def test_v4_slotted_buffers_split_and_decode_to_their_streams(case):
    from reference_encoder import actual, expected

    words, slots, used = case
    parts, missed = fmt.split_slots(words)
    assert missed == max(0, used - len(slots))
    assert len(parts) == max(1, min(used, len(slots)))
    for w, s in zip(parts, slots, strict=False):
        assert actual(decode(Capture(w))) == expected(s)


@settings(max_examples=examples(200), **SETTINGS)
@given(
    slotted_streams(),
    st.lists(st.tuples(st.integers(0, 1 << 30), st.integers(0, 2**64 - 1)), min_size=1, max_size=3),
)
def test_v4_damaged_slotted_buffers_give_format_errors_or_traces(case, edits):
    words = case[0].copy()
    for at, value in edits:
        words[at % len(words)] = np.uint64(value)
    try:
        parts, _ = fmt.split_slots(words)
        trace = decode([Capture(w) for w in parts])
    except FormatError:
        return
    format_stats(compute_stats(trace), width=100)
    to_chrome_json(trace)


def v4_file(path) -> bytes:
    """A capture file of v4 launches: the used slots of a slotted buffer (one holding ring lanes:
    one wrapped, one closed without wrapping, one never closed), as SmProfiler(slots=) saves them."""
    t0 = 7 * 2**32 - 50
    ring = Stream(1, 3, 4, flags=fmt.FLAG_RING)
    ring.lanes[(0, 0)] = Lane(
        t0, 2, [(BEGIN, 1, t0 + 5 * i) if i % 2 == 0 else (END, 1, t0 + 5 * i) for i in range(7)]
    )
    ring.lanes[(0, 1)] = Lane(t0, 3, [(INSTANT, 2, t0 + 9), (INSTANT, 2, t0 + 11)])
    ring.lanes[(0, 2)] = Lane(t0, 4, [(INSTANT, 2, t0 + 3 + i) for i in range(4)], closed=False)
    other = Stream(
        1,
        3,
        4,
        {(0, 1): Lane(t0 + 99, 5, [(BEGIN, 3, t0 + 100), (END, 3, t0 + 140)])},
        flags=fmt.FLAG_RING,
    )
    words = slotted(
        [encode(ring), encode(other), encode(Stream(1, 3, 4, flags=fmt.FLAG_RING))],
        used=4,
        labels=[1, 2, 0],
    )
    parts, missed = fmt.split_slots(words)
    caps = [
        Capture(
            w,
            {1: "load", 2: "tick", 3: "mma"},
            {0: "producer"},
            f"k{k}",
            {
                "launch": k,
                "slots": 3,
                "launches_without_slot": missed,
                "clock": [{"host_ns": 1, "offset_ns": 2, "error_ns": 3}],
                "barrier_ns": 5,
            },
        )
        for k, w in enumerate(parts)
    ]
    save_many(caps, path)
    return path.read_bytes()


def test_v4_ring_and_slot_captures_survive_byte_flips_inside_members(tmp_path):
    from sm_profiler.export.merge import merge_ranks

    members = _members(v4_file(tmp_path / "good.npz"))
    assert use(tmp_path / "good.npz") == "ok"
    rng = np.random.default_rng(23)
    path = tmp_path / "t.npz"
    seen: dict[str, int] = {}
    names = sorted(members)
    for i in range(examples(600)):
        _write_flipped(path, members, names, rng, header_share=0.1)
        outcome = use(path)
        seen[outcome] = seen.get(outcome, 0) + 1
        if outcome == "ok" and i % 10 == 0:  # and merge it as two ranks
            try:
                merge_ranks([path, tmp_path / "good.npz"], tmp_path / "m.json")
            except SmProfilerError as e:
                assert "\n" not in str(e)
    print(seen)
    assert seen.get("ok", 0) > 20 and len(seen) >= 3, seen
