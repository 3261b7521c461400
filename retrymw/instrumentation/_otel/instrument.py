"""`OpenTelemetryInstrument`: DESIGN §6's span tree and metrics, on opentelemetry-api only.

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
    from opentelemetry import metrics, propagate, trace
    from opentelemetry.context import Context
    from opentelemetry.trace import Link, Span
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
    RetryDenied,
    RetryScheduled,
)
from ..._core.instruments import Instrument
from .. import _names as names
from .attempts import end_attempt_span, first_attempt_finished, semconv_attributes
from .live import live_gauges
from .meters import (
    HTTP_OVERFLOW,
    NO_EXEMPLAR,
    _args,
    _AttributeSets,
    _histogram,
    _observe_fleet,
)
from .support import (
    _ERROR,
    ATTEMPT_SPAN_PREFIX,
    CALL_SPAN_PREFIX,
    CLIENT,
    INTERNAL,
    _client_span,
    _http_attributes,
    _http_request,
    _HttpCall,
    _protocol_version,
    _ProviderWatch,
    _Scope,
    _wait_attributes,
    _wait_event,
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

    The span tree (DESIGN §6, trimmed by issue 18): an INTERNAL ``retrymw {operation}`` span per
    logical call; one span per attempt under it once a retry happens, a CLIENT span per the HTTP
    semantic conventions for the transports (``GET``, with ``http.request.resend_count`` on
    resends and a redacted ``url.full``; every attempt has one) or an INTERNAL
    ``retrymw.attempt {operation}`` span for coroutines; ``retrymw.backoff``,
    ``retrymw.retry.denied`` and ``retrymw.circuit.state_change`` events on the call span. A
    call that was not retried is one span: a coroutine's call span, an HTTP call's CLIENT span
    (its call span is made only when there is more to say, see `_HttpCall`).

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

    # A coroutine's or function's first attempt runs bare inside the call span (issue 18): the
    # span was current during the attempt anyway, and that attempt has no span of its own
    # unless it is retried (`first_attempt_finished`, from the time the call span noted).
    fast_path_call_scope = True

    def __init__(self, tracer_provider: Any = None, meter_provider: Any = None) -> None:
        self._tracer_provider = tracer_provider
        self._meter_provider = meter_provider
        self._tracer = trace.get_tracer(
            names.SCOPE, _VERSION, tracer_provider, schema_url=names.SCHEMA_URL
        )
        meter = metrics.get_meter(
            names.SCOPE, _VERSION, meter_provider, schema_url=names.SCHEMA_URL
        )
        self._call_duration = _histogram(meter, names.CALL_DURATION)
        self._call_attempts = _histogram(meter, names.CALL_ATTEMPTS)
        self._attempt_duration = _histogram(meter, names.ATTEMPT_DURATION)
        # One exemplar per call (issue 18): the call duration's, recorded while the call span
        # is current, and for HTTP each attempt's semantic-convention record (its CLIENT span,
        # as OpenTelemetry's HTTP instrumentations do). The other records offer the SDK none
        # (`NO_EXEMPLAR`): each offer cost 2 µs or more, and they would point at the same trace.
        self._backoff = _histogram(meter, names.BACKOFF_DURATION)
        self._denied = meter.create_counter(*_args(names.RETRIES_DENIED))
        self._budget = meter.create_gauge(*_args(names.RETRY_BUDGET_AVAILABLE))
        self._circuit_state = meter.create_gauge(*_args(names.CIRCUIT_STATE))
        self._transitions = meter.create_counter(*_args(names.CIRCUIT_TRANSITIONS))
        self._http_duration = meter.create_histogram(
            names.HTTP_CLIENT_REQUEST_DURATION,
            unit="s",
            description="Duration of HTTP client requests (one per retrymw attempt).",
            explicit_bucket_boundaries_advisory=list(names.ATTEMPT_DURATION_BUCKETS),
        )
        _observe_fleet(meter)  # the fleet's health, read at collection (docs/telemetry.md)
        self._live = live_gauges(meter, meter_provider)  # breakers, budgets, throttles, policies
        # The HTTP attributes of this task's current attempt, for http.client.request.duration.
        self._http_attributes: ContextVar[dict[str, Any] | None] = ContextVar(
            "retrymw_otel_http", default=None
        )
        # The label caps and the series bound are the provider's, shared by its instruments.
        self._bounds = self._live.bounds
        self._error_type = self._bounds.error_type
        self._attributes = _AttributeSets(self._live)
        # The global providers are asked for when needed: they may be set later.
        self._traces = _ProviderWatch(
            tracer_provider,
            trace.get_tracer_provider,
            _IDLE_TRACER_PROVIDERS,
            trace.ProxyTracerProvider,
        )
        self._meters = _ProviderWatch(
            meter_provider, metrics.get_meter_provider, _IDLE_METER_PROVIDERS
        )
        self._idle_until = float("-inf")  # the earlier of the two: one comparison per call
        # This instrument's current call scope (not whatever span is current: another
        # instrument may have made its own span current inside ours); it holds the scope of
        # its current attempt.
        self._call: ContextVar[_Scope | None] = ContextVar("retrymw_otel_call", default=None)

    # -- is anybody listening? ---------------------------------------------------------------

    def listening(self) -> bool:
        """Whether a real (SDK) tracer or meter provider is configured; rechecked once a second.

        While it is False the engine skips this instrument, so calls keep their fast path.
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

    def call_started(self, event: CallStarted, /) -> _Scope | None:
        """Start the INTERNAL call span and make it current for the whole call.

        An HTTP call's span waits until the call has more to say than its one CLIENT span
        (`_HttpCall`).
        """
        if not (self._traces.active or self._traces()):
            return None
        if event.request is not None and _http_request(event.request) is not None:
            return _HttpCall(functools.partial(self._call_span, event), self._call)
        span = self._call_span(event)
        scope = _Scope(span, trace.set_span_in_context(span), self._call)
        # The first attempt starts now, unless `attempt_started` says otherwise: a bare first
        # attempt (the fast path, `fast_path_call_scope`) has no attempt_started.
        scope.first_attempt_at = time.time_ns()
        return scope

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
        span = scope.span_now() if isinstance(scope, _HttpCall) else scope.span
        return span if span.is_recording() else None

    def attempt_started(self, event: AttemptStarted, /) -> _Scope | None:
        """Start the attempt span (CLIENT for HTTP, with context injected into the request)."""
        request = None if event.request is None else _http_request(event.request)
        semconv = None
        if request is not None:
            semconv = _http_attributes(request)  # the span's and the duration's, built once
            if self._meters.active or self._meters():
                self._http_attributes.set({**semconv, names.ATTR_URL_SCHEME: request.url.scheme})
        call = self._call.get()
        if call is None:  # no call span: nobody listened when the call started
            return None
        if request is None:
            if event.attempt == 1:
                # One span per call while nothing is retried: the first attempt gets its span
                # only if it is retried (started then at this time), see `attempt_finished`.
                call.first_attempt_at = time.time_ns()
                return None
            attributes: dict[str, Any] = {names.ATTR_ATTEMPT: event.attempt}
            if call.pending_wait is not None:
                _wait_attributes(call.pending_wait[0], attributes)
                call.pending_wait = None
            span = self._tracer.start_span(
                ATTEMPT_SPAN_PREFIX + event.operation,
                kind=INTERNAL,
                attributes=attributes,
            )
            call.attempt = _Scope(span, trace.set_span_in_context(span))
            return call.attempt
        assert semconv is not None  # a request has them
        name, span_attributes = _client_span(request, event.attempt, semconv)
        if call.pending_wait is not None:
            _wait_attributes(call.pending_wait[0], span_attributes)
            call.pending_wait = None
        parent = call.attempt_parent() if isinstance(call, _HttpCall) else None
        span = self._tracer.start_span(
            name, context=parent, kind=CLIENT, attributes=span_attributes
        )
        if isinstance(call, _HttpCall) and call.first_attempt is None:
            call.first_attempt = span.get_span_context()
        # No "suppress HTTP instrumentation" key: opentelemetry-instrumentation-httpx checks
        # it once for its span *and* its metrics, so setting it silenced the standard
        # http.client.* metrics of every retried client (0 of 10 requests recorded). Its span,
        # if it is installed below us, is a child of this attempt span.
        context = trace.set_span_in_context(span)
        # Per attempt, overwriting the previous attempt's header: the server's parent is the
        # attempt span, so each resend is its own child in the trace.
        propagate.inject(request.headers, context=context)
        call.attempt = _Scope(span, context, http=True)
        return call.attempt

    def attempt_finished(self, event: AttemptFinished, /) -> None:
        """Record the attempt's duration (its count counts attempts), and its outcome on the
        attempt span."""
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
            http = self._http_attributes.get()
            if http is not None:
                self._http_attributes.set(None)
                version = _protocol_version(event.result)
                semconv = semconv_attributes(http, event, version, self._error_type)
                self._http_duration.record(event.duration, self._http_bounded(semconv))
        call = self._call.get()
        if call is not None and call.first_attempt_at is not None:
            first_attempt_finished(self._tracer, call, event)
            return
        if isinstance(call, _HttpCall) and event.attempt_outcome == "retried":
            call.span_now()  # a retry follows: the call span holds the attempts from here on
        if call is not None and call.attempt is not None:
            scope, call.attempt = call.attempt, None
            if scope.span.is_recording():
                end_attempt_span(scope, event)

    def first_attempt_succeeded(
        self, policy: str, target: str, duration: float, budget_available: float | None, /
    ) -> None:
        """What `attempt_finished` and `call_finished` write for a call that succeeded at its
        first attempt, on the fast path: inside the call span, which the engine then ends."""
        if self._meters.active or self._meters():
            if budget_available is not None:
                self._budget.set(budget_available, self._attributes(policy, target))
            attempt = self._attributes(policy, target, names.ATTR_ATTEMPT_OUTCOME, "success")
            self._attempt_duration.record(duration, attempt, context=NO_EXEMPLAR)
            call = self._attributes(policy, target, names.ATTR_OUTCOME, "success")
            self._call_duration.record(duration, call)
        scope = self._call.get()
        if scope is None:
            return
        scope.first_attempt_at = None
        if scope.span.is_recording():
            scope.span.set_attributes({names.ATTR_OUTCOME: "success", names.ATTR_ATTEMPT_COUNT: 1})

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
        if isinstance(scope, _HttpCall) and event.attempts == 0:
            scope.span_now()  # refused before any attempt: no CLIENT span tells it
        if scope is None or not scope.span.is_recording():
            return
        span = scope.span
        if scope.pending_wait is not None:  # no attempt followed this wait: the call span tells it
            _wait_event(span, *scope.pending_wait)
            scope.pending_wait = None
        ending: dict[str, Any] = {
            names.ATTR_OUTCOME: event.outcome,
            names.ATTR_ATTEMPT_COUNT: event.attempts,
        }
        if event.outcome not in ("success", "cancelled"):
            ending[names.ATTR_ERROR_TYPE] = event.error_type or names.ERROR_TYPE_OVERFLOW
            span.set_status(_ERROR)
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
