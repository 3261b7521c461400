"""Issue 31, traces: one trace per call whatever the caller, nested calls under the attempt that
made them, one CLIENT span and one duration point per attempt beside OpenTelemetry's httpx
instrumentation and an SDK's own span, nothing unredacted, and the 2026 exception conventions.

Everything runs on the OpenTelemetry SDK in memory (spans, metrics, logs); the HTTP tests that
need a wire use the loopback server of `tests.http_server`, and the real
opentelemetry-instrumentation-httpx and anthropic packages.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import anthropic
import httpx
import httpx2
import pytest
from opentelemetry import trace
from opentelemetry._logs import SeverityNumber
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

import retrymw.httpx
import retrymw.httpx2
from retrymw import Retrier, RetryBudget, RetryPolicy
from retrymw.instrumentation import OpenTelemetryInstrument
from retrymw.testing import FakeClock
from tests.http_server import FlakyServer, Step
from tests.instrumentation import HTTP_URL, Upstream
from tests.sdk.fake_api import ANTHROPIC_KEY, anthropic_error, anthropic_message

pytestmark = pytest.mark.anyio

CLIENT, INTERNAL = SpanKind.CLIENT, SpanKind.INTERNAL
CONTRIB = "opentelemetry.instrumentation.httpx"
#: Query values retrymw redacts in ``url.full``; none may reach any span or metric attribute.
SECRETS = ("tok-SECRET", "sig-SECRET", "key-SECRET")
SECRET_QUERY = "token=tok-SECRET&X-Amz-Signature=sig-SECRET&api_key=key-SECRET&page=2"


@dataclass
class Otel:
    """SDK providers with in-memory export, and a retrymw instrument on them."""

    spans: InMemorySpanExporter
    metrics: InMemoryMetricReader
    logs: InMemoryLogRecordExporter
    tracer_provider: TracerProvider
    meter_provider: MeterProvider
    logger_provider: LoggerProvider

    def instrument(self, *, logs: bool = False) -> OpenTelemetryInstrument:
        if not logs:
            return OpenTelemetryInstrument(self.tracer_provider, self.meter_provider)
        return OpenTelemetryInstrument(
            self.tracer_provider, self.meter_provider, logger_provider=self.logger_provider
        )

    def finished(self) -> list[ReadableSpan]:
        return list(self.spans.get_finished_spans())

    def points(self, name: str) -> list[Any]:
        """Every data point of the metric ``name``, whatever instrumentation scope made it."""
        data = self.metrics.get_metrics_data()
        found: list[Any] = []
        for resource in data.resource_metrics if data else ():
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    if metric.name == name:
                        found.extend(metric.data.data_points)
        return found


@pytest.fixture
def otel() -> Iterator[Otel]:
    """Fresh providers per test; the global ones are never touched."""
    spans = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    metrics = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[metrics])
    logs = InMemoryLogRecordExporter()  # type: ignore[no-untyped-call]
    logger_provider = LoggerProvider()
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(logs))
    yield Otel(spans, metrics, logs, tracer_provider, meter_provider, logger_provider)
    tracer_provider.shutdown()
    meter_provider.shutdown()
    logger_provider.shutdown()


@pytest.fixture
def server() -> Iterator[FlakyServer]:
    """The scripted loopback server, stopped at teardown."""
    flaky = FlakyServer()
    yield flaky
    flaky.stop()


def _parent(span: ReadableSpan) -> int | None:
    return None if span.parent is None else span.parent.span_id


def _traceparent(span: ReadableSpan) -> str:
    context = span.context
    return f"00-{context.trace_id:032x}-{context.span_id:016x}-{context.trace_flags:02x}"


def _scope(span: ReadableSpan) -> str | None:
    return None if span.instrumentation_scope is None else span.instrumentation_scope.name


async def _retried_get(otel: Otel, clock: FakeClock, instrument: OpenTelemetryInstrument) -> None:
    upstream = Upstream(clock, [503, 503, 200], None)
    transport = retrymw.httpx.AsyncRetryTransport(
        httpx.MockTransport(upstream),
        policy=RetryPolicy(name="p", attempts=3),
        budget=RetryBudget(clock=clock),
        instruments=[instrument],
        clock=clock,
    )
    async with httpx.AsyncClient(transport=transport) as client:
        assert (await client.get(HTTP_URL)).status_code == 200


# -- one trace per call, the same shape with or without a caller ---------------------------------


@pytest.mark.parametrize(
    "caller", [pytest.param(False, id="no-caller"), pytest.param(True, id="caller")]
)
async def test_a_retried_http_call_is_one_trace_whose_call_span_parents_every_attempt(
    otel: Otel, clock: FakeClock, caller: bool
) -> None:
    """With or without a current span, the call span parents all three CLIENT attempt spans,
    and every span of the call is in one trace (the caller's, if any)."""
    instrument = otel.instrument()
    if caller:
        with otel.tracer_provider.get_tracer("test").start_as_current_span("caller") as span:
            await _retried_get(otel, clock, instrument)
        caller_id: int | None = span.get_span_context().span_id
    else:
        await _retried_get(otel, clock, instrument)
        caller_id = None
    spans = [span for span in otel.finished() if span.name != "caller"]
    (call,) = [span for span in spans if span.name == "retrymw GET"]
    attempts = [span for span in spans if span.kind == CLIENT]
    assert len(attempts) == 3
    assert _parent(call) == caller_id
    assert [_parent(span) for span in attempts] == [call.context.span_id] * 3
    assert {span.context.trace_id for span in otel.finished()} == {call.context.trace_id}
    assert [dict(span.attributes or {}).get("http.request.resend_count") for span in attempts] == [
        None,
        1,
        2,
    ]
    assert call.links == ()  # nothing to link: the first attempt is its child


def test_the_sync_transport_gives_the_same_trace(otel: Otel, clock: FakeClock) -> None:
    """RetryTransport (httpx.Client) without a caller: one trace, the call span the root."""
    transport = retrymw.httpx.RetryTransport(
        httpx.MockTransport(Upstream(clock, [503, 200], None)),
        policy=RetryPolicy(name="p", attempts=3),
        budget=None,
        instruments=[otel.instrument()],
        clock=clock,
    )
    with httpx.Client(transport=transport) as client:
        assert client.get(HTTP_URL).status_code == 200
    spans = otel.finished()
    (call,) = [span for span in spans if span.kind == INTERNAL]
    assert call.parent is None
    assert [_parent(span) for span in spans if span.kind == CLIENT] == [call.context.span_id] * 2
    assert len({span.context.trace_id for span in spans}) == 1


@pytest.mark.parametrize(
    "outer_failures", [pytest.param(0, id="outer-first-try"), pytest.param(1, id="outer-retried")]
)
async def test_a_nested_call_sits_under_the_attempt_that_made_it(
    otel: Otel, clock: FakeClock, outer_failures: int
) -> None:
    """An inner retried call made during each attempt of an outer coroutine call is the child
    of that attempt's span, the first attempt's included (it has a span then, from its start,
    ended with the attempt's outcome)."""
    instrument = otel.instrument()
    inner = Retrier(
        RetryPolicy(name="inner", attempts=2), budget=None, instruments=[instrument], clock=clock
    )
    outer = Retrier(
        RetryPolicy(name="outer", attempts=2), budget=None, instruments=[instrument], clock=clock
    )
    inner_calls = 0
    outer_calls = 0

    async def leaf() -> str:
        nonlocal inner_calls
        inner_calls += 1
        if inner_calls % 2:  # each inner call fails once, then succeeds
            raise ConnectionError("inner reset")
        return "leaf"

    async def middle() -> str:
        nonlocal outer_calls
        outer_calls += 1
        await inner.call(leaf)
        if outer_calls <= outer_failures:
            raise ConnectionError("outer reset")
        return "middle"

    assert await outer.call(middle) == "middle"
    spans = otel.finished()
    (outer_call,) = [span for span in spans if span.name == "retrymw middle"]
    outer_attempts = sorted(
        (span for span in spans if span.name == "retrymw.attempt middle"),
        key=lambda span: span.start_time or 0,
    )
    inner_calls_spans = sorted(
        (span for span in spans if span.name == "retrymw leaf"),
        key=lambda span: span.start_time or 0,
    )
    assert len(outer_attempts) == outer_failures + 1
    assert len(inner_calls_spans) == outer_failures + 1
    assert [_parent(span) for span in outer_attempts] == [outer_call.context.span_id] * len(
        outer_attempts
    )
    assert [_parent(span) for span in inner_calls_spans] == [
        span.context.span_id for span in outer_attempts
    ]
    outcomes = [
        dict(span.attributes or {}).get("retrymw.attempt.outcome") for span in outer_attempts
    ]
    assert outcomes == ["retried"] * outer_failures + ["success"]
    assert all(span.end_time is not None for span in spans)
    assert len({span.context.trace_id for span in spans}) == 1


# -- beside opentelemetry-instrumentation-httpx -------------------------------------------------


def _contrib() -> Any:
    return importlib.import_module("opentelemetry.instrumentation.httpx")


#: The HTTP client duration metrics of both conventions: the instrumentation records the old
#: one (``http.client.duration``, ms) by default, the new one with
#: ``OTEL_SEMCONV_STABILITY_OPT_IN=http``, both with ``http/dup``; retrymw records the new one.
DURATIONS = ("http.client.request.duration", "http.client.duration")


@pytest.fixture(
    params=[pytest.param("", id="semconv-default"), pytest.param("http/dup", id="semconv-dup")]
)
def semconv(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """OTEL_SEMCONV_STABILITY_OPT_IN for the instrumentation, which reads it once per process:
    its cached reading is replaced for the test and restored after."""
    stability = importlib.import_module("opentelemetry.instrumentation._semconv")
    state = stability._OpenTelemetrySemanticConventionStability
    monkeypatch.setenv("OTEL_SEMCONV_STABILITY_OPT_IN", request.param)
    monkeypatch.setattr(state, "_initialized", False)
    monkeypatch.setattr(state, "_OTEL_SEMCONV_STABILITY_SIGNAL_MAPPING", {})
    return str(request.param)


def _assert_one_client_span_and_point_per_attempt(
    otel: Otel, server: FlakyServer, url: str, calls: int
) -> None:
    spans = otel.finished()
    clients = [span for span in spans if span.kind == CLIENT]
    received = server.received(url)
    assert len(received) == 2 * calls  # each call: a 503, then a 200
    # One CLIENT span per attempt, retrymw's, with the resend count where the semconv puts it.
    assert [_scope(span) for span in clients] == ["retrymw"] * len(received)
    resends = [dict(span.attributes or {}).get("http.request.resend_count") for span in clients]
    assert sorted(resends, key=str) == sorted([None, 1] * calls, key=str)
    # The server's parent is that CLIENT span.
    assert sorted(r.headers["traceparent"] for r in received) == sorted(map(_traceparent, clients))
    # One duration point per attempt, whatever the scope and the convention.
    points = [point for name in DURATIONS for point in otel.points(name)]
    assert sum(point.count for point in points) == len(received)
    # Nothing unredacted, anywhere.
    shown = [str(value) for span in spans for value in (span.attributes or {}).values()]
    shown += [str(value) for point in points for value in point.attributes.values()]
    assert not [value for value in shown if any(secret in value for secret in SECRETS)]


@pytest.mark.parametrize("calls", [pytest.param(10, id="10-calls")])
async def test_beside_the_httpx_instrumentation_transport_each_attempt_is_one_span(
    otel: Otel, clock: FakeClock, server: FlakyServer, calls: int, semconv: str
) -> None:
    """AsyncOpenTelemetryTransport below the retry transport (the documented arrangement):
    one CLIENT span and one duration point per attempt, the server's parent carries
    ``http.request.resend_count``, and no secret query value is kept anywhere."""
    url = server.script(Step(503), Step(200), cycle=True)
    inner = _contrib().AsyncOpenTelemetryTransport(
        httpx.AsyncHTTPTransport(),
        tracer_provider=otel.tracer_provider,
        meter_provider=otel.meter_provider,
    )
    transport = retrymw.httpx.AsyncRetryTransport(
        inner, budget=None, instruments=[otel.instrument()], clock=clock
    )
    async with httpx.AsyncClient(transport=transport) as client:
        for _ in range(calls):
            assert (await client.get(f"{url}?{SECRET_QUERY}")).status_code == 200
    _assert_one_client_span_and_point_per_attempt(otel, server, url, calls)


def test_beside_the_global_httpx_instrumentor_each_attempt_is_one_span(
    otel: Otel, clock: FakeClock, server: FlakyServer, semconv: str
) -> None:
    """``HTTPXClientInstrumentor().instrument()`` (it wraps the inner HTTPTransport): the same."""
    url = server.script(Step(503), Step(200), cycle=True)
    instrumentor = _contrib().HTTPXClientInstrumentor()
    instrumentor.instrument(
        tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider
    )
    try:
        transport = retrymw.httpx.RetryTransport(
            budget=None, instruments=[otel.instrument()], clock=clock
        )
        with httpx.Client(transport=transport) as client:
            for _ in range(5):
                assert client.get(f"{url}?{SECRET_QUERY}").status_code == 200
    finally:
        instrumentor.uninstrument()
    _assert_one_client_span_and_point_per_attempt(otel, server, url, 5)


async def test_beside_the_httpx2_instrumentation_each_attempt_is_one_span(
    otel: Otel, clock: FakeClock, server: FlakyServer, semconv: str
) -> None:
    """The contrib package's httpx2 transport below retrymw.httpx2: the same."""
    url = server.script(Step(503), Step(200), cycle=True)
    inner = _contrib().AsyncOpenTelemetryTransportHttpx2(
        httpx2.AsyncHTTPTransport(),
        tracer_provider=otel.tracer_provider,
        meter_provider=otel.meter_provider,
    )
    transport = retrymw.httpx2.AsyncRetryTransport(
        inner, budget=None, instruments=[otel.instrument()], clock=clock
    )
    async with httpx2.AsyncClient(transport=transport) as client:
        for _ in range(5):
            assert (await client.get(f"{url}?{SECRET_QUERY}")).status_code == 200
    _assert_one_client_span_and_point_per_attempt(otel, server, url, 5)


# -- beside an SDK's own span --------------------------------------------------------------------


def test_beside_the_anthropic_sdk_span_the_call_span_parents_every_attempt(
    otel: Otel, clock: FakeClock, server: FlakyServer
) -> None:
    """anthropic makes its own CLIENT span per API call and sends its context with every
    request: below it, retrymw's call span is its child and parents one CLIENT span per attempt,
    each the server's parent, in one trace."""
    url = server.script(anthropic_error(529, {"x-should-retry": "true"}), anthropic_message())
    transport = retrymw.httpx2.RetryTransport(
        budget=None, instruments=[otel.instrument()], clock=clock
    )
    client = anthropic.Anthropic(
        api_key=ANTHROPIC_KEY,
        base_url=url,
        max_retries=0,
        http_client=httpx2.Client(transport=transport),
        open_telemetry={"tracer_provider": otel.tracer_provider},
    )
    with client:
        client.messages.create(
            model="claude-test",
            max_tokens=8,
            messages=[{"role": "user", "content": "ping"}],
            extra_headers={"Idempotency-Key": "key-1"},
        )
    spans = otel.finished()
    (sdk,) = [span for span in spans if _scope(span) == "com.anthropic.sdk.python"]
    (call,) = [span for span in spans if span.name == "retrymw POST"]
    attempts = [span for span in spans if _scope(span) == "retrymw" and span.kind == CLIENT]
    assert _parent(call) == sdk.context.span_id
    assert [_parent(span) for span in attempts] == [call.context.span_id] * 2
    received = server.received(url)
    assert [r.headers["traceparent"] for r in received] == [_traceparent(s) for s in attempts]
    assert len({span.context.trace_id for span in spans}) == 1


# -- the 2026 conventions: exceptions as logs, error.type qualified ------------------------------


def _refusing(request: httpx.Request) -> httpx.Response:
    raise httpx.ConnectError("refused", request=request)


async def _failing_get(instrument: OpenTelemetryInstrument, clock: FakeClock) -> None:
    transport = retrymw.httpx.AsyncRetryTransport(
        httpx.MockTransport(_refusing), budget=None, instruments=[instrument], clock=clock
    )
    async with httpx.AsyncClient(transport=transport) as client:
        with pytest.raises(httpx.ConnectError):
            await client.get(HTTP_URL)


@pytest.mark.parametrize(
    ("opt_in", "events", "logs"),
    [
        pytest.param(None, 1, 0, id="unset"),
        pytest.param("logs", 0, 1, id="logs"),
        pytest.param("logs/dup", 1, 1, id="logs-dup"),
    ],
)
async def test_the_exception_that_ends_an_http_call_follows_the_signal_opt_in(
    otel: Otel,
    clock: FakeClock,
    monkeypatch: pytest.MonkeyPatch,
    opt_in: str | None,
    events: int,
    logs: int,
) -> None:
    """OTEL_SEMCONV_EXCEPTION_SIGNAL_OPT_IN: a span event by default, one WARN
    ``http.client.request.exception`` log record (on the last attempt's span, with the
    exception fully qualified and redacted) with ``logs``, both with ``logs/dup``."""
    if opt_in is None:
        monkeypatch.delenv("OTEL_SEMCONV_EXCEPTION_SIGNAL_OPT_IN", raising=False)
    else:
        monkeypatch.setenv("OTEL_SEMCONV_EXCEPTION_SIGNAL_OPT_IN", opt_in)
    await _failing_get(otel.instrument(logs=True), clock)
    attempts = [span for span in otel.finished() if span.kind == CLIENT]
    assert len(attempts) == 4  # the transport's default policy
    found = [
        event for span in otel.finished() for event in span.events if event.name == "exception"
    ]
    assert len(found) == events
    records = [data.log_record for data in otel.logs.get_finished_logs()]
    assert len(records) == logs
    for record in records:
        assert record.event_name == "http.client.request.exception"
        assert record.severity_number == SeverityNumber.WARN
        attributes = dict(record.attributes or {})
        assert attributes["exception.type"] == "httpx.ConnectError"
        assert attributes["error.type"] == "httpx.ConnectError"
        assert attributes["server.address"] == "api.test"
        assert "secret" not in str(attributes)  # the URL's password
        assert record.span_id == attempts[-1].context.span_id
        assert record.trace_id == attempts[-1].context.trace_id


async def test_a_coroutine_call_that_fails_logs_one_call_exception(
    otel: Otel, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With ``logs``, a coroutine call that fails after its retries is one WARN
    ``retrymw.call.exception`` record, and its spans keep no exception event."""
    monkeypatch.setenv("OTEL_SEMCONV_EXCEPTION_SIGNAL_OPT_IN", "logs")
    retrier = Retrier(
        RetryPolicy(attempts=3), budget=None, instruments=[otel.instrument(logs=True)], clock=clock
    )

    async def fetch() -> None:
        raise ConnectionError("reset")

    with pytest.raises(ConnectionError):
        await retrier.call(fetch)
    (record,) = [data.log_record for data in otel.logs.get_finished_logs()]
    assert record.event_name == "retrymw.call.exception"
    assert record.severity_number == SeverityNumber.WARN
    assert dict(record.attributes or {})["exception.type"] == "ConnectionError"
    assert not [
        event for span in otel.finished() for event in span.events if event.name == "exception"
    ]


async def test_error_type_is_the_qualified_class_name(otel: Otel, clock: FakeClock) -> None:
    """``error.type`` on the spans and on ``http.client.request.duration`` is the exception's
    canonical class name, module included (``httpx.ConnectError``)."""
    await _failing_get(otel.instrument(), clock)
    spans = otel.finished()
    assert {dict(span.attributes or {})["error.type"] for span in spans} == {"httpx.ConnectError"}
    points = otel.points("http.client.request.duration")
    assert {point.attributes["error.type"] for point in points} == {"httpx.ConnectError"}
    assert trace.get_current_span() is trace.INVALID_SPAN


async def test_metrics_only_beside_the_httpx_instrumentation_one_point_per_attempt(
    otel: Otel, clock: FakeClock, server: FlakyServer, semconv: str
) -> None:
    """retrymw with metrics and no traces: still one ``http.client.request.duration`` point per
    attempt (retrymw's), and the instrumentation below makes no span of its own either."""
    url = server.script(Step(503), Step(200), cycle=True)
    inner = _contrib().AsyncOpenTelemetryTransport(
        httpx.AsyncHTTPTransport(),
        tracer_provider=otel.tracer_provider,
        meter_provider=otel.meter_provider,
    )
    instrument = OpenTelemetryInstrument(trace.NoOpTracerProvider(), otel.meter_provider)
    transport = retrymw.httpx.AsyncRetryTransport(
        inner, budget=None, instruments=[instrument], clock=clock
    )
    async with httpx.AsyncClient(transport=transport) as client:
        for _ in range(3):
            assert (await client.get(url)).status_code == 200
    points = [point for name in DURATIONS for point in otel.points(name)]
    assert sum(point.count for point in points) == len(server.received(url)) == 6
    assert otel.finished() == []
