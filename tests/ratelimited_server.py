"""A rate-limited HTTP server on 127.0.0.1, run as its own process by the pacing tests.

It enforces a requests limit (a token bucket: ``--rate`` per second, ``--burst`` at once) and
optionally a tokens limit (``--tokens`` per minute, a bucket holding ``--token-burst``; a
request's cost is its ``x-cost`` header), and answers like OpenAI's API does: every response
carries ``x-ratelimit-limit-*`` (per minute), ``-remaining-*`` and ``-reset-*``, and a refused
request gets 429 with ``Retry-After`` (whole seconds, rounded up).

``GET /config?rate=25`` changes the requests limit while it runs; ``GET /log`` returns every
request it judged, as JSON ``[[monotonic time, status, cost], ...]`` (the clients' process reads
the same monotonic clock). It prints ``PORT <n>`` once listening, and stops on SIGTERM.

Run: ``python -P ratelimited_server.py --rate 50 --burst 10 [--tokens 10000 --token-burst 500]``.
"""

from __future__ import annotations

import argparse
import json
import math
import signal
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit


class Bucket:
    """A token bucket: ``rate`` per second, at most ``capacity``."""

    def __init__(self, rate: float, capacity: float) -> None:
        self.rate = rate
        self.capacity = capacity
        self.level = capacity
        self.at = time.monotonic()

    def refill(self, now: float) -> None:
        self.level = min(self.capacity, self.level + (now - self.at) * self.rate)
        self.at = now

    def headers(self, kind: str) -> dict[str, str]:
        reset = (self.capacity - self.level) / self.rate
        return {
            f"x-ratelimit-limit-{kind}": str(round(self.rate * 60)),
            f"x-ratelimit-remaining-{kind}": str(math.floor(self.level)),
            f"x-ratelimit-reset-{kind}": f"{reset * 1000:.0f}ms",
        }


class Limits:
    def __init__(self, rate: float, burst: float, tokens: float | None, token_burst: float) -> None:
        self.lock = threading.Lock()
        self.requests = Bucket(rate, burst)
        self.tokens = None if tokens is None else Bucket(tokens / 60.0, token_burst)
        self.log: list[tuple[float, int, float]] = []

    def judge(self, cost: float) -> tuple[int, dict[str, str]]:
        with self.lock:
            now = time.monotonic()
            buckets = [(self.requests, 1.0, "requests")]
            if self.tokens is not None:
                buckets.append((self.tokens, cost, "tokens"))
            for bucket, _, _ in buckets:
                bucket.refill(now)
            allowed = all(bucket.level >= need for bucket, need, _ in buckets)
            wait = 0.0
            if allowed:
                for bucket, need, _ in buckets:
                    bucket.level -= need
            else:
                wait = max((need - bucket.level) / bucket.rate for bucket, need, _ in buckets)
            headers: dict[str, str] = {}
            for bucket, _, kind in buckets:
                headers.update(bucket.headers(kind))
            status = 200 if allowed else 429
            if not allowed:
                headers["retry-after"] = str(max(1, math.ceil(wait)))
            self.log.append((now, status, cost))
            return status, headers


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that cut its connection (a cancelled attempt) is no news


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # The head and the body go out as two writes: without this, Nagle's algorithm holds the
    # body until the client's delayed ACK (40 ms a request on Linux).
    disable_nagle_algorithm = True
    limits: Limits

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def _answer(self, status: int, headers: dict[str, str], body: bytes) -> None:
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        if url.path == "/log":
            with self.limits.lock:
                body = json.dumps(self.limits.log).encode()
            self._answer(200, {"content-type": "application/json"}, body)
            return
        if url.path == "/config":
            rate = float(parse_qs(url.query)["rate"][0])
            with self.limits.lock:
                self.limits.requests.refill(time.monotonic())
                self.limits.requests.rate = rate
            self._answer(200, {}, b"ok")
            return
        self._work()

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        self.rfile.read(length)
        self._work()

    def _work(self) -> None:
        cost = float(self.headers.get("x-cost") or 0)
        status, headers = self.limits.judge(cost)
        self._answer(status, headers, b"ok" if status == 200 else b"rate limited")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rate", type=float, default=50.0)
    parser.add_argument("--burst", type=float, default=10.0)
    parser.add_argument("--tokens", type=float, default=None)
    parser.add_argument("--token-burst", type=float, default=500.0)
    args = parser.parse_args()
    Handler.limits = Limits(args.rate, args.burst, args.tokens, args.token_burst)
    server = Server(("127.0.0.1", 0), Handler)
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown).start())
    print(f"PORT {server.server_address[1]}", flush=True)
    server.serve_forever(poll_interval=0.05)
    server.server_close()
    sys.exit(0)


if __name__ == "__main__":
    main()
