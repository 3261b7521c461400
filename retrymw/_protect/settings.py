"""`CircuitBreaker`'s arguments, checked once and frozen into `BreakerSettings`.

Every check raises a `ConfigError` naming the field, the bad value and an accepted example.
Validation runs once per breaker and never on the hot path, so it lives apart from the state
machine in `_breaker`; `CircuitBreakerRegistry` checks its ``max_keys`` with `positive_int`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .._core.durations import parse_duration
from .._core.errors import ConfigError

__all__ = ["BreakerSettings", "breaker_settings", "positive_int"]


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
    recovery = parse_duration(recovery_timeout, field="recovery_timeout")
    longest = recovery
    if max_recovery_timeout is not None:
        longest = parse_duration(max_recovery_timeout, field="max_recovery_timeout")
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
    "max_keys": "1024",
}


def _require(ok: bool, field: str, value: Any, problem: str) -> None:
    if not ok:
        if problem.startswith(("(", "[")):
            problem = f"must be a number in {problem}"
        raise ConfigError(field, value, problem, _EXAMPLES[field])


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
        return positive_int(window, "window"), None
    duration = parse_duration(window, field="window")
    _require(duration > 0.0, "window", window, "must be greater than zero")
    return None, duration
