"""A real redis-server on a free 127.0.0.1 port for the fleet tests (stopped by pid)."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator

import pytest


class RedisServer:
    """A redis-server child process: start, stop (by pid), pause (SIGSTOP) and resume."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.url = f"redis://127.0.0.1:{port}/0"
        self.process: subprocess.Popen[bytes] | None = None
        self._dir = tempfile.mkdtemp(prefix="retrymw-redis-")

    def start(self) -> None:
        self.process = subprocess.Popen(
            [
                shutil.which("redis-server") or "/usr/bin/redis-server",
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                self._dir,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:  # bounded: 10 s
            if _answers(self.port):
                return
            time.sleep(0.02)
        raise RuntimeError("redis-server did not start")

    def stop(self) -> None:
        if self.process is not None:
            self.resume()
            os.kill(self.process.pid, signal.SIGTERM)
            self.process.wait(10)
            self.process = None

    def pause(self) -> None:
        assert self.process is not None
        os.kill(self.process.pid, signal.SIGSTOP)

    def resume(self) -> None:
        if self.process is not None:
            os.kill(self.process.pid, signal.SIGCONT)

    def client(self) -> object:
        import redis

        return redis.Redis.from_url(self.url, socket_timeout=2)


def _answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2) as conn:
            conn.sendall(b"PING\r\n")
            return conn.recv(16).startswith(b"+PONG")
    except OSError:
        return False


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def redis_server() -> Iterator[RedisServer]:
    """A started redis-server."""
    if shutil.which("redis-server") is None and not os.path.exists("/usr/bin/redis-server"):
        pytest.fail("redis-server is not installed (make test installs Debian's)")
    server = RedisServer(free_port())
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def stopped_redis() -> Iterator[RedisServer]:
    """A redis-server on a free port, not started yet."""
    server = RedisServer(free_port())
    try:
        yield server
    finally:
        server.stop()
