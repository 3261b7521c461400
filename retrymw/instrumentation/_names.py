"""Every metric, label, span, event and attribute name retrymw emits: the single source of truth.

Dashboards, alert rules, tests and both instruments read these constants; nothing else spells a
telemetry name. The contract is docs/telemetry.md.

**One Prometheus name per metric, whichever path exports it.** `PrometheusInstrument` registers
the ``prometheus`` names below with prometheus_client. `OpenTelemetryInstrument` creates the
``otel`` instruments, and an OTel → Prometheus exporter (the Python
``PrometheusMetricReader``, the collector's ``prometheus`` exporter, Prometheus's own OTLP
receiver) derives the same names with the specification's translation rules, implemented here
by `prometheus_name`:

1. ``.`` (and any other character outside ``[a-zA-Z0-9_:]``) becomes ``_``;
2. the unit is appended as a suffix: ``s`` → ``_seconds``; annotation units in braces
   (``{call}``) are dropped, which is why every dimensionless instrument uses one;
3. monotonic counters get ``_total``.

So ``retrymw.retries.denied`` (counter, ``{retry}``) exports as
``retrymw_retries_denied_total`` and ``retrymw.call.duration`` (histogram, ``s``) as
``retrymw_call_duration_seconds``. Attribute keys
translate the same way (``retrymw.policy`` → ``retrymw_policy``, ``error.type`` →
``error_type``), which is why the Prometheus label names are the attribute keys with dots
replaced. The unit ``"1"`` is avoided on purpose: translators disagree on it (``_ratio``).

.. versionadded:: 0.1
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal, get_args

from .._core.events import AttemptOutcome, CallOutcome, CircuitState, RetryReason

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
#: Spans only: ``true`` on the span of an extra copy of an attempt sent by a `Hedge`
#: (`SPAN_HEDGE`); its metrics have the attempt outcome ``hedge``.
ATTR_HEDGE = "retrymw.hedge"
#: Spans only: the origins a request was sent to, in order, ``scheme://host[:port]`` (no
#: credentials, path or query), on its `SPAN_ORIGIN` span.
ATTR_ORIGINS = "retrymw.origins"
#: Spans only: the origin whose answer a request returned (`SPAN_ORIGIN`), absent when it ended
#: in an error; also the ``response.extensions`` key that names it.
ATTR_ORIGIN = "retrymw.origin"
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
#: An extra copy of an attempt sent by a `Hedge`: INTERNAL, a child of the call span, with
#: ``retrymw.attempt`` (the attempt it copies) and ``retrymw.hedge``.
SPAN_HEDGE = "retrymw.hedge"
#: A request on a transport with ``failover=`` that may go to another origin: INTERNAL, the
#: parent of each origin's call span (one trace however many origins), with `ATTR_ORIGINS`,
#: `ATTR_ORIGIN` and `ATTR_TARGET` (the primary's host).
SPAN_ORIGIN = "retrymw.origin"
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

# -- the metric contract: its spec and the OTel → Prometheus translation ------------------------

Kind = Literal["counter", "histogram", "gauge"]


@dataclass(frozen=True, slots=True)
class MetricSpec:
    """One metric of the contract, as both instruments create it.

    Attributes:
        prometheus: the exposed name (counters include ``_total``).
        otel: the OTel instrument name.
        kind: ``counter``, ``histogram`` or ``gauge``.
        unit: the OTel unit (``s`` or an annotation such as ``{call}``).
        labels: Prometheus label names, in order; `ATTRIBUTE_OF_LABEL` gives the OTel keys.
        description: the help text.
        buckets: histogram bucket upper bounds (``+Inf`` implied).
        multiprocess_mode: how prometheus_client multiprocess mode merges a gauge's values.
        semconv: the OTel attribute keys, for a metric labelled by the HTTP semantic
            conventions (its labels are their `prometheus_label`); ``None`` for retrymw's own.
    """

    prometheus: str
    otel: str
    kind: Kind
    unit: str
    labels: tuple[str, ...]
    description: str
    buckets: tuple[float, ...] | None = None
    multiprocess_mode: str | None = None
    semconv: tuple[str, ...] | None = None

    @property
    def attributes(self) -> tuple[str, ...]:
        """The OTel attribute keys matching `labels`."""
        if self.semconv is not None:
            return self.semconv
        return tuple(ATTRIBUTE_OF_LABEL[label] for label in self.labels)

    @property
    def series(self) -> int:
        """Exposition series one label set adds: a histogram's buckets (``+Inf`` too),
        ``_count`` and ``_sum``; a counter's ``_total``; a gauge. retrymw exports no
        ``_created`` series (`_prometheus.live.Exported`), nor does OpenTelemetry's exporter."""
        if self.kind == "histogram":
            return len(self.buckets or ()) + 3
        return 1


_UNIT_SUFFIXES = {"s": "seconds", "ms": "milliseconds", "By": "bytes"}
_INVALID = re.compile(r"[^a-zA-Z0-9_:]")


def prometheus_name(otel_name: str, unit: str, kind: Kind) -> str:
    """Translate an OTel instrument to its Prometheus name, as the OTel exporters do.

    Args:
        otel_name: the instrument name, e.g. ``retrymw.retries.denied``.
        unit: its unit; annotations in braces add no suffix.
        kind: ``counter`` adds ``_total``.

    Returns:
        The exported metric name, e.g. ``retrymw_retries_denied_total``.
    """
    name = _INVALID.sub("_", otel_name)
    unit = re.sub(r"\{[^}]*\}", "", unit)
    suffix = _UNIT_SUFFIXES.get(unit, _INVALID.sub("_", unit))
    if suffix and not name.endswith("_" + suffix):
        name = f"{name}_{suffix}"
    if kind == "counter" and not name.endswith("_total"):
        name += "_total"
    return name


def prometheus_label(attribute: str) -> str:
    """Translate an OTel attribute key to its Prometheus label, as the OTel exporters do.

    Args:
        attribute: the key, e.g. ``server.address``.

    Returns:
        The label name, e.g. ``server_address``.
    """
    return _INVALID.sub("_", attribute)


# -- metrics --------------------------------------------------------------------------------------

#: Whole calls, backoff included: HTTP buckets extended to a minute (a policy's deadline is 30 s
#: by default). Edges at 1, 1.5, 2 and 2.5 s: a call of one failed attempt, a
#: one-second wait and a retry is 1-2 s, and with one bucket from 1 to 2.5 s its p95 read
#: 1.87 s against 1.09 s.
CALL_DURATION_BUCKETS = (
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1,
    1.5,
    2,
    2.5,
    5,
    10,
    30,
    60,
)
#: Attempts per call (cf. Failsafe and gRPC A96).
CALL_ATTEMPTS_BUCKETS = (1, 2, 3, 4, 5, 6, 8, 10)
#: One attempt: the semconv ``http.client.request.duration`` advice (= prometheus_client's
#: default buckets) with edges at 1.5 and 2 s added, as for calls.
ATTEMPT_DURATION_BUCKETS = (
    0.005,
    0.01,
    0.025,
    0.05,
    0.075,
    0.1,
    0.25,
    0.5,
    0.75,
    1,
    1.5,
    2,
    2.5,
    5,
    7.5,
    10,
)
#: One backoff sleep, from jittered milliseconds to the usual 30-60 s caps; the server hints of
#: whole seconds (``Retry-After: 1``, ``2``) end a bucket of their own (0.75-1, 1.5-2 s).
BACKOFF_DURATION_BUCKETS = (
    0.001,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    0.75,
    1,
    1.5,
    2,
    2.5,
    5,
    10,
    30,
    60,
)

_CALL_LABELS = (LABEL_POLICY, LABEL_TARGET, LABEL_OUTCOME)

# Calls and attempts are counted by the duration histograms' ``_count``: a counter
# beside each histogram recorded every event twice. The contract allows this trim.
CALL_DURATION = MetricSpec(
    "retrymw_call_duration_seconds",
    "retrymw.call.duration",
    "histogram",
    "s",
    _CALL_LABELS,
    "Duration of logical calls, every attempt and backoff included; its _count counts calls.",
    CALL_DURATION_BUCKETS,
)
CALL_ATTEMPTS = MetricSpec(
    "retrymw_call_attempts",
    "retrymw.call.attempts",
    "histogram",
    "{attempt}",
    _CALL_LABELS,
    "Attempts made per logical call, observed only for calls that made other than one "
    "(retried; 0 when refused): one-attempt calls are the call histogram's count less this one's.",
    CALL_ATTEMPTS_BUCKETS,
)
ATTEMPT_DURATION = MetricSpec(
    "retrymw_attempt_duration_seconds",
    "retrymw.attempt.duration",
    "histogram",
    "s",
    (LABEL_POLICY, LABEL_TARGET, LABEL_ATTEMPT_OUTCOME, LABEL_ERROR_TYPE),
    "Duration of single attempts, by outcome (success, retried, failed; hedge for an extra "
    "copy) and error type (empty on success); its _count counts attempts.",
    ATTEMPT_DURATION_BUCKETS,
)
BACKOFF_DURATION = MetricSpec(
    "retrymw_backoff_duration_seconds",
    "retrymw.backoff.duration",
    "histogram",
    "s",
    (LABEL_POLICY, LABEL_TARGET),
    "Planned backoff delay before each retry.",
    BACKOFF_DURATION_BUCKETS,
)
RETRIES_DENIED = MetricSpec(
    "retrymw_retries_denied_total",
    "retrymw.retries.denied",
    "counter",
    "{retry}",
    (LABEL_POLICY, LABEL_TARGET, LABEL_REASON),
    "Retryable failures that got no retry, by reason.",
)
# Multiprocess: each worker has its own budget, so the summed tokens mean nothing; the most
# depleted live worker ("livemin") is what throttling alerts need.
RETRY_BUDGET_AVAILABLE = MetricSpec(
    "retrymw_retry_budget_available",
    "retrymw.retry_budget.available",
    "gauge",
    "{token}",
    (LABEL_POLICY, LABEL_TARGET),
    "Tokens in the cross-call retry budget (one retry costs one).",
    multiprocess_mode="livemin",
)
# Multiprocess: "livemax" reads as "some live worker sees this state".
CIRCUIT_STATE = MetricSpec(
    "retrymw_circuit_state",
    "retrymw.circuit.state",
    "gauge",
    "{state}",
    (LABEL_CIRCUIT, LABEL_CIRCUIT_STATE),
    "Circuit breaker state: 1 for the current state, 0 for the others.",
    multiprocess_mode="livemax",
)
CIRCUIT_TRANSITIONS = MetricSpec(
    "retrymw_circuit_transitions_total",
    "retrymw.circuit.transitions",
    "counter",
    "{transition}",
    (LABEL_CIRCUIT, LABEL_CIRCUIT_PREVIOUS_STATE, LABEL_CIRCUIT_STATE),
    "Circuit breaker transitions.",
)

#: The metrics of the contract's table (docs/telemetry.md), in its order.
METRICS: tuple[MetricSpec, ...] = (
    CALL_DURATION,
    CALL_ATTEMPTS,
    ATTEMPT_DURATION,
    BACKOFF_DURATION,
    RETRIES_DENIED,
    RETRY_BUDGET_AVAILABLE,
    CIRCUIT_STATE,
    CIRCUIT_TRANSITIONS,
)

# -- retired counters. No instrument creates them: they duplicated the duration
# histograms' ``_count``, which has the same labels (attempts: ``error_type`` moved onto the
# histogram). Kept so that the migration note (docs/telemetry.md) is checked against them and
# so that the benchmarks' frozen replay of 0.x's primitives still has their names.

CALLS = MetricSpec(
    "retrymw_calls_total",
    "retrymw.calls",
    "counter",
    "{call}",
    _CALL_LABELS,
    "Logical calls by final outcome.",
)
ATTEMPTS = MetricSpec(
    "retrymw_attempts_total",
    "retrymw.attempts",
    "counter",
    "{attempt}",
    (LABEL_POLICY, LABEL_TARGET, LABEL_ATTEMPT_OUTCOME, LABEL_ERROR_TYPE),
    "Attempts by outcome (success, retried, failed) and error type (empty on success).",
)

#: Each retired counter and the histogram whose ``_count`` replaces it, with the same labels.
RETIRED: tuple[tuple[MetricSpec, MetricSpec], ...] = (
    (CALLS, CALL_DURATION),
    (ATTEMPTS, ATTEMPT_DURATION),
)


def count_of(histogram: MetricSpec) -> str:
    """The ``_count`` series of a histogram: how dashboards and rules count its events.

    Args:
        histogram: a histogram of the contract, e.g. `CALL_DURATION`.

    Returns:
        Its Prometheus ``_count`` name, e.g. ``retrymw_call_duration_seconds_count``.
    """
    if histogram.kind != "histogram":
        raise ValueError(
            f"count_of: {histogram.prometheus!r} is a {histogram.kind}; pass a histogram, "
            "e.g. CALL_DURATION"
        )
    return histogram.prometheus + "_count"


# -- saturation gauges and the policy info metric (the contract: "what an operator needs to see
# saturation coming"). Exported from the moment a `Retrier` announces the object (`Attached`),
# read live from its ``statistics()``. Not in `METRICS`, the contract's table.

RETRY_BUDGET_CAPACITY = MetricSpec(
    "retrymw_retry_budget_capacity",
    "retrymw.retry_budget.capacity",
    "gauge",
    "{token}",
    (LABEL_POLICY, LABEL_TARGET),
    "Current capacity of the cross-call retry budget (plot it next to the available tokens).",
    multiprocess_mode="livemin",
)
THROTTLE_REJECT_PROBABILITY = MetricSpec(
    "retrymw_throttle_reject_probability",
    "retrymw.throttle.reject_probability",
    "gauge",
    "{probability}",
    (LABEL_POLICY, LABEL_TARGET),
    "Probability that the adaptive throttle sheds the next attempt, in [0, max_reject].",
    multiprocess_mode="livemax",
)
#: The pacer's wait for a slot: from nothing to a few seconds (a call's deadline bounds it).
PACER_WAIT_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
PACER_WAIT = MetricSpec(
    "retrymw_pacer_wait_seconds",
    "retrymw.pacer.wait",
    "histogram",
    "s",
    (LABEL_POLICY, LABEL_TARGET),
    "Time each attempt waited for its pacer's slot before it was sent.",
    PACER_WAIT_BUCKETS,
)
PACER_LIMIT = MetricSpec(
    "retrymw_pacer_limit",
    "retrymw.pacer.limit",
    "gauge",
    "{request}/s",
    (LABEL_POLICY, LABEL_TARGET),
    "Requests limit per second the pacer paces against: learned from the server's headers, "
    "or its fleet's when lower (0: none known).",
    multiprocess_mode="livemin",
)
PACER_RATE = MetricSpec(
    "retrymw_pacer_rate",
    "retrymw.pacer.rate",
    "gauge",
    "{request}/s",
    (LABEL_POLICY, LABEL_TARGET),
    "Requests per second the pacer sends at now (0: not pacing).",
    multiprocess_mode="livemin",
)
#: A pacer's metrics (`retrymw.Pacer`): the wait histogram, recorded from
#: `AttemptFinished.paced_for`, and its live gauges, read from the pacers a `Retrier` announces.
#: Created with the first pacer, so that a process without one exports no empty family: not in
#: `LIVE_GAUGES`, whose families are made with the instrument. The dashboard's Pacing row
#: reads them (tests/test_dashboards.py admits `PACER_METRICS` beside `LIVE_GAUGES`).
PACER_GAUGES: tuple[MetricSpec, ...] = (PACER_LIMIT, PACER_RATE)
PACER_METRICS: tuple[MetricSpec, ...] = (PACER_WAIT, *PACER_GAUGES)
CIRCUIT_FAILURE_RATE = MetricSpec(
    "retrymw_circuit_failure_rate",
    "retrymw.circuit.failure_rate",
    "gauge",
    "{ratio}",
    (LABEL_CIRCUIT,),
    "Failed share of the attempts in the breaker's sliding window (0 when it is empty).",
    multiprocess_mode="livemax",
)
CIRCUIT_FAILURE_RATE_THRESHOLD = MetricSpec(
    "retrymw_circuit_failure_rate_threshold",
    "retrymw.circuit.failure_rate_threshold",
    "gauge",
    "{ratio}",
    (LABEL_CIRCUIT,),
    "The failure rate that opens the circuit (absent when the rate rule is off).",
    multiprocess_mode="livemax",
)
# The consecutive-failure rule, beside the rate rule above: which rule tripped a circuit (issue
# 31: a consecutive trip read as a failure rate of 20% against 80% while it held the circuit
# open). Neither the count nor the window moves while the circuit is open, so the rule at 1 is
# the one that opened it. A share of its threshold, like the rate next to its own, in one series.
CIRCUIT_CONSECUTIVE_FAILURE_RATIO = MetricSpec(
    "retrymw_circuit_consecutive_failure_ratio",
    "retrymw.circuit.consecutive_failure_ratio",
    "gauge",
    "{ratio}",
    (LABEL_CIRCUIT,),
    "Failed attempts in a row over the consecutive-failure threshold (1 = that rule trips the "
    "circuit; kept while open; absent when that rule is off).",
    multiprocess_mode="livemax",
)
# The circuit that governs a policy's calls to a target: the join that lets the dashboards'
# $policy and $target filters select circuits, whose own series carry the circuit alone.
CIRCUIT_INFO = MetricSpec(
    "retrymw_circuit_info",
    "retrymw.circuit.info",
    "gauge",
    "{circuit}",
    (LABEL_CIRCUIT, LABEL_POLICY, LABEL_TARGET),
    "Always 1: the circuit breaker that governs the calls of a policy to a target.",
    multiprocess_mode="livemax",
)
POLICY_INFO = MetricSpec(
    "retrymw_policy_info",
    "retrymw.policy.info",
    "gauge",
    "{policy}",
    (
        LABEL_POLICY,
        LABEL_POLICY_ATTEMPTS,
        LABEL_POLICY_INITIAL_DELAY,
        LABEL_POLICY_MAX_DELAY,
        LABEL_POLICY_TIMEOUT,
        LABEL_POLICY_DEADLINE,
    ),
    "Always 1: a retry policy's attempts, delays and time limits, as labels.",
    multiprocess_mode="livemax",
)

#: The gauges exported live for announced objects, beyond the contract's table.
LIVE_GAUGES: tuple[MetricSpec, ...] = (
    RETRY_BUDGET_CAPACITY,
    THROTTLE_REJECT_PROBABILITY,
    CIRCUIT_FAILURE_RATE,
    CIRCUIT_FAILURE_RATE_THRESHOLD,
    CIRCUIT_CONSECUTIVE_FAILURE_RATIO,
    CIRCUIT_INFO,
    POLICY_INFO,
)

# -- the fleet's health (`retrymw.fleet.RedisFleet`), one series per namespace and process, read
# from the process's open fleets at scrape time. Multiprocess modes: each worker is a member.

FLEET_MEMBERS = MetricSpec(
    "retrymw_fleet_members",
    "retrymw.fleet.members",
    "gauge",
    "{process}",
    (LABEL_FLEET,),
    "Processes of the fleet (members) this process counted at its last successful step.",
    multiprocess_mode="livemax",
)
FLEET_DEGRADED = MetricSpec(
    "retrymw_fleet_degraded",
    "retrymw.fleet.degraded",
    "gauge",
    "{process}",
    (LABEL_FLEET,),
    "1 while this process decides on local shares alone: its last step failed, or none "
    "succeeded yet (summed over workers: the degraded workers).",
    multiprocess_mode="livesum",
)
FLEET_SYNC_AGE = MetricSpec(
    "retrymw_fleet_sync_age_seconds",
    "retrymw.fleet.sync_age",
    "gauge",
    "s",
    (LABEL_FLEET,),
    "Seconds since this process's last successful step (since its start before the first): "
    "how old its view of the fleet is.",
    multiprocess_mode="livemax",
)
FLEET_SYNC_LAG = MetricSpec(
    "retrymw_fleet_sync_lag_seconds",
    "retrymw.fleet.sync_lag",
    "gauge",
    "s",
    (LABEL_FLEET,),
    "Round trip of this process's last successful step to the store.",
    multiprocess_mode="livemax",
)
FLEET_TOKENS_LEASED = MetricSpec(
    "retrymw_fleet_tokens_leased_total",
    "retrymw.fleet.tokens_leased",
    "counter",
    "{token}",
    (LABEL_FLEET,),
    "Retry-budget tokens this process leased from the fleet's shared buckets.",
)

#: The fleet's health metrics, exported while a `RedisFleet` is open in the process.
FLEET_METRICS: tuple[MetricSpec, ...] = (
    FLEET_MEMBERS,
    FLEET_DEGRADED,
    FLEET_SYNC_AGE,
    FLEET_SYNC_LAG,
    FLEET_TOKENS_LEASED,
)

# -- the server companion (`retrymw.server`): requests a service receives, by whether its caller
# says it is a retry. prometheus_client only; the name is the one an OTel counter would export.

INBOUND_REQUESTS = MetricSpec(
    "retrymw_inbound_requests_total",
    "retrymw.inbound.requests",
    "counter",
    "{request}",
    (LABEL_SERVICE, LABEL_ROUTE, LABEL_INBOUND_ATTEMPT),
    "Requests received, by route and by whether the caller says it is a retry.",
)

#: The metrics of the server companion's middlewares.
SERVER_METRICS: tuple[MetricSpec, ...] = (INBOUND_REQUESTS,)

#: Every transition a breaker can make: counters pre-created at 0 for each announced circuit.
CIRCUIT_TRANSITION_PAIRS: tuple[tuple[CircuitState, CircuitState], ...] = (
    ("closed", "open"),
    ("open", "half_open"),
    ("half_open", "closed"),
    ("half_open", "open"),
)

#: The OTel HTTP client semantic-convention metric, recorded per attempt on the HTTP path.
HTTP_CLIENT_REQUEST_DURATION = "http.client.request.duration"
#: The OTel HTTP client semantic-convention metric of response body sizes (bytes, ``By``),
#: recorded on the HTTP path for the attempt whose response a call returned, once its body
#: has been read or closed.
HTTP_CLIENT_RESPONSE_BODY_SIZE = "http.client.response.body.size"
#: Seconds from the start of the attempt whose response a call returned to the first byte of
#: its body, beside the semconv HTTP metrics.
RESPONSE_TIME_TO_FIRST_BYTE = "retrymw.response.time_to_first_byte"

#: The attributes of the response-body metrics, those of ``http.client.request.duration``
#: (`_http_semconv.body_attributes`), and the SDK's overflow attribute for the sets past the
#: series bound. Their Prometheus labels are the keys translated (`prometheus_label`).
BODY_ATTRIBUTES = (
    ATTR_HTTP_METHOD,
    ATTR_SERVER_ADDRESS,
    ATTR_SERVER_PORT,
    ATTR_URL_SCHEME,
    ATTR_HTTP_STATUS_CODE,
    ATTR_NETWORK_PROTOCOL_VERSION,
    ATTR_ERROR_TYPE,
    ATTR_METRIC_OVERFLOW,
)
#: The OpenTelemetry SDK's default explicit buckets, which ``http.client.response.body.size``
#: gets (the semconv advises none), in bytes.
BODY_SIZE_BUCKETS = (0, 5, 10, 25, 50, 75, 100, 250, 500, 750, 1000, 2500, 5000, 7500, 10000)
RESPONSE_BODY_SIZE = MetricSpec(
    prometheus_name(HTTP_CLIENT_RESPONSE_BODY_SIZE, "By", "histogram"),
    HTTP_CLIENT_RESPONSE_BODY_SIZE,
    "histogram",
    "By",
    tuple(prometheus_label(key) for key in BODY_ATTRIBUTES),
    "Size of HTTP client response bodies (the response a call returned).",
    BODY_SIZE_BUCKETS,
    semconv=BODY_ATTRIBUTES,
)
TIME_TO_FIRST_BYTE = MetricSpec(
    prometheus_name(RESPONSE_TIME_TO_FIRST_BYTE, "s", "histogram"),
    RESPONSE_TIME_TO_FIRST_BYTE,
    "histogram",
    "s",
    tuple(prometheus_label(key) for key in BODY_ATTRIBUTES),
    "Seconds from the start of the attempt whose response a call returned to the first byte "
    "of its body.",
    ATTEMPT_DURATION_BUCKETS,
    semconv=BODY_ATTRIBUTES,
)
#: The metrics of the body of the response an HTTP call returned, recorded when it ends (read,
#: closed, cut or stalled), on both paths: one series set per `BODY_ATTRIBUTES` values, made
#: at its first record (never before: an idle pair has none).
BODY_METRICS: tuple[MetricSpec, ...] = (RESPONSE_BODY_SIZE, TIME_TO_FIRST_BYTE)

# Spans: how the body of the response a call returned was read, on the CLIENT span
# of the attempt that produced it, which lasts until then.
#: ``completed``, ``closed`` (by the caller, before its end), ``cut`` or ``stalled``.
ATTR_RESPONSE_BODY_STATE = "retrymw.response.body.state"
#: Seconds from the start of the attempt to the body's first byte (absent when none came).
ATTR_RESPONSE_TIME_TO_FIRST_BYTE = "retrymw.response.time_to_first_byte"
#: Body bytes received (semconv, as sent on the wire).
ATTR_HTTP_RESPONSE_BODY_SIZE = "http.response.body.size"
#: The values of `ATTR_RESPONSE_BODY_STATE`.
BODY_STATES = ("completed", "closed", "cut", "stalled")

# Exceptions as logs (OTEL_SEMCONV_EXCEPTION_SIGNAL_OPT_IN=logs or logs/dup): one WARN log
# record for a call that ends with an exception after its retries.
#: Semconv (Development) event name, for an HTTP call.
EVENT_HTTP_CLIENT_REQUEST_EXCEPTION = "http.client.request.exception"
#: The same for a coroutine or function call.
EVENT_CALL_EXCEPTION = "retrymw.call.exception"
