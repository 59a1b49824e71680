"""The package's layers, read from its imports (issue 44): no import circle anywhere in
sm_profiler/, and no module imports one of a layer above its own (docs/architecture.md, "Layers").
Every import counts, a function's own too; a type named under `if TYPE_CHECKING:` counts for the
circles (issue 53: a type-only circle is still two modules that need each other to be read) but
not for the layers."""

from __future__ import annotations

import ast
import os

from repo_paths import ROOT

PACKAGE = os.path.join(ROOT, "sm_profiler")

# Lower layers never import higher ones. A module's layer is its folder's; the files at the top
# and auto mode's (one feature across the layers, beside record/) are placed by name here.
LAYERS = ("basics", "wire", "record", "trace", "report", "export", "api", "cli")
FOLDERS = {
    "wire": "wire",
    "record": "record",
    "trace": "trace",
    "report": "report",
    "export": "export",
}
BY_NAME = {
    "basics": (
        "errors", "paths", "progress", "units", "text", "moved",
        "auto_mode.registers", "auto_mode.stop_signals", "auto_mode.via_triton",
        "auto_mode.flight_triggers",
    ),
    "wire": ("auto_mode.records", "auto_mode.areas", "auto_mode.schedule"),
    "record": (
        "auto_mode.driver", "auto_mode.state", "auto_mode.graph_switch", "auto_mode.graph_stage",
        "auto_mode.rewrite", "auto_mode.binding", "auto_mode.rescue",
    ),
    "trace": ("auto_mode.table",),
    "report": ("auto_mode.report",),
    "export": ("auto_mode.job", "auto_mode.torch_parts"),
    "api": (
        "", "profiler", "auto_mode", "auto_mode.session", "auto_mode.script", "auto_mode.flight",
        "auto_mode.torch_profiler",
    ),
    "cli": ("cli", "__main__"),
}  # fmt: skip


def layer_of(module: str) -> int | None:
    """The layer's index of a module (dotted below sm_profiler), None where it has none."""
    for layer, names in BY_NAME.items():
        if module in names:
            return LAYERS.index(layer)
    folder = module.split(".")[0]
    if folder in FOLDERS and module not in BY_NAME["api"]:
        return LAYERS.index(FOLDERS[folder])
    return None


LAYER_NAMES = LAYERS


def _modules() -> dict[str, str]:
    """{dotted name below sm_profiler ('' for the package itself): path}."""
    out = {}
    for folder, _, files in os.walk(PACKAGE):
        for f in files:
            if f.endswith(".py"):
                rel = os.path.relpath(os.path.join(folder, f), PACKAGE)[:-3].replace(os.sep, ".")
                out[rel.removesuffix("__init__").rstrip(".")] = os.path.join(folder, f)
    return out


def _imports(name: str, path: str, modules, typing: bool = False) -> set[str]:
    """The package's modules that `name` imports, anywhere in it; under TYPE_CHECKING only with
    `typing`."""
    tree = ast.parse(open(path, encoding="utf-8").read())
    typing_only = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", "") == "TYPE_CHECKING":
            if not typing:
                typing_only.update(id(x) for b in node.body for x in ast.walk(b))
    is_pkg = path.endswith("__init__.py")
    here = name.split(".") if name else []
    package = here if is_pkg else here[:-1]
    out = set()
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
            elif (node.module or "").split(".")[0] == "sm_profiler":
                base = []
            else:
                continue
            mod = ".".join(base + (node.module.split(".") if node.module else []))
            if not node.level:
                mod = mod.removeprefix("sm_profiler").lstrip(".")
            for a in node.names:
                sub = f"{mod}.{a.name}".lstrip(".")
                out.add(sub if sub in modules else mod)
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] == "sm_profiler":
                    out.add(a.name.removeprefix("sm_profiler").lstrip("."))
    return {m for m in out if m in modules and m != name}


def _graph(typing: bool = False) -> dict[str, set[str]]:
    modules = _modules()
    return {m: _imports(m, p, modules, typing) for m, p in modules.items()}


def _circles(graph) -> list[list[str]]:
    """The strongly connected parts of more than one module (Tarjan)."""
    index, low, stack, on, found, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            part = []
            while True:
                w = stack.pop()
                on.discard(w)
                part.append(w)
                if w == v:
                    break
            if len(part) > 1:
                found.append(sorted(part))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_circle():
    graph = _graph(typing=True)  # a type-only import closes a circle too
    assert len(graph) > 40  # every module was read
    circles = _circles(graph)
    assert not circles, "import circles: " + "; ".join(" <-> ".join(c) for c in circles)


def test_every_module_has_a_layer():
    missing = sorted(m for m in _graph() if layer_of(m) is None)
    assert not missing, f"place these modules in a layer (tests/host/test_layers.py): {missing}"


def test_no_module_imports_a_layer_above_its_own():
    graph = _graph()
    up = [
        f"{a or 'sm_profiler'} ({LAYERS[layer_of(a)]}) imports {b} ({LAYERS[layer_of(b)]})"
        for a, bs in sorted(graph.items())
        for b in sorted(bs)
        if None not in (layer_of(a), layer_of(b)) and layer_of(b) > layer_of(a)
    ]
    assert not up, "imports that run up a layer:\n" + "\n".join(up)


def test_the_reader_finds_what_it_should():
    # The checks above are only as good as the import reader: it must see a function's own
    # import, relative and absolute forms, and leave TYPE_CHECKING imports out.
    graph = _graph()
    assert "wire.capture" in graph["trace.decode"]  # from ..wire.capture import ...
    assert (
        "auto_mode.table" in graph["export.merge"]
    )  # inside a function: from .auto_mode.table import
    assert "trace.timeline" not in graph["export.chrome"]  # under TYPE_CHECKING only
    assert "trace.timeline" in _graph(typing=True)["export.chrome"]  # ... unless asked
    assert "auto_mode.session" in graph["auto_mode"]  # the package's __init__


def test_old_module_paths_are_the_moved_modules():
    """Issue 44: the modules moved into the layer folders; their old paths import the same module
    objects for one release, with a DeprecationWarning; the device APIs' paths stay without one.
    A fresh interpreter, so that nothing is imported yet."""
    import subprocess
    import sys

    code = """
import warnings
warnings.simplefilter("error", DeprecationWarning)
import sm_profiler
import sm_profiler.report.stats as new
try:
    import sm_profiler.stats
except DeprecationWarning as w:
    assert "sm_profiler.stats moved to sm_profiler.report.stats" in str(w), w
else:
    raise AssertionError("no warning")
warnings.simplefilter("ignore", DeprecationWarning)
import sm_profiler.stats as old
from sm_profiler import stats_table
from sm_profiler.format import Layout
assert old is new and old.__spec__.name == "sm_profiler.report.stats", old.__spec__
assert stats_table is __import__("sm_profiler.report.stats_table").report.stats_table
assert Layout.__module__ == "sm_profiler.wire.format"
assert callable(sm_profiler.decode)  # the function, not the module trace/decode.py
warnings.simplefilter("error", DeprecationWarning)
import sm_profiler.triton_ops as ops
import sm_profiler.record.triton_ops
assert ops is sm_profiler.record.triton_ops
print("ok")
"""
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr
