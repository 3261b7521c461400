"""One circuit per host on a transport, whatever breaker it is given.

A transport talks to many hosts, and one circuit shared by them all turns one dead host into
refused calls to every healthy one (and a dead host between healthy ones may never trip it).
So a plain `CircuitBreaker` given to a transport is the template of one circuit per host, as
``PerTarget(CircuitBreaker(...))`` is: each host's circuit is named
``"<name>:<host>"`` in every event and metric. A `PerTarget` is used as it is.

The same template given to several transports (``config.transport(name)`` builds one per call)
gives them the same per-host circuits, as the same breaker given to them did before: the
scoping is remembered per template while a transport holds it.
"""

from __future__ import annotations

import weakref
from typing import Any, TypeVar

from .._core.forks import ForkSafeLock
from .._protect.breaker import CircuitBreaker
from .._protect.pacer import Pacer
from .._protect.targets import PerTarget

__all__ = [
    "format_target",
    "per_host",
]

# Template id → its per-host circuits, alive while a transport holds them; read at construction
# only. The value holds its template, so an id is never reused while its entry lives.
_SCOPED: weakref.WeakValueDictionary[int, PerTarget[Any]] = weakref.WeakValueDictionary()
_LOCK = ForkSafeLock()
Scoped = TypeVar("Scoped", CircuitBreaker, Pacer)


def per_host(breaker: Scoped | PerTarget[Scoped] | None) -> Scoped | PerTarget[Scoped] | None:
    """``breaker`` as a transport uses it: a plain `CircuitBreaker` (or `Pacer`) becomes the
    template of one per host (the same `PerTarget` for every transport given that template);
    a `PerTarget` or ``None`` is returned as it is."""
    if not isinstance(breaker, (CircuitBreaker, Pacer)):
        return breaker
    with _LOCK:
        scoped = _SCOPED.get(id(breaker))
        if scoped is None or scoped.template is not breaker:
            scoped = PerTarget(breaker)
            _SCOPED[id(breaker)] = scoped
    return scoped


def format_target(host: str, port: int | None) -> str:
    """The telemetry target and breaker key for a host: ``host``, or ``host:port`` if not default.

    ``port`` is ``None`` when the URL uses its scheme's default port (as httpx reports it).
    """
    if ":" in host:  # an IPv6 literal
        host = f"[{host}]"
    return host if port is None else f"{host}:{port}"
