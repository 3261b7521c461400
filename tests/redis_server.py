"""A real ``redis-server`` on 127.0.0.1 for the tests: no persistence, its files in a temp dir.

`RedisServer` is the package's own launcher (`RedisServerProcess` of
`retrymw.cli.demo._redis_server`, the one ``retrymw demo --fleet`` uses): it starts Debian's
redis-server on a free port, waits (bounded) until it answers ``PING``, and stops it by its
pid. Without the binary the test fails (`tests.system.require_binary`), never skips. The
fleet tests reuse it; `redis_server` is the context manager the fixtures wrap.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from retrymw.cli.demo._redis_server import RedisServerProcess, free_port
from tests.system import require_binary

__all__ = ["RedisServer", "redis_server"]

_free_port = free_port


def _pick_port() -> int:
    # _free_port is looked up at each try, not bound once, so that a test may pin the port
    # (tests/fleet/conftest.py's stopped_redis restarts the server on the same one).
    return _free_port()


class RedisServer(RedisServerProcess):
    """One redis-server process keeping its files in ``directory``; `url` is where it listens."""

    def __init__(self, directory: Path) -> None:
        super().__init__(directory, binary=require_binary("redis-server"), pick_port=_pick_port)


@contextlib.contextmanager
def redis_server(directory: Path) -> Iterator[RedisServer]:
    """A running `RedisServer` keeping its files in ``directory``, stopped on exit."""
    server = RedisServer(directory)
    server.start()
    try:
        yield server
    finally:
        server.stop()
