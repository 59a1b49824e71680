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

from sm_profiler.capture import Capture  # noqa: E402


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
