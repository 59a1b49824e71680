"""Hostile input, round 5 (issue 52): the old module paths (moved.py), imported from a script,
a module of the user's and importlib's own calls. Each test names the item of the issue it keeps
fixed; each failed on the main of 2026-11-29.

Each runs a fresh interpreter: what an old path does depends on what is imported already, and a
module whose spec is broken must not be left in the test process."""

from __future__ import annotations

import os
import re
import subprocess
import sys

from repo_paths import ROOT

# One old path a line, each a way a user's code reaches one (line numbers from 1).
OLD_IMPORTS = (
    "import importlib",
    "import sm_profiler.stats",
    "import sm_profiler.format as f",
    "from sm_profiler.stats_table import printable",
    "from sm_profiler import tables",
    'importlib.import_module("sm_profiler.summary")',
    "import sm_profiler",
    "sm_profiler.nesting",
)
WARNED = {2: "stats", 3: "format", 4: "stats_table", 5: "tables", 6: "summary", 8: "nesting"}


def _python(cwd, *args):
    """`python ARGS` under Python's default warning filters (no PYTHONWARNINGS, no -W)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONWARNINGS"}
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run(
        [sys.executable, *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=120,
    )


def _warned_at(stderr: str) -> dict[tuple[str, int], str]:
    """(file, line) -> the old path, of every DeprecationWarning Python printed."""
    found = re.findall(
        r"^(.+?):(\d+): DeprecationWarning: sm_profiler\.(\w+) moved to", stderr, re.MULTILINE
    )
    return {(path, int(line)): old for path, line, old in found}


def test_9_default_filters_show_the_warning_at_the_scripts_line(tmp_path):
    # Python shows a DeprecationWarning by default only where it is attributed to __main__; it
    # was attributed to `sys:1` (the stack level overshot importlib's frames), so nothing showed.
    script = tmp_path / "script.py"
    script.write_text("\n".join(OLD_IMPORTS) + "\n")
    out = _python(tmp_path, script)
    assert out.returncode == 0, out.stderr
    assert _warned_at(out.stderr) == {(str(script), n): old for n, old in WARNED.items()}, (
        out.stderr
    )
    assert "sys:1" not in out.stderr


def test_9_an_error_filter_for_main_raises_at_the_importing_line(tmp_path):
    script = tmp_path / "script.py"
    script.write_text("import os\n\nimport sm_profiler.format as f\n")
    out = _python(tmp_path, "-W", "error::DeprecationWarning:__main__", script)
    assert out.returncode == 1
    assert f'File "{script}", line 3, in <module>' in out.stderr
    assert (
        out.stderr.rstrip()
        .splitlines()[-1]
        .startswith("DeprecationWarning: sm_profiler.format moved to sm_profiler.wire.format")
    ), out.stderr


def test_9_a_module_of_the_users_is_named_not_its_importer(tmp_path):
    helper = tmp_path / "helper.py"
    helper.write_text(
        '"""A module of the user\'s."""\nfrom sm_profiler.stats import compute_stats\n'
    )
    script = tmp_path / "script.py"
    script.write_text("import helper\n")
    out = _python(tmp_path, "-W", "always::DeprecationWarning", script)
    assert out.returncode == 0, out.stderr
    assert _warned_at(out.stderr) == {(str(helper), 2): "stats"}, out.stderr


def test_10_a_module_made_from_the_old_paths_spec_keeps_its_own_spec(tmp_path):
    # module_from_spec wrote the alias's spec over sm_profiler.report.stats's, and nothing put
    # it back: a later importlib.reload of the module raised ImportError.
    code = """
import importlib, importlib.util, sys, warnings
warnings.simplefilter("ignore", DeprecationWarning)
import sm_profiler.report.stats as real
import sm_profiler.wire.format as fmt
own = real.__spec__
alias = importlib.util.find_spec("sm_profiler.stats")
module = importlib.util.module_from_spec(alias)
assert real.__spec__ is own, real.__spec__
assert module.compute_stats is real.compute_stats and "compute_stats" in dir(module)
assert importlib.reload(real) is real
sys.modules["sm_profiler.stats"] = module  # the rest of importlib's recipe
alias.loader.exec_module(module)
assert sys.modules["sm_profiler.stats"] is real, sys.modules["sm_profiler.stats"]
assert real.__spec__.name == "sm_profiler.report.stats", real.__spec__
assert importlib.reload(real) is real
import sm_profiler.format as old  # imported by its old path, then reloaded by it
assert old is fmt and importlib.reload(old) is fmt
assert fmt.__spec__.name == "sm_profiler.wire.format", fmt.__spec__
assert type(old) is type(sys)  # a plain module: Triton's JIT skips only those in a kernel
print("ok")
"""
    out = _python(tmp_path, "-c", code)
    assert out.returncode == 0 and out.stdout == "ok\n", out.stderr
