"""TraceData.to_pandas() / to_arrow() and SQL through DuckDB, against a hand-built trace."""

from __future__ import annotations

import pytest
from captures import kernel_capture, nested_trace
from extras import need

from sm_profiler.cli import main
from sm_profiler.errors import ConfigError, MissingDependencyError
from sm_profiler.report.tables import TABLES, columns, query
from sm_profiler.trace.decode import decode


def test_columns_of_every_table():
    trace = nested_trace()
    for t in TABLES:
        cols = columns(trace, t)
        lens = {len(v[0]) if isinstance(v, tuple) else len(v) for v in cols.values()}
        assert len(lens) <= 1
    with pytest.raises(ConfigError, match="tables: events, lanes, launches, unmatched"):
        columns(trace, "slices")


def test_pandas_events_have_names_durations_and_self_time():
    pd = need("pandas", "query")
    df = nested_trace().to_pandas()
    assert list(df.columns) == [
        "capture",
        "lane",
        "sm",
        "block",
        "group",
        "event",
        "name",
        "kind",
        "start_ns",
        "end_ns",
        "duration_ns",
        "self_ns",
    ]
    assert isinstance(df["name"].dtype, pd.CategoricalDtype)
    tile = df[df["name"] == "tile"].iloc[0]
    assert (tile["duration_ns"], tile["self_ns"], tile["kind"]) == (100, 55, "range")
    assert (df["kind"] == "instant").sum() == 1
    lanes = nested_trace().to_pandas("lanes")
    assert lanes["group_name"].tolist() == ["producer", "consumer", "producer", "consumer"]


def test_arrow_launches_and_unmatched():
    pa = need("pyarrow", "query")
    trace = nested_trace()
    t = trace.to_arrow("launches")
    assert isinstance(t, pa.Table) and t.column("name").to_pylist() == ["k"]
    assert t.column("end_ns")[0].as_py() - t.column("start_ns")[0].as_py() == 130
    assert trace.to_arrow("unmatched").num_rows == 0


def test_sql_answers_what_the_stats_do_not():
    need("duckdb", "query")
    need("pyarrow", "query")
    trace = nested_trace()
    names, rows = query(
        trace,
        "select name, count(*) as n, sum(self_ns) as self from events "
        "where kind = 'range' group by name order by name",
    )
    assert names == ["name", "n", "self"]
    assert rows == [("load", 2, 30), ("mma", 3, 75), ("store", 1, 20), ("tile", 1, 55)]
    # A join: ranges per group name.
    _, rows = query(
        trace,
        "select l.group_name, count(*) from events e join lanes l "
        "using (capture, lane) group by 1 order by 1",
    )
    assert rows == [("consumer", 2), ("producer", 6)]  # 4 ranges + 1 instant, and 1 range
    with pytest.raises(ConfigError, match="query failed"):
        query(trace, "select nope from events")


def test_query_command_prints_an_aligned_table(tmp_path, capsys):
    need("duckdb", "query")
    need("pyarrow", "query")
    from captures import tiny_capture

    path = tmp_path / "t.npz"
    tiny_capture().save(path)
    sql = "select name, sum(duration_ns) as total from events group by name order by total desc"
    assert main(["query", str(path), sql]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "name     total",
        "compute   5000",
        "load      1500",
        "mark         0",
    ]
    assert main(["query", str(path), "select * from events", "--max-rows", "1"]) == 0
    assert "(more rows; --max-rows to see them)" in capsys.readouterr().out


def test_missing_pandas_says_how_to_install(monkeypatch):
    import builtins

    real = builtins.__import__

    def no_pandas(name, *a, **kw):
        if name == "pandas":
            raise ImportError(name)
        return real(name, *a, **kw)

    monkeypatch.setattr(builtins, "__import__", no_pandas)
    with pytest.raises(MissingDependencyError, match=r"pip install -e '\.\[query\]'"):
        nested_trace().to_pandas()


# -- hostile input (issue 23): queries bounded in rows, memory and reach --------------------------


def test_14_query_fetches_only_the_rows_it_prints(tmp_path, capsys):
    need("duckdb", "query")
    from sm_profiler.cli import main
    from sm_profiler.report.tables import query
    from sm_profiler.wire.capture import save_many

    trace = decode(kernel_capture())
    names, rows = query(trace, "select * from range(50000000)", max_rows=4)
    assert names == ["range"] and rows == [(0,), (1,), (2,), (3,)]
    save_many([kernel_capture()], tmp_path / "c.smp")
    assert (
        main(
            [
                "query",
                str(tmp_path / "c.smp"),
                "select * from range(50000000) order by 1",
                "--max-rows",
                "3",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out.splitlines()
    assert [o.strip() for o in out] == [
        "range",
        "0",
        "1",
        "2",
        "(more rows; --max-rows to see them)",
    ]


def test_14_query_memory_is_bounded_by_what_is_printed(tmp_path):
    need("duckdb", "query")
    import subprocess
    import sys

    from sm_profiler.wire.capture import save_many

    save_many([kernel_capture()], tmp_path / "c.smp")
    code = (
        "import resource, sys; from sm_profiler.cli import main; "
        "main(['query', sys.argv[1], sys.argv[2], '--max-rows', '3']); "
        "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)"
    )

    def peak_kib(sql: str) -> int:
        out = subprocess.run(
            [sys.executable, "-c", code, str(tmp_path / "c.smp"), sql],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        return int(out.splitlines()[-1])

    small, big = peak_kib("select 1"), peak_kib("select * from range(5000000)")
    assert big - small < 100 * 1024, (small, big)  # fetching it all took 650 MiB more


@pytest.mark.parametrize(
    "sql",
    [
        "copy (select 1) to '{dir}/leak.csv'",
        "select * from read_csv('{dir}/secret.txt')",
        "select * from read_text('{dir}/secret.txt')",
        "attach '{dir}/db.duckdb' as d",
        "set enable_external_access = true",
        "install httpfs",
        "insert into events select * from events",
    ],
)
def test_17_query_cannot_reach_files_or_change_the_tables(tmp_path, sql):
    need("duckdb", "query")
    from sm_profiler.errors import ConfigError
    from sm_profiler.report.tables import query

    (tmp_path / "secret.txt").write_text("password\n")
    trace = decode(kernel_capture())
    with pytest.raises(ConfigError, match="query failed"):
        query(trace, sql.format(dir=tmp_path))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["secret.txt"]
    assert query(trace, "select count(*) from events")[1] == [(3,)]


def test_a_skip_for_a_missing_extra_says_how_to_install_it(monkeypatch):
    """Issue 32, item 9: a skipped DuckDB test names the command, as test_docs.py's do."""
    import sys

    monkeypatch.setitem(sys.modules, "duckdb", None)  # as if not installed
    with pytest.raises(pytest.skip.Exception) as e:
        need("duckdb", "query")
    assert str(e.value) == "duckdb is not installed (pip install -e '.[query]')"
