"""A private ``redis-server`` on 127.0.0.1: the fleet demo's store and the test suite's.

Not public API: ``retrymw demo --fleet`` starts one when no ``--redis URL`` is given, and the
suite's fixture (``tests/redis_server.py``) wraps the same class; it lives with the demo, its
only user at run time. The server keeps nothing on disk (no RDB, no AOF), keeps its files in a
directory of its own, runs in its own session (a Ctrl-C at the terminal reaches the parent
only) and is stopped by its pid.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

__all__ = [
    "INSTALL",
    "RedisLaunchError",
    "RedisServerProcess",
    "answers_ping",
    "find_redis_server",
    "free_port",
    "stop_process",
]

INSTALL = "apt-get install redis-server"
"""How Debian and Ubuntu install the binary; every error about a missing one names it."""

START_TIMEOUT = 10.0  # per try: a loaded machine forks slowly, a healthy one answers in ms
_TRIES = 3  # a free port can be taken between the probe and redis-server's bind
_POLL = 0.02


class RedisLaunchError(RuntimeError):
    """redis-server is not installed, or did not answer ``PING`` in time."""


def find_redis_server() -> str:
    """The path of ``redis-server`` on ``PATH``.

    Raises:
        RedisLaunchError: it is not there; the message names the install command.
    """
    binary = shutil.which("redis-server")
    if binary is None:
        raise RedisLaunchError(f"redis-server not found on PATH: {INSTALL}")
    return binary


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now (the kernel's pick)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def answers_ping(port: int) -> bool:
    """Whether a Redis on 127.0.0.1:``port`` answers an inline ``PING`` within 0.5 s."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as connection:
            connection.sendall(b"PING\r\n")
            return connection.recv(16).startswith(b"+PONG")
    except OSError:
        return False


def stop_process(process: subprocess.Popen[bytes], *, grace: float = 5.0) -> None:
    """Stop ``process`` by its pid: SIGTERM, SIGKILL after ``grace`` seconds; reap it."""
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.kill(process.pid, signal.SIGKILL)
            process.wait(timeout=grace)


class RedisServerProcess:
    """One redis-server on a free 127.0.0.1 port; `url` is where it listens once started.

    Args:
        directory: where it keeps its files; ``None`` makes a temporary directory that `stop`
            removes.
        binary: the redis-server to run; ``None`` looks it up on ``PATH`` here, so a missing
            binary fails at construction, before anything was started.
        pick_port: the port for each try (`free_port`).

    Raises:
        RedisLaunchError: ``binary`` is ``None`` and redis-server is not on ``PATH``.
    """

    def __init__(
        self,
        directory: str | os.PathLike[str] | None = None,
        *,
        binary: str | None = None,
        pick_port: Callable[[], int] = free_port,
    ) -> None:
        self.binary = find_redis_server() if binary is None else binary
        self.directory = None if directory is None else Path(directory)
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None
        self._pick_port = pick_port
        self._own_directory: tempfile.TemporaryDirectory[str] | None = None

    @property
    def url(self) -> str:
        """The server's ``redis://`` URL (database 0)."""
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        """Start on a free port and wait (bounded) until it answers ``PING``.

        A try whose server exits (its port was taken meanwhile) or stays silent for
        `START_TIMEOUT` seconds is stopped and made again on a new port, three times in all.

        Raises:
            RedisLaunchError: no try answered; nothing is left running.
        """
        directory = self.directory
        if directory is None:
            self._own_directory = tempfile.TemporaryDirectory(prefix="retrymw-redis-")
            directory = Path(self._own_directory.name)
        for _ in range(_TRIES):
            self.port = self._pick_port()
            self.process = subprocess.Popen(
                [
                    self.binary, "--bind", "127.0.0.1", "--port", str(self.port),
                    "--save", "", "--appendonly", "no", "--dir", str(directory),
                    "--daemonize", "no", "--loglevel", "warning",
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )  # fmt: skip
            deadline = time.monotonic() + START_TIMEOUT
            while time.monotonic() < deadline and self.process.poll() is None:
                if answers_ping(self.port):
                    return
                time.sleep(_POLL)
            self._stop_process()
        self.stop()
        raise RedisLaunchError(
            f"redis-server did not answer PING within {START_TIMEOUT:g}s ({_TRIES} tries)"
        )

    def _stop_process(self) -> None:
        process, self.process = self.process, None
        if process is not None:
            stop_process(process)

    def stop(self) -> None:
        """Stop the server by its pid, reap it, and remove the directory it was given none of."""
        self._stop_process()
        if self._own_directory is not None:
            self._own_directory.cleanup()
            self._own_directory = None
