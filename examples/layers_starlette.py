"""A Starlette service that retries at one layer: the server companion and the attempt header.

The service "orders" calls its upstream through a retrying transport that sends the attempt
number; RetryLayerMiddleware counts the requests it receives (first attempt or retry, per route)
and answers with x-should-retry: false when its upstream call gave up after retrying, so that
its callers do not multiply the attempts. FastAPI apps take the same middleware.

Run: python examples/layers_starlette.py
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
import uvicorn
from _upstream import upstream_url
from prometheus_client import CollectorRegistry
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from retrymw import RetryPolicy
from retrymw.httpx import ATTEMPTS_EXTENSION, AsyncRetryTransport, RetryTransport
from retrymw.server import ATTEMPT_HEADER, INBOUND_METRIC, RetryLayerMiddleware

POLICY = RetryPolicy(attempts=3, initial_delay="50ms", deadline="5s")


def build(upstream: str, registry: CollectorRegistry) -> RetryLayerMiddleware:
    """The "orders" service, behind the companion."""
    clients: list[httpx.AsyncClient] = []

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        transport = AsyncRetryTransport(policy=POLICY, attempt_header=ATTEMPT_HEADER)
        async with httpx.AsyncClient(transport=transport, timeout=5.0) as client:
            clients.append(client)
            yield

    async def order(request: Request) -> Response:
        answer = await clients[0].get(upstream)
        return Response(answer.content, status_code=answer.status_code)

    app = Starlette(routes=[Route("/orders/{id}", order)], lifespan=lifespan)
    return RetryLayerMiddleware(app, service="orders", registry=registry)


def main() -> None:
    registry = CollectorRegistry()
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(build(upstream_url(), registry), log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    for _ in range(500):  # wait for the server, at most 5 s
        if server.started:
            break
        time.sleep(0.01)
    url = f"http://127.0.0.1:{sock.getsockname()[1]}/orders/"
    try:
        # The caller retries too, and says which attempt each request is.
        transport = RetryTransport(policy=POLICY, attempt_header=ATTEMPT_HEADER)
        with httpx.Client(transport=transport, timeout=10.0) as client:
            for number in range(3):
                response = client.get(f"{url}{number}")
                attempts = response.extensions[ATTEMPTS_EXTENSION]
                print(f"orders: {response.status_code} after {attempts} attempt(s)")
        for kind in ("first", "retry"):
            labels = {
                "retrymw_service": "orders",
                "retrymw_route": "/orders/{id}",
                "retrymw_attempt": kind,
            }
            print(f"inbound {kind}: {registry.get_sample_value(INBOUND_METRIC, labels)}")
    finally:
        server.should_exit = True
        thread.join(timeout=5)


if __name__ == "__main__":
    main()
