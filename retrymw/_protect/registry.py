"""`CircuitBreakerRegistry`: one `CircuitBreaker` per key, cloned from a template on first use.

The registry only creates, finds and reports breakers; their states and rules are `_breaker`'s,
which re-exports it. Its overflow policy (a bounded set of keys, never evicted) is explained on
the class.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import TYPE_CHECKING, final

from .._core.errors import ConfigError
from .._core.forks import after_fork_in_child
from .settings import positive_int

if TYPE_CHECKING:
    from .breaker import CircuitBreaker, CircuitBreakerStatistics, Listener

__all__ = ["CircuitBreakerRegistry"]


@final
class CircuitBreakerRegistry:
    """One `CircuitBreaker` per key (host, operation), created from a template on first use.

    Each breaker is a `CircuitBreaker.clone` of ``template`` named ``f"{template.name}:{key}"``,
    with the template's listeners and ``listeners``. The template's own state is never used:
    it only carries settings, so one template can serve several registries.

    Overflow policy: the first ``max_keys`` keys get their own breaker for the registry's
    lifetime; any later key shares one breaker named ``f"{template.name}:_other"``. Keys are
    never evicted, because evicting an open breaker would forget that its dependency is down
    and let a retry storm through, and because circuit names are telemetry labels: the label
    set stays at most ``max_keys + 1`` values.

    Args:
        template: the breaker whose settings every keyed breaker copies.
        max_keys: how many keys get their own breaker.
        listeners: called on every transition of every keyed breaker.

    .. versionadded:: 0.1
    """

    __slots__ = (
        "__weakref__",
        "_breakers",
        "_listeners",
        "_lock",
        "_max_keys",
        "_other",
        "template",
    )

    def __init__(
        self,
        template: CircuitBreaker,
        *,
        max_keys: int = 1024,
        listeners: Iterable[Listener] = (),
    ) -> None:
        from .breaker import CircuitBreaker  # _breaker re-exports this module: import it late

        if not isinstance(template, CircuitBreaker):
            raise ConfigError("template", template, "must be a CircuitBreaker", "CircuitBreaker()")
        self.template = template
        self._max_keys = positive_int(max_keys, "max_keys")
        self._listeners = tuple(listeners)
        self._breakers: dict[str, CircuitBreaker] = {}
        self._other: CircuitBreaker | None = None
        self._lock = threading.Lock()
        after_fork_in_child(self)

    def _after_fork_in_child(self) -> None:
        self._lock = threading.Lock()

    def get(self, key: str) -> CircuitBreaker:
        """Return the breaker for ``key``, creating it on first use."""
        breaker = self._breakers.get(key)  # a dict read is atomic: no lock on the hot path
        if breaker is not None:
            return breaker
        with self._lock:
            breaker = self._breakers.get(key)
            if breaker is not None:
                return breaker
            if len(self._breakers) < self._max_keys:
                breaker = self._breakers[key] = self._create(key)
                return breaker
            if self._other is None:
                self._other = self._create("_other")
            return self._other

    def _create(self, key: str) -> CircuitBreaker:
        breaker = self.template.clone(f"{self.template.name}:{key}")
        for listener in self._listeners:
            breaker.add_listener(listener)
        return breaker

    def statistics(self) -> dict[str, CircuitBreakerStatistics]:
        """Return each breaker's snapshot by circuit name (``_other`` included once used)."""
        with self._lock:
            breakers = [*self._breakers.values(), *([self._other] if self._other else [])]
        return {breaker.name: breaker.statistics() for breaker in breakers}

    def __len__(self) -> int:
        return len(self._breakers) + (self._other is not None)

    def __repr__(self) -> str:
        states = [breaker.state for breaker in list(self._breakers.values())]
        return (
            f"<CircuitBreakerRegistry {self.template.name!r} keys={len(self)}/{self._max_keys} "
            f"open={states.count('open')} half_open={states.count('half_open')}>"
        )
