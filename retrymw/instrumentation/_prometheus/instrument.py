"""`PrometheusInstrument`: the metrics of DESIGN §6 through prometheus_client.

Importing this module needs prometheus_client (the ``prometheus`` extra); the package namespace
imports it only when `PrometheusInstrument` is first asked for (through the package).
"""

from __future__ import annotations

import contextlib
import functools
import math
import time
import weakref
from collections.abc import Callable, Sequence
from typing import Any, Final

try:
    import prometheus_client
    import prometheus_client.values
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
from ..._core.forks import ForkSafeLock
from ..._core.instruments import Instrument
from .. import _names as names
from .._protection_live import (
    budget_capacity,
    failure_rate,
    failure_rate_threshold,
    policy_info,
    reject_probability,
)
from .exemplar import exemplar_due, exemplar_reader
from .live import FleetCollector, FleetGauges, create, read_live, set_from

__all__ = ["PrometheusInstrument"]

_exemplar: Final = exemplar_reader()


class _Metrics:
    """The collectors of one registry, their cached label children and the label caps."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.call_duration = create(registry, names.CALL_DURATION)
        self.call_attempts = create(registry, names.CALL_ATTEMPTS)
        self.attempt_duration = create(registry, names.ATTEMPT_DURATION)
        self.backoff = create(registry, names.BACKOFF_DURATION)
        self.denied = create(registry, names.RETRIES_DENIED)
        self.budget = create(registry, names.RETRY_BUDGET_AVAILABLE)
        self.circuit_state = create(registry, names.CIRCUIT_STATE)
        self.transitions = create(registry, names.CIRCUIT_TRANSITIONS)
        self.budget_capacity = create(registry, names.RETRY_BUDGET_CAPACITY)
        self.reject_probability = create(registry, names.THROTTLE_REJECT_PROBABILITY)
        self.failure_rate = create(registry, names.CIRCUIT_FAILURE_RATE)
        self.failure_rate_threshold = create(registry, names.CIRCUIT_FAILURE_RATE_THRESHOLD)
        self.policy_info = create(registry, names.POLICY_INFO)
        self.target = names.BoundedValues(names.MAX_TARGETS, names.OVERFLOW)
        self.circuit = names.BoundedValues(names.MAX_TARGETS, names.OVERFLOW)
        self.error_type = names.BoundedValues(names.MAX_ERROR_TYPES, names.ERROR_TYPE_OVERFLOW)
        # Children by raw label values. `labels()` takes a lock and converts every value (about
        # 3 µs); a dict hit is ~50 ns. Only admitted (uncapped) values are ever keys, so the
        # caches stay as bounded as the series.
        self.call_children: dict[tuple[str, str, str], tuple[Any, Any]] = {}
        self.attempt_children: dict[tuple[str, str, str, str | None], Any] = {}
        self.backoff_children: dict[tuple[str, str], Any] = {}
        # A first-attempt success's three children: the attempt's duration, then the call's
        # duration and attempts.
        self.success_children: dict[tuple[str, str], tuple[Any, ...]] = {}
        self.budget_children: dict[tuple[str, str], Any] = {}
        self.denied_children: dict[tuple[str, str, str], Any] = {}
        self.pairs: set[tuple[str, str]] = set()
        # Announced objects (`Attached`). A protection shared by every target of a policy is
        # announced with target "": it is wired to each (policy, target) as the target appears.
        self.shared: dict[str, list[weakref.ref[Any]]] = {}
        self.wired: set[tuple[str, str, int]] = set()
        self.circuits: set[str] = set()
        self.policies: dict[str, tuple[str, ...]] = {}
        # Multiprocess mode cannot compute gauges at scrape time (the collector reads files):
        # they are refreshed from the live objects as calls finish, at most once a second.
        self.multiprocess = (
            prometheus_client.values.ValueClass is not prometheus_client.values.MutexValue
        )
        self.refreshers: dict[tuple[str, str], list[Callable[[], None]]] = {}
        self.refreshed_at: dict[tuple[str, str], float] = {}
        self.lock = ForkSafeLock()
        self.fleets: FleetGauges | None = None
        if self.multiprocess:
            self.fleets = FleetGauges(registry)
        else:
            with contextlib.suppress(ValueError):  # a reloaded module: the first one serves
                registry.register(FleetCollector())

    def precreate(self, policy: str, target: str) -> None:
        """Export zeros for a new (policy, target): every outcome and reason ("avoid missing
        metrics", so that ratios and ``rate() > 0`` alerts have a series from the start).

        Calls and attempts are counted by the duration histograms' ``_count``: the call
        histogram exists for every outcome, the attempt histogram for a success (no error
        type), so that ``increase()`` sees a target's first call, first success and first
        failure alike.
        """
        if (policy, target) in self.pairs:
            return
        self.pairs.add((policy, target))
        for outcome in names.OUTCOMES:
            self.call_duration.labels(policy, target, outcome)
        for reason in names.REASONS:
            self.denied.labels(policy, target, reason)
        self.attempt_duration.labels(policy, target, "success", "")
        if target:
            for ref in self.shared.get(policy, ()):
                subject = ref()
                if subject is not None:
                    self.attach(policy, target, subject)

    # -- announced objects (`Attached`) ----------------------------------------------------------

    def attach(self, policy: str, raw_target: str, subject: object) -> None:
        """Export every series ``subject`` can have, for ``policy`` and ``raw_target``."""
        from ..._core.policy import RetryPolicy
        from ..._protect.breaker import CircuitBreaker
        from ..._protect.budget import RetryBudget
        from ..._protect.throttle import AdaptiveThrottle

        if isinstance(subject, RetryPolicy):
            self.policy(subject)
            return
        if isinstance(subject, CircuitBreaker):
            # A circuit is its own label: the target plays no part.
            self.circuit_of(subject)
            return
        if not isinstance(subject, (RetryBudget, AdaptiveThrottle)):
            return
        if not raw_target:
            with self.lock:
                refs = self.shared.setdefault(policy, [])
                if any(ref() is subject for ref in refs):
                    return
                refs.append(weakref.ref(subject))
                targets = [target for known, target in self.pairs if known == policy]
            for target in targets:
                self.attach(policy, target, subject)
            return
        target = self.target(raw_target)
        key = (policy, target, id(subject))
        with self.lock:
            if key in self.wired:
                return
            self.wired.add(key)
        self.precreate(policy, target)
        ref = weakref.ref(subject)
        if isinstance(subject, RetryBudget):
            self.live(
                (policy, target),
                (
                    (self.budget.labels(policy, target), lambda b: b.available()),
                    (self.budget_capacity.labels(policy, target), budget_capacity),
                ),
                ref,
            )
        else:
            self.live(
                (policy, target),
                ((self.reject_probability.labels(policy, target), reject_probability),),
                ref,
            )

    def circuit_of(self, breaker: Any) -> None:
        """A healthy circuit reads closed = 1 and 0 transitions from its creation."""
        circuit = self.circuit(breaker.name)
        with self.lock:
            if circuit in self.circuits:
                return
            self.circuits.add(circuit)
        state = breaker.statistics().state
        for name in names.CIRCUIT_STATES:
            self.circuit_state.labels(circuit, name).set(1 if name == state else 0)
        for previous, current in names.CIRCUIT_TRANSITION_PAIRS:
            self.transitions.labels(circuit, previous, current)
        ref = weakref.ref(breaker)
        gauges: list[tuple[Any, Callable[[Any], float]]] = [
            (self.failure_rate.labels(circuit), failure_rate)
        ]
        threshold = failure_rate_threshold(breaker)
        if not math.isnan(threshold):
            self.failure_rate_threshold.labels(circuit).set(threshold)
        self.live(("", circuit), gauges, ref)

    def live(
        self,
        key: tuple[str, str],
        gauges: tuple[tuple[Any, Callable[[Any], float]], ...]
        | list[tuple[Any, Callable[[Any], float]]],
        ref: weakref.ref[Any],
    ) -> None:
        """Make each gauge read ``read(subject)``: at scrape time, or as calls finish."""
        for gauge, read in gauges:
            reader = functools.partial(read_live, ref, read)
            if self.multiprocess:
                setter = functools.partial(set_from, gauge, reader)
                setter()
                with self.lock:
                    self.refreshers.setdefault(key, []).append(setter)
            else:
                gauge.set_function(reader)

    def refresh(self, key: tuple[str, str]) -> None:
        """Multiprocess mode: write the live gauges of ``key`` (at most once a second)."""
        setters = self.refreshers.get(key)
        if not setters:
            return
        now = time.monotonic()
        if now - self.refreshed_at.get(key, -math.inf) < 1.0:
            return
        self.refreshed_at[key] = now
        for setter in setters:
            setter()

    def policy(self, policy: Any) -> None:
        """``retrymw_policy_info`` = 1 with the policy's settings; one series per policy name."""
        values = policy_info(policy)[1:]  # the name is the key
        with self.lock:
            previous = self.policies.get(policy.name)
            if previous == values:
                return
            self.policies[policy.name] = values
        if previous is not None:
            # Same name, new settings: the info series says what governs calls now.
            with contextlib.suppress(KeyError):
                self.policy_info.remove(policy.name, *previous)
        self.policy_info.labels(policy.name, *values).set(1)

    def call(self, policy: str, raw_target: str, outcome: str) -> tuple[Any, Any]:
        target = self.target(raw_target)
        self.precreate(policy, target)
        children = (
            self.call_duration.labels(policy, target, outcome),
            self.call_attempts.labels(policy, target, outcome),
        )
        if target == raw_target:
            self.call_children[policy, target, outcome] = children
        return children

    def attempt(self, policy: str, raw_target: str, outcome: str, raw_error: str | None) -> Any:
        target = self.target(raw_target)
        error_type = "" if raw_error is None else self.error_type(raw_error)
        self.precreate(policy, target)
        child = self.attempt_duration.labels(policy, target, outcome, error_type)
        if target == raw_target and error_type == (raw_error or ""):
            self.attempt_children[policy, target, outcome, raw_error] = child
        return child

    def success(self, policy: str, raw_target: str) -> tuple[Any, Any, Any]:
        children = (
            self.attempt(policy, raw_target, "success", None),
            *self.call(policy, raw_target, "success"),
        )
        if self.target(raw_target) == raw_target:
            self.success_children[policy, raw_target] = children
        return children

    def backoff_of(self, policy: str, raw_target: str) -> Any:
        target = self.target(raw_target)
        self.precreate(policy, target)
        child = self.backoff.labels(policy, target)
        if target == raw_target:
            self.backoff_children[policy, target] = child
        return child

    def budget_of(self, policy: str, raw_target: str) -> Any:
        target = self.target(raw_target)
        child = self.budget.labels(policy, target)
        if target == raw_target:
            self.budget_children[policy, target] = child
        return child

    def denied_of(self, policy: str, raw_target: str, reason: str) -> Any:
        target = self.target(raw_target)
        self.precreate(policy, target)
        child = self.denied.labels(policy, target, reason)
        if target == raw_target:
            self.denied_children[policy, target, reason] = child
        return child


def _observe(histogram: Any, bounds: Sequence[float], value: float, exemplar: Any) -> None:
    """Observe ``value``, with the exemplar if its bucket takes one now (`exemplar_due`)."""
    if exemplar is not None and not exemplar_due(histogram, bounds, value):
        exemplar = None
    histogram.observe(value, exemplar)


_lock = ForkSafeLock()
_by_registry: weakref.WeakKeyDictionary[CollectorRegistry, _Metrics] = weakref.WeakKeyDictionary()


def _metrics_for(registry: CollectorRegistry) -> _Metrics:
    with _lock:
        metrics = _by_registry.get(registry)
        if metrics is None:
            metrics = _by_registry[registry] = _Metrics(registry)
        return metrics


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
    ``_other``; ``error_type`` keeps 50, then ``_OTHER``.

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
        self._metrics = _metrics_for(self.registry)

    def attached(self, event: Attached, /) -> None:
        """Export every series of an announced policy, breaker, budget or throttle at once."""
        self._metrics.attach(event.policy, event.target, event.subject)

    def attempt_finished(self, event: AttemptFinished, /) -> None:
        """Observe the attempt's duration (its ``_count`` counts the attempt)."""
        metrics = self._metrics
        key = (event.policy, event.target, event.attempt_outcome, event.error_type)
        child = metrics.attempt_children.get(key)
        if child is None:
            child = metrics.attempt(*key)
        _observe(child, names.ATTEMPT_DURATION_BUCKETS, event.duration, _exemplar())

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
        children = metrics.call_children.get(key)
        if children is None:
            children = metrics.call(*key)
        _observe(children[0], names.CALL_DURATION_BUCKETS, event.duration, _exemplar())
        children[1].observe(event.attempts)  # exemplars go on the latency histograms only
        if event.budget_available is not None:
            self._budget(event.policy, event.target, event.budget_available)
        if metrics.multiprocess:
            metrics.refresh((event.policy, metrics.target(event.target)))
            if metrics.fleets is not None:
                metrics.fleets.refresh()

    def first_attempt_succeeded(
        self, policy: str, target: str, duration: float, budget_available: float | None, /
    ) -> None:
        """What `attempt_finished` and `call_finished` record for a call that succeeded at once.

        The fast path of a call whose first attempt succeeded: the same series and values
        (three observations: the attempt's and the call's durations, one attempt), with the
        exemplar read once.
        """
        metrics = self._metrics
        children = metrics.success_children.get((policy, target))
        if children is None:
            children = metrics.success(policy, target)
        exemplar = _exemplar()
        _observe(children[0], names.ATTEMPT_DURATION_BUCKETS, duration, exemplar)
        _observe(children[1], names.CALL_DURATION_BUCKETS, duration, exemplar)
        children[2].observe(1)
        if budget_available is not None:
            self._budget(policy, target, budget_available)
        if metrics.multiprocess:
            metrics.refresh((policy, metrics.target(target)))
            if metrics.fleets is not None:
                metrics.fleets.refresh()

    def breaker_state_changed(self, event: BreakerStateChanged, /) -> None:
        """Count the transition and move the state-set gauge."""
        metrics = self._metrics
        circuit = metrics.circuit(event.circuit)
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
