"""Request bodies made replayable: `buffer_async` and `buffer_sync` read a streaming body once.

A retry resends the request, so its body must be readable again. These functions buffer a
streaming body up to a limit, like `httpx.Request.aread` but bounded, and report whether it can be
replayed; a longer body, or one whose reading fails, is sent once as it was. They are apart from
`retrymw.httpx` because both the transports and the client helpers (`client`) use them,
and nothing else about a request concerns them. They serve httpx and httpx2 alike: the
flavour's module (``httpx`` or ``httpx2``) is an argument, for its stream classes.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Iterator
from types import ModuleType
from typing import Any

from .hints import WHITESPACE

__all__ = [
    "REPLAY_LIMIT",
    "buffer_async",
    "buffer_sync",
    "content_length",
]


def _replayable(request: Any, limit: int, flavour: ModuleType) -> bool | None:
    """True if the body is in memory already, False if too long to buffer, else ``None``."""
    try:
        _ = request.content
    except flavour.RequestNotRead:
        length = content_length(request.headers.get("content-length"))
        return None if length is None or length <= limit else False
    return True


class _Rest:
    """A body read in part: the chunks read so far, then the rest or the reading error, once.

    A flavour's transports check that a request's stream is one of its own stream classes, so
    each flavour gets a subclass that is (`_rest_for`).
    """

    def __init__(self, head: list[bytes], rest: Any, error: Exception | None) -> None:
        self._head, self._rest, self._error = head, rest, error

    def __iter__(self) -> Iterator[bytes]:
        yield from self._head
        if self._error is not None:
            raise self._error
        yield from self._rest

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in self._head:
            yield chunk
        if self._error is not None:
            raise self._error
        async for chunk in self._rest:
            yield chunk


@functools.cache
def _rest_for(flavour: ModuleType) -> type[_Rest]:
    return type("_Rest", (_Rest, flavour.SyncByteStream, flavour.AsyncByteStream), {})


class _Head:
    """The chunks of a streaming body read so far, up to the replay limit."""

    __slots__ = ("chunks", "flavour", "limit", "size")

    def __init__(self, limit: int, flavour: ModuleType) -> None:
        self.chunks: list[bytes] = []
        self.limit = limit
        self.flavour = flavour
        self.size = 0

    def keep(self, chunk: bytes) -> bool:
        """Keep ``chunk``; False once the body is longer than the limit."""
        self.chunks.append(chunk)
        self.size += len(chunk)
        return self.size <= self.limit

    def send_once(self, request: Any, rest: Any, error: Exception | None) -> bool:
        """Give up buffering: the request sends what was read, then the rest (or the error)."""
        request.stream = _rest_for(self.flavour)(self.chunks, rest, error)
        return False

    def replay(self, request: Any) -> None:
        """Swap the request's stream for the whole body, in memory."""
        request.stream = self.flavour.ByteStream(b"".join(self.chunks))


async def buffer_async(request: Any, limit: int, flavour: ModuleType) -> bool:
    """Make the body replayable like `httpx.Request.aread`, but bounded; False if it is not.

    A body longer than ``limit``, or one whose reading fails, is sent once: the part already
    read, then the rest of the stream (or the reading error, raised by the attempt).
    ``flavour`` is the request's library: the ``httpx`` or the ``httpx2`` module.
    """
    replayable = _replayable(request, limit, flavour)
    stream = request.stream
    if replayable is not None or not isinstance(stream, flavour.AsyncByteStream):
        return bool(replayable)
    head = _Head(limit, flavour)
    iterator = stream.__aiter__()
    while True:
        try:
            chunk = await iterator.__anext__()
        except StopAsyncIteration:
            break
        except Exception as error:
            return head.send_once(request, None, error)
        if not head.keep(chunk):
            return head.send_once(request, iterator, None)
    head.replay(request)
    await request.aread()
    return True


def buffer_sync(request: Any, limit: int, flavour: ModuleType) -> bool:
    """Sync twin of `buffer_async`."""
    replayable = _replayable(request, limit, flavour)
    stream = request.stream
    if replayable is not None or not isinstance(stream, flavour.SyncByteStream):
        return bool(replayable)
    head = _Head(limit, flavour)
    iterator = iter(stream)
    while True:
        try:
            chunk = next(iterator)
        except StopIteration:
            break
        except Exception as error:
            return head.send_once(request, None, error)
        if not head.keep(chunk):
            return head.send_once(request, iterator, None)
    head.replay(request)
    request.read()
    return True


#: A streaming request body is buffered up to this size to make it replayable; a larger one is
#: sent once and never retried (reason ``body_not_replayable``).
REPLAY_LIMIT = 16 * 1024 * 1024


def content_length(value: str | None) -> int | None:
    """Return a ``Content-Length`` header's value, or ``None`` when absent or not plain digits."""
    if value is None:
        return None
    value = value.strip(WHITESPACE)
    return int(value) if value and value.isascii() and value.isdigit() and len(value) < 20 else None
