"""The hooks a fleet needs on the protection objects: small, sync and non-blocking.

The fleet never wraps or replaces the object the user holds (the object given is the live
state). It attaches to it through these methods, which `RetryBudget`, `CircuitBreaker`,
`AdaptiveThrottle` and `PerTarget` provide:

* ``RetryBudget.share_with(share)``: from now on ``try_acquire`` spends the share's leased
  tokens (``share.try_acquire()``) and ``record_success`` also reports to the share
  (``share.record_success()``, one lock-free counter step); ``None`` detaches.
* ``CircuitBreaker.adopt(state, retry_in=...)``: take a shared state (``"open"`` for
  ``retry_in`` seconds, or ``"closed"``), with the usual event; and
  ``CircuitBreaker.gate_probes(gate)``: a half-open admission also needs ``gate()`` to be true
  (a fleet-wide probe lease, asked outside the breaker's lock); ``None`` removes the gate.
* ``AdaptiveThrottle.pool(requests, accepts, overloaded)``: the other processes'
  trailing-window counts, added to the local ones in the rejection probability
  (``statistics()`` stays local).
* ``PerTarget.add_creation_listener(listener)`` and ``add_eviction_listener(listener)``:
  ``listener(target, instance)`` for every instance created, or evicted for room, from now
  on (the fleet attaches the one and detaches the other).

Each is a few lines in its class; `RedisFleet.attach` checks they are there.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from .._core.events import CircuitState

__all__ = ["BreakerHost", "BudgetHost", "BudgetShare", "ThrottleHost"]


class BudgetShare(Protocol):
    """What a `RetryBudget` delegates to once shared (`SharedBudget`)."""

    def try_acquire(self) -> bool:
        """Spend one leased token; ``False`` denies the retry. Local, never waits."""
        ...

    def record_success(self) -> None:
        """Count one success, to be deposited fleet-wide by the next synchroniser step."""
        ...


class BudgetHost(Protocol):
    """A `RetryBudget` with the fleet hook."""

    def share_with(self, share: BudgetShare | None, /) -> None:
        """Decide retries with ``share`` from now on (``None``: locally again)."""
        ...

    def statistics(self) -> Any:
        """The budget's snapshot (``ratio``, ``burst``, ``window``, ``min_capacity``)."""
        ...


class BreakerHost(Protocol):
    """A `CircuitBreaker` with the fleet hooks."""

    name: str

    @property
    def state(self) -> CircuitState:
        """The local state."""
        ...

    def adopt(self, state: CircuitState, /, *, retry_in: float = 0.0) -> None:
        """Take a shared state: open for ``retry_in`` seconds, or closed."""
        ...

    def gate_probes(self, gate: Callable[[], bool] | None, /) -> None:
        """Admit half-open probes only when ``gate()`` is true as well."""
        ...

    def add_listener(self, listener: Callable[[Any], None]) -> None:
        """Be told of every transition."""
        ...


class ThrottleHost(Protocol):
    """An `AdaptiveThrottle` with the fleet hook."""

    name: str

    def pool(self, requests: int, accepts: int, overloaded: int, /) -> None:
        """Count the other processes' trailing-window requests, accepts and overload refusals
        as well."""
        ...

    def statistics(self) -> Any:
        """The throttle's snapshot (``requests``, ``accepts``, ``overloaded``: local only)."""
        ...
