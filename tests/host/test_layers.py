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

# Lower layers never import higher ones. A module's layer is its folder's, whatever its name;
# the package's root holds the basics, and the entry points above everything: the package itself
# and profiler.py (the API), the command line.
LAYERS = ("basics", "wire", "record", "trace", "report", "export", "api", "cli")
FOLDERS = {
    "wire": "wire",
    "record": "record",
    "trace": "trace",
    "report": "report",
    "export": "export",
    "auto_mode": "api",  # the recording front end: binding, rewrite, graphs, session, script
}
ENTRY_POINTS = {"": "api", "profiler": "api", "cli": "cli", "__main__": "cli"}


def layer_of(module: str) -> int | None:
    """The layer's index of a module (dotted below sm_profiler), None where it has none (a
    folder no layer owns)."""
    folder, _, rest = module.partition(".")
    if rest or folder in FOLDERS:  # a folder's module, or the folder's __init__
        return LAYERS.index(FOLDERS[folder]) if folder in FOLDERS else None
    return LAYERS.index(ENTRY_POINTS.get(module, "basics"))


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
    assert "export.merge" in graph["cli"]  # inside a function: from .export import merge
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


def _is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _private_uses(name: str, path: str, modules) -> list[str]:
    """Where `name` takes a private name (`_x`) of another module of the package: `from .m
    import _x`, or `m._x` of a module `m` it imported."""
    tree = ast.parse(open(path, encoding="utf-8").read())
    is_pkg = path.endswith("__init__.py")
    here = name.split(".") if name else []
    package = here if is_pkg else here[:-1]
    found, bound = [], {}  # bound: local name -> the package's module it names
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
            elif (node.module or "").split(".")[0] == "sm_profiler":
                base = []
            else:
                continue
            mod = ".".join(base + (node.module.split(".") if node.module else []))
            mod = mod.removeprefix("sm_profiler").lstrip(".") if not node.level else mod
            for a in node.names:
                sub = f"{mod}.{a.name}".lstrip(".")
                if sub in modules:
                    bound[a.asname or a.name] = sub
                elif _is_private(a.name):
                    found.append(
                        f"{name}:{node.lineno}: from {mod or 'sm_profiler'} import {a.name}"
                    )
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] == "sm_profiler" and a.asname:
                    bound[a.asname] = a.name.removeprefix("sm_profiler").lstrip(".")
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and _is_private(node.attr)
            and isinstance(node.value, ast.Name)
            and bound.get(node.value.id, name) != name
        ):
            found.append(f"{name}:{node.lineno}: {bound[node.value.id]}.{node.attr}")
    return found


def test_no_module_takes_another_module_s_private_name():
    """Issue 53, item 2: 13 imports took a private name of another module (torch_parts took
    merge's _coverage, _timelines and _write_json): what a module shares is public, so that
    its author knows who reads it."""
    modules = _modules()
    found = [u for m, p in sorted(modules.items()) for u in _private_uses(m, p, modules)]
    assert not found, "private names taken across modules:\n" + "\n".join(found)


def test_the_private_name_reader_finds_both_forms(tmp_path):
    # `from .m import _x` and `m._x` are found; a module's own, public and dunder names are not.
    mod = tmp_path / "x.py"
    mod.write_text(
        "from .wire import capture\nfrom .wire.capture import _short, load\n"
        "capture._read_meta(1)\ncapture.__name__\nimport os\nos._exit\n"
    )
    modules = {"x": str(mod), "wire": "", "wire.capture": ""}
    assert _private_uses("x", str(mod), modules) == [
        "x:2: from wire.capture import _short",
        "x:3: wire.capture._read_meta",
    ]


def test_auto_mode_s_old_paths_are_the_moved_modules():
    """Issue 53, item 2: auto mode's table, report and schedule moved to their layers; the old
    paths that users and the docs imported still give the same modules, with a
    DeprecationWarning, by import and by attribute. A fresh interpreter."""
    import subprocess
    import sys

    code = """
import warnings
warnings.simplefilter("error", DeprecationWarning)
import sm_profiler.auto_mode
try:
    import sm_profiler.auto_mode.table
except DeprecationWarning as w:
    assert "sm_profiler.auto_mode.table moved to sm_profiler.trace.auto_table" in str(w), w
else:
    raise AssertionError("no warning")
warnings.simplefilter("ignore", DeprecationWarning)
import sm_profiler.auto_mode.table as old
import sm_profiler.trace.auto_table as new
from sm_profiler.auto_mode.schedule import Schedule
assert old is new and Schedule.__module__ == "sm_profiler.wire.auto_schedule"
assert sm_profiler.auto_mode.report.launch_reports.__module__ == "sm_profiler.report.auto_report"
try:
    sm_profiler.auto_mode.records  # moved too, but no one imported it: no old path
except AttributeError:
    print("ok")
"""
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr
