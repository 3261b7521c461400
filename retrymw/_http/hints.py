"""Server hints: what an HTTP response says about retrying it, read from its headers.

`read_hints` reads every dialect a real API sends (``Retry-After``, ``retry-after-ms``,
``x-should-retry``, ``x-amz-retry-after``, the ``RateLimit`` drafts, ``X-RateLimit-Reset``,
OpenAI's and Anthropic's resets; docs/http.md has the table) and returns the longest delay any
of them asks for, with the header that asked, and ``x-should-retry``'s verdict. It is pure and
free of httpx (headers are anything with a case-insensitive ``get``), so the rules are tested
against a fixed "now". A header is outside input: garbage is ignored (logged at DEBUG), a value
longer than `MAX_HINT_LENGTH` is ignored unread, and every parser runs in time linear in its
input (each pattern matched once, anchored), so a hostile header costs no more than a real one.
"""

from __future__ import annotations

import calendar
import logging
import math
import re
import time
from collections.abc import Callable
from typing import Any, Final, NamedTuple

__all__ = [
    "EPOCH_THRESHOLD",
    "MAX_HINT_LENGTH",
    "SHOULD_RETRY_HEADER",
    "WHITESPACE",
    "ServerHints",
    "parse_delta_seconds",
    "parse_duration",
    "parse_milliseconds",
    "parse_ratelimit",
    "parse_reset",
    "parse_retry_after",
    "parse_rfc3339",
    "read_hints",
    "says_when",
    "should_retry",
]

_logger = logging.getLogger("retrymw")

#: HTTP's optional whitespace, plus line ends left by lax servers: trimmed from header values.
WHITESPACE = " \t\r\n"

_MONTHS = {
    name: number
    for number, name in enumerate(
        ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"), 1
    )
}
_DAY = r"(?:mon|tue|wed|thu|fri|sat|sun)"
_LONG_DAY = r"(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)"
_MONTH = r"(?P<month>jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)"
_TIME = r"(?P<hour>[0-9]{2}):(?P<minute>[0-9]{2}):(?P<second>[0-9]{2})"
# A missing zone is read as UTC ("naive means UTC"); a numeric offset is applied.
_ZONE = r"(?:\s+(?P<zone>gmt|utc|ut|z|[+-][0-9]{4}))?"
_FLAGS = re.IGNORECASE | re.ASCII
_IMF_FIXDATE = re.compile(
    rf"{_DAY},\s*(?P<day>[0-9]{{1,2}})\s+{_MONTH}\s+(?P<year>[0-9]{{4}})\s+{_TIME}{_ZONE}", _FLAGS
)
_RFC850 = re.compile(
    rf"{_LONG_DAY},\s*(?P<day>[0-9]{{1,2}})-{_MONTH}-(?P<year>[0-9]{{2}})\s+{_TIME}{_ZONE}", _FLAGS
)
_ASCTIME = re.compile(
    rf"{_DAY}\s+{_MONTH}\s+(?P<day>[0-9]{{1,2}})\s+{_TIME}\s+(?P<year>[0-9]{{4}}){_ZONE}", _FLAGS
)


def parse_retry_after(value: str, now_wall: float) -> float | None:
    """Return the delay a ``Retry-After`` header asks for, in seconds, or ``None``.

    Accepts delta-seconds (ASCII digits only, surrounding whitespace trimmed) and the three
    HTTP-date forms: IMF-fixdate (``Sun, 06 Nov 1994 08:49:37 GMT``), RFC 850
    (``Sunday, 06-Nov-94 08:49:37 GMT``) and asctime (``Sun Nov  6 08:49:37 1994``). A date
    without a zone is UTC; a two-digit year more than 50 years ahead of ``now_wall`` belongs to
    the previous century (RFC 9110 §5.6.7).

    Args:
        value: the header value.
        now_wall: the current Unix time (the clock's ``wall()``), against which dates are read.

    Returns:
        The delay in seconds; ``None`` means "use the backoff": for ``0``, a date that is now
        or past, and for anything unparseable (``-1``, ``1.5``, non-ASCII digits, empty), which
        is logged at DEBUG. Never raises.
    """
    if not isinstance(value, str):
        return None
    delay = _signed_retry_after(value, now_wall)
    if delay is None:
        _logger.debug("ignoring unparseable Retry-After header %r", value[:100])
        return None
    return delay if delay > 0.0 else None


def _signed_retry_after(value: str, now_wall: float) -> float | None:
    """The delay a well-formed ``Retry-After`` asks for, ``0`` or less for now (``0``, a past
    date); ``None`` when ``value`` is neither delta-seconds nor an HTTP-date."""
    text = value.strip(WHITESPACE)
    if text and text.isascii() and text.isdigit():
        return float(text)  # float() has no digit-count limit and turns huge values into inf
    try:
        moment = _parse_http_date(text, now_wall)
    except (ValueError, OverflowError, OSError):
        return None
    return None if moment is None else moment - now_wall


def _parse_http_date(text: str, now_wall: float) -> float | None:
    for pattern in (_IMF_FIXDATE, _RFC850, _ASCTIME):
        match = pattern.fullmatch(text)
        if match is not None:
            break
    else:
        return None
    year = int(match["year"])
    if pattern is _RFC850:
        this_year = time.gmtime(now_wall).tm_year
        year += this_year - this_year % 100
        if year > this_year + 50:
            year -= 100
    return _unix_time(match, year, _MONTHS[match["month"].lower()])


def _unix_time(match: re.Match[str], year: int, month: int) -> float | None:
    """The Unix time a date pattern matched, or ``None`` when a field is out of range.

    ``day``, ``hour``, ``minute``, ``second`` and ``zone`` are the match's groups: a zone is
    absent or a name (UTC), or a numeric offset ``+hhmm`` / ``+hh:mm`` of at most 23:59. A
    leap second reads as the second before it.
    """
    day, hour, minute, second = (int(match[key]) for key in ("day", "hour", "minute", "second"))
    if not (
        year >= 1  # calendar knows no year 0
        and 1 <= month <= 12
        and 1 <= day <= calendar.monthrange(year, month)[1]
        and hour <= 23
        and minute <= 59
        and second <= 60
    ):
        return None
    stamp = calendar.timegm((year, month, day, hour, minute, min(second, 59), 0, 0, 0))
    zone = match["zone"] or "z"
    if zone[0] in "+-":
        hours, minutes = int(zone[1:3]), int(zone[-2:])
        if hours > 23 or minutes > 59:
            return None
        offset = hours * 3600 + minutes * 60
        stamp -= offset if zone[0] == "+" else -offset
    return float(stamp)


# -- the other dialects ----------------------------------------------------------------------

#: The OpenAI/Anthropic header that allows (``true``) or forbids (``false``) a retry.
SHOULD_RETRY_HEADER = "x-should-retry"
#: An ``X-RateLimit-Reset`` value at least this large is a Unix time, not a delay: no API asks
#: for a 31-year wait, and every Unix time since September 2001 is larger. From 1e12 on, the
#: value is Unix milliseconds (a Unix time in seconds reaches 1e12 in the year 33658).
EPOCH_THRESHOLD = 1e9
_EPOCH_MS_THRESHOLD = 1e12
#: The longest header value a hint is read from. Real hints are short (an HTTP-date is 29
#: characters, a RateLimit field with a few policies well under 200); a longer value is ignored
#: unread and logged at DEBUG, so a hostile one costs a length check.
MAX_HINT_LENGTH = 256
# What `_get` answers for a value longer than MAX_HINT_LENGTH: like any value that is not
# text, garbage to every reader (a reset whose counter is garbage does not apply).
_TOO_LONG: Final = object()

_DECIMAL = re.compile(r"[0-9]+(?:\.[0-9]+)?|\.[0-9]+", re.ASCII)
_DURATION_PART = re.compile(r"([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(h|ms|us|µs|ns|m|s)", re.ASCII)
_DURATION_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}
_RFC3339 = re.compile(
    r"(?P<year>[0-9]{4})-(?P<month>[0-9]{2})-(?P<day>[0-9]{2})[Tt ]"
    r"(?P<hour>[0-9]{2}):(?P<minute>[0-9]{2}):(?P<second>[0-9]{2})(?P<fraction>\.[0-9]+)?"
    r"(?P<zone>[Zz]|[+-][0-9]{2}:[0-9]{2})",
    re.ASCII,
)
_ANTHROPIC_LIMITS = ("requests", "tokens", "input-tokens", "output-tokens")
_OPENAI_LIMITS = ("requests", "tokens")


class ServerHints(NamedTuple):
    """What a response's headers say about retrying it.

    Attributes:
        delay: the least delay before a retry, in seconds: the longest any header asks for;
            ``None`` when none asks (use the backoff).
        header: the header that set ``delay`` (lower case), or ``None``.
        should_retry: ``x-should-retry``'s verdict, or ``None`` when absent or neither
            ``true`` nor ``false``.
    """

    delay: float | None = None
    header: str | None = None
    should_retry: bool | None = None


NO_HINTS = ServerHints()


def _decimal(value: str) -> float | None:
    text = value.strip(WHITESPACE)
    return float(text) if _DECIMAL.fullmatch(text) else None


def parse_milliseconds(value: str, now_wall: float) -> float | None:
    """``retry-after-ms``, ``x-amz-retry-after``: a decimal number of milliseconds, or None."""
    number = _decimal(value)
    return None if number is None else number / 1000.0


def parse_delta_seconds(value: str, now_wall: float) -> float | None:
    """``RateLimit-Reset``: a decimal number of seconds, or None."""
    return _decimal(value)


def parse_reset(value: str, now_wall: float) -> float | None:
    """``X-RateLimit-Reset``: delta-seconds, or a Unix time (seconds or milliseconds)."""
    number = _decimal(value)
    if number is None:
        return None
    if number >= _EPOCH_MS_THRESHOLD:
        return number / 1000.0 - now_wall
    if number >= EPOCH_THRESHOLD:
        return number - now_wall
    return number


def parse_duration(value: str, now_wall: float = 0.0) -> float | None:
    """Return a Go-style duration (``6m0s``, ``12ms``, ``1.5s``, ``1h2m``) in seconds, or None.

    A bare number is seconds. ``now_wall`` is unused: every parser takes it.
    """
    text = value.strip(WHITESPACE)
    if not text:
        return None
    bare = _decimal(text)
    if bare is not None:
        return bare
    total = 0.0
    position = 0
    while position < len(text):
        # Anchored at the position and given up at the first mismatch: finditer would search
        # on from every later position, quadratic on a long run of digits with no unit.
        match = _DURATION_PART.match(text, position)
        if match is None:
            return None
        total += float(match[1]) * _DURATION_UNITS[match[2]]
        position = match.end()
    return total


def parse_rfc3339(value: str, now_wall: float) -> float | None:
    """Return the delay until an RFC 3339 time (``2024-05-01T12:00:30Z``), or None."""
    match = _RFC3339.fullmatch(value.strip(WHITESPACE))
    if match is None:
        return None
    stamp = _unix_time(match, int(match["year"]), int(match["month"]))
    if stamp is None:
        return None
    if match["fraction"]:
        stamp += float(match["fraction"])
    return stamp - now_wall


def parse_ratelimit(value: str, now_wall: float, status: int) -> float | None:
    """The ``RateLimit`` field: ``"default";r=0;t=30`` items, or ``remaining=0, reset=30``."""
    longest: float | None = None
    legacy: dict[str, str] = {}
    for member in value.split(","):
        name, _, params = member.partition(";")
        if not params:
            key, equals, item = name.partition("=")
            if equals:
                legacy[key.strip(WHITESPACE).lower()] = item
            continue
        fields = {}
        for param in params.split(";"):
            key, _, item = param.partition("=")
            fields[key.strip(WHITESPACE).lower()] = item
        reset = fields.get("t")
        if reset is not None and _exhausted(fields.get("r"), status):
            longest = _longer(longest, _decimal(reset))
    reset = legacy.get("reset")
    if reset is not None and _exhausted(legacy.get("remaining"), status):
        longest = _longer(longest, _decimal(reset))
    return longest


def _longer(current: float | None, new: float | None) -> float | None:
    return new if current is None or (new is not None and new > current) else current


def _exhausted(remaining: object, status: int) -> bool:
    """Whether a limit whose ``remaining`` counter reads so is the one that refused the call.

    An absent counter (``None``) counts as exhausted on a 429 only; garbage (not text, too
    long, not a number) never does.
    """
    if remaining is None:
        return status == 429
    return isinstance(remaining, str) and _decimal(remaining) == 0.0


Parser = Callable[[str, float], "float | None"]
# (header, parser, the header of the "remaining" counter that makes it apply, or None if always)
_DELAY_HEADERS: tuple[tuple[str, Parser, str | None], ...] = (
    ("retry-after-ms", parse_milliseconds, None),
    ("retry-after", parse_retry_after, None),
    ("x-amz-retry-after", parse_milliseconds, None),
    ("ratelimit-reset", parse_delta_seconds, "ratelimit-remaining"),
    ("x-ratelimit-reset", parse_reset, "x-ratelimit-remaining"),
    *(
        (f"x-ratelimit-reset-{limit}", parse_duration, f"x-ratelimit-remaining-{limit}")
        for limit in _OPENAI_LIMITS
    ),
    *(
        (
            f"anthropic-ratelimit-{limit}-reset",
            parse_rfc3339,
            f"anthropic-ratelimit-{limit}-remaining",
        )
        for limit in _ANTHROPIC_LIMITS
    ),
)


def should_retry(headers: Any) -> bool | None:
    """``x-should-retry``: True for ``true``, False for ``false`` (any case), else None."""
    try:
        value = _get(headers, SHOULD_RETRY_HEADER)
    except Exception:  # hostile headers: no verdict
        return None
    if not isinstance(value, str):
        return None
    value = value.strip(WHITESPACE).lower()
    return True if value == "true" else False if value == "false" else None


def read_hints(headers: Any, status: int, now_wall: float) -> ServerHints:
    """Read every server hint of a response with ``status`` and ``headers``.

    Args:
        headers: the response headers: anything with a case-insensitive ``get``.
        status: the response status: rate-limit resets without a ``remaining`` counter apply
            only to a 429.
        now_wall: the current Unix time (the clock's ``wall()``), against which times are read.

    Returns:
        The longest delay asked for and its header, and ``x-should-retry``'s verdict. Never
        raises: an unreadable value is skipped (and logged at DEBUG).
    """
    delay: float | None = None
    source: str | None = None
    try:
        for header, parse, remaining in _DELAY_HEADERS:
            value = _get(headers, header)
            if value is None or (
                remaining is not None and not _exhausted(_get(headers, remaining), status)
            ):
                continue
            found = _read(header, parse, value, now_wall)
            if found is not None and (delay is None or found > delay):
                delay, source = found, header
        value = _get(headers, "ratelimit")
        if value is not None:
            found = parse_ratelimit(value, now_wall, status) if isinstance(value, str) else None
            if found is not None and found > 0.0 and (delay is None or found > delay):
                delay, source = found, "ratelimit"
    except Exception:  # hostile headers (a get that raises): what was read so far stands
        _logger.debug("could not read the response's retry hints", exc_info=True)
    verdict = should_retry(headers)
    if delay is None and verdict is None:
        return NO_HINTS
    return ServerHints(delay, source, verdict)


def says_when(headers: Any, now_wall: float) -> bool:
    """Whether ``Retry-After`` (or the providers' ``retry-after-ms``) says, in a well-formed
    value, when to send the request again: now (``0``, a past date) or later. A value that
    `parse_retry_after` or `parse_milliseconds` cannot read says nothing. Never raises."""
    try:
        retry_after = _get(headers, "retry-after")
        if isinstance(retry_after, str) and _signed_retry_after(retry_after, now_wall) is not None:
            return True
        milliseconds = _get(headers, "retry-after-ms")
        return (
            isinstance(milliseconds, str) and parse_milliseconds(milliseconds, now_wall) is not None
        )
    except Exception:  # hostile headers (a get that raises) say nothing
        _logger.debug("could not read the response's Retry-After", exc_info=True)
        return False


def _get(headers: Any, name: str) -> object:
    """The value of header ``name`` as every hint reader sees it: ``None`` when absent, and
    `_TOO_LONG` (garbage, like any value that is not text) when over `MAX_HINT_LENGTH`."""
    value = headers.get(name)
    if isinstance(value, str) and len(value) > MAX_HINT_LENGTH:
        _logger.debug(
            "ignoring a %s header of %d characters (hints are at most %d): %r...",
            name,
            len(value),
            MAX_HINT_LENGTH,
            value[:32],
        )
        return _TOO_LONG
    return value


def _read(header: str, parse: Parser, value: object, now_wall: float) -> float | None:
    if not isinstance(value, str):
        return None
    try:
        found = parse(value, now_wall)
    except (ValueError, OverflowError, OSError):
        found = None
    if found is None:
        if parse is not parse_retry_after:  # which logs its own
            _logger.debug("ignoring unparseable %s header %r", header, value[:100])
        return None
    if math.isnan(found) or found <= 0.0:
        return None
    return found
