"""Hostile input, round 5 (issue 52): the torch.profiler traces we read (wire/torch_trace.py),
given to `merge --torch` or carried in a rank file. Each test names the item of the issue it
keeps fixed; each failed on the main of 2026-11-29."""

from __future__ import annotations

import json

import pytest
from auto_inputs import table_of, torch_doc_of, two_kernels

from sm_profiler.cli import main
from sm_profiler.errors import CaptureError
from sm_profiler.export import auto_torch_parts as torch_parts
from sm_profiler.wire.torch_trace import check_torch_doc

NOT_AN_OBJECT = [["python"], "python", 7, 2.5, True]


def _table():
    return table_of(two_kernels(), step_tag=1, session={"step_tags": {"1": 3}})


def _with_meta_args(doc: dict, what: str, args) -> dict:
    for e in doc["traceEvents"]:
        if e.get("ph") == "M" and e.get("name") == what:
            e["args"] = args
    return doc


@pytest.mark.parametrize("what", ["process_name", "thread_name", "process_sort_index"])
@pytest.mark.parametrize("args", NOT_AN_OBJECT, ids=lambda a: type(a).__name__)
def test_7_metadata_args_not_an_object_are_one_line_in_merge_torch(tmp_path, capsys, what, args):
    table = _table()
    doc = _with_meta_args(torch_doc_of(table), what, args)
    (tmp_path / "t.json").write_text(json.dumps(doc))
    table.save(tmp_path / "auto.npz")
    out = tmp_path / "m.json"
    assert main(["merge", "--torch", str(tmp_path / "t.json"), str(tmp_path / "auto.npz"),
                 "-o", str(out)]) == 2  # fmt: skip
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    assert f"({what}) has args" in err and "not an object" in err and "re-export it" in err
    assert not out.exists()


@pytest.mark.parametrize("args", NOT_AN_OBJECT, ids=lambda a: type(a).__name__)
def test_7_metadata_args_not_an_object_in_a_rank_file(tmp_path, capsys, args):
    # stats and advise leave the trace out, said in a note; merge DIR refuses it in one line.
    table = _table()
    doc = _with_meta_args(torch_doc_of(table), "process_name", args)
    table.save(tmp_path / "auto.npz", torch_parts.members(doc))
    for command in ("stats", "advise"):
        assert main([command, str(tmp_path / "auto.npz")]) == 0
        io = capsys.readouterr()
        assert "note: the torch trace was left out" in io.err and "not an object" in io.err
        assert io.out.strip()
    assert main(["merge", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "(process_name) has args" in err, err


@pytest.mark.parametrize("value", [[0], {"a": 1}], ids=["list", "object"])
def test_7_a_metadata_pid_that_is_a_list_or_object_is_one_line(tmp_path, capsys, value):
    # named_processes hashes a process's pid: a TypeError traceback before.
    table = _table()
    doc = torch_doc_of(table)
    for e in doc["traceEvents"]:
        if e.get("ph") == "M":
            e["pid"] = value
    (tmp_path / "t.json").write_text(json.dumps(doc))
    table.save(tmp_path / "auto.npz")
    argv = ["merge", "--torch", str(tmp_path / "t.json"), str(tmp_path / "auto.npz")]
    assert main([*argv, "-o", str(tmp_path / "m.json")]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "has pid" in err and "not a number or text" in err


@pytest.mark.parametrize("key", ["tid", "name", "ph", "cat", "id"])
@pytest.mark.parametrize("value", [[0], {"a": 1}], ids=["list", "object"])
def test_other_fields_that_are_lists_or_objects_are_refused_too(key, value):
    # Beside item 7: what the readers compare, print or write back is a number or text in
    # every trace torch writes; a list or object there is refused before it is written on.
    doc = torch_doc_of(_table())
    for e in doc["traceEvents"]:
        if e.get("ph") == "M":
            e[key] = value
    with pytest.raises(CaptureError, match=f"has {key} .*, not a number or text; re-export it"):
        check_torch_doc(doc, "the torch trace")


def test_null_args_are_taken_as_none(tmp_path):
    # What item 7's check keeps: a metadata event with "args": null names nothing, and the
    # merge goes on.
    table = _table()
    doc = _with_meta_args(torch_doc_of(table), "process_name", None)
    (tmp_path / "t.json").write_text(json.dumps(doc))
    table.save(tmp_path / "auto.npz")
    argv = ["merge", "--torch", str(tmp_path / "t.json"), str(tmp_path / "auto.npz")]
    assert main([*argv, "-o", str(tmp_path / "m.json")]) == 0
