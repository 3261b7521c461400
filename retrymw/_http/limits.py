"""Time limits for blocking attempts: a deadline that every socket operation honours.

An async attempt is cancelled when its time is up (``anyio.fail_after`` in the engine). A
blocking one cannot be, and httpx's per-phase timeouts bound each socket operation, not their
sum: a server sending one byte per read timeout keeps an attempt alive for as long as it
likes. So a sync attempt runs `within` a deadline (a `ContextVar`, so one per thread), and the
connection pool of an ``httpx.HTTPTransport`` gets a network backend (`bound_transport`) whose
streams cut every connect, TLS handshake, read and write to what is left of it, raising
httpcore's own timeout (which httpx reports as ``httpx.ConnectTimeout``, ``ReadTimeout`` or
``WriteTimeout``) once it has passed.

The deadline ends with the attempt: the returned response's body is read later by the caller
under the client's own timeouts, as with the async transport. A sync transport that is not an
``httpx.HTTPTransport`` (nor wraps its pool) is bounded per phase only, by the ``timeout``
request extension (`limit_sync_attempt`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, TypeVar

import httpcore

from .._core.clock import Clock
from .._core.policy import RetryPolicy
from .semantics import cut_timeouts

__all__ = ["bound_transport", "limit_sync_attempt", "time_left", "within"]

T = TypeVar("T")

# time.monotonic() by which the current sync attempt (or drain) must be over; None: no limit.
_DEADLINE: ContextVar[float | None] = ContextVar("retrymw_sync_deadline", default=None)
# A write is split so that each piece gets what is left: httpcore's sync stream retries
# send() with one timeout until the whole buffer is out, which a slow reader could stretch.
_WRITE_PIECE = 64 * 1024


@contextmanager
def within(limit: float) -> Iterator[None]:
    """Bound the blocking socket operations of this thread inside the block to ``limit`` s.

    An enclosing limit that ends sooner still applies.
    """
    deadline = time.monotonic() + limit
    current = _DEADLINE.get()
    token = _DEADLINE.set(deadline if current is None else min(current, deadline))
    try:
        yield
    finally:
        _DEADLINE.reset(token)


def time_left(timeout: float | None, error: type[Exception]) -> float | None:
    """``timeout`` cut to what the current deadline leaves; raise ``error`` once it has passed."""
    deadline = _DEADLINE.get()
    if deadline is None:
        return timeout
    left = deadline - time.monotonic()
    if left <= 0.0:
        raise error("retrymw: the attempt's time limit has passed")
    return left if timeout is None else min(timeout, left)


class _Stream(httpcore.NetworkStream):
    """A network stream whose every operation ends by the current deadline."""

    def __init__(self, stream: httpcore.NetworkStream) -> None:
        self._stream = stream

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._stream.read(max_bytes, time_left(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        for start in range(0, len(buffer), _WRITE_PIECE):
            piece = buffer[start : start + _WRITE_PIECE]
            self._stream.write(piece, time_left(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._stream.close()

    def start_tls(
        self,
        ssl_context: Any,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.NetworkStream:
        limit = time_left(timeout, httpcore.ConnectTimeout)
        return _Stream(self._stream.start_tls(ssl_context, server_hostname, limit))

    def get_extra_info(self, info: str) -> Any:
        return self._stream.get_extra_info(info)


class _Backend(httpcore.NetworkBackend):
    """Wraps a pool's network backend so that its streams honour the current deadline."""

    def __init__(self, backend: httpcore.NetworkBackend) -> None:
        self.backend = backend

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        limit = time_left(timeout, httpcore.ConnectTimeout)
        return _Stream(self.backend.connect_tcp(host, port, limit, local_address, socket_options))

    def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        limit = time_left(timeout, httpcore.ConnectTimeout)
        return _Stream(self.backend.connect_unix_socket(path, limit, socket_options))

    def sleep(self, seconds: float) -> None:
        self.backend.sleep(seconds)


def bound_transport(transport: object) -> bool:
    """Make the connections of an ``httpx.HTTPTransport`` honour `within`; False otherwise.

    The transport's connection pool gets the bounded backend for the connections it opens
    from now on (idempotent). Outside `within` the backend changes nothing, so a transport
    shared with code that does not retry behaves as before.
    """
    pool = getattr(transport, "_pool", None)
    backend = getattr(pool, "_network_backend", None)
    if not isinstance(pool, httpcore.ConnectionPool) or not isinstance(
        backend, httpcore.NetworkBackend
    ):
        return False
    if not isinstance(backend, _Backend):
        pool._network_backend = _Backend(backend)
    return True


def limit_sync_attempt(
    send: Callable[[], T], request: Any, policy: RetryPolicy, clock: Clock
) -> Callable[[], T]:
    """Bound each sync attempt by what the policy's ``timeout`` and ``deadline`` leave.

    The attempt runs `within` its limit, and httpx's ``timeout`` request extension caps each
    phase too (the pool wait, and every transport whose sockets `bound_transport` cannot
    reach). Both end with the attempt: the extension's dict, which httpx hands on to httpcore
    and which httpcore reads again when the caller reads the body, gets the caller's own
    values back. The caller restores ``request.extensions`` when the call ends.
    """
    if policy.timeout is None and policy.deadline is None:
        return send
    original = request.extensions
    started = clock.now()

    def attempt() -> T:
        limit = policy.attempt_limit(clock.now() - started)
        if limit is None:  # pragma: no cover - the policy has a timeout or a deadline
            return send()
        cut: dict[str, Any] = cut_timeouts(original.get("timeout"), limit)
        request.extensions = {**original, "timeout": cut}
        try:
            with within(limit):
                return send()
        finally:
            given = original.get("timeout")
            cut.clear()
            cut.update(given if isinstance(given, Mapping) else {})

    return attempt
