"""OpenTelemetryInstrument: span trees per scenario, HTTP semconv, propagation, metrics, cost."""

from __future__ import annotations

import importlib
import logging
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import anyio
import anyio.lowlevel
import httpx
import pytest
from opentelemetry import trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF
from opentelemetry.trace import SpanKind, StatusCode

from retrymw import AttemptStarted, CallStarted, RetryPolicy, RetryScheduled
from retrymw.httpx import AsyncRetryTransport, RetryTransport
from retrymw.instrumentation import OpenTelemetryInstrument
from retrymw.instrumentation import _names as names
from retrymw.testing import FakeClock
from tests.instrumentation import (
    ATTEMPT_TIME,
    HTTP_TARGET,
    HTTP_URL,
    POLICY,
    SCENARIOS,
    TARGET,
    Upstream,
    retrier,
    run_http_scenario,
    run_scenario,
    script,
)

pytestmark = pytest.mark.anyio

INTERNAL, CLIENT = SpanKind.INTERNAL, SpanKind.CLIENT
UNSET, ERROR = StatusCode.UNSET, StatusCode.ERROR


@dataclass
class Telemetry:
    """An SDK tracer and meter provider with in-memory export, and an instrument on them."""

    exporter: InMemorySpanExporter
    reader: InMemoryMetricReader
    tracer_provider: TracerProvider
    instrument: OpenTelemetryInstrument

    def spans(self) -> list[ReadableSpan]:
        """Finished spans, in the order they ended."""
        return list(self.exporter.get_finished_spans())


@pytest.fixture
def otel() -> Iterator[Telemetry]:
    """Fresh providers per test; the global ones are never touched."""
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader])
    instrument = OpenTelemetryInstrument(tracer_provider, meter_provider)
    yield Telemetry(exporter, reader, tracer_provider, instrument)
    tracer_provider.shutdown()
    meter_provider.shutdown()


Node = tuple[
    str, SpanKind, "int | None", dict[str, Any], StatusCode, list[tuple[str, dict[str, Any]]]
]


def tree(spans: list[ReadableSpan]) -> list[Node]:
    """Each span as (name, kind, index of its parent in ``spans``, attributes, status, events).

    Events keep only their ``retrymw.*`` attributes (exception events keep their name only).
    """
    index = {span.context.span_id: i for i, span in enumerate(spans)}
    return [
        (
            span.name,
            span.kind,
            None if span.parent is None else index[span.parent.span_id],
            dict(span.attributes or {}),
            span.status.status_code,
            [
                (
                    event.name,
                    {k: v for k, v in (event.attributes or {}).items() if k.startswith("retrymw.")},
                )
                for event in span.events
            ],
        )
        for span in spans
    ]


_PLANS: dict[str, tuple[list[str], list[float], str, str | None, int]] = {
    # attempt outcomes, backoff delays, call outcome, denial reason, max attempts
    "success_first_try": (["success"], [], "success", None, 3),
    "success_after_2_retries": (["retried", "retried", "success"], [1.0, 2.0], "success", None, 3),
    "exhausted": (["retried", "retried", "failed"], [1.0, 2.0], "exhausted", "max_attempts", 3),
    "budget_exhausted": (["retried", "failed"], [1.0], "budget_exhausted", "budget_exhausted", 5),
    "throttled": (["failed"], [], "throttled", "throttled", 3),
    # The first call's retry is refused: what its attempt got (DESIGN §15); the next call is
    # refused before any attempt (outcome circuit_open, below).
    "circuit_open": (["failed"], [], "failure", "circuit_open", 3),
    "not_idempotent": (["failed"], [], "failure", "not_idempotent", 3),
    "retry_after_too_long": (["failed"], [], "failure", "retry_after_exceeds_limit", 3),
}


def expected_tree(scenario: str, *, http: bool) -> list[Node]:
    """The span tree DESIGN §6 prescribes for a scenario, in the order the spans end.

    Telemetry costs what it emits (docs/telemetry.md): a coroutine call that was not retried is
    its call span alone (a raised exception is recorded there); a backoff wait is told by the
    ``retrymw.backoff.delay`` of the attempt span that follows it; a retried exception is the
    ``exception.type`` and ``exception.message`` of its attempt span, and only the exception
    that ends the call is an ``exception`` event. An HTTP call that may retry (every scenario
    allows 3 or 5 attempts) opens its call span before its first attempt, which parents every
    CLIENT span, the first included (issue 31: one trace per call, see
    `test_a_retried_http_call_parents_every_attempt`); a call refused before any attempt is its
    call span alone. ``error.type`` names an exception by its qualified class name.
    """
    outcomes, delays, outcome, reason, max_attempts = _PLANS[scenario]
    operation = ("POST" if scenario == "not_idempotent" else "GET") if http else TARGET
    target = HTTP_TARGET if http else TARGET
    error = "503" if http else "ConnectionError"
    attempt_spans = http or len(outcomes) > 1
    root = len(outcomes) if attempt_spans else 0
    nodes: list[Node] = []
    call_events: list[tuple[str, dict[str, Any]]] = []
    for number, attempt_outcome in enumerate(outcomes, start=1):
        failed = attempt_outcome != "success"
        attributes: dict[str, Any] = {
            "retrymw.attempt": number,
            "retrymw.attempt.outcome": attempt_outcome,
        }
        if failed:
            attributes["error.type"] = error
        if number > 1:  # the wait before this attempt
            attributes["retrymw.backoff.delay"] = delays[number - 2]
        status = ERROR if failed else UNSET
        if http:
            attributes.update(
                {
                    "http.request.method": operation,
                    "server.address": HTTP_TARGET,
                    "server.port": 80,
                    # OTel convention: credentials and sensitive query values are REDACTED.
                    "url.full": "http://REDACTED:REDACTED@api.test/items?token=REDACTED#top",
                    "http.response.status_code": 503 if failed else 200,
                    "network.protocol.version": "1.1",  # httpx's default http_version
                }
            )
            if number > 1:
                attributes["http.request.resend_count"] = number - 1
            # Issue 31: the call span, opened first, parents the first attempt too.
            nodes.append((operation, CLIENT, root, attributes, status, []))
        elif attempt_spans:
            raised: list[tuple[str, dict[str, Any]]] = []
            if attempt_outcome == "retried":
                attributes["exception.type"] = "ConnectionError"
                attributes["exception.message"] = f"reset #{number}"
            elif failed:
                raised.append(("exception", {}))  # it ends the call: an event, stack trace and all
            nodes.append(
                (f"retrymw.attempt {operation}", INTERNAL, root, attributes, status, raised)
            )
    call: dict[str, Any] = {
        "retrymw.policy": POLICY,
        "retrymw.target": target,
        "retrymw.max_attempts": max_attempts,
        "retrymw.outcome": outcome,
        "retrymw.attempt.count": len(outcomes),
    }
    if outcome != "success":
        call["error.type"] = error
    if scenario == "circuit_open":
        change = {
            # A Retrier's breaker as given; a transport's circuit for the host (DESIGN §15).
            "retrymw.circuit": "db:api.test" if http else "db",
            "retrymw.circuit.previous_state": "closed",
            "retrymw.circuit.state": "open",
        }
        call_events.append(("retrymw.circuit.state_change", change))
    if not attempt_spans and outcome != "success":
        call_events.append(("exception", {}))  # the one attempt's exception, on the call span
    if reason is not None:
        call_events.append(
            ("retrymw.retry.denied", {"retrymw.reason": reason, "retrymw.attempt": len(outcomes)})
        )
    # Every scenario's call has its call span (HTTP: opened before the attempts, issue 31).
    nodes.append(
        (
            f"retrymw {operation}",
            INTERNAL,
            None,
            call,
            ERROR if outcome != "success" else UNSET,
            call_events,
        )
    )
    if scenario == "circuit_open":
        rejected = {
            **call,
            "retrymw.outcome": "circuit_open",
            "retrymw.attempt.count": 0,
            "error.type": "retrymw.CircuitOpenError",  # qualified (issue 31)
        }
        nodes.append((f"retrymw {operation}", INTERNAL, None, rejected, ERROR, []))
    return nodes


@pytest.mark.parametrize("scenario", SCENARIOS)
async def test_coroutine_span_tree(scenario: str, otel: Telemetry, clock: FakeClock) -> None:
    """Each coroutine scenario produces exactly DESIGN §6's span tree."""
    await run_scenario(scenario, clock, [otel.instrument])
    assert tree(otel.spans()) == expected_tree(scenario, http=False)


@pytest.mark.parametrize("scenario", SCENARIOS)
async def test_http_span_tree(scenario: str, otel: Telemetry, clock: FakeClock) -> None:
    """Each transport scenario produces CLIENT attempt spans per the HTTP semconv."""
    await run_http_scenario(scenario, clock, [otel.instrument])
    assert tree(otel.spans()) == expected_tree(scenario, http=True)


async def test_every_span_of_a_call_shares_its_trace(otel: Telemetry, clock: FakeClock) -> None:
    """The call span is a child of the caller's span; its attempts are its children."""
    tracer = otel.tracer_provider.get_tracer("test")
    with tracer.start_as_current_span("caller") as caller:
        await run_scenario("success_after_2_retries", clock, [otel.instrument])
        assert trace.get_current_span() is caller  # every context was detached again
    spans = otel.spans()
    call = next(span for span in spans if span.name == "retrymw fetch")
    assert call.parent is not None
    assert call.parent.span_id == caller.get_span_context().span_id
    assert {span.context.trace_id for span in spans} == {caller.get_span_context().trace_id}


async def test_a_retried_http_call_parents_every_attempt(otel: Telemetry, clock: FakeClock) -> None:
    """Under a caller's span: the call span, opened before the first attempt, is the caller's
    child and parents every CLIENT span, the first one included (issue 31; it used to be the
    caller's child, linked from a call span made when it was retried)."""
    tracer = otel.tracer_provider.get_tracer("test")
    with tracer.start_as_current_span("caller") as caller:
        await run_http_scenario("success_after_2_retries", clock, [otel.instrument])
        assert trace.get_current_span() is caller  # nothing left attached
    spans = otel.spans()
    attempts = [span for span in spans if span.kind == CLIENT]
    (call,) = [span for span in spans if span.name == "retrymw GET"]
    caller_id = caller.get_span_context().span_id
    assert call.parent is not None
    assert call.parent.span_id == caller_id
    assert call.start_time is not None
    assert attempts[0].start_time is not None
    assert call.start_time <= attempts[0].start_time
    assert call.links == ()
    assert len(attempts) == 3
    assert {span.parent.span_id for span in attempts if span.parent} == {call.context.span_id}
    assert {span.context.trace_id for span in spans} == {caller.get_span_context().trace_id}


async def test_an_http_call_that_may_retry_opens_its_call_span_first(
    otel: Telemetry, clock: FakeClock
) -> None:
    """A call that was not retried but could have been: its CLIENT span under its call span,
    the caller's child (issue 31: a span's parent is fixed when it starts, so the call span is
    opened before the first attempt whenever a retry could follow)."""
    tracer = otel.tracer_provider.get_tracer("test")
    with tracer.start_as_current_span("caller") as caller:
        await run_http_scenario("success_first_try", clock, [otel.instrument])
    (client, call, parent) = otel.spans()
    assert (client.kind, call.name, parent.name) == (CLIENT, "retrymw GET", "caller")
    assert client.parent is not None
    assert client.parent.span_id == call.context.span_id
    assert call.parent is not None
    assert call.parent.span_id == caller.get_span_context().span_id


async def test_a_one_attempt_http_call_is_its_client_span_alone(
    otel: Telemetry, clock: FakeClock
) -> None:
    """A call that can make one attempt (an SDK above is retrying, or ``attempts=1``) is its
    CLIENT span alone, the caller's child: no retry can follow it."""
    transport = AsyncRetryTransport(
        httpx.MockTransport(Upstream(clock, [200], None)),
        policy=RetryPolicy(name=POLICY, attempts=1),
        instruments=[otel.instrument],
        clock=clock,
    )
    tracer = otel.tracer_provider.get_tracer("test")
    with tracer.start_as_current_span("caller") as caller:
        async with httpx.AsyncClient(transport=transport) as client:
            assert (await client.get(HTTP_URL)).status_code == 200
    (client_span, parent) = otel.spans()
    assert (client_span.kind, parent.name) == (CLIENT, "caller")
    assert client_span.parent is not None
    assert client_span.parent.span_id == caller.get_span_context().span_id


async def test_each_attempt_injects_its_own_traceparent(otel: Telemetry, clock: FakeClock) -> None:
    """The headers of each attempt carry that attempt span's id (W3C traceparent)."""
    upstream = await run_http_scenario("success_after_2_retries", clock, [otel.instrument])
    attempts = [span for span in otel.spans() if span.kind == CLIENT]
    assert [headers["traceparent"] for headers in upstream.headers] == [
        f"00-{span.context.trace_id:032x}-{span.context.span_id:016x}-{span.context.trace_flags:02x}"
        for span in attempts
    ]


@pytest.mark.parametrize(
    ("header", "value"),
    [
        pytest.param("Retry-After", "2", id="retry-after"),
        pytest.param("retry-after-ms", "2000", id="retry-after-ms"),
    ],
)
async def test_honoured_retry_after_is_on_the_next_attempt_span(
    otel: Telemetry, clock: FakeClock, header: str, value: str
) -> None:
    """A server hint the transport honours shows, with the header that gave it (lower case)
    and the wait, on the CLIENT span of the attempt that followed the wait; the cause is the
    previous attempt's error.type. No event tells a wait that an attempt followed."""
    statuses = iter([503, 200])

    def upstream(request: httpx.Request) -> httpx.Response:
        clock.advance(ATTEMPT_TIME)
        status = next(statuses)
        return httpx.Response(status, headers={header: value} if status == 503 else {})

    transport = AsyncRetryTransport(
        httpx.MockTransport(upstream),
        policy=RetryPolicy(name=POLICY),
        instruments=[otel.instrument],
        clock=clock,
    )
    async with httpx.AsyncClient(transport=transport) as client:
        assert (await client.get(HTTP_URL)).status_code == 200
    assert [e for span in otel.spans() for e in span.events if e.name == "retrymw.backoff"] == []
    first, second = [dict(span.attributes or {}) for span in otel.spans() if span.kind == CLIENT]
    assert first["error.type"] == "503"
    assert "retrymw.backoff.delay" not in first
    waited = {key: second.get(key) for key in ("retrymw.attempt", *_WAIT_KEYS)}
    assert waited == {
        "retrymw.attempt": 2,
        "retrymw.backoff.delay": 2.0,
        "retrymw.retry_after": 2.0,
        "retrymw.retry_after.header": header.lower(),
    }


_WAIT_KEYS = ("retrymw.backoff.delay", "retrymw.retry_after", "retrymw.retry_after.header")


async def test_unknown_methods_follow_the_semconv(otel: Telemetry, clock: FakeClock) -> None:
    """A method outside the known set names the span HTTP and is reported as _OTHER."""
    transport = AsyncRetryTransport(
        httpx.MockTransport(Upstream(clock, [200], None)),
        instruments=[otel.instrument],
        clock=clock,
    )
    async with httpx.AsyncClient(transport=transport) as client:
        await client.request("PURGE", "https://api.test:8443/x")
    attempt = next(span for span in otel.spans() if span.kind == CLIENT)
    assert attempt.name == "HTTP"
    assert attempt.attributes is not None
    assert attempt.attributes["http.request.method"] == "_OTHER"
    assert attempt.attributes["http.request.method_original"] == "PURGE"
    assert attempt.attributes["server.port"] == 8443
    assert attempt.attributes["url.full"] == "https://api.test:8443/x"


def test_sync_transport_gets_the_same_spans(otel: Telemetry, clock: FakeClock) -> None:
    """RetryTransport (httpx.Client) produces the same CLIENT spans and headers."""
    upstream = Upstream(clock, [503, 200], None)
    transport = RetryTransport(
        httpx.MockTransport(upstream),
        policy=RetryPolicy(name=POLICY, jitter=False),
        instruments=[otel.instrument],
        clock=clock,
    )
    with httpx.Client(transport=transport) as client:
        assert client.get(HTTP_URL).status_code == 200
    names_kinds = [(span.name, span.kind) for span in otel.spans()]
    assert names_kinds == [("GET", CLIENT), ("GET", CLIENT), ("retrymw GET", INTERNAL)]
    assert [event.name for event in otel.spans()[-1].events] == []
    attempts = [span for span in otel.spans() if span.kind == CLIENT]
    # The wait before the second attempt is on that attempt's span.
    assert [(span.attributes or {}).get("retrymw.backoff.delay") for span in attempts] == [
        None,
        1.0,
    ]
    assert [h["traceparent"].split("-")[2] for h in upstream.headers] == [
        f"{span.context.span_id:016x}" for span in attempts
    ]


async def test_cancellation_leaves_status_unset(otel: Telemetry, clock: FakeClock) -> None:
    """A cancelled call ends its spans with status unset and outcome cancelled, no error.type."""
    with anyio.CancelScope() as scope:

        async def fetch() -> str:
            scope.cancel()
            await anyio.lowlevel.checkpoint()
            return "never"

        await retrier(clock, [otel.instrument]).call(fetch)
    (call,) = otel.spans()  # a first attempt that is not retried has no span of its own
    assert (call.status.status_code, (call.attributes or {}).get("retrymw.outcome")) == (
        UNSET,
        "cancelled",
    )
    assert "error.type" not in (call.attributes or {})


# -- a real loopback server -----------------------------------------------------------------------


class _Recorder(BaseHTTPRequestHandler):
    """Answers 503, 503, then 200, and records each request's traceparent."""

    server: Any

    def do_GET(self) -> None:
        with self.server.lock:
            self.server.traceparents.append(self.headers.get("traceparent"))
            status = 503 if len(self.server.traceparents) <= 2 else 200
        self.send_response(status)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, format: str, *args: object) -> None:
        return None


@pytest.fixture
def loopback() -> Iterator[Any]:
    """A threaded HTTP server on 127.0.0.1 (port 0), shut down at teardown."""
    server: Any = ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    server.daemon_threads = True
    server.traceparents = []
    server.lock = threading.Lock()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()
    thread.join()


async def test_loopback_server_receives_each_attempts_traceparent(
    otel: Telemetry, clock: FakeClock, loopback: Any
) -> None:
    """Over a real socket, each attempt's traceparent carries that attempt span's id."""
    port = loopback.server_address[1]
    transport = AsyncRetryTransport(
        policy=RetryPolicy(name=POLICY), instruments=[otel.instrument], clock=clock
    )
    async with httpx.AsyncClient(transport=transport) as client:
        response = await client.get(f"http://127.0.0.1:{port}/a?sig=secret&page=2")
    assert response.status_code == 200
    attempts = [span for span in otel.spans() if span.kind == CLIENT]
    (call,) = [span for span in otel.spans() if span.name == "retrymw GET"]
    assert loopback.traceparents == [
        f"00-{span.context.trace_id:032x}-{span.context.span_id:016x}-{span.context.trace_flags:02x}"
        for span in attempts
    ]
    # The call span, opened before the first attempt, parents them all (issue 31).
    assert call.links == ()
    assert all(
        span.parent is not None and span.parent.span_id == call.context.span_id for span in attempts
    )
    assert [dict(span.attributes or {}).get("http.request.resend_count") for span in attempts] == [
        None,
        1,
        2,
    ]
    assert {dict(span.attributes or {})["url.full"] for span in attempts} == {
        f"http://127.0.0.1:{port}/a?sig=REDACTED&page=2"
    }
    assert (call.attributes or {})["retrymw.target"] == f"127.0.0.1:{port}"


# -- no duplicate span from opentelemetry-instrumentation-httpx -----------------------------------


def _scope(span: ReadableSpan) -> str | None:
    return None if span.instrumentation_scope is None else span.instrumentation_scope.name


async def test_httpx_instrumentation_below_is_switched_off_for_each_attempt(
    otel: Telemetry, clock: FakeClock
) -> None:
    """opentelemetry-instrumentation-httpx below the retry transport records nothing for an
    attempt retrymw records (issue 31: two nested CLIENT spans per request and every attempt
    counted twice in ``http.client.request.duration`` before): retrymw's CLIENT span is the
    attempt's, and its semconv point the attempt's one."""
    contrib = importlib.import_module("opentelemetry.instrumentation.httpx")
    meter_provider = MeterProvider(metric_readers=[reader := InMemoryMetricReader()])
    inner = contrib.AsyncOpenTelemetryTransport(
        httpx.MockTransport(Upstream(clock, [503, 503, 200] * 4, None)),
        tracer_provider=otel.tracer_provider,
        meter_provider=meter_provider,
    )
    transport = AsyncRetryTransport(inner, instruments=[otel.instrument], clock=clock)
    async with httpx.AsyncClient(transport=transport) as client:
        for _ in range(4):
            await client.get(HTTP_URL)
    assert reader.get_metrics_data() is None  # not one point
    ours = points(otel.reader)["http.client.request.duration"]
    by_status = {point.attributes.get("http.response.status_code"): point.count for point in ours}
    assert by_status == {503: 8, 200: 4}
    assert {point.attributes["server.address"] for point in ours} == {HTTP_TARGET}
    assert {point.attributes["url.scheme"] for point in ours} == {"http"}
    assert {point.attributes.get("error.type") for point in ours} == {"503", None}
    # One CLIENT span per attempt: retrymw's.
    clients = [span for span in otel.spans() if span.kind == CLIENT]
    assert [_scope(span) for span in clients] == ["retrymw"] * 12
    meter_provider.shutdown()


# -- metrics --------------------------------------------------------------------------------------


def points(reader: InMemoryMetricReader) -> dict[str, list[Any]]:
    """Data points by instrument name."""
    data = reader.get_metrics_data()
    assert data is not None
    return {
        metric.name: list(metric.data.data_points)
        for resource in data.resource_metrics
        for scope in resource.scope_metrics
        for metric in scope.metrics
    }


async def test_metrics_match_the_prometheus_path(otel: Telemetry, clock: FakeClock) -> None:
    """The OTel instruments record the values, attributes and buckets of the Prometheus path."""
    budget = await run_scenario("success_after_2_retries", clock, [otel.instrument])
    assert budget is not None
    found = points(otel.reader)
    base = {"retrymw.policy": POLICY, "retrymw.target": TARGET}
    assert "retrymw.calls" not in found  # counted by retrymw.call.duration
    assert "retrymw.attempts" not in found  # counted by retrymw.attempt.duration
    (duration,) = found["retrymw.call.duration"]
    assert dict(duration.attributes) == {**base, "retrymw.outcome": "success"}
    assert (duration.count, duration.sum) == (1, 3.75)
    assert tuple(duration.explicit_bounds) == names.CALL_DURATION_BUCKETS
    (per_call,) = found["retrymw.call.attempts"]
    assert (per_call.sum, tuple(per_call.explicit_bounds)) == (3, names.CALL_ATTEMPTS_BUCKETS)
    attempts = {
        tuple(sorted(p.attributes.items())): (p.count, p.sum)
        for p in found["retrymw.attempt.duration"]
    }
    retried = {**base, "retrymw.attempt.outcome": "retried", "error.type": "ConnectionError"}
    assert attempts == {
        tuple(sorted(retried.items())): (2, 0.5),
        tuple(sorted({**base, "retrymw.attempt.outcome": "success"}.items())): (1, 0.25),
    }
    (backoff,) = found["retrymw.backoff.duration"]
    assert (backoff.count, backoff.sum, tuple(backoff.explicit_bounds)) == (
        2,
        3.0,
        names.BACKOFF_DURATION_BUCKETS,
    )
    (tokens,) = found["retrymw.retry_budget.available"]
    assert tokens.value == pytest.approx(budget.available())
    bounds = {tuple(p.explicit_bounds) for p in found["retrymw.attempt.duration"]}
    assert bounds == {names.ATTEMPT_DURATION_BUCKETS}


async def test_histograms_carry_trace_exemplars(otel: Telemetry, clock: FakeClock) -> None:
    """Measurements taken inside the call span carry its trace id (SDK trace-based exemplars)."""
    await run_scenario("success_first_try", clock, [otel.instrument])
    (call,) = [span for span in otel.spans() if span.name == "retrymw fetch"]
    (duration,) = points(otel.reader)["retrymw.call.duration"]
    assert {exemplar.trace_id for exemplar in duration.exemplars} == {call.context.trace_id}


async def test_circuit_metrics(otel: Telemetry, clock: FakeClock) -> None:
    """A transition is counted and the state-set gauge has exactly one state at 1."""
    await run_scenario("circuit_open", clock, [otel.instrument])
    found = points(otel.reader)
    # Every transition exists from the circuit's announcement (issue 31); one was made.
    counted = {
        (p.attributes["retrymw.circuit.previous_state"], p.attributes["retrymw.circuit.state"]): (
            p.value
        )
        for p in found["retrymw.circuit.transitions"]
        if p.attributes["retrymw.circuit"] == "db"
    }
    assert counted == {
        ("closed", "open"): 1,
        ("open", "half_open"): 0,
        ("half_open", "closed"): 0,
        ("half_open", "open"): 0,
    }
    states = {
        p.attributes["retrymw.circuit.state"]: p.value for p in found["retrymw.circuit.state"]
    }
    assert states == {"closed": 0, "open": 1, "half_open": 0}


# -- cost when nobody listens, and failure isolation ----------------------------------------------


def _events() -> tuple[CallStarted, AttemptStarted, RetryScheduled]:
    return (
        CallStarted(POLICY, TARGET, TARGET, 3),
        AttemptStarted(POLICY, TARGET, TARGET, 1, 3),
        RetryScheduled(POLICY, TARGET, TARGET, 1, 3, 1.0, "ConnectionError"),
    )


def test_api_only_does_no_span_work() -> None:
    """With only the API (no SDK provider set globally), the hooks return no scope at all."""
    assert isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider), (
        "tests never set globals"
    )
    instrument = OpenTelemetryInstrument()
    call, attempt, sleep = _events()
    assert instrument.call_started(call) is None
    assert instrument.attempt_started(attempt) is None
    instrument.retry_scheduled(sleep)  # waits are events on a call span: none here, no error
    assert not instrument._meters()


def test_a_provider_set_later_is_picked_up(monkeypatch: pytest.MonkeyPatch) -> None:
    """While idle the global providers are looked at again at most once a second, then kept."""

    instrument = OpenTelemetryInstrument()
    assert not instrument._traces()
    assert not instrument._meters()
    sdk_tracing, sdk_metering = TracerProvider(), MeterProvider()
    # What the API's getters would return once a provider is set (tests never set globals).
    monkeypatch.setattr(instrument._traces, "_global", lambda: sdk_tracing)
    monkeypatch.setattr(instrument._meters, "_global", lambda: sdk_metering)
    assert not instrument._traces(), "within the second, the idle answer is reused"
    instrument._traces.idle_until = instrument._meters.idle_until = float("-inf")
    assert instrument._traces()
    assert instrument._meters()
    monkeypatch.undo()
    assert instrument._traces(), "a real provider, once seen, is kept"
    sdk_tracing.shutdown()
    sdk_metering.shutdown()


def test_noop_providers_do_no_work() -> None:
    """Explicit no-op providers are treated like the API alone."""
    from opentelemetry.metrics import NoOpMeterProvider

    instrument = OpenTelemetryInstrument(trace.NoOpTracerProvider(), NoOpMeterProvider())
    call, attempt, sleep = _events()
    assert (instrument.call_started(call), instrument.attempt_started(attempt)) == (None, None)
    instrument.retry_scheduled(sleep)
    assert not instrument._meters()


async def test_api_only_calls_still_return(clock: FakeClock) -> None:
    """A Retrier with the API-only instrument behaves exactly as without it."""
    fetch = script(clock, failures=2)
    assert await retrier(clock, [OpenTelemetryInstrument()]).call(fetch) == "ok"


async def test_unsampled_calls_record_nothing_but_still_propagate(clock: FakeClock) -> None:
    """With a sampler that drops everything, nothing is exported but the context still flows."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider(sampler=ALWAYS_OFF)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    upstream = await run_http_scenario(
        "success_after_2_retries", clock, [OpenTelemetryInstrument(provider)]
    )
    assert exporter.get_finished_spans() == ()
    assert all(int(headers["traceparent"][-2:], 16) & 1 == 0 for headers in upstream.headers)
    provider.shutdown()


async def test_a_failing_tracer_disables_the_instrument_not_the_call(
    clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    """If the tracer raises, the instrument is disabled and the call still returns."""

    class Broken(trace.TracerProvider):
        def get_tracer(self, *args: Any, **kwargs: Any) -> Any:
            return self

        def start_span(self, *args: Any, **kwargs: Any) -> Any:
            raise RuntimeError("exporter on fire")

    with caplog.at_level(logging.ERROR, logger="retrymw"):
        await run_scenario("success_after_2_retries", clock, [OpenTelemetryInstrument(Broken())])
    assert "has been disabled" in caplog.text


async def test_a_failing_meter_disables_the_instrument_not_the_call(
    otel: Telemetry, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    """If a metric instrument raises, the instrument is disabled and the call still returns."""

    class Broken:
        def record(self, *args: Any, **kwargs: Any) -> None:
            raise RuntimeError("meter on fire")

    otel.instrument._attempt_duration = Broken()  # type: ignore[assignment]
    with caplog.at_level(logging.ERROR, logger="retrymw"):
        await run_scenario("exhausted", clock, [otel.instrument])
    assert "has been disabled" in caplog.text


def test_missing_opentelemetry_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without opentelemetry-api, asking for the instrument says which extra to install."""
    import sys

    import retrymw.instrumentation

    monkeypatch.setitem(sys.modules, "opentelemetry", None)
    monkeypatch.delitem(sys.modules, "retrymw.instrumentation._otel")
    monkeypatch.delitem(sys.modules, "retrymw.instrumentation._otel.instrument")
    with pytest.raises(ImportError, match=r"pip install 'retrymw\[otel\]'"):
        retrymw.instrumentation.OpenTelemetryInstrument  # noqa: B018


def test_defaults_include_opentelemetry_on_the_global_providers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The built-in defaults end with an OpenTelemetryInstrument on the global providers."""
    from retrymw import instrumentation

    monkeypatch.setattr(instrumentation, "_builtin", None)
    monkeypatch.setattr(instrumentation, "_defaults", None)
    last = instrumentation.default_instruments()[-1]
    assert isinstance(last, OpenTelemetryInstrument)
    assert (last._tracer_provider, last._meter_provider) == (None, None)


# -- exemplars: one per call ------------------------------------------------------------------


def _exemplar_spans(otel: Telemetry) -> dict[str, list[int | None]]:
    """Per histogram, the span ids of the exemplars the SDK took."""
    data = otel.reader.get_metrics_data()
    assert data is not None
    return {
        metric.name: [
            exemplar.span_id for point in metric.data.data_points for exemplar in point.exemplars
        ]
        for resource in data.resource_metrics
        for scope in resource.scope_metrics
        for metric in scope.metrics
        if metric.name.startswith(("retrymw.", "http.client."))
    }


async def test_a_retried_call_offers_one_exemplar_the_call_span(
    otel: Telemetry, clock: FakeClock
) -> None:
    """The call duration's exemplar is the call span; the attempt, backoff and attempts-per-call
    records offer none (each offer cost 2 µs or more and pointed at the same trace)."""
    await run_scenario("success_after_2_retries", clock, [otel.instrument])
    (call,) = [span for span in otel.spans() if span.name == f"retrymw {TARGET}"]
    exemplars = _exemplar_spans(otel)
    assert exemplars["retrymw.call.duration"] == [call.context.span_id]
    assert exemplars["retrymw.attempt.duration"] == []
    assert exemplars["retrymw.backoff.duration"] == []
    assert exemplars["retrymw.call.attempts"] == []


async def test_http_attempts_keep_their_semconv_exemplar(otel: Telemetry, clock: FakeClock) -> None:
    """Each HTTP attempt's ``http.client.request.duration`` exemplar is its CLIENT span, as
    OpenTelemetry's HTTP instrumentations record it; retrymw's attempt histogram offers none."""
    await run_http_scenario("success_after_2_retries", clock, [otel.instrument])
    attempts = [span.context.span_id for span in otel.spans() if span.kind == CLIENT]
    exemplars = _exemplar_spans(otel)
    # One per bucket and series: the two 503s share one, the 200 has its own (the last).
    assert set(exemplars["http.client.request.duration"]) <= set(attempts)
    assert attempts[-1] in exemplars["http.client.request.duration"]
    assert len(exemplars["http.client.request.duration"]) == 2
    assert exemplars["retrymw.attempt.duration"] == []
