"""The fleet's redis-py client: short timeouts, no client-side retries, lazy connection.

redis-py retries a failed command on its own by default (three to ten times, with backoff), which
multiplies a hung store's delay; the fleet retries on its next step instead. Connecting is lazy,
so a store that is down at start raises nothing here.

A URL is shown redacted in every error (`redact_url`), and one whose user name or password
holds a raw ``#``, ``?`` or ``/`` is refused: redis-py (through `urllib.parse`) would end the
host part there, take a piece of the password for the host or the port, and connect to it.
"""

from __future__ import annotations

import re
from typing import Any

from .._core.errors import ConfigError
from .._core.redact import REDACTED, redact_text, redact_url

__all__ = ["connect"]

# Where urllib (and so redis-py) ends a URL's host part.
_AUTHORITY_END = re.compile(r"[/?#]")


def connect(url: str, *, timeout: float) -> Any:
    """A redis-py client for ``url`` with ``timeout`` on connect and on every socket operation.

    Raises:
        ConfigError: ``url`` is not a Redis URL redis-py accepts.
        ImportError: redis-py is not installed (names the extra).
    """
    try:
        import redis
        from redis.backoff import NoBackoff
        from redis.retry import Retry
    except ImportError:  # pragma: no cover - the suite installs redis
        raise ImportError(
            "RedisFleet needs the redis client: pip install 'retrymw[fleet]'"
        ) from None
    example = '"redis://127.0.0.1:6379/0"'
    if not isinstance(url, str) or not url.startswith(("redis://", "rediss://", "unix://")):
        shown = _refused(url) if isinstance(url, str) else url
        raise ConfigError("url", shown, "must be a redis://, rediss:// or unix:// URL", example)
    if _unencoded_userinfo(url):
        raise ConfigError(
            "url",
            redact_url(url),
            "its user name or password holds a raw '#', '?' or '/', which ends the host part: "
            "percent-encode them (%23, %3F, %2F)",
            '"redis://user:p%23ss@127.0.0.1:6379/0"',
        )
    try:
        return redis.Redis.from_url(
            url,
            socket_timeout=timeout,
            socket_connect_timeout=timeout,
            retry_on_timeout=False,
            retry=Retry(NoBackoff(), 0),
            health_check_interval=0,
        )
    except ValueError as error:
        raise ConfigError("url", redact_url(url), redact_text(str(error)), example) from None


def _refused(url: str) -> str:
    """A value refused as no Redis URL, as the error shows it.

    It is no URL to parse either (``redis:/u:pw@host``, ``u:pw@host``, ``http://u:1#x@host``),
    but in a Redis URL field whatever precedes an ``@`` is a user name and a password.
    """
    _, at, host = url.rpartition("@")
    return f"{REDACTED}:{REDACTED}@{redact_url(host)}" if at else redact_url(url)


def _unencoded_userinfo(url: str) -> bool:
    """Whether an ``@`` follows where urllib ends the host part: a raw ``#?/`` before it."""
    rest = url.partition("://")[2]
    end = _AUTHORITY_END.search(rest)
    return end is not None and "@" in rest[end.start() :]
