"""Where things are, for tests and helpers: the repository root and the tests' data folders.

Tests import these rather than counting `os.path.dirname` levels from their own file, so that a
test file can move between tests/host, tests/device and tests/e2e without changing.
"""

import os

SUPPORT = os.path.dirname(os.path.abspath(__file__))  # tests/support: helpers, kernels, probes
TESTS = os.path.dirname(SUPPORT)
ROOT = os.path.dirname(TESTS)  # the repository root
FIXTURES = os.path.join(TESTS, "fixtures")  # recorded captures, traces, kernel sources
CUDA_SOURCES = os.path.join(TESTS, "cuda")  # the C++ sources the CUDA tests compile
