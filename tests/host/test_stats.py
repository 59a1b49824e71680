"""Statistics: exact report text for a tiny hand-built trace, and Stats values checked against
independent numpy / pure-Python computations on random traces."""

from __future__ import annotations

import io
import re

import numpy as np
import pytest
from captures import TINY_REPORT, build_capture, kernel_capture, nested_trace, tiny_capture
from hypothesis import given, settings
from hypothesis import strategies as st
from reference_encoder import BEGIN, END, Lane, Stream, encode

from sm_profiler.report.stats import (
    Stats,
    compute_stats,
    format_stats,
    format_time,
    grouped_percentile,
    print_stats,
    union_length,
)
from sm_profiler.trace.decode import decode
from sm_profiler.wire.capture import Capture

# -- exact text --------------------------------------------------------------------------------


# The same report at 40 columns: prose wraps (never between a number and its unit), the event
# table leaves out its least important columns and says so.
TINY_REPORT_40 = """\
sm_profiler stats: tiny (2 blocks)
span 4.30 µs · 2 SMs ·
  2/2 lanes initialised · 4 ranges ·
  1 instant

events (times in ns)
event    count  total  self  mean   max
compute      2   5000  5000  2500  3000
load         2   1500  1500   750  1000
mark         0      -     -     -     -
(p90, p99, min, p50, instants left out
  to fit 40 columns)

waits: gaps between consecutive ranges
of a lane (times in ns)
gap             count  total  mean  max
load → compute      2      0     0    0

SMs (times in ns from kernel start)
sm  blocks  busy  busy %  first  last
 0       1  2700    62.8      0  2700
 1       1  4100    95.3    200  4300
load imbalance: last SM (1) finishes
  800 ns after the mean SM (18.6% of
  span)
"""


def test_tiny_report_exact():
    assert format_stats(compute_stats(decode(tiny_capture())), width=100) == TINY_REPORT


def test_tiny_report_at_40_columns_exact():
    assert format_stats(compute_stats(decode(tiny_capture())), width=40) == TINY_REPORT_40


def test_print_stats_writes_the_same_text_to_a_file():
    buf = io.StringIO()
    print_stats(decode(tiny_capture()), file=buf, width=100)
    assert buf.getvalue() == TINY_REPORT


def test_long_event_names_are_cut_to_the_width():
    cap = tiny_capture()
    cap.event_names[1] = "a_very_long_event_name_" * 4
    text = format_stats(compute_stats(decode(cap)), width=90)
    table = text.split("\n\n")[1].splitlines()
    # The name takes what the numbers leave: the row fills the width exactly, no column goes.
    assert max(len(line) for line in table) == 90
    assert table[1].split() == "event count total self mean min p50 p90 p99 max instants".split()
    assert any(line.startswith("a_very_long_event_name_…  ") for line in table)


def busy_multi_capture_trace():
    """Three captures with long names, warnings of every kind and a 40-SM summary."""
    first = tiny_capture(emulated=True)
    first.event_names[1] = "a_very_long_event_name_" * 4
    recs = [("B", 0, 100 + 10 * i) if i % 2 == 0 else ("E", 0, 100 + 10 * i) for i in range(12)]
    lanes = {b: {"sm": b, "anchor": 50, "records": recs[:4], "attempted": 9} for b in range(40)}
    lanes[0]["records"] = [("B", 1, 60)]
    second = build_capture(
        lanes, num_blocks=44, capacity=4, kernel_name="k" * 120, event_names={0: "load", 1: "store"}
    )
    # Ranges of seconds, so the span line and totals get their largest numbers.
    lanes = {0: {"sm": 2, "anchor": 10**10, "records": [("B", 0, 10**10), ("E", 0, 10**11)]}}
    third = build_capture(lanes, num_blocks=1, event_names={0: "load"}, kernel_name="slow")
    return decode([first, second, third])


@pytest.mark.parametrize("width", [40, 60, 80, 100, 132])
def test_every_line_fits_the_width(width):
    text = format_stats(compute_stats(busy_multi_capture_trace()), width=width)
    lines = text.splitlines()
    too_long = [line for line in lines if len(line) > width]
    assert too_long == []
    # Nothing is cut with an ellipsis except long event names in the name column (of the event
    # table, or of the waits table: 'load → a_very_…').
    cut = [line for line in lines if "…" in line]
    assert cut and all(line.startswith(("a_very_", "load → a_very_")) for line in cut)
    # The 120-character kernel name is wrapped in full, not cut.
    assert "".join(line.strip(" -") for line in lines).count("k" * 120) >= 1


@pytest.mark.parametrize("width", [60, 80])
def test_narrow_tables_leave_out_columns_and_say_which(width):
    text = format_stats(compute_stats(decode(tiny_capture())), width=width)
    lines = text.splitlines()
    header = next(line for line in lines if line.startswith("event "))
    shown = header.split()
    assert {"event", "count", "total", "mean", "max"} <= set(shown)
    left_out = [h for h in ("min", "p50", "p90", "p99", "instants") if h not in shown]
    if width == 80:
        assert left_out == [] and "left out" not in text
    else:
        assert left_out and f"left out to fit {width} columns" in text
        note = text[text.index("(") : text.index("left out")]
        assert all(h in note for h in left_out)


def test_one_time_unit_per_report():
    """Totals of seconds, ranges of 2.5 ms, SMs ending at 1.2 s: every table is in ms (the
    SMs' 1.2 s is at least 10 of them, and the smallest table's largest, a 500 µs wait, keeps
    its digits in it), totals in more digits; no cell carries a unit of its own."""
    lanes = {
        b: {
            "sm": b,
            "anchor": 1,
            "records": [
                r
                for i in range(400)
                for r in (("B", 0, 1 + 3_000_000 * i), ("E", 0, 1 + 3_000_000 * i + 2_500_000))
            ],
        }
        for b in range(2)
    }
    cap = build_capture(lanes, num_blocks=2, capacity=800, event_names={0: "step"})
    text = format_stats(compute_stats(decode(cap)), width=100)
    lines = text.splitlines()
    i = lines.index("events (times in ms)")
    assert lines[i + 1].split()[:5] == ["event", "count", "total", "self", "mean"]
    assert lines[i + 2].split()[:5] == ["step", "800", "2000.00", "2000.00", "2.50"]  # in ms
    assert "SMs (times in ms from kernel start)" in lines  # the last SM ends at 1.2 s
    assert "waits: gaps between consecutive ranges of a lane (times in ms)" in lines
    assert next(ln for ln in lines if ln.startswith("step → step")).split()[4:] == [
        "399.000",
        "0.500",
        "0.500",
    ]
    rows = [
        line for line in lines[i + 1 :] if line and not line.startswith(("SMs", "load", "waits"))
    ]
    # header and row of the event table, of the waits table (step → step: 500 µs each), and
    # header and 2 rows of the SMs'
    assert len(rows) == 7
    assert not [line for line in rows if {"ns", "µs", "ms", "s"} & set(line.split())]


def quick_start_like(origin_ns: int, captures: int = 1) -> list[Capture]:
    """The Quick start's shape in the interpreter: 16 programs on 8 SMs, each a `load` then a
    `store` range of 2.75-14.39 ms with a wait of 2-8.6 ms between them, programs one after
    another: its events' own unit is ms, its waits' µs (all under 10 ms), its SMs' ms."""
    caps = []
    for c in range(captures):
        t, lanes = origin_ns + c * 10**9, {}
        for b in range(16):
            load_ns, wait_ns, store_ns = (
                2_960_000 + 310_000 * b,
                2_000_000 + 412_000 * b,
                2_750_000 + 727_000 * b,
            )
            recs = [("B", 0, t), ("E", 0, t + load_ns)]
            t += load_ns + wait_ns
            recs += [("B", 1, t), ("E", 1, t + store_ns)]
            lanes[b] = {"sm": b % 8, "anchor": recs[0][2] - 100 + 1, "records": recs}
            t += store_ns + 1000
        caps.append(build_capture(lanes, 16, capacity=4, event_names={0: "load", 1: "store"}))
    return caps


CAPTION_UNIT = re.compile(r"\((?:times|span per launch),? in (ns|µs|ms|s)\b")


@pytest.mark.parametrize("captures", [1, 3])
@pytest.mark.parametrize("origin_ns", [10**6, 10**12, 17 * 10**17])
def test_9_one_time_unit_per_report(origin_ns, captures):
    """Issue 56, item 9: the Quick start's events were in ms and its waits, the table below, in
    µs ('total 109908'). A report's tables share one unit (a section's, where a report has one
    per capture), at 80 columns, whatever the clock's origin: the wait total is in ms."""
    text = format_stats(compute_stats(decode(quick_start_like(origin_ns, captures))), width=80)
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 80
    units = [m.group(1) for line in lines for m in CAPTION_UNIT.finditer(line)]
    assert len(units) >= 3 * captures and set(units) == {"ms"}, units
    # the first waits table: the whole report's (of all captures)
    waits = next(line for line in lines if line.startswith("load → store "))
    count, total = waits.split()[3:5]
    expected_ns = sum(2_000_000 + 412_000 * b for b in range(16)) * captures
    assert int(count) == 16 * captures
    assert float(total) == pytest.approx(expected_ns / 1e6, abs=0.01)


def test_9_a_report_unit_keeps_the_digits_of_its_smallest_table():
    """A 10 ms kernel of 200 ns ranges: in ms the ranges would read 0.000; the report takes the
    unit in which every table's largest figure keeps its digits (µs), the SMs' times longer."""
    lanes = {
        b: {
            "sm": b,
            "anchor": 1 + b * 5_000_000,
            "records": [("B", 0, 10 + b * 5_000_000), ("E", 0, 210 + b * 5_000_000)],
        }
        for b in range(3)
    }
    text = format_stats(compute_stats(decode(build_capture(lanes, 3))), width=80)
    assert {m.group(1) for m in CAPTION_UNIT.finditer(text)} == {"µs"}
    event = next(line for line in text.splitlines() if line.startswith("event 0 "))
    assert event.split()[3:5] == ["0.600", "0.600"]  # total and self, 3 x 200 ns


def test_a_summary_line_names_times_in_one_unit():
    lanes = {
        b: {"sm": b, "anchor": 1, "records": [("B", 0, 10), ("E", 0, 100 + 10 * b)]}
        for b in range(40)
    }
    lanes[39]["records"][1] = ("E", 0, 2_001)  # 2000 ns after the anchor at 1
    stats = compute_stats(decode(build_capture(lanes, num_blocks=40)))
    text = format_stats(stats, width=200)
    # 2 µs and 479 ns side by side: both in ns (2 µs is not 10 of them).
    assert "last to finish (from kernel start): SM 39 at 2000 ns, SM 38 at 479 ns," in text


@pytest.mark.parametrize(
    "ns, text",
    [(0, "0 ns"), (999, "999 ns"), (1000, "1.00 µs"), (1_234_567, "1.23 ms"), (2.5e9, "2.50 s")],
)
def test_format_time_picks_the_unit_per_value(ns, text):
    assert format_time(ns) == text


# -- warnings ----------------------------------------------------------------------------------


def test_emulated_trace_says_so():
    stats = compute_stats(decode(tiny_capture(emulated=True)))
    text = format_stats(stats, width=100)
    assert stats.emulated
    assert "emulated trace (CPU interpreter): times are the host clock" in text
    assert "EMULATED" in text
    plain = format_stats(compute_stats(decode(tiny_capture())), width=100)
    assert "emulated" not in plain.lower()


def test_dropped_records_name_worst_lanes_and_the_capacity_to_ask_for():
    recs = [("B", 0, 100 + 10 * i) if i % 2 == 0 else ("E", 0, 100 + 10 * i) for i in range(12)]
    lanes = {
        0: {"sm": 0, "anchor": 50, "records": recs[:4]},
        1: {"sm": 1, "anchor": 50, "records": recs[:4], "attempted": 9},
        2: {"sm": 2, "anchor": 50, "records": recs[:4], "attempted": 30},
    }
    stats = compute_stats(decode(build_capture(lanes, num_blocks=3, capacity=4)))
    assert stats.dropped_total == 5 + 26
    (w,) = [w for w in stats.warnings if "dropped" in w]
    assert w.startswith("31 records dropped in 2 lanes (capacity 4): block 2: 30 records")
    # The worst lane comes first, then the next.
    assert w.index("block 2: 30 records for capacity 4 (26 dropped)") < w.index(
        "block 1: 9 records for capacity 4 (5 dropped)"
    )
    assert w.endswith("Raise max_events_per_group to at least 30")


def test_unmatched_and_uninitialised_lanes_are_reported():
    lanes = {
        0: {"sm": 0, "anchor": 10, "records": [("B", 0, 20), ("B", 1, 30), ("E", 1, 40)]},
        1: {"sm": 1, "anchor": 10, "records": [("E", 1, 20)]},
    }
    names = {0: "load", 1: "store"}
    stats = compute_stats(decode(build_capture(lanes, num_blocks=4, event_names=names)))
    assert (stats.unmatched_begins, stats.unmatched_ends) == (1, 1)
    assert (stats.lanes_initialized, stats.lanes_total) == (2, 4)
    text = format_stats(stats, width=200)
    assert "1 range begins without an end (load x1)" in text
    assert "1 range ends without a begin (store x1)" in text
    assert "2 of 4 lanes were never initialised (blocks 2, 3)" in text


def test_nothing_recorded():
    stats = compute_stats(decode(build_capture({}, num_blocks=2)))
    assert stats.events == [] and len(stats.sms) == 0 and stats.imbalance is None
    text = format_stats(stats, width=100)
    assert "no lane was initialised" in text and "profiler_flush(ctx)" in text
    assert "no events recorded" in text


def test_clean_trace_has_no_warnings():
    assert compute_stats(decode(tiny_capture())).warnings == []


# -- several captures --------------------------------------------------------------------------


def test_several_captures_get_a_section_each():
    first = tiny_capture()
    lanes = {0: {"sm": 5, "anchor": 10_000, "records": [("B", 0, 10_100), ("E", 0, 20_100)]}}
    second = build_capture(lanes, num_blocks=1, event_names={0: "load"}, kernel_name="other")
    stats = compute_stats(decode([first, second]))
    assert [s.label for s in stats.captures] == [
        "capture 0: tiny (2 blocks)",
        "capture 1: other (1 block)",
    ]
    assert stats.event("load").count == 3
    assert stats.captures[0].event("load").count == 2
    assert stats.captures[1].event("load").total_ns == 10_000
    assert stats.captures[1].sms.sm.tolist() == [5]
    assert stats.captures[1].span.duration_ns == 10_100
    assert stats.span.start_ns == 1000 and stats.span.end_ns == 20_100
    text = format_stats(stats, width=100)
    assert text.startswith("sm_profiler stats: all captures (2 captures)\n")
    rules = [line for line in text.splitlines() if line.startswith("-- ")]
    # Section rules fill the width exactly: no ellipsis, nothing cut.
    assert rules == [
        "-- capture 0: tiny (2 blocks) ".ljust(100, "-"),
        "-- capture 1: other (1 block) ".ljust(100, "-"),
    ]
    # Host time between launches is not idle SM time: no combined SM table or imbalance.
    assert stats.imbalance is None and stats.captures[0].imbalance is not None
    combined = text[: text.index("-- capture 0")]
    assert "load imbalance: last SM" not in combined and "busy" not in combined
    assert "SM occupancy and load imbalance: per capture" in combined
    assert text.count("load imbalance: last SM") == 2


def test_many_sms_are_summarized():
    lanes = {
        b: {"sm": b, "anchor": 1, "records": [("B", 0, 10), ("E", 0, 100 + 10 * b)]}
        for b in range(40)
    }
    stats = compute_stats(decode(build_capture(lanes, num_blocks=40)))
    text = format_stats(stats, width=100)
    assert "SMs: 40 · blocks per SM 1..1" in text
    assert "last to finish (from kernel start): SM 39 at 489 ns, SM 38 at 479 ns" in text
    assert "\n 0       1" not in text  # no per-SM rows


# -- numbers against independent computations ---------------------------------------------------


def random_trace(seed: int):
    """A random capture, plus ground truth computed while generating it (not from the decoder).

    Blocks have 1-3 groups on a few SMs; each lane writes sequential ranges, some with a nested
    range inside, and instants.
    """
    rng = np.random.default_rng(seed)
    nb, ng = int(rng.integers(1, 12)), int(rng.integers(1, 4))
    n_sms = int(rng.integers(1, 5))
    n_events = int(rng.integers(1, 5))
    durations: dict[int, list[int]] = {e: [] for e in range(n_events)}
    instants = dict.fromkeys(range(n_events), 0)
    intervals: dict[int, list[tuple[int, int]]] = {}
    blocks: dict[int, set[int]] = {}
    lanes = {}
    base = 1 << 40  # high bits above 32 exercise the decoder's 64-bit rebuild too
    for b in range(nb):
        if rng.random() < 0.15:
            continue  # a block that never ran
        sm = int(rng.integers(0, n_sms))
        start = base + int(rng.integers(0, 5000))
        ends = []
        for g in range(ng):
            anchor = start + int(rng.integers(0, 50))
            t = anchor
            recs = []
            for _ in range(int(rng.integers(0, 6))):
                e = int(rng.integers(0, n_events))
                t += int(rng.integers(0, 300))
                if rng.random() < 0.2:
                    recs.append(("I", e, t))
                    instants[e] += 1
                    continue
                b0 = t
                recs.append(("B", e, t))
                if rng.random() < 0.3:
                    inner = (e + 1) % n_events
                    t += int(rng.integers(0, 100))
                    i0 = t
                    recs.append(("B", inner, t))
                    t += int(rng.integers(0, 100))
                    recs.append(("E", inner, t))
                    durations[inner].append(t - i0)
                t += int(rng.integers(0, 1000))
                recs.append(("E", e, t))
                durations[e].append(t - b0)
            lanes[b * ng + g] = {"sm": sm, "anchor": anchor, "records": recs}
            ends.append((anchor, t))
        lo = min(a for a, _ in ends)
        hi = max(t for _, t in ends)
        intervals.setdefault(sm, []).append((lo, hi))
        blocks.setdefault(sm, set()).add(b)
    cap = build_capture(lanes, num_blocks=nb, num_groups=ng, capacity=24)
    truth = {"durations": durations, "instants": instants, "intervals": intervals, "blocks": blocks}
    return cap, truth


def merged_length(intervals: list[tuple[int, int]]) -> int:
    total, cur_lo, cur_hi = 0, None, None
    for lo, hi in sorted(intervals):
        if cur_hi is None or lo > cur_hi:
            if cur_hi is not None:
                total += cur_hi - cur_lo
            cur_lo, cur_hi = lo, hi
        else:
            cur_hi = max(cur_hi, hi)
    return total + (cur_hi - cur_lo if cur_hi is not None else 0)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_stats_match_independent_computation(seed):
    cap, truth = random_trace(seed)
    trace = decode(cap)
    stats = compute_stats(trace)

    for e, durs in truth["durations"].items():
        n_inst = truth["instants"][e]
        if not durs and not n_inst:
            assert all(s.event != e for s in stats.events)
            continue
        s = next(s for s in stats.events if s.event == e)
        assert (s.count, s.instants) == (len(durs), n_inst)
        if durs:
            d = np.array(durs)
            assert (s.total_ns, s.min_ns, s.max_ns) == (d.sum(), d.min(), d.max())
            assert s.mean_ns == pytest.approx(d.mean())
            for q, got in zip((50, 90, 99), (s.p50_ns, s.p90_ns, s.p99_ns), strict=True):
                assert got == pytest.approx(np.percentile(d, q), rel=1e-12, abs=1e-9)

    sms = sorted(truth["intervals"])
    assert stats.sms.sm.tolist() == sms
    span = stats.span
    if sms:
        all_iv = [iv for s in sms for iv in truth["intervals"][s]]
        assert span.start_ns == min(lo for lo, _ in all_iv)
        assert span.end_ns == max(hi for _, hi in all_iv)
    for i, s in enumerate(sms):
        iv = truth["intervals"][s]
        assert stats.sms.blocks[i] == len(truth["blocks"][s])
        assert stats.sms.busy_ns[i] == merged_length(iv)
        assert stats.sms.first_start_ns[i] == min(lo for lo, _ in iv)
        assert stats.sms.last_end_ns[i] == max(hi for _, hi in iv)
        if span.duration_ns:
            assert stats.sms.busy_pct[i] == pytest.approx(
                100 * merged_length(iv) / span.duration_ns
            )
    if sms:
        ends = np.array([max(hi for _, hi in truth["intervals"][s]) for s in sms], float)
        assert stats.imbalance.excess_ns == pytest.approx(ends.max() - ends.mean(), abs=1e-3)
        assert stats.imbalance.last_sm == sms[int(np.argmax(ends))]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.lists(st.integers(-(10**12), 10**12), min_size=1, max_size=9), min_size=1))
def test_grouped_percentile_equals_numpy(groups):
    values = np.concatenate([np.sort(g) for g in groups]).astype(np.int64)
    counts = np.array([len(g) for g in groups])
    starts = np.cumsum(counts) - counts
    for q in (0, 37.5, 50, 90, 99, 100):
        got = grouped_percentile(values, starts, counts, q)
        want = [np.percentile(np.array(g, np.int64), q) for g in groups]
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-6)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 3), st.integers(0, 10**6), st.integers(0, 10**4)), max_size=30
    )
)
def test_union_length_equals_interval_merge(rows):
    rows = sorted(rows, key=lambda r: (r[0], r[1]))
    g = np.array([r[0] for r in rows], np.int64)
    s = np.array([r[1] for r in rows], np.int64)
    e = s + np.array([r[2] for r in rows], np.int64)
    got = union_length(g, s, e, 4)
    for k in range(4):
        want = merged_length([(lo, lo + d) for grp, lo, d in rows if grp == k])
        assert got[k] == want


# -- self time, waits, breakdowns --------------------------------------------------------------


def test_breakdowns_by_group_sm_and_launch():
    from sm_profiler.report.stats import breakdown

    trace = nested_trace()
    by_group = {
        (r.key, r.event): (r.count, r.total_ns, r.self_ns) for r in breakdown(trace, "group")
    }
    assert by_group[("producer", "load")] == (2, 30, 30)
    assert by_group[("consumer", "mma")] == (2, 50, 50)
    assert by_group[("producer", "tile")] == (1, 100, 55)
    by_sm = {(r.key, r.event): r.count for r in breakdown(trace, "sm")}
    assert by_sm[("SM 5", "load")] == 1 and by_sm[("SM 6", "load")] == 1
    assert {r.key for r in breakdown(trace, "launch")} == {"k"}
    with pytest.raises(ValueError, match="group, sm, launch"):
        breakdown(trace, "warp")
    st = compute_stats(trace)
    assert st.by_group == breakdown(trace, "group")
    text = format_stats(st, width=80)
    assert "by group (times in ns; self: total less the ranges nested inside)" in text
    assert "waits: gaps" in text
    assert max(len(line) for line in text.splitlines()) <= 80


# -- hostile input (issues 15, 23): far-apart blocks, names that need escaping --------------------


@pytest.mark.parametrize("gap", [2**61, 2**62, 2**63 - 1000])
def test_4_stats_of_blocks_far_apart_on_one_sm(gap):
    s = Stream(2, 1, 4)
    s.lanes[(0, 0)] = Lane(100, 1, [(BEGIN, 0, 108), (END, 0, 200)])
    s.lanes[(1, 0)] = Lane(gap + 100, 1, [(BEGIN, 0, gap + 108), (END, 0, gap + 300)])
    st = compute_stats(decode(Capture(encode(s))))
    assert st.sms.busy_ns.tolist() == [100 + 200]
    assert st.span.duration_ns == gap + 200


def test_16_stats_escapes_call_sites_grids_and_slots(tmp_path, capsys):
    from sm_profiler.cli import main
    from sm_profiler.wire.capture import save_many

    evil = "\x1b]0;pwned\x07\x1b[2J"
    meta = {"call_site": evil, "grid": [evil, 1], "slots": evil, "launches_without_slot": 2}
    caps = [kernel_capture(name="k", metadata=meta) for _ in range(2)]
    save_many(caps, tmp_path / "c.smp")
    assert main(["stats", str(tmp_path / "c.smp"), "--width", "200"]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out
    assert "\\x1b]0;pwned" in out


# -- the first hour, round 2 (issue 32) ----------------------------------------------------------


def _relaunched(metadata: dict | None = None) -> Stats:
    caps = [kernel_capture(name="k", metadata=dict(metadata or {})) for _ in range(2)]
    return compute_stats(decode(caps))


def test_6_the_launches_table_has_no_column_of_dashes():
    """Snapshots of an unslotted profiler carry no grid or call site: the columns go."""
    text = format_stats(_relaunched(), width=100)
    table = text[text.index("launches by kernel") :].split("\n\n")[0].splitlines()
    assert table[1].split() == ["kernel", "launches", "mean", "min", "max"]
    labelled = format_stats(_relaunched({"grid": [4, 1, 1], "call_site": "a.py:3 (f)"}), 100)
    table = labelled[labelled.index("launches by kernel") :].splitlines()
    assert table[1].split()[-3:] == ["grid", "call", "site"]
    assert table[2].split()[-3:] == ["4x1x1", "a.py:3", "(f)"]


def test_6_the_self_column_is_explained_where_it_differs_from_total():
    text = format_stats(compute_stats(nested_trace()), width=100)
    assert "events (times in ns; self: total less the ranges nested inside)\n" in text
    # Nothing nested: self is total, nothing to explain (the exact tiny report has no note).
    assert "self:" not in TINY_REPORT


def test_6_the_overview_without_the_sections_per_capture():
    stats = compute_stats(decode([tiny_capture(), tiny_capture()]))
    full = format_stats(stats, width=80)
    short = format_stats(stats, width=80, sections=False)
    assert full.startswith(short.rstrip("\n"))
    assert "-- capture 0" in full and "-- capture" not in short
    assert "per capture, below" not in short and short.endswith("\n\n") is False


def test_8_launches_that_miss_the_same_lanes_share_one_warning():
    """Issue 32, item 8: five launches of a kernel with a smaller grid warned five times."""
    lanes = {0: {"sm": 1, "anchor": 1000, "records": [("B", 0, 1100), ("E", 0, 1200)]}}
    caps = [build_capture(lanes, num_blocks=2, event_names={0: "w"}, kernel_name="k")] * 3
    caps.append(build_capture(lanes, num_blocks=3, event_names={0: "w"}, kernel_name="k"))
    warns = [w for w in compute_stats(decode(caps)).warnings if "never initialised" in w]
    assert warns == [
        "captures 0, 1, 2 (k): 1 of 2 lanes were never initialised (blocks 1): the grid is "
        "smaller than num_blocks x num_groups, or some blocks or groups skip profiler_init",
        "capture 3 (k): 2 of 3 lanes were never initialised (blocks 1, 2): the grid is "
        "smaller than num_blocks x num_groups, or some blocks or groups skip profiler_init",
    ]
