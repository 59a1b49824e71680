"""The examples/ scripts as modules, for the tests that run them in-process through main()."""

from __future__ import annotations

import importlib.util
import os
import sys

from repo_paths import ROOT

EXAMPLES = os.path.join(ROOT, "examples")


def load_example(name: str):
    """Import examples/<name>.py as a module (examples/ is not a package)."""
    mod_name = f"sm_profiler_example_{name}"
    if mod_name in sys.modules:
        return sys.modules[mod_name]
    spec = importlib.util.spec_from_file_location(mod_name, os.path.join(EXAMPLES, f"{name}.py"))
    mod = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = mod
    spec.loader.exec_module(mod)
    return mod
