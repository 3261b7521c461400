"""Only our own layer sets the attempt count: an SDK retry count from outside is never trusted.

A service that forwards its caller's headers hands its transport the caller's
``x-stainless-retry-count``. The transport must not take that for the SDK above it retrying
(which would send the request once): a count counts only when the SDK in this process set it,
that is when the same transport, in the same task or thread and the same served request, has
just sent the SDK's previous attempt of the request, which failed (DESIGN §12, §15).
"""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from typing import Any

import flask
import httpx
import httpx2
import openai
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from retrymw import RetryPolicy
from retrymw._http.sdk import parse_count
from retrymw.httpx import AsyncRetryTransport, RetryTransport
from retrymw.httpx2 import AsyncRetryTransport as Httpx2AsyncRetryTransport
from retrymw.server import RetryLayerMiddleware, RetryLayerWSGIMiddleware
from retrymw.testing import FakeClock
from tests.http_server import FlakyServer, Received
from tests.sdk.fake_api import OPENAI_KEY, openai_error
from tests.server.servers import serve_asgi, serve_wsgi

COUNT = "x-stainless-retry-count"
POLICY = RetryPolicy(attempts=3, initial_delay="1ms", max_delay="10ms")
WAIT = 30.0


@pytest.fixture
def upstream() -> Iterator[FlakyServer]:
    """The scripted service below, on 127.0.0.1, stopped at teardown."""
    server = FlakyServer()
    yield server
    server.stop()


def counts(received: list[Received]) -> list[str]:
    """The retry count each request arrived with, in order."""
    return [
        next((value for name, value in r.headers.items() if name.lower() == COUNT), "-")
        for r in received
    ]


def forwarded(headers: Any) -> dict[str, str]:
    """What a relaying handler copies from its inbound request: the SDK's headers."""
    return {
        name: value for name, value in headers.items() if name.lower().startswith("x-stainless")
    }


def asgi_relay(downstream: str, companion: bool) -> Any:
    """A Starlette service that relays GET /relay to ``downstream`` with its caller's headers."""
    clients: list[httpx.AsyncClient] = []

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        transport = AsyncRetryTransport(policy=POLICY, budget=None, instruments=())
        async with httpx.AsyncClient(transport=transport) as client:
            clients.append(client)
            yield

    async def relay(request: Request) -> Response:
        answer = await clients[0].get(downstream, headers=forwarded(request.headers))
        return Response(answer.content, status_code=answer.status_code)

    app = Starlette(routes=[Route("/relay", relay)], lifespan=lifespan)
    if not companion:
        return app
    return RetryLayerMiddleware(app, service="relay", registry=CollectorRegistry())


def wsgi_relay(downstream: str, client: httpx.Client, companion: bool) -> Any:
    """The Flask twin of `asgi_relay`, on a sync transport."""
    app = flask.Flask("relay")

    @app.get("/relay")
    def relay() -> flask.Response:
        answer = client.get(downstream, headers=forwarded(flask.request.headers))
        return flask.Response(answer.content, status=answer.status_code)

    if not companion:
        return app
    return RetryLayerWSGIMiddleware(app, service="relay", registry=CollectorRegistry())


@pytest.mark.parametrize(
    "companion", [pytest.param(False, id="bare"), pytest.param(True, id="companion")]
)
def test_a_relayed_retry_count_is_not_the_sdk_retrying_asgi(
    upstream: FlakyServer, companion: bool
) -> None:
    """A caller's retry with count 1, relayed by an ASGI service to a 503, 503, 200 upstream,
    is retried by the service's transport: 200 after 3 requests, numbered 0, 1, 2 (it was
    sent once, and answered 503, when the forwarded count was taken for the SDK's)."""
    url = upstream.script(503, 503, 200)
    with serve_asgi(asgi_relay(url, companion)) as service:
        answer = httpx.get(f"{service}relay", headers={COUNT: "1"}, timeout=WAIT)
    assert (answer.status_code, upstream.served(url)) == (200, 3)
    assert counts(upstream.received(url)) == ["0", "1", "2"]


@pytest.mark.parametrize(
    "companion", [pytest.param(False, id="bare"), pytest.param(True, id="companion")]
)
def test_a_relayed_retry_count_is_not_the_sdk_retrying_wsgi(
    upstream: FlakyServer, companion: bool
) -> None:
    """The same through a Flask service on werkzeug and a sync transport."""
    url = upstream.script(503, 503, 200)
    transport = RetryTransport(policy=POLICY, budget=None, instruments=())
    with (
        httpx.Client(transport=transport) as client,
        serve_wsgi(wsgi_relay(url, client, companion)) as service,
    ):
        answer = httpx.get(f"{service}relay", headers={COUNT: "2"}, timeout=WAIT)
    assert (answer.status_code, upstream.served(url)) == (200, 3)
    assert counts(upstream.received(url)) == ["0", "1", "2"]


def _mock(statuses: list[int], seen: list[str]) -> httpx.MockTransport:
    """Answers with ``statuses`` in turn (the last repeats), recording each request's count."""

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers.get(COUNT, "-"))
        return httpx.Response(statuses[min(len(seen), len(statuses)) - 1])

    return httpx.MockTransport(answer)


def _sync_client(statuses: list[int], seen: list[str], clock: FakeClock) -> httpx.Client:
    transport = RetryTransport(
        _mock(statuses, seen), policy=POLICY, budget=None, clock=clock, instruments=()
    )
    return httpx.Client(transport=transport)


def test_a_count_after_an_answered_request_is_not_a_retry(clock: FakeClock) -> None:
    """A thread that sent count 0 and got a 200 (a pooled worker's earlier request) then
    relays count 1 to the same URL: the SDK never retries an answered request, so that count
    is foreign and the transport retries it (3 requests, not 1)."""
    seen: list[str] = []
    with _sync_client([200, 503, 503, 200], seen, clock) as client:
        assert client.get("http://api.test/v1", headers={COUNT: "0"}).status_code == 200
        assert client.get("http://api.test/v1", headers={COUNT: "1"}).status_code == 200
    assert seen == ["0", "0", "1", "2"]


def test_a_count_is_trusted_only_as_the_next_attempt_of_the_same_request(
    clock: FakeClock,
) -> None:
    """After a failed count-0 request to one URL, count 1 to another URL, count 2 to the first
    or count 1 through another transport are foreign: each is retried (3 requests); count 1
    to the same URL right after is the SDK retrying, sent once."""
    seen: list[str] = []
    other_seen: list[str] = []
    with (
        _sync_client([503], seen, clock) as client,
        _sync_client([503], other_seen, clock) as other,
    ):
        client.get("http://api.test/a", headers={COUNT: "0"})  # 3 attempts, all 503
        client.get("http://api.test/b", headers={COUNT: "1"})  # another URL: 3 attempts
        client.get("http://api.test/a", headers={COUNT: "0"})
        client.get("http://api.test/a", headers={COUNT: "2"})  # skips 1: 3 attempts
        client.get("http://api.test/a", headers={COUNT: "0"})
        other.get("http://api.test/a", headers={COUNT: "1"})  # another transport: 3 attempts
        client.get("http://api.test/a", headers={COUNT: "0"})
        client.get("http://api.test/a", headers={COUNT: "1"})  # the SDK's retry: once
    assert seen == ["0", "1", "2"] * 6 + ["1"]
    assert other_seen == ["0", "1", "2"]


def _served(app: Any, headers: dict[str, str]) -> int:
    """Serve one GET /relay through the WSGI ``app`` in this thread; return the status."""
    environ = {
        "REQUEST_METHOD": "GET",
        "PATH_INFO": "/relay",
        "SERVER_NAME": "relay.test",
        "SERVER_PORT": "80",
        "wsgi.url_scheme": "http",
        **{"HTTP_" + name.upper().replace("-", "_"): value for name, value in headers.items()},
    }
    status: list[str] = []
    body = app(environ, lambda line, headers, *rest: status.append(line))
    b"".join(body)
    return int(status[0][:3])


def test_the_companion_starts_every_served_request_afresh(clock: FakeClock) -> None:
    """One worker thread serves two requests in turn (a sync server's pool): the first one's
    own SDK call fails at count 0; the second relays its caller's count 1 to the same URL.
    Served by the companion, that count belongs to another request, so it is retried."""
    seen: list[str] = []
    statuses = [503, 503, 503, 503, 503, 200]

    def handle(environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        inbound = environ.get("HTTP_" + COUNT.upper().replace("-", "_"))
        headers = {COUNT: inbound if inbound is not None else "0"}
        answer = client.get("http://api.test/v1", headers=headers)
        start_response(f"{answer.status_code} Relayed", [])
        return [answer.content]

    app = RetryLayerWSGIMiddleware(handle, service="relay", metrics=False)
    with _sync_client(statuses, seen, clock) as client:
        assert _served(app, {}) == 503  # its own call: count 0, 3 attempts, all 503
        assert _served(app, {COUNT: "1"}) == 200  # relayed: 3 attempts, 503 503 200
    assert seen == ["0", "1", "2", "0", "1", "2"]


@pytest.mark.anyio
async def test_the_sdk_retrying_in_a_task_is_still_recognised(
    upstream: FlakyServer, clock: FakeClock
) -> None:
    """In one task, a relayed count 1 is retried (3 requests), and then the async OpenAI
    SDK's own retries (max_retries=2) are still recognised: its first request gets 3
    attempts and each of its 2 retries is sent once."""
    relayed = upstream.script(503, 503, 200)
    api = upstream.script(openai_error(503, {"retry-after-ms": "1"}))
    transport = Httpx2AsyncRetryTransport(policy=POLICY, budget=None, clock=clock, instruments=())
    async with httpx2.AsyncClient(transport=transport) as http_client:
        answer = await http_client.get(relayed, headers={COUNT: "1"})
        assert answer.status_code == 200
        sdk = openai.AsyncOpenAI(
            api_key=OPENAI_KEY, base_url=api, max_retries=2, http_client=http_client
        )
        with pytest.raises(openai.InternalServerError):
            await sdk.chat.completions.create(
                model="gpt-test",
                messages=[{"role": "user", "content": "ping"}],
                extra_headers={"Idempotency-Key": "k-1"},
            )
    assert counts(upstream.received(relayed)) == ["0", "1", "2"]
    assert counts(upstream.received(api)) == ["0", "1", "2", "1", "2"]


def test_threads_keep_their_own_sdk_attempts(clock: FakeClock) -> None:
    """Two threads on one transport, interleaved, each relaying a count 1 (retried: 3
    requests) and then running an SDK loop (count 0, then its retry, count 1): each thread's
    retry is recognised (sent once) by its own predecessor only."""
    seen: list[str] = []
    barrier = threading.Barrier(2, timeout=WAIT)
    with _sync_client([503], seen, clock) as client:

        def worker(path: str) -> None:
            client.get(f"http://api.test/{path}", headers={COUNT: "1"})
            client.get(f"http://api.test/{path}", headers={COUNT: "0"})
            barrier.wait()  # both threads' count-0 calls are done before either retries
            client.get(f"http://api.test/{path}", headers={COUNT: "1"})

        threads = [threading.Thread(target=worker, args=(path,)) for path in ("a", "b")]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=WAIT)
    assert sorted(seen) == sorted(["0", "1", "2"] * 4 + ["1", "1"])


@settings(deadline=None, max_examples=200)
@given(value=st.text(max_size=40) | st.from_regex(r"\s*[0-9]{1,8}\s*", fullmatch=True))
def test_a_retry_count_is_read_strictly(value: str) -> None:
    """A header value is a count only as 1 to 5 ASCII digits; anything else, huge values
    included, is not a count (the header is then left alone), and nothing raises."""
    count = parse_count(value)
    if count is None:
        assert not (0 < len(value) < 6 and value.isascii() and value.isdigit())
    else:
        assert str(count) == value.lstrip("0").rjust(1, "0")
        assert 0 <= count <= 99_999
    assert parse_count(value * 100_000) is None  # 0 or >= 100 000 characters: never a count
