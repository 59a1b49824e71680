"""Host-side benchmark: decode and Perfetto export of a large synthetic capture.

You will see how fast the host turns a raw buffer into a trace, how big the Perfetto file is, and
how much memory it takes, against the targets:

    decode                       >= 20 M events/s
    decode + Perfetto export     >=  2 M events/s
    Perfetto file                <= 16 bytes per event
    peak memory (decode+export)  <= 4 x the capture size

An "event" here is one record in the capture (a begin, an end or an instant: 8 bytes on the
wire), so bytes/event compares the file with the buffer it came from. The capture is built
directly with numpy in the wire format (benchmarks/captures.py): 4 groups per block, nested
begin/end ranges and instants, increasing times whose low 32 bits wrap inside every lane.

Run:  python -m benchmarks run host [--events 10000000] [--lanes 4096]
"""

# %%
from __future__ import annotations

import argparse
import os
import tempfile
import time
import tracemalloc

from benchmarks.captures import synthetic_capture
from sm_profiler.export import export
from sm_profiler.trace.decode import decode


def bench(num_events: int, num_lanes: int, repeat: int = 3) -> dict:
    cap = synthetic_capture(num_events, num_lanes)
    n = cap.layout.num_lanes * cap.layout.capacity
    capture_bytes = cap.words.nbytes
    out = {"events": n, "capture_bytes": capture_bytes}

    t_decode = min(_timed(lambda: decode(cap)) for _ in range(repeat))
    out["decode_s"] = t_decode
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "trace.perfetto-trace")
        # Every range exported (summary=False): what the targets are about. The summary that a
        # trace this big gets by default is timed after, beside it.
        t_both = min(
            _timed(lambda: export(decode(cap), path, summary=False)) for _ in range(repeat)
        )
        out["decode_export_s"] = t_both
        out["file_bytes"] = os.path.getsize(path)
        out["trace_rows"] = len(decode(cap))
        out["summary_s"] = min(
            _timed(lambda: export(decode(cap), path, summary=True)) for _ in range(repeat)
        )
        out["summary_bytes"] = os.path.getsize(path)

        # Memory in a separate run: tracemalloc sees numpy's buffers but slows Python a little.
        # Peaks are above what was allocated before decode started (the capture itself).
        tracemalloc.start()
        base = tracemalloc.get_traced_memory()[0]
        trace = decode(cap)
        out["decode_peak_bytes"] = tracemalloc.get_traced_memory()[1] - base
        tracemalloc.reset_peak()
        export(trace, path, summary=False)
        out["export_peak_bytes"] = tracemalloc.get_traced_memory()[1] - base
        out["peak_bytes"] = max(out["decode_peak_bytes"], out["export_peak_bytes"])
        tracemalloc.stop()
    return out


def _timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def report(r: dict) -> str:
    n = r["events"]
    rows = [
        ("decode", f"{n / r['decode_s'] / 1e6:.1f} M events/s", ">= 20", n / r["decode_s"] >= 20e6),
        (
            "decode + Perfetto export",
            f"{n / r['decode_export_s'] / 1e6:.2f} M events/s",
            ">= 2",
            n / r["decode_export_s"] >= 2e6,
        ),
        (
            "Perfetto file",
            f"{r['file_bytes'] / n:.2f} B/event ({r['file_bytes'] / r['trace_rows']:.1f} B/row)",
            "<= 16",
            r["file_bytes"] / n <= 16,
        ),
        (
            "  decode + summary export",
            f"{n / r['summary_s'] / 1e6:.2f} M events/s ({r['summary_bytes'] / 2**20:.1f} MiB)",
            "",
            True,
        ),
        (
            "peak memory (tracemalloc)",
            f"{r['peak_bytes'] / r['capture_bytes']:.2f} x capture",
            "<= 4",
            r["peak_bytes"] / r["capture_bytes"] <= 4,
        ),
        (
            "  of which decode",
            f"{r['decode_peak_bytes'] / r['capture_bytes']:.2f} x capture",
            "",
            True,
        ),
        (
            "  export (trace held)",
            f"{r['export_peak_bytes'] / r['capture_bytes']:.2f} x capture",
            "",
            True,
        ),
    ]
    lines = [
        f"{n:,} events (records) in {r['capture_bytes'] / 2**20:.0f} MiB capture, "
        f"{r['trace_rows']:,} trace rows; decode {r['decode_s']:.3f} s, "
        f"decode+export {r['decode_export_s']:.3f} s, file {r['file_bytes'] / 2**20:.1f} MiB, "
        f"peak {r['peak_bytes'] / 2**20:.0f} MiB",
        f"{'measure':<28}{'value':<34}{'target':<8}ok",
    ]
    lines += [f"{a:<28}{b:<34}{c:<8}{('yes' if ok else 'NO') if c else ''}" for a, b, c, ok in rows]
    return "\n".join(lines)


# %%
def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--events", type=int, default=10_000_000)
    ap.add_argument("--lanes", type=int, default=4096)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args(argv)
    print(report(bench(a.events, a.lanes, a.repeat)))


if __name__ == "__main__":
    main()
