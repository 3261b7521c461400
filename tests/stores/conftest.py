"""Fixtures for the store tests: a real redis-server per module, and both stores by name."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.redis_server import RedisServer, redis_server


@pytest.fixture(scope="module")
def redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """A real redis-server on 127.0.0.1 for this module, without persistence."""
    with redis_server(tmp_path_factory.mktemp("redis")) as server:
        yield server


@pytest.fixture(params=[pytest.param("sqlite", id="sqlite"), pytest.param("redis", id="redis")])
def store_spec(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Where a worker process finds its store: ``sqlite:<file>`` or a fresh Redis database."""
    if request.param == "sqlite":
        return f"sqlite:{tmp_path / 'retries.db'}"
    server: RedisServer = request.getfixturevalue("redis")
    import redis as redis_py

    with redis_py.Redis.from_url(server.url) as client:
        client.flushdb()
    return server.url
