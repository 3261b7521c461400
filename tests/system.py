"""The real components the suite runs against: found, or a failure naming how to install them.

`make test` installs them first (`.ci/system-packages`); a test never skips for want of one.
"""

from __future__ import annotations

import os
import shutil

import pytest

__all__ = ["require_binary"]

_PACKAGE = {"prometheus": "prometheus", "promtool": "prometheus", "redis-server": "redis-server"}


def require_binary(name: str) -> str:
    """The path of the system binary ``name``; fail the test with the install command without it."""
    path = shutil.which(name)
    if path is None:
        package = _PACKAGE.get(name, name)
        pytest.fail(
            f"{name} not found: run `make test` as root, or `sudo apt-get install {package}`"
        )
    return path


def process_gone(pid: int) -> bool:
    """Whether no process ``pid`` exists any more (reaped, or never was)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False
