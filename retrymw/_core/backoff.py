"""Backoff strategies and jitter.

Every strategy maps a retry number *n* (1 after the first failure) and the policy's
``initial_delay`` / ``max_delay`` to a capped, un-jittered delay ``d = min(max_delay, s(n))``:

========== ============================================ ======================
strategy   s(n)                                         1 s base gives
========== ============================================ ======================
fixed      initial_delay                                1, 1, 1, 1
linear     initial_delay + (n-1) * increment            1, 2, 3, 4
exponential initial_delay * base ** (n-1)               1, 2, 4, 8, 16
fibonacci  initial_delay * fib(n), fib(1) = fib(2) = 1  1, 1, 2, 3, 5, 8
custom     delays[n-1], else max_delay                  [1, 3, 7, 15] then max
========== ============================================ ======================

Jitter is applied after the cap and keeps the result in ``[0, max_delay]`` without piling draws
up on the cap: proportional draws from ``[d(1-f), d(1+f)]`` shifted down below the cap; full
from ``[0, d]``; equal from ``[d/2, d]``; decorrelated from
``[initial_delay, min(max_delay, 3 * previous)]`` (the AWS formula, resampled instead of clamped).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from random import Random
from typing import Any, Literal, Protocol, runtime_checkable

from .durations import parse_duration
from .errors import ConfigError

__all__ = [
    "Backoff",
    "CustomBackoff",
    "ExponentialBackoff",
    "FibonacciBackoff",
    "FixedBackoff",
    "JitterKind",
    "LinearBackoff",
    "apply_jitter",
    "backoff_from_name",
    "jitter_bounds",
]

JitterKind = Literal["proportional", "full", "equal", "decorrelated"]
JITTER_KINDS: tuple[JitterKind, ...] = ("proportional", "full", "equal", "decorrelated")


@runtime_checkable
class Backoff(Protocol):
    """A backoff strategy: the capped, un-jittered delay before retry ``n``."""

    def delay(self, n: int, /, initial_delay: float, max_delay: float) -> float:
        """Return ``min(max_delay, s(n))`` for retry ``n`` (1 after the first failure)."""
        ...


@dataclass(frozen=True, slots=True)
class FixedBackoff:
    """Wait ``initial_delay`` before every retry.

    .. versionadded:: 0.1
    """

    def delay(self, n: int, /, initial_delay: float, max_delay: float) -> float:
        """See `Backoff.delay`."""
        return min(max_delay, initial_delay)


@dataclass(frozen=True, slots=True, init=False)
class LinearBackoff:
    """Wait ``initial_delay + (n - 1) * increment``; ``increment`` defaults to ``initial_delay``.

    .. versionadded:: 0.1
    """

    increment: float | None

    def __init__(self, increment: Any = None) -> None:
        value = None if increment is None else parse_duration(increment, field="backoff.increment")
        object.__setattr__(self, "increment", value)

    def delay(self, n: int, /, initial_delay: float, max_delay: float) -> float:
        """See `Backoff.delay`."""
        step = initial_delay if self.increment is None else self.increment
        return min(max_delay, initial_delay + (n - 1) * step)


@dataclass(frozen=True, slots=True)
class ExponentialBackoff:
    """Wait ``initial_delay * base ** (n - 1)``; never overflows, whatever ``n``.

    .. versionadded:: 0.1
    """

    base: float = 2.0

    def __post_init__(self) -> None:
        if (
            isinstance(self.base, bool)
            or not isinstance(self.base, (int, float))
            or not math.isfinite(self.base)
            or self.base < 1.0
        ):
            raise ConfigError("backoff.base", self.base, "must be a number >= 1", "base=2.0")

    def delay(self, n: int, /, initial_delay: float, max_delay: float) -> float:
        """See `Backoff.delay`."""
        if initial_delay <= 0.0 or initial_delay >= max_delay:
            return min(max_delay, initial_delay)
        if self.base == 1.0:
            return initial_delay
        # Decide in log space first (a subnormal initial_delay overflows the plain ratio), so
        # that base ** (n - 1) is only computed when the result stays under the cap.
        if n - 1 >= (math.log(max_delay) - math.log(initial_delay)) / math.log(self.base):
            return max_delay
        try:
            return min(max_delay, initial_delay * self.base ** (n - 1))
        except OverflowError:  # tiny initial_delay: the power alone leaves the float range
            return min(max_delay, math.exp(math.log(initial_delay) + (n - 1) * math.log(self.base)))


@dataclass(frozen=True, slots=True)
class FibonacciBackoff:
    """Wait ``initial_delay * fib(n)`` with ``fib(1) = fib(2) = 1``.

    .. versionadded:: 0.1
    """

    def delay(self, n: int, /, initial_delay: float, max_delay: float) -> float:
        """See `Backoff.delay`."""
        if initial_delay <= 0.0:
            return 0.0
        if initial_delay >= max_delay:
            return max_delay
        # fib(n) > phi**(n - 2), so past this n the cap is certain; the loop below then runs a
        # bounded number of steps (about 1 500 at most) on exact integers.
        if n - 2 > (math.log(max_delay) - math.log(initial_delay)) / _LOG_PHI:
            return max_delay
        ratio = max_delay / initial_delay
        previous, current = 0, 1
        for _ in range(n - 1):
            if current >= ratio:
                return max_delay
            previous, current = current, previous + current
        if current < 2**53:  # exactly representable: keep the table's exact values
            return min(max_delay, initial_delay * current)
        return min(max_delay, math.exp(math.log(current) + math.log(initial_delay)))


_LOG_PHI = math.log((1 + math.sqrt(5)) / 2)


@dataclass(frozen=True, slots=True, init=False)
class CustomBackoff:
    """Wait ``delays[n - 1]``; past the end of the list (or for an empty list) wait ``max_delay``.

    .. versionadded:: 0.1
    """

    delays: tuple[float, ...]

    def __init__(self, delays: Iterable[Any]) -> None:
        if isinstance(delays, (str, bytes)) or not isinstance(delays, Iterable):
            raise ConfigError("backoff.delays", delays, "must be a list", '["500ms", "1s", "5s"]')
        parsed = tuple(
            parse_duration(value, field=f"backoff.delays[{index}]")
            for index, value in enumerate(delays)
        )
        object.__setattr__(self, "delays", parsed)

    def delay(self, n: int, /, initial_delay: float, max_delay: float) -> float:
        """See `Backoff.delay`."""
        if n <= len(self.delays):
            return min(max_delay, self.delays[n - 1])
        return max_delay


_NAMED: dict[str, type[FixedBackoff | LinearBackoff | ExponentialBackoff | FibonacciBackoff]] = {
    "fixed": FixedBackoff,
    "linear": LinearBackoff,
    "exponential": ExponentialBackoff,
    "fibonacci": FibonacciBackoff,
}


def backoff_from_name(name: str, *, field: str = "backoff") -> Backoff:
    """Return the strategy called ``name`` with its default parameters."""
    try:
        return _NAMED[name]()
    except KeyError:
        raise ConfigError(
            field, name, f"unknown backoff strategy, known: {', '.join(_NAMED)}", '"exponential"'
        ) from None


def jitter_bounds(
    kind: JitterKind,
    delay: float,
    *,
    initial_delay: float,
    max_delay: float,
    factor: float,
    previous: float,
) -> tuple[float, float]:
    """Return the range ``(low, high)`` that jitter of ``kind`` draws ``delay`` from.

    `apply_jitter` draws from exactly this range and ``retrymw plan`` prints it, so the two
    cannot disagree. Both ends lie within ``[0, max_delay]`` for a delay already capped.

    Args:
        kind: the jitter kind.
        delay: the planned, capped delay.
        initial_delay: the policy's ``initial_delay`` (the floor of decorrelated jitter).
        max_delay: the policy's cap.
        factor: the width of proportional jitter, in ``[0, 1]``.
        previous: the delay slept before the previous retry (``initial_delay`` before the
            first retry); only decorrelated jitter uses it.
    """
    if kind == "full":
        return 0.0, delay
    if kind == "equal":
        return delay / 2.0, delay
    if kind == "decorrelated":
        low = min(initial_delay, max_delay)
        high = min(max_delay, 3.0 * max(previous, low))
        return (low, high) if high > low else (high, high)
    # proportional: a window of width 2*f*d centred on d, shifted down whole when it crosses
    # the cap, so the cap is never a pile-up point.
    low, high = delay * (1.0 - factor), delay * (1.0 + factor)
    if high > max_delay:
        low, high = max(0.0, low - (high - max_delay)), max_delay
    return low, high


def apply_jitter(
    kind: JitterKind,
    delay: float,
    *,
    initial_delay: float,
    max_delay: float,
    factor: float,
    previous: float,
    rng: Random,
) -> float:
    """Return ``delay`` jittered by ``kind``: a uniform draw from `jitter_bounds`.

    ``previous`` is the delay slept before the previous retry (``initial_delay`` before the first
    retry); only decorrelated jitter uses it.
    """
    low, high = jitter_bounds(
        kind,
        delay,
        initial_delay=initial_delay,
        max_delay=max_delay,
        factor=factor,
        previous=previous,
    )
    # An empty decorrelated range draws nothing, as it always has: a seeded rng keeps giving
    # the same sequence of delays.
    if kind == "decorrelated" and high == low:
        return high
    return rng.uniform(low, high)
