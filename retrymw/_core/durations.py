"""Duration parsing: ``"1h30m"``, ``"500ms"``, ``{secs, nanos}``, ``timedelta`` and numbers."""

from __future__ import annotations

import math
import re
from datetime import timedelta
from typing import Any

from .errors import ConfigError

__all__ = ["MAX_DURATION", "parse_duration"]

_UNIT_SECONDS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}
# Units must appear largest first and at most once: "1h30m", "2m30s", "1s500ms". "µs" is an
# alias of "us" and shares its rank, so "1us2µs" is rejected like "1s2s".
_UNIT_RANK = {"h": 0, "m": 1, "s": 2, "ms": 3, "us": 4, "µs": 4, "ns": 5}
# ASCII digits only: ``\d`` would also accept digits of other scripts (Arabic-Indic, ...).
_PART = re.compile(r"([0-9]+(?:\.[0-9]+)?)(h|ms|m|s|us|µs|ns)")
_BARE_NUMBER = re.compile(r"[0-9]+(?:\.[0-9]+)?")
_EXAMPLE = '"30s", "500ms", "2m30s" or "1h30m"'

#: The longest duration retrymw accepts: 365 days (``"8760h"``). Every sleep retrymw can ask
#: for stays far inside what ``time.sleep`` (about 292 years before ``OverflowError``), asyncio,
#: trio and ``threading`` (49 days on Windows is the narrowest, and retrymw does not wait on
#: it) can take; ``max_delay: 3000000h`` used to load and then raise ``OverflowError`` at the
#: first sleep, inside the user's call. A year is longer than any retry wait, deadline or
#: breaker period a caller could mean.
MAX_DURATION = 365 * 24 * 3600.0
_TOO_LONG = "duration is longer than the maximum of 365 days (8760h)"


def parse_duration(value: Any, *, field: str = "duration") -> float:
    """Convert a duration to float seconds.

    Accepted forms: a non-negative ``int``/``float`` (seconds), a ``timedelta``, a string made of
    ``<number><unit>`` parts with units ``h``, ``m``, ``s``, ``ms``, ``us``, ``ns`` written largest
    first (``"30s"``, ``"500ms"``, ``"2m30s"``, ``"1h30m"``), or a mapping ``{"secs": 1,
    "nanos": 500_000_000}``. A bare numeric string (``"500"``) and words (``"1 second"``) are
    rejected because their unit is ambiguous.

    A duration is at most `MAX_DURATION` (365 days): longer sleeps overflow the platform's
    timers.

    Args:
        value: the duration to parse.
        field: the field path to name in the error message.

    Returns:
        The duration in seconds.

    Raises:
        ConfigError: the value is not a finite, non-negative duration in an accepted form, or
            it is longer than `MAX_DURATION`.

    .. versionadded:: 0.1
    """
    if isinstance(value, bool):
        raise ConfigError(field, value, "a boolean is not a duration", _EXAMPLE)
    if isinstance(value, int) and value > MAX_DURATION:
        # Checked before float(), which raises OverflowError for a huge int.
        raise ConfigError(field, value, _TOO_LONG, _EXAMPLE)
    if isinstance(value, (int, float)):
        seconds = float(value)
    elif isinstance(value, timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, str):
        seconds = _parse_text(value, field)
    elif isinstance(value, dict):
        seconds = _parse_secs_nanos(value, field)
    else:
        raise ConfigError(field, value, "unsupported duration type", _EXAMPLE)
    if math.isnan(seconds) or math.isinf(seconds):
        raise ConfigError(field, value, "duration must be finite", _EXAMPLE)
    if seconds < 0:
        raise ConfigError(field, value, "duration must not be negative", _EXAMPLE)
    if seconds > MAX_DURATION:
        raise ConfigError(field, value, _TOO_LONG, _EXAMPLE)
    return seconds


def _parse_text(text: str, field: str) -> float:
    compact = text.strip()
    if not compact:
        raise ConfigError(field, text, "empty duration", _EXAMPLE)
    if compact.startswith("-"):
        raise ConfigError(field, text, "duration must not be negative", _EXAMPLE)
    total = 0.0
    position = 0
    last_rank = -1
    while position < len(compact):
        # Anchored at the position and given up at the first mismatch: finditer would search
        # on from every later position, quadratic on a long run of digits with no unit.
        match = _PART.match(compact, position)
        if match is None:
            break
        rank = _UNIT_RANK[match.group(2)]
        if rank <= last_rank:
            raise ConfigError(field, text, "units must be written largest first, once", _EXAMPLE)
        last_rank = rank
        total += float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
        position = match.end()
    if position != len(compact) or last_rank < 0:
        problem = (
            "a bare number has no unit"
            if _BARE_NUMBER.fullmatch(compact)
            else "not a duration with units h, m, s, ms, us or ns"
        )
        raise ConfigError(field, text, problem, _EXAMPLE)
    return total


def _parse_secs_nanos(mapping: dict[Any, Any], field: str) -> float:
    example = "{secs: 1, nanos: 500000000}"
    unknown = set(mapping) - {"secs", "nanos"}
    if unknown:
        raise ConfigError(field, mapping, f"unknown keys {sorted(map(str, unknown))}", example)
    secs = mapping.get("secs", 0)
    nanos = mapping.get("nanos", 0)
    for part, number in (("secs", secs), ("nanos", nanos)):
        if isinstance(number, bool) or not isinstance(number, int) or number < 0:
            raise ConfigError(f"{field}.{part}", number, "must be a non-negative integer", example)
    if secs > MAX_DURATION:
        raise ConfigError(f"{field}.secs", secs, _TOO_LONG, example)
    if nanos >= 1_000_000_000:
        raise ConfigError(f"{field}.nanos", nanos, "must be below 1_000_000_000", example)
    return float(secs) + float(nanos) / 1e9
