"""Group 6: telemetry next to its primitives replayed (issue 18's yardstick).

Each "replay" case is straight-line code calling exactly the Prometheus and OpenTelemetry
primitives that retrymw 0.x (before issue 18's trims) called for the same path, in the same
order, with the same attributes: the cost those emissions have when nobody adds anything on
top. The replay is frozen on purpose: it does not call retrymw's instruments, so it stays the
same yardstick while the library changes (only the redaction helpers, which any truthful
exporter must run, are retrymw's own). Counted from the code as it was:

- coroutine success, Prometheus: 4 clock reads, 2 exemplar reads, 2 counter increments,
  3 histogram observations, 1 budget success;
- coroutine success, OTel SDK: 2 spans (call, attempt) made current, 5 metric records,
  3 span attributes;
- coroutine fail, fail, ok, OTel SDK: 1 call span, 3 attempt spans, 2 backoff spans, 2 formatted
  and redacted exception events, 11 metric records, the event loop's ``sleep(0)`` twice;
- httpx 200, OTel SDK: a call span and a CLIENT span with the semantic-convention attributes
  and a redacted ``url.full``, context injected into the request, 6 metric records.

Ratios of retrymw to its replay are measured in the same interleaved rounds.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import replace
from typing import Any

import httpx

from ._floor import OtelHttpFloor, otel_floor
from ._harness import Case, Group, Prepared, Unavailable
from ._instruments import OtelSdk, otel_sdk, telemetry
from .cases_core import RESULT, flaky_async, floor_async, ok_async, retrymw_retrier

__all__ = ["groups"]

URL = "http://bench.invalid/item"
POLICY = "default"


def _check(result: Any) -> None:
    value = result.status_code if isinstance(result, httpx.Response) else result
    if value not in (RESULT, 200):
        raise AssertionError(f"expected {RESULT} or a 200, got {result!r}")


def _names() -> Any:
    try:
        from retrymw.instrumentation import _names
    except ImportError as error:  # pragma: no cover - the package is the one benchmarked
        raise Unavailable(str(error)) from None
    return _names


# -- Prometheus ---------------------------------------------------------------------------------


def _exemplar_reader() -> Callable[[], dict[str, str] | None]:
    """The exemplar read of retrymw 0.x, once per metric update."""
    from opentelemetry.trace import get_current_span

    def exemplar() -> dict[str, str] | None:
        context = get_current_span().get_span_context()
        if not context.trace_flags.sampled:
            return None
        return {
            "trace_id": format(context.trace_id, "032x"),
            "span_id": format(context.span_id, "016x"),
        }

    return exemplar


def _prometheus_replay() -> Prepared:
    from prometheus_client import CollectorRegistry, Counter, Histogram

    from retrymw import RetryBudget

    names = _names()
    registry = CollectorRegistry()

    def make(spec: Any) -> Any:
        if spec.kind == "counter":
            return Counter(spec.prometheus, spec.description, spec.labels, registry=registry)
        return Histogram(
            spec.prometheus, spec.description, spec.labels, buckets=spec.buckets, registry=registry
        )

    target = ok_async.__qualname__
    calls = make(names.CALLS).labels(POLICY, target, "success")
    call_duration = make(names.CALL_DURATION).labels(POLICY, target, "success")
    call_attempts = make(names.CALL_ATTEMPTS).labels(POLICY, target, "success")
    attempts = make(names.ATTEMPTS).labels(POLICY, target, "success", "")
    # 0.x's label set (issue 18 added error_type): the same observation, the frozen labels.
    frozen = replace(names.ATTEMPT_DURATION, labels=names.ATTEMPT_DURATION.labels[:3])
    attempt_duration = make(frozen).labels(POLICY, target, "success")
    exemplar = _exemplar_reader()
    budget = RetryBudget()
    monotonic = time.monotonic

    async def replay(fn: Callable[[], Awaitable[Any]]) -> Any:
        started = monotonic()
        attempt_started = monotonic()
        result = await fn()
        now = monotonic()
        first = exemplar()
        attempts.inc(1, first)
        attempt_duration.observe(now - attempt_started, first)
        budget.record_success()
        end = monotonic()
        last = exemplar()
        calls.inc(1, last)
        call_duration.observe(end - started, last)
        call_attempts.observe(1, last)
        return result

    return Prepared(op=replay, args=(ok_async,), check=_check)


def _sampled_context() -> Any:
    """A context whose current span is sampled (an exemplar is due), and an empty one."""
    from opentelemetry import trace
    from opentelemetry.context import Context
    from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

    span = NonRecordingSpan(
        SpanContext(
            trace_id=0x0AF7651916CD43DD8448EB211C80319C,
            span_id=0xB7AD6B7169203331,
            is_remote=False,
            trace_flags=TraceFlags(TraceFlags.SAMPLED),
        )
    )
    return trace.set_span_in_context(span, Context())


def _prometheus_in_context(sampled: bool) -> Callable[[], Prepared]:
    """``Retrier.call`` with Prometheus, inside a sampled span or inside no span at all.

    Both cases attach and detach a context around the call, so their ratio is what the
    exemplars cost.
    """

    def make() -> Prepared:
        from opentelemetry import context as otel_context
        from opentelemetry.context import Context

        tel = telemetry("prometheus")
        retrier = retrymw_retrier(instruments=tel.instruments)
        ctx = _sampled_context() if sampled else Context()

        async def op() -> Any:
            token = otel_context.attach(ctx)
            try:
                return await retrier.call(ok_async)
            finally:
                otel_context.detach(token)

        return Prepared(op=op, check=_check)

    return make


# -- OpenTelemetry SDK ---------------------------------------------------------------------------


class _Otel:
    """The tracer and the instruments retrymw 0.x created, on fresh in-memory SDK providers."""

    def __init__(self, sdk: OtelSdk) -> None:
        from opentelemetry import metrics, trace

        names = _names()
        self.names = names
        self.sdk = sdk
        self.tracer = trace.get_tracer(
            names.SCOPE, "0", sdk.tracer_provider, schema_url=names.SCHEMA_URL
        )
        meter = metrics.get_meter(names.SCOPE, "0", sdk.meter_provider, schema_url=names.SCHEMA_URL)

        def histogram(spec: Any) -> Any:
            return meter.create_histogram(
                spec.otel,
                spec.unit,
                spec.description,
                explicit_bucket_boundaries_advisory=list(spec.buckets or ()),
            )

        self.calls = meter.create_counter(names.CALLS.otel, names.CALLS.unit)
        self.call_duration = histogram(names.CALL_DURATION)
        self.call_attempts = histogram(names.CALL_ATTEMPTS)
        self.attempts = meter.create_counter(names.ATTEMPTS.otel, names.ATTEMPTS.unit)
        self.attempt_duration = histogram(names.ATTEMPT_DURATION)
        self.backoff = histogram(names.BACKOFF_DURATION)
        self.http_duration = meter.create_histogram(
            names.HTTP_CLIENT_REQUEST_DURATION,
            unit="s",
            explicit_bucket_boundaries_advisory=list(names.ATTEMPT_DURATION_BUCKETS),
        )
        self.call_var: ContextVar[Any] = ContextVar("replay_call", default=None)
        self.attempt_var: ContextVar[Any] = ContextVar("replay_attempt", default=None)
        self.http_var: ContextVar[Any] = ContextVar("replay_http", default=None)


def record_exception(otel: _Otel, span: Any, error: BaseException) -> None:
    """retrymw 0.x's redacted ``record_exception``: type, message and formatted stack trace."""
    from retrymw._core.redact import exception_text, redact_text

    names = otel.names
    kind = type(error)
    module = kind.__module__
    name = f"{module}.{kind.__qualname__}" if module and module != "builtins" else kind.__qualname__
    stacktrace = "".join(traceback.format_exception(error))
    span.add_event(
        names.EVENT_EXCEPTION,
        {
            names.ATTR_EXCEPTION_TYPE: name,
            names.ATTR_EXCEPTION_MESSAGE: exception_text(error),
            names.ATTR_EXCEPTION_STACKTRACE: redact_text(stacktrace),
        },
    )


def _otel_replay(failing: bool) -> Callable[[], Prepared]:
    """The OpenTelemetry primitives of a coroutine call: success, or fail, fail, ok."""

    def make() -> Prepared:
        import asyncio

        from opentelemetry import context as otel_context
        from opentelemetry import trace
        from opentelemetry.trace import SpanKind, Status, StatusCode

        otel = _Otel(otel_sdk())
        names = otel.names
        error_status = Status(StatusCode.ERROR)
        fn = flaky_async()[0] if failing else ok_async
        operation = "flaky" if failing else "ok_async"
        target = operation
        attempts_max = 3
        monotonic = time.monotonic

        async def replay() -> Any:
            started = monotonic()
            span = otel.tracer.start_span(
                f"retrymw {operation}",
                kind=SpanKind.INTERNAL,
                attributes={
                    names.ATTR_POLICY: POLICY,
                    names.ATTR_TARGET: target,
                    names.ATTR_MAX_ATTEMPTS: attempts_max,
                },
            )
            token = otel_context.attach(trace.set_span_in_context(span))
            var_token = otel.call_var.set(span)
            attempt = 0
            result: Any = None
            while True:
                attempt += 1
                otel.call_var.get()
                a_span = otel.tracer.start_span(
                    f"retrymw.attempt {operation}",
                    kind=SpanKind.INTERNAL,
                    attributes={names.ATTR_ATTEMPT: attempt},
                )
                a_token = otel_context.attach(trace.set_span_in_context(a_span))
                a_var = otel.attempt_var.set(a_span)
                attempt_started = monotonic()
                error: Exception | None = None
                try:
                    result = await fn()
                except Exception as caught:
                    error = caught
                now = monotonic()
                outcome = "success" if error is None else "retried"
                labels: dict[str, Any] = {names.ATTR_POLICY: POLICY, names.ATTR_TARGET: target}
                otel.attempt_duration.record(
                    now - attempt_started, {**labels, names.ATTR_ATTEMPT_OUTCOME: outcome}
                )
                if error is not None:
                    labels[names.ATTR_ERROR_TYPE] = type(error).__qualname__
                labels[names.ATTR_ATTEMPT_OUTCOME] = outcome
                otel.attempts.add(1, labels)
                otel.http_var.get()
                otel.attempt_var.get()
                a_span.is_recording()
                a_span.set_attribute(names.ATTR_ATTEMPT_OUTCOME, outcome)
                if error is not None:
                    record_exception(otel, a_span, error)
                    a_span.set_attribute(names.ATTR_ERROR_TYPE, type(error).__qualname__)
                    a_span.set_status(error_status)
                a_span.end()
                otel.attempt_var.reset(a_var)
                otel_context.detach(a_token)
                if error is None:
                    break
                otel.backoff.record(0.0, {names.ATTR_POLICY: POLICY, names.ATTR_TARGET: target})
                otel.call_var.get()
                b_span = otel.tracer.start_span(
                    "retrymw.backoff",  # 0.x: an INTERNAL span per sleep
                    kind=SpanKind.INTERNAL,
                    attributes={
                        names.ATTR_BACKOFF_DELAY: 0.0,
                        names.ATTR_ATTEMPT: attempt + 1,
                        names.ATTR_ERROR_TYPE: type(error).__qualname__,
                    },
                )
                await asyncio.sleep(0)
                b_span.end()
            end = monotonic()
            labels = {names.ATTR_POLICY: POLICY, names.ATTR_TARGET: target}
            labels[names.ATTR_OUTCOME] = "success"
            otel.calls.add(1, labels)
            otel.call_duration.record(end - started, labels)
            otel.call_attempts.record(attempt, labels)
            otel.call_var.get()
            span.is_recording()
            span.set_attribute(names.ATTR_OUTCOME, "success")
            span.set_attribute(names.ATTR_ATTEMPT_COUNT, attempt)
            span.end()
            otel.call_var.reset(var_token)
            otel_context.detach(token)
            return result

        return Prepared(op=replay, check=_check, reset=otel.sdk.reset)

    return make


class _ReplayTransport(httpx.AsyncBaseTransport):
    """The OpenTelemetry primitives of one retrymw 0.x HTTP call with a 200, around a send."""

    def __init__(self, inner: httpx.AsyncBaseTransport, otel: _Otel) -> None:
        from opentelemetry import context as otel_context
        from opentelemetry import propagate, trace
        from opentelemetry.trace import SpanKind

        from retrymw._core.redact import redact_url

        self.inner = inner
        self.otel = otel
        self.attach, self.detach = otel_context.attach, otel_context.detach
        self.inject = propagate.inject
        self.in_context = trace.set_span_in_context
        self.kinds = SpanKind
        self.redact_url = redact_url

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        otel, names = self.otel, self.otel.names
        monotonic = time.monotonic
        started = monotonic()
        url = request.url
        target = url.host
        span = otel.tracer.start_span(
            f"retrymw {request.method}",
            kind=self.kinds.INTERNAL,
            attributes={
                names.ATTR_POLICY: POLICY,
                names.ATTR_TARGET: target,
                names.ATTR_MAX_ATTEMPTS: 3,
            },
        )
        token = self.attach(self.in_context(span))
        var_token = otel.call_var.set(span)
        otel.http_var.set(
            {
                names.ATTR_HTTP_METHOD: request.method,
                names.ATTR_SERVER_ADDRESS: url.host,
                names.ATTR_SERVER_PORT: url.port or 80,
                names.ATTR_URL_SCHEME: url.scheme,
            }
        )
        otel.call_var.get()
        a_span = otel.tracer.start_span(
            request.method,
            kind=self.kinds.CLIENT,
            attributes={
                names.ATTR_HTTP_METHOD: request.method,
                names.ATTR_SERVER_ADDRESS: url.host,
                names.ATTR_SERVER_PORT: url.port or 80,
                names.ATTR_URL_FULL: self.redact_url(str(url)),
                names.ATTR_ATTEMPT: 1,
            },
        )
        a_context = self.in_context(a_span)
        self.inject(request.headers, context=a_context)
        a_token = self.attach(a_context)
        a_var = otel.attempt_var.set(a_span)
        attempt_started = monotonic()
        response = await self.inner.handle_async_request(request)
        now = monotonic()
        duration = now - attempt_started
        labels: dict[str, Any] = {names.ATTR_POLICY: POLICY, names.ATTR_TARGET: target}
        otel.attempt_duration.record(duration, {**labels, names.ATTR_ATTEMPT_OUTCOME: "success"})
        labels[names.ATTR_ATTEMPT_OUTCOME] = "success"
        otel.attempts.add(1, labels)
        http = otel.http_var.get()
        otel.http_var.set(None)
        http[names.ATTR_HTTP_STATUS_CODE] = response.status_code
        otel.http_duration.record(duration, http)
        otel.attempt_var.get()
        a_span.is_recording()
        a_span.set_attribute(names.ATTR_ATTEMPT_OUTCOME, "success")
        a_span.set_attribute(names.ATTR_HTTP_STATUS_CODE, response.status_code)
        a_span.end()
        otel.attempt_var.reset(a_var)
        self.detach(a_token)
        end = monotonic()
        labels = {names.ATTR_POLICY: POLICY, names.ATTR_TARGET: target}
        labels[names.ATTR_OUTCOME] = "success"
        otel.calls.add(1, labels)
        otel.call_duration.record(end - started, labels)
        otel.call_attempts.record(1, labels)
        otel.call_var.get()
        span.is_recording()
        span.set_attribute(names.ATTR_OUTCOME, "success")
        span.set_attribute(names.ATTR_ATTEMPT_COUNT, 1)
        span.end()
        otel.call_var.reset(var_token)
        self.detach(token)
        return response


def _http_case(name: str, layer: str) -> Case:
    def make() -> Prepared:
        def handler(request: httpx.Request) -> httpx.Response:
            return httpx.Response(200)

        inner = httpx.MockTransport(handler)
        reset = None
        transport: httpx.AsyncBaseTransport = inner
        if layer == "retrymw":
            from retrymw import RetryPolicy
            from retrymw.httpx import AsyncRetryTransport

            tel = telemetry("otel-sdk")
            policy = RetryPolicy(attempts=3, backoff="fixed", initial_delay=0)
            transport = AsyncRetryTransport(inner, policy=policy, instruments=tel.instruments)
            reset = tel.reset
        elif layer == "replay":
            otel = _Otel(otel_sdk())
            transport = _ReplayTransport(inner, otel)
            reset = otel.sdk.reset
        elif layer == "floor":
            sdk = otel_sdk()
            transport = OtelHttpFloor(inner, sdk)
            reset = sdk.reset
        client = httpx.AsyncClient(transport=transport, trust_env=False)
        return Prepared(op=client.get, args=(URL,), check=_check, close=client.aclose, reset=reset)

    return Case(name, "bare" if layer == "bare" else layer, make, baseline=layer == "bare")


def _retrymw_case(name: str, kind: Any, *, failing: bool) -> Case:
    def make() -> Prepared:
        tel = telemetry(kind)
        retrier = retrymw_retrier(
            budget="off" if failing else "default", instruments=tel.instruments
        )
        fn = flaky_async()[0] if failing else ok_async
        return Prepared(op=retrier.call, args=(fn,), check=_check, reset=tel.reset)

    return Case(name, "retrymw", make)


def _bare() -> Prepared:
    return Prepared(op=ok_async, check=_check)


def _floor() -> Prepared:
    return Prepared(op=floor_async, args=(flaky_async()[0],), check=_check)


def groups(quick: bool) -> list[Group]:
    """The replayed-primitive groups: coroutine success, coroutine fail-fail-ok, httpx 200."""
    success = [
        Case("bare await f()", "bare", _bare, baseline=True),
        _retrymw_case("retrymw Prometheus", "prometheus", failing=False),
        Case("replay: Prometheus primitives", "replay", _prometheus_replay),
        Case(
            "retrymw Prometheus, no span current",
            "retrymw",
            _prometheus_in_context(sampled=False),
        ),
        Case(
            "retrymw Prometheus, sampled span current",
            "retrymw",
            _prometheus_in_context(sampled=True),
        ),
        _retrymw_case("retrymw OTel SDK", "otel-sdk", failing=False),
        Case("replay: OTel SDK primitives", "replay", _otel_replay(failing=False)),
        Case("floor: today's OTel SDK primitives", "floor", otel_floor(failing=False)),
    ]
    failure = [
        Case("hand-written loop", "hand-written", _floor, baseline=True),
        _retrymw_case("retrymw OTel SDK", "otel-sdk", failing=True),
        Case("replay: OTel SDK primitives", "replay", _otel_replay(failing=True)),
        Case("floor: today's OTel SDK primitives", "floor", otel_floor(failing=True)),
    ]
    http = [
        _http_case("bare AsyncClient", "bare"),
        _http_case("retrymw AsyncRetryTransport + OTel SDK", "retrymw"),
        _http_case("replay: bare client + OTel SDK primitives", "replay"),
        _http_case("floor: bare client + today's OTel SDK primitives", "floor"),
    ]
    return [
        Group(
            "replay-success",
            "Primitives replayed, coroutine success",
            "`Retrier.call` on a trivial coroutine (default budget) with Prometheus or the OTel "
            "SDK (in-memory exporter and reader), next to straight-line code calling exactly the "
            "primitives retrymw 0.x called for that path (frozen: see benchmarks/cases_replay.py), "
            "and to the floor: the OTel primitives retrymw calls today, alone "
            "(benchmarks/_floor.py). The two 'span current' cases attach a context around the "
            "call, one with a sampled span (exemplars due), one with none.",
            success,
        ),
        Group(
            "replay-failure",
            "Primitives replayed, coroutine fail, fail, ok",
            "`Retrier.call` (budget off) on a coroutine failing twice then succeeding, zero "
            "delay, OTel SDK, next to the primitives retrymw 0.x called for it and the ones it "
            "calls today (the floor).",
            failure,
        ),
        Group(
            "replay-httpx",
            "Primitives replayed, httpx 200",
            "`AsyncClient.get` on `MockTransport` answering 200: bare, through "
            "`AsyncRetryTransport` with the OTel SDK, through a transport that replays "
            "retrymw 0.x's OpenTelemetry primitives around the send, and through one that calls "
            "only the primitives retrymw calls today (the floor, benchmarks/_floor.py).",
            http,
            per="request",
        ),
    ]
