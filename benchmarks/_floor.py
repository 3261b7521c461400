"""The floor of the trimmed telemetry contract: its OpenTelemetry primitives, nothing else.

Straight-line code calling exactly the SDK primitives retrymw calls today (after issue 18's
trims) for a coroutine call, with the same names, attributes and contexts: the cost of what the
contract emits, with no engine and no instrument around it. Beside retrymw in the replay groups,
``retrymw / floor`` is what the library adds on top of its own emissions, and ``floor / replay``
the least the contract can cost against 0.x's primitives.

- success: the call span made current (3 attributes), the attempt duration (no exemplar), the
  call duration (its exemplar the call span), the outcome and attempt count set on the span;
- fail, fail, ok: the same call span; the first attempt's span written when it is retried, from
  its start, with its exception's type and message among its attributes; the later attempts'
  spans made current, each starting with the wait before it (``retrymw.backoff.delay``); a
  retried attempt's outcome, error type and exception set on its span as it ends; each
  attempt's duration and each backoff's duration (no exemplar); ``sleep(0)`` twice; the call
  duration, the attempts per call (no exemplar) and the call span's outcome;
- httpx 200 (`OtelHttpFloor`, a transport around the send): the INTERNAL call span made
  current (3 attributes: a call that may retry opens it before its first attempt, since a
  span's parent is fixed when it starts, docs/telemetry.md), the CLIENT span under it with the
  semantic-convention attributes (``url.full`` redacted) made current and injected into the
  request's headers, the attempt duration (no exemplar), ``http.client.request.duration`` (its
  exemplar the CLIENT span), the outcome, status and protocol version set on the CLIENT span,
  the call duration (its exemplar the call span), and the outcome and attempt count set on the
  call span.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import httpx

from ._harness import Prepared
from ._instruments import OtelSdk, otel_sdk
from .cases_core import RESULT, flaky_async, ok_async

__all__ = ["OtelHttpFloor", "otel_floor"]

POLICY = "default"


def otel_floor(failing: bool) -> Callable[[], Prepared]:
    """The trimmed contract's OpenTelemetry primitives for a coroutine call."""

    def make() -> Prepared:
        from opentelemetry import context as otel_context
        from opentelemetry import metrics, trace
        from opentelemetry.context import Context
        from opentelemetry.trace import INVALID_SPAN, SpanKind, Status, StatusCode

        from retrymw._core.redact import exception_text
        from retrymw.instrumentation import _names as names

        sdk = otel_sdk()
        tracer = trace.get_tracer(names.SCOPE, "0", sdk.tracer_provider)
        meter = metrics.get_meter(names.SCOPE, "0", sdk.meter_provider)

        def histogram(spec: Any) -> Any:
            buckets = list(spec.buckets or ())
            return meter.create_histogram(
                spec.otel, spec.unit, explicit_bucket_boundaries_advisory=buckets
            )

        call_duration = histogram(names.CALL_DURATION)
        call_attempts = histogram(names.CALL_ATTEMPTS)
        attempt_duration = histogram(names.ATTEMPT_DURATION)
        backoff = histogram(names.BACKOFF_DURATION)
        no_span = trace.set_span_in_context(INVALID_SPAN, Context())
        error_status = Status(StatusCode.ERROR)
        fn = flaky_async()[0] if failing else ok_async
        operation = "flaky" if failing else "ok_async"
        monotonic = time.monotonic

        def described(error: Exception) -> dict[str, Any]:
            return {
                names.ATTR_EXCEPTION_TYPE: type(error).__qualname__,
                names.ATTR_EXCEPTION_MESSAGE: exception_text(error),
            }

        async def floor() -> Any:
            started = monotonic()
            span = tracer.start_span(
                f"retrymw {operation}",
                kind=SpanKind.INTERNAL,
                attributes={
                    names.ATTR_POLICY: POLICY,
                    names.ATTR_TARGET: operation,
                    names.ATTR_MAX_ATTEMPTS: 3,
                },
            )
            token = otel_context.attach(trace.set_span_in_context(span))
            attempt, result = 0, None
            while True:
                attempt += 1
                attempt_span, attempt_token = None, None
                if attempt > 1:
                    attempt_span = tracer.start_span(
                        f"retrymw.attempt {operation}",
                        kind=SpanKind.INTERNAL,
                        attributes={names.ATTR_ATTEMPT: attempt, names.ATTR_BACKOFF_DELAY: 0.0},
                    )
                    attempt_token = otel_context.attach(trace.set_span_in_context(attempt_span))
                attempt_started, attempt_ns = monotonic(), time.time_ns()
                error: Exception | None = None
                try:
                    result = await fn()
                except Exception as caught:
                    error = caught
                outcome = "success" if error is None else "retried"
                labels: dict[str, Any] = {
                    names.ATTR_POLICY: POLICY,
                    names.ATTR_TARGET: operation,
                    names.ATTR_ATTEMPT_OUTCOME: outcome,
                }
                if error is not None:
                    labels[names.ATTR_ERROR_TYPE] = type(error).__qualname__
                attempt_duration.record(monotonic() - attempt_started, labels, context=no_span)
                if error is not None and attempt_span is None:
                    late = tracer.start_span(
                        f"retrymw.attempt {operation}",
                        kind=SpanKind.INTERNAL,
                        attributes={
                            names.ATTR_ATTEMPT: attempt,
                            names.ATTR_ATTEMPT_OUTCOME: outcome,
                            names.ATTR_ERROR_TYPE: type(error).__qualname__,
                            **described(error),
                        },
                        start_time=attempt_ns,
                    )
                    late.set_status(error_status)
                    late.end()
                if attempt_span is not None and attempt_token is not None:
                    ending: dict[str, Any] = {names.ATTR_ATTEMPT_OUTCOME: outcome}
                    if error is not None:
                        ending.update(described(error))
                        ending[names.ATTR_ERROR_TYPE] = type(error).__qualname__
                        attempt_span.set_status(error_status)
                    attempt_span.set_attributes(ending)
                    attempt_span.end()
                    otel_context.detach(attempt_token)
                if error is None:
                    break
                where = {names.ATTR_POLICY: POLICY, names.ATTR_TARGET: operation}
                backoff.record(0.0, where, context=no_span)
                await asyncio.sleep(0)
            labels = {
                names.ATTR_POLICY: POLICY,
                names.ATTR_TARGET: operation,
                names.ATTR_OUTCOME: "success",
            }
            call_duration.record(monotonic() - started, labels)
            if attempt != 1:
                call_attempts.record(attempt, labels, context=no_span)
            span.set_attributes({names.ATTR_OUTCOME: "success", names.ATTR_ATTEMPT_COUNT: attempt})
            span.end()
            otel_context.detach(token)
            return result

        def check(result: Any) -> None:
            if result != RESULT:
                raise AssertionError(f"expected {RESULT}, got {result!r}")

        return Prepared(op=floor, check=check, reset=sdk.reset)

    return make


class OtelHttpFloor(httpx.AsyncBaseTransport):
    """The trimmed contract's OpenTelemetry primitives for an HTTP call answered 200 at once."""

    def __init__(self, inner: httpx.AsyncBaseTransport, sdk: OtelSdk) -> None:
        from opentelemetry import context as otel_context
        from opentelemetry import metrics, propagate, trace
        from opentelemetry.context import Context
        from opentelemetry.trace import INVALID_SPAN, SpanKind

        from retrymw._core.redact import redact_url
        from retrymw.instrumentation import _names as names

        self.inner, self.sdk, self.names = inner, sdk, names
        self.tracer = trace.get_tracer(names.SCOPE, "0", sdk.tracer_provider)
        meter = metrics.get_meter(names.SCOPE, "0", sdk.meter_provider)
        self.call_duration = meter.create_histogram(
            names.CALL_DURATION.otel,
            names.CALL_DURATION.unit,
            explicit_bucket_boundaries_advisory=list(names.CALL_DURATION.buckets or ()),
        )
        self.attempt_duration = meter.create_histogram(
            names.ATTEMPT_DURATION.otel,
            names.ATTEMPT_DURATION.unit,
            explicit_bucket_boundaries_advisory=list(names.ATTEMPT_DURATION.buckets or ()),
        )
        self.http_duration = meter.create_histogram(
            names.HTTP_CLIENT_REQUEST_DURATION,
            unit="s",
            explicit_bucket_boundaries_advisory=list(names.ATTEMPT_DURATION_BUCKETS),
        )
        self.no_span = trace.set_span_in_context(INVALID_SPAN, Context())
        self.attach, self.detach = otel_context.attach, otel_context.detach
        self.inject, self.in_context = propagate.inject, trace.set_span_in_context
        self.client, self.internal, self.redact_url = SpanKind.CLIENT, SpanKind.INTERNAL, redact_url

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        names = self.names
        started = time.monotonic()
        url, method = request.url, request.method
        call_span = self.tracer.start_span(
            f"retrymw {method}",
            kind=self.internal,
            attributes={
                names.ATTR_POLICY: POLICY,
                names.ATTR_TARGET: url.host,
                names.ATTR_MAX_ATTEMPTS: 3,
            },
        )
        call_token = self.attach(self.in_context(call_span))
        semconv: dict[str, Any] = {
            names.ATTR_HTTP_METHOD: method,
            names.ATTR_SERVER_ADDRESS: url.host,
            names.ATTR_SERVER_PORT: url.port or 80,
        }
        span = self.tracer.start_span(
            method,
            kind=self.client,
            attributes={
                **semconv,
                names.ATTR_URL_FULL: self.redact_url(str(url)),
                names.ATTR_ATTEMPT: 1,
            },
        )
        context = self.in_context(span)
        self.inject(request.headers, context=context)
        token = self.attach(context)
        response = await self.inner.handle_async_request(request)
        duration = time.monotonic() - started
        labels: dict[str, Any] = {names.ATTR_POLICY: POLICY, names.ATTR_TARGET: url.host}
        self.attempt_duration.record(
            duration, {**labels, names.ATTR_ATTEMPT_OUTCOME: "success"}, context=self.no_span
        )
        semconv[names.ATTR_URL_SCHEME] = url.scheme
        semconv[names.ATTR_HTTP_STATUS_CODE] = response.status_code
        semconv[names.ATTR_NETWORK_PROTOCOL_VERSION] = "1.1"
        self.http_duration.record(duration, semconv)
        span.set_attributes(
            {
                names.ATTR_ATTEMPT_OUTCOME: "success",
                names.ATTR_HTTP_STATUS_CODE: response.status_code,
                names.ATTR_NETWORK_PROTOCOL_VERSION: "1.1",
            }
        )
        span.end()
        self.detach(token)
        labels[names.ATTR_OUTCOME] = "success"
        self.call_duration.record(time.monotonic() - started, labels)
        call_span.set_attributes({names.ATTR_OUTCOME: "success", names.ATTR_ATTEMPT_COUNT: 1})
        call_span.end()
        self.detach(call_token)
        return response
