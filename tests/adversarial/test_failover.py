"""Issue 33, failover: ``failover=[origin, ...]`` on the transports, against real loopback servers.

An idempotent request whose primary origin's circuit is open, or whose retries there ended on a
retryable answer, goes to the next origin (same path and query, one circuit per origin); it goes
back to the primary as soon as the primary's circuit closes. A non-retryable answer and a POST
without ``Idempotency-Key`` never leave the primary. Then the LLM failure catalogue, through the
real openai SDK on httpx2 and through plain httpx, with a fallback origin declared.

The outage goal is scaled down from the issue's (503 for 8 s in a 20 s run at 20 calls/s, the
last 5 s checked) to 503 for 2.5 s in a 7 s run at 20 calls/s, the last 2 s checked, with a
breaker whose ``recovery_timeout`` (0.25 s) is scaled to match.
"""

from __future__ import annotations

import dataclasses
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import openai
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import retrymw
from retrymw import CallFinished, CircuitBreaker, ConfigError, Origin, RetryPolicy
from retrymw.httpx import AsyncRetryTransport, RetryTransport
from retrymw.httpx import TransportCircuitOpenError as HttpxCircuitOpen
from retrymw.instrumentation import _names as names
from retrymw.stores import SQLiteStore
from retrymw.testing import RecordingInstrument
from tests.http_server import FlakyServer, Step
from tests.sdk.fake_api import (
    OPENAI_KEY,
    anthropic_stream,
    openai_completion,
    openai_error,
    openai_stream,
)

MESSAGES: list[Any] = [{"role": "user", "content": "ping"}]
KEY = {"Idempotency-Key": "key-1"}


# -- a loopback origin that is down (503) or up, switched by the test ---------------------------


@dataclass(frozen=True)
class Seen:
    """A request as an origin saw it: method, path, when (``time.monotonic``)."""

    method: str
    path: str
    at: float


class _OriginHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _OriginServer

    def log_message(self, format: str, *args: object) -> None:
        """Stay quiet."""

    def _serve(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", "0")))
        server = self.server
        with server.lock:
            server.seen.append(Seen(self.command, self.path, time.monotonic()))
            status = 200 if server.healthy else server.down_status
        body = server.name.encode() if status == 200 else b"down"
        self.send_response(status)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_PUT = _serve


class _OriginServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, name: str, healthy: bool, down_status: int = 503) -> None:
        super().__init__(("127.0.0.1", 0), _OriginHandler)
        self.name = name
        self.healthy = healthy
        self.down_status = down_status
        self.lock = threading.Lock()
        self.seen: list[Seen] = []
        self.url = f"http://127.0.0.1:{self.server_address[1]}"
        self.thread = threading.Thread(
            target=self.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self.thread.start()

    def set_healthy(self, healthy: bool) -> None:
        with self.lock:
            self.healthy = healthy

    def requests(self) -> list[Seen]:
        with self.lock:
            return list(self.seen)

    def stop(self) -> None:
        self.shutdown()
        self.server_close()
        self.thread.join(timeout=5)


@pytest.fixture
def origin() -> Iterator[Callable[[str, bool], _OriginServer]]:
    """Starts a loopback origin, ``origin(name, healthy)``; every one is stopped at teardown."""
    started: list[_OriginServer] = []

    def start(name: str, healthy: bool) -> _OriginServer:
        started.append(_OriginServer(name, healthy))
        return started[-1]

    yield start
    for server in started:
        server.stop()


@pytest.fixture
def primary(origin: Callable[[str, bool], _OriginServer]) -> _OriginServer:
    """The primary origin, down (503) until the test brings it up."""
    return origin("primary", False)


@pytest.fixture
def secondary(origin: Callable[[str, bool], _OriginServer]) -> _OriginServer:
    """The secondary origin, healthy."""
    return origin("secondary", True)


def _policy(**changes: Any) -> RetryPolicy:
    settings: dict[str, Any] = {"attempts": 2, "initial_delay": 0.01, "deadline": 10.0}
    settings.update(changes)
    return RetryPolicy(**settings)


# -- the outage goal ----------------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_an_outage_fails_over_and_traffic_returns_to_the_primary(
    primary: _OriginServer, secondary: _OriginServer
) -> None:
    """Primary 503 for 2.5 s then healthy, 20 GETs/s for 7 s: at least 99% succeed, and at
    least 90% of the last 2 s are served by the primary (its circuit closed by a real probe)."""
    transport = AsyncRetryTransport(
        policy=_policy(),
        breaker=CircuitBreaker(failure_threshold=3, recovery_timeout=0.25),
        failover=[secondary.url],
    )
    results: list[tuple[float, int, str]] = []  # (sent at, status, origin)
    outage, run, rate = 2.5, 7.0, 20
    async with httpx.AsyncClient(transport=transport, timeout=10.0) as client:

        async def one(path: str) -> None:
            sent = time.monotonic()
            try:
                response = await client.get(f"{primary.url}{path}?n=1")
            except httpx.HTTPError:
                results.append((sent, 0, ""))
                return
            results.append((sent, response.status_code, response.extensions["retrymw.origin"]))

        start = time.monotonic()
        async with anyio.create_task_group() as group:
            for n in range(int(run * rate)):
                # The load generator's pacing: a call every 50 ms, on the clock.
                await anyio.sleep(max(0.0, start + n / rate - time.monotonic()))
                if time.monotonic() - start >= outage:
                    primary.set_healthy(True)
                group.start_soon(one, f"/v1/things/{n}")
    ok = sum(1 for _, status, _ in results if status == 200)
    last = [origin for sent, _, origin in results if sent - start >= run - 2.0]
    on_primary = sum(1 for origin in last if origin == primary.url)
    assert ok / len(results) >= 0.99, (ok, len(results))
    assert last
    assert on_primary / len(last) >= 0.90, (on_primary, len(last))
    # The secondary served the outage with the same path and query.
    assert any(seen.path.endswith("?n=1") for seen in secondary.requests())
    assert len(secondary.requests()) >= 10


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio", "trio"])
async def test_a_post_without_idempotency_key_never_reaches_the_secondary(
    primary: _OriginServer, secondary: _OriginServer
) -> None:
    """During the primary's outage, POSTs without ``Idempotency-Key`` get the primary's 503 or
    its open circuit, never the secondary; the same POST with a key fails over."""
    transport = AsyncRetryTransport(
        policy=_policy(),
        breaker=CircuitBreaker(failure_threshold=2, recovery_timeout=30.0),
        failover=[secondary.url],
    )
    async with httpx.AsyncClient(transport=transport, timeout=10.0) as client:
        outcomes = [await _post(client, f"{primary.url}/v1/orders") for _ in range(6)]
        keyed = await client.post(f"{primary.url}/v1/orders", content=b"{}", headers=KEY)
    assert set(outcomes) <= {503, "open"}
    assert "open" in outcomes
    # The keyed POST is the only request the secondary ever saw.
    assert [seen.method for seen in secondary.requests()] == ["POST"]
    assert keyed.status_code == 200
    assert keyed.extensions["retrymw.origin"] == secondary.url


async def _post(client: httpx.AsyncClient, url: str) -> int | str:
    """A POST without key: its status, or ``"open"`` when its circuit refused it."""
    try:
        response = await client.post(url, content=b"{}")
    except HttpxCircuitOpen:
        return "open"
    return response.status_code


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
def test_a_non_retryable_answer_never_fails_over(
    status: int, primary: _OriginServer, secondary: _OriginServer
) -> None:
    """A 400, 401, 403, 404 (or 422) from the primary is the answer: the secondary sees nothing."""
    primary.down_status = status
    transport = RetryTransport(policy=_policy(), failover=[secondary.url])
    with httpx.Client(transport=transport, timeout=10.0) as client:
        response = client.get(f"{primary.url}/v1/things")
    assert response.status_code == status
    assert response.extensions["retrymw.origin"] == primary.url
    assert secondary.requests() == []


def test_the_sync_transport_fails_over_from_a_dead_primary(secondary: _OriginServer) -> None:
    """Nothing listens on the primary: the connection is refused, the secondary answers, and
    the answering origin is named without the query."""
    dead = _dead_url()
    transport = RetryTransport(policy=_policy(), failover=[secondary.url])
    with httpx.Client(transport=transport, timeout=10.0) as client:
        response = client.get(f"{dead}/v1/things?token=s3cret")
    assert response.text == "secondary"
    assert response.extensions["retrymw.origin"] == secondary.url
    assert "s3cret" not in response.extensions["retrymw.origin"]
    assert [seen.path for seen in secondary.requests()] == ["/v1/things?token=s3cret"]


def test_origins_in_order_each_with_its_own_circuit(
    primary: _OriginServer,
    secondary: _OriginServer,
    origin: Callable[[str, bool], _OriginServer],
) -> None:
    """Two origins down: the request goes on to the third; each origin's circuit is its own
    (the breaker's `PerTarget` holds one per origin)."""
    third = origin("third", True)
    secondary.set_healthy(False)
    transport = RetryTransport(
        policy=_policy(attempts=1),
        breaker=CircuitBreaker(failure_threshold=1, recovery_timeout=30.0),
        failover=[secondary.url, Origin(third.url)],
    )
    with httpx.Client(transport=transport, timeout=10.0) as client:
        first = client.get(f"{primary.url}/x")
        second = client.get(f"{primary.url}/x")
    assert first.text == second.text == "third"
    # The second call found both circuits open: neither down origin saw it.
    assert len(primary.requests()) == len(secondary.requests()) == 1
    circuits = transport.retrier.breaker
    assert isinstance(circuits, retrymw.PerTarget)
    states = {
        target: getattr(stats, "state", None) for target, stats in circuits.statistics().items()
    }
    assert states == {
        primary.url.removeprefix("http://"): "open",
        secondary.url.removeprefix("http://"): "open",
        third.url.removeprefix("http://"): "closed",
    }


def test_the_deadline_bounds_every_origin(providers: tuple[FlakyServer, FlakyServer]) -> None:
    """The next origin gets only what the request's deadline leaves: the primary spends 0.6 s
    of a 1 s deadline on its 503, so a secondary answering in 0.7 s is cut off by the
    deadline (a timeout) instead of answering."""
    main, other = providers
    url = main.script(Step(503, delay=0.6))
    later = other.script(Step(200, delay=0.7))
    transport = RetryTransport(
        policy=_policy(attempts=1, deadline=1.0), failover=[later.split("/s/")[0]]
    )
    with httpx.Client(transport=transport, timeout=10.0) as client:
        started = time.monotonic()
        with pytest.raises(httpx.TimeoutException):
            client.get(url)
        assert time.monotonic() - started < 5.0
    assert other.served(later) == 1


def test_a_failed_over_answer_gives_its_connection_back(
    providers: tuple[FlakyServer, FlakyServer],
) -> None:
    """The primary's 503, left for the next origin, is read before it is closed: ten
    requests in a row reuse one connection to the primary instead of opening ten."""
    main, other = providers
    url = main.script(openai_error(503))
    answer = other.script(openai_completion("fallback"))
    transport = RetryTransport(policy=_policy(attempts=1), failover=[other.base_url])
    with httpx.Client(transport=transport, timeout=10.0) as client:
        for _ in range(10):
            assert client.get(url).status_code == 200
    assert main.served(url) == other.served(answer) == 10
    assert main.accepted == 1


def test_a_resumable_request_keeps_one_record_per_origin(
    primary: _OriginServer, secondary: _OriginServer, tmp_path: Path
) -> None:
    """With a store, a keyed request's attempts are kept per origin: the primary's spent
    attempts do not use up the secondary's (which would refuse it unsent)."""
    transport = RetryTransport(
        policy=_policy(),
        store=SQLiteStore(tmp_path / "calls.db"),
        failover=[secondary.url],
    )
    with httpx.Client(transport=transport, timeout=10.0) as client:
        response = client.put(f"{primary.url}/v1/orders/7", content=b"{}", headers=KEY)
    assert response.text == "secondary"
    assert len(primary.requests()) == 2
    assert len(secondary.requests()) == 1


def test_telemetry_says_failover_and_names_each_origin(
    primary: _OriginServer, secondary: _OriginServer
) -> None:
    """The primary's call ends with outcome ``failover`` (a bounded label value), not a
    failure; the secondary's call is a call of its own, its target the secondary's host; a
    call that ends the request (no origin left) keeps its real outcome."""
    recorder = RecordingInstrument()
    transport = RetryTransport(
        policy=_policy(), failover=[secondary.url], instruments=[recorder], budget=None
    )
    with httpx.Client(transport=transport, timeout=10.0) as client:
        assert client.get(f"{primary.url}/x").text == "secondary"
        secondary.set_healthy(False)
        assert client.get(f"{primary.url}/x").status_code == 503
    ends = [(e.target, e.outcome) for e in recorder.events if isinstance(e, CallFinished)]
    here, there = primary.url.removeprefix("http://"), secondary.url.removeprefix("http://")
    assert ends == [
        (here, "failover"),
        (there, "success"),
        (here, "failover"),
        (there, "exhausted"),
    ]
    assert "failover" in names.OUTCOMES
    # The request as a whole: the origins it was sent to, and the one that answered.
    requests = [
        (e.tried, e.answered, e.exception)
        for e in recorder.events
        if isinstance(e, retrymw.FailoverFinished)
    ]
    both = (primary.url, secondary.url)
    assert requests == [(both, secondary.url, None), (both, secondary.url, None)]
    assert len(recorder.of_type(retrymw.FailoverStarted)) == 2


@pytest.mark.parametrize(
    "value",
    [
        pytest.param("https://fallback.example.com", id="a-string-not-a-list"),
        pytest.param(["ftp://fallback.example.com"], id="scheme"),
        pytest.param(["https://fallback.example.com/v1"], id="path"),
        pytest.param(["https://fallback.example.com?x=1"], id="query"),
        pytest.param([42], id="not-a-url"),
    ],
)
def test_a_bad_failover_argument_names_the_field(value: object) -> None:
    """``failover`` that is not a list of origins is refused, naming the field and an example."""
    with pytest.raises(ConfigError, match=r"^failover.*expected e\.g\. "):
        RetryTransport(failover=value)  # type: ignore[arg-type]


def test_credentials_in_an_origin_are_refused_without_being_shown() -> None:
    """An origin URL carrying a password is refused; the error never shows it."""
    with pytest.raises(ConfigError) as caught:
        Origin("https://user:hunter2@fallback.example.com")
    assert "hunter2" not in str(caught.value)
    with pytest.raises(ConfigError, match="rewrite"):
        Origin("https://fallback.example.com", rewrite="gpt-4o")  # type: ignore[arg-type]
    assert retrymw.Origin.__module__ == "retrymw"


def _dead_url() -> str:
    """A loopback URL on which nothing listens (a port just released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


# -- the LLM failure catalogue ------------------------------------------------------------------


def _error(status: int, code: str, kind: str = "invalid_request_error") -> Step:
    body = {"error": {"message": f"scripted {code}", "type": kind, "code": code}}
    return Step(status, {"content-type": "application/json"}, json.dumps(body).encode())


def _slow(step: Step, stall: float) -> Step:
    return dataclasses.replace(step, stall=stall)


#: name: the primary's steps (none: nothing listens) and what the call ends with: the answer of
#: ``"primary"`` or ``"fallback"``, or the error status the caller gets (the fallback unasked).
CATALOGUE = [
    pytest.param(
        (openai_error(429, {"retry-after": "1"}), openai_completion("primary")),
        "primary",
        id="429-retry-after",
    ),
    pytest.param((openai_error(429),), "fallback", id="429-no-retry-after"),
    pytest.param((openai_error(500), openai_completion("primary")), "primary", id="500-once"),
    pytest.param((openai_error(503),), "fallback", id="503-persistent"),
    pytest.param((Step(drop=True),), "fallback", id="reset-before-headers"),
    pytest.param((Step(delay=5.0),), "fallback", id="no-response"),
    pytest.param((_slow(openai_completion("primary"), 0.3),), "primary", id="slow-first-token"),
    pytest.param(
        (dataclasses.replace(openai_completion("primary"), truncate=True),),
        "fallback",
        id="answer-cut-midway",
    ),
    pytest.param((_slow(openai_completion("primary"), 5.0),), "fallback", id="answer-stalled"),
    pytest.param((_error(400, "context_length_exceeded"),), 400, id="400-context-length"),
    pytest.param((_error(400, "content_filter"),), 400, id="400-content-filter"),
    pytest.param((), "fallback", id="primary-down"),
]


def _use_model(model: str) -> Any:
    """The recipe's rewrite: the same chat request, for another model."""

    def rewrite(request: Any) -> Any:
        body = json.loads(request.content)
        body["model"] = model
        headers = {k: v for k, v in request.headers.items() if k != "content-length"}
        return type(request)(
            request.method,
            request.url,
            headers=headers,
            json=body,
            extensions=request.extensions,
        )

    return rewrite


@pytest.fixture
def providers() -> Iterator[tuple[FlakyServer, FlakyServer]]:
    """The primary provider and the fallback (its first script answers), stopped at teardown."""
    main, fallback = FlakyServer(), FlakyServer()
    yield main, fallback
    main.stop()
    fallback.stop()


def _catalogue_setup(
    providers: tuple[FlakyServer, FlakyServer], steps: tuple[Step, ...]
) -> tuple[str, str, FlakyServer]:
    """The primary's base URL (a dead one for no steps), the fallback's script URL, and the
    fallback server; both scripts at the same path, as failover keeps the path."""
    main, fallback = providers
    base = main.script(*steps) if steps else f"{_dead_url()}/s/k1"
    answer = fallback.script(openai_completion("fallback"))
    assert base.rsplit("/", 1)[-1] == answer.rsplit("/", 1)[-1] == "k1"
    return base, answer, fallback


_CATALOGUE_POLICY = RetryPolicy(attempts=2, initial_delay=0.05, timeout=1.0, deadline=15.0)
_CATALOGUE_DEADLINE = 15.0


def _openai_with_fallback(base: str, fallback: str | Origin) -> openai.OpenAI:
    """The openai SDK (max_retries=0) calling ``base`` through a retrymw.httpx2 transport with
    the SDK profile, a 1 s ``stall_timeout`` and ``fallback`` as its one failover origin."""
    import retrymw.httpx2

    transport = retrymw.httpx2.RetryTransport(
        policy=_CATALOGUE_POLICY, profile="sdk", stall_timeout=1.0, failover=[fallback]
    )
    return openai.OpenAI(
        api_key=OPENAI_KEY,
        base_url=base,
        max_retries=0,
        http_client=httpx2.Client(transport=transport, timeout=20.0),
    )


@pytest.mark.parametrize(("steps", "expected"), CATALOGUE)
def test_llm_catalogue_through_the_openai_sdk(
    steps: tuple[Step, ...], expected: str | int, providers: tuple[FlakyServer, FlakyServer]
) -> None:
    """The openai SDK (max_retries=0) on a retrymw.httpx2 transport with a fallback origin
    that rewrites the model: every case ends in a complete answer or the right error, within
    the deadline; a non-retryable 400 never reaches the fallback."""
    base, answer, fallback = _catalogue_setup(providers, steps)
    client = _openai_with_fallback(
        base, Origin(answer.split("/s/")[0], rewrite=_use_model("fallback-model"))
    )
    started = time.monotonic()
    with client:
        if isinstance(expected, int):
            with pytest.raises(openai.BadRequestError) as caught:
                client.chat.completions.create(
                    model="main-model", messages=MESSAGES, extra_headers=KEY
                )
            assert caught.value.status_code == expected
            assert fallback.served(answer) == 0
        else:
            completion = client.chat.completions.create(
                model="main-model", messages=MESSAGES, extra_headers=KEY
            )
            assert completion.choices[0].message.content == expected
            if expected == "fallback":
                sent = json.loads(fallback.received(answer)[0].body)
                assert sent["model"] == "fallback-model"
            else:
                assert fallback.served(answer) == 0
    assert time.monotonic() - started < _CATALOGUE_DEADLINE


@pytest.mark.parametrize(("steps", "expected"), CATALOGUE)
def test_llm_catalogue_through_plain_httpx(
    steps: tuple[Step, ...], expected: str | int, providers: tuple[FlakyServer, FlakyServer]
) -> None:
    """The same catalogue through plain httpx: the answering origin is named on the response."""
    base, answer, fallback = _catalogue_setup(providers, steps)
    fallback_origin = answer.split("/s/")[0]
    transport = RetryTransport(
        policy=_CATALOGUE_POLICY, profile="sdk", stall_timeout=1.0, failover=[fallback_origin]
    )
    started = time.monotonic()
    with httpx.Client(transport=transport, timeout=20.0) as client:
        response = client.post(
            f"{base}/chat/completions",
            json={"model": "main-model", "messages": MESSAGES},
            headers=KEY,
        )
        if isinstance(expected, int):
            assert response.status_code == expected
            assert fallback.served(answer) == 0
        else:
            assert response.status_code == 200
            content = response.json()["choices"][0]["message"]["content"]
            assert content == expected
            origin = response.extensions["retrymw.origin"]
            assert origin == (fallback_origin if expected == "fallback" else base.split("/s/")[0])
    assert time.monotonic() - started < _CATALOGUE_DEADLINE


_SSE = {"content-type": "text/event-stream"}
#: An OpenAI stream's events without its terminal ``data: [DONE]``.
_UNFINISHED = openai_stream("pri", "mary").body.removesuffix(b"data: [DONE]\n\n")

#: A streamed answer (``stream=True``): the primary's step, and what the caller ends with: the
#: text of the origin that answered, or the error its reading raises (the fallback unasked).
STREAMS = [
    pytest.param(
        _slow(openai_stream("pri", "mary"), 5.0), "fallback", id="stalled-before-first-event"
    ),
    pytest.param(
        Step(200, dict(_SSE), b"", truncate=True), "fallback", id="cut-before-first-event"
    ),
    pytest.param(
        dataclasses.replace(openai_stream("pri", "mary"), truncate=True, chunked=False),
        "fallback",
        id="cut-mid-answer-unread",
    ),
    pytest.param(
        # Its first byte arrives, then nothing (one byte a chunk, 5 s apart).
        dataclasses.replace(openai_stream("pri", "mary"), pace=5.0),
        openai.APITimeoutError,  # the transport's stall_timeout, as the SDK reports it
        id="stalled-mid-answer",
    ),
    pytest.param(
        Step(200, dict(_SSE), b"data: {not json\n\n", chunked=True),
        json.JSONDecodeError,
        id="malformed-chunk",
    ),
    pytest.param(
        # Its events, then a clean end without ``data: [DONE]``, once the caller reads it: the
        # SDK's connection error, from retrymw's IncompleteStreamError (checked below).
        dataclasses.replace(openai_stream("pri", "mary"), body=_UNFINISHED),
        openai.APIConnectionError,
        id="ended-without-done",
    ),
    pytest.param(
        # The same with a Content-Length: read ahead whole, before the caller reads it.
        dataclasses.replace(openai_stream("pri", "mary"), body=_UNFINISHED, chunked=False),
        "fallback",
        id="ended-without-done-unread",
    ),
    pytest.param(
        Step(200, dict(_SSE), b"", chunked=True), "fallback", id="ended-before-first-event"
    ),
]


@pytest.mark.parametrize(("step", "expected"), STREAMS)
def test_llm_streams_through_the_openai_sdk(
    step: Step, expected: str | type[Exception], providers: tuple[FlakyServer, FlakyServer]
) -> None:
    """``stream=True`` with a fallback origin: a stream that breaks before the caller read any
    of it restarts on the fallback; one that breaks once the caller reads it is the caller's
    error, within the deadline, and the fallback is not asked."""
    main, other = providers
    base = main.script(step)
    answer = other.script(openai_stream("fall", "back"))
    client = _openai_with_fallback(base, answer.split("/s/")[0])
    started = time.monotonic()
    with client:
        stream = client.chat.completions.create(
            model="main-model", messages=MESSAGES, stream=True, extra_headers=KEY
        )
        if isinstance(expected, str):
            text = "".join(chunk.choices[0].delta.content or "" for chunk in stream)
            assert text == expected
        else:
            with pytest.raises(expected) as caught:
                for _ in stream:
                    pass
            if step.body == _UNFINISHED:
                cause = caught.value.__cause__
                assert isinstance(cause, retrymw.IncompleteStreamError)
                assert cause.missing == "data: [DONE]"
            # Its first bytes had reached the caller: not restarted elsewhere.
            assert other.served(answer) == 0
    assert time.monotonic() - started < _CATALOGUE_DEADLINE


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio", "trio"])
@pytest.mark.parametrize(
    ("step", "expected"),
    [
        pytest.param(Step(body=b"primary", chunked=True, stall=5.0), "fallback", id="stalled"),
        pytest.param(Step(body=b"primary", chunked=True), "primary", id="healthy"),
    ],
)
async def test_an_async_stream_that_stalls_before_its_first_byte_restarts_elsewhere(
    step: Step, expected: str, providers: tuple[FlakyServer, FlakyServer]
) -> None:
    """AsyncRetryTransport, a GET streamed with ``client.stream``: a primary that sends its
    head and then nothing (past ``stall_timeout``) is left for the fallback before the
    caller reads a byte; a healthy stream is the primary's, its first chunk read ahead and
    handed over intact."""
    main, other = providers
    url = main.script(step)
    other.script(Step(body=b"fallback", chunked=True))
    transport = AsyncRetryTransport(
        policy=_policy(attempts=1), stall_timeout=0.5, failover=[other.base_url]
    )
    async with (
        httpx.AsyncClient(transport=transport, timeout=10.0) as client,
        client.stream("GET", url) as response,
    ):
        body = b"".join([chunk async for chunk in response.aiter_bytes()])
    assert body.decode() == expected


# -- one trace per failed-over request ----------------------------------------------------------


class _Traces:
    """The real OpenTelemetry SDK exporting to memory, and an `instrument` reporting to it."""

    def __init__(self) -> None:
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        from retrymw.instrumentation import OpenTelemetryInstrument

        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider()
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.instrument = OpenTelemetryInstrument(tracer_provider=self.provider)

    def spans(self) -> list[Any]:
        """Every span ended so far (each is exported as it ends)."""
        return list(self.exporter.get_finished_spans())


@pytest.fixture
def traces() -> Iterator[_Traces]:
    """A `_Traces`, its provider shut down at teardown."""
    traces = _Traces()
    yield traces
    traces.provider.shutdown()


def test_a_failed_over_request_draws_one_trace_under_a_retrymw_origin_span(
    primary: _OriginServer, secondary: _OriginServer, traces: _Traces
) -> None:
    """With the real OpenTelemetry SDK: a request that fails over from the primary to the
    secondary is one trace, whose root is one INTERNAL ``retrymw.origin`` span naming the
    origins tried, in order, and the one that answered; each origin's call span is its child
    (with that call's attempts under it). No query value reaches any span."""
    from opentelemetry.trace import SpanKind

    transport = RetryTransport(
        policy=_policy(), failover=[secondary.url], instruments=[traces.instrument], budget=None
    )
    with httpx.Client(transport=transport, timeout=10.0) as client:
        response = client.get(f"{primary.url}/x?token=tok-SECRET")
        assert response.text == "secondary"
    spans = traces.spans()
    assert len({span.context.trace_id for span in spans}) == 1, [s.name for s in spans]
    (request,) = [span for span in spans if span.name == names.SPAN_ORIGIN]
    assert request.kind is SpanKind.INTERNAL
    assert request.parent is None
    attributes = dict(request.attributes or {})
    assert attributes[names.ATTR_ORIGINS] == (primary.url, secondary.url)
    assert attributes[names.ATTR_ORIGIN] == secondary.url
    calls = [span for span in spans if span.name == "retrymw GET"]
    assert [dict(call.attributes or {})[names.ATTR_TARGET] for call in calls] == [
        primary.url.removeprefix("http://"),
        secondary.url.removeprefix("http://"),
    ]
    assert all(call.parent is not None for call in calls)
    assert {call.parent.span_id for call in calls if call.parent} == {request.context.span_id}
    clients = [span for span in spans if span.kind is SpanKind.CLIENT]
    assert len(clients) == 3  # two attempts on the primary, one on the secondary
    call_ids = {call.context.span_id for call in calls}
    assert all(span.parent is not None and span.parent.span_id in call_ids for span in clients)
    for span in spans:
        for value in (span.attributes or {}).values():
            assert "tok-SECRET" not in str(value)


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio", "trio"])
async def test_an_async_failed_over_request_draws_one_trace_too(
    primary: _OriginServer, secondary: _OriginServer, traces: _Traces
) -> None:
    """The async transport: the same one trace, its root the ``retrymw.origin`` span, and the
    caller's context as it was once the request returned."""
    from opentelemetry import trace

    transport = AsyncRetryTransport(
        policy=_policy(), failover=[secondary.url], instruments=[traces.instrument], budget=None
    )
    before = trace.get_current_span()
    async with httpx.AsyncClient(transport=transport, timeout=10.0) as client:
        response = await client.get(f"{primary.url}/x")
        assert response.text == "secondary"
        assert trace.get_current_span() is before
    spans = traces.spans()
    assert len({span.context.trace_id for span in spans}) == 1
    (request,) = [span for span in spans if span.name == names.SPAN_ORIGIN]
    assert request.parent is None
    assert dict(request.attributes or {})[names.ATTR_ORIGINS] == (primary.url, secondary.url)
    calls = [span for span in spans if span.name == "retrymw GET"]
    assert len(calls) == 2
    assert all(call.parent and call.parent.span_id == request.context.span_id for call in calls)


def test_a_request_that_cannot_fail_over_draws_no_origin_span(
    primary: _OriginServer, traces: _Traces
) -> None:
    """A POST without ``Idempotency-Key`` never leaves its primary: no ``retrymw.origin`` span,
    its call span is the root as on a transport without failover."""
    transport = RetryTransport(
        policy=_policy(), failover=[_dead_url()], instruments=[traces.instrument]
    )
    with httpx.Client(transport=transport, timeout=10.0) as client:
        assert client.post(f"{primary.url}/x", content=b"{}").status_code == 503
    spans = traces.spans()
    assert names.SPAN_ORIGIN not in [span.name for span in spans]
    (call,) = [span for span in spans if span.name == "retrymw POST"]
    assert call.parent is None


# -- an event stream that ends without its terminal event ---------------------------------------


@pytest.mark.parametrize(
    ("step", "missing"),
    [
        pytest.param(anthropic_stream("pri", "mary"), None, id="complete"),
        pytest.param(
            dataclasses.replace(
                anthropic_stream("pri", "mary"),
                body=anthropic_stream("pri", "mary").body.rsplit(b"event: message_stop", 1)[0],
            ),
            "event: message_stop",
            id="without-message-stop",
        ),
    ],
)
def test_an_anthropic_stream_without_message_stop_is_an_error(
    step: Step, missing: str | None, providers: tuple[FlakyServer, FlakyServer]
) -> None:
    """``profile="sdk"``, plain httpx, an Anthropic ``/v1/messages`` stream: one that ends
    without ``event: message_stop`` raises `IncompleteStreamError` (also an httpx transport
    error) naming it once the caller reads to the end; a complete one reads as it is."""
    main, _ = providers
    url = main.script(step)
    transport = RetryTransport(policy=_policy(attempts=1), profile="sdk")
    with (
        httpx.Client(transport=transport, timeout=10.0) as client,
        client.stream("POST", f"{url}/v1/messages", content=b"{}") as response,
    ):
        if missing is None:
            assert response.read().endswith(b"\n\n")
            return
        with pytest.raises(retrymw.IncompleteStreamError) as caught:
            response.read()
    assert caught.value.missing == missing
    assert missing in str(caught.value)
    assert isinstance(caught.value, httpx.TransportError)


def test_a_stream_without_terminal_event_is_left_alone_on_a_plain_transport(
    providers: tuple[FlakyServer, FlakyServer],
) -> None:
    """Without ``profile="sdk"`` and without ``failover=``, an event stream is the caller's
    to judge: no terminal event is required."""
    main, _ = providers
    url = main.script(dataclasses.replace(openai_stream("a"), body=_UNFINISHED))
    transport = RetryTransport(policy=_policy(attempts=1))
    with httpx.Client(transport=transport, timeout=10.0) as client:
        response = client.post(f"{url}/chat/completions", content=b"{}")
    assert response.content == _UNFINISHED


_CHUNKINGS = st.lists(st.integers(min_value=1, max_value=70_000), min_size=1, max_size=40)


def _fed(body: bytes, sizes: list[int], terminal: Any) -> Any:
    """A `StreamTail` fed ``body`` in chunks of ``sizes`` (cycled)."""
    from retrymw._http.sse import StreamTail

    tail = StreamTail(terminal)
    at, index = 0, 0
    while at < len(body):
        size = sizes[index % len(sizes)]
        tail.feed(body[at : at + size])
        at, index = at + size, index + 1
    return tail


@settings(deadline=None, max_examples=40, suppress_health_check=[HealthCheck.too_slow])
@given(
    prefix=st.binary(max_size=2_000).map(lambda piece: piece * 200),  # up to 400 000 bytes
    sizes=_CHUNKINGS,
    ending=st.sampled_from([b"", b"\n", b"\r\n\r\n", b"\n\n\n"]),
)
def test_the_stream_tail_sees_the_terminal_event_whatever_came_before(
    prefix: bytes, sizes: list[int], ending: bytes
) -> None:
    """Whatever bytes came before and however they were chunked, a stream whose last event is
    ``data: [DONE]`` (``event: message_stop``) is complete, and one whose last event is
    anything else is not; nothing else is ever raised."""
    from retrymw._http.sse import ANTHROPIC_STOP, OPENAI_DONE

    done = prefix + b"\n\ndata: [DONE]" + ending
    assert _fed(done, sizes, OPENAI_DONE).complete()
    stop = prefix + b"\n\nevent: message_stop\ndata: {}" + ending
    assert _fed(stop, sizes, ANTHROPIC_STOP).complete()
    cut = prefix + b'\n\ndata: {"choices": []}' + ending
    assert not _fed(cut, sizes, OPENAI_DONE).complete()
    assert not _fed(cut, sizes, ANTHROPIC_STOP).complete()
    _fed(prefix, sizes, OPENAI_DONE).complete()  # arbitrary bytes: an answer, never an error


def test_the_stream_tail_is_linear_in_the_stream() -> None:
    """Ten times the chunks cost about ten times the work, never a hundred (ratio of process
    times in one test, with a generous factor), whatever the chunks' size."""
    from retrymw._http.sse import OPENAI_DONE, StreamTail

    def work(chunks: int, chunk: bytes) -> float:
        tail = StreamTail(OPENAI_DONE)
        started = time.process_time()
        for _ in range(chunks):
            tail.feed(chunk)
        tail.complete()
        return time.process_time() - started

    for chunk in (b"x" * 7, b"data: {}\n\n" * 10_000):
        small = max(work(2_000, chunk), 1e-4)
        large = work(20_000, chunk)
        assert large <= 30 * small, (len(chunk), small, large)
