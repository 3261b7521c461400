"""A real ``redis-server`` on 127.0.0.1 for the tests: no persistence, its files in a temp dir.

`RedisServer` starts Debian's redis-server on a free port, waits (bounded) until it answers
``PING``, and stops it by its pid. The fleet tests reuse it; `redis_server` is the context
manager the fixtures wrap.
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

from tests.system import require_binary

__all__ = ["RedisServer", "redis_server"]

_START_TIMEOUT = 10.0


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _answers_ping(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as connection:
            connection.sendall(b"PING\r\n")
            return connection.recv(16).startswith(b"+PONG")
    except OSError:
        return False


class RedisServer:
    """One redis-server process; `url` is where it listens."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """The server's ``redis://`` URL (database 0)."""
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        """Start on a free port; a port taken between probe and bind is tried again (3 times)."""
        binary = require_binary("redis-server")
        for _ in range(3):
            self.port = _free_port()
            self.process = subprocess.Popen(
                [
                    binary,
                    "--bind", "127.0.0.1",
                    "--port", str(self.port),
                    "--save", "",
                    "--appendonly", "no",
                    "--dir", str(self.directory),
                    "--daemonize", "no",
                    "--loglevel", "warning",
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )  # fmt: skip
            deadline = time.monotonic() + _START_TIMEOUT
            while time.monotonic() < deadline and self.process.poll() is None:
                if _answers_ping(self.port):
                    return
                time.sleep(0.02)
            self.stop()
        raise RuntimeError(f"redis-server did not start in {_START_TIMEOUT:g}s (3 tries)")

    def stop(self) -> None:
        """Stop the server by its pid and reap it."""
        process, self.process = self.process, None
        if process is None:
            return
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=5.0)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=5.0)


@contextlib.contextmanager
def redis_server(directory: Path) -> Iterator[RedisServer]:
    """A running `RedisServer` keeping its files in ``directory``, stopped on exit."""
    server = RedisServer(directory)
    server.start()
    try:
        yield server
    finally:
        server.stop()
