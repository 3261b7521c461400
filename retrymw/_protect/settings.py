"""`CircuitBreaker`'s arguments, checked once and frozen into `BreakerSettings`.

Every check raises a `ConfigError` naming the field, the bad value and an accepted example.
Validation runs once per breaker and never on the hot path, so it lives apart from the state
machine in `breaker`.

Bounds that keep a breaker cheap and its arithmetic finite:

* a count-based ``window`` holds at most `MAX_WINDOW_CALLS` (10 000) attempts: the ring costs
  one byte per attempt for every keyed breaker (``window=10**8`` was 100 MiB each), and 10 000
  attempts already estimate a failure rate to within 1% (one standard error at p = 0.5 is
  0.005);
* durations (a time-based ``window``, ``recovery_timeout``, ``max_recovery_timeout``, and the
  budget's and throttle's windows through `bounded_duration`) lie in ``[1ms, 24h]``, and a
  ``recovery_timeout`` may also be 0 (probe at once). Below a millisecond a window's buckets
  become so narrow that ``now / width`` overflows, and a doubling open period from a tiny start
  overflows a float before reaching its cap; past a day a circuit is a page, not a wait.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from .._core.durations import parse_duration
from .._core.errors import ConfigError

__all__ = [
    "MAX_DURATION",
    "MAX_WINDOW_CALLS",
    "MIN_DURATION",
    "BreakerSettings",
    "bounded_duration",
    "breaker_settings",
    "positive_int",
    "shown",
]

MAX_WINDOW_CALLS = 10_000  # attempts a count-based window may hold (one byte each)
MIN_DURATION = 0.001  # seconds: 1 ms
MAX_DURATION = 86_400.0  # seconds: 24 h
# An int longer than this is shown by its size: repr() of a 5 000-digit int raises ValueError.
_MAX_SHOWN_BITS = 128


@dataclass(frozen=True, slots=True)
class BreakerSettings:
    """A `CircuitBreaker`'s validated settings; its clones share them."""

    failure_threshold: int | None
    failure_rate_threshold: float | None
    window_size: int | None  # count-based window
    window_duration: float | None  # time-based window
    minimum_calls: int
    recovery_timeout: float
    max_recovery_timeout: float
    recovery_jitter: float
    half_open_max_calls: int
    success_threshold: int


def breaker_settings(
    *,
    name: str,
    failure_threshold: int | None,
    recovery_timeout: Any,
    half_open_max_calls: int,
    success_threshold: int,
    failure_rate_threshold: float | None,
    window: Any,
    minimum_calls: int,
    max_recovery_timeout: Any,
    recovery_jitter: float,
) -> BreakerSettings:
    """Check `CircuitBreaker`'s arguments in order and return its settings.

    ``name`` is checked first but not kept: each clone of a breaker has its own.

    Raises:
        ConfigError: the first value out of range; the message names the field.
    """
    _require(bool(name) and isinstance(name, str), "name", name, "must be a non-empty string")
    if failure_threshold is not None:
        positive_int(failure_threshold, "failure_threshold")
    rate = failure_rate_threshold
    if rate is not None:
        _require(_number(rate) and 0.0 < rate <= 1.0, "failure_rate_threshold", rate, "(0, 1]")
    either = failure_threshold is not None or rate is not None
    _require(either, "failure_threshold", None, "and failure_rate_threshold are both None")
    window_size, window_duration = _parse_window(window)
    positive_int(minimum_calls, "minimum_calls")
    fits = window_size is None or minimum_calls <= window_size
    _require(fits, "minimum_calls", minimum_calls, f"exceeds the window ({window_size})")
    recovery = bounded_duration(recovery_timeout, "recovery_timeout", '"5s"', zero=True)
    longest = recovery
    if max_recovery_timeout is not None:
        longest = bounded_duration(max_recovery_timeout, "max_recovery_timeout", '"5m"')
        problem = f"is below recovery_timeout ({recovery:g}s)"
        _require(longest >= recovery, "max_recovery_timeout", max_recovery_timeout, problem)
    jitter = recovery_jitter
    _require(_number(jitter) and 0.0 <= jitter <= 1.0, "recovery_jitter", jitter, "[0, 1]")
    return BreakerSettings(
        failure_threshold=failure_threshold,
        failure_rate_threshold=None if rate is None else float(rate),
        window_size=window_size,
        window_duration=window_duration,
        minimum_calls=minimum_calls,
        recovery_timeout=recovery,
        max_recovery_timeout=longest,
        recovery_jitter=float(jitter),
        half_open_max_calls=positive_int(half_open_max_calls, "half_open_max_calls"),
        success_threshold=positive_int(success_threshold, "success_threshold"),
    )


_EXAMPLES = {
    "name": '"payments"',
    "failure_threshold": "20",
    "failure_rate_threshold": "0.5",
    "minimum_calls": "50",
    "max_recovery_timeout": '"5m"',
    "recovery_jitter": "0.2",
    "half_open_max_calls": "1",
    "success_threshold": "1",
    "window": '100 (calls) or "10s"',
    "max_targets": "1024",
}


def bounded_duration(value: Any, field: str, example: str, *, zero: bool = False) -> float:
    """Parse a duration and check it lies in ``[MIN_DURATION, MAX_DURATION]`` (or is 0 if allowed).

    Raises:
        ConfigError: not a duration, or out of range; the message names ``field``.
    """
    if isinstance(value, int) and value.bit_length() > _MAX_SHOWN_BITS:
        raise ConfigError(field, shown(value), "must be between 1ms and 24h", example)
    seconds = parse_duration(value, field=field)
    if zero and seconds == 0.0:
        return seconds
    if not MIN_DURATION <= seconds <= MAX_DURATION:
        low = "0 or " if zero else ""
        raise ConfigError(field, shown(value), f"must be {low}between 1ms and 24h", example)
    return seconds


def _require(ok: bool, field: str, value: Any, problem: str) -> None:
    if not ok:
        if problem.startswith(("(", "[")):
            problem = f"must be a number in {problem}"
        raise ConfigError(field, shown(value), problem, _EXAMPLES[field])


def shown(value: Any) -> Any:
    """``value``, or a short description of an integer too long to print."""
    if isinstance(value, int) and value.bit_length() > _MAX_SHOWN_BITS:
        digits = int(value.bit_length() * math.log10(2)) + 1
        return f"<an integer of about {digits} digits>"
    return value


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def positive_int(value: Any, field: str) -> int:
    """Return ``value`` if it is an integer >= 1, else raise a `ConfigError` naming ``field``."""
    ok = isinstance(value, int) and not isinstance(value, bool) and value >= 1
    _require(ok, field, value, "must be an integer >= 1")
    return int(value)


def _parse_window(window: Any) -> tuple[int | None, float | None]:
    """An int is a count-based window; a duration makes it time-based."""
    if isinstance(window, float):
        _require(False, "window", window, "is ambiguous: use an int (calls) or a duration string")
    if isinstance(window, int) and not isinstance(window, bool):
        size = positive_int(window, "window")
        _require(size <= MAX_WINDOW_CALLS, "window", window, f"exceeds {MAX_WINDOW_CALLS} calls")
        return size, None
    return None, bounded_duration(window, "window", _EXAMPLES["window"])
