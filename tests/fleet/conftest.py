"""The fleet tests' redis-server: `tests.redis_server.RedisServer`, which a test may also pause.

Pausing is SIGSTOP by pid (a hung store: connections stay open, nothing answers); stopping
resumes it first, so its SIGTERM is delivered.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import tests.redis_server
from retrymw.fleet import RedisFleet
from tests.redis_server import RedisServer as _RedisServer


class RedisServer(_RedisServer):
    """A `tests.redis_server.RedisServer` that can also hang (SIGSTOP) and come back."""

    def pause(self) -> None:
        assert self.process is not None
        os.kill(self.process.pid, signal.SIGSTOP)

    def resume(self) -> None:
        if self.process is not None:
            os.kill(self.process.pid, signal.SIGCONT)

    def stop(self) -> None:
        self.resume()
        super().stop()

    def client(self) -> Any:
        import redis

        return redis.Redis.from_url(self.url, socket_timeout=2)


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    """A started redis-server."""
    server = RedisServer(tmp_path)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def stepped_fleets(server: RedisServer, namespace: str, count: int) -> Iterator[list[RedisFleet]]:
    """``count`` fleet members on ``server`` in ``namespace``, stepped by hand (``sync()``),
    closed afterwards: the body of a fixture (``yield from``)."""
    members = [
        RedisFleet(server.url, namespace=namespace, sync_interval="100ms", start=False)
        for _ in range(count)
    ]
    yield members
    for fleet in members:
        fleet.close()


@pytest.fixture
def fleets(redis_server: RedisServer) -> Iterator[list[RedisFleet]]:
    """Three fleet members on ``redis_server`` (namespace ``pace``), stepped by hand."""
    yield from stepped_fleets(redis_server, "pace", 3)


@pytest.fixture
def stopped_redis(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[RedisServer]:
    """A redis-server whose URL is known but which is not running; `start` brings it up there."""
    server = RedisServer(tmp_path)
    server.start()
    server.stop()
    port = server.port
    # start() again binds the same port, so the URL given to the fleet becomes the live one.
    monkeypatch.setattr(tests.redis_server, "_free_port", lambda: port)
    try:
        yield server
    finally:
        server.stop()
