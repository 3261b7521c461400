"""A scripted HTTP/1.1 server on 127.0.0.1 for the transport tests.

Each endpoint ``/s/<key>`` plays a script of `Step`s, one per request (the last step repeats,
or the script cycles). Steps can answer with a status and headers, drop the connection without
a response, answer slowly, or truncate the body. The server counts the connections it accepted
and the ones still open, and records every request it received.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

__all__ = ["FlakyServer", "Received", "Step"]


@dataclass(frozen=True)
class Step:
    """One scripted answer.

    Attributes:
        status: the response status.
        headers: extra response headers.
        body: the response body.
        chunked: send the body with ``Transfer-Encoding: chunked`` (no length known up front).
        drop: close the connection without answering.
        delay: seconds to wait before answering (cut short when the server stops).
        truncate: announce 100 more bytes than are sent, then close the connection.
    """

    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b"ok"
    chunked: bool = False
    drop: bool = False
    delay: float = 0.0
    truncate: bool = False


@dataclass(frozen=True)
class Received:
    """A request as the server saw it."""

    method: str
    headers: dict[str, str]
    body: bytes


class _Script:
    def __init__(self, steps: tuple[Step, ...], cycle: bool, record: bool) -> None:
        self.steps = steps
        self.cycle = cycle
        self.record = record
        self.served = 0
        self.received: list[Received] = []

    def next_step(self) -> Step:
        index = (
            self.served % len(self.steps) if self.cycle else min(self.served, len(self.steps) - 1)
        )
        self.served += 1
        return self.steps[index]


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    timeout = 10  # a stray keep-alive connection cannot keep its thread forever
    server: _Server

    def setup(self) -> None:
        super().setup()
        with self.server.lock:
            self.server.accepted += 1
            self.server.open += 1

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            with self.server.lock:
                self.server.open -= 1

    def log_message(self, format: str, *args: object) -> None:
        """Stay quiet."""

    def _read_body(self) -> bytes:
        if self.headers.get("transfer-encoding", "").lower() == "chunked":
            parts: list[bytes] = []
            while True:
                size = int(self.rfile.readline().split(b";")[0], 16)
                if size == 0:
                    self.rfile.readline()
                    return b"".join(parts)
                parts.append(self.rfile.read(size))
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("content-length", "0")))

    def _serve(self) -> None:
        body = self._read_body()
        key = self.path.split("?", 1)[0].removeprefix("/s/")
        with self.server.lock:
            script = self.server.scripts.get(key)
            step = script.next_step() if script is not None else Step(status=404, body=b"")
            if script is not None and script.record:
                script.received.append(Received(self.command, dict(self.headers.items()), body))
        if step.delay and self.server.stopping.wait(step.delay):
            step = Step(drop=True)
        if step.drop:
            self.close_connection = True
            return
        payload = b"" if self.command == "HEAD" else step.body
        lines = [f"HTTP/1.1 {step.status} Scripted"]
        lines += [f"{name}: {value}" for name, value in step.headers.items()]
        if step.chunked:
            lines.append("Transfer-Encoding: chunked")
            payload = f"{len(payload):x}\r\n".encode() + payload + b"\r\n" if payload else b""
            payload += b"0\r\n\r\n"
        else:
            lines.append(f"Content-Length: {len(step.body) + (100 if step.truncate else 0)}")
        if step.truncate:
            self.close_connection = True
        head = "\r\n".join(lines).encode("latin-1") + b"\r\n\r\n"
        try:
            self.wfile.write(head + payload)  # one write: no Nagle/delayed-ACK stall
        except OSError:  # the client gave up (a timeout): nothing to answer
            self.close_connection = True

    do_GET = do_HEAD = do_POST = do_PUT = do_PATCH = do_DELETE = do_OPTIONS = _serve


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.scripts: dict[str, _Script] = {}
        self.accepted = 0
        self.open = 0


class FlakyServer:
    """Runs the scripted server in a background thread until `stop`."""

    def __init__(self) -> None:
        self._server = _Server()
        host, port = self._server.server_address[:2]
        self.base_url = f"http://{host!s}:{port}"
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        self._keys = 0

    def script(self, *steps: Step | int, cycle: bool = False, record: bool = True) -> str:
        """Register a script and return its URL; a bare int is ``Step(status=...)``."""
        resolved = tuple(Step(status=s) if isinstance(s, int) else s for s in steps)
        with self._server.lock:
            self._keys += 1
            key = f"k{self._keys}"
            self._server.scripts[key] = _Script(resolved or (Step(),), cycle, record)
        return f"{self.base_url}/s/{key}"

    def received(self, url: str) -> list[Received]:
        """Every request the script at ``url`` received, in order."""
        with self._server.lock:
            return list(self._server.scripts[url.rsplit("/", 1)[-1]].received)

    def served(self, url: str) -> int:
        """How many requests the script at ``url`` answered (or dropped)."""
        with self._server.lock:
            return self._server.scripts[url.rsplit("/", 1)[-1]].served

    @property
    def accepted(self) -> int:
        """Connections accepted since the server started."""
        with self._server.lock:
            return self._server.accepted

    @property
    def open(self) -> int:
        """Connections currently open (their handler thread has not finished)."""
        with self._server.lock:
            return self._server.open

    def stop(self) -> None:
        """Stop serving, wake slow handlers and close the listening socket."""
        self._server.stopping.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
