"""Chains of services for the layer tests: hops that call the next one through retrymw, and a leaf.

Every hop retries 3 times through retrymw's transport (attempt header on, no budget, 1-10 ms
backoff); with the companion, each service runs behind `RetryLayerMiddleware` (ASGI, Starlette)
or `RetryLayerWSGIMiddleware` (WSGI, Flask).
"""

from __future__ import annotations

import random
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import ExitStack, asynccontextmanager, contextmanager
from typing import Any

import flask
import httpx
from prometheus_client import CollectorRegistry
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from retrymw import RetryPolicy
from retrymw.httpx import AsyncRetryTransport, RetryTransport
from retrymw.server import ATTEMPT_HEADER, RetryLayerMiddleware, RetryLayerWSGIMiddleware
from tests.server.servers import serve_asgi, serve_wsgi

__all__ = ["HOP_POLICY", "Chain", "Leaf", "chain"]

HOP_POLICY = RetryPolicy(attempts=3, initial_delay="1ms", max_delay="10ms")


class Leaf:
    """The bottom service's behaviour: fails every request, or each with probability ``p``
    (drawn from a seeded generator, in arrival order); counts what it received."""

    def __init__(self, p: float = 1.0, seed: int = 16) -> None:
        self.p = p
        self.rng = random.Random(seed)
        self.lock = threading.Lock()
        self.requests = 0

    def status(self) -> int:
        with self.lock:
            self.requests += 1
            return 503 if self.rng.random() < self.p else 200


def _asgi_leaf(leaf: Leaf) -> Any:
    async def endpoint(request: Request) -> Response:
        return Response(b"leaf", status_code=leaf.status())

    return Starlette(routes=[Route("/items/{item}", endpoint)])


def _asgi_hop(downstream: str, policy: RetryPolicy, raises: bool) -> Any:
    clients: list[httpx.AsyncClient] = []

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        transport = AsyncRetryTransport(
            policy=policy, budget=None, instruments=(), attempt_header=ATTEMPT_HEADER
        )
        async with httpx.AsyncClient(transport=transport) as client:
            clients.append(client)
            yield

    async def endpoint(request: Request) -> Response:
        answer = await clients[0].get(f"{downstream}items/{request.path_params['item']}")
        if raises:
            answer.raise_for_status()
        return Response(answer.content, status_code=answer.status_code)

    return Starlette(routes=[Route("/items/{item}", endpoint)], lifespan=lifespan)


def _wsgi_leaf(leaf: Leaf) -> Any:
    app = flask.Flask("leaf")

    @app.get("/items/<item>")
    def endpoint(item: str) -> flask.Response:
        return flask.Response(b"leaf", status=leaf.status())

    return app


def _wsgi_hop(downstream: str, policy: RetryPolicy, raises: bool, stack: ExitStack) -> Any:
    transport = RetryTransport(
        policy=policy, budget=None, instruments=(), attempt_header=ATTEMPT_HEADER
    )
    client = stack.enter_context(httpx.Client(transport=transport))
    app = flask.Flask("hop")

    @app.get("/items/<item>")
    def endpoint(item: str) -> flask.Response:
        answer = client.get(f"{downstream}items/{item}")
        if raises:
            answer.raise_for_status()
        return flask.Response(answer.content, status=answer.status_code)

    return app


class Chain:
    """A running chain: the top service's URL, the leaf, each service's registry by name."""

    def __init__(self, url: str, leaf: Leaf, registries: dict[str, CollectorRegistry]) -> None:
        self.url = url
        self.leaf = leaf
        self.registries = registries

    def inbound(self, service: str, attempt: str) -> float:
        """How many requests ``service`` received as ``attempt`` (first, retry, unknown)."""
        value = self.registries[service].get_sample_value(
            "retrymw_inbound_requests_total",
            {
                "retrymw_service": service,
                "retrymw_route": "/items/{item}" if self.asgi else "/items/<item>",
                "retrymw_attempt": attempt,
            },
        )
        return value or 0.0

    asgi = True


@contextmanager
def chain(
    hops: int,
    leaf: Leaf,
    *,
    kind: str = "asgi",
    companion: bool = True,
    policies: list[RetryPolicy] | None = None,
    raises: bool = False,
) -> Iterator[Chain]:
    """Start ``hops`` services, the last one ``leaf``; yield the running `Chain`.

    ``policies`` gives each calling hop's policy, top first (``HOP_POLICY`` for all by default).
    """
    names = [chr(ord("a") + index) for index in range(hops)]
    policies = policies or [HOP_POLICY] * (hops - 1)
    registries = {name: CollectorRegistry() for name in names}
    with ExitStack() as stack:
        url = ""
        for position, name in reversed(list(enumerate(names))):
            if kind == "asgi":
                app = (
                    _asgi_leaf(leaf)
                    if position == hops - 1
                    else _asgi_hop(url, policies[position], raises)
                )
                if companion:
                    app = RetryLayerMiddleware(app, service=name, registry=registries[name])
                url = stack.enter_context(serve_asgi(app))
            else:
                flask_app = (
                    _wsgi_leaf(leaf)
                    if position == hops - 1
                    else _wsgi_hop(url, policies[position], raises, stack)
                )
                wsgi: Any = flask_app.wsgi_app
                if companion:
                    wsgi = RetryLayerWSGIMiddleware(wsgi, service=name, registry=registries[name])
                flask_app.wsgi_app = wsgi
                url = stack.enter_context(serve_wsgi(flask_app))
        running = Chain(url, leaf, registries)
        running.asgi = kind == "asgi"
        yield running
