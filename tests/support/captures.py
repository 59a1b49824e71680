"""Hand-built captures and traces shared by the host tests, each small enough to check by reading.

- `build_capture`: a capture written word by word from a {lane: records} table (no encoder);
  `tiny_capture` is two blocks of it and `TINY_REPORT` its exact stats report;
- `capture` / `basic_capture`: captures from reference_encoder streams at a time `T0` whose low
  32 bits wrap, as the exporters' tests read them back;
- `nested_trace`: a decoded trace with nesting, siblings and an instant inside a range;
- for the hostile-input tests: `lane_capture` (one lane, any anchor and SM id), `kernel_capture`
  (one small launch at `EPOCH_T0`, any name, time, metadata), `ring_words` / `lane_base` (ring
  lanes and where their words sit), `BAD_NAMES`, and capture files written by hand
  (`write_npz`) or by `Capture.save` (`saved`);
- `synthetic_trace`: the host benchmark's large synthetic capture, decoded.
"""

from __future__ import annotations

import json

import numpy as np
from reference_encoder import BEGIN, END, INSTANT, Lane, Stream, encode

from sm_profiler.trace.decode import decode
from sm_profiler.wire import format as fmt
from sm_profiler.wire.capture import Capture

# -- word by word ----------------------------------------------------------------------------

KINDS = {"B": fmt.KIND_BEGIN, "E": fmt.KIND_END, "I": fmt.KIND_INSTANT}


def build_capture(
    lanes: dict[int, dict],
    num_blocks: int,
    num_groups: int = 1,
    capacity: int = 16,
    event_names: dict[int, str] | None = None,
    emulated: bool = False,
    kernel_name: str = "kernel",
    group_names: dict[int, str] | None = None,
) -> Capture:
    """A Capture in the wire format, built word by word.

    lanes: {lane index: {"sm": int, "anchor": ns, "records": [("B"|"E"|"I", event id, ns)],
    "attempted": int (only for overflowed lanes)}}. Lanes not listed stay uninitialised. Records
    beyond `capacity` are dropped as the device would drop them (counted in `attempted`).
    """
    layout = fmt.Layout(num_blocks, num_groups, capacity, fmt.FLAG_EMULATED if emulated else 0)
    words = np.zeros(layout.total_words, np.uint64)
    words[: fmt.HEADER_WORDS] = layout.header()
    view = layout.lanes(words)
    for i, spec in lanes.items():
        recs = spec.get("records", [])
        attempted = spec.get("attempted", len(recs) if len(recs) > capacity else 0)
        view["anchor"][i] = spec["anchor"]
        view["sm_attempted"][i] = fmt.lane_word1(spec["sm"], attempted, capacity)
        for j, (kind, event, t) in enumerate(recs[:capacity]):
            view["records"][i, j] = fmt.make_record(t, event, KINDS[kind])
    return Capture(
        words=words,
        event_names=event_names or {},
        group_names=group_names or {},
        kernel_name=kernel_name,
    )


def tiny_capture(origin_ns: int = 0, **kw) -> Capture:
    """Two blocks on SMs 0 and 1; 'load' then 'compute' in each, one 'mark' instant; every time
    `origin_ns` later (the same launch at another clock origin)."""
    lanes = {
        0: {
            "sm": 0,
            "anchor": 1000,
            "records": [
                ("B", 0, 1100),
                ("E", 0, 1600),
                ("B", 1, 1600),
                ("E", 1, 3600),
                ("I", 2, 3700),
            ],
        },
        1: {
            "sm": 1,
            "anchor": 1200,
            "records": [("B", 0, 1300), ("E", 0, 2300), ("B", 1, 2300), ("E", 1, 5300)],
        },
    }
    for lane in lanes.values():
        lane["anchor"] += origin_ns
        lane["records"] = [(k, e, t + origin_ns) for k, e, t in lane["records"]]
    names = {0: "load", 1: "compute", 2: "mark"}
    return build_capture(lanes, num_blocks=2, event_names=names, kernel_name="tiny", **kw)


# The stats report of tiny_capture(), exactly (test_stats.py, test_cli.py).
TINY_REPORT = """\
sm_profiler stats: tiny (2 blocks)
span 4.30 µs · 2 SMs · 2/2 lanes initialised · 4 ranges · 1 instant

events (times in ns)
event    count  total  self  mean   min   p50   p90   p99   max  instants
compute      2   5000  5000  2500  2000  2500  2900  2990  3000         0
load         2   1500  1500   750   500   750   950   995  1000         0
mark         0      -     -     -     -     -     -     -     -         1

waits: gaps between consecutive ranges of a lane (times in ns)
gap             count  total  mean  max
load → compute      2      0     0    0

SMs (times in ns from kernel start)
sm  blocks  busy  busy %  first  last
 0       1  2700    62.8      0  2700
 1       1  4100    95.3    200  4300
load imbalance: last SM (1) finishes 800 ns after the mean SM (18.6% of span)
"""


# -- from reference_encoder streams ---------------------------------------------------------

T0 = 1_700_000_000_000_000_000 + (1 << 32) - 100  # low 32 bits wrap 100 ns in


NAMES = {0: "load", 1: "mma", 2: "store"}


def capture(
    lanes: dict, num_blocks=2, num_groups=2, capacity=32, flags=0, name="kernel", groups=None
) -> Capture:
    s = Stream(num_blocks, num_groups, capacity, flags=flags)
    for key, (anchor, sm, recs) in lanes.items():
        s.lanes[key] = Lane(anchor, sm, [(k, e, T0 + t) for k, e, t in recs])
    return Capture(encode(s), event_names=NAMES, group_names=groups or {}, kernel_name=name)


def basic_capture(**kw) -> Capture:
    return capture(
        {
            (0, 0): (
                T0,
                17,
                [(BEGIN, 0, 10), (BEGIN, 1, 20), (END, 1, 30), (INSTANT, 2, 35), (END, 0, 400)],
            ),
            (0, 1): (T0 + 1, 17, [(BEGIN, 1, 12), (END, 1, 12), (BEGIN, 1, 12), (END, 1, 50)]),
            (1, 0): (T0 + 50, 3, [(BEGIN, 0, 60), (END, 0, 70000)]),
        },
        **kw,
    )


def nested_trace():
    """Lane (0, 0) on SM 5: tile [0, 100) holding load [10, 30) and mma [35, 60) (mma holding
    an instant), then a store [70, 90) after the tile... as a sibling: tile, store at top level.
    Lane (0, 1) on SM 5: mma [0, 40), mma [50, 60). Lane (1, 0) on SM 6: load [0, 10)."""
    t0 = 1 << 40
    s = Stream(2, 2, 16)
    s.lanes[(0, 0)] = Lane(
        t0,
        5,
        [
            (BEGIN, 3, t0),
            (BEGIN, 0, t0 + 10),
            (END, 0, t0 + 30),
            (BEGIN, 1, t0 + 35),
            (INSTANT, 2, t0 + 40),
            (END, 1, t0 + 60),
            (END, 3, t0 + 100),
            (BEGIN, 2, t0 + 110),
            (END, 2, t0 + 130),
        ],
    )
    s.lanes[(0, 1)] = Lane(
        t0, 5, [(BEGIN, 1, t0), (END, 1, t0 + 40), (BEGIN, 1, t0 + 50), (END, 1, t0 + 60)]
    )
    s.lanes[(1, 0)] = Lane(t0, 6, [(BEGIN, 0, t0), (END, 0, t0 + 10)])
    names = {0: "load", 1: "mma", 2: "store", 3: "tile"}
    return decode(
        Capture(
            encode(s),
            event_names=names,
            kernel_name="k",
            group_names={0: "producer", 1: "consumer"},
        )
    )


# -- hostile input: edges of the format, hand-made files ---------------------------------------

# A time on today's clocks (ns since 1970), as a launch's records carry.
EPOCH_T0 = 1_700_000_000_000_000_000

# Names that are not printable text: a lone surrogate, an escape sequence, a newline, nothing.
BAD_NAMES = ["\ud800", "a\x1b[2Jb", "two\nlines", ""]


def lane_capture(anchor: int, records, sm: int = 1, capacity: int = 4) -> Capture:
    """One block, one group: a lane anchored at `anchor` on SM `sm` holding `records`."""
    return Capture(encode(Stream(1, 1, capacity, {(0, 0): Lane(anchor, sm, records)})))


def kernel_capture(name="k", t0=EPOCH_T0, metadata=None, records=None) -> Capture:
    """One lane of one launch named `name` at `t0`: by default a 'work' range holding two 'tick'
    instants. A record at time t is written at t0 + int(t * 10) ns."""
    recs = records or [(BEGIN, 1, 10), (INSTANT, 2, 20), (INSTANT, 2, 20.1), (END, 1, 40)]
    s = Stream(1, 1, 8, {(0, 0): Lane(t0, 3, [(k, e, t0 + int(t * 10)) for k, e, t in recs])})
    return Capture(encode(s), {1: "work", 2: "tick"}, {}, name, dict(metadata or {}))


def ring_words(records_per_lane: list[list], capacity: int = 4, closed=None) -> np.ndarray:
    """A ring buffer of one block, one group per entry of `records_per_lane` (times from
    `EPOCH_T0`); `closed[g]`: lane g was flushed (default: all were)."""
    s = Stream(1, len(records_per_lane), capacity, flags=fmt.FLAG_RING)
    for g, recs in enumerate(records_per_lane):
        s.lanes[(0, g)] = Lane(
            EPOCH_T0,
            1,
            [(k, e, EPOCH_T0 + t) for k, e, t in recs],
            closed=True if closed is None else closed[g],
        )
    return encode(s)


def lane_base(g: int, capacity: int = 4) -> int:
    """The index of lane g's first header word in a one-block buffer."""
    return fmt.HEADER_WORDS + g * (fmt.LANE_HEADER_WORDS + capacity)


def write_npz(path, meta, capture: Capture, raw_meta: bytes | None = None, **arrays) -> None:
    """A capture file written by hand: `meta` as its JSON (or `raw_meta` bytes), the capture's
    words as words_0 unless `arrays` say otherwise."""
    blob = raw_meta if raw_meta is not None else json.dumps(meta).encode()
    arrays.setdefault("words_0", capture.words)
    np.savez(path, meta=np.frombuffer(blob, np.uint8), **arrays)


def saved(tmp_path, capture: Capture, name: str = "t.npz") -> str:
    """`capture` saved as tmp_path/name; its path."""
    path = str(tmp_path / name)
    capture.save(path)
    return path


# -- large ---------------------------------------------------------------------------------------


def synthetic_trace(n=20_000):
    """The host benchmark's synthetic capture (benchmarks/captures.py) of `n` records on 256 lanes,
    decoded."""
    from benchmarks.captures import synthetic_capture
    from sm_profiler.trace.decode import decode

    return decode(synthetic_capture(n, num_lanes=256))


def torch_doc(parts, base_ns=EPOCH_T0 - 10**6, offset_ns=0, lead_ns=0, tail_ns=0) -> dict:
    """A torch.profiler trace as Kineto writes it: one CPU op, then a kernel row per decoded
    launch in `parts`, at ts = µs since `base_ns`. Its clock reads `offset_ns` behind
    %globaltimer, and each row starts `lead_ns` before its launch and ends `tail_ns` after (CUPTI's
    span around the programs)."""
    ev = [
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": "aten::add",
            "pid": 11,
            "tid": 11,
            "ts": 1.0,
            "dur": 2.0,
        }
    ]
    for t in parts:
        s = int(t.start_ns) - offset_ns - lead_ns
        e = int(t.end_ns) - offset_ns + tail_ns
        ev.append(
            {
                "ph": "X",
                "cat": "kernel",
                "name": t.kernels[0].name,
                "pid": 0,
                "tid": 7,
                "ts": (s - base_ns) / 1e3,
                "dur": (e - s) / 1e3,
            }
        )
    return {"schemaVersion": 1, "baseTimeNanoseconds": base_ns, "traceEvents": ev}


def cupti_doc(kernels, steps=(), base_ns=EPOCH_T0, num_sms=None) -> dict:
    """A torch.profiler trace of CUPTI kernel rows only, times in ns since `base_ns`.
    kernels: dicts with name, start, end and optionally launch (the time of its
    cudaLaunchKernel row: linked by correlation id), grid, block, device, args (more of the
    row's args: "registers per thread", "shared memory", ...).
    steps: (N, start, end) of ProfilerStep#N annotations. num_sms: deviceProperties' numSms."""
    ev = []
    for i, k in enumerate(kernels):
        args = {"device": k.get("device", 0), "correlation": 100 + i}
        for key in ("grid", "block"):
            if key in k:
                args[key] = list(k[key])
        args.update(k.get("args", {}))  # registers per thread, shared memory, ...
        ev.append(
            {
                "ph": "X",
                "cat": "kernel",
                "name": k["name"],
                "pid": args["device"],
                "tid": 7,
                "ts": k["start"] / 1e3,
                "dur": (k["end"] - k["start"]) / 1e3,
                "args": args,
            }
        )
        if "launch" in k:
            ev.append(
                {
                    "ph": "X",
                    "cat": "cuda_runtime",
                    "name": "cudaLaunchKernel",
                    "pid": 11,
                    "tid": 11,
                    "ts": k["launch"] / 1e3,
                    "dur": 0.5,
                    "args": {"correlation": 100 + i},
                }
            )
    for n, s, e in steps:
        ev.append(
            {
                "ph": "X",
                "cat": "user_annotation",
                "name": f"ProfilerStep#{n}",
                "pid": 11,
                "tid": 11,
                "ts": s / 1e3,
                "dur": (e - s) / 1e3,
            }
        )
    doc = {"schemaVersion": 1, "baseTimeNanoseconds": base_ns, "traceEvents": ev}
    if num_sms is not None:
        doc["deviceProperties"] = [{"id": 0, "name": "test GPU", "numSms": num_sms}]
    return doc
