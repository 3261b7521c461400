"""The server companions piece by piece: attempt header in and out, context, metric, answers."""

from __future__ import annotations

from typing import Any

import httpx
import httpx2
import pytest
from prometheus_client import CollectorRegistry

from retrymw import ConfigError, Retrier, RetryPolicy
from retrymw import httpx as retrymw_httpx
from retrymw import httpx2 as retrymw_httpx2
from retrymw.server import (
    ATTEMPT_HEADER,
    RetryLayerMiddleware,
    RetryLayerWSGIMiddleware,
    attempt_number,
    current_request,
)
from retrymw.testing import FakeClock
from tests.server.servers import serve_asgi, serve_wsgi

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(
    ("value", "number"),
    [
        ("1", 1),
        (b"3", 3),
        (" 2 ", 2),
        ("0", None),
        ("-1", None),
        ("1e3", None),
        ("\uff19", None),
        ("1234567", None),
        ("", None),
        (None, None),
    ],
)
def test_attempt_number_never_raises(value: Any, number: int | None) -> None:
    """Only 1 to 6 ASCII digits naming a number >= 1 are an attempt number."""
    assert attempt_number(value) == number


@pytest.mark.parametrize(
    ("module", "face"),
    [(httpx, retrymw_httpx), (httpx2, retrymw_httpx2)],
    ids=["httpx", "httpx2"],
)
def test_transports_send_the_attempt_number_only_when_asked(module: Any, face: Any) -> None:
    """attempt_header= sends 1 to 4 on the default policy's attempts, both flavours; no header
    by default."""
    seen: list[str | None] = []

    def handler(request: Any) -> Any:
        seen.append(request.headers.get(ATTEMPT_HEADER))
        return module.Response(503)

    clock = FakeClock()
    for header in (ATTEMPT_HEADER, None):
        transport = face.RetryTransport(
            module.MockTransport(handler), clock=clock, budget=None, attempt_header=header
        )
        with module.Client(transport=transport) as client:
            assert client.get("http://127.0.0.1/").status_code == 503
    assert seen == ["1", "2", "3", "4", None, None, None, None]


@pytest.mark.parametrize("bad", ["", "x y", "bad:name", 7])
def test_a_bad_attempt_header_is_refused(bad: Any) -> None:
    """The error names the field, the value and an example."""
    with pytest.raises(ConfigError) as caught:
        retrymw_httpx.AsyncRetryTransport(attempt_header=bad)
    assert caught.value.field == "attempt_header"
    assert "x-retrymw-attempt" in str(caught.value)


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ({"service": ""}, "service"),
        ({"service": "a", "attempt_header": " "}, "attempt_header"),
        ({"service": "a", "metrics": "yes"}, "metrics"),
    ],
)
def test_middleware_arguments_are_checked(arguments: dict[str, Any], field: str) -> None:
    """Both middlewares refuse a bad argument, naming it."""
    for middleware in (RetryLayerMiddleware, RetryLayerWSGIMiddleware):
        with pytest.raises(ConfigError) as caught:
            middleware(lambda *args: None, **arguments)  # type: ignore[arg-type]
        assert caught.value.field == field
    with pytest.raises(ConfigError) as caught:
        RetryLayerWSGIMiddleware(lambda *args: None, service="a", route="no")  # type: ignore[arg-type]
    assert caught.value.field == "route"


async def test_asgi_passes_other_scopes_through_and_serves_in_context() -> None:
    """A lifespan scope reaches the app untouched; an HTTP request's handler sees its request
    (`current_request`), and a plain ASGI app's requests count under the route _unknown."""
    registry = CollectorRegistry()
    seen: list[Any] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        seen.append((scope["type"], current_request()))
        if scope["type"] == "http":
            await send({"type": "http.response.start", "status": 204, "headers": []})
            await send({"type": "http.response.body", "body": b""})

    middleware = RetryLayerMiddleware(app, service="svc", registry=registry)
    sent: list[Any] = []

    async def send(message: Any) -> None:
        sent.append(message)

    async def receive() -> Any:
        return {"type": "http.request"}

    await middleware({"type": "lifespan"}, receive, send)
    scope = {"type": "http", "headers": [(b"x-retrymw-attempt", b"2")]}
    await middleware(scope, receive, send)
    assert seen[0] == ("lifespan", None)
    kind, inbound = seen[1]
    assert kind == "http"
    assert (inbound.service, inbound.attempt, inbound.final) == ("svc", 2, False)
    assert current_request() is None
    labels = {"retrymw_service": "svc", "retrymw_route": "_unknown", "retrymw_attempt": "retry"}
    assert registry.get_sample_value("retrymw_inbound_requests_total", labels) == 1.0
    # The route's other kinds exist from its first request, at 0 (rate() over the share).
    for kind in ("first", "unknown"):
        labels["retrymw_attempt"] = kind
        assert registry.get_sample_value("retrymw_inbound_requests_total", labels) == 0.0
    assert sent[0]["status"] == 204


def _failing_downstream() -> None:
    """A retrymw call that retries 3 times and gives up, as a handler's downstream call would."""

    def fails() -> None:
        raise ConnectionError("downstream down")

    Retrier(RetryPolicy(initial_delay=0.001), instruments=(), budget=None).call_sync(fails)


def _raw_wsgi(give_up: bool) -> Any:
    def app(environ: Any, start_response: Any) -> list[bytes]:
        if give_up:
            _failing_downstream()
        raise RuntimeError("handler bug")

    return app


def test_wsgi_answers_a_raising_handler_after_a_give_up(caplog: pytest.LogCaptureFixture) -> None:
    """A raw WSGI app that raises after a downstream give-up gets a 500 with x-should-retry:
    false from the middleware (the error logged); one that raises otherwise is the server's."""
    for give_up in (True, False):
        app = RetryLayerWSGIMiddleware(_raw_wsgi(give_up), service="w", metrics=False)
        with serve_wsgi(app) as url, httpx.Client() as client:
            answer = client.get(url)
        assert answer.status_code == 500
        assert answer.headers.get("x-should-retry") == ("false" if give_up else None)
    assert any("downstream call gave up" in record.getMessage() for record in caplog.records)


def test_a_route_reader_that_fails_leaves_the_response_alone() -> None:
    """The request is answered and counted under _unknown."""
    registry = CollectorRegistry()

    def app(environ: Any, start_response: Any) -> list[bytes]:
        start_response("200 OK", [("Content-Length", "2")])
        return [b"ok"]

    def broken(environ: Any) -> str | None:
        raise KeyError("route")

    middleware = RetryLayerWSGIMiddleware(app, service="w", registry=registry, route=broken)
    with serve_wsgi(middleware) as url, httpx.Client() as client:
        assert client.get(url, headers={ATTEMPT_HEADER: "1"}).text == "ok"
    labels = {"retrymw_service": "w", "retrymw_route": "_unknown", "retrymw_attempt": "first"}
    assert registry.get_sample_value("retrymw_inbound_requests_total", labels) == 1.0


async def test_asgi_re_raises_a_handler_error_without_a_give_up() -> None:
    """No downstream give-up: the error goes on unchanged, and nothing is sent."""

    async def app(scope: Any, receive: Any, send: Any) -> None:
        raise RuntimeError("handler bug")

    sent: list[Any] = []

    async def send(message: Any) -> None:
        sent.append(message)

    middleware = RetryLayerMiddleware(app, service="svc", metrics=False)
    with pytest.raises(RuntimeError):
        await middleware({"type": "http", "headers": []}, None, send)  # type: ignore[arg-type]
    assert sent == []


def test_route_labels_are_bounded() -> None:
    """Past MAX_ROUTES distinct templates, routes are counted as _other."""
    from retrymw.server._inbound import MAX_ROUTES, InboundRecorder

    registry = CollectorRegistry()
    recorder = InboundRecorder("svc", ATTEMPT_HEADER, registry, True)
    for index in range(MAX_ROUTES + 5):
        recorder.record(recorder.open(None), f"/r{index}")
    labels = {"retrymw_service": "svc", "retrymw_route": "_other", "retrymw_attempt": "unknown"}
    assert registry.get_sample_value("retrymw_inbound_requests_total", labels) == 5.0


def test_one_counter_per_registry() -> None:
    """Two middlewares on one registry share its counter instead of registering it twice."""
    registry = CollectorRegistry()
    for service in ("one", "two"):
        RetryLayerMiddleware(lambda *args: None, service=service, registry=registry)  # type: ignore[arg-type]


def test_an_asgi_app_behind_uvicorn_sees_its_request() -> None:
    """Through a real server: the handler's retrymw calls see the request being served."""
    seen: list[Any] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        seen.append(current_request())
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})

    with serve_asgi(RetryLayerMiddleware(app, service="u", metrics=False)) as url:
        assert httpx.get(url, headers={ATTEMPT_HEADER: "4"}).text == "ok"
    assert [(inbound.service, inbound.attempt) for inbound in seen] == [("u", 4)]


async def test_asgi_answers_a_raising_handler_after_a_give_up() -> None:
    """A bare ASGI app raising after a downstream give-up: the middleware sends a 500 with
    x-should-retry: false, then re-raises for the server to log."""

    async def app(scope: Any, receive: Any, send: Any) -> None:
        _failing_downstream()  # raises the downstream call's ConnectionError

    sent: list[Any] = []

    async def send(message: Any) -> None:
        sent.append(message)

    middleware = RetryLayerMiddleware(app, service="svc", metrics=False)
    with pytest.raises(ConnectionError):
        await middleware({"type": "http", "headers": []}, None, send)  # type: ignore[arg-type]
    assert sent[0]["status"] == 500
    assert (b"x-should-retry", b"false") in sent[0]["headers"]
    assert sent[1]["body"] == b"Internal Server Error"
