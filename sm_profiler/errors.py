"""Every exception and warning sm_profiler raises, in one place.

Messages name the problem, carry the numbers, and say what to do about it. An error a user can
reach is one of these classes (each also a ValueError, TypeError, OSError, RuntimeError or
ImportError, so that code catching those keeps working); a bare builtin raise is left only where
it states an internal invariant, and says so (tests/host/test_errors.py keeps the list).
"""

from __future__ import annotations


class SmProfilerError(Exception):
    """Base class: catch this to catch anything sm_profiler raises on purpose."""


class ConfigError(SmProfilerError, ValueError):
    """A size, id, name or option given to the profiler is invalid."""


class UsageError(SmProfilerError, TypeError):
    """A device op was given an argument of the wrong kind (a run-time value where a compile-time
    one is needed, a tensor of the wrong element type)."""


class FormatError(SmProfilerError, ValueError):
    """A buffer or capture file does not hold a valid sm_profiler trace."""


class CaptureError(SmProfilerError, OSError):
    """A capture or trace file cannot be read or written."""


class DeviceError(SmProfilerError, RuntimeError):
    """The GPU or its driver is missing or failed a call sm_profiler made (libcuda, a clock
    probe): the message names the call, its error and what to check."""


class RewriteError(SmProfilerError):
    """Auto mode's PTX rewrite met PTX in a shape it does not know; the kernel is left as it
    was (auto mode catches it and warns with an AutoWarning: it never reaches the caller)."""


class SmProfilerWarning(UserWarning):
    """Base class of sm_profiler's warnings: filter this to filter them all."""


class AutoWarning(SmProfilerWarning):
    """A kernel that auto mode could not instrument (it ran as it was), or what auto mode left
    out of a recording."""


class StageOccupancyWarning(SmProfilerWarning):
    """A shared-memory stage lowers the kernel's resident blocks per SM."""


def install_command(extra: str) -> str:
    """The command that installs one of pyproject.toml's extras, run from the repository's root
    as the README's Set up installs sm_profiler: the one spelling of the errors, the tests'
    skips and the docs."""
    return f"pip install -e '.[{extra}]'"


class InflationError(CaptureError):
    """A compressed input (a torch trace's gzip) inflates past what its size allows: a gzip
    bomb, or a trace larger than the limit (sm_profiler.wire.torch_trace.inflation_limit)."""


class MissingDependencyError(SmProfilerError, ImportError):
    """An optional dependency needed for this feature is not installed."""

    def __init__(self, package: str, feature: str, extra: str | None = None):
        if extra:
            hint = f"from sm_profiler's repository root, {install_command(extra)}"
        else:
            hint = f"pip install {package}"
        super().__init__(
            f"{feature} needs the optional package '{package}', which is not installed; run {hint}"
        )
        self.package = package
