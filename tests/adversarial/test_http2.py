"""HTTP/2 connections survive retries: a superseded body is never cut short on a shared connection.

Attack: many concurrent requests on one HTTP/2 connection (hypercorn on 127.0.0.1), each first
answered by a 503 whose 63 KB body arrives 50 ms after its headers, then by a 200. With a backoff
of 10 ms, the drain of each 503 used to be cut at 20 ms and the response closed early. httpcore
never resets a stream closed early, so the rest of its body stayed unacknowledged in the
connection's flow-control window; after about 16 MB of them the window was gone, every request
on the connection stalled, and calls failed with ``ReadTimeout``. On HTTP/2 the drain now reads
the body to its end (up to ``DRAIN_TIMEOUT``), so the window is given back.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from retrymw import RetryPolicy
from retrymw.httpx import AsyncRetryTransport
from tests.http2_server import Http2Server

pytestmark = pytest.mark.anyio

# Enough cut-short bodies to use up httpcore's 16 MB connection window more than once.
CALLS = 400
CONCURRENCY = 20
HEAD = b"x" * 1000
REST = b"y" * 62_000


class SlowErrors:
    """An ASGI app: a call's first request (by its ``x-call`` header) gets a 503 whose body
    mostly arrives 50 ms late; its retry gets a 200."""

    def __init__(self) -> None:
        self.seen: set[bytes] = set()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        call = dict(scope["headers"]).get(b"x-call", b"")
        if call not in self.seen:
            self.seen.add(call)
            length = str(len(HEAD) + len(REST)).encode()
            await send(start(503, length))
            await send({"type": "http.response.body", "body": HEAD, "more_body": True})
            await asyncio.sleep(0.05)
            await send({"type": "http.response.body", "body": REST})
        else:
            await send(start(200, b"2"))
            await send({"type": "http.response.body", "body": b"ok"})


def start(status: int, length: bytes) -> dict[str, Any]:
    return {
        "type": "http.response.start",
        "status": status,
        "headers": [(b"content-length", length)],
    }


@pytest.fixture
def server() -> Iterator[Http2Server]:
    h2 = Http2Server(SlowErrors())
    yield h2
    h2.stop()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # the HTTP/2 client of httpcore on asyncio is the case under test


async def test_retries_keep_the_shared_http2_connection_alive(server: Http2Server) -> None:
    """400 calls, 20 at a time, each retried once after a slow 503: every one succeeds."""
    transport = AsyncRetryTransport(
        httpx.AsyncHTTPTransport(http1=False, http2=True),
        policy=RetryPolicy(attempts=3, initial_delay=0.01, backoff="fixed"),
        budget=None,
        instruments=(),
    )
    failures: list[str] = []
    statuses: list[int] = []
    async with httpx.AsyncClient(transport=transport, timeout=5.0) as client:

        async def call(number: int) -> None:
            try:
                response = await client.get(f"{server.base_url}/", headers={"x-call": str(number)})
            except httpx.HTTPError as error:
                failures.append(type(error).__name__)
            else:
                statuses.append(response.status_code)
                assert response.http_version == "HTTP/2"

        for batch in range(CALLS // CONCURRENCY):
            numbers = range(batch * CONCURRENCY, (batch + 1) * CONCURRENCY)
            await asyncio.gather(*(call(number) for number in numbers))
            if failures:
                break
    assert failures == []
    assert statuses == [200] * CALLS
