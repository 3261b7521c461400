"""`RedisStore`: resume records on Redis or Valkey, for the processes of a fleet."""

from __future__ import annotations

import math
import re
from typing import Any

from .._core.durations import parse_duration
from .._core.errors import ConfigError
from .._core.redact import exception_text, redact_url
from ._base import MAX_ATTEMPTS, Claim, CorruptRecord, ResumeRecord, StoreError, retention_of

__all__ = ["RedisStore"]

# What a record's fields may hold, checked alike by the scripts (in Lua) and by `_record`: a
# count of at most 7 digits, and finite decimal numbers (no hexadecimal, no "nan" or "inf").
_COUNT = re.compile(rb"[0-9]{1,7}")
_NUMBER = re.compile(rb"[ \t]*[-+]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?[ \t]*")
_MAX_NUMBER = 64  # characters; a float's repr has at most 24

# `read(key)`: 'none', 'ended', 'corrupt', or 'live' and the fields as stored (a as a number).
_READ = f"""
local function count(v)
  if type(v) ~= 'string' or #v > 7 or not string.match(v, '^%d+$') then return nil end
  local n = tonumber(v)
  if n > {MAX_ATTEMPTS} then return nil end
  return n
end
local function number(v)
  if type(v) ~= 'string' or #v > {_MAX_NUMBER} or string.find(v, '[xXnN_]') then return nil end
  local n = tonumber(v)
  if n == nil or n ~= n or n == math.huge or n == -math.huge then return nil end
  return n
end
local function read(key)
  local kind = redis.call('TYPE', key)['ok']
  if kind == 'none' then return 'none' end
  if kind ~= 'hash' then return 'corrupt' end
  local v = redis.call('HMGET', key, 'a', 'd', 'e', 'n', 'x')
  if v[5] then return 'ended' end
  local a = count(v[1])
  local d = v[2] or '0'
  if a == nil or number(d) == nil or number(d) < 0 then return 'corrupt' end
  if (v[3] and number(v[3]) == nil) or (v[4] and number(v[4]) == nil) then return 'corrupt' end
  return 'live', a, d, v[3], v[4]
end
local function keep(key, now, expires, retention)
  local anchor = now
  if expires and tonumber(expires) > now then anchor = tonumber(expires) end
  redis.call('EXPIRE', key, math.ceil(anchor - now + retention))
end
"""
# Each script runs atomically on the server. Numbers travel as strings (Lua would truncate
# floats to integers on the way back); '' stands for none.
_LOAD = """
local kind = redis.call('TYPE', KEYS[1])['ok']
if kind ~= 'hash' then return {kind} end
return redis.call('HMGET', KEYS[1], 'a', 'd', 'e', 'n', 'x')
"""
# ARGV: now, retention, limit, known attempts ('' for none), known delay, known expiry.
_CLAIM = (
    _READ
    + """
local now, retention, limit = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local state, a, d, e, n = read(KEYS[1])
if state == 'ended' and ARGV[4] ~= '' then return false end
if state ~= 'live' then
  if ARGV[4] ~= '' then
    a, d, e, n = tonumber(ARGV[4]), ARGV[5], ARGV[6], false
    if e == '' then e = false end
  else
    a, d, e, n = 0, '0', false, false
  end
end
if a >= limit then return {'0', tostring(a), d, e or '', n or ''} end
a = a + 1
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'a', tostring(a), 'd', d)
if e then redis.call('HSET', KEYS[1], 'e', e) end
if n then redis.call('HSET', KEYS[1], 'n', n) end
keep(KEYS[1], now, e, retention)
return {'1', tostring(a), d, e or '', n or ''}
"""
)
# ARGV: now, retention, delay, expiry ('' for none), next_at.
_ADD_FAILURE = (
    _READ
    + """
local now, retention = tonumber(ARGV[1]), tonumber(ARGV[2])
local state, a, d, e, n = read(KEYS[1])
if state ~= 'live' then return false end
redis.call('HSET', KEYS[1], 'd', tonumber(d) + tonumber(ARGV[3]))
if not e and ARGV[4] ~= '' then
  e = ARGV[4]
  redis.call('HSET', KEYS[1], 'e', e)
end
redis.call('HSET', KEYS[1], 'n', ARGV[5])
keep(KEYS[1], now, e, retention)
return redis.call('HMGET', KEYS[1], 'a', 'd', 'e', 'n')
"""
)
# ARGV: linger (whole seconds).
_END = """
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'x', '1')
redis.call('EXPIRE', KEYS[1], ARGV[1])
return 1
"""


class RedisStore:
    """Resume records on Redis or Valkey, shared by every process that uses the same server.

    One hash per key (``{namespace}:resume:{sha256 of the key}``) with a TTL: records expire on
    their own ``retention`` after their budget's expiry. Every operation is a Lua script,
    atomic on the server, that checks the record it finds: one that is not a hash, or whose
    fields are not the numbers retrymw writes, is treated as lost. The client is the fleet's
    (short timeouts, no client-side retries): a slow or down server costs a call at most
    ``timeout`` per operation, and never more than its deadline allows, after which the call
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

    __slots__ = (
        "_add_failure",
        "_claim",
        "_client",
        "_end",
        "_load",
        "_url",
        "namespace",
        "retention",
    )

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
        self._load = self._client.register_script(_LOAD)
        self._claim = self._client.register_script(_CLAIM)
        self._add_failure = self._client.register_script(_ADD_FAILURE)
        self._end = self._client.register_script(_END)

    def _key(self, key: str) -> str:
        return f"{self.namespace}:resume:{key}"

    def load(self, key: str, now: float) -> ResumeRecord | None:
        """See `Store.load`."""
        values = self._load(keys=[self._key(key)])
        if len(values) == 1:  # the key's type: none, or another program's
            kind = values[0].decode("ascii", "replace")
            if kind == "none":
                return None
            raise CorruptRecord("type", kind, "a hash")
        if values[4] is not None:
            return None  # a tombstone: that call ended
        return _record(values[:4])

    def claim(
        self, key: str, now: float, *, limit: int, known: ResumeRecord | None
    ) -> Claim | None:
        """See `Store.claim`."""
        values = self._claim(
            keys=[self._key(key)],
            args=[
                repr(now),
                repr(self.retention),
                limit,
                "" if known is None else known.attempts,
                "" if known is None else repr(known.delay_so_far),
                "" if known is None or known.expires_at is None else repr(known.expires_at),
            ],
        )
        if values is None:
            return None
        took, *fields = values
        record = _record([field or None for field in fields])
        assert record is not None  # the script always returns a count
        return Claim(record.attempts if took == b"1" else None, record)

    def add_failure(
        self, key: str, now: float, *, delay: float, expires_at: float | None, next_at: float
    ) -> ResumeRecord | None:
        """See `Store.add_failure`."""
        values = self._add_failure(
            keys=[self._key(key)],
            args=[
                repr(now),
                repr(self.retention),
                repr(delay),
                "" if expires_at is None else repr(expires_at),
                repr(next_at),
            ],
        )
        return None if values is None else _record(values)

    def end(self, key: str, now: float, *, linger: float) -> None:
        """See `Store.end`."""
        self._end(keys=[self._key(key)], args=[max(1, math.ceil(linger))])

    def close(self) -> None:
        """Close the client's connections."""
        self._client.close()

    def __repr__(self) -> str:
        return f"<RedisStore url={self._url!r} namespace={self.namespace!r}>"


def _record(values: Any) -> ResumeRecord | None:
    """A record from its four stored fields (``a``, ``d``, ``e``, ``n``; ``None`` when absent).

    ``None`` when none is there; `CorruptRecord` for a field no retrymw process writes.
    """
    attempts, delay, expires, due = values
    if attempts is None:
        if delay is None and expires is None and due is None:
            return None
        raise CorruptRecord("attempts", None, "a count")
    if not isinstance(attempts, bytes) or _COUNT.fullmatch(attempts) is None:
        raise CorruptRecord("attempts", attempts, f"a count from 0 to {MAX_ATTEMPTS}")
    return ResumeRecord(
        int(attempts),
        0.0 if delay is None else _number("delay_so_far", delay),
        None if expires is None else _number("expires_at", expires),
        None if due is None else _number("next_at", due),
    )


def _number(field: str, value: object) -> float:
    """A stored decimal number; `CorruptRecord` for anything else (ResumeRecord checks ranges)."""
    if not isinstance(value, bytes) or len(value) > _MAX_NUMBER or _NUMBER.fullmatch(value) is None:
        raise CorruptRecord(field, value, "a decimal number")
    return float(value)
