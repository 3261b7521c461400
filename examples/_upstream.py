"""The flaky loopback server the examples talk to: every other request fails with 503.

Set RETRYMW_EXAMPLE_URL to point the examples at another server instead.
"""

from __future__ import annotations

import itertools
import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class _Flaky(BaseHTTPRequestHandler):
    requests = itertools.count(1)

    def do_GET(self) -> None:
        ok = next(self.requests) % 2 == 0
        body = b'{"ok": true}\n' if ok else b'{"ok": false}\n'
        self.send_response(200 if ok else 503)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        """Keep the examples' output to what they print themselves."""


def upstream_url() -> str:
    """RETRYMW_EXAMPLE_URL, or the URL of a flaky server started on 127.0.0.1 for this run."""
    url = os.environ.get("RETRYMW_EXAMPLE_URL")
    if url:
        return url
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Flaky)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}/"
