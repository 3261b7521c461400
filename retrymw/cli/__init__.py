"""The ``retrymw`` command: ``demo``, ``plan``, ``check`` and ``simulate``.

.. versionadded:: 0.1
"""

from __future__ import annotations

from ._main import build_parser as build_parser
from ._main import main as main

__all__ = ["build_parser", "main"]
