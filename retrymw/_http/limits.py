"""Time limits for blocking attempts: a deadline that every socket operation honours.

An async attempt is cancelled when its time is up (``anyio.fail_after`` in the engine). A
blocking one cannot be, and httpx's per-phase timeouts bound each socket operation, not their
sum: a server sending one byte per read timeout keeps an attempt alive for as long as it
likes. So the engine's sync driver runs a bounded attempt `within` its time limit
(`retrymw._engine.time_limits`), and the connection pool of an ``httpx.HTTPTransport`` gets a
network backend (`bound_transport`) whose streams cut every connect, TLS handshake, read and
write to what is left of it, raising httpcore's own timeout (which httpx reports as
``httpx.ConnectTimeout``, ``ReadTimeout`` or ``WriteTimeout``) once it has passed.

httpx2 (with its httpcore2) is bounded the same way: the backend raises the timeouts of the
httpcore flavour whose pool it serves.

The attempt's limit ends with the attempt; the returned response's body is bounded by the
call's deadline alone (`retrymw._http.responses`). A sync transport that is not an
``httpx.HTTPTransport`` (nor wraps its pool) is bounded per phase only, by the ``timeout``
request extension (`cap_phase_timeouts`).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Mapping
from types import ModuleType
from typing import Any, TypeVar

from .._core.policy import RetryPolicy
from .._engine.time_limits import remaining

__all__ = [
    "attempt_limit",
    "bound_transport",
    "cap_phase_timeouts",
    "cut_timeouts",
    "time_left",
]

T = TypeVar("T")

# A write is split so that each piece gets what is left: httpcore's sync stream retries
# send() with one timeout until the whole buffer is out, which a slow reader could stretch.
_WRITE_PIECE = 64 * 1024


def time_left(timeout: float | None, error: type[Exception]) -> float | None:
    """``timeout`` cut to what the current limit (`within`) leaves; raise ``error`` once past."""
    left = remaining()
    if left is None:
        return timeout
    if left <= 0.0:
        raise error("retrymw: the attempt's time limit has passed")
    return left if timeout is None else min(timeout, left)


# The httpcore flavours whose connection pools can be bounded: httpx's and httpx2's.
_CORES = ("httpcore", "httpcore2")


class _Stream:
    """A network stream whose every operation ends by the current deadline.

    It wraps an httpcore (or httpcore2) stream by duck typing, raising ``core``'s timeouts, so
    one class serves both flavours.
    """

    def __init__(self, stream: Any, core: ModuleType) -> None:
        self._stream = stream
        self._core = core

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        data: bytes = self._stream.read(max_bytes, time_left(timeout, self._core.ReadTimeout))
        return data

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        for start in range(0, len(buffer), _WRITE_PIECE):
            piece = buffer[start : start + _WRITE_PIECE]
            self._stream.write(piece, time_left(timeout, self._core.WriteTimeout))

    def close(self) -> None:
        self._stream.close()

    def start_tls(
        self,
        ssl_context: Any,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> _Stream:
        limit = time_left(timeout, self._core.ConnectTimeout)
        return _Stream(self._stream.start_tls(ssl_context, server_hostname, limit), self._core)

    def get_extra_info(self, info: str) -> Any:
        return self._stream.get_extra_info(info)


class _Backend:
    """Wraps a pool's network backend so that its streams honour the current deadline."""

    def __init__(self, backend: Any, core: ModuleType) -> None:
        self.backend = backend
        self._core = core

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> _Stream:
        limit = time_left(timeout, self._core.ConnectTimeout)
        stream = self.backend.connect_tcp(host, port, limit, local_address, socket_options)
        return _Stream(stream, self._core)

    def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> _Stream:
        limit = time_left(timeout, self._core.ConnectTimeout)
        return _Stream(self.backend.connect_unix_socket(path, limit, socket_options), self._core)

    def sleep(self, seconds: float) -> None:
        self.backend.sleep(seconds)


def bound_transport(transport: object) -> bool:
    """Make the connections of an ``httpx(2).HTTPTransport`` honour `within`; False otherwise.

    The transport's connection pool gets the bounded backend for the connections it opens
    from now on (idempotent). Outside `within` the backend changes nothing, so a transport
    shared with code that does not retry behaves as before.
    """
    pool = getattr(transport, "_pool", None)
    backend = getattr(pool, "_network_backend", None)
    if isinstance(backend, _Backend):
        return True
    for name in _CORES:
        core = sys.modules.get(name)
        if (
            core is not None
            and isinstance(pool, core.ConnectionPool)
            and isinstance(backend, core.NetworkBackend)
        ):
            pool._network_backend = _Backend(backend, core)
            return True
    return False


def cap_phase_timeouts(send: Callable[[], T], request: Any) -> Callable[[], T]:
    """Cap every httpx phase timeout of each sync attempt to the attempt's time limit.

    The engine's sync driver runs a bounded attempt `within` its limit; the bounded sockets of
    `bound_transport` honour it, and httpx's ``timeout`` request extension, capped here, bounds
    the pool wait and every transport whose sockets cannot be reached. The cap ends with the
    attempt: the extension's dict, which httpx hands on to httpcore and which httpcore reads
    again when the caller reads the body, gets the caller's own values back. The caller
    restores ``request.extensions`` when the call ends.
    """
    original = request.extensions

    def attempt() -> T:
        limit = remaining()
        if limit is None:
            return send()
        cut: dict[str, Any] = cut_timeouts(original.get("timeout"), limit)
        request.extensions = {**original, "timeout": cut}
        try:
            return send()
        finally:
            given = original.get("timeout")
            cut.clear()
            cut.update(given if isinstance(given, Mapping) else {})

    return attempt


def attempt_limit(policy: RetryPolicy, elapsed: float) -> float | None:
    """The time one attempt may take: `RetryPolicy.attempt_limit`, as the async engine uses it."""
    return policy.attempt_limit(elapsed)


_TIMEOUT_KEYS = ("connect", "read", "write", "pool")


# httpx treats a zero timeout as "fail at once" on some operations; keep a sliver instead.
_MIN_TIMEOUT = 0.001


def cut_timeouts(current: object, limit: float) -> dict[str, float]:
    """Return httpx's ``timeout`` request extension with every phase capped at ``limit``.

    ``current`` is the existing extension (a dict of ``connect``, ``read``, ``write`` and
    ``pool`` seconds, ``None`` meaning no limit), or anything else for "none set".
    """
    limit = max(limit, _MIN_TIMEOUT)
    phases: Mapping[str, Any] = current if isinstance(current, Mapping) else {}
    cut: dict[str, float] = {}
    for key in _TIMEOUT_KEYS:
        value = phases.get(key)
        cut[key] = limit if not isinstance(value, (int, float)) else min(float(value), limit)
    return cut
