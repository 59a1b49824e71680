"""The package's layers, read from its imports (issue 44): no import circle anywhere in
sm_profiler/, and no module imports one of a layer above its own (docs/architecture.md, "Layers").
Every import counts, a function's own too; a type named under `if TYPE_CHECKING:` does not."""

from __future__ import annotations

import ast
import os

from repo_paths import ROOT

PACKAGE = os.path.join(ROOT, "sm_profiler")

# Lower layers never import higher ones. A new module is placed here (the test says so).
LAYERS = {
    "basics": (
        "errors", "paths", "progress", "units", "summary",
        "auto_mode.registers", "auto_mode.stop_signals", "auto_mode.via_triton",
    ),
    "wire": (
        "format", "ptx", "capture", "slots", "torch_trace", "cuda",
        "auto_mode.records", "auto_mode.areas", "auto_mode.schedule",
    ),
    "device": (
        "triton_ops", "gluon_ops", "occupancy", "clock",
        "auto_mode.driver", "auto_mode.state", "auto_mode.graph_switch", "auto_mode.graph_stage",
        "auto_mode.rewrite", "auto_mode.binding",
    ),
    "trace": ("trace", "nesting", "timeline", "decode", "tables", "auto_mode.table"),
    "report": ("stats", "stats_table", "coverage", "auto_mode.report"),
    "export": (
        "export", "export.chrome", "export.perfetto", "export.protobuf", "plot", "merge",
        "ui_server", "auto_mode.job", "auto_mode.torch_parts",
    ),
    "api": (
        "", "profiler", "auto_mode", "auto_mode.session", "auto_mode.script",
        "auto_mode.torch_profiler",
    ),
    "cli": ("cli", "__main__"),
}  # fmt: skip
LAYER_OF = {m: i for i, (_, mods) in enumerate(LAYERS.items()) for m in mods}
LAYER_NAMES = list(LAYERS)


def _modules() -> dict[str, str]:
    """{dotted name below sm_profiler ('' for the package itself): path}."""
    out = {}
    for folder, _, files in os.walk(PACKAGE):
        for f in files:
            if f.endswith(".py"):
                rel = os.path.relpath(os.path.join(folder, f), PACKAGE)[:-3].replace(os.sep, ".")
                out[rel.removesuffix("__init__").rstrip(".")] = os.path.join(folder, f)
    return out


def _imports(name: str, path: str, modules) -> set[str]:
    """The package's modules that `name` imports, anywhere in it but under TYPE_CHECKING."""
    tree = ast.parse(open(path, encoding="utf-8").read())
    typing_only = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", "") == "TYPE_CHECKING":
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


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {m: _imports(m, p, modules) for m, p in modules.items()}


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
    graph = _graph()
    assert len(graph) > 40  # every module was read
    circles = _circles(graph)
    assert not circles, "import circles: " + "; ".join(" <-> ".join(c) for c in circles)


def test_every_module_has_a_layer():
    missing = sorted(set(_graph()) - set(LAYER_OF))
    assert not missing, f"place these modules in a layer (tests/host/test_layers.py): {missing}"


def test_no_module_imports_a_layer_above_its_own():
    graph = _graph()
    up = [
        f"{a or 'sm_profiler'} ({LAYER_NAMES[LAYER_OF[a]]}) imports {b} "
        f"({LAYER_NAMES[LAYER_OF[b]]})"
        for a, bs in sorted(graph.items())
        for b in sorted(bs)
        if a in LAYER_OF and b in LAYER_OF and LAYER_OF[b] > LAYER_OF[a]
    ]
    assert not up, "imports that run up a layer:\n" + "\n".join(up)


def test_the_reader_finds_what_it_should():
    # The checks above are only as good as the import reader: it must see a function's own
    # import, relative and absolute forms, and leave TYPE_CHECKING imports out.
    graph = _graph()
    assert "capture" in graph["decode"]  # from .capture import ...
    assert "auto_mode.table" in graph["merge"]  # inside a function: from .auto_mode.table import
    assert "auto_mode.binding" not in graph["auto_mode.state"]  # under TYPE_CHECKING only
    assert "auto_mode.session" in graph["auto_mode"]  # the package's __init__
