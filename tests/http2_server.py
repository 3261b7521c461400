"""A real HTTP/2 server on 127.0.0.1 (hypercorn, cleartext HTTP/2 with prior knowledge).

`Http2Server` runs an ASGI application under hypercorn on its own asyncio loop in a background
thread, on a free loopback port, and stops it (bounded) when the test ends. httpx reaches it with
``httpx.AsyncHTTPTransport(http1=False, http2=True)``: every request of a client then shares one
HTTP/2 connection, as in production behind a load balancer that speaks HTTP/2.
"""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Awaitable, Callable
from typing import Any

from hypercorn.asyncio import serve
from hypercorn.config import Config

__all__ = ["Http2Server"]

Asgi = Callable[[dict[str, Any], Any, Any], Awaitable[None]]


class Http2Server:
    """Serves ``app`` over cleartext HTTP/2 on 127.0.0.1 until `stop`.

    Args:
        app: the ASGI application (HTTP scopes only; lifespan is turned off).
    """

    def __init__(self, app: Asgi) -> None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        self.base_url = f"http://127.0.0.1:{port}"
        config = Config()
        config.bind = [f"127.0.0.1:{port}"]
        config.loglevel = "ERROR"
        config.accesslog = None
        self._loop = asyncio.new_event_loop()
        self._stopping = asyncio.Event()
        self._ready = threading.Event()
        self._thread = threading.Thread(
            target=self._run, args=(app, config), name="http2-server", daemon=True
        )
        self._thread.start()
        if not self._ready.wait(timeout=30):
            raise RuntimeError("the HTTP/2 server did not start within 30 s")

    def _run(self, app: Asgi, config: Config) -> None:
        async def main() -> None:
            server = asyncio.ensure_future(
                serve(app, config, shutdown_trigger=self._stopping.wait, mode="asgi")  # type: ignore[arg-type]
            )
            await self._listening(config)
            self._ready.set()
            await server

        self._loop.run_until_complete(main())
        self._loop.close()

    async def _listening(self, config: Config) -> None:
        host, port = config.bind[0].rsplit(":", 1)
        for _ in range(300):  # bounded: 30 s
            try:
                _, writer = await asyncio.open_connection(host, int(port))
            except OSError:
                await asyncio.sleep(0.1)
                continue
            writer.close()
            return

    def stop(self) -> None:
        """Stop serving (connections in flight are closed) and join the thread, bounded."""
        self._loop.call_soon_threadsafe(self._stopping.set)
        self._thread.join(timeout=30)
