"""The label vocabulary of `_names`: scope, bounded label values, Prometheus label names,
OpenTelemetry attribute keys, and span and event names. `_names` re-exports every one, so
``names.LABEL_POLICY`` and the rest are read where they always were; the metric specs there
are built from these.
"""

from __future__ import annotations

from typing import Literal, get_args

from .._core.events import AttemptOutcome, CallOutcome, CircuitState, RetryReason

__all__ = [
    "ATTEMPT_OUTCOMES",
    "ATTRIBUTE_OF_LABEL",
    "ATTR_ATTEMPT",
    "ATTR_ATTEMPT_COUNT",
    "ATTR_ATTEMPT_OUTCOME",
    "ATTR_BACKOFF_DELAY",
    "ATTR_CIRCUIT",
    "ATTR_CIRCUIT_PREVIOUS_STATE",
    "ATTR_CIRCUIT_STATE",
    "ATTR_ERROR_TYPE",
    "ATTR_EXCEPTION_MESSAGE",
    "ATTR_EXCEPTION_STACKTRACE",
    "ATTR_EXCEPTION_TYPE",
    "ATTR_FLEET",
    "ATTR_HTTP_METHOD",
    "ATTR_HTTP_METHOD_ORIGINAL",
    "ATTR_HTTP_RESEND_COUNT",
    "ATTR_HTTP_STATUS_CODE",
    "ATTR_MAX_ATTEMPTS",
    "ATTR_METRIC_OVERFLOW",
    "ATTR_NETWORK_PROTOCOL_VERSION",
    "ATTR_OUTCOME",
    "ATTR_POLICY",
    "ATTR_POLICY_ATTEMPTS",
    "ATTR_POLICY_DEADLINE",
    "ATTR_POLICY_INITIAL_DELAY",
    "ATTR_POLICY_MAX_DELAY",
    "ATTR_POLICY_TIMEOUT",
    "ATTR_REASON",
    "ATTR_RETRY_AFTER",
    "ATTR_RETRY_AFTER_HEADER",
    "ATTR_ROUTE",
    "ATTR_SERVER_ADDRESS",
    "ATTR_SERVER_PORT",
    "ATTR_SERVICE",
    "ATTR_TARGET",
    "ATTR_URL_FULL",
    "ATTR_URL_SCHEME",
    "CIRCUIT_STATES",
    "ERROR_TYPE_OVERFLOW",
    "EVENT_BACKOFF",
    "EVENT_CIRCUIT_STATE_CHANGE",
    "EVENT_EXCEPTION",
    "EVENT_RETRY_DENIED",
    "INBOUND_ATTEMPTS",
    "InboundAttempt",
    "LABEL_ATTEMPT_OUTCOME",
    "LABEL_CIRCUIT",
    "LABEL_CIRCUIT_PREVIOUS_STATE",
    "LABEL_CIRCUIT_STATE",
    "LABEL_ERROR_TYPE",
    "LABEL_FLEET",
    "LABEL_INBOUND_ATTEMPT",
    "LABEL_OUTCOME",
    "LABEL_POLICY",
    "LABEL_POLICY_ATTEMPTS",
    "LABEL_POLICY_DEADLINE",
    "LABEL_POLICY_INITIAL_DELAY",
    "LABEL_POLICY_MAX_DELAY",
    "LABEL_POLICY_TIMEOUT",
    "LABEL_REASON",
    "LABEL_ROUTE",
    "LABEL_SERVICE",
    "LABEL_TARGET",
    "MAX_ERROR_TYPES",
    "MAX_POLICIES",
    "MAX_ROUTES",
    "MAX_SERIES",
    "MAX_TARGETS",
    "OUTCOMES",
    "OVERFLOW",
    "REASONS",
    "SCHEMA_URL",
    "SCOPE",
    "SPAN_ATTEMPT",
    "SPAN_CALL",
    "SPAN_HTTP_OTHER",
    "UNKNOWN_ROUTE",
]

#: Instrumentation scope (tracer and meter name).
SCOPE = "retrymw"
#: Schema of the semantic conventions the HTTP attempt spans follow.
SCHEMA_URL = "https://opentelemetry.io/schemas/1.44.0"

# -- bounded label values (the Literal types of `retrymw._core.events` are the source) ------

OUTCOMES: tuple[CallOutcome, ...] = get_args(CallOutcome)
ATTEMPT_OUTCOMES: tuple[AttemptOutcome, ...] = get_args(AttemptOutcome)
REASONS: tuple[RetryReason, ...] = get_args(RetryReason)
CIRCUIT_STATES: tuple[CircuitState, ...] = get_args(CircuitState)

#: Distinct ``retrymw_target`` (and ``retrymw_circuit``) values kept per registry or instrument;
#: later ones are reported as `OVERFLOW`.
MAX_TARGETS = 100
#: Distinct ``retrymw_policy`` values kept per registry or instrument, as for targets; later
#: ones are reported as `OVERFLOW`.
MAX_POLICIES = 100
#: The label value that stands for every target past `MAX_TARGETS` (and policy past
#: `MAX_POLICIES`).
OVERFLOW = "_other"
#: Distinct ``error_type`` values kept; later ones become `ERROR_TYPE_OVERFLOW` (semconv's own).
MAX_ERROR_TYPES = 50
ERROR_TYPE_OVERFLOW = "_OTHER"
#: Exposition series one registry's (or meter provider's) retrymw metrics ever hold, whatever
#: the policies, targets and error types: a record whose own series would not fit is reported
#: under its policy's `OVERFLOW` target, else under `OVERFLOW` for both (`_cardinality`).
MAX_SERIES = 20_000

#: How an inbound request came, by its caller's attempt header (`retrymw.server`): a first
#: attempt, a retry, or no (or an unreadable) header.
InboundAttempt = Literal["first", "retry", "unknown"]
INBOUND_ATTEMPTS: tuple[InboundAttempt, ...] = get_args(InboundAttempt)
#: Distinct ``retrymw_route`` values kept per service; later ones are reported as `OVERFLOW`.
MAX_ROUTES = 100
#: The ``retrymw_route`` of a request no route template is known for.
UNKNOWN_ROUTE = "_unknown"

# -- Prometheus label names -----------------------------------------------------------------------

LABEL_POLICY = "retrymw_policy"
LABEL_TARGET = "retrymw_target"
LABEL_OUTCOME = "retrymw_outcome"
LABEL_ATTEMPT_OUTCOME = "retrymw_attempt_outcome"
LABEL_REASON = "retrymw_reason"
LABEL_ERROR_TYPE = "error_type"
LABEL_CIRCUIT = "retrymw_circuit"
LABEL_CIRCUIT_STATE = "retrymw_circuit_state"
LABEL_CIRCUIT_PREVIOUS_STATE = "retrymw_circuit_previous_state"
# `retrymw_policy_info` only: the policy's settings (seconds as ``%g``; "" when unset).
LABEL_POLICY_ATTEMPTS = "retrymw_policy_attempts"
LABEL_POLICY_INITIAL_DELAY = "retrymw_policy_initial_delay"
LABEL_POLICY_MAX_DELAY = "retrymw_policy_max_delay"
LABEL_POLICY_TIMEOUT = "retrymw_policy_timeout"
LABEL_POLICY_DEADLINE = "retrymw_policy_deadline"
# The fleet metrics only: the `RedisFleet`'s namespace.
LABEL_FLEET = "retrymw_fleet"
# The server companion's inbound metric only: the service's name, the request's route template
# and how it came (`INBOUND_ATTEMPTS`).
LABEL_SERVICE = "retrymw_service"
LABEL_ROUTE = "retrymw_route"
LABEL_INBOUND_ATTEMPT = "retrymw_attempt"

# -- OpenTelemetry attribute keys (spans and metric attributes) -----------------------------------

ATTR_POLICY = "retrymw.policy"
ATTR_TARGET = "retrymw.target"
ATTR_OUTCOME = "retrymw.outcome"
ATTR_ATTEMPT_OUTCOME = "retrymw.attempt.outcome"
ATTR_REASON = "retrymw.reason"
ATTR_ERROR_TYPE = "error.type"  # semconv
ATTR_CIRCUIT = "retrymw.circuit"
ATTR_CIRCUIT_STATE = "retrymw.circuit.state"
ATTR_CIRCUIT_PREVIOUS_STATE = "retrymw.circuit.previous_state"
ATTR_POLICY_ATTEMPTS = "retrymw.policy.attempts"
ATTR_POLICY_INITIAL_DELAY = "retrymw.policy.initial_delay"
ATTR_POLICY_MAX_DELAY = "retrymw.policy.max_delay"
ATTR_POLICY_TIMEOUT = "retrymw.policy.timeout"
ATTR_POLICY_DEADLINE = "retrymw.policy.deadline"
ATTR_FLEET = "retrymw.fleet"
ATTR_SERVICE = "retrymw.service"
ATTR_ROUTE = "retrymw.route"
#: Spans only: the policy's ``attempts`` (call span).
ATTR_MAX_ATTEMPTS = "retrymw.max_attempts"
#: Spans only: attempts the call made (call span, at the end).
ATTR_ATTEMPT_COUNT = "retrymw.attempt.count"
#: Spans only: the attempt's number, 1 for the first (as in events and logs); on a backoff span,
#: the attempt the sleep leads to.
ATTR_ATTEMPT = "retrymw.attempt"
#: Spans only: the planned sleep in seconds (backoff span).
ATTR_BACKOFF_DELAY = "retrymw.backoff.delay"
#: Spans only: the server's ``Retry-After`` hint in seconds, when there was one (backoff span).
ATTR_RETRY_AFTER = "retrymw.retry_after"
#: Spans only: the header that gave that hint (``retry-after-ms``, ``x-ratelimit-reset-tokens``...).
ATTR_RETRY_AFTER_HEADER = "retrymw.retry_after.header"

# HTTP semantic conventions (stable) on the CLIENT attempt spans.
ATTR_HTTP_METHOD = "http.request.method"
ATTR_HTTP_METHOD_ORIGINAL = "http.request.method_original"
ATTR_SERVER_ADDRESS = "server.address"
ATTR_SERVER_PORT = "server.port"
ATTR_URL_FULL = "url.full"
ATTR_HTTP_STATUS_CODE = "http.response.status_code"
ATTR_HTTP_RESEND_COUNT = "http.request.resend_count"
ATTR_URL_SCHEME = "url.scheme"
#: The response's HTTP version: "1.1", "2", "3" (attempt span and http.client.request.duration).
ATTR_NETWORK_PROTOCOL_VERSION = "network.protocol.version"
#: The OpenTelemetry SDK's attribute for a metric's overflow point (its cardinality limit):
#: ``http.client.request.duration`` records with it alone once new ones pass `MAX_SERIES`.
ATTR_METRIC_OVERFLOW = "otel.metric.overflow"

# Exception events (semconv), written by retrymw itself so that message and stack trace are
# redacted and a failing ``__str__`` cannot break them.
ATTR_EXCEPTION_TYPE = "exception.type"
ATTR_EXCEPTION_MESSAGE = "exception.message"
ATTR_EXCEPTION_STACKTRACE = "exception.stacktrace"

#: Prometheus label name → the OTel attribute key that translates to it.
ATTRIBUTE_OF_LABEL: dict[str, str] = {
    LABEL_POLICY: ATTR_POLICY,
    LABEL_TARGET: ATTR_TARGET,
    LABEL_OUTCOME: ATTR_OUTCOME,
    LABEL_ATTEMPT_OUTCOME: ATTR_ATTEMPT_OUTCOME,
    LABEL_REASON: ATTR_REASON,
    LABEL_ERROR_TYPE: ATTR_ERROR_TYPE,
    LABEL_CIRCUIT: ATTR_CIRCUIT,
    LABEL_CIRCUIT_STATE: ATTR_CIRCUIT_STATE,
    LABEL_CIRCUIT_PREVIOUS_STATE: ATTR_CIRCUIT_PREVIOUS_STATE,
    LABEL_POLICY_ATTEMPTS: ATTR_POLICY_ATTEMPTS,
    LABEL_POLICY_INITIAL_DELAY: ATTR_POLICY_INITIAL_DELAY,
    LABEL_POLICY_MAX_DELAY: ATTR_POLICY_MAX_DELAY,
    LABEL_POLICY_TIMEOUT: ATTR_POLICY_TIMEOUT,
    LABEL_POLICY_DEADLINE: ATTR_POLICY_DEADLINE,
    LABEL_FLEET: ATTR_FLEET,
    LABEL_SERVICE: ATTR_SERVICE,
    LABEL_ROUTE: ATTR_ROUTE,
    # The attempt's kind as a label, its number as a span attribute: one key, as translated.
    LABEL_INBOUND_ATTEMPT: ATTR_ATTEMPT,
}

# -- spans and span events ------------------------------------------------------------------------

#: The logical call: INTERNAL, ``SPAN_CALL.format(operation="GET")`` → ``retrymw GET``.
SPAN_CALL = "retrymw {operation}"
#: A coroutine attempt: INTERNAL, ``retrymw.attempt {operation}``. HTTP attempts are CLIENT spans
#: named by the HTTP semantic conventions: the method (``GET``), or ``HTTP`` for unknown methods.
SPAN_ATTEMPT = "retrymw.attempt {operation}"
SPAN_HTTP_OTHER = "HTTP"
#: Each backoff wait: an event on the call span, at the start of the wait (a span per sleep cost
#: as much as the attempt it separated; the next attempt's span starts where the wait ends).
EVENT_BACKOFF = "retrymw.backoff"
#: On the call span: a retryable failure got no retry (``retrymw.reason``, ``retrymw.attempt``).
EVENT_RETRY_DENIED = "retrymw.retry.denied"
#: On the current call span, if any: a breaker transition (circuit, previous state, state).
EVENT_CIRCUIT_STATE_CHANGE = "retrymw.circuit.state_change"
#: On an attempt span whose attempt raised (semconv): ``exception.type``, ``.message`` (redacted),
#: and for the exception that ends the call ``.stacktrace`` (redacted); a retried exception is
#: recorded without its stack trace. A call that made one attempt records it on the call span.
EVENT_EXCEPTION = "exception"
