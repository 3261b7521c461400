"""Rate limits: what a response's headers say about the send rate a server allows.

`read_rate_limits` reads the limits, counters and resets every real API sends, for requests
and for tokens, so that a `retrymw.Pacer` learns the limit before the first 429 (`hints` reads
the same headers for the opposite question: how long to wait before one retry):

* OpenAI's ``x-ratelimit-limit-{requests,tokens}`` (per minute), ``-remaining-*`` and
  ``-reset-*`` (durations such as ``6m0s``, ``20ms``);
* Anthropic's ``anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-{limit,
  remaining,reset}`` (per minute; resets in RFC 3339);
* the IETF drafts: ``RateLimit-Policy`` (``"default";q=100;w=10`` and ``100;w=10``),
  ``RateLimit`` (``"default";r=0;t=3`` and ``limit=100, remaining=0, reset=3``) and the
  separate ``RateLimit-Limit`` / ``-Remaining`` / ``-Reset`` fields;
* ``Retry-After`` and ``retry-after-ms``.

Pure and free of httpx: the headers are ``(name, value)`` pairs, read in one pass. Outside
input: a value longer than `MAX_HINT_LENGTH` or that does not parse is ignored, nothing
raises, and every value is read in time linear in its length.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Final

from .._protect.pacer import NO_RATE_LIMITS, RateLimits
from .hints import (
    MAX_HINT_LENGTH,
    WHITESPACE,
    parse_delta_seconds,
    parse_duration,
    parse_milliseconds,
    parse_retry_after,
    parse_rfc3339,
)

__all__ = ["NO_RATE_LIMITS", "RateLimits", "parse_policy", "read_rate_limits"]

#: The window of a limit that names none (OpenAI's and Anthropic's limits are per minute).
MINUTE: Final = 60.0
#: The most items of one structured field read: real ones list a few policies.
_MAX_ITEMS = 16


_REQUESTS, _TOKENS = "requests", "tokens"
_LIMIT, _REMAINING, _RESET = "limit", "remaining", "reset"

# header name -> (lane, field); lane None is the requests lane of the IETF drafts.
_SIMPLE: Final[dict[str, tuple[str, str]]] = {
    "x-ratelimit-limit-requests": (_REQUESTS, _LIMIT),
    "x-ratelimit-remaining-requests": (_REQUESTS, _REMAINING),
    "x-ratelimit-reset-requests": (_REQUESTS, _RESET),
    "x-ratelimit-limit-tokens": (_TOKENS, _LIMIT),
    "x-ratelimit-remaining-tokens": (_TOKENS, _REMAINING),
    "x-ratelimit-reset-tokens": (_TOKENS, _RESET),
    **{
        f"anthropic-ratelimit-{kind}-{field}": (
            _REQUESTS if kind == "requests" else _TOKENS,
            field,
        )
        for kind in ("requests", "tokens", "input-tokens", "output-tokens")
        for field in (_LIMIT, _REMAINING, _RESET)
    },
    "ratelimit-limit": (_REQUESTS, _LIMIT),
    "ratelimit-remaining": (_REQUESTS, _REMAINING),
    "ratelimit-reset": (_REQUESTS, _RESET),
}
_INTERESTING: Final = frozenset(
    {*_SIMPLE, "ratelimit", "ratelimit-policy", "retry-after", "retry-after-ms"}
)


def _number(text: str) -> float | None:
    """A non-negative decimal number, or None (linear: one anchored match)."""
    found = parse_delta_seconds(text, 0.0)
    return found if found is not None and math.isfinite(found) else None


def _reset(name: str, text: str, now_wall: float) -> float | None:
    """A reset in seconds from now, in the header's own dialect, or None."""
    if name.startswith("anthropic-"):
        found = parse_rfc3339(text, now_wall)
    elif name.startswith("x-ratelimit-"):
        found = parse_duration(text)
    else:
        found = parse_delta_seconds(text, now_wall)
    if found is None or not math.isfinite(found):
        return None
    return max(0.0, found)


def _params(item: str) -> tuple[str, dict[str, str]]:
    """Split ``key;a=1;b=2`` into its key and parameters (lower-cased names)."""
    head, _, rest = item.partition(";")
    params: dict[str, str] = {}
    if rest:
        for param in rest.split(";", _MAX_ITEMS)[:_MAX_ITEMS]:
            key, _, value = param.partition("=")
            params[key.strip(WHITESPACE).lower()] = value.strip(WHITESPACE)
    return head.strip(WHITESPACE), params


def parse_policy(value: str) -> float | None:
    """The strictest rate, per second, a ``RateLimit-Policy`` field names, or None.

    Accepts the current draft's items (``"default";q=100;w=10``: quota ``q`` per window ``w``
    seconds) and the older drafts' (``100;w=10``, the quota first). A policy without a window
    is per `MINUTE`. Garbage items are skipped.
    """
    strictest: float | None = None
    for item in value.split(",", _MAX_ITEMS)[:_MAX_ITEMS]:
        head, params = _params(item)
        quota_text = params.get("q", head)
        quota = _number(quota_text)
        window_text = params.get("w")
        window = MINUTE if window_text is None else _number(window_text)
        if quota is None or window is None or window <= 0.0:
            continue
        rate = quota / window
        if strictest is None or rate < strictest:
            strictest = rate
    return strictest


def _ratelimit_field(value: str) -> tuple[float | None, float | None]:
    """``RateLimit``'s least remaining counter and the reset of that item, or Nones.

    ``"default";r=0;t=3`` items (current draft) or ``limit=1, remaining=0, reset=3``.
    """
    remaining: float | None = None
    reset: float | None = None
    legacy: dict[str, str] = {}
    for item in value.split(",", _MAX_ITEMS)[:_MAX_ITEMS]:
        head, params = _params(item)
        if not params:
            key, equals, text = head.partition("=")
            if equals:
                legacy[key.strip(WHITESPACE).lower()] = text.strip(WHITESPACE)
            continue
        left = _number(params.get("r", ""))
        if left is not None and (remaining is None or left < remaining):
            remaining, reset = left, _number(params.get("t", ""))
    if remaining is None and "remaining" in legacy:
        remaining = _number(legacy["remaining"])
        reset = _number(legacy.get("reset", ""))
    return remaining, reset


def read_rate_limits(headers: Iterable[tuple[str, str]], now_wall: float) -> RateLimits:
    """Read every rate-limit header of a response, in one pass over ``headers``.

    Args:
        headers: the response headers as ``(name, value)`` pairs (any case).
        now_wall: the current Unix time, against which RFC 3339 resets are read.

    Returns:
        `NO_RATE_LIMITS` when no header says anything; otherwise the limits, counters and
        resets read. Where several headers give a lane's limit or counter, the strictest
        (lowest) wins; of its resets, the longest. Never raises.
    """
    found: dict[tuple[str, str], float] = {}
    retry_after: float | None = None

    def keep(lane: str, field: str, number: float | None) -> None:
        if number is None:
            return
        key = (lane, field)
        old = found.get(key)
        if old is None or (number > old if field == _RESET else number < old):
            found[key] = number

    try:
        pairs = iter(headers)
        for pair in pairs:
            name, value = pair
            if not isinstance(name, str) or not isinstance(value, str):
                continue
            if len(name) > 40 or len(value) > MAX_HINT_LENGTH:
                continue
            name = name.lower()
            if name not in _INTERESTING:
                continue
            simple = _SIMPLE.get(name)
            if simple is not None:
                lane, field = simple
                if field == _RESET:
                    keep(lane, field, _reset(name, value, now_wall))
                    continue
                number = _number(value)
                if number is not None and field == _LIMIT:
                    # OpenAI's and Anthropic's limits are per minute; the IETF draft's
                    # separate RateLimit-Limit names no window either.
                    number = number / MINUTE
                keep(lane, field, number)
            elif name == "ratelimit-policy":
                keep(_REQUESTS, _LIMIT, parse_policy(value))
            elif name == "ratelimit":
                remaining, reset = _ratelimit_field(value)
                keep(_REQUESTS, _REMAINING, remaining)
                keep(_REQUESTS, _RESET, reset)
            else:
                parse = parse_milliseconds if name == "retry-after-ms" else parse_retry_after
                delay = parse(value, now_wall)
                if delay is not None and math.isfinite(delay) and delay > 0.0:
                    retry_after = delay if retry_after is None else max(retry_after, delay)
    except Exception:  # hostile headers (an iterator that raises): what was read stands
        pass
    if not found and retry_after is None:
        return NO_RATE_LIMITS
    return RateLimits(
        requests=found.get((_REQUESTS, _LIMIT)),
        requests_remaining=found.get((_REQUESTS, _REMAINING)),
        requests_reset=found.get((_REQUESTS, _RESET)),
        tokens=found.get((_TOKENS, _LIMIT)),
        tokens_remaining=found.get((_TOKENS, _REMAINING)),
        tokens_reset=found.get((_TOKENS, _RESET)),
        retry_after=retry_after,
    )
