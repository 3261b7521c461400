"""What a transport does with the bodies of the responses it receives.

A superseded response (one that gets retried) is drained during the backoff wait and then closed
(`drain_async`, `drain_sync`): reading a small body lets its connection go back to the pool,
where closing it unread costs a new connection per retry on HTTP/1.1. On HTTP/2 the body is read
to its end whenever it can be: httpcore never resets a stream closed early, so the body's data
then stays unacknowledged and shrinks the window that every request on the shared connection
flows through, until the whole connection stalls (encode/httpcore#943).

The response a call returns goes through one body wrapper, `WatchedBody`, when anything needs
it. It keeps the call's deadline: reading its body past the deadline raises the flavour's
``ReadTimeout``, so a body that trickles or stalls cannot hold a call with a one-second deadline
for minutes. It keeps the transport's `BodyLimits` (no byte for too long: ``ReadTimeout``). It
checks, if asked, that an LLM API's event stream ends with its terminal event (`sse`). And
it tells the engine how the body was read (`BodyRead`: completed, closed, cut or stalled, its
size and first byte): the attempt that produced the response lasts until then.
"""

from __future__ import annotations

import functools
import logging
import math
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Final

import anyio

from .._core.events import BodyRead, BodyState
from .._engine.runtime import BodyEnding
from .._engine.time_limits import within
from .body import content_length
from .sse import StreamTail, Terminal

__all__ = [
    "DRAIN_GRACE",
    "DRAIN_LIMIT",
    "DRAIN_TIMEOUT",
    "BodyLimits",
    "WatchedBody",
    "watch_body",
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


@dataclass(frozen=True, slots=True)
class BodyLimits:
    """A transport's limits on reading the body of the response a call returns.

    Attributes:
        stall: most seconds between two chunks of the body (``None``: no limit).
        first_byte: most seconds from the response's head to the body's first byte
            (``None``: the ``stall`` limit, if any).
    """

    stall: float | None = None
    first_byte: float | None = None


NO_LIMITS: Final = BodyLimits()


class WatchedBody:
    """The body of the response a call returns: bounded in time, and watched to its end.

    A read that would end past the call's deadline (``ends_at``, monotonic), or wait for a
    chunk longer than the `BodyLimits` allow, raises the flavour's ``ReadTimeout`` (and the
    response is closed). On HTTP/1.1 a read waiting for data is cut at its limit; on HTTP/2 the
    time is checked between chunks only, since cancelling a read there can lose what the
    connection was sending for other requests: a body that stalls there is bounded by the
    client's own read timeout.

    ``tail``, if given, keeps the stream's last bytes: a stream that ends without the terminal
    event it owes raises `IncompleteStreamError` (the flavour's twin) at its end instead of
    ending quietly (`sse`).

    ``ending``, if given, is told once how the body was read (`BodyRead`): to its end
    (``completed``), closed or dropped by the caller before it (``closed``), cut by an error
    (``cut``) or by a limit (``stalled``), with that error. The first byte's delay it reports
    is counted from the response's head (the wrapper's creation).

    A flavour's client checks that a response's stream is one of its own stream classes, so
    each flavour gets a subclass that is (`_body_for`).
    """

    def __init__(
        self,
        stream: Any,
        *,
        ends_at: float | None,
        limits: BodyLimits,
        cut_reads: bool,
        flavour: ModuleType,
        request: Any,
        ending: BodyEnding | None,
        tail: StreamTail | None = None,
    ) -> None:
        self._stream = stream
        self._tail = tail
        self._ends_at = ends_at
        self._limits = limits
        self._cut_reads = cut_reads
        self._flavour = flavour
        self._request = request
        self._ending = ending
        self._head_at = time.monotonic()
        self._last_at = self._head_at
        self._first: float | None = None
        self._size = 0
        # A chunk read ahead (`read_first_async`), yielded first; the iterator it came from.
        self._held: bytes | None = None
        self._chunks: Any = None

    def _wait(self) -> float:
        """How long the next chunk may take; the flavour's ``ReadTimeout`` if no time is left."""
        now = time.monotonic()
        limits = self._limits
        wait = math.inf
        limit = limits.first_byte if self._first is None else None
        if limit is None:
            limit = limits.stall
        if limit is not None:
            wait = limit - (now - self._last_at)
        if self._ends_at is not None:
            wait = min(wait, self._ends_at - now)
        if wait <= 0.0:
            raise self._timeout()
        return wait

    def _timeout(self) -> Exception:
        if self._ends_at is not None and time.monotonic() >= self._ends_at:
            text = "the call's deadline passed while its response body was read"
        elif self._first is None and self._limits.first_byte is not None:
            text = f"no first byte of the response body within {self._limits.first_byte:g} s"
        else:
            text = f"the response body stalled for more than {self._limits.stall:g} s"
        error: Exception = self._flavour.ReadTimeout(f"retrymw: {text}", request=self._request)
        return error

    def _got(self, chunk: bytes) -> None:
        now = time.monotonic()
        if self._first is None:
            self._first = now - self._head_at
        self._last_at = now
        self._size += len(chunk)
        if self._tail is not None:
            self._tail.feed(chunk)

    def _ended(self) -> None:
        """The stream ended cleanly: raise if it owed a terminal event that did not come."""
        if self._tail is not None:
            self._tail.check(self._flavour, self._request)

    def _end(self, state: BodyState, error: Exception | None = None) -> None:
        """Tell ``ending``, once, how the body was read (never raises)."""
        ending, self._ending = self._ending, None
        if ending is None:
            return
        try:
            ending(BodyRead(state, self._size, self._first), error)
        except Exception:  # pragma: no cover - the engine's reports are guarded already
            logger.debug("could not report the end of a response body", exc_info=True)

    def _failed(self, error: BaseException) -> None:
        if isinstance(error, Exception):
            stalled = isinstance(error, self._flavour.ReadTimeout)
            self._end("stalled" if stalled else "cut", error)
        else:  # cancelled while reading: the caller stopped, nothing failed
            self._end("closed")

    async def _next_async(self, chunks: AsyncIterator[bytes]) -> bytes | None:
        """The next chunk within its time limit; ``None`` at the end."""
        wait = self._wait()
        try:
            with anyio.move_on_after(wait if self._cut_reads else math.inf) as scope:
                chunk = await chunks.__anext__()
        except StopAsyncIteration:
            return None
        if scope.cancelled_caught:
            raise self._timeout()
        self._got(chunk)
        return chunk

    def _next_sync(self, chunks: Iterator[bytes]) -> bytes | None:
        """Sync twin of `_next_async`."""
        wait = self._wait()
        with within(wait if self._cut_reads and wait != math.inf else None):
            chunk = next(chunks, None)
        if chunk is not None:
            self._got(chunk)
        return chunk

    async def read_first_async(self) -> None:
        """Read the body's first chunk now, within the limits; it is yielded first later.

        A body cut or stalled before its first byte raises here (the attempt then ended
        ``cut`` or ``stalled``), before anything reached the caller: failover goes on with it.
        """
        self._chunks = chunks = self._stream.__aiter__()
        try:
            self._held = await self._next_async(chunks)
            if self._held is None:
                self._ended()
        except BaseException as error:
            self._failed(error)
            raise

    def read_first_sync(self) -> None:
        """Sync twin of `read_first_async`."""
        self._chunks = chunks = iter(self._stream)
        try:
            self._held = self._next_sync(chunks)
            if self._held is None:
                self._ended()
        except BaseException as error:
            self._failed(error)
            raise

    async def __aiter__(self) -> AsyncIterator[bytes]:
        held, self._held = self._held, None
        chunks = self._stream.__aiter__() if self._chunks is None else self._chunks
        try:
            if held is not None:
                yield held
            while (chunk := await self._next_async(chunks)) is not None:
                yield chunk
            self._ended()
        except BaseException as error:
            if not isinstance(error, GeneratorExit):  # the caller stopped: `aclose` tells
                self._failed(error)
            raise
        self._end("completed")

    def __iter__(self) -> Iterator[bytes]:
        held, self._held = self._held, None
        chunks = iter(self._stream) if self._chunks is None else self._chunks
        try:
            if held is not None:
                yield held
            while (chunk := self._next_sync(chunks)) is not None:
                yield chunk
            self._ended()
        except BaseException as error:
            if not isinstance(error, GeneratorExit):
                self._failed(error)
            raise
        self._end("completed")

    async def aclose(self) -> None:
        self._end("closed")
        await self._stream.aclose()

    def close(self) -> None:
        self._end("closed")
        self._stream.close()

    def __del__(self) -> None:
        # Dropped without being read to its end or closed: the attempt ends now.
        self._end("closed")


@functools.cache
def _body_for(flavour: ModuleType) -> type[WatchedBody]:
    return type("WatchedBody", (WatchedBody, flavour.SyncByteStream, flavour.AsyncByteStream), {})


def watch_body(
    response: Any,
    *,
    deadline_left: float | None,
    limits: BodyLimits,
    flavour: ModuleType,
    request: Any,
    ending: BodyEnding | None,
    terminal: Terminal | None = None,
) -> Any:
    """Put ``response``'s body (the response to ``request`` a call returns) in a `WatchedBody`
    when something needs it: a deadline ``deadline_left`` s from now, ``limits``, ``ending``,
    told how the body was read, or ``terminal``, the event its stream must end with.

    Anything but a response of the flavour, or one whose body is already read or closed, is
    returned as it is (``ending`` is then never called: see `body_open`).
    """
    nothing = deadline_left is None and limits == NO_LIMITS and ending is None
    if (nothing and terminal is None) or not body_open(response, flavour):
        return response
    response.stream = _body_for(flavour)(
        response.stream,
        ends_at=None if deadline_left is None else time.monotonic() + max(deadline_left, 0.0),
        limits=limits,
        cut_reads=not multiplexed(response),
        flavour=flavour,
        request=request,
        ending=ending,
        tail=None if terminal is None else StreamTail(terminal),
    )
    return response


def body_open(response: Any, flavour: ModuleType) -> bool:
    """Whether ``response`` is a response of the flavour whose body is still to be read."""
    return (
        isinstance(response, flavour.Response)
        and not response.is_stream_consumed
        and not response.is_closed
    )
