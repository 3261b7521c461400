"""``network.protocol.version`` on HTTP attempt spans and ``http.client.request.duration``.

The HTTP semantic conventions want the response's HTTP version ("1.1", "2", "3") on the CLIENT
span and on the duration metric. The transports hand each attempt's response to the instruments
on `AttemptFinished.result`; the OpenTelemetry instrument turns httpx's ``Response.http_version``
("HTTP/1.1") into the semconv form. Checked against a real server on 127.0.0.1 with the real SDK.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from retrymw import AttemptFinished, RetryPolicy
from retrymw.httpx import AsyncRetryTransport, RetryTransport
from retrymw.instrumentation import OpenTelemetryInstrument
from retrymw.instrumentation import _names as names
from retrymw.instrumentation._otel.http import protocol_version
from retrymw.testing import FakeClock, RecordingInstrument
from tests.http_server import FlakyServer, Step

pytestmark = pytest.mark.anyio

VERSION = names.ATTR_NETWORK_PROTOCOL_VERSION


class Otel:
    """Real SDK providers with in-memory export, and an instrument on them."""

    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.reader])
        self.instrument = OpenTelemetryInstrument(self.tracer_provider, self.meter_provider)

    def attempt_spans(self) -> list[ReadableSpan]:
        """The CLIENT attempt spans, in the order they ended."""
        spans = self.exporter.get_finished_spans()
        return [span for span in spans if span.kind == SpanKind.CLIENT]

    def duration_points(self) -> list[Any]:
        """The data points of ``http.client.request.duration``."""
        data = self.reader.get_metrics_data()
        assert data is not None
        return [
            point
            for resource in data.resource_metrics
            for scope in resource.scope_metrics
            for metric in scope.metrics
            if metric.name == names.HTTP_CLIENT_REQUEST_DURATION
            for point in metric.data.data_points
        ]

    def shutdown(self) -> None:
        """Release both providers."""
        self.tracer_provider.shutdown()
        self.meter_provider.shutdown()


@pytest.fixture
def otel() -> Iterator[Otel]:
    """Fresh providers per test; the global ones are never touched."""
    telemetry = Otel()
    yield telemetry
    telemetry.shutdown()


@pytest.fixture
def server() -> Iterator[FlakyServer]:
    """A scripted HTTP/1.1 server on 127.0.0.1, stopped at teardown."""
    flaky = FlakyServer()
    yield flaky
    flaky.stop()


async def test_loopback_attempts_carry_http_1_1(
    otel: Otel, server: FlakyServer, clock: FakeClock
) -> None:
    """Every attempt answered over HTTP/1.1 has "1.1" on its span and its duration point; the
    attempt whose connection dropped (no response) has none."""
    url = server.script(Step(drop=True), 503, 200)
    transport = AsyncRetryTransport(
        policy=RetryPolicy(name="p", attempts=3), instruments=[otel.instrument], clock=clock
    )
    async with httpx.AsyncClient(transport=transport) as client:
        response = await client.get(url)
    assert response.status_code == 200
    assert response.http_version == "HTTP/1.1"
    spans = otel.attempt_spans()
    assert [(span.attributes or {}).get(VERSION) for span in spans] == [None, "1.1", "1.1"]
    by_status = {
        point.attributes.get(names.ATTR_HTTP_STATUS_CODE): point.attributes.get(VERSION)
        for point in otel.duration_points()
    }
    assert by_status == {None: None, 503: "1.1", 200: "1.1"}


def test_sync_transport_carries_it_too(otel: Otel, server: FlakyServer, clock: FakeClock) -> None:
    """The sync transport reports the same version on its attempt span and metric."""
    url = server.script(503, 200)
    transport = RetryTransport(
        policy=RetryPolicy(name="p", attempts=2), instruments=[otel.instrument], clock=clock
    )
    with httpx.Client(transport=transport) as client:
        assert client.get(url).status_code == 200
    assert [(span.attributes or {}).get(VERSION) for span in otel.attempt_spans()] == [
        "1.1",
        "1.1",
    ]
    assert {point.attributes.get(VERSION) for point in otel.duration_points()} == {"1.1"}


async def test_httpx2_attempts_get_the_same_client_spans_and_metric(
    otel: Otel, server: FlakyServer, clock: FakeClock
) -> None:
    """httpx2's requests are HTTP requests to the instrument too: a CLIENT span per attempt
    with the semantic-convention attributes, and a duration point per attempt."""
    import httpx2

    from retrymw.httpx2 import AsyncRetryTransport as AsyncRetryTransport2

    url = server.script(503, 200)
    transport = AsyncRetryTransport2(
        policy=RetryPolicy(name="p", attempts=2), instruments=[otel.instrument], clock=clock
    )
    async with httpx2.AsyncClient(transport=transport) as client:
        assert (await client.get(url)).status_code == 200
    spans = otel.attempt_spans()
    assert [span.name for span in spans] == ["GET", "GET"]
    assert [(span.attributes or {}).get(names.ATTR_HTTP_STATUS_CODE) for span in spans] == [
        503,
        200,
    ]
    assert [(span.attributes or {}).get(VERSION) for span in spans] == ["1.1", "1.1"]
    statuses = sorted(
        point.attributes.get(names.ATTR_HTTP_STATUS_CODE) for point in otel.duration_points()
    )
    assert statuses == [200, 503]


async def test_attempt_finished_carries_the_response(server: FlakyServer, clock: FakeClock) -> None:
    """`AttemptFinished.result` is the attempt's response, and ``None`` for an attempt that
    raised, so any instrument can read the protocol version from it."""
    recorder = RecordingInstrument()
    url = server.script(Step(drop=True), 200)
    transport = AsyncRetryTransport(instruments=[recorder], clock=clock)
    async with httpx.AsyncClient(transport=transport) as client:
        response = await client.get(url)
    first, second = [event for event in recorder.events if isinstance(event, AttemptFinished)]
    assert first.result is None
    assert first.exception is not None
    assert second.result is response


@pytest.mark.parametrize(
    ("wire", "expected"),
    [
        pytest.param(b"HTTP/1.1", "1.1", id="http-1.1"),
        pytest.param(b"HTTP/1.0", "1.0", id="http-1.0"),
        pytest.param(b"HTTP/2", "2", id="http-2"),
        pytest.param(b"HTTP/3", "3", id="http-3"),
        pytest.param(b"SPDY/3.1", None, id="unknown-left-out"),
    ],
)
async def test_versions_take_the_semconv_form(
    otel: Otel, clock: FakeClock, wire: bytes, expected: str | None
) -> None:
    """The transport's ``http_version`` extension becomes "1.1", "1.0", "2" or "3"; an unknown
    one is left out rather than exported as an unbounded value."""

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, extensions={"http_version": wire})

    transport = AsyncRetryTransport(
        httpx.MockTransport(handler), instruments=[otel.instrument], clock=clock
    )
    async with httpx.AsyncClient(transport=transport) as client:
        await client.get("http://example.test/")
    ((span),) = otel.attempt_spans()
    assert (span.attributes or {}).get(VERSION) == expected
    ((point),) = otel.duration_points()
    assert point.attributes.get(VERSION) == expected


@pytest.mark.parametrize(
    "result",
    [
        pytest.param(None, id="no-response"),
        pytest.param(object(), id="no-http-version"),
        pytest.param(type("Odd", (), {"http_version": 2})(), id="not-a-string"),
    ],
)
def test_no_version_without_a_readable_one(result: object) -> None:
    """Nothing is reported for an attempt with no response or no textual HTTP version."""
    assert protocol_version(result) is None
