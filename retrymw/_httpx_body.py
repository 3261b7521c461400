"""Request bodies made replayable: `buffer_async` and `buffer_sync` read a streaming body once.

A retry resends the request, so its body must be readable again. These functions buffer a
streaming body up to a limit, like `httpx.Request.aread` but bounded, and report whether it can be
replayed; a longer body, or one whose reading fails, is sent once as it was. They are apart from
`retrymw.httpx` because both the transports and the client helpers (`_httpx_client`) use them,
and nothing else about a request concerns them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx

from ._http import content_length

__all__ = ["buffer_async", "buffer_sync"]


def _replayable(request: httpx.Request, limit: int) -> bool | None:
    """True if the body is in memory already, False if too long to buffer, else ``None``."""
    try:
        _ = request.content
    except httpx.RequestNotRead:
        length = content_length(request.headers.get("content-length"))
        return None if length is None or length <= limit else False
    return True


class _Rest(httpx.SyncByteStream, httpx.AsyncByteStream):
    """A body read in part: the chunks read so far, then the rest or the reading error, once."""

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


async def buffer_async(request: httpx.Request, limit: int) -> bool:
    """Make the body replayable like `httpx.Request.aread`, but bounded; False if it is not.

    A body longer than ``limit``, or one whose reading fails, is sent once: the part already
    read, then the rest of the stream (or the reading error, raised by the attempt).
    """
    replayable = _replayable(request, limit)
    stream = request.stream
    if replayable is not None or not isinstance(stream, httpx.AsyncByteStream):
        return bool(replayable)
    chunks: list[bytes] = []
    size = 0
    iterator = stream.__aiter__()
    while True:
        try:
            chunk = await iterator.__anext__()
        except StopAsyncIteration:
            break
        except Exception as error:
            request.stream = _Rest(chunks, None, error)
            return False
        chunks.append(chunk)
        size += len(chunk)
        if size > limit:
            request.stream = _Rest(chunks, iterator, None)
            return False
    request.stream = httpx.ByteStream(b"".join(chunks))
    await request.aread()
    return True


def buffer_sync(request: httpx.Request, limit: int) -> bool:
    """Sync twin of `buffer_async`."""
    replayable = _replayable(request, limit)
    stream = request.stream
    if replayable is not None or not isinstance(stream, httpx.SyncByteStream):
        return bool(replayable)
    chunks: list[bytes] = []
    size = 0
    iterator = iter(stream)
    while True:
        try:
            chunk = next(iterator)
        except StopIteration:
            break
        except Exception as error:
            request.stream = _Rest(chunks, None, error)
            return False
        chunks.append(chunk)
        size += len(chunk)
        if size > limit:
            request.stream = _Rest(chunks, iterator, None)
            return False
    request.stream = httpx.ByteStream(b"".join(chunks))
    request.read()
    return True
