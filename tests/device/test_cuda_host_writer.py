"""The C++ capture writer (sm_profiler_host.h) against Python's loader (issue 23, item 6): built
with the system C++ compiler (tests/cuda/header_cases.cpp), it refuses exactly the headers and
metadata that sm_profiler.load refuses."""

from __future__ import annotations

import numpy as np
import pytest
from repo_paths import CUDA_SOURCES

from sm_profiler.errors import FormatError
from sm_profiler.trace.decode import decode
from sm_profiler.wire import format as fmt


def _cpp_cases(tmp_path, headers: list[np.ndarray], shape=(2, 2, 4), metadata: bytes | None = None):
    """Run tests/cuda/header_cases.cpp over `headers`: [(C++ exit status, output path)]."""
    import os
    import subprocess

    import cuda_tools

    import sm_profiler

    cxx = cuda_tools.cxx()
    if cxx is None:
        pytest.skip("needs a C++ compiler")
    exe = tmp_path / "header_cases"
    if not exe.exists():
        src = os.path.join(CUDA_SOURCES, "header_cases.cpp")
        subprocess.run(
            [
                cxx,
                "-std=c++17",
                "-O1",
                "-Wall",
                "-Werror",
                "-Wno-type-limits",
                "-DSM_PROFILER_HOST_NO_CUDA",
                f"-I{sm_profiler.cuda_include_dir()}",
                src,
                "-o",
                str(exe),
            ],
            check=True,
            capture_output=True,
            text=True,
        )
    cases = tmp_path / "cases.bin"
    cases.write_bytes(b"".join(np.asarray(h, "<u8").tobytes() for h in headers))
    outdir = tmp_path / "out"
    outdir.mkdir(exist_ok=True)
    argv = [str(exe), *map(str, shape), str(cases), str(outdir)]
    if metadata is not None:
        argv.append(os.fsdecode(metadata))
    r = subprocess.run(argv, capture_output=True, check=True)
    codes = [int(x) for x in r.stdout.split()]
    assert len(codes) == len(headers)
    return [(c, outdir / f"case_{i}.npz") for i, c in enumerate(codes)], r.stderr.decode("latin-1")


def _loads(path) -> bool:
    from sm_profiler.errors import CaptureError
    from sm_profiler.wire.capture import load

    try:
        decode(load(path))
        return True
    except (CaptureError, FormatError):
        return False


def _header(nb=2, ng=2, cap=4, flags=0, version=fmt.VERSION) -> np.ndarray:
    h = fmt.encode_header(nb, ng, cap, flags)
    h[fmt.HDR_MAGIC_VERSION] = fmt.MAGIC | (version << 32)
    return h


def _edited(**words) -> np.ndarray:
    h = _header(**{k: v for k, v in words.items() if not k.startswith("w")})
    for k, v in words.items():
        if k.startswith("w"):
            h[int(k[1:])] = np.uint64(v)
    return h


HEADER_CASES = {
    "good": _header(),
    "good v1": _header(version=1),
    "good v2": _header(version=2),
    "good v3": _header(version=3),
    "version 0": _header(version=0),
    "version 5": _header(version=5),
    "version 2**31": _header(version=2**31),
    "unknown flag": _header(flags=4),
    "high flag": _header(flags=1 << 31),
    "emulated": _header(flags=fmt.FLAG_EMULATED),
    "ring": _header(flags=fmt.FLAG_RING),
    "w5 set": _edited(w5=1),
    "w6 set": _edited(w6=1 << 63),
    "w7 scratch": _edited(w7=5),
    "w7 set v1": _edited(version=1, w7=5),
    "w4 label": _edited(w4=3),
    "w4 set v3": _edited(version=3, w4=3),
    "w3 set v2": _edited(version=2, w3=1),
    "w3 slots v4": _edited(w3=1),
}


def test_6_cpp_writer_refuses_exactly_the_headers_load_refuses(tmp_path):
    names = sorted(HEADER_CASES)
    results, err = _cpp_cases(tmp_path, [HEADER_CASES[n] for n in names])
    seen = {}
    for n, (rc, path) in zip(names, results, strict=True):
        py_ok = _python_accepts(HEADER_CASES[n], (2, 2, 4))
        seen[n] = (rc == 0, py_ok)
        assert (rc == 0) == py_ok, (n, rc, py_ok)
        assert path.exists() == (rc == 0), n
        if rc == 0:
            assert _loads(path), n
    assert not seen["version 5"][0] and not seen["unknown flag"][0] and not seen["w5 set"][0]
    assert seen["good v1"][0] and seen["w4 label"][0] and not seen["w4 set v3"][0]
    assert "sets reserved header word 5" in err and "format version 5" in err


def _python_accepts(header: np.ndarray, shape) -> bool:
    words = np.zeros(fmt.buffer_words(*shape), np.uint64)
    words[: fmt.HEADER_WORDS] = header
    try:
        fmt.Layout.from_header(words)
        return True
    except FormatError:
        return False


def test_6_cpp_writer_and_python_agree_on_random_headers(tmp_path):
    rng = np.random.default_rng(23)
    headers = []
    for _ in range(300):
        h = _header(
            version=int(rng.choice([0, 1, 2, 3, 4, 5])),
            flags=int(rng.choice([0, 1, 2, 3, 4, 8, 1 << 20])),
        )
        for _ in range(int(rng.integers(0, 3))):
            w = int(rng.integers(1, fmt.HEADER_WORDS))
            bit = int(rng.integers(0, 64))
            h[w] ^= np.uint64(1 << bit)
        headers.append(h)
    results, _ = _cpp_cases(tmp_path, headers)
    for h, (rc, path) in zip(headers, results, strict=True):
        assert (rc == 0) == _python_accepts(h, (2, 2, 4)), [hex(int(x)) for x in h]
        if rc == 0:
            assert _loads(path)


def test_6_cpp_writer_refuses_metadata_that_is_not_utf8(tmp_path):
    ((rc, path),) = _cpp_cases(tmp_path, [_header()], metadata=b"caf\xe9")[0]
    assert rc != 0 and not path.exists()
    results, _ = _cpp_cases(tmp_path, [_header()], metadata="café ✓".encode())
    ((rc, path),) = results
    assert rc == 0
    from sm_profiler.wire.capture import load

    assert load(path)[0].metadata["note"] == "café ✓"


@pytest.mark.parametrize(
    "text", [b"\xed\xa0\x80", b"\xc0\xaf", b"\xf4\x90\x80\x80", b"\xe2\x82", b"ok\xff"]
)
def test_6_cpp_utf8_check_is_pythons(tmp_path, text):
    with pytest.raises(UnicodeDecodeError):
        text.decode()
    ((rc, path),) = _cpp_cases(tmp_path, [_header()], metadata=text)[0]
    assert rc != 0 and not path.exists()
