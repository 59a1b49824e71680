"""The job's trace of `merge DIR` (sm_profiler/export/job_trace.py; issue 57, item 3): the ranks
that matter drawn in full, every other rank as its GPUs' busy SMs per bin, within a size budget,
saying what it left out and how to draw it; read a rank at a time."""

from __future__ import annotations

import os
import weakref

import numpy as np
import pytest
from auto_inputs import AUTO_T0, job_folder, table_of

from sm_profiler.cli import main
from sm_profiler.export import auto_job as jobs
from sm_profiler.export import job_trace
from sm_profiler.trace.summary import busy_sms_binned, union_segments
from sm_profiler.wire.capture import load

pytestmark = pytest.mark.skipif(
    not __import__("trace_readers").has_perfetto(), reason="needs Perfetto's protos (test extra)"
)
T0S = [0, 10**12, 1_700_000_000_000_000_000]


def _merge(folder, *args) -> int:
    return main(["merge", str(folder), *map(str, args)])


def _read(folder):
    from trace_readers import read_trace

    return read_trace((folder / jobs.MERGED_TRACE).read_bytes())


def _drawn(r) -> set[str]:
    """The ranks ('GPU 3') whose SMs have tracks in a job's trace read back."""
    return {d.name.split(" · ")[0] for d in r.top_level() if " · SM " in d.name}


def _busy_naive(table, lo: int, hi: int, edges: np.ndarray) -> np.ndarray:
    """Mean busy SMs over each bin [lo + edges[k], lo + edges[k + 1]) of one GPU's programs,
    the slow, obvious way: each SM's programs merged into busy spans, each span's overlap with
    each bin summed."""
    rows = table.rows
    out = np.zeros(len(edges) - 1)
    for sm in np.unique(rows["sm"]).tolist():
        spans = []
        m = rows["sm"] == sm
        for s, e in sorted(
            zip(rows["start_ns"][m].tolist(), rows["end_ns"][m].tolist(), strict=True)
        ):
            if spans and s <= spans[-1][1]:
                spans[-1][1] = max(spans[-1][1], e)
            else:
                spans.append([s, e])
        for k in range(len(edges) - 1):
            a, b = lo + int(edges[k]), lo + int(edges[k + 1])
            out[k] += sum(max(0, min(e, b) - max(s, a)) for s, e in spans) / max(b - a, 1)
    return out


def test_union_segments_join_what_overlaps_or_touches_per_group():
    g = np.array([0, 0, 0, 1, 1, 0])
    s = np.array([0, 5, 10, 0, 3, 2])
    e = np.array([4, 8, 12, 2, 4, 6])
    key, lo, hi = union_segments(g, s, e)
    assert list(zip(key.tolist(), lo.tolist(), hi.tolist(), strict=True)) == [
        (0, 0, 8), (0, 10, 12), (1, 0, 2), (1, 3, 4)
    ]  # fmt: skip
    # A span past what int64 lifts: a group at a time, the same segments.
    big = np.array([0, 2**62, 2**62 + 5])
    key, lo, hi = union_segments(np.array([0, 1, 1]), big, big + 10)
    assert hi.tolist() == [10, 2**62 + 15]


def test_busy_sms_count_an_sm_once_however_many_programs_it_runs():
    # SM 0 runs two programs at once, SM 1 one: 2 SMs busy over [0, 50), then 1.
    r = busy_sms_binned(
        np.zeros(3, np.int64), np.array([0, 0, 1]), np.array([0, 0, 0]), np.array([100, 100, 50]),
        1, 0, 100, 4,
    )  # fmt: skip
    assert r["time_ns"].tolist() == [0, 50, 100] and r["value"].tolist() == [2.0, 1.0, 0.0]


@pytest.mark.parametrize("t0", T0S)
def test_the_slow_fastest_and_median_ranks_in_full_the_others_as_counters(tmp_path, capsys, t0):
    """Issue 57, item 3: twelve ranks, rank 7 slow, merged under a budget of 0.2 MB (all twelve
    in full would be about 50 kB, so the budget is not what leaves them out): ranks 7 (slowest),
    0 (fastest) and 5 (median) are drawn in full, SM by SM; every other rank is one 'busy SMs'
    counter under one track, whose values are the records' busy SMs per bin, at any clock
    origin. Before: every rank in full, whatever their number."""
    job_folder(tmp_path, t0=t0)
    assert _merge(tmp_path, "--max-mb", 0.2) == 0
    text = capsys.readouterr().out
    assert "in full: rank 7 (slowest" in text and "rank 0 (fastest" in text
    assert "rank 5 (median)" in text and "9 ranks (1-4, 6, 8-11)" in text
    assert f"sm-profiler merge {tmp_path} --ranks 1,2" in text and "--all-ranks --max-mb" in text
    r = _read(tmp_path)
    roots = [d.name for d in r.top_level() if " · SM " not in d.name]
    assert [n.split(" · ")[0] for n in roots] == ["GPU 0", "GPU 5", "GPU 7", "other ranks"]
    assert _drawn(r) == {"GPU 0", "GPU 5", "GPU 7"}
    (group,) = [d for d in r.top_level() if d.name == job_trace.COUNTER_GROUP]
    assert "to draw others in full: sm-profiler merge" in group.description
    counters = sorted(
        (d for d in r.tracks.values() if d.parent_uuid == group.uuid),
        key=lambda d: d.sibling_order_rank,
    )
    others = [1, 2, 3, 4, 6, 8, 9, 10, 11]
    assert [d.name for d in counters] == [f"GPU {k} · busy SMs" for k in others]
    # The bins: equal parts of the job's span on the host clock, from its first program.
    tables = {k: load(tmp_path / f"auto.rank{k}.npz").on_host_clock() for k in range(12)}
    lo = min(int(t.rows["start_ns"].min()) for t in tables.values())
    hi = max(int(t.rows["end_ns"].max()) for t in tables.values())
    assert r.origin == lo
    bins = int(group.description.split(" bins of ")[0].rsplit(" ", 1)[1].replace(",", ""))
    edges = (hi - lo) * np.arange(bins + 1) // bins
    for k, d in zip(others, counters, strict=True):
        times, values = (np.array(x) for x in zip(*r.counters[d.uuid], strict=True))
        assert times[-1] == hi and values[-1] == 0  # the last bin's end
        # A counter holds its value until the next sample: its value at each bin's start.
        shown = values[np.searchsorted(times, lo + edges[:-1], side="right") - 1]
        assert np.allclose(shown, _busy_naive(tables[k], lo, hi, edges), rtol=1e-12, atol=1e-9)
        assert values.max() == 4  # every SM busy at some time: the counter is not all zero


def test_ranks_picks_the_ranks_drawn_in_full_and_all_ranks_every_one(tmp_path, capsys):
    job_folder(tmp_path, ranks=5, slow=2)
    assert _merge(tmp_path, "--ranks", "3,1") == 0
    assert "in full: rank 1 (asked for), rank 3 (asked for)" in capsys.readouterr().out
    assert _drawn(_read(tmp_path)) == {"GPU 1", "GPU 3"}
    assert _merge(tmp_path, "--all-ranks") == 0
    out = capsys.readouterr().out
    assert "as busy-SM counters" not in out
    r = _read(tmp_path)
    assert _drawn(r) == {f"GPU {k}" for k in range(5)}
    assert not [d for d in r.top_level() if d.name == job_trace.COUNTER_GROUP]


def test_a_job_of_three_ranks_or_fewer_is_drawn_whole_as_before(tmp_path):
    # Slowest, fastest and median are every rank: the same tracks as the old merge of them.
    job_folder(tmp_path, ranks=3, slow=1)
    assert _merge(tmp_path) == 0
    new = _read(tmp_path)
    from sm_profiler.export.merge import merge_ranks

    old_path = tmp_path / "old.perfetto-trace"
    merge_ranks([load(tmp_path / f"auto.rank{k}.npz") for k in range(3)], old_path)
    from trace_readers import read_trace

    old = read_trace(old_path.read_bytes())
    assert sorted(d.name for d in new.tracks.values()) == sorted(
        d.name for d in old.tracks.values()
    )
    assert sorted(map(sorted, new.slices.values())) == sorted(map(sorted, old.slices.values()))


def test_ranks_are_read_one_at_a_time(tmp_path, monkeypatch):
    """Issue 57, item 3: merge DIR held every rank's table at once (3.3 GB at 128 ranks); the
    job's trace holds one rank's at a time, whatever the number of ranks."""
    from sm_profiler.wire import capture

    job_folder(tmp_path)
    monkeypatch.setattr(job_trace, "POOL_MIN_RANKS", 10**9)  # here, where it is counted
    alive, most, real = set(), [0], capture.load

    def counted(path):
        t = real(path)
        alive.add(id(t))
        weakref.finalize(t, alive.discard, id(t))
        most[0] = max(most[0], len(alive))
        return t

    monkeypatch.setattr(capture, "load", counted)
    assert _merge(tmp_path) == 0
    assert most[0] == 1


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="one core: the passes run here")
def test_the_pool_of_processes_writes_the_same_trace(tmp_path, monkeypatch):
    # In a process of its own, which runs no thread but its own, twelve ranks on two cores or
    # more: the passes run on a pool of forked processes; here, one after another.
    from cli_runs import run_cli

    job_folder(tmp_path)
    out = tmp_path / "job.perfetto-trace"
    r = run_cli("merge", tmp_path, "-o", out)
    assert r.returncode == 0, r.stderr
    pooled = out.read_bytes()
    monkeypatch.setattr(job_trace, "POOL_MIN_RANKS", 10**9)
    assert _merge(tmp_path, "-o", out) == 0
    assert out.read_bytes() == pooled


def test_the_advisor_names_the_rank_where_its_first_findings_are_largest():
    findings = [
        (0, "tail", "gemm", 100.0),
        (3, "tail", "gemm", 300.0),  # the tail of gemm is largest on rank 3
        (1, "host_gaps", None, 200.0),
        (2, "idle_sms", "add", 5.0),  # the fourth finding: not named
        (4, "partial_wave", "gemm", 10.0),
    ]
    named = job_trace.advised_ranks(findings, top=3)
    assert list(named) == [3, 1, 4]
    assert named[3].startswith("advisor: tail of gemm")
    times = {r: float(r) for r in range(9)}  # rank 8 slowest, 0 fastest, 4 the median
    chosen = job_trace.choose_ranks(times, {3: "advisor: tail of gemm"})
    assert chosen == {8: ["slowest"], 0: ["fastest"], 4: ["median"], 3: ["advisor: tail of gemm"]}


def test_rank_time_is_per_step_over_the_steps_every_rank_recorded(tmp_path):
    # Rank 1 recorded step 1 only: the ranks are compared over step 1 (rank 0's 900 ns), not
    # over their whole recordings (rank 0's 1,000 ns).
    a = table_of(
        [(AUTO_T0, 100, 0, 1, 1, 0, 0, 0), (AUTO_T0 + 500, 900, 0, 2, 1, 0, 0, 0)],
        labels={1: (1, 0), 2: (2, 0)},
        session={"step_tags": {"1": 0, "2": 1}},
    )
    b = table_of([(AUTO_T0, 300, 0, 2, 1, 0, 0, 0)], labels={2: (2, 0)},
                 session={"rank": 1, "step_tags": {"1": 0, "2": 1}})  # fmt: skip
    a.save(tmp_path / "a.npz")
    b.save(tmp_path / "b.npz")
    facts = [job_trace.rank_facts(str(tmp_path / f"{x}.npz"), advised=False) for x in "ab"]
    times, what = job_trace.rank_times(facts)
    assert times == {0: 900.0, 1: 300.0} and "over the 1 step every rank recorded" in what


def test_the_first_rank_of_a_run_writes_the_jobs_trace_so_too(tmp_path, monkeypatch, capsys):
    """Issue 57, item 3: at the end of `sm-profiler run` under torchrun, the first rank merged
    every rank in full; it writes the job's trace as `merge DIR` does."""
    from auto_inputs import TableRegion

    from sm_profiler.auto_mode import script

    out, alone = tmp_path / "prof", tmp_path / "rank0"
    out.mkdir()
    alone.mkdir()
    job_folder(out, ranks=6, slow=4, skip=(0,))  # ranks 1-5 wrote theirs
    job_folder(alone, ranks=6, slow=4, skip=(1, 2, 3, 4, 5))
    env = {"TORCHELASTIC_RUN_ID": "job57", "TORCHELASTIC_RESTART_COUNT": "0"}
    env.update(MASTER_ADDR="m", MASTER_PORT="29500", SM_PROFILER_MERGE_TIMEOUT_S="1")
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    region = TableRegion(load(alone / "auto.rank0.npz"))
    script.write_rank_outputs(region, str(out), 100, jobs.Job(0, 6, 0, 6), list(range(6)))
    assert "merged 6 of 6 ranks" in capsys.readouterr().out
    r = _read(out)
    assert _drawn(r) == {"GPU 0", "GPU 2", "GPU 4"}  # fastest, median, slowest
    (group,) = [d for d in r.top_level() if d.name == job_trace.COUNTER_GROUP]
    names = [d.name for d in r.tracks.values() if d.parent_uuid == group.uuid]
    assert sorted(names) == [f"GPU {k} · busy SMs" for k in (1, 3, 5)]
