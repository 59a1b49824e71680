"""SmProfiler on the host (device="cpu"): input checks, the buffer, captures, files, concat."""

from __future__ import annotations

import numpy as np
import pytest
from captures import BAD_NAMES
from reference_encoder import BEGIN, END, Lane, Stream, encode

from sm_profiler.errors import CaptureError, ConfigError
from sm_profiler.trace.decode import decode
from sm_profiler.wire import format as fmt
from sm_profiler.wire.capture import load

torch = pytest.importorskip("torch")
from sm_profiler.profiler import SmProfiler  # noqa: E402


def make(**kw) -> SmProfiler:
    args = dict(num_blocks=2, num_groups=2, max_events_per_group=4, device="cpu")
    args.update(kw)
    return SmProfiler(**args)


def fill(prof: SmProfiler, stream: Stream) -> None:
    """Stand in for a kernel: write the device's words into the profiler's buffer."""
    buf = prof.get_buffer()
    buf.copy_(torch.from_numpy(encode(stream).view(np.int64)))


def stream_for(prof: SmProfiler, t0: int, event: int = 0) -> Stream:
    lanes = {(0, 0): Lane(t0, 1, [(BEGIN, event, t0 + 1), (END, event, t0 + 9)])}
    return Stream(prof.num_blocks, prof.num_groups, prof.max_events_per_group, lanes, flags=1)


# -- input checks: ConfigError with a clear message, before anything is allocated --------------


@pytest.mark.parametrize(
    "kw, message",
    [
        ({"num_blocks": 0}, "num_blocks must be positive, got 0"),
        ({"num_blocks": -3}, "num_blocks must be positive"),
        ({"num_groups": 0}, "num_groups must be positive"),
        ({"max_events_per_group": 0}, "max_events_per_group must be positive"),
        ({"num_blocks": True}, "num_blocks must be an int, got bool"),
        ({"num_groups": 2.0}, "num_groups must be an int, got float"),
        ({"max_events_per_group": "64"}, "must be an int, got str"),
        ({"num_blocks": 2**40}, "larger than the supported"),
        ({"num_groups": fmt.MAX_GROUPS + 1}, "larger than the supported"),
        (
            {"num_blocks": fmt.MAX_BLOCKS, "max_events_per_group": fmt.MAX_CAPACITY},
            r"GiB.*lower max_events_per_group or num_blocks",
        ),
        ({"kernel_name": ""}, "kernel_name must be a non-empty string"),
        ({"group_names": ["a", "a"]}, "duplicate group name 'a'"),
        ({"group_names": {2: "x"}}, r"group=2 is out of range: it must be in 0..1"),
    ],
)
def test_bad_constructor_input(kw, message, monkeypatch):
    allocated = []
    monkeypatch.setattr(torch, "zeros", lambda *a, **k: allocated.append(a))
    with pytest.raises(ConfigError, match=message):
        make(**kw)
    assert not allocated


@pytest.mark.parametrize(
    "event_no, name, message",
    [
        (-1, "x", r"event_no=-1 is out of range: it must be in 0..4095"),
        (4096, "x", "event_no=4096 is out of range"),
        (True, "x", "event_no must be an int, got bool"),
        (1.0, "x", "event_no must be an int, got float"),
        (1, "", "event name must be a non-empty string"),
        (1, "  ", "event name must be a non-empty string"),
        (1, None, "event name must be a non-empty string"),
    ],
)
def test_bad_event_registration(event_no, name, message):
    prof = make()
    with pytest.raises(ConfigError, match=message):
        prof.register_event(event_no, name)
    assert prof.event_names == {}


def test_event_names_cannot_be_renamed_or_shared():
    prof = make()
    prof.register_event(0, "load")
    prof.register_event(np.int64(4095), "store")
    prof.register_event(0, "load")  # the same again is fine
    with pytest.raises(ConfigError, match="event 0 is already registered as 'load'.*'mma'"):
        prof.register_event(0, "mma")
    with pytest.raises(ConfigError, match="duplicate event name 'load': already used by event 0"):
        prof.register_event(1, "load")
    assert prof.event_names == {0: "load", 4095: "store"}


def test_register_group():
    prof = make(num_groups=3, group_names=["producer"])
    prof.register_group(1, "consumer")
    assert prof.group_names == {0: "producer", 1: "consumer"}
    with pytest.raises(ConfigError, match="group=3 is out of range: it must be in 0..2"):
        prof.register_group(3, "extra")
    with pytest.raises(ConfigError, match="group 1 is already registered as 'consumer'"):
        prof.register_group(1, "other")
    with pytest.raises(ConfigError, match="duplicate group name 'producer'"):
        prof.register_group(2, "producer")
    assert prof.group_names == {0: "producer", 1: "consumer"}


# -- the buffer ------------------------------------------------------------------------------


def test_init_buffer_zeroes_and_writes_the_header():
    prof = make()
    buf = prof.get_buffer()
    assert buf.dtype == torch.int64 and buf.device.type == "cpu"
    assert buf.numel() == prof.layout.total_words
    buf.fill_(-1)
    again = prof.init_buffer()
    assert again.data_ptr() == buf.data_ptr()  # same allocation: pointers handed out stay valid
    words = again.numpy().view(np.uint64)
    assert np.array_equal(words[: fmt.HEADER_WORDS], prof.layout.header())
    assert not words[fmt.HEADER_WORDS :].any()
    assert fmt.Layout.from_header(words) == prof.layout and prof.layout.emulated


def test_disabled_profiler_has_a_header_only_buffer_of_shape_0x0():
    prof = make(enabled=False)
    words = prof.get_buffer().numpy().view(np.uint64)
    assert len(words) == fmt.HEADER_WORDS
    assert int(words[0]) == fmt.MAGIC | (fmt.VERSION << 32)
    assert int(words[fmt.HDR_SHAPE]) == 0 and int(words[fmt.HDR_CAPACITY_FLAGS]) == 0
    for call in (prof.capture, prof.decode, lambda: prof.save("x.npz")):
        with pytest.raises(ConfigError, match="enabled=False"):
            call()


# -- captures --------------------------------------------------------------------------------


def test_capture_copies_the_buffer_with_names_and_metadata():
    prof = make(kernel_name="gemm", group_names={0: "producer"})
    prof.register_event(0, "load")
    fill(prof, stream_for(prof, 1000))
    cap = prof.capture()
    assert cap.kernel_name == "gemm" and cap.event_names == {0: "load"}
    assert cap.group_names == {0: "producer"}
    assert cap.metadata["device"] == "cpu" and cap.metadata["interpreted"] is True
    prof.init_buffer()  # zeroes the buffer: the capture is a copy
    assert decode(cap).events["start_ns"].tolist() == [1001]
    assert prof.capture("other").kernel_name == "other"


def test_snapshot_keeps_each_launch_and_captures_adds_the_live_buffer():
    prof = make()
    assert len(prof.captures()) == 1  # nothing launched: the (empty) live buffer
    fill(prof, stream_for(prof, 1000))
    first = prof.snapshot()
    assert not prof.get_buffer().numpy()[fmt.HEADER_WORDS :].any()  # re-initialised
    prof.init_buffer()  # not handed out since: the live buffer is not a capture
    assert prof.captures() == [first]
    fill(prof, stream_for(prof, 5000))
    caps = prof.captures()
    assert len(caps) == 2 and caps[0] is first
    trace = prof.decode()
    assert trace.events["capture"].tolist() == [0, 1]
    assert trace.events["start_ns"].tolist() == [1001, 5001]


def test_save_load_round_trip_of_several_captures(tmp_path):
    prof = make()
    prof.register_event(0, "load")
    fill(prof, stream_for(prof, 1000))
    prof.snapshot()
    fill(prof, stream_for(prof, 2000))
    path = tmp_path / "run.npz"
    prof.save(path)
    caps = load(path)
    assert len(caps) == 2 and all(c.event_names == {0: "load"} for c in caps)
    assert [
        np.array_equal(a.words, b.words) for a, b in zip(caps, prof.captures(), strict=True)
    ] == [
        True,
        True,
    ]
    assert decode(caps).events["start_ns"].tolist() == [1001, 2001]


def test_save_to_an_unwritable_path_creates_nothing(tmp_path):
    prof = make()
    blocker = tmp_path / "file"
    blocker.write_text("keep")
    for path in (tmp_path / "missing" / "x.npz", blocker / "x.npz", tmp_path):
        with pytest.raises(CaptureError, match="cannot write"):
            prof.save(path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]
    assert blocker.read_text() == "keep"


def test_group_names_as_a_string_is_refused():
    from sm_profiler.errors import ConfigError

    with pytest.raises(ConfigError, match="not the string"):
        SmProfiler(2, 2, 4, device="cpu", group_names="ab")


def test_capture_checks_the_kernel_name():
    from sm_profiler.errors import ConfigError

    prof = SmProfiler(1, 1, 4, device="cpu")
    with pytest.raises(ConfigError, match="kernel_name"):
        prof.capture(kernel_name="")
    assert prof.capture(kernel_name="gemm").kernel_name == "gemm"


# -- hostile input (issue 15): unprintable names, wrong types, out of memory ----------------------


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


@pytest.mark.parametrize("names", [5, 1.5, object(), {"a"}])
def test_14_group_names_of_the_wrong_type(names):
    pytest.importorskip("torch")
    from sm_profiler import SmProfiler

    with pytest.raises(ConfigError, match="group_names must be a list or a dict"):
        SmProfiler(1, 2, 4, device="cpu", group_names=names)


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


def test_without_a_kernel_name_the_stats_label_the_shape_only():
    """Issue 32, item 7: no placeholder 'kernel (2 blocks)' in the report's header."""
    from sm_profiler.report.stats import compute_stats

    unnamed = SmProfiler(2, 1, 4, device="cpu")
    cap = unnamed.capture()
    assert cap.kernel_name == "kernel" and cap.metadata["unnamed"] is True
    assert compute_stats(decode(cap)).label == "2 blocks"
    named = SmProfiler(2, 1, 4, device="cpu", kernel_name="gemm")
    assert compute_stats(decode(named.capture())).label == "gemm (2 blocks)"
    assert compute_stats(decode(unnamed.capture("add"))).label == "add (2 blocks)"
