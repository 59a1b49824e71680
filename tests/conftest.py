"""Shared fixtures for the host-side tests (no GPU: everything runs with device="cpu").

Without a CUDA GPU, Triton's CPU interpreter is switched on here, before any test module imports
Triton: the Triton ops choose their interpreter path once, when sm_profiler.triton_ops is imported.
"""

from __future__ import annotations

import os


def _has_cuda() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except Exception:
        return False


if not _has_cuda():
    os.environ.setdefault("TRITON_INTERPRET", "1")

# The environment every test starts from. Libraries change os.environ behind a test's back:
# torch.compile's first Triton compile sets TRITON_PTXAS_PATH to the ptxas torch bundles
# (torch/_inductor/runtime/compile_tasks.py), and every later compile probe, a subprocess that
# inherits it, then reported that ptxas instead of Triton's own (the pinned-SASS tests failed in
# a whole `pytest tests/device` on a GPU and passed alone). `_environment_restored` puts it back.
ENV_AT_START = dict(os.environ)
PYTEST_OWN = "PYTEST_CURRENT_TEST"  # pytest's own, set and cleared around each test

import sys  # noqa: E402

# Helpers (reference encoder, kernels, probes, shared builders) live in tests/support, imported by
# their bare names; pytest puts each test file's own folder on sys.path, and this one.
# The repository root too, for the `benchmarks` package (its synthetic capture, scripts), which is
# not installed: `pytest` alone, unlike `python -m pytest`, does not put the working folder there.
_TESTS = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(_TESTS, "support"))
sys.path.insert(1, os.path.dirname(_TESTS))

import pytest  # noqa: E402
from reference_encoder import BEGIN, END, INSTANT, Lane, Stream, encode  # noqa: E402

# The run ends with its skips grouped by reason, one line each (pyproject.toml's addopts ask
# for failures and errors only, -rfE; a -rs of your own gets pytest's lines instead).
from skip_summary import pytest_terminal_summary  # noqa: E402, F401

from sm_profiler.wire.capture import Capture  # noqa: E402

# The slow set: marked `slow` here, left out by `python -m pytest -q` (pyproject.toml's addopts,
# -m "not slow"), run by `python -m pytest -q -m "slow or not slow"` and by CI's second stage
# (tests/README.md, "Markers"). Files (from tests/), or file::test, with what makes them slow;
# listed here rather than in each file, so that one place says what the default run leaves out.
SLOW = {
    "device/test_auto_compile.py": "every auto-mode kernel shape compiled by ptxas for 2 targets",
    "device/test_cuda_header.py": "nvcc, NVRTC and g++ builds of the CUDA C++ header",
    "device/test_cuda_host_writer.py": "g++ builds of the C++ capture writer, fuzzed",
    "host/test_capture_fuzz.py": "fuzzing of capture files",
    "host/test_decode_properties.py": "hypothesis round trips of the wire format",
    "host/test_merge_fuzz.py": "fuzzing of merge's inputs",
    "host/test_torch_trace_fuzz.py": "fuzzing of torch traces, through merge, stats and advise",
    "e2e/test_auto_overhead.py": "the auto-mode benchmark's models and processes on the CPU",
    "e2e/test_benchmarks.py": "the benchmark runner and a host benchmark, end to end",
    "e2e/test_benchmark_gluon_matmul.py": "the Gluon matmul benchmark's variants compiled",
    "e2e/test_benchmark_fix_first.py::"
    "test_every_plant_kernel_compiles_for_sm90_at_the_residency_its_case_needs": (
        "fix_first's planted-defect kernels compiled, plain and instrumented"
    ),
    "e2e/test_benchmark_fix_first.py::test_the_fma_kernels_keep_every_dependent_fma": (
        "fix_first's planted-defect kernels compiled, plain and instrumented"
    ),
    "e2e/test_examples_gluon.py": "the Gluon examples compiled for Hopper and Blackwell",
    "e2e/test_user_errors.py": "a new user's mistakes, each in a Python process of its own",
    "e2e/test_browser.py": "the Perfetto UI in headless Chromium",
    "host/test_auto_query.py::test_4_memory_stays_flat_as_ranks_grow": (
        "10 ranks of 150,000 programs written as Parquet, in processes of their own"
    ),
    "e2e/test_examples.py::test_warp_specialized_compile_matrix_is_as_documented": (
        "the example's compile matrix for sm_90 and sm_100"
    ),
}


@pytest.hookimpl(tryfirst=True)  # before -m deselects by marker
def pytest_collection_modifyitems(config, items):
    for item in items:
        where = os.path.relpath(str(item.path), _TESTS).replace(os.sep, "/")
        if where in SLOW or f"{where}::{item.originalname}" in SLOW:
            item.add_marker(pytest.mark.slow)
    _shuffle(config, items)


@pytest.fixture(autouse=True)
def _environment_restored():
    """Each test leaves os.environ as the session began, whatever it (or a library) changed, so
    that no test's outcome depends on the tests before it (monkeypatch undoes its own first)."""
    yield
    for name in set(os.environ) - set(ENV_AT_START) - {PYTEST_OWN}:
        del os.environ[name]
    for name, value in ENV_AT_START.items():
        if os.environ.get(name) != value:
            os.environ[name] = value


def pytest_addoption(parser):
    parser.addoption(
        "--shuffle",
        type=int,
        metavar="SEED",
        help="run the test files, and the tests in each, in an order shuffled by SEED: tests "
        "must pass in any order (files stay whole, so module fixtures are made once)",
    )


def _shuffle(config, items) -> None:
    """Items in the order --shuffle SEED asks for (deselection by -m / -k keeps it)."""
    seed = config.getoption("--shuffle")
    if seed is None:
        return
    import random

    rng = random.Random(seed)
    by_file: dict = {}
    for item in items:
        by_file.setdefault(item.path, []).append(item)
    files = list(by_file.values())
    rng.shuffle(files)
    for tests in files:
        rng.shuffle(tests)
    items[:] = [item for tests in files for item in tests]


@pytest.fixture
def small_stream() -> Stream:
    """Two blocks x two groups: nesting, an instant, an overlap, an unmatched end, an empty lane."""
    t0 = 5 * 2**32 - 10  # the low word wraps a few ns in
    return Stream(
        num_blocks=2,
        num_groups=2,
        capacity=8,
        lanes={
            (0, 0): Lane(
                t0,
                3,
                [(BEGIN, 1, t0 + 5), (BEGIN, 2, t0 + 20), (END, 2, t0 + 30), (END, 1, t0 + 40)],
            ),
            (0, 1): Lane(t0 + 1, 4, [(INSTANT, 7, t0 + 2), (END, 1, t0 + 3)]),
            (1, 0): Lane(
                t0 + 2,
                5,
                [(BEGIN, 1, t0 + 3), (BEGIN, 2, t0 + 4), (END, 1, t0 + 9), (END, 2, t0 + 11)],
            ),
        },
    )


@pytest.fixture
def small_capture(small_stream) -> Capture:
    return Capture(
        words=encode(small_stream),
        event_names={1: "load", 2: "mma", 7: "tick"},
        group_names={0: "producer", 1: "consumer"},
        kernel_name="small",
        metadata={"note": "fixture"},
    )
