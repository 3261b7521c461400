"""What a transport does with the bodies of the responses it receives.

A superseded response (one that gets retried) is drained during the backoff wait and then closed
(`drain_async`, `drain_sync`): reading a small body lets its connection go back to the pool,
where closing it unread costs a new connection per retry on HTTP/1.1. On HTTP/2 the body is read
to its end whenever it can be: httpcore never resets a stream closed early, so the body's data
then stays unacknowledged and shrinks the window that every request on the shared connection
flows through, until the whole connection stalls (encode/httpcore#943).

The response a call returns keeps the call's deadline (`DeadlineBody`): reading its body past
the deadline raises the flavour's ``ReadTimeout``, so a body that trickles or stalls cannot hold
a call with a one-second deadline for minutes.
"""

from __future__ import annotations

import functools
import logging
import math
import time
from collections.abc import AsyncIterator, Iterator
from types import ModuleType
from typing import Any, Final

import anyio

from .._core.time_limits import within
from .semantics import content_length

__all__ = [
    "DRAIN_GRACE",
    "DRAIN_LIMIT",
    "DRAIN_TIMEOUT",
    "bound_body",
    "drain_async",
    "drain_limit",
    "drain_sync",
    "drainable",
]

logger = logging.getLogger("retrymw")

#: A superseded response with a known ``Content-Length`` up to this size is read before it is
#: closed, so that its keep-alive connection goes back to the pool instead of being dropped.
DRAIN_LIMIT: Final = 64 * 1024
#: Reading a superseded body is part of the backoff wait, so on HTTP/1.1 it may take the backoff
#: delay, but at least this long (a zero delay still reads a body that has already arrived) and
#: at most `DRAIN_TIMEOUT`: a body slower than that is a trickle, and costs its connection
#: instead. On HTTP/2 it may take `DRAIN_TIMEOUT` whatever the delay (see the module's text).
DRAIN_GRACE: Final = 0.02
DRAIN_TIMEOUT: Final = 1.0

_HTTP2 = b"HTTP/2"


def multiplexed(response: Any) -> bool:
    """Whether ``response`` came over HTTP/2, on a connection shared by other requests."""
    return bool(response.extensions.get("http_version") == _HTTP2)


def drainable(response: Any) -> bool:
    """Whether a superseded response is worth reading before it is closed."""
    # Closing an unread body makes httpcore drop the connection; reading a small one keeps it.
    # An unknown length (chunked) could be endless, so it is closed unread.
    length = content_length(response.headers.get("content-length"))
    return not response.is_stream_consumed and length is not None and length <= DRAIN_LIMIT


def drain_limit(response: Any, delay: float, deadline_left: float | None) -> float:
    """How long reading a superseded body before a retry ``delay`` s away may take.

    On HTTP/1.1 the delay, but at least `DRAIN_GRACE` and at most `DRAIN_TIMEOUT`; on HTTP/2
    `DRAIN_TIMEOUT` (a body cut short stalls the shared connection). Never past the deadline:
    not what it leaves the next attempt on HTTP/1.1, not the deadline itself on HTTP/2.
    """
    if multiplexed(response):
        limit = DRAIN_TIMEOUT
        return limit if deadline_left is None else min(limit, deadline_left)
    limit = min(max(delay, DRAIN_GRACE), DRAIN_TIMEOUT)
    return limit if deadline_left is None else min(limit, deadline_left - delay)


async def drain_async(response: Any, delay: float, deadline_left: float | None) -> None:
    """Read a small superseded body within its `drain_limit`, then close the response."""
    try:
        limit = drain_limit(response, delay, deadline_left)
        if limit > 0.0 and drainable(response):
            with anyio.move_on_after(limit):
                await response.aread()
    except Exception:  # a superseded response: failing to drain only costs its connection
        logger.debug("could not drain a superseded response", exc_info=True)
    finally:
        with anyio.CancelScope(shield=True):  # a cancelled call still frees the connection
            await response.aclose()


def drain_sync(response: Any, delay: float, deadline_left: float | None) -> None:
    """Sync twin of `drain_async`: every socket read ends by the limit (`within`)."""
    try:
        limit = drain_limit(response, delay, deadline_left)
        if limit > 0.0 and drainable(response):
            ends_at = time.monotonic() + limit
            with within(limit):
                for _ in response.iter_raw():
                    # A transport whose sockets `within` cannot reach stops between chunks.
                    if time.monotonic() >= ends_at:
                        break
    except Exception:
        logger.debug("could not drain a superseded response", exc_info=True)
    finally:
        response.close()


class DeadlineBody:
    """A response body that ends by the call's deadline.

    A read that would end past it raises the flavour's ``ReadTimeout`` (and the response is
    closed). On HTTP/1.1 a read waiting for data is cut at the deadline; on HTTP/2 the time is
    checked between chunks only, since cancelling a read there can lose what the connection
    was sending for other requests: a body that stalls there is bounded by the client's own
    read timeout.

    A flavour's client checks that a response's stream is one of its own stream classes, so
    each flavour gets a subclass that is (`_body_for`).
    """

    def __init__(
        self, stream: Any, ends_at: float, *, cut_reads: bool, flavour: ModuleType, request: Any
    ) -> None:
        self._stream = stream
        self._ends_at = ends_at
        self._cut_reads = cut_reads
        self._flavour = flavour
        self._request = request

    def _timeout(self) -> Exception:
        error: Exception = self._flavour.ReadTimeout(
            "retrymw: the call's deadline passed while its response body was read",
            request=self._request,
        )
        return error

    async def __aiter__(self) -> AsyncIterator[bytes]:
        chunks = self._stream.__aiter__()
        while True:
            left = self._ends_at - time.monotonic()
            if left <= 0.0:
                raise self._timeout()
            try:
                with anyio.move_on_after(left if self._cut_reads else math.inf) as scope:
                    chunk = await chunks.__anext__()
            except StopAsyncIteration:
                return
            if scope.cancelled_caught:
                raise self._timeout()
            yield chunk

    def __iter__(self) -> Iterator[bytes]:
        chunks = iter(self._stream)
        while True:
            left = self._ends_at - time.monotonic()
            if left <= 0.0:
                raise self._timeout()
            with within(left if self._cut_reads else None):
                chunk = next(chunks, None)
            if chunk is None:
                return
            yield chunk

    async def aclose(self) -> None:
        await self._stream.aclose()

    def close(self) -> None:
        self._stream.close()


@functools.cache
def _body_for(flavour: ModuleType) -> type[DeadlineBody]:
    return type("DeadlineBody", (DeadlineBody, flavour.SyncByteStream, flavour.AsyncByteStream), {})


def bound_body(
    response: Any, deadline_left: float | None, flavour: ModuleType, request: Any
) -> Any:
    """Make reading the body of ``response`` (to ``request``) end by the deadline
    ``deadline_left`` s from now.

    Anything but a response of the flavour without a deadline, or whose body is already read,
    is returned as it is.
    """
    if (
        deadline_left is None
        or not isinstance(response, flavour.Response)
        or response.is_stream_consumed
        or response.is_closed
    ):
        return response
    response.stream = _body_for(flavour)(
        response.stream,
        time.monotonic() + max(deadline_left, 0.0),
        cut_reads=not multiplexed(response),
        flavour=flavour,
        request=request,
    )
    return response
