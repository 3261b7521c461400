"""A real 3-node Redis Cluster on 127.0.0.1 for the tests: Debian's redis-server and redis-cli.

`RedisCluster` starts three ``redis-server --cluster-enabled yes`` processes on free ports (each
with its cluster bus, port + 10000, free too), joins them with ``redis-cli --cluster create
... --cluster-replicas 0 --cluster-yes`` (every slot served, no replica), waits (bounded) until
every node says ``cluster_state:ok``, and stops every process by its pid. No persistence; each
node keeps its files (its ``nodes.conf``) in a directory of its own. Without the binaries the
test fails (`tests.system.require_binary`), never skips.
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from retrymw.cli.demo._redis_server import answers_ping, stop_process
from tests.system import require_binary

__all__ = ["RedisCluster", "redis_cluster"]

_BUS_OFFSET = 10_000  # Redis Cluster's bus listens on port + 10000
_START_TIMEOUT = 30.0  # a loaded machine forks and gossips slowly


def _free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _cluster_ports(count: int) -> list[int]:
    """``count`` ports free on 127.0.0.1 whose cluster bus ports are free too."""
    ports: list[int] = []
    while len(ports) < count:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            probe.bind(("127.0.0.1", 0))
            port = int(probe.getsockname()[1])
        if port + _BUS_OFFSET <= 65535 and port not in ports and _free(port + _BUS_OFFSET):
            ports.append(port)
    return ports


def _ask(port: int, *command: str) -> str:
    """One inline command to 127.0.0.1:``port``; its raw reply ('' if nothing answered)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2.0) as connection:
            connection.sendall((" ".join(command) + "\r\n").encode())
            return connection.recv(65536).decode("utf-8", "replace")
    except OSError:
        return ""


class RedisCluster:
    """Three cluster-enabled redis-servers joined into one cluster; `urls` once started."""

    def __init__(self, directory: Path, *, nodes: int = 3) -> None:
        self.server = require_binary("redis-server")
        self.cli = require_binary("redis-cli")
        self.directory = directory
        self.nodes = nodes
        self.ports: list[int] = []
        self.processes: list[subprocess.Popen[bytes]] = []

    @property
    def urls(self) -> list[str]:
        """Each node's ``redis://`` URL."""
        return [f"redis://127.0.0.1:{port}/0" for port in self.ports]

    def start(self) -> None:
        """Start the nodes, create the cluster and wait until every node serves it.

        Raises:
            RuntimeError: a node did not answer, or the cluster did not form in time;
                everything started is stopped first.
        """
        try:
            self._start_nodes()
            self._create()
        except BaseException:
            self.stop()
            raise

    def _create(self) -> None:
        create = subprocess.run(
            [self.cli, "--cluster", "create",
             *(f"127.0.0.1:{port}" for port in self.ports),
             "--cluster-replicas", "0", "--cluster-yes"],
            capture_output=True, timeout=_START_TIMEOUT, check=False,
        )  # fmt: skip
        if create.returncode != 0:
            raise RuntimeError(f"redis-cli --cluster create failed: {create.stdout[-500:]!r}")
        deadline = time.monotonic() + _START_TIMEOUT
        while not all("cluster_state:ok" in _ask(p, "CLUSTER", "INFO") for p in self.ports):
            if time.monotonic() > deadline:
                raise RuntimeError("the cluster did not reach cluster_state:ok in time")
            time.sleep(0.05)

    def _start_nodes(self) -> None:
        self.ports = _cluster_ports(self.nodes)
        for port in self.ports:
            home = self.directory / str(port)
            home.mkdir(parents=True, exist_ok=True)
            command = [
                self.server, "--bind", "127.0.0.1", "--port", str(port),
                "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                "--cluster-node-timeout", "5000", "--save", "", "--appendonly", "no",
                "--dir", str(home), "--daemonize", "no", "--loglevel", "warning",
            ]  # fmt: skip
            self.processes.append(
                subprocess.Popen(
                    command,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    start_new_session=True,
                )
            )
        deadline = time.monotonic() + _START_TIMEOUT
        while not all(answers_ping(port) for port in self.ports):
            if time.monotonic() > deadline or any(p.poll() is not None for p in self.processes):
                raise RuntimeError("a cluster node did not answer PING in time")
            time.sleep(0.02)

    def slot_owner(self, slot: int) -> int:
        """The port of the node serving ``slot`` (from ``CLUSTER SHARDS``-free ``SLOTS``)."""
        import redis

        client = redis.Redis(host="127.0.0.1", port=self.ports[0], socket_timeout=2)
        try:
            slots: list[Any] = client.execute_command("CLUSTER SLOTS")  # type: ignore[no-untyped-call]
            for start, end, primary, *_ in slots:
                if int(start) <= slot <= int(end):
                    return int(primary[1])
        finally:
            client.close()
        raise LookupError(slot)

    def stop(self) -> None:
        """Stop every node by its pid and reap it."""
        processes, self.processes = self.processes, []
        for process in processes:
            stop_process(process)


@contextlib.contextmanager
def redis_cluster(directory: Path) -> Iterator[RedisCluster]:
    """A running 3-node `RedisCluster` keeping its files under ``directory``, stopped on exit."""
    cluster = RedisCluster(directory)
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()
