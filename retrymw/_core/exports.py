"""`publish`: make a public face's names show the face, never the private module defining them."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

__all__ = ["publish"]


def publish(namespace: dict[str, Any], names: Iterable[str], module: str) -> None:
    """Rewrite ``__module__`` of every private-module object in ``names`` to ``module``.

    Reprs, tracebacks and the docs then show ``retrymw.RetryPolicy``, as httpx and anyio do,
    instead of ``retrymw._core.policy.RetryPolicy``.
    """
    for name in names:
        obj = namespace[name]
        defined_in = getattr(obj, "__module__", None)
        if isinstance(defined_in, str) and any(
            part.startswith("_") for part in defined_in.split(".")
        ):
            obj.__module__ = module
