"""The CUDA C++ headers on the CPU: generated parts in step with format.py / ptx.py, the device
header compiled by NVRTC (PTX) and Triton's ptxas (SASS), the host header's capture files built
with the system C++ compiler and read back by sm_profiler.load."""

from __future__ import annotations

import os
import re
import subprocess

import cuda_tools  # noqa: E402
import numpy as np
import pytest
from repo_paths import CUDA_SOURCES, ROOT  # noqa: E402

import sm_profiler
from sm_profiler.cli import main as cli_main
from sm_profiler.record import cuda, ptx
from sm_profiler.wire import format as fmt

HERE = CUDA_SOURCES

needs_nvrtc = pytest.mark.skipif(
    cuda_tools.nvrtc() is None, reason="needs the nvidia-cuda-nvrtc wheel (the test extra)"
)
needs_ptxas = pytest.mark.skipif(
    cuda_tools.triton_bin("ptxas") is None or cuda_tools.triton_bin("nvdisasm") is None,
    reason="needs Triton's ptxas and nvdisasm",
)
needs_cxx = pytest.mark.skipif(cuda_tools.cxx() is None, reason="needs a C++ compiler")


# ---------------------------------------------------------------------------------------------
# Generated headers, package data, include dir
# ---------------------------------------------------------------------------------------------


def test_generated_headers_match_format_and_ptx():
    assert cuda.stale_headers() == [], "run: python -m sm_profiler.record.cuda --write"


def _ptx_macros(header: str) -> dict[str, str]:
    """The PTX header's macros as the compiler sees them: each a run of C string literals and
    other macros (a record is a run of its parts), expanded and joined."""
    bodies = dict(re.findall(r"#define (SM_PROFILER_PTX_\w+) \\\n((?:.*\\\n)*.*)", header))
    token = re.compile(r'"((?:[^"\\]|\\.)*)"|(SM_PROFILER_PTX_\w+)|\\|\s+')

    def expand(name: str) -> str:
        out, body, pos = [], bodies[name], 0
        while pos < len(body):
            m = token.match(body, pos)
            assert m, f"{name}: {body[pos:]!r}"
            if m.group(1) is not None:
                out.append(m.group(1).replace("\\n", "\n").replace("\\t", "\t"))
            elif m.group(2):
                out.append(expand(m.group(2)))
            pos = m.end()
        return "".join(out)

    return {name: expand(name) for name in bodies}


def test_every_record_text_is_ptx_py_in_cudas_operand_spelling():
    macros = _ptx_macros(cuda.ptx_header())
    modes = {"PER_BLOCK": "warp", "PER_WARP": "all", "LEADER": "thread"}
    records = 0
    for ring in (False, True):
        for vector, spelling in ((False, "PACKED"), (True, "VECTOR")):
            for cname, mode in modes.items():
                for after in (False, True):
                    name = "SM_PROFILER_PTX_" + "RING_" * ring + f"RECORD_{spelling}_{cname}"
                    body = macros[name + "_AFTER" * after]
                    assert body == cuda.cuda_asm(
                        ptx.record(after, mode=mode, vector=vector, ring=ring)
                    )
                    assert "$" not in body and "%%globaltimer" in body
                    assert body.count("%%globaltimer") == (2 if after else 1)
                    records += 1
    assert records == 24
    assert macros["SM_PROFILER_PTX_OPEN_LANE"] == cuda.cuda_asm(ptx.OPEN_LANE)
    assert macros["SM_PROFILER_PTX_RING_CLOSE"] == cuda.cuda_asm(ptx.RING_CLOSE)


def test_the_ptx_header_says_each_record_part_once():
    # The records share their parts (ptx.record_parts): each is one macro, not 24 copies.
    lines = [ln.strip() for ln in cuda.ptx_header().splitlines() if ln.strip().startswith('"')]
    assert lines.count('"\\t@pov st.global.u32 [%0+-4], %1;\\n"') == 1


def test_cuda_asm_spells_operands_and_registers_for_nvcc():
    assert cuda.cuda_asm("mov.u64 $0, %globaltimer;") == "mov.u64 %0, %%globaltimer;"
    assert cuda.cuda_asm("@!pl bra.uni SMP_DONE_${:uid};") == "@!pl bra.uni SMP_DONE;"
    with pytest.raises(ValueError, match="no spelling"):
        cuda.cuda_asm("${:comment}")


def test_include_dir_holds_the_headers_and_the_cli_prints_it(capsys):
    d = sm_profiler.cuda_include_dir()
    names = sorted(os.listdir(d))
    assert {
        "sm_profiler.cuh",
        "sm_profiler_host.h",
        "sm_profiler_format.h",
        "sm_profiler_ptx.h",
    } <= set(names)
    with pytest.raises(SystemExit) as e:
        cli_main(["--include"])
    assert e.value.code == 0
    assert capsys.readouterr().out.strip() == d


def test_headers_digest_names_the_headers_contents(tmp_path):
    # CuPy's cache key is the source and the options: the digest, passed as a define, makes a
    # changed header a new build.
    shipped = cuda.headers_digest()
    assert re.fullmatch(r"[0-9a-f]{16}", shipped)
    for name in os.listdir(cuda.include_dir()):
        (tmp_path / name).write_bytes(open(os.path.join(cuda.include_dir(), name), "rb").read())
    assert cuda.headers_digest(str(tmp_path)) == shipped
    with open(tmp_path / "sm_profiler.cuh", "a") as f:
        f.write("// one more line\n")
    assert cuda.headers_digest(str(tmp_path)) != shipped


def test_the_headers_ship_in_the_wheel():
    tomllib = pytest.importorskip("tomllib")
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        data = tomllib.load(f)["tool"]["setuptools"]["package-data"]["sm_profiler"]
    import fnmatch

    for name in os.listdir(sm_profiler.cuda_include_dir()):
        assert any(fnmatch.fnmatch(f"include/{name}", pat) for pat in data), name


def test_format_macros_equal_format_py():
    text = cuda.format_header()
    values = dict(re.findall(r"#define SM_PROFILER_(\w+) (\w+?)u?l*\b", text))
    assert int(values["MAGIC"], 16) == fmt.MAGIC
    assert int(values["FORMAT_VERSION"]) == fmt.VERSION
    assert int(values["HEADER_WORDS"]) == fmt.HEADER_WORDS
    assert int(values["HDR_SCRATCH"]) == fmt.HDR_SCRATCH
    assert int(values["EVENT_SHIFT"]) == fmt.EVENT_SHIFT
    assert int(values["MAX_EVENT_ID"]) == fmt.MAX_EVENT_ID


# ---------------------------------------------------------------------------------------------
# NVRTC: PTX per event
# ---------------------------------------------------------------------------------------------

N_EVENTS = 5  # straight-line events in the kernels below

KERNEL = r"""
#include <sm_profiler.cuh>
extern "C" __global__ void k(float* out, unsigned long long* prof) {
    INIT
    float acc = threadIdx.x;
    sm_profiler_event_instant(lane, 7);
    sm_profiler_event_start(lane, 1);
    acc = acc * 1.5f + 2.f;
    sm_profiler_event_end(lane, 1);
    {
        SM_PROFILER_RANGE(lane, 2);
        acc = acc * acc - 1.f;
    }
    out[blockIdx.x * blockDim.x + threadIdx.x] = acc;
}
"""
PLAIN = r"""
extern "C" __global__ void k(float* out, unsigned long long* prof) {
    float acc = threadIdx.x;
    acc = acc * 1.5f + 2.f;
    acc = acc * acc - 1.f;
    out[blockIdx.x * blockDim.x + threadIdx.x] = acc;
}
"""
INITS = {
    "per_block": "sm_profiler_lane lane = sm_profiler_init(prof);",
    "per_warp": "sm_profiler_warp_lane lane = sm_profiler_init_per_warp(prof);",
    "leader": "sm_profiler_leader_lane lane = sm_profiler_init_leader(prof, blockIdx.x, 0, "
    "threadIdx.x == 32);",
}
RECORD_STORE = re.compile(r"st\.global\.(u64|v2\.u32) \[a\]")


def _kernel(mode: str) -> str:
    return KERNEL.replace("INIT", INITS[mode])


def _asm_blocks(ptx_text: str) -> list[str]:
    return re.findall(r"// begin inline asm\n(.*?)// end inline asm", ptx_text, re.S)


@needs_nvrtc
@pytest.mark.parametrize("mode", list(INITS))
def test_nvrtc_ptx_has_one_timer_read_and_one_8_byte_store_per_event(mode):
    text = cuda_tools.nvrtc_ptx(_kernel(mode))
    records = [b for b in _asm_blocks(text) if RECORD_STORE.search(b)]
    assert len(records) == N_EVENTS
    for b in records:
        assert b.count("%globaltimer") == 1
        assert len(RECORD_STORE.findall(b)) == 1
        # the only other store: the drop cursor, on the opposite predicate
        assert re.findall(r"st\.global\.\w+", b).count("st.global.u32") == 1
        assert "@pov st.global.u32" in b
    # init: one more timer read (the anchor); no atomics or fences anywhere
    assert text.count("%globaltimer") == N_EVENTS + 1
    assert not re.search(r"\b(atom|red|membar|fence)\.", text)


@needs_nvrtc
def test_nvrtc_per_block_mode_lets_the_other_warps_branch_past_each_event():
    text = cuda_tools.nvrtc_ptx(_kernel("per_block"))
    records = [b for b in _asm_blocks(text) if RECORD_STORE.search(b)]
    for b in records:
        assert "@!pl bra.uni SMP_DONE;" in b and b.rstrip().endswith("SMP_DONE:\n\t}")
    warp = cuda_tools.nvrtc_ptx(_kernel("per_warp"))
    assert "bra.uni SMP_DONE" not in warp  # per warp: no leader test at all


@needs_nvrtc
def test_nvrtc_disabled_build_is_the_plain_kernel():
    off = cuda_tools.nvrtc_ptx(_kernel("per_block"), defines=("SM_PROFILER_DISABLE",))
    plain = cuda_tools.nvrtc_ptx(PLAIN)
    assert "globaltimer" not in off and "inline asm" not in off
    body = lambda t: t[t.index(".visible .entry") :]  # noqa: E731
    assert body(off) == body(plain)


@needs_nvrtc
def test_nvrtc_compiles_3d_grids_blocks_and_every_mode_of_the_test_kernel():
    src = f'#include "{os.path.join(HERE, "profiled_kernel.cuh")}"\n'
    text = cuda_tools.nvrtc_ptx(src)
    for reg in ("%tid.z", "%ntid.y", "%ctaid.z", "%nctaid.y"):
        assert reg in text  # lanes and warps count 3D blocks and grids
    # three modes x (instant, iter begin/end, tail begin, tail end-after): 5 records each
    records = [b for b in _asm_blocks(text) if RECORD_STORE.search(b)]
    assert len(records) == 15


@needs_nvrtc
def test_vector_store_spelling_follows_the_compiler_like_ptx_vector_store_for():
    major, _ = cuda_tools.nvrtc_version()
    text = cuda_tools.nvrtc_ptx(_kernel("per_block"))
    vector = ptx.vector_store_for((major, 0))
    assert ("st.global.v2.u32 [a]" in text) == vector
    forced = cuda_tools.nvrtc_ptx(
        _kernel("per_block"), defines=(f"SM_PROFILER_VECTOR_STORE={int(not vector)}",)
    )
    assert ("st.global.v2.u32 [a]" in forced) == (not vector)


# ---------------------------------------------------------------------------------------------
# SASS (Triton's ptxas)
# ---------------------------------------------------------------------------------------------


@needs_nvrtc
@needs_ptxas
@pytest.mark.parametrize("mode", list(INITS))
def test_sass_reads_the_timer_once_per_event_and_stores_8_bytes(mode):
    sass = cuda_tools.sass(cuda_tools.nvrtc_ptx(_kernel(mode)))
    assert len(re.findall(r"SR_GLOBALTIMER", sass)) == N_EVENTS + 1  # + the init's anchor
    # the records (8 bytes) plus the anchor (8 bytes), the output; nothing else is 64-bit
    assert len(re.findall(r"STG\.E\.64 ", sass)) == N_EVENTS + 1
    assert not re.search(r"\b(ATOM|RED|MEMBAR|FENCE)", sass)


@needs_nvrtc
@needs_ptxas
def test_sass_per_block_events_are_one_uniform_branch_for_the_other_warps():
    sass = cuda_tools.sass(cuda_tools.nvrtc_ptx(_kernel("per_block")))
    assert "BSSY" not in sass  # the leader flag is warp-uniform to ptxas: no reconvergence
    assert "PLOP3" not in sass  # the branch uses the vote's own predicate, not a copy per event
    lines = sass.splitlines()
    timers = [i for i, line in enumerate(lines) if "SR_GLOBALTIMER" in line][1:]
    for i in timers:  # each event's timer read sits behind a predicated branch over it
        assert any(re.match(r"@!?U?P\d BRA", line) for line in lines[max(0, i - 3) : i])


@needs_nvrtc
@needs_ptxas
def test_sass_disabled_build_equals_the_plain_kernels():
    off = cuda_tools.sass(cuda_tools.nvrtc_ptx(_kernel("leader"), defines=("SM_PROFILER_DISABLE",)))
    assert off == cuda_tools.sass(cuda_tools.nvrtc_ptx(PLAIN))


# ---------------------------------------------------------------------------------------------
# The host header: capture files from C++ (g++, no CUDA) read by Python
# ---------------------------------------------------------------------------------------------


def _build(tmp_path, source: str, *defines: str) -> str:
    exe = str(tmp_path / ("prog" + "_".join(d.split("=")[0] for d in defines)))
    cmd = [
        cuda_tools.cxx(),
        "-std=c++17",
        "-O1",
        "-Wall",
        "-Werror",
        "-Wno-type-limits",
        "-DSM_PROFILER_HOST_NO_CUDA",
        f"-I{sm_profiler.cuda_include_dir()}",
        source,
        "-o",
        exe,
    ]
    cmd[6:6] = [f"-D{d}" for d in defines]
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    return exe


def check_container(path) -> dict:
    """The capture-file container of docs/format.md, checked member by member."""
    import json
    import zipfile

    with zipfile.ZipFile(path) as z:
        assert z.testzip() is None  # every CRC right
        infos = z.infolist()
        names = [i.filename for i in infos]
        assert names[0] == "meta.npy"
        assert names[1:] == [f"words_{i}.npy" for i in range(len(names) - 1)]
        assert all(i.compress_type == zipfile.ZIP_STORED for i in infos)
        out = {}
        for info in infos:
            with z.open(info) as m:
                version = np.lib.format.read_magic(m)
                assert version == (1, 0)
                shape, fortran, dtype = np.lib.format.read_array_header_1_0(m)
                assert len(shape) == 1 and not fortran and m.tell() % 64 == 0
                if info.filename == "meta.npy":
                    assert dtype == np.uint8
                    meta = json.loads(m.read().decode())
                else:
                    assert dtype == np.dtype("<u8")
                    out[info.filename] = np.frombuffer(m.read(), "<u8")
                    assert out[info.filename].size == shape[0]
    assert meta["capture_file_version"] == 1
    assert len(meta["captures"]) == len(names) - 1
    for c in meta["captures"]:
        assert set(c) == {"event_names", "group_names", "kernel_name", "metadata"}
    return meta


@needs_cxx
@pytest.mark.parametrize("zip64", [False, True])
def test_cpp_host_header_writes_a_capture_python_reads(tmp_path, zip64, capsys):
    exe = _build(
        tmp_path,
        os.path.join(HERE, "host_writer.cpp"),
        *(["SM_PROFILER_ZIP64_THRESHOLD=0"] if zip64 else []),
    )
    path = tmp_path / "cpp.npz"
    subprocess.run([exe, str(path), "2"], check=True)
    meta = check_container(path)
    caps = sm_profiler.load(path)
    assert len(caps) == 2 and meta["captures"][0]["kernel_name"] == "host_writer"
    c = caps[0]
    assert c.event_names == {1: 'compute "main" loop'}
    assert c.group_names == {0: "producer", 1: "consumer"}
    assert c.metadata["writer"] == "sm_profiler_host.h"
    assert c.metadata["launch_label"] == "step\t1 \\ ok"  # escaped in JSON, read back exactly
    assert c.metadata["buffer_handouts"] == 1
    t = sm_profiler.decode(caps)
    lanes = t.lanes
    assert lanes["initialized"].all() and len(lanes["sm"]) == 12
    np.testing.assert_array_equal(lanes["sm"], 10 + lanes["block"])
    # lane (2, 1) attempted 6 records into 4 slots: exactly 2 dropped, in each capture
    dropped = lanes["dropped"][(lanes["block"] == 2) & (lanes["group"] == 1)]
    assert list(dropped) == [2, 2] and lanes["dropped"].sum() == 4
    ev = t.events
    assert (ev["end_ns"] - ev["start_ns"] == 1000).all()
    # the CLI reads it too
    assert cli_main(["stats", str(path)]) == 0
    assert 'compute "main" loop' in capsys.readouterr().out
    assert cli_main(["export", str(path), str(tmp_path / "t.json")]) == 0
    assert cli_main(["info", str(path)]) == 0
    info = capsys.readouterr().out
    assert "sm_profiler_host.h" in info and "host_writer" in info


def test_python_writes_the_documented_container(tmp_path):
    words = np.zeros(fmt.buffer_words(2, 1, 4), np.uint64)
    words[: fmt.HEADER_WORDS] = fmt.encode_header(2, 1, 4)
    cap = sm_profiler.Capture(words, {0: "a"}, {0: "g"}, "k", {"x": [1, 2]})
    path = tmp_path / "py.npz"
    sm_profiler.save_many([cap, cap], path)
    meta = check_container(path)
    assert meta["captures"][0]["metadata"] == {"x": [1, 2]}


BAD_INPUT = r"""
#include <sm_profiler_host.h>
int main(int argc, char** argv) {
    sm_profiler_buffer_t p = sm_profiler_create_buffer(2, 1, 4, 1);
    std::string what = argv[1];
    int rc = 0;
    if (what == "name") rc = sm_profiler_register_event(p, 1, "tab\there");
    if (what == "id") rc = sm_profiler_register_event(p, 4096, "x");
    if (what == "dup") rc = sm_profiler_register_event(p, 1, "x") == 0 &&
                            sm_profiler_register_event(p, 2, "x") != 0 ? 3 : 0;
    if (what == "group") rc = sm_profiler_register_group(p, 1, "g");
    if (what == "size") rc = sm_profiler_create_buffer(0, 1, 4, 1) == nullptr ? 4 : 0;
    if (what == "big") rc = sm_profiler_create_buffer(1 << 24, 1024, 1 << 20, 1) == nullptr ? 5 : 0;
    if (what == "dir") { sm_profiler_get_device_ptr(p); rc = sm_profiler_export_to_file(p, argv[2]); }
    if (what == "empty") rc = sm_profiler_export_to_file(p, argv[2]);
    sm_profiler_destroy_buffer(p);
    return rc;
}
"""


@needs_cxx
@pytest.mark.parametrize(
    "what, message",
    [
        ("name", "event 1: the name holds byte 0x09; use printable ASCII"),
        ("id", "event_no 4096 is out of range 0..4095"),
        ("dup", "event name 'x' is already event 1"),
        ("group", "group 1 is out of range 0..0"),
        ("size", "num_blocks must be positive, got 0"),
        ("big", "the limit is 64 GiB: lower max_events_per_group or num_blocks"),
        ("dir", "cannot write"),
        ("empty", "nothing to write: no launch was recorded"),
    ],
)
def test_cpp_host_header_refuses_bad_input_with_a_message_and_writes_nothing(
    tmp_path, what, message
):
    src = tmp_path / "bad.cpp"
    src.write_text(BAD_INPUT)
    exe = _build(tmp_path, str(src))
    target = tmp_path / ("missing_dir" if what == "dir" else ".") / "out.npz"
    r = subprocess.run([exe, what, str(target)], capture_output=True, text=True)
    assert r.returncode != 0
    assert r.stderr.startswith("sm_profiler: error: ") and message in r.stderr
    assert not target.exists() and not list(tmp_path.glob("*.tmp"))


# ---------------------------------------------------------------------------------------------
# The examples and the benchmark compile on the CPU (they run in tests/device/test_cuda_gpu.py)
# ---------------------------------------------------------------------------------------------


def _load_script(folder: str, name: str):
    import importlib.util

    path = os.path.join(ROOT, folder, f"{name}.py")
    spec = importlib.util.spec_from_file_location(f"sm_profiler_cuda_{name}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@needs_nvrtc
def test_nvrtc_compiles_the_cupy_example_and_every_benchmark_variant():
    pytest.importorskip("torch")
    text = cuda_tools.nvrtc_ptx(_load_script("examples", "cupy_rawkernel").CUDA_SRC)
    assert text.count("%globaltimer") == 4  # init, the chunk range (begin, end), the instant
    bench = _load_script("benchmarks", "cuda_overhead")
    for name, mode in bench.MODES.items():
        extra = tuple(d.removeprefix("-D") for d in bench.DEFINES.get(name, ()))
        defs = (f"SMP_MODE={mode}", "ITERS=4", "INNER=2", *extra)
        text = cuda_tools.nvrtc_ptx(bench.SRC, defines=defs)
        assert ("%globaltimer" in text) == (name != "base"), name
        if name == "ours_packed":  # the packed spelling, whatever the compiler's default
            assert "st.global.u64 [a]" in text and "st.global.v2.u32 [a]" not in text


NVCC = cuda_tools.shutil.which("nvcc")


@pytest.mark.skipif(NVCC is None, reason="needs nvcc")
def test_nvcc_builds_the_cpp_example_and_the_gpu_test_driver(tmp_path):
    """The host header with the CUDA runtime, the device header, the load_inline example's
    kernel file: built for sm_90 (run on a GPU by tests/device/test_cuda_gpu.py)."""
    inc = [f"-I{sm_profiler.cuda_include_dir()}", f"-I{HERE}"]
    for src in (
        os.path.join(ROOT, "examples", "cuda", "warp_specialized.cu"),
        os.path.join(HERE, "gpu_capture.cu"),
    ):
        exe = tmp_path / os.path.basename(src).replace(".cu", "")
        cmd = [NVCC, "-std=c++17", "-arch=sm_90", *inc, src, "-o", str(exe)]
        subprocess.run(cmd, check=True, capture_output=True, text=True)
        assert exe.stat().st_size > 0
    pytest.importorskip("torch")
    cu = tmp_path / "transpose.cu"
    cu.write_text(_load_script("examples", "cuda_load_inline").CUDA_SRC)
    cmd = [NVCC, "-std=c++17", "-arch=sm_90", "-c", *inc, str(cu), "-o", str(tmp_path / "t.o")]
    subprocess.run(cmd, check=True, capture_output=True, text=True)


@needs_nvrtc
@pytest.mark.parametrize("mode", list(INITS))
def test_nvrtc_ring_build_wraps_each_event_and_closes_the_lane(mode):
    # SM_PROFILER_RING: one AND per event (the slot), one close; without it, neither.
    src = _kernel(mode).replace(
        "    out[blockIdx.x", "    sm_profiler_flush(lane);\n    out[blockIdx.x"
    )
    ring = cuda_tools.nvrtc_ptx(src, defines=("SM_PROFILER_RING",))
    blocks = _asm_blocks(ring)
    records = [b for b in blocks if RECORD_STORE.search(b)]
    assert len(records) == N_EVENTS
    assert all(len(re.findall(r"and\.b32\s+s,", b)) == 1 for b in records)
    mark = f"{fmt.RING_MARK:#x}"
    assert sum(mark in b for b in blocks) == 1
    assert ring.count("%globaltimer") == N_EVENTS + 2  # the anchor, the events, the close's
    direct = cuda_tools.nvrtc_ptx(src)
    assert not re.search(r"and\.b32\s+s,", direct) and mark not in direct
