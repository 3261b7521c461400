"""The fleet's redis-py client: short timeouts, no client-side retries, lazy connection; `Store`
runs the fleet's scripts on it, loading them again when the store lost them and following a
Redis Cluster's ``MOVED`` to the node serving the namespace.

redis-py retries a failed command on its own by default (three to ten times, with backoff), which
multiplies a hung store's delay; the fleet retries on its next step instead. Connecting is lazy,
so a store that is down at start raises nothing here.

A URL is shown redacted in every error (`redact_url`), and one whose user name or password
holds a raw ``#``, ``?`` or ``/`` is refused: redis-py (through `urllib.parse`) would end the
host part there, take a piece of the password for the host or the port, and connect to it.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

from .._core.errors import ConfigError
from .._core.redact import REDACTED, redact_text, redact_url

__all__ = ["Script", "Store", "connect"]

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


class Script:
    """A Lua script and its SHA-1, which names it in ``EVALSHA`` (computed here, not asked)."""

    __slots__ = ("sha", "source")

    def __init__(self, source: str) -> None:
        self.source = source
        self.sha = hashlib.sha1(source.encode()).hexdigest()  # Redis's own script id


class Store:
    """One connection to the store that runs the fleet's scripts, wherever their slot lives.

    ``run`` sends ``EVALSHA``; a store that lost the script (``NOSCRIPT``: restart, failover)
    gets ``SCRIPT LOAD`` and the call again, and a Redis Cluster node that does not serve the
    namespace's slot (``MOVED``) is left for the node it names, with the same settings and
    credentials: every key of a namespace shares one slot (`_keys`), so the fleet then talks to
    that node only. At most three commands per `run`.

    Args:
        url: the store's URL (`connect`).
        timeout: the connect and socket timeout of every command.
    """

    def __init__(self, url: str, *, timeout: float) -> None:
        self._client = connect(url, timeout=timeout)

    def run(self, script: Script, keys: list[str], args: list[Any]) -> Any:
        """``EVALSHA`` of ``script``; whatever the store answers (errors raise)."""
        from redis.exceptions import NoScriptError, ResponseError

        loaded = redirected = False
        while True:
            try:
                return self._client.evalsha(script.sha, len(keys), *keys, *args)
            except NoScriptError:  # noqa: PERF203 - three tries at most, not a hot loop
                if loaded:
                    raise
                loaded = True
                self._client.script_load(script.source)
            except ResponseError as error:
                if redirected or type(error).__name__ not in ("MovedError", "AskError"):
                    raise
                redirected = True
                self._follow(error)

    def _follow(self, error: Exception) -> None:
        """Talk to the cluster node a ``MOVED`` (or ``ASK``) names from now on."""
        import redis

        host, port = _redirection(error)
        pool = self._client.connection_pool
        kwargs = dict(pool.connection_kwargs)
        kwargs.update(host=host, port=port)
        moved = redis.ConnectionPool(connection_class=pool.connection_class, **kwargs)
        old, self._client = self._client, redis.Redis(connection_pool=moved)
        old.close()

    def close(self) -> None:
        """Close the connection."""
        self._client.close()


def _redirection(error: Exception) -> tuple[str, int]:
    """The ``host, port`` of a ``MOVED <slot> <host>:<port>`` error."""
    host, port = getattr(error, "host", None), getattr(error, "port", None)
    if isinstance(host, str) and isinstance(port, int):
        return host, port
    words = str(error).split()
    if not words or ":" not in words[-1]:
        raise ConnectionError("a MOVED reply without a node") from error
    host, _, text = words[-1].rpartition(":")
    if not text.isdigit():
        raise ConnectionError("a MOVED reply without a port") from error
    return host, int(text)
