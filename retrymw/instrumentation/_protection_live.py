"""The protection gauges as both metric paths read them from the live objects.

A `Retrier` announces its policy, breakers, budgets and throttles (`Attached`); the exporters
then read the saturation gauges (`names.LIVE_GAUGES`) from the objects themselves, at scrape or
collection time, never keeping them alive. Imports neither prometheus_client nor opentelemetry,
so that `PrometheusInstrument`'s collectors and `OpenTelemetryInstrument`'s observable gauges
share it, as they share `_fleet_live`.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from . import _names as names

if TYPE_CHECKING:
    from .._protect.breaker import CircuitBreaker

__all__ = [
    "BREAKER_READERS",
    "BREAKER_SETTINGS",
    "BUDGET_READERS",
    "THROTTLE_READERS",
    "Reader",
    "budget_capacity",
    "circuit_info",
    "consecutive_failure_ratio",
    "failure_rate",
    "failure_rate_threshold",
    "kind_of",
    "policy_info",
    "read_live",
    "reject_probability",
]

#: Reads one gauge's value from a live object.
Reader = Callable[[Any], float]


def failure_rate(breaker: Any) -> float:
    """The failed share of the breaker's sliding window (0 while it is empty)."""
    stats = breaker.statistics()
    return stats.window_failures / stats.window_calls if stats.window_calls else 0.0


def failure_rate_threshold(breaker: CircuitBreaker) -> float:
    """The failure rate that opens the circuit; NaN when the rate rule is off (no series)."""
    threshold = breaker.settings.failure_rate_threshold
    return math.nan if threshold is None else float(threshold)


def consecutive_failure_ratio(breaker: CircuitBreaker) -> float:
    """Failures in a row over the consecutive-failure threshold; NaN when that rule is off."""
    threshold = breaker.settings.failure_threshold
    if threshold is None:
        return math.nan
    return breaker.statistics().consecutive_failures / threshold


def circuit_info(breaker: Any) -> float:
    """1 while the breaker lives (`names.CIRCUIT_INFO`)."""
    return 1.0


def budget_capacity(budget: Any) -> float:
    """The retry budget's current capacity (its available tokens are `RetryBudget.available`)."""
    return float(budget.statistics().capacity)


def reject_probability(throttle: Any) -> float:
    """The probability that the adaptive throttle sheds the next attempt."""
    return float(throttle.reject_probability())


def pacer_limit(pacer: Any) -> float:
    """The requests limit the pacer paces against, per second: the lower of the one it learned
    and the one its fleet handed over (the lowest any member learned); 0 while none is known."""
    return float(pacer.statistics().paced_limit or 0.0)


def pacer_rate(pacer: Any) -> float:
    """The requests rate the pacer sends at now, per second; 0 while it paces nothing."""
    return float(pacer.statistics().rate or 0.0)


#: The saturation gauges a budget, a throttle and a breaker export, with how each is read
#: (a budget's available tokens are the contract's gauge, set from the events). A breaker's
#: thresholds are exported only while their rule is on (the reading is not NaN).
BUDGET_READERS: tuple[tuple[names.MetricSpec, Reader], ...] = (
    (names.RETRY_BUDGET_CAPACITY, budget_capacity),
)
THROTTLE_READERS: tuple[tuple[names.MetricSpec, Reader], ...] = (
    (names.THROTTLE_REJECT_PROBABILITY, reject_probability),
)
PACER_READERS: tuple[tuple[names.MetricSpec, Reader], ...] = (
    (names.PACER_LIMIT, pacer_limit),
    (names.PACER_RATE, pacer_rate),
)
BREAKER_READERS: tuple[tuple[names.MetricSpec, Reader], ...] = (
    (names.CIRCUIT_FAILURE_RATE, failure_rate),
    (names.CIRCUIT_FAILURE_RATE_THRESHOLD, failure_rate_threshold),
    (names.CIRCUIT_CONSECUTIVE_FAILURE_RATIO, consecutive_failure_ratio),
)
#: The breaker's settings among its gauges: constants, exported only while the rule is on.
BREAKER_SETTINGS: frozenset[names.MetricSpec] = frozenset({names.CIRCUIT_FAILURE_RATE_THRESHOLD})


def kind_of(subject: object) -> str | None:
    """``"policy"``, ``"breaker"``, ``"budget"``, ``"throttle"`` or ``"pacer"``; ``None`` for
    anything else.

    The classes are imported on use, as `_prometheus` does, so that this module loads without
    the engine and the protection modules.
    """
    from .._core.policy import RetryPolicy
    from .._protect.breaker import CircuitBreaker
    from .._protect.budget import RetryBudget
    from .._protect.pacer import Pacer
    from .._protect.throttle import AdaptiveThrottle

    kinds: tuple[tuple[type, str], ...] = (
        (RetryPolicy, "policy"),
        (CircuitBreaker, "breaker"),
        (RetryBudget, "budget"),
        (AdaptiveThrottle, "throttle"),
        (Pacer, "pacer"),
    )
    for cls, kind in kinds:
        if isinstance(subject, cls):
            return kind
    return None


def policy_info(policy: Any) -> tuple[str, ...]:
    """The values of `names.POLICY_INFO`'s labels, in order (the policy's name first)."""
    return (
        policy.name,
        str(policy.attempts),
        _seconds(policy.initial_delay),
        _seconds(policy.max_delay),
        _seconds(policy.timeout),
        _seconds(policy.deadline),
    )


def _seconds(value: float | None) -> str:
    return "" if value is None else format(value, "g")


def read_live(ref: weakref.ref[Any], read: Reader) -> float:
    """The live value, NaN once the object is gone (an evicted target); never raises."""
    subject = ref()
    if subject is None:
        return math.nan
    try:
        return float(read(subject))
    except Exception:  # a scrape must never fail because of one object
        return math.nan
