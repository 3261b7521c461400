"""Issue 18: telemetry that costs what it emits. What is and is not emitted in each case.

- calls and attempts are counted by the duration histograms' ``_count``: no
  ``retrymw_calls_total`` or ``retrymw_attempts_total`` (OTel ``retrymw.calls``,
  ``retrymw.attempts``) is recorded, and a first-attempt success is three observations;

- a call that was not retried is one span (no attempt span), HTTP keeps its CLIENT span;
- a retried call has a span per attempt (the first one written when it is retried);
- a backoff wait is told by the span of the attempt that follows it
  (``retrymw.backoff.delay``), never a span; a wait that no attempt follows is a
  ``retrymw.backoff`` event on the call span;
- a retried exception is its attempt span's ``exception.type`` and ``exception.message``; only
  the one ending the call is an ``exception`` event, with its (redacted) stack trace.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from unittest.mock import ANY

import anyio
import httpx
import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from retrymw import CircuitOpenError, RetryPolicy
from retrymw.httpx import AsyncRetryTransport
from retrymw.instrumentation import OpenTelemetryInstrument
from retrymw.instrumentation import _names as names
from retrymw.testing import FakeClock
from tests.instrumentation import POLICY, retrier

pytestmark = pytest.mark.anyio

SECRET_URL = "http://user:hunter2@api.test/x?token=abc"


@dataclass
class Spans:
    exporter: InMemorySpanExporter
    instrument: OpenTelemetryInstrument

    def finished(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())


@pytest.fixture
def spans() -> Iterator[Spans]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield Spans(exporter, OpenTelemetryInstrument(tracer_provider=provider))
    provider.shutdown()


def _events(span: ReadableSpan, name: str) -> list[dict[str, Any]]:
    return [dict(event.attributes or {}) for event in span.events if event.name == name]


def _flaky(failures: int, error: type[Exception] = ConnectionError) -> Any:
    calls = [0]

    async def fetch() -> str:
        calls[0] += 1
        if calls[0] <= failures:
            raise error(f"refused by {SECRET_URL} (attempt {calls[0]})")
        return "ok"

    return fetch


async def test_success_first_try_is_one_span(spans: Spans, clock: FakeClock) -> None:
    """Nothing retried: the call span alone, with its outcome; no attempt span, no event."""
    assert await retrier(clock, [spans.instrument]).call(_flaky(0)) == "ok"
    (call,) = spans.finished()
    assert call.name == "retrymw fetch"
    assert call.attributes is not None
    assert call.attributes[names.ATTR_OUTCOME] == "success"
    assert call.attributes[names.ATTR_ATTEMPT_COUNT] == 1
    assert list(call.events) == []


async def test_a_call_not_retried_runs_its_attempt_inside_its_call_span(
    spans: Spans, clock: FakeClock
) -> None:
    """The call span is current while the first attempt runs (a span the user opens there is
    its child), and a call not retried writes no attempt span: one span per call."""
    tracer = spans.instrument._tracer

    async def fetch() -> str:
        with tracer.start_as_current_span("user work"):
            return "ok"

    assert await retrier(clock, [spans.instrument]).call(fetch) == "ok"
    user, call = spans.finished()
    assert call.name == "retrymw fetch"
    assert user.parent is not None
    assert user.parent.span_id == call.context.span_id


def test_a_function_call_has_the_same_spans_through_call_sync(
    spans: Spans, clock: FakeClock
) -> None:
    """call_sync draws the same spans: one span when nothing is retried, the user's span its
    child; fail, ok: the first attempt's span written when it is retried, from the call's
    start, and the second attempt's span current while it runs."""
    tracer = spans.instrument._tracer
    failures = [ConnectionError("reset")]

    def fetch() -> str:
        with tracer.start_as_current_span("user work"):
            if failures:
                raise failures.pop()
            return "ok"

    run = retrier(clock, [spans.instrument])
    assert run.call_sync(fetch) == "ok"
    first_user, first, second_user, second, call = spans.finished()
    assert [span.name for span in spans.finished()] == [
        "user work",
        "retrymw.attempt fetch",
        "user work",
        "retrymw.attempt fetch",
        "retrymw fetch",
    ]
    assert first_user.parent is not None
    assert first_user.parent.span_id == call.context.span_id  # inside the call span
    assert second_user.parent is not None
    assert second_user.parent.span_id == second.context.span_id
    assert (call.start_time or 0) <= (first.start_time or 0) <= (first.end_time or 0)
    spans.exporter.clear()
    assert run.call_sync(fetch) == "ok"
    user, call = spans.finished()
    assert user.parent is not None
    assert user.parent.span_id == call.context.span_id
    assert (call.attributes or {})[names.ATTR_ATTEMPT_COUNT] == 1


async def test_retried_call_has_attempt_spans_that_tell_the_waits(
    spans: Spans, clock: FakeClock
) -> None:
    """Fail, fail, ok: three attempt spans (the first from its own start); each wait is on the
    span of the attempt after it, each retried exception on its own attempt's span; no
    events."""
    assert await retrier(clock, [spans.instrument]).call(_flaky(2)) == "ok"
    finished = spans.finished()
    assert [span.name for span in finished] == [
        "retrymw.attempt fetch",
        "retrymw.attempt fetch",
        "retrymw.attempt fetch",
        "retrymw fetch",
    ]
    assert names.EVENT_BACKOFF not in {span.name for span in finished}  # no span per sleep
    *attempts, call = finished
    assert all(span.parent is not None for span in attempts)
    assert {span.parent.span_id for span in attempts if span.parent} == {call.context.span_id}
    assert [(span.attributes or {})[names.ATTR_ATTEMPT] for span in attempts] == [1, 2, 3]
    outcomes = [(span.attributes or {})[names.ATTR_ATTEMPT_OUTCOME] for span in attempts]
    assert outcomes == ["retried", "retried", "success"]
    assert [span.status.status_code for span in attempts] == [
        StatusCode.ERROR,
        StatusCode.ERROR,
        StatusCode.UNSET,
    ]
    # The first attempt's span covers that attempt: it starts with the call, before the wait.
    assert call.start_time is not None
    assert attempts[0].start_time is not None
    assert call.start_time <= attempts[0].start_time <= (attempts[0].end_time or 0)
    assert (attempts[0].end_time or 0) <= (attempts[1].start_time or 0)
    assert [span.events for span in finished] == [(), (), (), ()]  # told by attributes
    waits = [(span.attributes or {}).get(names.ATTR_BACKOFF_DELAY) for span in attempts]
    assert waits == [None, clock.sleeps[0], clock.sleeps[1]]
    assert all(isinstance(wait, float) for wait in waits[1:])
    for attempt in attempts[:2]:
        attributes = attempt.attributes or {}
        assert attributes[names.ATTR_EXCEPTION_TYPE] == "ConnectionError"
        assert "refused by" in str(attributes[names.ATTR_EXCEPTION_MESSAGE])
        assert "hunter2" not in str(attributes[names.ATTR_EXCEPTION_MESSAGE])  # still redacted
        assert names.ATTR_EXCEPTION_STACKTRACE not in attributes  # retried: no stack trace
    assert names.ATTR_EXCEPTION_TYPE not in (attempts[2].attributes or {})


async def test_exhausted_call_keeps_the_escaping_stack_trace(
    spans: Spans, clock: FakeClock
) -> None:
    """The exception that ends the call is recorded in full (redacted), the retried ones not."""
    with pytest.raises(ConnectionError):
        await retrier(clock, [spans.instrument]).call(_flaky(5))
    *attempts, call = spans.finished()
    assert len(attempts) == 3
    assert [_events(span, names.EVENT_EXCEPTION) for span in attempts[:2]] == [[], []]
    (escaping,) = _events(attempts[2], names.EVENT_EXCEPTION)
    assert escaping[names.ATTR_EXCEPTION_TYPE] == "ConnectionError"
    assert "fetch" in str(escaping[names.ATTR_EXCEPTION_STACKTRACE])
    assert "hunter2" not in str(escaping[names.ATTR_EXCEPTION_STACKTRACE])
    assert [(span.attributes or {})[names.ATTR_ATTEMPT_OUTCOME] for span in attempts][-1] == (
        "failed"
    )
    assert call.status.status_code is StatusCode.ERROR
    assert _events(call, names.EVENT_BACKOFF) == []  # both waits are on attempts 2 and 3
    assert [(span.attributes or {}).get(names.ATTR_BACKOFF_DELAY) for span in attempts][1:] == (
        clock.sleeps
    )


async def test_a_wait_that_no_attempt_follows_is_an_event_on_the_call_span(
    spans: Spans, clock: FakeClock
) -> None:
    """Cancelled during its first wait: no attempt span tells that wait, so the call span
    carries it as a ``retrymw.backoff`` event, timed at the start of the wait."""
    with anyio.CancelScope() as scope:

        async def fetch() -> None:
            scope.cancel()  # lands at the next checkpoint: the wait
            raise ConnectionError("refused")

        await retrier(clock, [spans.instrument]).call(fetch)
    attempt, call = spans.finished()
    assert (attempt.attributes or {})[names.ATTR_ATTEMPT_OUTCOME] == "retried"
    assert (call.attributes or {})[names.ATTR_OUTCOME] == "cancelled"
    (wait,) = _events(call, names.EVENT_BACKOFF)
    assert wait == {
        names.ATTR_BACKOFF_DELAY: clock.sleeps[0],
        names.ATTR_ATTEMPT: 2,
        names.ATTR_ERROR_TYPE: "ConnectionError",
    }
    (event,) = [event for event in call.events if event.name == names.EVENT_BACKOFF]
    assert (attempt.end_time or 0) <= event.timestamp <= (call.end_time or 0)


async def test_one_attempt_that_fails_is_recorded_on_the_call_span(
    spans: Spans, clock: FakeClock
) -> None:
    """Not retried (not a retryable error): one span, carrying the exception with its trace."""
    policy = RetryPolicy(name=POLICY, attempts=3, retry_on=[ConnectionError])
    with pytest.raises(KeyError):
        await retrier(clock, [spans.instrument], policy=policy).call(_flaky(1, KeyError))
    (call,) = spans.finished()
    (exception,) = _events(call, names.EVENT_EXCEPTION)
    assert exception[names.ATTR_EXCEPTION_TYPE] == "KeyError"
    assert "fetch" in str(exception[names.ATTR_EXCEPTION_STACKTRACE])
    assert call.status.status_code is StatusCode.ERROR
    assert (call.attributes or {})[names.ATTR_ERROR_TYPE] == "KeyError"


async def test_http_keeps_a_client_span_per_attempt(spans: Spans, clock: FakeClock) -> None:
    """HTTP 200: the semantic-convention CLIENT span and the call span, opened before it so that
    it would parent a retry (issue 31: one trace per call); 503, 200: two CLIENT spans and the
    call span, which holds the backoff."""
    statuses = [200, 503, 200]

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(statuses.pop(0))

    transport = AsyncRetryTransport(
        httpx.MockTransport(handler),
        policy=RetryPolicy(name=POLICY, attempts=3),
        instruments=[spans.instrument],
        clock=clock,
    )
    async with httpx.AsyncClient(transport=transport) as client:
        assert (await client.get("http://api.test/a")).status_code == 200
        first = [(span.name, span.kind) for span in spans.finished()]
        spans.exporter.clear()
        assert (await client.get("http://api.test/b")).status_code == 200
    assert first == [("GET", SpanKind.CLIENT), ("retrymw GET", SpanKind.INTERNAL)]
    finished = spans.finished()
    assert [(span.name, span.kind) for span in finished] == [
        ("GET", SpanKind.CLIENT),
        ("GET", SpanKind.CLIENT),
        ("retrymw GET", SpanKind.INTERNAL),
    ]
    assert _events(finished[-1], names.EVENT_BACKOFF) == []
    assert (finished[0].attributes or {})[names.ATTR_ERROR_TYPE] == "503"
    assert (finished[1].attributes or {})[names.ATTR_BACKOFF_DELAY] == clock.sleeps[0]


async def test_exemplars_follow_the_current_span(clock: FakeClock) -> None:
    """The exemplar cache never serves a previous span's ids, nor ids for an unsampled span."""
    from opentelemetry.sdk.trace.sampling import ALWAYS_OFF
    from prometheus_client import CollectorRegistry
    from prometheus_client.openmetrics.exposition import generate_latest

    from retrymw.instrumentation import PrometheusInstrument

    provider, unsampled = TracerProvider(), TracerProvider(sampler=ALWAYS_OFF)
    seen: list[set[str]] = []
    for tracer in (provider.get_tracer("a"), provider.get_tracer("b"), unsampled.get_tracer("c")):
        registry = CollectorRegistry()
        with tracer.start_as_current_span("request") as span:
            await retrier(clock, [PrometheusInstrument(registry)]).call(_flaky(1))
        text = generate_latest(registry).decode()  # type: ignore[no-untyped-call]
        ids = {part.split('"', 1)[0] for part in text.split('trace_id="')[1:]}
        carriers = {line.split("{", 1)[0] for line in text.splitlines() if " # {" in line}
        assert carriers <= {  # the latency histograms only: no counter, not the attempts
            "retrymw_call_duration_seconds_bucket",
            "retrymw_attempt_duration_seconds_bucket",
            "retrymw_backoff_duration_seconds_bucket",
        }
        seen.append(ids)
        if span.get_span_context().trace_flags.sampled:
            assert ids == {format(span.get_span_context().trace_id, "032x")}
    assert seen[2] == set()
    assert seen[0] != seen[1]
    provider.shutdown()
    unsampled.shutdown()


# -- metric records: calls and attempts are counted by the duration histograms (no counters) ----

Record = tuple[str, tuple[str, ...], Any]


@pytest.fixture
def records(monkeypatch: pytest.MonkeyPatch) -> list[Record]:
    """Every prometheus_client histogram observation and counter increment, in order:
    (metric, label values, value)."""
    from prometheus_client import Counter, Histogram

    made: list[Record] = []

    def recording(kind: Any, method: str) -> None:
        original = getattr(kind, method)

        def record(self: Any, value: float = 1, exemplar: Any = None) -> None:
            made.append((self._name, tuple(self._labelvalues), value))
            original(self, value, exemplar)

        monkeypatch.setattr(kind, method, record)

    recording(Histogram, "observe")
    recording(Counter, "inc")
    return made


def _breaker(clock: FakeClock) -> Any:
    from retrymw import CircuitBreaker

    return CircuitBreaker(name="db", failure_threshold=1, recovery_timeout="30s", clock=clock)


def _attempt(outcome: str, error: str = "") -> Record:
    return ("retrymw_attempt_duration_seconds", (POLICY, "fetch", outcome, error), ANY)


def _call(outcome: str, attempts: int) -> list[Record]:
    records: list[Record] = [("retrymw_call_duration_seconds", (POLICY, "fetch", outcome), ANY)]
    if attempts != 1:  # one attempt is the call histogram's _count less the attempts' _count
        records.append(("retrymw_call_attempts", (POLICY, "fetch", outcome), attempts))
    return records


_BACKOFF: Record = ("retrymw_backoff_duration_seconds", (POLICY, "fetch"), ANY)
_RETRIED = _attempt("retried", "ConnectionError")

#: What each case records through `PrometheusInstrument`, in order.
_PROMETHEUS_RECORDS: dict[str, list[Record]] = {
    # Two observations, no counter.
    "success at once": [_attempt("success"), *_call("success", 1)],
    "retried success": [
        *(_RETRIED, _BACKOFF) * 2,
        _attempt("success"),
        *_call("success", 3),
    ],
    "exhausted": [
        *(_RETRIED, _BACKOFF) * 2,
        _attempt("failed", "ConnectionError"),
        ("retrymw_retries_denied", (POLICY, "fetch", "max_attempts"), 1),
        *_call("exhausted", 3),
    ],
    # Refused before any attempt: the call alone, with 0 attempts.
    "circuit-open refusal": _call("circuit_open", 0),
}


async def _run_case(case: str, clock: FakeClock, instruments: list[Any], between: Any) -> None:
    """Run one case; ``between()`` is called just before the call whose records count."""
    if case == "circuit-open refusal":
        runner = retrier(clock, instruments, breaker=_breaker(clock))
        with pytest.raises(ConnectionError):
            await runner.call(_flaky(99))  # opens the circuit
        between()
        with pytest.raises(CircuitOpenError):
            await runner.call(_flaky(0))
        return
    runner = retrier(clock, instruments)
    between()
    if case == "exhausted":
        with pytest.raises(ConnectionError):
            await runner.call(_flaky(5))
    else:
        assert await runner.call(_flaky(2 if case == "retried success" else 0)) == "ok"


@pytest.mark.parametrize("case", list(_PROMETHEUS_RECORDS))
async def test_prometheus_records_exactly_these_observations(
    case: str, records: list[Record], clock: FakeClock
) -> None:
    """Calls and attempts are counted by the duration histograms' ``_count``: neither counter
    (``retrymw_calls_total``, ``retrymw_attempts_total``) is incremented, nor exported."""
    from prometheus_client import CollectorRegistry, generate_latest

    from retrymw.instrumentation import PrometheusInstrument

    registry = CollectorRegistry()
    await _run_case(case, clock, [PrometheusInstrument(registry)], records.clear)
    assert records == _PROMETHEUS_RECORDS[case]
    exposition = generate_latest(registry).decode()
    assert "retrymw_calls_total" not in exposition
    assert "retrymw_attempts_total" not in exposition
    assert names.count_of(names.CALL_DURATION) + "{" in exposition


_TRIMMED = {"retrymw.call.duration", "retrymw.call.attempts", "retrymw.attempt.duration"}
_BUDGET = "retrymw.retry_budget.available"
_DENIED = "retrymw.retries.denied"

#: The OTel instruments each case records into, and how many calls and attempts they count.
_OTEL_RECORDS: dict[str, tuple[set[str], int, int]] = {
    # One attempt: no retrymw.call.attempts record (the call's count says it). The target's
    # first call also records its budget's denial reason at 0 (issue 31: from creation).
    "success at once": (
        {"retrymw.call.duration", "retrymw.attempt.duration", _BUDGET, _DENIED},
        1,
        1,
    ),
    "retried success": ({*_TRIMMED, _BUDGET, "retrymw.backoff.duration", _DENIED}, 1, 3),
    "exhausted": ({*_TRIMMED, _BUDGET, "retrymw.backoff.duration", "retrymw.retries.denied"}, 1, 3),
    # No attempt, so no budget reading either.
    "circuit-open refusal": ({"retrymw.call.duration", "retrymw.call.attempts"}, 1, 0),
}


@pytest.mark.parametrize("case", list(_OTEL_RECORDS))
async def test_otel_records_exactly_these_instruments(case: str, clock: FakeClock) -> None:
    """The reader sees the duration histograms count calls and attempts; ``retrymw.calls`` and
    ``retrymw.attempts`` do not exist."""
    from opentelemetry.sdk.metrics import (
        Counter,
        Histogram,
        MeterProvider,
        ObservableGauge,
        _Gauge,
    )
    from opentelemetry.sdk.metrics.export import AggregationTemporality, InMemoryMetricReader
    from opentelemetry.sdk.metrics.view import DropAggregation, View

    # Delta: a collection holds only what was recorded since the previous one (`between`).
    delta = AggregationTemporality.DELTA
    reader = InMemoryMetricReader(
        preferred_temporality={Counter: delta, Histogram: delta, _Gauge: delta}
    )
    # The fleet's observable gauges read whatever fleets this process has open: not ours.
    drop_fleet = View(instrument_type=ObservableGauge, aggregation=DropAggregation())
    provider = MeterProvider(metric_readers=[reader], views=[drop_fleet])
    instrument = OpenTelemetryInstrument(meter_provider=provider)
    await _run_case(case, clock, [instrument], reader.get_metrics_data)
    data = reader.get_metrics_data()
    assert data is not None
    found: dict[str, list[Any]] = {
        metric.name: list(metric.data.data_points)
        for resource in data.resource_metrics
        for scope in resource.scope_metrics
        for metric in scope.metrics
        if metric.data.data_points
    }
    expected, calls, attempts = _OTEL_RECORDS[case]
    assert set(found) == expected
    assert sum(point.count for point in found["retrymw.call.duration"]) == calls
    assert sum(point.count for point in found.get("retrymw.attempt.duration", ())) == attempts
    provider.shutdown()


async def test_otel_attribute_sets_are_right_past_the_kept_ones(
    clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Metric attribute sets are built once per combination and shared by later records, up to
    a bound; past it each record builds its own, and every point keeps its own attributes."""
    from opentelemetry.sdk.metrics import MeterProvider, ObservableGauge
    from opentelemetry.sdk.metrics.export import HistogramDataPoint, InMemoryMetricReader
    from opentelemetry.sdk.metrics.view import DropAggregation, View

    from retrymw.instrumentation._otel import meters

    monkeypatch.setattr(meters, "_ATTRIBUTE_SETS_KEPT", 3)
    reader = InMemoryMetricReader()
    drop_fleet = View(instrument_type=ObservableGauge, aggregation=DropAggregation())
    provider = MeterProvider(metric_readers=[reader], views=[drop_fleet])
    instrument = OpenTelemetryInstrument(meter_provider=provider)
    runner = retrier(clock, [instrument], budget=None)
    for target in ("alpha", "beta", "alpha"):
        fetch = _flaky(1)
        fetch.__qualname__ = target
        assert await runner.call(fetch) == "ok"
    assert len(instrument._attributes) == 3  # alpha's three sets; beta's built each time
    data = reader.get_metrics_data()
    assert data is not None
    points = {
        (metric.name, tuple(sorted((point.attributes or {}).items()))): point.count
        for resource in data.resource_metrics
        for scope in resource.scope_metrics
        for metric in scope.metrics
        if metric.name in ("retrymw.attempt.duration", "retrymw.call.duration")
        for point in metric.data.data_points
        if isinstance(point, HistogramDataPoint)
    }

    def key(metric: str, target: str, **extra: str) -> tuple[str, tuple[tuple[str, str], ...]]:
        attributes = {names.ATTR_POLICY: POLICY, names.ATTR_TARGET: target, **extra}
        return metric, tuple(sorted(attributes.items()))

    retried = {names.ATTR_ATTEMPT_OUTCOME: "retried", names.ATTR_ERROR_TYPE: "ConnectionError"}
    expected = {}
    for target, calls in (("alpha", 2), ("beta", 1)):
        expected[key("retrymw.attempt.duration", target, **retried)] = calls
        success = {names.ATTR_ATTEMPT_OUTCOME: "success"}
        expected[key("retrymw.attempt.duration", target, **success)] = calls
        expected[key("retrymw.call.duration", target, **{names.ATTR_OUTCOME: "success"})] = calls
    assert points == expected
