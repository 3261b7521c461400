"""A scripted HTTP/1.1 server on 127.0.0.1 for the transport tests.

Each endpoint ``/s/<key>`` (and any path below it, so an SDK can take it as its base URL)
plays a script of `Step`s, one per request (the last step repeats,
or the script cycles). Steps can answer with a status and headers, drop the connection without
a response, answer slowly, truncate the body, trickle the head or the body byte by byte, or
stall between them. The server counts the connections it accepted and the ones still open, and
records every request it received. Given an ``ssl.SSLContext`` it speaks HTTPS.
"""

from __future__ import annotations

import ssl
import threading
from collections.abc import Sequence
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
        head_pace: send the status line and headers one byte at a time, this many seconds apart.
        stall: seconds to wait between the headers and the body.
        pace: send the body one byte (one chunk if ``chunked``) at a time, this many seconds
            apart: a trickle, or a stream with gaps.

    Every wait is cut short when the server stops, so a test never outlives its server.
    """

    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b"ok"
    chunked: bool = False
    drop: bool = False
    delay: float = 0.0
    truncate: bool = False
    head_pace: float = 0.0
    stall: float = 0.0
    pace: float = 0.0


@dataclass(frozen=True)
class Received:
    """A request as the server saw it."""

    method: str
    headers: dict[str, str]
    body: bytes
    path: str = ""


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
        # /s/<key>, or /s/<key>/<api path> for an SDK whose base URL is the script's URL.
        key = self.path.split("?", 1)[0].removeprefix("/s/").split("/", 1)[0]
        with self.server.lock:
            script = self.server.scripts.get(key)
            step = script.next_step() if script is not None else Step(status=404, body=b"")
            if script is not None and script.record:
                script.received.append(
                    Received(self.command, dict(self.headers.items()), body, self.path)
                )
        if step.delay and self.server.stopping.wait(step.delay):
            step = Step(drop=True)
        if step.drop:
            self.close_connection = True
            return
        payload = b"" if self.command == "HEAD" else step.body
        pieces: list[bytes] = [payload[i : i + 1] for i in range(len(payload))] if step.pace else []
        lines = [f"HTTP/1.1 {step.status} Scripted"]
        lines += [f"{name}: {value}" for name, value in step.headers.items()]
        if step.chunked:
            lines.append("Transfer-Encoding: chunked")
            pieces = [b"%x\r\n%s\r\n" % (len(p), p) for p in pieces or [payload] if p]
            pieces.append(b"0\r\n\r\n")
        else:
            lines.append(f"Content-Length: {len(step.body) + (100 if step.truncate else 0)}")
            pieces = pieces or [payload]
        if step.truncate:
            self.close_connection = True
        head = "\r\n".join(lines).encode("latin-1") + b"\r\n\r\n"
        if not (step.head_pace or step.stall or step.pace):
            pieces, head = [head + b"".join(pieces)], b""  # one write: no Nagle/delayed-ACK stall
        sent = self._send(
            [head[i : i + 1] for i in range(len(head))] if step.head_pace else [head],
            step.head_pace,
        )
        if sent and step.stall and self.server.stopping.wait(step.stall):
            sent = False
        if not sent or not self._send(pieces, step.pace):
            self.close_connection = True

    def _send(self, pieces: Sequence[bytes], pace: float) -> bool:
        """Write ``pieces`` ``pace`` seconds apart; False if the client or the server gave up."""
        for index, piece in enumerate(pieces):
            if index and pace and self.server.stopping.wait(pace):
                return False
            try:
                self.wfile.write(piece)
            except OSError:  # the client gave up (a timeout): nothing more to send
                return False
        return True

    do_GET = do_HEAD = do_POST = do_PUT = do_PATCH = do_DELETE = do_OPTIONS = _serve


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, tls: ssl.SSLContext | None) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.tls = tls
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.scripts: dict[str, _Script] = {}
        self.accepted = 0
        self.open = 0
        self.handshakes_failed = 0

    def finish_request(self, request: object, client_address: object) -> None:
        # The TLS handshake runs in the handler's thread, so a client that fails it (one that
        # does not trust the certificate) never blocks the accepting loop.
        if self.tls is None:
            super().finish_request(request, client_address)  # type: ignore[arg-type]
            return
        try:
            secured = self.tls.wrap_socket(request, server_side=True)  # type: ignore[arg-type]
        except (OSError, ValueError):
            with self.lock:
                self.handshakes_failed += 1
            return
        try:
            super().finish_request(secured, client_address)
        finally:
            secured.close()  # it owns the socket now: shutdown_request closes a detached one


class FlakyServer:
    """Runs the scripted server in a background thread until `stop`.

    Args:
        tls: a server-side ``ssl.SSLContext`` to serve HTTPS with; plain HTTP when omitted.
    """

    def __init__(self, tls: ssl.SSLContext | None = None) -> None:
        self._server = _Server(tls)
        host, port = self._server.server_address[:2]
        scheme = "http" if tls is None else "https"
        self.base_url = f"{scheme}://{host!s}:{port}"
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
    def handshakes_failed(self) -> int:
        """TLS handshakes that failed (the client refused the certificate)."""
        with self._server.lock:
            return self._server.handshakes_failed

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
