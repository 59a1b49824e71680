"""The module paths that moved into the layer folders (record/, wire/, trace/, report/,
export/): `import sm_profiler.stats` still gives `sm_profiler.report.stats`, the same module, and
`import sm_profiler.auto_mode.table` gives `sm_profiler.trace.auto_table` (issue 53: auto mode's
parts that are not its recording front end went to their layers).

The Triton and Gluon device APIs keep their short paths for good (`sm_profiler.triton_ops`,
`sm_profiler.gluon_ops`: kernels import them by name). Every other old path warns
(DeprecationWarning) and goes in the next release; docs/history.md lists them.
"""

from __future__ import annotations

import functools
import importlib
import importlib.abc
import importlib.util
import sys
import types
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
    # issue 53: the ones users and the docs imported; the rest of auto mode's just moved
    "auto_mode.table": "trace.auto_table",
    "auto_mode.report": "report.auto_report",
    "auto_mode.schedule": "wire.auto_schedule",
}
# Not aliased: `sm_profiler.decode` is the function (the module is sm_profiler.trace.decode), and
# `sm_profiler.trace` is now the folder, which holds what trace.py held (TraceData, RANGE, ...).
PERMANENT = frozenset({"triton_ops", "gluon_ops"})
PACKAGE = __name__.rpartition(".")[0]


def resolve(old: str):
    """The module now at old path `old` (below the package), warning where the path goes away."""
    new = MOVED[old]
    if old not in PERMANENT:
        _warn_importer(
            f"{PACKAGE}.{old} moved to {PACKAGE}.{new}; import it from there (the old path "
            "goes in the next release)"
        )
    return importlib.import_module(f"{PACKAGE}.{new}")


def _warn_importer(message: str) -> None:
    """A DeprecationWarning at the line that named the old path: the first frame outside this
    module, the package's `__getattr__` and importlib (its frozen _bootstrap frames, or
    import_module's). A stacklevel cannot say it: how many of importlib's frames lie between
    depends on the import statement and on the Python, and warnings.warn skips some of them
    itself; one too many and the warning lands on `sys:1`, where Python's default filters,
    which show a DeprecationWarning only in __main__, hide it."""
    frame = sys._getframe(1)
    while frame is not None and _is_ours_or_importlibs(frame):
        frame = frame.f_back
    if frame is None:  # nothing outside: the interpreter itself imported it
        warnings.warn(message, DeprecationWarning, stacklevel=2)
        return
    globals_ = frame.f_globals
    warnings.warn_explicit(
        message,
        DeprecationWarning,
        frame.f_code.co_filename,
        frame.f_lineno,
        module=globals_.get("__name__", "<string>"),
        registry=globals_.setdefault("__warningregistry__", {}),
    )


def _is_ours_or_importlibs(frame) -> bool:
    name = frame.f_globals.get("__name__", "")
    return name in (__name__, PACKAGE, "importlib") or name.startswith("importlib.")


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds `sm_profiler.<old>` and loads it as the module now at its new path."""

    def find_spec(self, fullname, path=None, target=None):
        if _old_path(fullname) not in MOVED:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec):
        """A stand-in, not the module: the import system writes the alias's spec over what this
        returns (importlib's _init_module_attrs), and the module must keep its own, which
        importlib.reload needs (were it the module, importlib.util.module_from_spec of the
        alias's spec, which no exec_module follows, would leave it broken). exec_module puts the
        module itself in sys.modules, which the import statement returns; a stand-in kept from
        module_from_spec reads through to the module."""
        module = resolve(_old_path(spec.name))
        stand_in = types.ModuleType(spec.name)
        stand_in.__getattr__ = functools.partial(getattr, module)
        stand_in.__dir__ = module.__dir__
        return stand_in

    def exec_module(self, module):
        # The module at the new path, imported (and run) by create_module's resolve.
        new = MOVED[_old_path(module.__name__)]
        sys.modules[module.__name__] = importlib.import_module(f"{PACKAGE}.{new}")


def _old_path(fullname: str) -> str | None:
    """`fullname` below the package ('stats', 'auto_mode.table'), None outside it."""
    head = PACKAGE + "."
    return fullname[len(head) :] if fullname.startswith(head) else None


def moved_from(package: str, name: str):
    """The module now at the old path `package.name`, for a folder's `__getattr__`
    (`sm_profiler.auto_mode.report` after `import sm_profiler.auto_mode`); None where no
    module moved from there."""
    old = _old_path(f"{package}.{name}")
    return resolve(old) if old in MOVED else None


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
