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

from sm_profiler.capture import Capture, load, save_many
from sm_profiler.cli import printable
from sm_profiler.decode import decode
from sm_profiler.errors import CaptureError, FormatError
from sm_profiler.export import to_chrome_json
from sm_profiler.stats import compute_stats, format_stats


def real_file(path) -> bytes:
    t0 = 5 * 2**32 - 10
    s = Stream(2, 2, 6)
    s.lanes[(0, 0)] = Lane(t0, 3, [(BEGIN, 1, t0 + 5), (BEGIN, 2, t0 + 20), (END, 1, t0 + 30),
                                   (END, 2, t0 + 40), (INSTANT, 7, t0 + 41)])  # fmt: skip
    s.lanes[(1, 1)] = Lane(t0 + 9, 4, [(BEGIN, 1, t0 + 10)] * 3 + [(END, 1, t0 + 50)] * 5)
    a = Capture(encode(s), {1: "load", 2: "mma", 7: "tick"}, {0: "producer"}, "k1",
                {"device": "H100", "sm_count": 132})  # fmt: skip
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
            data[at] ^= 1 << int(rng.integers(0, 8)) if rng.random() < 0.7 else int(
                rng.integers(1, 256))
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


def test_random_byte_flips_inside_well_formed_members(tmp_path):
    members = _members(real_file(tmp_path / "good.npz"))
    rng = np.random.default_rng(15)
    path = tmp_path / "t.npz"
    seen: dict[str, int] = {}
    names = sorted(members)
    for _ in range(examples(1500)):
        damaged = dict(members)
        name = names[int(rng.integers(0, len(names)))]
        body = bytearray(damaged[name])
        # Mostly past the .npy header (the JSON text and the words), sometimes inside it.
        lo = 0 if rng.random() < 0.2 else min(128, len(body) - 1)
        for _ in range(int(rng.integers(1, 3))):
            at = int(rng.integers(lo, len(body)))
            body[at] ^= 1 << int(rng.integers(0, 8))
        damaged[name] = bytes(body)
        with zipfile.ZipFile(path, "w") as z:
            for n, b in damaged.items():
                z.writestr(n, b)
        outcome = use(path)
        seen[outcome] = seen.get(outcome, 0) + 1
    print(seen)
    assert seen.get("ok", 0) > 50 and len(seen) >= 3, seen


