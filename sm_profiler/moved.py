"""The module paths that moved into the layer folders (record/, wire/, trace/, report/,
export/): `import sm_profiler.stats` still gives `sm_profiler.report.stats`, the same module.

The Triton and Gluon device APIs keep their short paths for good (`sm_profiler.triton_ops`,
`sm_profiler.gluon_ops`: kernels import them by name). Every other old path warns
(DeprecationWarning) and goes in the next release; docs/history.md lists them.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings

# old path below sm_profiler -> its module now
MOVED = {
    "ptx": "record.ptx",
    "triton_ops": "record.triton_ops",
    "gluon_ops": "record.gluon_ops",
    "cuda": "record.cuda",
    "occupancy": "record.occupancy",
    "clock": "record.clock",
    "slots": "record.slots",
    "format": "wire.format",
    "capture": "wire.capture",
    "torch_trace": "wire.torch_trace",
    "nesting": "trace.nesting",
    "timeline": "trace.timeline",
    "summary": "trace.summary",
    "stats": "report.stats",
    "stats_table": "report.stats_table",
    "coverage": "report.coverage",
    "tables": "report.tables",
    "plot": "export.plot",
    "merge": "export.merge",
    "ui_server": "export.ui_server",
}
# Not aliased: `sm_profiler.decode` is the function (the module is sm_profiler.trace.decode), and
# `sm_profiler.trace` is now the folder, which holds what trace.py held (TraceData, RANGE, ...).
PERMANENT = frozenset({"triton_ops", "gluon_ops"})
PACKAGE = __name__.rpartition(".")[0]


def resolve(old: str, stacklevel: int = 3):
    """The module now at old path `old` (below the package), warning where the path goes away."""
    new = MOVED[old]
    if old not in PERMANENT:
        warnings.warn(
            f"{PACKAGE}.{old} moved to {PACKAGE}.{new}; import it from there (the old path "
            "goes in the next release)",
            DeprecationWarning,
            stacklevel=stacklevel,
        )
    return importlib.import_module(f"{PACKAGE}.{new}")


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds `sm_profiler.<old>` and loads it as the module now at its new path."""

    def find_spec(self, fullname, path=None, target=None):
        package, _, old = fullname.rpartition(".")
        if package != PACKAGE or old not in MOVED:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def __init__(self):
        # alias name -> the module's own spec, which the import system writes the alias's over
        # between the two calls below; keyed by alias, as two threads may import two at once
        self._specs: dict = {}

    def create_module(self, spec):
        module = resolve(spec.name.rpartition(".")[2], stacklevel=8)
        self._specs[spec.name] = module.__spec__
        return module

    def exec_module(self, module):
        module.__spec__ = self._specs.pop(module.__spec__.name)


def install() -> None:
    if not any(isinstance(f, _Alias) for f in sys.meta_path):
        sys.meta_path.append(_Alias())


def submodule(package: str, name: str):
    """`package.name` imported on first use, for a layer folder's `__getattr__`: after `import
    sm_profiler`, `sm_profiler.report.stats.compute_stats` works as the docs write it, as the
    flat package's `sm_profiler.stats` did. AttributeError where there is no such module."""
    import importlib.util

    if name.startswith("__") or importlib.util.find_spec(f"{package}.{name}") is None:
        raise AttributeError(f"module {package!r} has no attribute {name!r}")
    return importlib.import_module(f"{package}.{name}")
