"""Issue 31, streams: the attempt that produced the response a call returns lasts until its body
is read or closed. A body cut or stalled is a failed attempt (and a failed call) in every view:
the span, retrymw's metrics on both paths, ``http.client.request.duration``; a body read to its
end records its first byte and size; the transport's stall and first-byte limits end a body
that goes quiet.

Real loopback servers (`tests.http_server`) send the bodies; the OpenTelemetry SDK (in memory)
and prometheus_client (a fresh registry) record them. Waits are the server's, cut short when it
stops; the limits tested are far below every generous deadline.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

import retrymw.httpx
from retrymw import (
    AttemptFinished,
    CallFinished,
    CircuitBreaker,
    ConfigError,
    PerTarget,
    RetryPolicy,
)
from retrymw.instrumentation import OpenTelemetryInstrument, PrometheusInstrument
from retrymw.instrumentation import _names as names
from retrymw.testing import FakeClock, RecordingInstrument
from tests.http_server import FlakyServer, Step

pytestmark = pytest.mark.anyio

#: Sixty body chunks of ten bytes.
BODY = b"".join(b"chunk-%03d\n" % number for number in range(60))


@pytest.fixture
def server() -> Iterator[FlakyServer]:
    """The scripted loopback server, stopped at teardown."""
    flaky = FlakyServer()
    yield flaky
    flaky.stop()


class Views:
    """Every view of the calls: OTel spans and metrics, Prometheus, the events themselves."""

    def __init__(self) -> None:
        self.spans = InMemorySpanExporter()
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.spans))
        self.reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.reader])
        self.registry = CollectorRegistry()
        self.recorder = RecordingInstrument()

    def instruments(self, *, otel: bool = True) -> list[Any]:
        """Prometheus, and OTel with a recorder (or Prometheus alone)."""
        found: list[Any] = [PrometheusInstrument(self.registry)]
        if otel:
            found.append(self.recorder)
            found.append(OpenTelemetryInstrument(self.tracer_provider, self.meter_provider))
        return found

    def client_span(self) -> ReadableSpan:
        (span,) = [s for s in self.spans.get_finished_spans() if s.kind == SpanKind.CLIENT]
        return span

    def call_span(self) -> ReadableSpan:
        (span,) = [s for s in self.spans.get_finished_spans() if s.kind == SpanKind.INTERNAL]
        return span

    def prometheus(self, metric: str, **labels: str) -> float:
        value = self.registry.get_sample_value(metric, labels)
        return 0.0 if value is None else value

    def points(self, name: str) -> list[Any]:
        data = self.reader.get_metrics_data()
        return [
            point
            for resource in (data.resource_metrics if data else ())
            for scope in resource.scope_metrics
            for metric in scope.metrics
            if metric.name == name
            for point in metric.data.data_points
        ]

    def close(self) -> None:
        self.tracer_provider.shutdown()
        self.meter_provider.shutdown()


@pytest.fixture
def views() -> Iterator[Views]:
    found = Views()
    yield found
    found.close()


def _transport(
    views: Views,
    clock: FakeClock,
    *,
    otel: bool = True,
    stall_timeout: float | None = None,
    first_byte_timeout: float | None = None,
) -> Any:
    return retrymw.httpx.AsyncRetryTransport(
        policy=RetryPolicy(name="p", attempts=3),
        budget=None,
        instruments=views.instruments(otel=otel),
        clock=clock,
        stall_timeout=stall_timeout,
        first_byte_timeout=first_byte_timeout,
    )


def _attempts(views: Views, outcome: str, error_type: str = "") -> float:
    return views.prometheus(
        names.count_of(names.ATTEMPT_DURATION),
        retrymw_policy="p",
        retrymw_target=views.target,  # type: ignore[attr-defined]
        retrymw_attempt_outcome=outcome,
        error_type=error_type,
    )


def _calls(views: Views, outcome: str) -> float:
    return views.prometheus(
        names.count_of(names.CALL_DURATION),
        retrymw_policy="p",
        retrymw_target=views.target,  # type: ignore[attr-defined]
        retrymw_outcome=outcome,
    )


async def _read_stream(transport: Any, url: str) -> tuple[int, Exception | None]:
    """Stream ``url``'s body chunk by chunk; the bytes read and the error that ended it."""
    read = 0
    async with (
        httpx.AsyncClient(transport=transport) as client,
        client.stream("GET", url) as response,
    ):
        assert response.status_code == 200
        try:
            async for chunk in response.aiter_raw():
                read += len(chunk)
        except httpx.HTTPError as error:
            return read, error
    return read, None


@pytest.mark.parametrize(
    "otel",
    [
        pytest.param(True, id="full-path-with-otel"),
        pytest.param(False, id="fast-path-prometheus-only"),
    ],
)
async def test_a_stream_cut_midway_is_a_failed_attempt_in_every_view(
    server: FlakyServer, views: Views, clock: FakeClock, otel: bool
) -> None:
    """40 of the announced bytes, then the connection drops: the caller gets an error, and the
    attempt is ``failed`` (cut) and the call a ``failure`` wherever they are counted, not the
    success its 200 head said."""
    url = server.script(Step(200, body=BODY[:400], truncate=True))
    views.target = url.split("/")[2]  # type: ignore[attr-defined]
    read, error = await _read_stream(_transport(views, clock, otel=otel), url)
    assert isinstance(error, httpx.RemoteProtocolError)
    assert read == 400
    assert _attempts(views, "failed", "RemoteProtocolError") == 1
    assert _attempts(views, "success") == 0
    assert _calls(views, "failure") == 1
    assert _calls(views, "success") == 0
    if not otel:
        return
    (attempt,) = views.recorder.of_type(AttemptFinished)
    assert (attempt.attempt_outcome, attempt.error_type) == ("failed", "RemoteProtocolError")
    assert attempt.body == ("cut", 400, attempt.body.time_to_first_byte)
    (call,) = views.recorder.of_type(CallFinished)
    assert call.outcome == "failure"
    span = views.client_span()
    attributes = dict(span.attributes or {})
    assert attributes[names.ATTR_RESPONSE_BODY_STATE] == "cut"
    assert attributes[names.ATTR_HTTP_RESPONSE_BODY_SIZE] == 400
    assert attributes[names.ATTR_ATTEMPT_OUTCOME] == "failed"
    assert attributes["error.type"] == "httpx.RemoteProtocolError"
    assert span.status.status_code == StatusCode.ERROR
    assert [event.name for event in span.events] == ["exception"]
    assert dict(views.call_span().attributes or {})["retrymw.outcome"] == "failure"
    (point,) = views.points(names.HTTP_CLIENT_REQUEST_DURATION)
    assert point.attributes["error.type"] == "httpx.RemoteProtocolError"


async def test_a_stalled_stream_ends_by_the_stall_limit_as_a_failed_attempt(
    server: FlakyServer, views: Views, clock: FakeClock
) -> None:
    """A body that sends some bytes, then nothing: the transport's ``stall_timeout`` ends the
    read with ``ReadTimeout``, and the attempt is ``failed`` with its body ``stalled``."""
    url = server.script(Step(200, body=b"x" * 3, pace=30.0))  # one byte, then a 30 s gap
    views.target = url.split("/")[2]  # type: ignore[attr-defined]
    transport = _transport(views, clock, stall_timeout=0.2)
    read, error = await _read_stream(transport, url)
    assert isinstance(error, httpx.ReadTimeout)
    assert "stalled" in str(error)
    assert read == 1
    attributes = dict(views.client_span().attributes or {})
    assert attributes[names.ATTR_RESPONSE_BODY_STATE] == "stalled"
    assert attributes[names.ATTR_HTTP_RESPONSE_BODY_SIZE] == 1
    assert attributes[names.ATTR_ATTEMPT_OUTCOME] == "failed"
    assert _attempts(views, "failed", "ReadTimeout") == 1
    assert _calls(views, "failure") == 1


async def test_the_first_byte_limit_ends_a_body_that_never_starts(
    server: FlakyServer, views: Views, clock: FakeClock
) -> None:
    """Headers, then silence: ``first_byte_timeout`` ends the read, no first byte recorded."""
    url = server.script(Step(200, body=BODY, stall=30.0))
    views.target = url.split("/")[2]  # type: ignore[attr-defined]
    transport = _transport(views, clock, first_byte_timeout=0.2)
    read, error = await _read_stream(transport, url)
    assert isinstance(error, httpx.ReadTimeout)
    assert "first byte" in str(error)
    assert read == 0
    attributes = dict(views.client_span().attributes or {})
    assert attributes[names.ATTR_RESPONSE_BODY_STATE] == "stalled"
    assert names.ATTR_RESPONSE_TIME_TO_FIRST_BYTE not in attributes


async def test_a_stream_read_to_its_end_records_its_first_byte_and_size(
    server: FlakyServer, views: Views, clock: FakeClock
) -> None:
    """A chunked stream read to its end: a successful attempt, ``completed``, its size, its
    time to first byte on the span and in the metrics; the CLIENT span ends after the body."""
    url = server.script(Step(200, body=BODY, chunked=True))
    views.target = url.split("/")[2]  # type: ignore[attr-defined]
    read, error = await _read_stream(_transport(views, clock), url)
    assert (read, error) == (len(BODY), None)
    span = views.client_span()
    attributes = dict(span.attributes or {})
    assert attributes[names.ATTR_RESPONSE_BODY_STATE] == "completed"
    assert attributes[names.ATTR_HTTP_RESPONSE_BODY_SIZE] == len(BODY)
    first_byte = attributes[names.ATTR_RESPONSE_TIME_TO_FIRST_BYTE]
    assert isinstance(first_byte, float)
    assert first_byte >= 0
    assert attributes[names.ATTR_ATTEMPT_OUTCOME] == "success"
    assert span.status.status_code == StatusCode.UNSET
    assert _attempts(views, "success") == 1
    (size,) = views.points(names.HTTP_CLIENT_RESPONSE_BODY_SIZE)
    assert size.sum == len(BODY)
    assert len(views.points(names.RESPONSE_TIME_TO_FIRST_BYTE)) == 1


async def test_a_stream_closed_early_is_not_a_failure(
    server: FlakyServer, views: Views, clock: FakeClock
) -> None:
    """The caller closes the response before reading its body: ``closed``, a success. (Left
    half-read, an async generator warns under trio, httpx's own ones first.)"""
    url = server.script(Step(200, body=BODY, chunked=True, pace=0.001))
    views.target = url.split("/")[2]  # type: ignore[attr-defined]
    async with (
        httpx.AsyncClient(transport=_transport(views, clock)) as client,
        client.stream("GET", url) as response,
    ):
        assert response.status_code == 200
    attributes = dict(views.client_span().attributes or {})
    assert attributes[names.ATTR_RESPONSE_BODY_STATE] == "closed"
    assert attributes[names.ATTR_ATTEMPT_OUTCOME] == "success"
    assert _calls(views, "success") == 1


def test_the_sync_transport_sees_a_cut_body_too(
    server: FlakyServer, views: Views, clock: FakeClock
) -> None:
    """RetryTransport: the same cut, the same failed attempt."""
    url = server.script(Step(200, body=BODY[:400], truncate=True))
    views.target = url.split("/")[2]  # type: ignore[attr-defined]
    transport = retrymw.httpx.RetryTransport(
        policy=RetryPolicy(name="p", attempts=3),
        budget=None,
        instruments=views.instruments(),
        clock=clock,
    )
    with httpx.Client(transport=transport) as client, pytest.raises(httpx.RemoteProtocolError):
        client.get(url)
    attributes = dict(views.client_span().attributes or {})
    assert attributes[names.ATTR_RESPONSE_BODY_STATE] == "cut"
    assert _attempts(views, "failed", "RemoteProtocolError") == 1
    assert _calls(views, "failure") == 1


@pytest.mark.parametrize(
    ("field", "value"),
    [
        pytest.param("stall_timeout", 0, id="stall-zero"),
        pytest.param("stall_timeout", -1.0, id="stall-negative"),
        pytest.param("first_byte_timeout", float("nan"), id="first-byte-nan"),
        pytest.param("first_byte_timeout", "5", id="first-byte-text"),
    ],
)
def test_body_limits_refuse_what_is_not_a_positive_number(field: str, value: Any) -> None:
    """A limit that is not a positive number of seconds is refused, naming the field."""
    bad: dict[str, Any] = {field: value}
    with pytest.raises(ConfigError, match=field):
        retrymw.httpx.RetryTransport(instruments=(), **bad)
    good: dict[str, Any] = {field: 30.0}
    assert getattr(retrymw.httpx.RetryTransport(instruments=(), **good), field) == 30.0


# -- the body metrics: the same series on both export paths ----------------------------------------

#: The response-body metrics' Prometheus names (`names.BODY_METRICS`).
BODY_NAMES = tuple(spec.prometheus for spec in names.BODY_METRICS)


def _body_series(
    registry: CollectorRegistry,
) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """The body metrics' samples of a registry's exposition, by name and sorted labels; a label
    with an empty value is no label (as Prometheus stores it), ``le`` a number."""
    found: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    for family in text_string_to_metric_families(generate_latest(registry).decode()):
        for sample in family.samples:
            if sample.name.startswith(BODY_NAMES):
                labels = {key: value for key, value in sample.labels.items() if value}
                if "le" in labels:
                    labels["le"] = repr(float(labels["le"]))
                found[sample.name, tuple(sorted(labels.items()))] = sample.value
    return found


class BothPaths:
    """A registry fed by `PrometheusInstrument`, one fed by OpenTelemetry's Prometheus exporter
    from `OpenTelemetryInstrument` (metrics only), and a transport for each."""

    def __init__(self, clock: FakeClock, *, breaker: bool) -> None:
        from opentelemetry.exporter.prometheus import PrometheusMetricReader

        self.direct, self.translated = CollectorRegistry(), CollectorRegistry()
        reader = PrometheusMetricReader(
            disable_target_info=True, scope_info_enabled=False, registry=self.translated
        )
        self.meter_provider = MeterProvider(metric_readers=[reader])
        self.transports = [
            retrymw.httpx.RetryTransport(
                policy=RetryPolicy(name="p", attempts=3),
                # With and without a breaker: either way every call is observed in full.
                breaker=PerTarget(CircuitBreaker(name="p", clock=clock)) if breaker else None,
                instruments=[instrument],
                clock=clock,
            )
            for instrument in (
                PrometheusInstrument(self.direct),
                OpenTelemetryInstrument(meter_provider=self.meter_provider),
            )
        ]

    def get(self, url: str) -> None:
        """The same request through each path, its body read (an error of the body kept)."""
        for transport in self.transports:
            with httpx.Client(transport=transport) as client, contextlib.suppress(httpx.HTTPError):
                client.get(url)

    def close(self) -> None:
        self.meter_provider.shutdown()


@pytest.mark.parametrize(
    ("step", "error_type"),
    [
        pytest.param(Step(200, body=BODY, chunked=True), None, id="completed"),
        pytest.param(
            Step(200, body=BODY[:400], truncate=True), "httpx.RemoteProtocolError", id="cut"
        ),
        pytest.param(Step(503, body=b"busy"), "503", id="error-status"),
    ],
)
def test_the_body_metrics_are_the_same_series_on_both_paths(
    server: FlakyServer, clock: FakeClock, step: Step, error_type: str | None
) -> None:
    """``http_client_response_body_size_bytes`` and
    ``retrymw_response_time_to_first_byte_seconds``: the OpenTelemetry path recorded them, the
    Prometheus path did not. Now the same series (labels by the HTTP semantic conventions, as
    ``http.client.request.duration``'s), the same size buckets and counts, on both."""
    url = server.script(step)
    paths = BothPaths(clock, breaker=True)
    try:
        paths.get(url)
        direct, translated = _body_series(paths.direct), _body_series(paths.translated)
    finally:
        paths.close()
    assert translated, "the OpenTelemetry path records the body"
    assert set(direct) == set(translated)
    size = names.RESPONSE_BODY_SIZE.prometheus
    for key, value in translated.items():
        if key[0].startswith(size) or key[0].endswith("_count"):  # times differ, sizes do not
            assert direct[key] == value, key
    counts = [key for key in direct if key[0] == size + "_count"]
    assert len(counts) == 1
    labels = dict(counts[0][1])
    port = url.split("/")[2].rsplit(":", 1)[1]
    assert labels == {
        "http_request_method": "GET",
        "server_address": "127.0.0.1",
        "server_port": port,
        "url_scheme": "http",
        "http_response_status_code": str(step.status),
        "network_protocol_version": "1.1",
        **({"error_type": error_type} if error_type else {}),
    }
    sizes = {name: value for (name, _), value in direct.items() if name.startswith(size + "_s")}
    assert sizes == {size + "_sum": float(len(step.body))}


def test_a_body_is_recorded_without_a_breaker_too(server: FlakyServer, clock: FakeClock) -> None:
    """Without a breaker, a transport whose only instrument is Prometheus records the body's
    series as the OpenTelemetry path does: an instrument that observes calls keeps every call
    off the bare first attempt (it once took it, and reported no body)."""
    url = server.script(Step(200, body=BODY, chunked=True))
    paths = BothPaths(clock, breaker=False)
    try:
        paths.get(url)
        direct, translated = _body_series(paths.direct), _body_series(paths.translated)
    finally:
        paths.close()
    assert translated
    assert set(direct) == set(translated)
