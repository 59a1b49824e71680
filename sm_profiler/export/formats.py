"""The output formats, one registry: `export()`, `sm-profiler export` (its --format choices, its
help, the stdout rules) and docs/architecture.md's recipe all read it. A format is a writer over
a Drawing plus one entry here::

    register(Format("toy", (".toy",), write_toy, binary=False, title="toy",
                    description="one line per slice"))

`write_toy(drawing, f)` writes the bytes of the drawing (sm_profiler.trace.drawing) to `f`, a
binary file export() opened (gzipped where the path ends .gz); it decides no layout and reads
nothing but the drawing.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import BinaryIO

from ..errors import ConfigError
from ..trace.drawing import Drawing
from . import chrome, perfetto


@dataclass(frozen=True)
class Format:
    """One output format: what it is called, which files are it, and the writer that makes
    them."""

    name: str  # export(format=...), --format: 'perfetto'
    extensions: tuple[str, ...]  # lower case, dot included: ('.perfetto-trace', '.pftrace')
    write: Callable[[Drawing, BinaryIO], None]  # the drawing's bytes, written to the file
    binary: bool  # bytes a terminal must not get (sm-profiler export - refuses a tty)
    title: str  # how prose names it: 'a binary Perfetto trace'
    description: str  # what --format's help says it is: 'Perfetto protobuf'
    aliases: tuple[str, ...] = ()  # more names --format takes: ('pftrace',)

    @property
    def suffix(self) -> str:
        """The extension of a file written without a name to go by (stdout's temporary file)."""
        return next(e for e in self.extensions if not e.endswith(".gz"))


FORMATS: dict[str, Format] = {}  # name -> format, in the order registered
# Extension -> format name: each format's, longest first, in the order registered (the order
# the errors list them in).
EXTENSIONS: dict[str, str] = {}
_NAMES: dict[str, str] = {}  # every name and alias -> format name


def register(fmt: Format) -> Format:
    """Add `fmt` to the registry (a name, alias or extension taken already is refused)."""
    names = (fmt.name, *fmt.aliases)
    taken = [n for n in names if n in _NAMES] + [e for e in fmt.extensions if e in EXTENSIONS]
    if taken:
        raise ConfigError(
            f"cannot register the output format {fmt.name!r}: {', '.join(taken)} taken already "
            f"(sm_profiler.export.FORMATS lists them: {', '.join(FORMATS)})"
        )
    ok = [e for e in fmt.extensions if e.startswith(".") and e == e.lower()]
    if ok != list(fmt.extensions) or all(e.endswith(".gz") for e in ok):
        raise ConfigError(
            f"cannot register the output format {fmt.name!r} with extensions {fmt.extensions}: "
            "give lower-case extensions with their dot, one of them not ending .gz"
        )
    FORMATS[fmt.name] = fmt
    for ext in sorted(fmt.extensions, key=len, reverse=True):
        EXTENSIONS[ext] = fmt.name
    _NAMES.update(dict.fromkeys(names, fmt.name))
    return fmt


def named(name: str) -> Format:
    """The format `name` (a name or an alias) names."""
    if name not in _NAMES:
        raise ConfigError(f"unknown export format {name!r}; use one of {', '.join(FORMATS)}")
    return FORMATS[_NAMES[name]]


def names() -> list[str]:
    """Every name and alias --format takes."""
    return sorted(_NAMES)


def of_path(path: str | os.PathLike) -> Format | None:
    """The format `path`'s extension says (the longest extension that matches), or None."""
    name = os.fspath(path).lower()
    for ext in sorted(EXTENSIONS, key=len, reverse=True):
        if name.endswith(ext):
            return FORMATS[EXTENSIONS[ext]]
    return None


def unknown_extension(path: str | os.PathLike, how: str) -> ConfigError:
    """The error of a path whose extension names no format; `how` spells the option that picks
    one ('--format {}', "format='{}'")."""
    pick = " / ".join(how.format(n) for n in FORMATS)
    return ConfigError(
        f"cannot tell the trace format of {os.fspath(path)!r} from its extension; use one of "
        f"{', '.join(EXTENSIONS)} or pass {pick}"
    )


# The built-in formats: name, extensions, writer, binary, title (in prose), description (in
# --format's help), aliases.
_BUILT_IN = (
    ("perfetto", (".perfetto-trace", ".pftrace"), perfetto.write_trace, True, "Perfetto",
     "Perfetto protobuf", ("pftrace",)),
    ("chrome", (".json", ".json.gz"), chrome.write_trace, False, "Chrome JSON",
     "Chrome trace-event JSON", ("json",)),
)  # fmt: skip
for _entry in _BUILT_IN:
    register(Format(*_entry))
