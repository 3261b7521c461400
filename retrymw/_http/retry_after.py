"""``Retry-After`` header values read as delays: delta-seconds and the three HTTP-date forms.

RFC 9110 §10.2.3 (``Retry-After``) and §5.6.7 (HTTP-date). The date grammar is most of the code
and nothing else in `_http` needs it, so it lives here; `_http` re-exports `parse_retry_after`
and trims ``Content-Length`` of the same `WHITESPACE`.
"""

from __future__ import annotations

import calendar
import logging
import re
import time

__all__ = ["WHITESPACE", "parse_retry_after"]

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
    text = value.strip(WHITESPACE)
    if text and text.isascii() and text.isdigit():
        seconds = float(text)  # float() has no digit-count limit and turns huge values into inf
        return seconds if seconds > 0.0 else None
    try:
        moment = _parse_http_date(text, now_wall)
    except (ValueError, OverflowError, OSError):
        moment = None
    if moment is None:
        _logger.debug("retrymw: ignoring unparseable Retry-After header %r", value[:100])
        return None
    delay = moment - now_wall
    return delay if delay > 0.0 else None


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
    month = _MONTHS[match["month"].lower()]
    day, hour, minute, second = (int(match[key]) for key in ("day", "hour", "minute", "second"))
    if not (
        1 <= day <= calendar.monthrange(year, month)[1]
        and hour <= 23
        and minute <= 59
        and second <= 60
    ):
        return None
    # A leap second reads as the second before it.
    stamp = calendar.timegm((year, month, day, hour, minute, min(second, 59), 0, 0, 0))
    zone = (match["zone"] or "gmt").lower()
    if zone[0] in "+-":
        offset = int(zone[1:3]) * 3600 + int(zone[3:5]) * 60
        stamp -= offset if zone[0] == "+" else -offset
    return float(stamp)
