"""`OpenTelemetryInstrument`: the span tree and metrics of docs/telemetry.md, on opentelemetry-api.

Importing this module needs opentelemetry-api (the ``otel`` extra); the package namespace
imports it only when `OpenTelemetryInstrument` is first asked for.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Sequence
from contextvars import ContextVar
from importlib.metadata import PackageNotFoundError, version
from typing import Any

try:
    from opentelemetry import _logs, metrics, propagate, trace
    from opentelemetry import context as otel_context
    from opentelemetry.context import Context
    from opentelemetry.trace import INVALID_SPAN, Link, Span
except ImportError:
    raise ImportError(
        "OpenTelemetryInstrument needs opentelemetry-api: pip install 'retrymw[otel]'"
    ) from None

from ..._core.events import (
    Attached,
    AttemptFinished,
    AttemptStarted,
    BreakerStateChanged,
    CallFinished,
    CallStarted,
    FailoverFinished,
    FailoverStarted,
    RetryDenied,
    RetryScheduled,
)
from ..._core.instruments import Instrument
from .. import _names as names
from .attempts import (
    end_attempt_span,
    first_attempt_finished,
    semconv_attributes,
)
from .exceptions import ExceptionSignal, qualified_name
from .http import SUPPRESS_HTTP_KEY, client_span, http_attributes, http_request, protocol_version
from .live import live_gauges
from .meters import (
    HTTP_OVERFLOW,
    NO_EXEMPLAR,
    AttributeSets,
    create_histogram,
    metric_args,
    observe_fleet,
)
from .providers import ProviderWatch
from .scopes import (
    ATTEMPT_SPAN_PREFIX,
    CALL_SCOPE,
    CALL_SPAN_PREFIX,
    CLIENT,
    ERROR_STATUS,
    INTERNAL,
    HttpCallScope,
    Scope,
    wait_attributes,
    wait_event,
)

__all__ = ["OpenTelemetryInstrument"]

try:  # The global proxy before a real provider is set: nobody listens yet.
    from opentelemetry.metrics._internal import _ProxyMeterProvider

    _IDLE_METER_PROVIDERS: tuple[type, ...] = (metrics.NoOpMeterProvider, _ProxyMeterProvider)
except ImportError:  # pragma: no cover - private path moved: record, the proxy is still cheap
    _IDLE_METER_PROVIDERS = (metrics.NoOpMeterProvider,)
_IDLE_TRACER_PROVIDERS = (trace.NoOpTracerProvider, trace.ProxyTracerProvider)

try:
    _VERSION = version("retrymw")
except PackageNotFoundError:  # pragma: no cover - running from a source tree
    _VERSION = "0+unknown"


class OpenTelemetryInstrument(Instrument):
    """Spans and metrics for every call, attempt and backoff, through opentelemetry-api.

    The span tree (docs/telemetry.md): an INTERNAL ``retrymw {operation}`` span per
    logical call; one span per attempt under it once a retry happens, a CLIENT span per the HTTP
    semantic conventions for the transports (``GET``, with ``http.request.resend_count`` on
    resends and a redacted ``url.full``; every attempt has one) or an INTERNAL
    ``retrymw.attempt {operation}`` span for coroutines; ``retrymw.backoff``,
    ``retrymw.retry.denied`` and ``retrymw.circuit.state_change`` events on the call span. A
    call that was not retried is one span: a coroutine's call span, an HTTP call's CLIENT span
    (its call span is made only when there is more to say, see `HttpCallScope`).

    The metrics are those of `PrometheusInstrument`, named so that OTel's Prometheus translation
    yields the same names; calls and attempts are counted by the duration histograms' counts
    (two records per attempt and call would double the cost of the same number). Their labels
    are capped as there, per meter provider, and so is the total: at most 20 000 series
    (``MAX_SERIES``, ``http.client.request.duration`` included) once exported to Prometheus.

    For HTTP, each attempt's W3C trace context is injected into the request headers, so the
    server sees the attempt span as its parent. Each attempt is also recorded in the
    semantic-convention histogram ``http.client.request.duration`` (``http.request.method``,
    ``server.address``, ``server.port``, ``url.scheme``, ``http.response.status_code``,
    ``error.type``), and nothing is suppressed: opentelemetry-instrumentation-httpx installed
    below the retry transport keeps its own metrics, and its span is a child of retrymw's
    attempt span.

    Nothing is done while nobody listens: with only the API installed (no SDK provider set) the
    hooks return after a clock read, looking at the global providers again at most once a
    second; span attributes are only built for recording spans.

    Args:
        tracer_provider: where spans go; the global provider (resolved late) when ``None``.
        meter_provider: where metrics go; the global provider (resolved late) when ``None``.

    Raises:
        ImportError: opentelemetry-api is not installed (at import of this class).

    .. versionadded:: 0.1
    """

    def __init__(
        self, tracer_provider: Any = None, meter_provider: Any = None, logger_provider: Any = None
    ) -> None:
        self._tracer_provider = tracer_provider
        self._meter_provider = meter_provider
        self._tracer = trace.get_tracer(
            names.SCOPE, _VERSION, tracer_provider, schema_url=names.SCHEMA_URL
        )
        meter = metrics.get_meter(
            names.SCOPE, _VERSION, meter_provider, schema_url=names.SCHEMA_URL
        )
        self._call_duration = create_histogram(meter, names.CALL_DURATION)
        self._call_attempts = create_histogram(meter, names.CALL_ATTEMPTS)
        self._attempt_duration = create_histogram(meter, names.ATTEMPT_DURATION)
        # One exemplar per call: the call duration's, recorded while the call span
        # is current, and for HTTP each attempt's semantic-convention record (its CLIENT span,
        # as OpenTelemetry's HTTP instrumentations do). The other records offer the SDK none
        # (`NO_EXEMPLAR`): each offer cost 2 µs or more, and they would point at the same trace.
        self._backoff = create_histogram(meter, names.BACKOFF_DURATION)
        self._pacer_wait = create_histogram(meter, names.PACER_WAIT)  # recorded with a pacer
        self._denied = meter.create_counter(*metric_args(names.RETRIES_DENIED))
        self._budget = meter.create_gauge(*metric_args(names.RETRY_BUDGET_AVAILABLE))
        self._circuit_state = meter.create_gauge(*metric_args(names.CIRCUIT_STATE))
        self._transitions = meter.create_counter(*metric_args(names.CIRCUIT_TRANSITIONS))
        self._http_duration = meter.create_histogram(
            names.HTTP_CLIENT_REQUEST_DURATION,
            unit="s",
            description="Duration of HTTP client requests (one per retrymw attempt).",
            explicit_bucket_boundaries_advisory=list(names.ATTEMPT_DURATION_BUCKETS),
        )
        # The body of the response a call returns, recorded when it ends.
        self._body_size = meter.create_histogram(
            names.HTTP_CLIENT_RESPONSE_BODY_SIZE,
            unit="By",
            description="Size of HTTP client response bodies (the response a call returned).",
        )
        self._first_byte = meter.create_histogram(
            names.RESPONSE_TIME_TO_FIRST_BYTE,
            unit="s",
            description="Seconds from the start of the attempt whose response a call returned "
            "to the first byte of its body.",
            explicit_bucket_boundaries_advisory=list(names.ATTEMPT_DURATION_BUCKETS),
        )
        # The exception that ends a call: a span event, a log record or both (the semconv's
        # OTEL_SEMCONV_EXCEPTION_SIGNAL_OPT_IN, read now).
        self._exceptions = ExceptionSignal(
            functools.partial(
                _logs.get_logger, names.SCOPE, _VERSION, logger_provider, names.SCHEMA_URL
            )
        )
        observe_fleet(meter)  # the fleet's health, read at collection (docs/telemetry.md)
        self._live = live_gauges(meter, meter_provider)  # breakers, budgets, throttles, policies
        # This task's current HTTP attempt scope (its http.client.request.duration attributes).
        self._attempt: ContextVar[Scope | None] = ContextVar("retrymw_otel_attempt", default=None)
        # The label caps and the series bound are the provider's, shared by its instruments.
        self._bounds = self._live.bounds
        self._error_type = self._bounds.error_type
        self._attributes = AttributeSets(self._live)
        # The global providers are asked for when needed: they may be set later.
        self._traces = ProviderWatch(
            tracer_provider,
            trace.get_tracer_provider,
            _IDLE_TRACER_PROVIDERS,
            trace.ProxyTracerProvider,
        )
        self._meters = ProviderWatch(
            meter_provider, metrics.get_meter_provider, _IDLE_METER_PROVIDERS
        )
        self._idle_until = float("-inf")  # the earlier of the two: one comparison per call
        # This instrument's current call scope (not whatever span is current: another
        # instrument may have made its own span current inside ours); it holds the scope of
        # its current attempt.
        self._call: ContextVar[Scope | None] = ContextVar("retrymw_otel_call", default=None)
        # This instrument's current request along failover origins (its ``retrymw.origin`` span).
        self._request: ContextVar[Scope | None] = ContextVar("retrymw_otel_request", default=None)

    # -- is anybody listening? ---------------------------------------------------------------

    def listening(self) -> bool:
        """Whether a real (SDK) tracer or meter provider is configured; rechecked once a second.

        While it is False the engine skips this instrument.
        """
        # The clock first: it settles the idle case, and the active one costs far more anyway.
        if time.monotonic() < self._idle_until:
            return False
        traces, meters = self._traces, self._meters
        if traces.active or meters.active:
            return True
        listening = traces() or meters()
        self._idle_until = min(traces.idle_until, meters.idle_until)
        return listening

    # -- hooks ------------------------------------------------------------------------------

    def attached(self, event: Attached, /) -> None:
        """Export the live gauges of an announced policy, breaker, budget or throttle."""
        self._live.attach(event.policy, event.target, event.subject)

    def call_started(self, event: CallStarted, /) -> Scope | None:
        """Start the INTERNAL call span and make it current for the whole call.

        One trace per call, of the same shape with or without a caller's span: the
        call span parents every attempt. An HTTP call that can make only one attempt (an SDK
        above is retrying) waits until it has more to say than its one CLIENT span
        (`HttpCallScope`). A call made during a coroutine's first attempt, which has no span of its
        own, gets that attempt's span as its parent (`Scope.first_attempt_parent`).
        """
        if not (self._traces.active or self._traces()):
            return None
        parent = _nested_parent()
        if event.request is not None and http_request(event.request) is not None:
            if event.max_attempts == 1:
                return HttpCallScope(functools.partial(self._call_span, event), self._call, parent)
            # Opened before the first attempt, so that it is that attempt's parent should the
            # attempt be retried: a span's parent is fixed when it starts.
            return self._call_scope(self._call_span(event, parent), parent)
        scope = self._call_scope(self._call_span(event, parent), parent)
        # The first attempt has a span only if it is retried or makes a nested call
        # (`attempt_started` notes when it starts).
        scope.make_first_attempt = functools.partial(self._first_attempt_span, event.operation)
        return scope

    def failover_started(self, event: FailoverStarted, /) -> Scope | None:
        """Start the INTERNAL ``retrymw.origin`` span of a request that may fail over, current
        while it runs: each origin's call span is its child, one trace for the request."""
        if not (self._traces.active or self._traces()):
            return None
        parent = _nested_parent()
        span = self._tracer.start_span(
            names.SPAN_ORIGIN,
            context=parent,
            kind=INTERNAL,
            attributes={names.ATTR_POLICY: event.policy, names.ATTR_TARGET: event.target},
        )
        return Scope(span, trace.set_span_in_context(span, parent), self._request)

    def failover_finished(self, event: FailoverFinished, /) -> None:
        """Name the origins tried, and the one that answered or the error, on the request's
        ``retrymw.origin`` span (the exception itself is on the call span that raised it)."""
        scope = self._request.get()
        if scope is None or not scope.span.is_recording():
            return
        attributes: dict[str, Any] = {names.ATTR_ORIGINS: event.tried}
        if event.answered is not None:
            attributes[names.ATTR_ORIGIN] = event.answered
        if event.exception is not None:
            attributes[names.ATTR_ERROR_TYPE] = qualified_name(event.exception)
            scope.span.set_status(ERROR_STATUS)
        scope.span.set_attributes(attributes)

    def _call_scope(self, span: Span, parent: Context | None) -> Scope:
        """The scope that makes the call ``span`` current, and findable by nested calls."""
        scope = Scope(span, trace.set_span_in_context(span, parent), self._call)
        scope.nest()
        scope.exceptions = self._exceptions
        return scope

    def _first_attempt_span(self, operation: str, started: int) -> Span:
        """The span of a coroutine's first attempt, made while it runs (a nested call's
        parent), from its start."""
        return self._tracer.start_span(
            ATTEMPT_SPAN_PREFIX + operation,
            kind=INTERNAL,
            attributes={names.ATTR_ATTEMPT: 1},
            start_time=started,
        )

    def _call_span(
        self,
        event: CallStarted,
        parent: Context | None = None,
        start_time: int | None = None,
        links: Sequence[Link] = (),
    ) -> Span:
        return self._tracer.start_span(
            CALL_SPAN_PREFIX + event.operation,
            context=parent,
            kind=INTERNAL,
            attributes={
                names.ATTR_POLICY: event.policy,
                names.ATTR_TARGET: event.target,
                names.ATTR_MAX_ATTEMPTS: event.max_attempts,
            },
            links=links,
            start_time=start_time,
        )

    def _call_span_now(self) -> Span | None:
        """This task's call span if it records, made now if the call deferred it."""
        scope = self._call.get()
        if scope is None:
            return None
        span = scope.span_now() if isinstance(scope, HttpCallScope) else scope.span
        return span if span.is_recording() else None

    def attempt_started(self, event: AttemptStarted, /) -> Scope | None:
        """Start the attempt span (CLIENT for HTTP, with context injected into the request).

        An HTTP attempt also switches OpenTelemetry's HTTP client instrumentation off below it
        (opentelemetry-instrumentation-httpx, for httpx and httpx2): retrymw's CLIENT span is
        the attempt's, with ``http.request.resend_count`` and a redacted ``url.full``, and its
        ``http.client.request.duration`` point the attempt's one.
        """
        if event.hedge:
            return self._hedge_started(event)
        request = None if event.request is None else http_request(event.request)
        call = self._call.get()
        if request is None:
            if call is None:  # no call span: nobody listened when the call started
                return None
            if event.attempt == 1:
                # One span per call while nothing is retried: the first attempt gets its span
                # only if it is retried (started then at this time), see `attempt_finished`.
                call.first_attempt_at = time.time_ns()
                return None
            attributes: dict[str, Any] = {names.ATTR_ATTEMPT: event.attempt}
            if call.pending_wait is not None:
                wait_attributes(call.pending_wait[0], attributes)
                call.pending_wait = None
            span = self._tracer.start_span(
                ATTEMPT_SPAN_PREFIX + event.operation,
                kind=INTERNAL,
                attributes=attributes,
            )
            call.attempt = Scope(span, trace.set_span_in_context(span))
            call.attempt.exceptions = self._exceptions
            return call.attempt
        semconv = http_attributes(request)  # the span's and the duration's, built once
        if call is None:
            # Metrics only: no span, but the attempt's duration point is retrymw's, and the
            # context the instrumentation below would have sent is sent.
            if not (self._meters.active or self._meters()):
                return None
            propagate.inject(request.headers)
            scope = Scope(INVALID_SPAN, _suppressed(otel_context.get_current()), self._attempt)
            scope.http_attributes = {**semconv, names.ATTR_URL_SCHEME: request.url.scheme}
            return scope
        name, span_attributes = client_span(request, event.attempt, dict(semconv))
        if call.pending_wait is not None:
            wait_attributes(call.pending_wait[0], span_attributes)
            call.pending_wait = None
        parent = call.attempt_parent() if isinstance(call, HttpCallScope) else None
        span = self._tracer.start_span(
            name, context=parent, kind=CLIENT, attributes=span_attributes
        )
        if isinstance(call, HttpCallScope) and call.first_attempt is None:
            call.first_attempt = span.get_span_context()
        context = trace.set_span_in_context(span, parent)
        # Per attempt, overwriting the previous attempt's header: the server's parent is the
        # attempt span, so each resend is its own child in the trace.
        propagate.inject(request.headers, context=context)
        scope = Scope(span, _suppressed(context), self._attempt, http=True)
        scope.http_attributes = {**semconv, names.ATTR_URL_SCHEME: request.url.scheme}
        scope.exceptions = self._exceptions
        call.attempt = scope
        return scope

    def _hedge_started(self, event: AttemptStarted) -> Scope | None:
        """Start the ``retrymw.hedge`` span of an extra copy, a child of the call span; it is
        current in the copy's own task, and the attempt it copies keeps its span."""
        call = self._call.get()
        if call is None:
            return None
        parent = call.span_now() if isinstance(call, HttpCallScope) else call.span
        span = self._tracer.start_span(
            names.SPAN_HEDGE,
            context=trace.set_span_in_context(parent),
            kind=INTERNAL,
            attributes={names.ATTR_ATTEMPT: event.attempt, names.ATTR_HEDGE: True},
        )
        return Scope(span, trace.set_span_in_context(span), self._attempt)

    def _hedge_finished(self, event: AttemptFinished) -> None:
        """Record an extra copy's duration (attempt outcome ``hedge``) and end its span."""
        if self._meters.active or self._meters():
            attributes = self._attributes(
                event.policy,
                event.target,
                names.ATTR_ATTEMPT_OUTCOME,
                event.attempt_outcome,
                event.error_type,
            )
            self._attempt_duration.record(event.duration, attributes, context=NO_EXEMPLAR)
        scope = self._attempt.get()
        if scope is None or not scope.span.is_recording():
            return
        if event.error_type == "cancelled":  # another copy won: by design, not an error
            scope.span.set_attributes(
                {
                    names.ATTR_ATTEMPT_OUTCOME: event.attempt_outcome,
                    names.ATTR_ERROR_TYPE: event.error_type,
                }
            )
        else:
            end_attempt_span(scope, event)

    def attempt_finished(self, event: AttemptFinished, /) -> None:
        """Record the attempt's duration (its count counts attempts), and its outcome on the
        attempt span.

        The attempt whose response the call returns ends when that response's body has been
        read or closed (``event.body``), which its span and metrics tell too. An extra copy
        sent by a `Hedge` has its own span (`_hedge_finished`).
        """
        if event.hedge:
            self._hedge_finished(event)
            return
        if self._meters.active or self._meters():
            # error.type is absent on success (None), as the semconv asks.
            attributes = self._attributes(
                event.policy,
                event.target,
                names.ATTR_ATTEMPT_OUTCOME,
                event.attempt_outcome,
                event.error_type,
            )
            self._attempt_duration.record(event.duration, attributes, context=NO_EXEMPLAR)
            if event.paced_for is not None:
                self._pacer_wait.record(
                    event.paced_for,
                    self._attributes(event.policy, event.target),
                    context=NO_EXEMPLAR,
                )
            attempt = self._attempt.get()
            if attempt is not None and attempt.http_attributes is not None:
                version = protocol_version(event.result)
                semconv = semconv_attributes(
                    dict(attempt.http_attributes), event, version, self._error_type
                )
                bounded = self._http_bounded(semconv)
                self._http_duration.record(event.duration, bounded)
                body = event.body
                if body is not None:
                    self._body_size.record(body.size, bounded, context=NO_EXEMPLAR)
                    if body.time_to_first_byte is not None:
                        self._first_byte.record(
                            body.time_to_first_byte, bounded, context=NO_EXEMPLAR
                        )
        call = self._call.get()
        if call is not None and call.first_attempt_at is not None:
            first_attempt_finished(self._tracer, call, event)
            return
        if isinstance(call, HttpCallScope) and event.attempt_outcome == "retried":
            call.span_now()  # a retry follows: the call span holds the attempts from here on
        if call is not None and call.attempt is not None:
            scope, call.attempt = call.attempt, None
            if scope.span.is_recording():
                end_attempt_span(scope, event)

    def retry_scheduled(self, event: RetryScheduled, /) -> None:
        """Record the backoff metrics; the next attempt's span tells the wait.

        Neither a span per sleep nor an event: the next attempt's span carries
        ``retrymw.backoff.delay`` (and the server's hint), and starts where the wait ends. A
        wait that no attempt follows (the call cancelled meanwhile, or refused by the breaker
        or throttle) is a ``retrymw.backoff`` event on the call span when the call ends.
        """
        if self._meters.active or self._meters():
            attributes = self._attributes(event.policy, event.target)
            self._backoff.record(event.delay, attributes, context=NO_EXEMPLAR)
            if event.budget_available is not None:
                self._budget.set(event.budget_available, attributes)
        scope = self._call.get()
        if scope is not None:
            scope.pending_wait = (event, time.time_ns())  # when the wait began

    def retry_denied(self, event: RetryDenied, /) -> None:
        """Count the denial and add ``retrymw.retry.denied`` to the call span."""
        if self._meters.active or self._meters():
            if event.budget_available is not None:
                self._budget.set(
                    event.budget_available, self._attributes(event.policy, event.target)
                )
            self._denied.add(
                1, self._attributes(event.policy, event.target, names.ATTR_REASON, event.reason)
            )
        span = self._call_span_now()
        if span is not None:
            span.add_event(
                names.EVENT_RETRY_DENIED,
                {names.ATTR_REASON: event.reason, names.ATTR_ATTEMPT: event.attempt},
            )

    def call_finished(self, event: CallFinished, /) -> None:
        """Record the call's duration (its count counts calls) and attempts, and its outcome
        and status on the call span."""
        if self._meters.active or self._meters():
            if event.budget_available is not None:
                self._budget.set(
                    event.budget_available, self._attributes(event.policy, event.target)
                )
            attributes = self._attributes(
                event.policy, event.target, names.ATTR_OUTCOME, event.outcome
            )
            self._call_duration.record(event.duration, attributes)
            if event.attempts != 1:  # one attempt is the rule: the call count less this count
                self._call_attempts.record(event.attempts, attributes, context=NO_EXEMPLAR)
        scope = self._call.get()
        if isinstance(scope, HttpCallScope) and event.attempts == 0:
            scope.span_now()  # refused before any attempt: no CLIENT span tells it
        if scope is None or not scope.span.is_recording():
            return
        span = scope.span
        if scope.pending_wait is not None:  # no attempt followed this wait: the call span tells it
            wait_event(span, *scope.pending_wait)
            scope.pending_wait = None
        ending: dict[str, Any] = {
            names.ATTR_OUTCOME: event.outcome,
            names.ATTR_ATTEMPT_COUNT: event.attempts,
        }
        if event.outcome not in ("success", "cancelled"):
            error = event.exception
            ending[names.ATTR_ERROR_TYPE] = (
                qualified_name(error)
                if error is not None
                else event.error_type or names.ERROR_TYPE_OVERFLOW
            )
            span.set_status(ERROR_STATUS)
        span.set_attributes(ending)

    def breaker_state_changed(self, event: BreakerStateChanged, /) -> None:
        """Count the transition, move the state gauge, and note it on the current call span."""
        change = {
            names.ATTR_CIRCUIT: event.circuit,
            names.ATTR_CIRCUIT_PREVIOUS_STATE: event.previous_state,
            names.ATTR_CIRCUIT_STATE: event.state,
        }
        if self._meters.active or self._meters():
            circuit = self._bounds.circuit_label(event.circuit)
            self._live.circuit_seen(circuit)  # never announced: its other transitions at 0
            self._transitions.add(1, {**change, names.ATTR_CIRCUIT: circuit})
            for state in names.CIRCUIT_STATES:
                self._circuit_state.set(
                    1 if state == event.state else 0,
                    {names.ATTR_CIRCUIT: circuit, names.ATTR_CIRCUIT_STATE: state},
                )
        span = self._call_span_now()
        if span is not None:
            span.add_event(names.EVENT_CIRCUIT_STATE_CHANGE, change)

    def _http_bounded(self, attributes: dict[str, Any]) -> dict[str, Any]:
        """``attributes`` while their series fit the bound, else the SDK's own overflow set:
        ``server.address`` has a value per host."""
        key = (names.HTTP_CLIENT_REQUEST_DURATION, *sorted(attributes.items()))
        if self._bounds.admit(key, names.ATTEMPT_DURATION.series):
            return attributes
        return HTTP_OVERFLOW

    def __repr__(self) -> str:
        return (
            f"<OpenTelemetryInstrument tracer_provider={self._tracer_provider!r} "
            f"meter_provider={self._meter_provider!r}>"
        )


def _nested_parent() -> Context | None:
    """The parent of a call (or request) that starts during a coroutine call's first attempt,
    which has no span of its own yet (`Scope.first_attempt_parent`); ``None``: the current
    context."""
    outer = CALL_SCOPE.get()
    if (
        outer is not None
        and outer.first_attempt_at is not None
        and trace.get_current_span() is outer.span
    ):
        return outer.first_attempt_parent()
    return None


def _suppressed(context: Context) -> Context:
    """``context`` with OpenTelemetry's HTTP client instrumentation switched off: retrymw's
    span and duration point are the attempt's (see `attempt_started`)."""
    if SUPPRESS_HTTP_KEY is None:  # pragma: no cover - the key moved: both record
        return context
    return otel_context.set_value(SUPPRESS_HTTP_KEY, True, context)
