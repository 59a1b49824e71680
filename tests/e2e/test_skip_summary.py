"""The README's test command ends with its skips grouped by reason, failures in full (issue 56,
item 2: `-ra` printed 99 `SKIPPED` lines of 117 on a CPU machine, the result at the very end),
run by pytester over a tiny test folder with the project's own `addopts` and skip summary
(tests/support/skip_summary.py)."""

from __future__ import annotations

import os
import re
import shlex

import skip_summary
from repo_paths import ROOT

pytest_plugins = ["pytester"]

TINY = """
import pytest

@pytest.mark.parametrize("i", range(3))
def test_gpu(i):
    pytest.skip("needs a CUDA GPU")

def test_duckdb():
    pytest.importorskip("no_such_module_h56", reason="duckdb is not installed")

@pytest.mark.skip(reason="needs a CUDA GPU")
def test_gpu_marked():
    pass

def test_passes():
    pass

def test_fails():
    assert 1 + 1 == 3, "arithmetic is broken"
"""


# In-process, the plugin is the module this file imported (pytest warns it cannot rewrite it).
PLUGIN = ["-p", "skip_summary", "-W", "ignore::pytest.PytestAssertRewriteWarning"]


def project_addopts() -> list[str]:
    """pyproject.toml's addopts, as the README's `python -m pytest -q` gets them."""
    with open(os.path.join(ROOT, "pyproject.toml"), encoding="utf-8") as f:
        (line,) = re.findall(r"^addopts = \"(.*)\"$", f.read(), re.M)
    return shlex.split(line)


def test_2_skips_are_grouped_by_reason_and_failures_shown_in_full(pytester):
    pytester.makepyfile(test_tiny=TINY)
    res = pytester.runpytest("-q", *project_addopts(), *PLUGIN)
    res.assert_outcomes(passed=1, failed=1, skipped=5)
    out = res.stdout.lines
    assert not [ln for ln in out if ln.startswith("SKIPPED")]
    # the reasons, one line each, most frequent first: two lines of test code skip for a GPU
    title = next(i for i, ln in enumerate(out) if f" {skip_summary.TITLE} " in ln)
    assert out[title + 1 : title + 3] == ["4  needs a CUDA GPU", "1  duckdb is not installed"]
    # the failure in full, then named once more just before the result
    text = "\n".join(out)
    assert "AssertionError: arithmetic is broken" in text and "assert 1 + 1 == 3" in text
    # (pytest may carry the failure's message over more than one line, as pytest 9.2 did in a
    # whole run, so the name is looked for in the short summary, not on a fixed line)
    summary = out[max(i for i, ln in enumerate(out) if "short test summary info" in ln) :]
    assert [ln for ln in summary if ln.startswith("FAILED test_tiny.py::test_fails")], summary
    assert re.match(r"1 failed, 1 passed, 5 skipped in ", out[-1])


def test_2_skip_lines_asked_for_are_pytests_own(pytester):
    pytester.makepyfile(test_tiny=TINY)
    res = pytester.runpytest("-q", "-rs", *PLUGIN)
    out = res.stdout.lines
    assert not [ln for ln in out if f" {skip_summary.TITLE} " in ln]
    assert len([ln for ln in out if ln.startswith("SKIPPED")]) == 3  # folded by file and line


def test_2_the_projects_conftest_groups_its_skips(request):
    (conftest,) = [
        p
        for p in request.config.pluginmanager.get_plugins()
        if getattr(p, "__file__", "") == os.path.join(ROOT, "tests", "conftest.py")
    ]
    assert conftest.pytest_terminal_summary is skip_summary.pytest_terminal_summary
    assert "-ra" not in project_addopts() and not any(
        o.startswith("-r") and set(o[2:]) & set("saA") for o in project_addopts()
    )
