"""The test harness itself (tests/conftest.py): no test's outcome depends on the tests before it."""

import os

LEAKED = "SM_PROFILER_TEST_LEAKED_VARIABLE"


def test_a_library_that_changes_the_environment_behind_a_test():
    # As torch.compile does with TRITON_PTXAS_PATH: set directly, not through monkeypatch.
    os.environ[LEAKED] = "set by an earlier test"
    os.environ["PATH"] = "/changed"


def test_the_next_test_starts_from_the_session_environment():
    # Runs after the test above in file order (and in any --shuffle order, it holds too).
    from conftest import ENV_AT_START, PYTEST_OWN

    assert LEAKED not in os.environ
    assert {k: v for k, v in os.environ.items() if k != PYTEST_OWN} == ENV_AT_START
