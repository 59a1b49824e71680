"""Optional packages the tests need, skipped with the command that installs them."""

from __future__ import annotations

import pytest

from sm_profiler.errors import install_command


def need(module: str, extra: str):
    """`module`, imported, or a skip saying which extra installs it: pip install -e '.[query]'."""
    return pytest.importorskip(
        module, reason=f"{module} is not installed ({install_command(extra)})"
    )
