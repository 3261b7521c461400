"""`PrometheusInstrument`: the metrics of docs/telemetry.md through prometheus_client.

Importing this module needs prometheus_client (the ``prometheus`` extra); the package namespace
imports it only when `PrometheusInstrument` is first asked for (through the package). The
collectors live in `_prometheus.metrics`, one set per registry.
"""

from __future__ import annotations

from typing import Final

try:
    import prometheus_client
    from prometheus_client import CollectorRegistry
except ImportError:
    raise ImportError(
        "PrometheusInstrument needs prometheus_client: pip install 'retrymw[prometheus]'"
    ) from None

from ..._core.events import (
    Attached,
    AttemptFinished,
    BreakerStateChanged,
    CallFinished,
    RetryDenied,
    RetryScheduled,
)
from ..._core.instruments import Instrument
from .. import _names as names
from .._http_semconv import body_attributes
from .exemplar import exemplar_reader
from .metrics import metrics_for
from .metrics import observe as _observe

__all__ = ["PrometheusInstrument"]

_exemplar: Final = exemplar_reader()


class PrometheusInstrument(Instrument):
    """Feeds the retrymw metrics of a prometheus_client registry.

    Instruments on the same registry share one set of collectors, label children and label
    caps, so creating several (one per `Retrier`, say) never raises "Duplicated timeseries".
    The latency histograms (call, attempt and backoff durations) carry a
    ``trace_id``/``span_id`` exemplar when a sampled OpenTelemetry span is current (visible in
    the OpenMetrics exposition that Prometheus scrapes by default), at most one per bucket per
    second (Prometheus keeps only a bucket's latest); counters carry none. Calls and attempts
    are counted by the duration histograms' ``_count`` (``retrymw_call_duration_seconds_count``,
    ``retrymw_attempt_duration_seconds_count``), which exist from a target's first call.
    ``retrymw_target`` keeps its first 100 values per registry and reports later ones as
    ``_other``; ``error_type`` keeps 50, then ``_OTHER``. The registry's retrymw series never
    pass 20 000 (``MAX_SERIES``): a record whose own series would not fit is counted under its
    policy's ``_other`` target, else under ``_other`` for both (docs/telemetry.md).

    The body of the response an HTTP call returned is recorded when it ends, as the
    OpenTelemetry path records it: ``http_client_response_body_size_bytes`` and
    ``retrymw_response_time_to_first_byte_seconds``, labelled by the HTTP semantic conventions
    (``server_address``... as ``http.client.request.duration``), made at their first record.

    Under prometheus_client's multiprocess mode (``PROMETHEUS_MULTIPROC_DIR``), counters and
    histograms are summed over workers, ``retrymw_retry_budget_available`` reports the lowest
    live worker (``livemin``) and ``retrymw_circuit_state`` the highest (``livemax``: 1 when
    any live worker is in that state); exemplars are dropped, as prometheus_client does there.

    Args:
        registry: the registry to register with; prometheus_client's default ``REGISTRY`` when
            ``None``.

    Raises:
        ImportError: prometheus_client is not installed (at import of this class).

    .. versionadded:: 0.1
    """

    __slots__ = ("_metrics", "registry")

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else prometheus_client.REGISTRY
        self._metrics = metrics_for(self.registry)

    def attached(self, event: Attached, /) -> None:
        """Export every series of an announced policy, breaker, budget or throttle at once."""
        self._metrics.attach(event.policy, event.target, event.subject)

    def attempt_finished(self, event: AttemptFinished, /) -> None:
        """Observe the attempt's duration (its ``_count`` counts the attempt), and for the
        attempt whose response an HTTP call returned, its body's size and time to first byte."""
        metrics = self._metrics
        key = (event.policy, event.target, event.attempt_outcome, event.error_type)
        child = metrics.attempt_children.get(key)
        if child is None:
            child = metrics.attempt(*key)
        _observe(child, names.ATTEMPT_DURATION_BUCKETS, event.duration, _exemplar())
        if event.paced_for is not None:
            wait = metrics.pacer_wait_of(event.policy, event.target)
            _observe(wait, names.PACER_WAIT_BUCKETS, event.paced_for, None)
        body = event.body
        if body is not None:
            size, first_byte = metrics.body_of(body_attributes(event, metrics.error_type))
            size.observe(body.size)
            if body.time_to_first_byte is not None:
                first_byte.observe(body.time_to_first_byte)

    def retry_scheduled(self, event: RetryScheduled, /) -> None:
        """Observe the backoff delay and the budget's tokens."""
        metrics = self._metrics
        child = metrics.backoff_children.get((event.policy, event.target))
        if child is None:
            child = metrics.backoff_of(event.policy, event.target)
        _observe(child, names.BACKOFF_DURATION_BUCKETS, event.delay, _exemplar())
        if event.budget_available is not None:
            self._budget(event.policy, event.target, event.budget_available)

    def retry_denied(self, event: RetryDenied, /) -> None:
        """Count the denied retry by reason."""
        metrics = self._metrics
        child = metrics.denied_children.get((event.policy, event.target, event.reason))
        if child is None:
            child = metrics.denied_of(event.policy, event.target, event.reason)
        child.inc(1)
        if event.budget_available is not None:
            self._budget(event.policy, event.target, event.budget_available)

    def call_finished(self, event: CallFinished, /) -> None:
        """Observe the call's duration (its ``_count`` counts the call) and attempts."""
        metrics = self._metrics
        key = (event.policy, event.target, event.outcome)
        child = metrics.call_children.get(key)
        if child is None:
            child = metrics.call(*key)
        _observe(child, names.CALL_DURATION_BUCKETS, event.duration, _exemplar())
        if event.attempts != 1:  # one attempt is the rule: the call _count less this _count
            attempts = metrics.attempts_children.get(key)
            if attempts is None:
                attempts = metrics.attempts_of(*key)
            attempts.observe(event.attempts)  # exemplars go on the latency histograms only
        if event.budget_available is not None:
            self._budget(event.policy, event.target, event.budget_available)
        if metrics.multiprocess:
            metrics.refresh((event.policy, metrics.target(event.target)))
            if metrics.fleets is not None:
                metrics.fleets.refresh()

    def breaker_state_changed(self, event: BreakerStateChanged, /) -> None:
        """Count the transition and move the state-set gauge."""
        metrics = self._metrics
        circuit = metrics.bounds.circuit_label(event.circuit)
        with metrics.lock:
            first = circuit not in metrics.circuits
            metrics.circuits.add(circuit)
        if first:
            # Never announced (a breaker built outside a Retrier): the other transitions exist
            # from now on, so that at least the next trip is seen by increase().
            for previous, current in names.CIRCUIT_TRANSITION_PAIRS:
                metrics.transitions.labels(circuit, previous, current)
        if metrics.multiprocess:
            metrics.refresh(("", circuit))
        metrics.transitions.labels(circuit, event.previous_state, event.state).inc(1)
        for state in names.CIRCUIT_STATES:
            metrics.circuit_state.labels(circuit, state).set(1 if state == event.state else 0)

    def _budget(self, policy: str, target: str, available: float) -> None:
        child = self._metrics.budget_children.get((policy, target))
        if child is None:
            child = self._metrics.budget_of(policy, target)
        child.set(available)

    def __repr__(self) -> str:
        return f"<PrometheusInstrument registry={self.registry!r}>"
