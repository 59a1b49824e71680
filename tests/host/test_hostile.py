"""Hostile input (issue 15): one regression test per item of the independent fuzz's findings.

Every item was a silently wrong result or an exception other than sm_profiler's own; each test
below is the short reproducer from the issue, asserting the clear error or the correct result.
"""

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
from hypothesis import given, settings
from hypothesis import strategies as st
from reference_encoder import BEGIN, END, INSTANT, Lane, Stream, encode, examples
from strategies import SETTINGS

from sm_profiler import format as fmt
from sm_profiler.capture import Capture, load, save_many
from sm_profiler.cli import main
from sm_profiler.decode import decode
from sm_profiler.errors import CaptureError, ConfigError, FormatError
from sm_profiler.export import export, to_chrome_json, to_perfetto_bytes
from sm_profiler.stats import compute_stats, format_stats


def one_lane(anchor: int, records, sm: int = 1, capacity: int = 4) -> Capture:
    return Capture(encode(Stream(1, 1, capacity, {(0, 0): Lane(anchor, sm, records)})))


# -- 1. times at or above 2**63 ns ------------------------------------------------------------


def test_1_times_past_2_63_are_refused_not_wrapped():
    a = 2**63 - 16
    with pytest.raises(FormatError, match=r"lane 0: record 1 .* past the largest time"):
        decode(one_lane(a, [(BEGIN, 0, a + 8), (END, 0, a + 32)]))
    with pytest.raises(FormatError, match=r"lane 0: anchor 9223372036854775816 ns is past"):
        decode(one_lane(2**63 + 8, [(BEGIN, 0, 2**63 + 9)]))


def test_1_times_just_below_2_63_decode_exactly():
    a = 2**63 - 64
    trace = decode(one_lane(a, [(BEGIN, 0, a + 8), (END, 0, a + 63)]))
    assert trace.events["start_ns"].tolist() == [a + 8]
    assert trace.events["end_ns"].tolist() == [2**63 - 1]


# -- 2. SM ids that do not fit int32 -----------------------------------------------------------


@pytest.mark.parametrize("sm", [2**31, 0xFFFFFFFF])
def test_2_sm_ids_past_int32_are_refused(sm):
    with pytest.raises(FormatError, match=f"lane 0: SM id {sm} is above {fmt.MAX_SM_ID}"):
        decode(one_lane(100, [(BEGIN, 0, 108)], sm=sm))


def test_2_largest_sm_id_decodes():
    trace = decode(one_lane(100, [(BEGIN, 0, 108), (END, 0, 109)], sm=fmt.MAX_SM_ID))
    assert trace.lanes["sm"].tolist() == [fmt.MAX_SM_ID]


# -- 4. stats of blocks 2**61 ns or more apart ---------------------------------------------------


@pytest.mark.parametrize("gap", [2**61, 2**62, 2**63 - 1000])
def test_4_stats_of_blocks_far_apart_on_one_sm(gap):
    s = Stream(2, 1, 4)
    s.lanes[(0, 0)] = Lane(100, 1, [(BEGIN, 0, 108), (END, 0, 200)])
    s.lanes[(1, 0)] = Lane(gap + 100, 1, [(BEGIN, 0, gap + 108), (END, 0, gap + 300)])
    st = compute_stats(decode(Capture(encode(s))))
    assert st.sms.busy_ns.tolist() == [100 + 200]
    assert st.span.duration_ns == gap + 200


# -- 14. API misuse ------------------------------------------------------------------------------


def test_14_decode_of_nothing_or_of_the_wrong_type_is_a_config_error(small_capture):
    with pytest.raises(ConfigError, match="at least one capture"):
        decode([])
    with pytest.raises(ConfigError, match="got int"):
        decode(5)
    with pytest.raises(ConfigError, match="got str"):
        decode([small_capture, "x"])


def test_14_decode_of_a_bare_array_is_a_capture_without_names(small_capture):
    bare = decode(small_capture.words)
    named = decode(small_capture)
    assert bare.events["start_ns"].tolist() == named.events["start_ns"].tolist()
    assert bare.event_names == {}
    with pytest.raises(FormatError, match="too short"):
        decode(np.zeros(3, np.uint64))


# -- 5. names that are not printable text (lone surrogates, escapes) ---------------------------


BAD_NAMES = ["\ud800", "a\x1b[2Jb", "two\nlines", ""]


@pytest.mark.parametrize("name", BAD_NAMES)
def test_5_profiler_refuses_unprintable_names(name):
    torch = pytest.importorskip("torch")  # noqa: F841
    from sm_profiler import SmProfiler

    prof = SmProfiler(1, 2, 4, device="cpu")
    with pytest.raises(ConfigError, match="event name must be"):
        prof.register_event(0, name)
    with pytest.raises(ConfigError, match="group name must be"):
        SmProfiler(1, 2, 4, device="cpu", group_names=["ok", name])
    with pytest.raises(ConfigError, match="kernel_name must be"):
        SmProfiler(1, 1, 4, device="cpu", kernel_name=name)
    with pytest.raises(ConfigError, match="kernel_name must be"):
        prof.capture(kernel_name=name)


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


# -- helpers for hand-made capture files ---------------------------------------------------------


def write_npz(path, meta, capture: Capture, raw_meta: bytes | None = None, **arrays) -> None:
    blob = raw_meta if raw_meta is not None else json.dumps(meta).encode()
    arrays.setdefault("words_0", capture.words)
    np.savez(path, meta=np.frombuffer(blob, np.uint8), **arrays)


def saved(tmp_path, capture: Capture, name: str = "t.npz") -> str:
    path = str(tmp_path / name)
    capture.save(path)
    return path


# -- 6. export writes atomically ------------------------------------------------------------------


@pytest.mark.parametrize("ext", [".json", ".json.gz", ".perfetto-trace"])
def test_6_a_failed_export_leaves_the_old_file(tmp_path, small_capture, monkeypatch, ext):
    path = tmp_path / f"t{ext}"
    path.write_bytes(b"old trace")
    trace = decode(small_capture)
    from sm_profiler.export import chrome, perfetto

    def full(*a, **k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(perfetto, "iter_perfetto_chunks", full)
    monkeypatch.setattr(chrome, "write_chrome_json", full)
    with pytest.raises(CaptureError, match=f"cannot write .*t{ext}'.*No space left on device"):
        export(trace, path)
    assert path.read_bytes() == b"old trace"
    assert os.listdir(tmp_path) == [path.name]  # no temporary file left behind
    monkeypatch.undo()
    export(trace, path)
    assert path.read_bytes() != b"old trace" and os.listdir(tmp_path) == [path.name]


# -- 7. unwritable and impossible paths -------------------------------------------------------


@pytest.mark.parametrize("path", ["/sys/t.json", "/proc/t.json", "nul\0here.json"])
def test_7_unwritable_paths_are_capture_errors(small_capture, path):
    if not os.path.isdir(os.path.dirname(path) or ".") and "\0" not in path:
        pytest.skip(f"no {os.path.dirname(path)} here")
    trace = decode(small_capture)
    with pytest.raises(CaptureError, match="cannot write"):
        export(trace, path)
    with pytest.raises(CaptureError, match="cannot write"):
        save_many([small_capture], path.replace(".json", ".npz"))


def test_7_nul_in_a_load_path_is_a_capture_error():
    with pytest.raises(CaptureError, match="cannot open capture file"):
        load("a\0b.npz")


# -- 8. capture metadata ------------------------------------------------------------------------


@pytest.mark.parametrize("metadata", [[1, 2], "abc", 5, None, {"1": 2, "x": [1]}])
def test_8_metadata_must_be_a_table(tmp_path, small_capture, metadata):
    path = tmp_path / "t.npz"
    write_npz(path, {"capture_file_version": 1, "captures": [{"metadata": metadata}]},
              small_capture)  # fmt: skip
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


# -- 9. damaged zip members ---------------------------------------------------------------------


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


# -- 10. sizes are checked before anything is inflated ----------------------------------------


def test_10_an_npy_header_claiming_2_40_words_is_refused(tmp_path, small_capture):
    path = tmp_path / "huge.npz"
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        buf, {"descr": "<u8", "fortran_order": False, "shape": (2**40,)}
    )
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("meta.npy", _npy(json.dumps({"capture_file_version": 1,
                                                 "captures": [{}]}).encode()))  # fmt: skip
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
        z.writestr("meta.npy", _npy(json.dumps({"capture_file_version": 1,
                                                 "captures": [{}]}).encode()))  # fmt: skip
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


# -- 11. event and group ids in files ---------------------------------------------------------


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
    write_npz(path, {"capture_file_version": 1, "captures": [{"group_names": {"1024": "x"}}]},
              small_capture)  # fmt: skip
    with pytest.raises(CaptureError, match="group_names has id 1024"):
        load(path)


# -- 12. FIFOs and other non-files ----------------------------------------------------------------


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


# -- 13. CLI errors stay on one line ------------------------------------------------------------


def test_13_a_long_npy_header_error_is_one_line(tmp_path, capsys):
    path = tmp_path / "long.npz"
    with zipfile.ZipFile(path, "w") as z:
        header = b"\x93NUMPY\x02\x00" + (200_000).to_bytes(4, "little") + b" " * 200_000
        z.writestr("meta.npy", header)
    assert main(["stats", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("sm-profiler: error: ") and err.count("\n") == 1, err
    assert "max_header_size" in err


# -- 14. API misuse (SmProfiler) ------------------------------------------------------------------


@pytest.mark.parametrize("names", [5, 1.5, object(), {"a"}])
def test_14_group_names_of_the_wrong_type(names):
    pytest.importorskip("torch")
    from sm_profiler import SmProfiler

    with pytest.raises(ConfigError, match="group_names must be a list or a dict"):
        SmProfiler(1, 2, 4, device="cpu", group_names=names)


# -- 15. metadata reaches the terminal escaped -----------------------------------------------


def test_15_info_escapes_what_a_file_says(tmp_path, small_capture, capsys):
    small_capture.metadata = {"device\x1b]0;pwn\x07": "H100\x1b[2J\r\nfake: line", "s": "\ud800"}
    path = saved(tmp_path, small_capture)
    assert main(["info", path]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\r" not in out and "\x07" not in out
    assert "device\\x1b]0;pwn\\x07" in out
    assert "H100\\x1b[2J\\r\\nfake: line" in out and "\\ud800" in out
    out.encode("utf-8")  # nothing unencodable reaches stdout


# -- 16. a buffer larger than free memory -------------------------------------------------------


def test_16_out_of_memory_says_how_much_was_asked(monkeypatch):
    torch = pytest.importorskip("torch")
    from sm_profiler import SmProfiler

    def oom(*a, **k):
        raise RuntimeError("DefaultCPUAllocator: not enough memory: you tried to allocate 1 GB")

    monkeypatch.setattr(torch, "zeros", oom)
    words = fmt.buffer_words(1024, 4, 65536)
    with pytest.raises(ConfigError, match=f"cannot allocate the {words * 8:,}-byte .* on cpu"):
        SmProfiler(1024, 4, 65536, device="cpu")

    def other(*a, **k):
        raise RuntimeError("some other failure")

    monkeypatch.setattr(torch, "zeros", other)
    with pytest.raises(RuntimeError, match="some other failure"):
        SmProfiler(1, 1, 4, device="cpu")


def test_16_cuda_out_of_memory_names_the_free_memory(monkeypatch):
    torch = pytest.importorskip("torch")
    from sm_profiler import SmProfiler

    def oom(*a, **k):
        raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 40.00 GiB")

    monkeypatch.setattr(torch, "zeros", oom)
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (2**30, 80 * 2**30))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    with pytest.raises(ConfigError, match=r"1,073,741,824 of 85,899,345,920 bytes are free"):
        SmProfiler(1024, 4, 65536, device="cuda")


# -- hypothesis: hostile headers, names and metadata --------------------------------------------

# Lane headers anywhere in 64 bits, most near the edges that used to wrap.
wide_anchors = st.one_of(
    st.integers(1, 2**64 - 1),
    st.integers(2**63 - 2**33, 2**63 + 2**33),
    st.integers(2**61 - 2**20, 2**61 + 2**20),
)
wide_sms = st.one_of(st.integers(0, 2**32 - 1), st.sampled_from([2**31 - 1, 2**31, 2**32 - 1]))


@st.composite
def hostile_streams(draw) -> Stream:
    s = Stream(draw(st.integers(1, 3)), 1, draw(st.integers(1, 6)))
    for b in range(s.num_blocks):
        if draw(st.booleans()):
            a = draw(wide_anchors)
            recs, t = [], a
            for kind in draw(st.lists(st.sampled_from([BEGIN, END, INSTANT]), max_size=6)):
                t += draw(st.integers(0, 2**32 - 1))
                recs.append((kind, draw(st.integers(0, 3)), t))
            s.lanes[(b, 0)] = Lane(a, draw(wide_sms), recs)
    return s


def _encode_wide(stream: Stream) -> np.ndarray:
    """encode(), with anchors and times past 2**64 reduced modulo 2**64 as the device would."""
    for lane in stream.lanes.values():
        lane.anchor_ns %= 2**64
    return encode(stream)


@settings(max_examples=examples(150), **SETTINGS)
@given(hostile_streams())
def test_hostile_lane_headers_give_a_format_error_or_a_sane_trace(stream):
    try:
        trace = decode(Capture(_encode_wide(stream)))
    except FormatError:
        return
    ev, lanes = trace.events, trace.lanes
    assert (ev["start_ns"] >= 0).all() and (ev["end_ns"] >= ev["start_ns"]).all()
    assert (lanes["sm"][lanes["initialized"]] >= 0).all()
    assert (lanes["sm"][~lanes["initialized"]] == -1).all()
    compute_stats(trace)
    to_perfetto_bytes(trace)
    to_chrome_json(trace)


def _small_words() -> np.ndarray:
    lanes = {(0, 0): Lane(100, 1, [(BEGIN, 1, 105), (INSTANT, 2, 106), (END, 1, 110)]),
             (1, 1): Lane(120, 2, [(BEGIN, 903, 125), (END, 903, 130)])}
    return encode(Stream(2, 2, 4, lanes))


# Any code point, lone surrogates and control characters included.
any_text = st.text(st.characters(exclude_categories=()), max_size=8)


@settings(max_examples=examples(150), **SETTINGS)
@given(st.dictionaries(st.integers(-2, 5000), any_text, max_size=3),
       st.dictionaries(st.integers(-2, 1100), any_text, max_size=3), any_text)  # fmt: skip
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
        write_npz(path, {"capture_file_version": 1, "captures": [{"metadata": meta}]},
                  small_capture)  # fmt: skip
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
