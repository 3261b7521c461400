"""`retrymw.cli.demo._redis_server`: the redis-server the fleet demo and the suite both start.

Real processes on 127.0.0.1: Debian's redis-server (a test fails without it, never skips),
and ``/bin/sh`` scripts standing in for a redis-server that exits or ignores SIGTERM.
"""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from retrymw.cli.demo._redis_server import (
    INSTALL,
    RedisLaunchError,
    RedisServerProcess,
    answers_ping,
    free_port,
    stop_process,
)
from tests.system import process_gone, require_binary


def _fake_binary(directory: Path, body: str) -> str:
    path = directory / "redis-server"
    path.write_text(f"#!/bin/sh\n{body}\n", encoding="utf-8")
    path.chmod(0o755)
    return str(path)


@pytest.fixture
def taken_port() -> Iterator[int]:
    """A port on 127.0.0.1 held by a listening socket that never answers."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        yield int(holder.getsockname()[1])


def test_it_answers_on_loopback_and_stops_by_pid_leaving_nothing(tmp_path: Path) -> None:
    """Started, it answers PING at its URL; stopped, its pid is gone and its own dir removed."""
    server = RedisServerProcess(binary=require_binary("redis-server"))
    server.start()
    try:
        assert server.url == f"redis://127.0.0.1:{server.port}/0"
        assert answers_ping(server.port)
        assert server.process is not None
        pid = server.process.pid
        assert server._own_directory is not None
        directory = Path(server._own_directory.name)
        assert directory.is_dir()
    finally:
        server.stop()
    assert server.process is None
    assert process_gone(pid)
    assert not answers_ping(server.port)
    assert not directory.exists()
    server.stop()  # a second stop is harmless


def test_a_given_directory_holds_its_files_and_is_kept(tmp_path: Path) -> None:
    """With a directory given, redis-server works there and `stop` leaves the directory."""
    import redis

    server = RedisServerProcess(tmp_path, binary=require_binary("redis-server"))
    server.start()
    try:
        client = redis.Redis.from_url(server.url, socket_timeout=2)
        try:
            assert client.config_get("dir")["dir"] == str(tmp_path.resolve())
            assert client.config_get("save")["save"] == ""  # nothing persisted
            assert client.config_get("appendonly")["appendonly"] == "no"
        finally:
            client.close()
    finally:
        server.stop()
    assert tmp_path.is_dir()


def test_a_port_taken_before_the_bind_is_tried_again_on_another(taken_port: int) -> None:
    """A try whose port is taken (redis-server exits) is made again on the next free port."""
    ports = iter([taken_port, free_port()])
    server = RedisServerProcess(
        binary=require_binary("redis-server"), pick_port=lambda: next(ports)
    )
    server.start()
    try:
        assert server.port != taken_port
        assert answers_ping(server.port)
    finally:
        server.stop()


def test_a_missing_binary_names_it_and_the_install_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without redis-server on PATH, construction fails naming the binary and how to install it."""
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(RedisLaunchError) as raised:
        RedisServerProcess()
    assert "redis-server not found" in str(raised.value)
    assert INSTALL == "apt-get install redis-server"
    assert INSTALL in str(raised.value)


def test_a_server_that_never_answers_fails_after_three_tries(tmp_path: Path) -> None:
    """A binary that exits at once is tried three times, then one error; nothing is left over."""
    marks = tmp_path / "tries"
    binary = _fake_binary(tmp_path, f"echo x >> {marks}\nexit 1")
    server = RedisServerProcess(binary=binary)
    with pytest.raises(RedisLaunchError, match=r"did not answer PING within 10s \(3 tries\)"):
        server.start()
    assert marks.read_text(encoding="utf-8").count("x") == 3
    assert server.process is None
    assert server._own_directory is None


def test_a_process_ignoring_sigterm_is_killed_after_the_grace(tmp_path: Path) -> None:
    """`stop_process` sends SIGTERM, then SIGKILL once the grace is over, and reaps the child."""
    ready = tmp_path / "ready"
    process = subprocess.Popen(
        ["/bin/sh", "-c", f"trap '' TERM; touch {ready}; while :; do sleep 0.05; done"]
    )
    try:
        for _ in range(500):  # the trap must be set before the SIGTERM is sent (bounded)
            if ready.exists():
                break
            time.sleep(0.01)
        assert ready.exists()
        stop_process(process, grace=0.2)
        assert process.returncode == -9  # SIGKILL: the SIGTERM was ignored
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
