"""`sm-profiler query DIR` (issue 57, item 4): SQL across a job's ranks from Parquet written once
per rank file (export/auto_query.py), answers equal to numpy's from the records, the cache
reused and written again when a rank file changes, and hostile folders in one line each."""

from __future__ import annotations

import os
import shutil

import numpy as np
import pytest
from cli_runs import run_cli
from extras import need
from query_inputs import JOB, job_folder, rank_table, wide_rank_table

from sm_profiler.export import auto_query
from sm_profiler.report.tables import TABLES

ADD = "triton_poi_fused_add_0"
SLOWEST = f"""select rank, step, end_ns - start_ns as launch_ns from launches
where kernel = '{ADD}' order by launch_ns desc, rank limit 10"""
STEP_TIMES = """select rank, step, max(span_ns) as step_ns from (
  select rank, gpu, step, max(end_ns) - min(start_ns) as span_ns
  from launches where step >= 0 group by all) group by all order by rank, step"""


@pytest.fixture(autouse=True)
def _query_extra():
    need("duckdb", "query")
    need("pyarrow", "query")


def _launches(tables: dict) -> dict[str, np.ndarray]:
    """Every rank's launches as numpy columns: rank, kernel name, step, start, end."""
    cols = {k: [] for k in ("rank", "kernel", "step", "start_ns", "end_ns")}
    for r, t in tables.items():
        L = t.launches
        names = np.array(t.kernel_names(), object)
        cols["rank"].append(np.full(t.num_launches, r))
        cols["kernel"].append(names[L["kernel"]])
        for k in ("step", "start_ns", "end_ns"):
            cols[k].append(L[k].astype(np.int64))
    return {k: np.concatenate(v) for k, v in cols.items()}


def _slowest(tables: dict, kernel: str, n: int) -> list[tuple]:
    L = _launches(tables)
    mine = L["kernel"] == kernel
    dur = (L["end_ns"] - L["start_ns"])[mine]
    rows = sorted(
        zip(L["rank"][mine], L["step"][mine], dur, strict=True), key=lambda r: (-r[2], r[0])
    )
    return [tuple(int(v) for v in r) for r in rows[:n]]


def _step_times(tables: dict) -> list[tuple]:
    """(rank, step, its first launch's start to its last launch's end) from the records."""
    L = _launches(tables)
    out = []
    for r in np.unique(L["rank"]):
        for s in np.unique(L["step"][L["rank"] == r]):
            mine = (L["rank"] == r) & (L["step"] == s)
            out.append((int(r), int(s), int(L["end_ns"][mine].max() - L["start_ns"][mine].min())))
    return out


@pytest.mark.parametrize("t0_ns", [0, 10**12, 1_700_000_000 * 10**9])
def test_4_cross_rank_answers_equal_numpy_at_any_clock_origin(tmp_path, t0_ns):
    """The 10 slowest launches of one kernel in the job and each rank's step time, as SQL over
    the folder, are what numpy computes from the ranks' records; the slow rank's launches lead.
    On main the events had no rank (one merged table held every rank's records at once)."""
    tables = job_folder(tmp_path, ranks=5, slow_rank=3, t0_ns=t0_ns)
    names, rows, notes = auto_query.query_job(str(tmp_path), SLOWEST)
    assert names == ["rank", "step", "launch_ns"] and notes == []
    assert rows == _slowest(tables, ADD, 10)
    assert {r[0] for r in rows[:3]} == {3}  # the slow rank's three steps
    assert auto_query.query_job(str(tmp_path), STEP_TIMES)[1] == _step_times(tables)
    per_rank = "select rank, count(*), sum(duration_ns) from events group by rank order by 1"
    want = [
        (r, t.num_rows, int((t.rows["end_ns"] - t.rows["start_ns"].astype(np.int64)).sum()))
        for r, t in tables.items()
    ]
    assert auto_query.query_job(str(tmp_path), per_rank)[1] == want
    # A launch's programs join it by (rank, capture), whatever the clock's origin.
    joined = """select l.rank, l.capture, count(*) from events e join launches l
        using (rank, capture) where e.start_ns < l.start_ns or e.end_ns > l.end_ns group by all"""
    assert auto_query.query_job(str(tmp_path), joined)[1] == []


def test_4_query_dir_on_the_command_line_prints_every_rank(tmp_path):
    tables = job_folder(tmp_path, ranks=3, slow_rank=1)
    r = run_cli("query", tmp_path, "select rank, count(*) as n from events group by 1 order by 1")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["rank", "n"] + [
        str(v) for rank, t in tables.items() for v in (rank, t.num_rows)
    ]
    assert r.stderr == ""
    # every table of every rank is in the cache beside the rank files
    cache = tmp_path / auto_query.CACHE_NAME
    assert sorted(os.listdir(cache)) == sorted([*TABLES, "rank0.json", "rank1.json", "rank2.json"])


def _entry_times(cache) -> dict[str, int]:
    return {
        str(p.relative_to(cache)): p.stat().st_mtime_ns for p in cache.rglob("*") if p.is_file()
    }


def test_4_the_cache_is_reused_and_written_again_when_a_rank_file_changes(tmp_path):
    tables = job_folder(tmp_path, ranks=3, slow_rank=1)
    cache = tmp_path / auto_query.CACHE_NAME
    assert auto_query.query_job(str(tmp_path), SLOWEST)[1] == _slowest(tables, ADD, 10)
    first = _entry_times(cache)
    assert len(first) == 3 * (len(TABLES) + 1)
    auto_query.query_job(str(tmp_path), SLOWEST)
    assert _entry_times(cache) == first  # reused: nothing written
    # Rank 0 recorded again, slow now: its entries (and only they) are written again.
    tables[0] = rank_table(0, 1_700_000_000 * 10**9, slow=True)
    path = tmp_path / "auto.rank0.npz"
    tables[0].save(path)
    os.utime(path, ns=(1, first["rank0.json"] + 1))  # a new mtime, even on a coarse clock
    assert auto_query.query_job(str(tmp_path), SLOWEST)[1] == _slowest(tables, ADD, 10)
    again = _entry_times(cache)
    changed = {k for k in first if again[k] != first[k]}
    assert changed == {"rank0.json"} | {f"{t}/rank0.parquet" for t in TABLES}
    # A key that does not match (an older cache's version) is written again too.
    key = cache / "rank2.json"
    key.write_text(key.read_text().replace('"version": 1', '"version": 0'))
    auto_query.query_job(str(tmp_path), SLOWEST)
    assert (cache / "rank2.json").read_text().count('"version": 1') == 1
    # So is a rank whose Parquet changed after it was written (cut short here).
    events = cache / "events" / "rank1.parquet"
    events.write_bytes(events.read_bytes()[:100])
    assert auto_query.query_job(str(tmp_path), SLOWEST)[1] == _slowest(tables, ADD, 10)
    assert events.stat().st_size > 100


def test_4_ranks_written_by_several_processes_answer_alike(tmp_path):
    """Where many ranks are stale, processes of their own (one per core, as many as
    --memory-mb holds) write them: the same answers; a rank that fails is named."""
    from sm_profiler.errors import CaptureError

    tables = job_folder(tmp_path, ranks=8, slow_rank=5)
    assert auto_query.query_job(str(tmp_path), SLOWEST, workers=2)[1] == _slowest(tables, ADD, 10)
    assert auto_query.query_job(str(tmp_path), STEP_TIMES)[1] == _step_times(tables)
    # A damaged rank among them: the first failure in the ranks' order, as one process says it.
    for r in (3, 6):
        (tmp_path / f"auto.rank{r}.npz").write_bytes(b"PK\x03\x04 cut short")
    shutil.rmtree(tmp_path / auto_query.CACHE_NAME)  # every rank stale: two processes
    with pytest.raises(CaptureError, match=r"auto\.rank3\.npz' is not a readable"):
        auto_query.query_job(str(tmp_path), "select 1", workers=2)
    assert auto_query.writers(2048) == min(auto_query.usable_cores(), 8)
    assert auto_query.writers(64) == 1


def test_4_query_file_reads_the_file_alone_and_writes_nothing(tmp_path):
    job_folder(tmp_path, ranks=2, slow_rank=1)
    path = tmp_path / "auto.rank1.npz"
    r = run_cli("query", path, "select count(*) as n from events")
    assert r.returncode == 0 and r.stdout.split() == ["n", "54"], r.stderr
    assert sorted(os.listdir(tmp_path)) == ["auto.rank0.npz", "auto.rank1.npz"]
    r = run_cli("query", path, "select 1", "--memory-mb", "512")
    assert r.returncode == 2 and "--memory-mb is for a run's folder" in r.stderr


@pytest.mark.parametrize(
    "sql",
    [
        "copy (select 1 as a) to '{target}'",
        "copy (select 1 as a) to '{target}' (use_tmp_file false)",
        "create table t as select 1",
        "select * from read_blob('{folder}/auto.rank0.npz')",
        "select * from read_text('{folder}/secret.txt')",
        "set enable_external_access = true",
    ],
)
def test_4_a_query_reads_the_ranks_tables_only(tmp_path, sql):
    """The SQL of a folder's query reads its Parquet and nothing else, as a file's query reads
    its tables: DuckDB may open the cache's files, so no statement but a read runs (a COPY
    over a rank's Parquet would change what later queries read)."""
    from sm_profiler.errors import ConfigError

    job_folder(tmp_path, ranks=2, slow_rank=1)
    (tmp_path / "secret.txt").write_text("password\n")
    auto_query.query_job(str(tmp_path), "select 1")
    target = tmp_path / auto_query.CACHE_NAME / "events" / "rank0.parquet"
    before = target.read_bytes()
    with pytest.raises(ConfigError, match="query failed"):
        auto_query.query_job(str(tmp_path), sql.format(target=target, folder=tmp_path))
    assert target.read_bytes() == before
    assert auto_query.query_job(str(tmp_path), "select count(*) from events")[1] == [(108,)]


def _peak_mib(folder, sql: str) -> float:
    """The peak resident memory of `sm-profiler query FOLDER SQL` in a process of its own, or of
    the largest of the processes it started to write the Parquet."""
    import subprocess
    import sys

    code = (
        "import resource as r, sys; from sm_profiler.cli import main; "
        "assert main(['query', sys.argv[1], sys.argv[2]]) == 0; "
        "print(max(r.getrusage(w).ru_maxrss for w in (r.RUSAGE_SELF, r.RUSAGE_CHILDREN)))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(folder), sql], check=True, capture_output=True, text=True
    ).stdout
    return int(out.splitlines()[-1]) / 1024


def test_4_memory_stays_flat_as_ranks_grow(tmp_path):
    """Ranks of 150,000 programs each: the Parquet written one rank at a time, then SQL over all
    of them, in the memory of two ranks. On main, `query DIR` joined every rank's records into
    one table: 10 ranks took 175 MiB more than 2."""
    few, many = tmp_path / "few", tmp_path / "many"
    few.mkdir()
    many.mkdir()
    for r in range(10):
        wide_rank_table(r, 150_000, slow=r == 7).save(many / f"auto.rank{r}.npz")
        if r < 2:
            os.link(many / f"auto.rank{r}.npz", few / f"auto.rank{r}.npz")
    busiest = "select sm, sum(duration_ns) as busy from events group by all order by 2 desc"
    for what in ("writing the Parquet", "reading it"):
        small, big = _peak_mib(few, busiest), _peak_mib(many, busiest)
        assert big - small < 40, (what, small, big)


# -- hostile folders: one line each (issue 57, item 4) -----------------------------------------


def test_4_a_missing_rank_is_noted_and_the_others_answer(tmp_path):
    tables = job_folder(tmp_path, ranks=5, slow_rank=1)
    for r in (2, 4):
        os.remove(tmp_path / f"auto.rank{r}.npz")
        del tables[r]
    r = run_cli("query", tmp_path, STEP_TIMES)
    assert r.returncode == 0, r.stderr
    assert r.stderr.splitlines() == [
        "note: 2 ranks of the job's 5 have no file here (2, 4): the tables hold the other 3"
    ]
    got = [tuple(int(v) for v in line.split()) for line in r.stdout.splitlines()[1:]]
    assert got == _step_times(tables)


def _one_line_error(r, *words):
    assert r.returncode == 2, (r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    for w in words:
        assert w in lines[0], lines[0]


def test_4_a_folder_of_no_rank_files(tmp_path):
    (tmp_path / "notes.txt").write_text("hello\n")
    _one_line_error(run_cli("query", tmp_path, "select 1"), "holds no auto.rank*.npz")
    assert sorted(os.listdir(tmp_path)) == ["notes.txt"]


def test_4_an_unreadable_rank_file_is_named(tmp_path):
    job_folder(tmp_path, ranks=3, slow_rank=1)
    (tmp_path / "auto.rank1.npz").write_bytes(b"PK\x03\x04 cut short")
    _one_line_error(run_cli("query", tmp_path, "select 1"), "auto.rank1.npz", "not a readable")


def test_4_a_capture_file_among_rank_files_is_named(tmp_path):
    from captures import kernel_capture

    from sm_profiler.wire.capture import save_many

    job_folder(tmp_path, ranks=2, slow_rank=1)
    save_many([kernel_capture()], tmp_path / "auto.rank1.npz")
    _one_line_error(run_cli("query", tmp_path, "select 1"), "auto.rank1.npz", "not an auto-mode")


def test_4_a_rank_file_of_another_rank_is_named(tmp_path):
    job_folder(tmp_path, ranks=2, slow_rank=1)
    rank_table(5, 10**12).save(tmp_path / "auto.rank1.npz")
    _one_line_error(
        run_cli("query", tmp_path, "select 1"), "auto.rank1.npz holds the recording of rank 5"
    )


def test_4_files_of_several_runs_are_refused_before_anything_is_written(tmp_path):
    job_folder(tmp_path, ranks=3, slow_rank=1)
    other = rank_table(2, 10**12, job={**JOB, "run_id": "job-58"})
    other.save(tmp_path / "auto.rank2.npz")
    _one_line_error(run_cli("query", tmp_path, "select 1"), "of 2 runs, not one", "job-58")
    assert not (tmp_path / auto_query.CACHE_NAME / "rank0.json").exists()


@pytest.mark.parametrize("why", ["a file in its place", "a read-only folder"])
def test_4_a_folder_the_cache_cannot_go_beside_uses_a_temporary_one(tmp_path, why):
    folder = tmp_path / "run"
    tables = job_folder(folder, ranks=2, slow_rank=1)
    if why == "a file in its place":
        (folder / auto_query.CACHE_NAME).write_text("mine\n")
    else:
        if os.geteuid() == 0:
            pytest.skip("root can write anywhere")
        folder.chmod(0o555)
    env_tmp = tmp_path / "tmp"
    env_tmp.mkdir()
    try:
        r = run_cli("query", folder, SLOWEST, env={"TMPDIR": str(env_tmp)})
    finally:
        folder.chmod(0o755)
    assert r.returncode == 0, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("note: cannot write the Parquet cache"), lines
    assert str(env_tmp) in lines[0] and "--cache DIR" in lines[0]
    assert len(r.stdout.splitlines()) == 1 + len(_slowest(tables, ADD, 10))
    # --cache puts it where it is told
    mine = tmp_path / "mine"
    r = run_cli("query", folder, "select count(*) from launches", "--cache", mine)
    assert r.returncode == 0 and r.stderr == "" and (mine / "rank1.json").is_file(), r.stderr


def test_4_a_cache_that_cannot_be_written_is_one_line(tmp_path):
    job_folder(tmp_path / "run", ranks=2, slow_rank=1)
    (tmp_path / "file").write_text("x\n")
    r = run_cli("query", tmp_path / "run", "select 1", "--cache", tmp_path / "file" / "sub")
    _one_line_error(r, "cannot write the Parquet cache", "--cache DIR")


def test_4_a_query_past_its_memory_says_how_to_give_more(tmp_path):
    job_folder(tmp_path, ranks=2, slow_rank=1)
    big = "select string_agg(repeat('x', 100000) || rank::varchar, ',') from range(2000), events"
    r = run_cli("query", tmp_path, big, "--memory-mb", "64")
    _one_line_error(r, "Out of Memory", "--memory-mb 64: give more")


@pytest.mark.parametrize("value", ["63", "0", "-1", "1e3", "99999999999999999999"])
def test_4_a_memory_bound_duckdb_cannot_take_is_one_line(value, capsys):
    from sm_profiler.cli import main

    with pytest.raises(SystemExit) as e:
        main(["query", "DIR", "select 1", f"--memory-mb={value}"])
    err = capsys.readouterr().err.strip().splitlines()
    assert e.value.code == 2 and err[-1].endswith(
        f"argument --memory-mb: '{value}': give DuckDB's memory in MiB, 64 to 2**30"
    ), err
