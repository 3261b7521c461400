"""`tests.resp_server.RespServer`, the scripted store of the fault tests, does what it says."""

from __future__ import annotations

from typing import Any

import pytest
import redis

from tests.resp_server import (
    DEFAULT,
    Command,
    Delay,
    Disconnect,
    Error,
    Forward,
    Hang,
    RespServer,
    Simple,
)

from .conftest import RedisServer


def _client(url: str, *, protocol: int = 3) -> Any:
    return redis.Redis.from_url(url, socket_timeout=2, protocol=protocol)


@pytest.mark.parametrize("protocol", [pytest.param(2, id="resp2"), pytest.param(3, id="resp3")])
def test_scripted_answers_reach_redis_py(protocol: int) -> None:
    """Values, errors and nils as scripted, in both protocols; every command is recorded."""

    def answer(command: Command) -> Any:
        if command.name == "GET":
            return [1, b"x", None, Error("ERR nested")]
        if command.name == "SET":
            return Simple("OK")
        return DEFAULT

    with RespServer(answer) as server:
        client = _client(server.url, protocol=protocol)
        assert client.ping()
        reply = client.get("k")
        assert reply[:3] == [1, b"x", None]
        assert isinstance(reply[3], redis.exceptions.ResponseError)
        assert client.set("k", "v")
        assert server.count("GET") == 1
        client.close()


def test_delays_hangs_and_disconnects() -> None:
    """A late answer arrives; a hung or closed connection is a client error, not a hang."""

    def answer(command: Command) -> Any:
        if command.name == "GET":
            return Delay(0.05, b"late")
        if command.name == "DEL":
            return Hang()
        if command.name == "INCRBY":  # redis-py sends INCR as INCRBY
            return Disconnect()
        return DEFAULT

    with RespServer(answer) as server:
        client = redis.Redis.from_url(server.url, socket_timeout=0.5)
        assert client.get("k") == b"late"
        with pytest.raises(redis.exceptions.TimeoutError):
            client.delete("k")
        client.close()
        client = redis.Redis.from_url(server.url, socket_timeout=0.5)
        with pytest.raises(redis.exceptions.ConnectionError):
            client.incr("k")
        client.close()


def test_forwarding_to_a_real_redis_and_tampering(redis_server: RedisServer) -> None:
    """Forwarded commands reach the real store; ``Forward(tamper)`` changes only the answer."""

    def answer(command: Command) -> Any:
        if command.name == "GET":
            return Forward(lambda reply: reply + b"!")
        return DEFAULT

    with RespServer(answer, upstream=("127.0.0.1", redis_server.port)) as server:
        client = _client(server.url)
        client.set("k", "v")
        assert client.get("k") == b"v!"
        sha = client.script_load("return {1, 2}")
        assert client.evalsha(sha, 0) == [1, 2]
        client.close()
    real = redis_server.client()
    assert real.get("k") == b"v"
    real.close()
