"""Capture files: save/load round trips and the errors for files that can't be used."""

from __future__ import annotations

import os
import stat
import zipfile

import numpy as np
import pytest
from reference_encoder import INSTANT, Lane, Stream, actual, encode

from sm_profiler.errors import CaptureError, FormatError
from sm_profiler.trace.decode import decode
from sm_profiler.wire.capture import Capture, load, save_many


def other_capture() -> Capture:
    stream = Stream(1, 1, 2, {(0, 0): Lane(99, 1, [(INSTANT, 3, 100)])})
    return Capture(words=encode(stream), event_names={3: "tick"}, kernel_name="other")


def test_save_load_round_trip_keeps_words_names_and_metadata(tmp_path, small_capture):
    path = tmp_path / "trace.npz"
    small_capture.save(path)
    (back,) = load(path)
    assert np.array_equal(back.words, small_capture.words) and back.words.dtype == np.uint64
    assert back.event_names == small_capture.event_names  # int keys again after JSON
    assert back.group_names == small_capture.group_names
    assert back.kernel_name == "small" and back.metadata == {"note": "fixture"}
    assert actual(decode(back)).rows == actual(decode(small_capture)).rows


def test_several_captures_in_one_file_keep_their_order(tmp_path, small_capture):
    path = tmp_path / "many.npz"
    save_many([small_capture, other_capture(), small_capture], path)
    caps = load(path)
    assert [c.kernel_name for c in caps] == ["small", "other", "small"]
    trace = decode(caps)
    assert sorted(set(trace.events["capture"].tolist())) == [0, 1, 2]


def test_save_overwrites_an_existing_capture_whole(tmp_path, small_capture):
    path = tmp_path / "t.npz"
    save_many([small_capture, small_capture], path)
    other_capture().save(path)
    assert [c.kernel_name for c in load(path)] == ["other"]
    assert os.listdir(tmp_path) == ["t.npz"]  # no temporary file left behind


def test_load_of_a_missing_file(tmp_path):
    with pytest.raises(CaptureError, match="does not exist"):
        load(tmp_path / "nope.npz")


@pytest.mark.parametrize("keep", [0, 10, 200, -30])
def test_load_of_a_truncated_file(tmp_path, small_capture, keep):
    path = tmp_path / "t.npz"
    small_capture.save(path)
    data = path.read_bytes()
    path.write_bytes(data[:keep])
    with pytest.raises(CaptureError, match="not a readable sm_profiler capture"):
        load(path)


def test_load_of_foreign_files(tmp_path):
    text = tmp_path / "notes.txt"
    text.write_text("hello")
    npy = tmp_path / "a.npy"
    np.save(npy, np.arange(3))
    other = tmp_path / "other.npz"
    np.savez(other, x=np.arange(3))
    for path in (text, npy, other):
        with pytest.raises(CaptureError):
            load(path)


def _npz_with_meta(path, meta: bytes, **arrays):
    np.savez(path, meta=np.frombuffer(meta, np.uint8), **arrays)


def test_load_of_bad_metadata(tmp_path, small_capture):
    w = small_capture.words
    cases = {
        "version": b'{"capture_file_version": 99, "captures": [{}]}',
        "not_json": b"\xff\xfe",
        "list": b"[1, 2]",
        "item": b'{"capture_file_version": 1, "captures": [5]}',
        "names": b'{"capture_file_version": 1, "captures": [{"event_names": {"x": "a"}}]}',
        "empty": b'{"capture_file_version": 1, "captures": []}',
        "missing_words": b'{"capture_file_version": 1, "captures": [{}, {}]}',
    }
    for name, meta in cases.items():
        path = tmp_path / f"{name}.npz"
        _npz_with_meta(path, meta, words_0=w)
        with pytest.raises(CaptureError):
            load(path)


def test_load_of_a_damaged_buffer_is_a_format_error(tmp_path, small_capture):
    path = tmp_path / "bad.npz"
    w = small_capture.words.copy()
    w[0] = 0
    _npz_with_meta(path, b'{"capture_file_version": 1, "captures": [{}]}', words_0=w)
    with pytest.raises(FormatError, match="magic"):
        load(path)


def test_save_refuses_what_it_could_not_read_back(tmp_path):
    bad = Capture(words=np.zeros(4, np.uint64))
    with pytest.raises(FormatError):
        save_many([bad], tmp_path / "x.npz")
    with pytest.raises(CaptureError, match="no captures"):
        save_many([], tmp_path / "x.npz")
    assert not (tmp_path / "x.npz").exists()


def test_save_refuses_metadata_that_is_not_json(tmp_path, small_capture):
    small_capture.metadata = {"when": object()}
    with pytest.raises(CaptureError, match="JSON"):
        small_capture.save(tmp_path / "x.npz")
    assert not os.listdir(tmp_path)


def test_save_to_a_missing_directory_or_a_directory(tmp_path, small_capture):
    with pytest.raises(CaptureError, match="does not exist"):
        small_capture.save(tmp_path / "no" / "x.npz")
    with pytest.raises(CaptureError, match="is a directory"):
        small_capture.save(tmp_path)
    assert not (tmp_path / "no").exists()


@pytest.mark.skipif(os.geteuid() == 0, reason="root can write anywhere")
def test_save_to_a_read_only_directory_touches_nothing(tmp_path, small_capture):
    path = tmp_path / "t.npz"
    other_capture().save(path)
    before = path.read_bytes()
    tmp_path.chmod(stat.S_IRUSR | stat.S_IXUSR)
    try:
        with pytest.raises(CaptureError, match="permission denied"):
            small_capture.save(path)
    finally:
        tmp_path.chmod(stat.S_IRWXU)
    assert path.read_bytes() == before


def test_a_failed_write_leaves_the_old_file(tmp_path, small_capture, monkeypatch):
    """Even past the checks (disk full, say), the old file survives and no temp file stays."""
    path = tmp_path / "t.npz"
    other_capture().save(path)
    before = path.read_bytes()

    def fail(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(np, "savez", fail)
    with pytest.raises(CaptureError, match="No space left"):
        small_capture.save(path)
    assert path.read_bytes() == before and os.listdir(tmp_path) == ["t.npz"]
    assert zipfile.is_zipfile(path)
