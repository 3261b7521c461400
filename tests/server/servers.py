"""Real servers on 127.0.0.1 for the server-companion tests: uvicorn (ASGI) and werkzeug (WSGI).

Each is started on a free port in a thread of its own and stopped when its block ends; every
wait is bounded.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn
from werkzeug.serving import make_server

__all__ = ["serve_asgi", "serve_wsgi"]

WAIT = 10.0


@contextmanager
def serve_asgi(app: Any) -> Iterator[str]:
    """Serve ``app`` with uvicorn on 127.0.0.1; yield its base URL."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(
        app, loop="asyncio", http="h11", lifespan="on", log_level="critical", access_log=False
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        ends = time.monotonic() + WAIT
        while not server.started:
            if time.monotonic() > ends or not thread.is_alive():
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.01)
        yield f"http://127.0.0.1:{port}/"
    finally:
        server.should_exit = True
        thread.join(timeout=WAIT)
        sock.close()


@contextmanager
def serve_wsgi(app: Any) -> Iterator[str]:
    """Serve ``app`` with werkzeug's threaded server on 127.0.0.1; yield its base URL."""
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.daemon = True
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.port}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=WAIT)
