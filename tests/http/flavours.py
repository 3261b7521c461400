"""The transport suites run once per flavour: httpx, then httpx2 (`retrymw.httpx2`).

A suite module is written against httpx and `retrymw.httpx` (which mypy checks); it calls
`bind` with its globals, which is a no-op for the module itself. Its twin module (named with
``httpx2``) executes the same source through `run_twin`, and `bind` then swaps ``httpx`` and
every name imported from `retrymw.httpx` or `retrymw.testing.httpx` for httpx2's (and
``httpcore`` for httpcore2): the same tests, the other library.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

__all__ = ["bind", "run_twin"]


def bind(namespace: dict[str, Any]) -> str:
    """Rebind a suite's library and face in ``namespace`` for its flavour; return the flavour."""
    if "httpx2" not in namespace["__name__"].rpartition(".")[2]:
        return "httpx"
    namespace["httpx"] = importlib.import_module("httpx2")
    if "httpcore" in namespace:
        namespace["httpcore"] = importlib.import_module("httpcore2")
    for face in map(importlib.import_module, ("retrymw.httpx2", "retrymw.testing.httpx2")):
        for name in face.__all__:
            if name in namespace:
                namespace[name] = getattr(face, name)
    return "httpx2"


def run_twin(namespace: dict[str, Any], suite: str) -> None:
    """Execute the suite module ``suite`` (a file beside this one) in ``namespace``."""
    path = Path(__file__).with_name(suite)
    exec(compile(path.read_text(encoding="utf-8"), str(path), "exec"), namespace)
