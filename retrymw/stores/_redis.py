"""`RedisStore`: resume records on Redis or Valkey, for the processes of a fleet."""

from __future__ import annotations

from typing import Any

from .._core.durations import parse_duration
from .._core.errors import ConfigError
from .._core.redact import exception_text, redact_url
from ._base import ResumeRecord, StoreError, keep_until, retention_of

__all__ = ["RedisStore"]

# Each script runs atomically on the server: a claim is one increment-and-read, so processes
# sharing a key never count one attempt twice. Numbers travel as strings (Lua would truncate
# floats to integers on the way back).
_CLAIM = """
if ARGV[3] == '0' and redis.call('EXISTS', KEYS[1]) == 0 then return false end
redis.call('HINCRBY', KEYS[1], 'a', 1)
local now = tonumber(ARGV[1])
local anchor = now
local expires = redis.call('HGET', KEYS[1], 'e')
if expires and tonumber(expires) > now then anchor = tonumber(expires) end
redis.call('EXPIRE', KEYS[1], math.ceil(anchor - now + tonumber(ARGV[2])))
return redis.call('HMGET', KEYS[1], 'a', 'd', 'e', 'n')
"""
_ADD_FAILURE = """
if redis.call('EXISTS', KEYS[1]) == 0 then return false end
redis.call('HINCRBYFLOAT', KEYS[1], 'd', ARGV[1])
if ARGV[2] ~= '' then redis.call('HSETNX', KEYS[1], 'e', ARGV[2]) end
redis.call('HSET', KEYS[1], 'n', ARGV[3])
redis.call('EXPIRE', KEYS[1], ARGV[4])
return redis.call('HMGET', KEYS[1], 'a', 'd', 'e', 'n')
"""


class RedisStore:
    """Resume records on Redis or Valkey, shared by every process that uses the same server.

    One hash per key (``{namespace}:resume:{sha256 of the key}``) with a TTL: records expire on
    their own ``retention`` after their budget's expiry. Claims and failures are Lua scripts,
    atomic on the server. The client is the fleet's (short timeouts, no client-side retries):
    a slow or down server costs a call at most ``timeout`` per operation, after which the call
    goes on in memory.

    Args:
        url: ``redis://``, ``rediss://`` or ``unix://`` URL (credentials are never shown).
        namespace: prefix of every key, to share one server between applications.
        retention: how long a record outlives its budget's expiry (or its last update without
            a budget) when its call never ends; a duration, 24 h by default.
        timeout: connect and socket timeout of every operation.

    Raises:
        StoreError: the server cannot be reached (checked with ``PING`` at construction).
        ConfigError: a malformed URL, namespace or duration.
        ImportError: redis-py is missing (``pip install 'retrymw[redis]'``).

    .. versionadded:: 0.2
    """

    __slots__ = ("_add_failure", "_claim", "_client", "_url", "namespace", "retention")

    def __init__(
        self,
        url: str,
        *,
        namespace: str = "retrymw",
        retention: Any = None,
        timeout: Any = "250ms",
    ) -> None:
        if not isinstance(namespace, str) or not namespace:
            raise ConfigError("namespace", namespace, "must be a non-empty string", '"payments"')
        self.namespace = namespace
        self.retention = retention_of(retention)
        seconds = parse_duration(timeout, field="timeout")
        if seconds <= 0.0:
            raise ConfigError("timeout", timeout, "must be positive", '"250ms"')
        try:
            import redis
        except ImportError:  # pragma: no cover - the suite installs redis
            raise ImportError(
                "RedisStore needs the redis client: pip install 'retrymw[redis]'"
            ) from None
        from ..fleet._client import connect

        self._client = connect(url, timeout=seconds)  # a ConfigError shows the URL redacted
        self._url = redact_url(url)  # the only form of it ever shown
        try:
            self._client.ping()
        except redis.RedisError as error:
            raise StoreError(
                f"RedisStore cannot reach {self._url}: {type(error).__name__}: "
                f"{exception_text(error)}; "
                "expected a running Redis or Valkey such as 'redis://127.0.0.1:6379/0'"
            ) from None
        self._claim = self._client.register_script(_CLAIM)
        self._add_failure = self._client.register_script(_ADD_FAILURE)

    def _key(self, key: str) -> str:
        return f"{self.namespace}:resume:{key}"

    def load(self, key: str, now: float) -> ResumeRecord | None:
        """See `Store.load`."""
        return _record(self._client.hmget(self._key(key), ["a", "d", "e", "n"]))

    def claim(self, key: str, now: float, *, create: bool) -> ResumeRecord | None:
        """See `Store.claim`."""
        values = self._claim(
            keys=[self._key(key)], args=[repr(now), self.retention, "1" if create else "0"]
        )
        return None if values is None else _record(values)

    def add_failure(
        self, key: str, now: float, *, delay: float, expires_at: float | None, next_at: float
    ) -> ResumeRecord | None:
        """See `Store.add_failure`."""
        keep = keep_until(ResumeRecord(0, 0.0, expires_at, next_at), now, self.retention)
        values = self._add_failure(
            keys=[self._key(key)],
            args=[
                repr(delay),
                "" if expires_at is None else repr(expires_at),
                repr(next_at),
                max(1, int(keep - now + 1.0)),
            ],
        )
        return None if values is None else _record(values)

    def delete(self, key: str) -> None:
        """See `Store.delete`."""
        self._client.delete(self._key(key))

    def close(self) -> None:
        """Close the client's connections."""
        self._client.close()

    def __repr__(self) -> str:
        return f"<RedisStore url={self._url!r} namespace={self.namespace!r}>"


def _record(values: Any) -> ResumeRecord | None:
    attempts, delay, expires, due = values
    if attempts is None:
        return None
    return ResumeRecord(
        int(attempts),
        float(delay) if delay is not None else 0.0,
        float(expires) if expires is not None else None,
        float(due) if due is not None else None,
    )
