"""The fleet's redis-py client: short timeouts, no client-side retries, lazy connection.

redis-py retries a failed command on its own by default (three to ten times, with backoff), which
multiplies a hung store's delay; the fleet retries on its next step instead. Connecting is lazy,
so a store that is down at start raises nothing here.
"""

from __future__ import annotations

from typing import Any

from .._core.errors import ConfigError
from .._core.redact import redact_text

__all__ = ["connect"]


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
        raise ConfigError(
            "url", redact_text(str(url)), "must be a redis://, rediss:// or unix:// URL", example
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
        raise ConfigError("url", redact_text(url), str(error), example) from None
