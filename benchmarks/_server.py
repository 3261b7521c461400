"""A small, fast HTTP/1.1 keep-alive server on 127.0.0.1, in a thread of this process.

It answers every request with a fixed ``200 OK`` (two-byte body) on a raw asyncio protocol, so
its own cost per request is a few microseconds and the same for every client. Requests are
assumed to have no body (the benchmarks only send GETs).
"""

from __future__ import annotations

import asyncio
import threading
from types import TracebackType

__all__ = ["LoopbackServer"]

_RESPONSE = (
    b"HTTP/1.1 200 OK\r\n"
    b"Content-Type: text/plain\r\n"
    b"Content-Length: 2\r\n"
    b"Connection: keep-alive\r\n"
    b"\r\n"
    b"ok"
)
_END = b"\r\n\r\n"


class _Protocol(asyncio.Protocol):
    def __init__(self, server: LoopbackServer) -> None:
        self._server = server
        self._buffer = b""
        self._transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        self._server.connections += 1
        self._server.transports.add(transport)

    def connection_lost(self, exc: Exception | None) -> None:
        if self._transport is not None:
            self._server.transports.discard(self._transport)

    def data_received(self, data: bytes) -> None:
        buffer = self._buffer + data
        count = buffer.count(_END)
        if count:
            self._buffer = buffer[buffer.rindex(_END) + len(_END) :]
            self._server.requests += count
            assert self._transport is not None
            self._transport.write(_RESPONSE * count)
        else:
            self._buffer = buffer


class LoopbackServer:
    """``with LoopbackServer() as server: server.url``; stops and joins its thread on exit."""

    def __init__(self) -> None:
        self.requests = 0
        self.connections = 0
        self.transports: set[asyncio.Transport] = set()
        self.port = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ready = threading.Event()
        self._server: asyncio.AbstractServer | None = None
        self._thread = threading.Thread(target=self._run, name="bench-loopback", daemon=True)

    @property
    def url(self) -> str:
        """The server's base URL."""
        return f"http://127.0.0.1:{self.port}/"

    def _run(self) -> None:
        loop = self._loop
        assert loop is not None
        asyncio.set_event_loop(loop)
        self._server = loop.run_until_complete(
            loop.create_server(lambda: _Protocol(self), "127.0.0.1", 0, backlog=512)
        )
        self.port = self._server.sockets[0].getsockname()[1]
        self._ready.set()
        loop.run_forever()
        self._server.close()
        loop.run_until_complete(self._server.wait_closed())
        loop.close()

    def start(self) -> LoopbackServer:
        """Start the thread and wait until the port is bound."""
        self._loop = asyncio.new_event_loop()
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("the loopback server did not start")
        return self

    def stop(self) -> None:
        """Stop the loop and join the thread."""
        if self._loop is not None and self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._stop_loop)
            self._thread.join(10)

    def _stop_loop(self) -> None:
        if self._server is not None:
            self._server.close()
        for transport in list(self.transports):
            transport.close()
        if self._loop is not None:
            self._loop.stop()

    def __enter__(self) -> LoopbackServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
