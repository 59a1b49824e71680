"""Hostile capture files and names (issue 15): one regression test per item of the independent
fuzz's findings, each the short reproducer from the issue asserting the clear error or the
correct result; then hypothesis over any names and any JSON metadata.

Tests are named test_<item>_... after the item of the issue they reproduce. The byte-flipping
fuzz of whole files is in test_capture_fuzz.py."""

from __future__ import annotations

import contextlib
import io
import json
import os
import tempfile
import tracemalloc
import zipfile

import numpy as np
import pytest
from captures import BAD_NAMES, saved, write_npz
from hypothesis import given, settings
from hypothesis import strategies as st
from reference_encoder import BEGIN, END, INSTANT, Lane, Stream, encode, examples
from strategies import SETTINGS

from sm_profiler.cli import main
from sm_profiler.errors import CaptureError, FormatError
from sm_profiler.export import to_chrome_json, to_perfetto_bytes
from sm_profiler.report.stats import compute_stats, format_stats
from sm_profiler.trace.decode import decode
from sm_profiler.wire import format as fmt
from sm_profiler.wire.capture import Capture, load, save_many


@pytest.mark.parametrize("name", BAD_NAMES)
def test_5_files_with_unprintable_names_are_refused(tmp_path, small_capture, name):
    for key, value in [
        ("event_names", {"1": name}),
        ("group_names", {"0": name}),
        ("kernel_name", name),
    ]:
        path = tmp_path / f"{key}.npz"
        write_npz(path, {"capture_file_version": 1, "captures": [{key: value}]}, small_capture)
        with pytest.raises(CaptureError, match=f"capture 0 is unreadable: {key}"):
            load(path)


def test_7_nul_in_a_load_path_is_a_capture_error():
    with pytest.raises(CaptureError, match="cannot open capture file"):
        load("a\0b.npz")


@pytest.mark.parametrize("metadata", [[1, 2], "abc", 5, None, {"1": 2, "x": [1]}])
def test_8_metadata_must_be_a_table(tmp_path, small_capture, metadata):
    path = tmp_path / "t.npz"
    write_npz(
        path, {"capture_file_version": 1, "captures": [{"metadata": metadata}]}, small_capture
    )
    if isinstance(metadata, dict):
        (cap,) = load(path)
        assert decode(cap).kernels[0].metadata == metadata
        return
    with pytest.raises(CaptureError, match="metadata must be a dict with string keys"):
        load(path)
    with pytest.raises(FormatError, match="metadata must be a dict"):
        Capture(small_capture.words, metadata=metadata)


def test_8_deeply_nested_json_is_refused(tmp_path, small_capture):
    path = tmp_path / "deep.npz"
    deep = b'{"capture_file_version": 1, "captures": [{"metadata": {"a": ' + b"[" * 100_000
    write_npz(path, None, small_capture, raw_meta=deep + b"]" * 100_000 + b"}}]}")
    with pytest.raises(CaptureError, match="RecursionError"):
        load(path)
    nested: list = []
    for _ in range(100_000):
        nested = [nested]
    small_capture.metadata = {"a": nested}
    with pytest.raises(CaptureError, match="nested less deeply"):
        save_many([small_capture], tmp_path / "x.npz")
    assert not os.path.exists(tmp_path / "x.npz")


def _set_member_field(path, member: str, field: str, value: bytes) -> None:
    """Patch `field` ("flags" or "method") of `member` in the zip's central directory (what
    zipfile reads) and in its local header."""
    data = bytearray(open(path, "rb").read())
    name = member.encode()
    central = data.index(b"PK\x01\x02" + bytes(0))  # first central directory entry
    while data[central + 46 : central + 46 + len(name)] != name:
        central = data.index(b"PK\x01\x02", central + 4)
    local = int.from_bytes(data[central + 42 : central + 46], "little")
    for at, off in ((central, {"flags": 8, "method": 10}), (local, {"flags": 6, "method": 8})):
        data[at + off[field] : at + off[field] + 2] = value
    open(path, "wb").write(bytes(data))


@pytest.mark.parametrize(
    "field,value", [("method", b"\x63\x00"), ("flags", b"\x01\x00"), ("method", b"\x08\x00")]
)
def test_9_damaged_zip_members_are_capture_errors(tmp_path, small_capture, field, value):
    """An unknown compression method (NotImplementedError), the "encrypted" flag
    (RuntimeError), a stored member read as deflated (zlib.error)."""
    path = saved(tmp_path, small_capture)
    _set_member_field(path, "words_0.npy", field, value)
    with pytest.raises(CaptureError, match="not a readable sm_profiler capture"):
        load(path)


def test_10_an_npy_header_claiming_2_40_words_is_refused(tmp_path, small_capture):
    path = tmp_path / "huge.npz"
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        buf, {"descr": "<u8", "fortran_order": False, "shape": (2**40,)}
    )
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(
            "meta.npy", _npy(json.dumps({"capture_file_version": 1, "captures": [{}]}).encode())
        )
        z.writestr("words_0.npy", buf.getvalue() + small_capture.words.tobytes())
    with pytest.raises(CaptureError, match="claims 8,796,093,022,208 bytes"):
        load(path)


def test_10_a_deflated_bomb_is_refused_before_it_is_inflated(tmp_path, small_capture):
    """32 MiB of zeros (a 32 KiB deflated entry; the issue's was 256 MiB) behind the header of a
    48-word buffer: refused from the sizes alone, without inflating the data."""
    path = tmp_path / "bomb.npz"
    words = np.zeros(2**22, np.uint64)
    words[: fmt.HEADER_WORDS] = small_capture.words[: fmt.HEADER_WORDS]
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr(
            "meta.npy", _npy(json.dumps({"capture_file_version": 1, "captures": [{}]}).encode())
        )
        with z.open("words_0.npy", "w") as f:
            np.lib.format.write_array(f, words)
    assert os.path.getsize(path) < 2**20
    tracemalloc.start()
    try:
        with pytest.raises(FormatError, match="holds 4194304 words but .* needs 48"):
            load(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2**22, peak  # the header was read, not the 256 MiB


def _npy(data: bytes) -> bytes:
    buf = io.BytesIO()
    np.save(buf, np.frombuffer(data, np.uint8))
    return buf.getvalue()


@pytest.mark.parametrize("key", [2**40, 2**31 - 1, 4096, -1])
def test_11_event_ids_in_files_are_range_checked(tmp_path, small_capture, key):
    path = tmp_path / "t.npz"
    meta = {"capture_file_version": 1, "captures": [{"event_names": {str(key): "x"}}, {}]}
    write_npz(path, meta, small_capture, words_1=small_capture.words)
    msg = f"event_names has id {key}, out of range: ids are 0..4095"
    with pytest.raises(CaptureError, match=msg):
        load(path)


def test_11_group_ids_in_files_are_range_checked(tmp_path, small_capture):
    path = tmp_path / "t.npz"
    write_npz(
        path,
        {"capture_file_version": 1, "captures": [{"group_names": {"1024": "x"}}]},
        small_capture,
    )
    with pytest.raises(CaptureError, match="group_names has id 1024"):
        load(path)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_12_a_fifo_is_refused_at_once(tmp_path, capsys):
    fifo = tmp_path / "pipe.npz"
    os.mkfifo(fifo)
    with pytest.raises(CaptureError, match="not a regular file"):
        load(fifo)
    assert main(["info", str(fifo)]) == 2
    assert "not a regular file" in capsys.readouterr().err


def test_12_a_directory_is_refused(tmp_path):
    with pytest.raises(CaptureError, match="is a directory"):
        load(tmp_path)


def _small_words() -> np.ndarray:
    lanes = {
        (0, 0): Lane(100, 1, [(BEGIN, 1, 105), (INSTANT, 2, 106), (END, 1, 110)]),
        (1, 1): Lane(120, 2, [(BEGIN, 903, 125), (END, 903, 130)]),
    }
    return encode(Stream(2, 2, 4, lanes))


# Any code point, lone surrogates and control characters included.
any_text = st.text(st.characters(exclude_categories=()), max_size=8)


@settings(max_examples=examples(150), **SETTINGS)
@given(
    st.dictionaries(st.integers(-2, 5000), any_text, max_size=3),
    st.dictionaries(st.integers(-2, 1100), any_text, max_size=3),
    any_text,
)
def test_hostile_names_are_refused_or_work_everywhere(events, groups, kernel):
    try:
        cap = Capture(_small_words(), events, groups, kernel)
    except FormatError:
        return
    for name in [*cap.event_names.values(), *cap.group_names.values(), cap.kernel_name]:
        assert name.isprintable() and name.strip()
        name.encode("utf-8")
    trace = decode(cap)
    json.dumps(to_chrome_json(trace), ensure_ascii=False).encode("utf-8")
    to_perfetto_bytes(trace)
    format_stats(compute_stats(trace)).encode("utf-8")


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | any_text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(any_text, inner, max_size=3),
    max_leaves=8,
)


@settings(max_examples=examples(100), **SETTINGS)
@given(json_values)
def test_hostile_metadata_loads_or_is_refused_and_info_prints_it_safely(meta):
    small_capture = Capture(_small_words())
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "t.npz")
        write_npz(
            path, {"capture_file_version": 1, "captures": [{"metadata": meta}]}, small_capture
        )
        try:
            (cap,) = load(path)
        except CaptureError as e:
            assert not isinstance(meta, dict) and "metadata must be a dict" in str(e)
            return
        assert cap.metadata == meta
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            assert main(["info", path]) == 0
        text = out.getvalue()
        assert all(c.isprintable() or c == "\n" for c in text)
        text.encode("utf-8")


def test_10_a_buffer_too_large_for_memory_says_so(tmp_path, small_capture, monkeypatch):
    path = saved(tmp_path, small_capture)
    real_empty = np.empty

    def empty(shape, dtype=float, *a, **k):
        if isinstance(shape, int) and shape == len(small_capture.words):
            raise MemoryError()
        return real_empty(shape, dtype, *a, **k)

    monkeypatch.setattr(np, "empty", empty)
    with pytest.raises(CaptureError, match="words_0 holds 384 bytes, more than this machine"):
        load(path)
