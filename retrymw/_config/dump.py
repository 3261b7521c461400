"""`to_mapping`: a `RetryPolicy` written back in the canonical config form `load_config` reads.

Writing config is the inverse of loading it and shares none of its validation, so it lives
apart from `loader`, which re-exports `to_mapping`. The canonical forms are spelled here, so
`loader`'s error messages take their ``backoff`` and ``retry_on`` examples from this module.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from .._core.backoff import (
    Backoff,
    CustomBackoff,
    ExponentialBackoff,
    FibonacciBackoff,
    FixedBackoff,
    LinearBackoff,
)
from .._core.durations import parse_duration
from .._core.errors import ConfigError
from .._core.matchers import Matcher, built_from
from .._core.policy import RetryPolicy

__all__ = ["BACKOFF_EXAMPLE", "MATCHER_EXAMPLE", "backoff_form", "to_mapping"]

# Examples of the canonical forms, for error messages here and in `loader`.
BACKOFF_EXAMPLE = '"exponential" or {exponential: {base: 3.0}}'
MATCHER_EXAMPLE = (
    '["timeout", "network", "5xx", 429, {pattern: "reset by peer"}, {status: [502, 503]}]'
)


def to_mapping(policy: RetryPolicy) -> dict[str, Any]:
    """Serialise ``policy`` into the canonical config form, which `load_config` reads back.

    ``load_config(to_mapping(policy)).defaults == policy`` for every policy that config can
    express. Fields that are off (``None``) are left out, so the result also suits TOML, and
    so is ``retry_below`` unless a policy turns it on (the opt-out is written where it is used).

    Raises:
        ConfigError: the policy holds what config cannot express: a ``fallback``, a `Backoff`
            class of one's own, or an exception class or predicate in ``retry_on``.

    .. versionadded:: 0.1
    """
    if policy.on_failure == "fallback":
        raise ConfigError("on_failure", "fallback", "has no config form", '"raise"')
    result: dict[str, Any] = {
        "name": policy.name,
        "attempts": policy.attempts,
        "backoff": backoff_form(policy.backoff),
        "initial_delay": _format_duration(policy.initial_delay),
        "max_delay": _format_duration(policy.max_delay),
        "jitter_factor": policy.jitter_factor,
        "on_failure": policy.on_failure,
    }
    if policy.sets_jitter:  # unset stays unset: a transport then keeps its full jitter
        result["jitter"] = policy.jitter or False
    for key in ("retry_budget", "timeout", "deadline"):
        if getattr(policy, key) is not None:
            result[key] = _format_duration(getattr(policy, key))
    if policy.retry_on is not None:
        result["retry_on"] = _matcher_form(policy.retry_on)
    if policy.retry_below:
        result["retry_below"] = True
    return result


def _format_duration(seconds: float) -> str:
    """Return readable duration text that parses back to exactly ``seconds``."""
    text = f"{_plain(seconds)}s"  # repr() is the shortest decimal that float() maps back
    if seconds == int(seconds):
        hours, rest = divmod(int(seconds), 3600)
        parts = zip((hours, *divmod(rest, 60)), "hms", strict=True)
        text = "".join(f"{n}{unit}" for n, unit in parts if n) or "0s"
    elif seconds < 1.0:
        text = f"{_plain(round(seconds * 1000, 6))}ms"
    return text if parse_duration(text) == seconds else f"{_plain(seconds)}s"


def _plain(number: float) -> str:
    return format(Decimal(repr(number)), "f").removesuffix(".0")


def backoff_form(backoff: Backoff) -> Any:
    if isinstance(backoff, (FixedBackoff, FibonacciBackoff)):
        return "fixed" if isinstance(backoff, FixedBackoff) else "fibonacci"
    if isinstance(backoff, LinearBackoff):
        if backoff.increment is None:
            return "linear"
        return {"linear": {"increment": _format_duration(backoff.increment)}}
    if isinstance(backoff, ExponentialBackoff):
        return "exponential" if backoff.base == 2.0 else {"exponential": {"base": backoff.base}}
    if isinstance(backoff, CustomBackoff):
        return {"custom": {"delays": [_format_duration(d) for d in backoff.delays]}}
    raise ConfigError(
        "backoff", backoff, "a Backoff of one's own has no config form", BACKOFF_EXAMPLE
    )


def _matcher_form(matcher: Matcher) -> list[Any]:
    built = built_from(matcher)
    kind, *args = built
    entries: list[Any] = []
    for key in args[0] if kind == "any" else (built,):
        kind, *args = key
        if kind in ("timeout", "network", "server_error", "rate_limit"):
            entries.append(kind)
        elif kind == "pattern":
            entries.append({"pattern": args[0]})
        elif kind == "status":
            codes = sorted(args[0])
            entries.append(codes[0] if len(codes) == 1 else {"status": codes})
        else:
            problem = "exception classes, predicates, & and ~ have no config form"
            raise ConfigError("retry_on", matcher, problem, MATCHER_EXAMPLE)
    return entries
