"""`AdaptiveThrottle`: client-side adaptive throttling (Google SRE book, "Handling Overload").

Over a trailing ``window`` it counts the attempts answered (R), those accepted (A), those the
dependency refused as overloaded (O) and those it shed itself (S), and sheds each new attempt
locally with probability ``min(max_reject, max(p(k, A'), p(overload_k, (R - O)')))``, where
``p(k, a) = max(0, (R' - k a) / (R' + 1))``, ``R' = R + S`` and a primed count is scaled by
``R' / R``; nothing while the window holds fewer than ``min_requests`` attempts. So it sheds in
proportion to the failure, earlier for load than for loss, and never switches a dependency off.
The formula and the measurements behind ``k``, ``overload_k``, ``window`` and ``min_requests``
are in docs/protection.md.

Attempts count when their verdict arrives, not at admission (a cancelled one, `release`, says
nothing about the dependency), so counts never go back. Thread- and task-safe: every method
takes a short lock; none waits. Fork-safe (`_core.forks`).

.. versionadded:: 0.2
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass
from random import Random
from typing import Any, final

from .._core.clock import SYSTEM_CLOCK, Clock
from .._core.errors import ConfigError
from .._core.events import OVERLOAD_STATUSES
from .._core.forks import after_fork_in_child
from .settings import bounded_duration, shown
from .windows import TimeWindow

__all__ = ["MIN_REQUESTS", "OVERLOAD_STATUSES", "AdaptiveThrottle", "AdaptiveThrottleStatistics"]

#: The default ``min_requests``: nothing is shed before the window holds this many attempts.
MIN_REQUESTS = 10


@dataclass(frozen=True, slots=True)
class AdaptiveThrottleStatistics:
    """A snapshot of an `AdaptiveThrottle`.

    Attributes:
        name: the throttle's name (a bounded telemetry label).
        requests: R, attempts with a verdict in the trailing window.
        accepts: A, those of them answered without a retryable failure.
        reject_probability: the probability the next attempt is shed, in ``[0, max_reject]``.
        admitted: attempts admitted since creation.
        shed: attempts shed (outcome ``shed``) since creation.
        k: the accepts multiplier.
        max_reject: the cap of ``reject_probability``.
        window: the trailing window in seconds.
        shed_in_window: S, attempts shed in the trailing window.
        overloaded: O, the failures among ``requests`` that were explicit overload refusals.
        overload_k: the accepts multiplier of the overload term.
        min_requests: nothing is shed while the window holds fewer attempts (R + S).
    """

    name: str
    requests: int
    accepts: int
    reject_probability: float
    admitted: int
    shed: int
    k: float
    max_reject: float
    window: float
    shed_in_window: int = 0
    overloaded: int = 0
    overload_k: float = 1.4
    min_requests: int = 1


@final
class AdaptiveThrottle:
    """Shed attempts locally in proportion to how often the dependency fails.

    docs/protection.md has the formula and why the defaults hold. Report each
    admitted attempt's verdict with `record_success` (answered, no retryable failure),
    `record_failure` (a retryable failure: an error, a timeout, a 503; ``overloaded=True`` for
    an explicit overload refusal) or `release` (cancelled: no verdict).

    Args:
        name: the throttle's name, a bounded telemetry label.
        k: accepts multiplier, >= 1; the throttle leaves alone a dependency that accepts at
            least ``1/k`` of the requests (2.0: half).
        overload_k: the accepts multiplier of the overload term, >= 1, in which only explicit
            overload refusals count as not accepted: the throttle sheds once more than
            ``1 - 1/overload_k`` of the requests are refused (1.4: 29%).
        window: the trailing window R, A and O are counted over (a duration in ``[1ms, 24h]``).
        max_reject: the cap of the rejection probability, in ``[0, 1]``; below 1 a trickle of
            attempts always goes through to notice recovery.
        min_requests: the least number of attempts (R + S, the fleet's pooled ones included)
            the window must hold before anything is shed, an integer >= 1 (10: one failure of
            a cold throttle is no evidence; 1 applies the formula from the first verdict).
        clock: where time is read; the system clock by default.
        rng: the random source of the rejections (inject a seeded one for determinism).

    Raises:
        ConfigError: a value is out of range; the message names the field.

    .. versionadded:: 0.2
    """

    def __init__(
        self,
        *,
        name: str = "default",
        k: float = 2.0,
        overload_k: float = 1.4,
        window: Any = "10s",
        max_reject: float = 0.9,
        min_requests: int = MIN_REQUESTS,
        clock: Clock | None = None,
        rng: Random | None = None,
    ) -> None:
        if not isinstance(name, str) or not name:
            raise ConfigError("name", shown(name), "must be a non-empty string", '"payments"')
        self.name = name
        self._k = _number_in(k, "k", 1.0, math.inf, "2.0")
        self._overload_k = _number_in(overload_k, "overload_k", 1.0, math.inf, "1.4")
        self._max_reject = _number_in(max_reject, "max_reject", 0.0, 1.0, "0.9")
        self._window_seconds = bounded_duration(window, "window", '"10s"')
        if (
            isinstance(min_requests, bool)
            or not isinstance(min_requests, int)
            or not 1 <= min_requests <= 1_000_000
        ):
            raise ConfigError(
                "min_requests", shown(min_requests), "must be an integer in [1, 1000000]", "10"
            )
        self._min_requests = min_requests
        self._clock: Clock = clock if clock is not None else SYSTEM_CLOCK
        self._rng = rng if rng is not None else Random()
        self._lock = threading.Lock()
        self._window = TimeWindow(self._window_seconds)
        self._shed_window = TimeWindow(self._window_seconds)  # S: its calls are the shed ones
        self._overload_window = TimeWindow(self._window_seconds)  # O: the overload refusals
        self._admitted = 0
        self._shed = 0
        # Other processes' requests, accepts and overload refusals (retrymw.fleet).
        self._pooled = (0, 0, 0)
        after_fork_in_child(self)

    def _after_fork_in_child(self) -> None:
        self._lock = threading.Lock()

    def clone(self, name: str) -> AdaptiveThrottle:
        """Return a fresh throttle with these settings, clock and rng, and no history."""
        return AdaptiveThrottle(
            name=name,
            k=self._k,
            overload_k=self._overload_k,
            window=self._window_seconds,
            max_reject=self._max_reject,
            min_requests=self._min_requests,
            clock=self._clock,
            rng=self._rng,
        )

    # -- the retrier's interface ------------------------------------------------------------------

    def allow_request(self) -> bool:
        """Admit an attempt, or shed it (``False``) with the current probability; never waits."""
        with self._lock:
            probability = self._probability()
            if probability and self._rng.random() < probability:
                self._shed += 1
                self._shed_window.add(False, self._clock)
                return False
            self._admitted += 1
            return True

    def record_success(self) -> None:
        """Record that an admitted attempt was answered without a retryable failure."""
        with self._lock:
            self._window.add(False, self._clock)

    def record_failure(self, *, overloaded: bool = False) -> None:
        """Record that an admitted attempt failed in a way worth retrying.

        Args:
            overloaded: the dependency refused the attempt explicitly because it is overloaded
                (a status in `OVERLOAD_STATUSES`); the overload term counts it, so load is shed
                earlier than loss (a dead backend, a refused connection, a 500 or 502).
        """
        with self._lock:
            self._window.add(True, self._clock)
            if overloaded:
                self._overload_window.add(False, self._clock)

    def release(self) -> None:
        """An admitted attempt ended without a verdict (cancelled): it counts nowhere."""

    def pool(self, requests: int, accepts: int, overloaded: int = 0, /) -> None:
        """Count other processes' trailing-window requests, accepts and overload refusals too
        (`retrymw.fleet`)."""
        with self._lock:
            self._pooled = (requests, accepts, overloaded)

    def reject_probability(self) -> float:
        """Return the probability that the next attempt is shed (for a gauge)."""
        with self._lock:
            return self._probability()

    def statistics(self) -> AdaptiveThrottleStatistics:
        """Return a frozen snapshot of the throttle."""
        with self._lock:
            probability = self._probability()
            window = self._window
            return AdaptiveThrottleStatistics(
                name=self.name,
                requests=window.calls,
                accepts=window.calls - window.failures,
                reject_probability=probability,
                admitted=self._admitted,
                shed=self._shed,
                k=self._k,
                max_reject=self._max_reject,
                window=self._window_seconds,
                shed_in_window=self._shed_window.calls,
                overloaded=min(self._overload_window.calls, window.calls),
                overload_k=self._overload_k,
                min_requests=self._min_requests,
            )

    def __repr__(self) -> str:
        stats = self.statistics()
        return (
            f"<AdaptiveThrottle {self.name!r} rejecting {stats.reject_probability:.1%} "
            f"requests={stats.requests} accepts={stats.accepts} shed={stats.shed}>"
        )

    def _probability(self) -> float:
        """The SRE formula over the trailing window, and the overload term (the caller holds
        the lock).

        ``(R' - k A') / (R' + 1)`` with R' = R + S and A' = A R' / R (docs/protection.md
        says why), computed as ``(1 - k A / R) R' / (R' + 1)``; the overload term is the same at
        ``overload_k`` with ``R - O`` in place of A. Both count the fleet's pooled numbers too.
        """
        window, now = self._window, self._clock.now()
        window.expire(now)
        shed = self._shed_window
        shed.expire(now)
        overloaded = self._overload_window
        overloaded.expire(now)
        pooled_requests, pooled_accepts, pooled_overloaded = self._pooled
        own = window.calls
        requests = own + pooled_requests
        attempts = requests + shed.calls
        if not requests or attempts < self._min_requests:
            return 0.0  # too few attempts in the window to judge the dependency by
        excess = 1.0 - self._k * (own - window.failures + pooled_accepts) / requests
        probability = excess * attempts / (attempts + 1)
        if overloaded.calls or pooled_overloaded:
            # Only explicit refusals count against the dependency here. min(): a refusal's two
            # entries may straddle a slot edge, so O can outlive R by a slot.
            refused = min(overloaded.calls, own) + pooled_overloaded
            excess = 1.0 - self._overload_k * (requests - min(refused, requests)) / requests
            probability = max(probability, excess * attempts / (attempts + 1))
        return min(self._max_reject, max(0.0, probability))


def _number_in(value: Any, field: str, low: float, high: float, example: str) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or (isinstance(value, int) and value.bit_length() > 1023)  # float() would overflow
        or not math.isfinite(value)
        or not low <= value <= high
    ):
        bounds = f">= {low:g}" if high == math.inf else f"in [{low:g}, {high:g}]"
        raise ConfigError(field, shown(value), f"must be a finite number {bounds}", example)
    return float(value)
