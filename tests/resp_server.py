"""A scripted RESP2 server on 127.0.0.1: the store that answers wrong, late or never.

The fleet and the stores must hold when Redis answers a wrong type, a huge or negative number,
an error, late, never, or hangs up. A real redis-server does none of that on demand, so the
suite runs this one: a small threaded server that speaks enough RESP2 for redis-py, and asks a
*handler* what to answer to each command.

``handler(command)`` gets a `Command` (``name`` upper-cased, ``args`` as bytes) and returns
one of:

* a plain value, encoded as RESP: ``int`` (``:n``), ``bytes``/``str`` (bulk string), ``None``
  (nil), ``list``/``tuple`` (array), `Error` (``-ERR ...``), `Simple` (``+OK``);
* `Raw` (bytes sent as they are: a malformed frame), `Delay` (wait, then answer ``then``),
  `Hang` (never answer this connection until the server stops), `Disconnect` (close it);
* `Forward` (ask the real Redis at ``upstream`` and send its answer, optionally changed by
  ``Forward(tamper)``, which gets the decoded reply and returns the value to send);
* `DEFAULT`: what the server does without a handler: forward when it has an upstream, else
  the built-in answers (``HELLO`` in RESP2 or RESP3, ``PING``, ``SELECT``, ``CLIENT ...``,
  ``SCRIPT LOAD`` with the real SHA-1, ``TIME``, ``INFO``, ``ECHO``), else an
  ``ERR unknown command`` error.

Every command received is kept in `commands` (thread-safe), so a test can count what a client
sent. Connections and their threads end when `stop` is called; the server is a context manager.

Example::

    def garbage(command):
        return b"not a list" if command.name == "EVALSHA" else DEFAULT

    with RespServer(garbage) as server:
        client = redis.Redis.from_url(server.url)
"""

from __future__ import annotations

import contextlib
import hashlib
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "DEFAULT",
    "Command",
    "Delay",
    "Disconnect",
    "Error",
    "Forward",
    "Hang",
    "Raw",
    "RespServer",
    "Simple",
    "encode",
]


@dataclass(frozen=True, slots=True)
class Command:
    """One command a client sent: ``name`` upper-cased, ``args`` after it, raw."""

    name: str
    args: tuple[bytes, ...]

    def arg(self, index: int) -> str:
        """Argument ``index`` decoded as UTF-8 (replacement characters for invalid bytes)."""
        return self.args[index].decode("utf-8", "replace")


@dataclass(frozen=True, slots=True)
class Error:
    """A RESP error reply (``-ERR boom``): ``Error("ERR boom")``."""

    message: str


@dataclass(frozen=True, slots=True)
class Simple:
    """A RESP simple string (``+OK``)."""

    text: str


@dataclass(frozen=True, slots=True)
class Raw:
    """Bytes sent exactly as given: a malformed or truncated frame."""

    data: bytes


@dataclass(frozen=True, slots=True)
class Delay:
    """Wait ``seconds`` (bounded by the server's stop), then answer ``then``."""

    seconds: float
    then: Any = None


@dataclass(frozen=True, slots=True)
class Hang:
    """Never answer this connection again (until the server stops)."""


@dataclass(frozen=True, slots=True)
class Disconnect:
    """Close this connection without answering."""


@dataclass(frozen=True, slots=True)
class Forward:
    """Answer what the upstream Redis answers, through ``tamper(reply)`` if given."""

    tamper: Callable[[Any], Any] | None = None


class _Default:
    def __repr__(self) -> str:
        return "DEFAULT"


DEFAULT: Any = _Default()
"""A handler's answer meaning: do what the server does without a handler."""

Handler = Callable[[Command], Any]
_MAX_LINE = 1 << 20  # a header line longer than this is no RESP this suite sends
_MAX_BULK = 512 << 20


class _Closed(Exception):
    """The peer closed the connection (or the server is stopping)."""


def encode(value: Any, *, resp3: bool = False) -> bytes:
    """``value`` as a RESP frame (see the module documentation for the types).

    RESP2 by default; ``resp3`` writes nil as RESP3's ``_`` (the rest is common to both).
    """
    if isinstance(value, Raw):
        return value.data
    if isinstance(value, Error):
        return f"-{value.message}\r\n".encode()
    if isinstance(value, Simple):
        return f"+{value.text}\r\n".encode()
    if value is None:
        return b"_\r\n" if resp3 else b"$-1\r\n"
    if isinstance(value, bool):
        return f":{int(value)}\r\n".encode()
    if isinstance(value, int):
        return f":{value}\r\n".encode()
    if isinstance(value, float):
        value = repr(value)
    if isinstance(value, str):
        value = value.encode()
    if isinstance(value, (bytes, bytearray)):
        return b"$%d\r\n%s\r\n" % (len(value), bytes(value))
    if isinstance(value, (list, tuple)):
        return b"*%d\r\n" % len(value) + b"".join(encode(item, resp3=resp3) for item in value)
    raise TypeError(f"cannot encode {type(value).__name__} as RESP")


def _read_line(stream: Any) -> bytes:
    line: bytes = stream.readline(_MAX_LINE)
    if not line.endswith(b"\r\n"):
        raise _Closed
    return line[:-2]


def _read_value(stream: Any) -> Any:
    """One RESP2 value from ``stream`` (a reply: errors become `Error`, strings bytes)."""
    line = _read_line(stream)
    kind, rest = line[:1], line[1:]
    if kind == b"+":
        return Simple(rest.decode("utf-8", "replace"))
    if kind == b"-":
        return Error(rest.decode("utf-8", "replace"))
    if kind == b":":
        return int(rest)
    if kind == b"$":
        size = int(rest)
        if size < 0:
            return None
        if size > _MAX_BULK:
            raise _Closed
        data: bytes = stream.read(size + 2)
        if len(data) != size + 2:
            raise _Closed
        return data[:-2]
    if kind == b"*":
        count = int(rest)
        return None if count < 0 else [_read_value(stream) for _ in range(count)]
    raise _Closed


def _read_command(stream: Any) -> Command:
    """One command: an array of bulk strings, or an inline command (``PING\\r\\n``)."""
    first: bytes = stream.peek(1)[:1]
    if not first:
        raise _Closed
    if first != b"*":
        words = _read_line(stream).split()
        if not words:
            return Command("", ())
        return Command(words[0].decode("utf-8", "replace").upper(), tuple(words[1:]))
    value = _read_value(stream)
    if not isinstance(value, list) or not value or not all(isinstance(v, bytes) for v in value):
        raise _Closed
    return Command(value[0].decode("utf-8", "replace").upper(), tuple(value[1:]))


@dataclass(slots=True)
class _Connection:
    sock: socket.socket
    upstream: socket.socket | None = None
    upstream_stream: Any = None
    resp3: bool = False  # the client's HELLO asked for RESP3 (redis-py 8's default)
    thread: threading.Thread | None = field(default=None)


class RespServer:
    """A threaded RESP2 server on a free 127.0.0.1 port, answering through ``handler``.

    Args:
        handler: what to answer to each command (see the module documentation); ``None``
            answers `DEFAULT` to everything.
        upstream: ``(host, port)`` of a real Redis for `Forward` (and for `DEFAULT`).
    """

    def __init__(
        self, handler: Handler | None = None, *, upstream: tuple[str, int] | None = None
    ) -> None:
        self.handler: Handler = handler if handler is not None else (lambda command: DEFAULT)
        self.upstream = upstream
        self.commands: list[Command] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(64)
        self.port = int(self._listener.getsockname()[1])
        self._connections: list[_Connection] = []
        self._accepter: threading.Thread | None = None

    @property
    def url(self) -> str:
        """The server's ``redis://`` URL."""
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> RespServer:
        """Start accepting connections (returns the server)."""
        self._accepter = threading.Thread(target=self._accept, name="resp-server", daemon=True)
        self._accepter.start()
        return self

    def stop(self) -> None:
        """Close the listener and every connection, and join their threads (bounded)."""
        self._stopping.set()
        self._listener.close()
        with self._lock:
            connections = list(self._connections)
        for connection in connections:
            for sock in (connection.sock, connection.upstream):
                if sock is not None:
                    with contextlib.suppress(OSError):
                        sock.shutdown(socket.SHUT_RDWR)
                    sock.close()
        for connection in connections:
            if connection.thread is not None:
                connection.thread.join(5.0)
        if self._accepter is not None:
            self._accepter.join(5.0)

    def __enter__(self) -> RespServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def count(self, name: str) -> int:
        """How many ``name`` commands were received so far."""
        with self._lock:
            return sum(1 for command in self.commands if command.name == name.upper())

    def connections(self) -> int:
        """How many connections were accepted so far."""
        with self._lock:
            return len(self._connections)

    # -- serving -------------------------------------------------------------------------------

    def _accept(self) -> None:
        while not self._stopping.is_set():
            try:
                sock, _ = self._listener.accept()
            except OSError:
                return
            connection = _Connection(sock)
            connection.thread = threading.Thread(
                target=self._serve, args=(connection,), name="resp-connection", daemon=True
            )
            with self._lock:
                self._connections.append(connection)
            connection.thread.start()

    def _serve(self, connection: _Connection) -> None:
        stream = connection.sock.makefile("rb")
        try:
            while not self._stopping.is_set():
                command = _read_command(stream)
                with self._lock:
                    self.commands.append(command)
                if not self._answer(connection, command, self.handler(command)):
                    return
        except (_Closed, OSError, ValueError):
            return
        finally:
            stream.close()
            connection.sock.close()
            if connection.upstream is not None:
                connection.upstream.close()

    def _answer(self, connection: _Connection, command: Command, action: Any) -> bool:
        """Send the answer ``action`` says; ``False`` ends the connection."""
        while isinstance(action, Delay):
            if self._stopping.wait(action.seconds):
                return False
            action = action.then
        if isinstance(action, Hang):
            self._stopping.wait()
            return False
        if isinstance(action, Disconnect):
            return False
        if action is DEFAULT:
            action = Forward() if self.upstream is not None else _builtin(command)
        if isinstance(action, Forward):
            reply = self._forward(connection, command)
            action = reply if action.tamper is None else action.tamper(reply)
        if command.name == "HELLO" and command.args[:1] == (b"3",):
            connection.resp3 = True
        connection.sock.sendall(encode(action, resp3=connection.resp3))
        return True

    def _forward(self, connection: _Connection, command: Command) -> Any:
        if self.upstream is None:
            return Error("ERR this RespServer has no upstream")
        if connection.upstream is None:
            connection.upstream = socket.create_connection(self.upstream, timeout=30)
            connection.upstream_stream = connection.upstream.makefile("rb")
        if command.name == "HELLO":  # the upstream speaks RESP2 to us; we speak to the client
            return _builtin(command)
        frame = [command.name.encode(), *command.args]
        connection.upstream.sendall(encode(frame))
        return _read_value(connection.upstream_stream)


def _builtin(command: Command) -> Any:
    """What the server answers on its own: enough for redis-py to connect and load scripts."""
    name = command.name
    if name == "PING":
        return Simple("PONG")
    if name == "HELLO":  # redis-py's handshake: RESP3 answers a map, RESP2 a flat array
        pairs = [
            (b"server", b"redis"), (b"version", b"7.0.0"), (b"proto", 2), (b"id", 1),
            (b"mode", b"standalone"), (b"role", b"master"), (b"modules", []),
        ]  # fmt: skip
        if command.args and command.args[0] == b"3":
            pairs[2] = (b"proto", 3)
            body = b"".join(encode(key) + encode(value) for key, value in pairs)
            return Raw(b"%%%d\r\n" % len(pairs) + body)
        return [item for pair in pairs for item in pair]
    if name in ("SELECT", "AUTH", "CLIENT", "READONLY"):
        return Simple("OK")
    if name == "ECHO" and command.args:
        return command.args[0]
    if name == "SCRIPT" and command.args and command.arg(0).upper() == "LOAD":
        return hashlib.sha1(command.args[1]).hexdigest()
    if name == "TIME":
        now = time.time()
        return [str(int(now)), str(int(now % 1 * 1_000_000))]
    if name == "INFO":
        return b"# Server\r\nredis_version:7.0.0\r\n"
    return Error(f"ERR unknown command '{name}'")
