"""The fleet hooks (retrymw/fleet/_hooks.py) on the real protection classes, for these tests.

The engine's classes gain these few methods once its wiring settles (see the report of issue
14); until then the tests attach the fleet to these subclasses, which add nothing but the
hooks on top of the real `RetryBudget`, `CircuitBreaker`, `AdaptiveThrottle` and `PerTarget`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from retrymw import AdaptiveThrottle, CircuitBreaker, PerTarget, RetryBudget
from retrymw._core.events import BreakerStateChanged, CircuitState
from retrymw.fleet._hooks import BudgetShare


class HookedBudget(RetryBudget):  # type: ignore[misc]
    """`RetryBudget` + ``share_with``."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._share: BudgetShare | None = None

    def share_with(self, share: BudgetShare | None, /) -> None:
        self._share = share

    def try_acquire(self) -> bool:
        share = self._share
        if share is None:
            return super().try_acquire()
        granted = share.try_acquire()
        with self._lock:
            if granted:
                self._acquired += 1
            else:
                self._denied += 1
        return granted

    def record_success(self) -> None:
        next(self._successes)
        share = self._share
        if share is not None:
            share.record_success()


class HookedBreaker(CircuitBreaker):  # type: ignore[misc]
    """`CircuitBreaker` + ``adopt`` and ``gate_probes``."""

    _gate: Callable[[], bool] | None = None

    def clone(self, name: str) -> HookedBreaker:
        breaker = HookedBreaker.__new__(HookedBreaker)
        breaker._setup(name, self._settings, self._clock, self._rng, self._listeners)
        return breaker

    def gate_probes(self, gate: Callable[[], bool] | None, /) -> None:
        self._gate = gate

    def _admit(self) -> bool:
        with self._lock:
            events = self._check_recovery(self._clock.now())
            state = self._state
            admitted = state == "closed" or (
                state == "half_open" and len(self._probes) < self._settings.half_open_max_calls
            )
            if state == "half_open" and admitted:
                gate = self._gate
                admitted = gate is None or gate()
                if admitted:
                    self._probes.admit()
            if not admitted:
                self._rejected += 1
        self._emit(events)
        return admitted

    def adopt(self, state: CircuitState, /, *, retry_in: float = 0.0) -> None:
        events: list[BreakerStateChanged] = []
        with self._lock:
            now = self._clock.now()
            if state == "open":
                self._reopen_at = now + retry_in
                if self._state != "open":
                    self._trips += 1
                    events.append(self._move("open", now))
            elif self._state != "closed":
                self._streak = 0
                events.append(self._move("closed", now))
        self._emit(events)


class HookedThrottle(AdaptiveThrottle):  # type: ignore[misc]
    """`AdaptiveThrottle` + ``pool``."""

    _pooled = (0, 0)

    def pool(self, requests: int, accepts: int, /) -> None:
        with self._lock:
            self._pooled = (requests, accepts)

    def _probability(self) -> float:
        window = self._window
        window.expire(self._clock.now())
        requests = window.calls + self._pooled[0]
        accepts = window.calls - window.failures + self._pooled[1]
        excess = requests - self._k * accepts
        if excess <= 0.0:
            return 0.0
        return float(min(self._max_reject, excess / (requests + 1)))


class HookedPerTarget(PerTarget[Any]):  # type: ignore[misc]
    """`PerTarget` + ``add_creation_listener``."""

    __slots__ = ("_created",)

    def __init__(self, template: Any, **kwargs: Any) -> None:
        super().__init__(template, **kwargs)
        self._created: tuple[Callable[[str, Any], None], ...] = ()

    def add_creation_listener(self, listener: Callable[[str, Any], None]) -> None:
        self._created = (*self._created, listener)

    def _create(self, target: str) -> Any:
        instance = super()._create(target)
        for listener in self._created:
            listener(target, instance)
        return instance
