"""`PerTarget`: one `CircuitBreaker`, `RetryBudget`, `AdaptiveThrottle` or `Pacer` per target.

A target is an HTTP host, or the operation name for coroutines. Each target gets its own
instance, a clean clone of the template made on first use, and there is no shared overflow
instance: one target's state never governs another's. Past ``max_targets`` the least recently
used target is evicted, idle ones before those holding load back (a breaker not closed, a
budget denying retries, a throttle shedding, a pacer pacing); docs/protection.md says why.
Eviction listeners hear of it (a fleet detaches the evicted instance).

Thread- and task-safe: `get` reads without a lock, `for_target` takes a short one to mark the
target used; fork-safe (`_core.forks`).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import Any, Generic, TypeVar, cast, final

from .._core.errors import ConfigError
from .._core.forks import after_fork_in_child
from .breaker import CircuitBreaker, CircuitBreakerStatistics, Listener
from .budget import RetryBudget, RetryBudgetStatistics
from .pacer import Pacer, PacerStatistics
from .settings import positive_int
from .throttle import AdaptiveThrottle, AdaptiveThrottleStatistics

__all__ = ["PerTarget"]

Protection = TypeVar("Protection", CircuitBreaker, RetryBudget, AdaptiveThrottle, Pacer)
Statistics = (
    CircuitBreakerStatistics | RetryBudgetStatistics | AdaptiveThrottleStatistics | PacerStatistics
)
_Kind = CircuitBreaker | RetryBudget | AdaptiveThrottle | Pacer  # any kind, where code handles each


@final
class PerTarget(Generic[Protection]):
    """Scope a `CircuitBreaker`, `RetryBudget` or `AdaptiveThrottle` per target.

    Each target's instance is a clone of ``template`` made on first use: a breaker or throttle
    named ``f"{template.name}:{target}"``, with the template's settings, clock, random source
    and (for a breaker) listeners. The template's own state is never used. Eviction: see
    the module documentation and docs/protection.md.

    Args:
        template: the breaker, budget or throttle each target's instance copies.
        max_targets: how many targets keep an instance at once.

    Raises:
        ConfigError: ``template`` is not one of the three, or ``max_targets`` is below 1.

    .. versionadded:: 0.2
    """

    __slots__ = (
        "__weakref__",
        "_created",
        "_evicted",
        "_instances",
        "_listeners",
        "_lock",
        "_max_targets",
        "template",
    )

    template: Protection

    def __init__(self, template: Protection, *, max_targets: int = 1024) -> None:
        if not isinstance(template, (CircuitBreaker, RetryBudget, AdaptiveThrottle, Pacer)):
            raise ConfigError(
                "template",
                type(template).__name__,
                "must be a CircuitBreaker, RetryBudget, AdaptiveThrottle or Pacer",
                "PerTarget(CircuitBreaker())",
            )
        self.template = template
        self._max_targets = positive_int(max_targets, "max_targets")
        self._instances: OrderedDict[str, Protection] = OrderedDict()  # oldest use first
        self._listeners: tuple[Listener, ...] = ()
        self._created: tuple[Callable[[str, Any], None], ...] = ()
        self._evicted: tuple[Callable[[str, Any], None], ...] = ()
        self._lock = threading.Lock()
        after_fork_in_child(self)

    def _after_fork_in_child(self) -> None:
        self._lock = threading.Lock()

    @property
    def max_targets(self) -> int:
        """How many targets keep an instance at once."""
        return self._max_targets

    def get(self, target: str) -> Protection | None:
        """Return the live instance of ``target``, or ``None``; never creates one."""
        return self._instances.get(target)  # one C call: atomic, no lock needed

    def for_target(self, target: str) -> Protection:
        """Return ``target``'s instance, creating it (and evicting another if full) on first use.

        This is the retrier's and transports' interface; health checks use `get`.
        """
        with self._lock:
            instances = self._instances
            instance = instances.get(target)
            if instance is not None:
                instances.move_to_end(target)
                return instance
            if len(instances) >= self._max_targets:
                victim = self._victim()
                evicted = instances.pop(victim)
                for listener in self._evicted:  # a fleet (retrymw.fleet) detaches it
                    listener(victim, evicted)
            instance = instances[target] = self._create(target)
            return instance

    def add_listener(self, listener: Listener) -> None:
        """Call ``listener`` on every transition of every target's breaker, now and later.

        Raises:
            TypeError: the template is not a `CircuitBreaker`.
        """
        if not isinstance(self.template, CircuitBreaker):
            raise TypeError(f"only a PerTarget of CircuitBreaker has listeners, not {self!r}")
        with self._lock:
            if listener in self._listeners:
                return
            self._listeners = (*self._listeners, listener)
            live: list[_Kind] = list(self._instances.values())
        for breaker in live:
            if isinstance(breaker, CircuitBreaker):  # pragma: no branch - all of them are
                breaker.add_listener(listener)

    def add_creation_listener(self, listener: Callable[[str, Any], None]) -> None:
        """Call ``listener(target, instance)`` for every instance created from now on.

        A listener equal to one already added is not added again.
        """
        with self._lock:
            if listener not in self._created:
                self._created = (*self._created, listener)

    def add_eviction_listener(self, listener: Callable[[str, Any], None]) -> None:
        """Call ``listener(target, instance)`` for every instance evicted from now on.

        A listener equal to one already added is not added again.
        """
        with self._lock:
            if listener not in self._evicted:
                self._evicted = (*self._evicted, listener)

    def statistics(self) -> dict[str, Statistics]:
        """Return each live target's snapshot, by target, least recently used first."""
        with self._lock:
            live = list(self._instances.items())
        return {target: instance.statistics() for target, instance in live}

    def __len__(self) -> int:
        return len(self._instances)

    def __contains__(self, target: object) -> bool:
        return target in self._instances

    def __iter__(self) -> Iterator[str]:
        """The live targets, least recently used first (a copy: safe while others call)."""
        with self._lock:
            return iter(list(self._instances))

    def __repr__(self) -> str:
        kind = type(self.template).__name__
        return f"<PerTarget {kind} targets={len(self)}/{self._max_targets}>"

    # -- internals (the caller holds the lock) ---------------------------------------------------

    def _create(self, target: str) -> Protection:
        template: _Kind = self.template
        instance: _Kind
        if isinstance(template, RetryBudget):
            instance = template.clone()
        else:
            instance = template.clone(f"{template.name}:{target}")
            if isinstance(instance, CircuitBreaker):
                for listener in self._listeners:
                    instance.add_listener(listener)
        for created in self._created:  # a fleet (retrymw.fleet) attaches the new instance
            created(target, instance)
        return cast(Protection, instance)

    def _victim(self) -> str:
        """The least recently used idle target, else the least recently used of all."""
        for target, instance in self._instances.items():
            if not _holding_back(instance):
                return target
        return next(iter(self._instances))


def _holding_back(instance: _Kind) -> bool:
    """Would a fresh clone let through more than this instance does now?"""
    if isinstance(instance, CircuitBreaker):
        return instance.state != "closed"
    if isinstance(instance, RetryBudget):
        return instance.available() < 1.0
    if isinstance(instance, Pacer):
        return instance.pacing()
    return instance.reject_probability() > 0.0
