"""One registry's retrymw collectors: label children cached, label caps and the series bound
(`Cardinality`), live series.

Shared by every `PrometheusInstrument` on the registry (`metrics_for`), so that creating several
never raises "Duplicated timeseries". Imported by `_prometheus.instrument` only after it has
checked that prometheus_client is installed.
"""

from __future__ import annotations

import contextlib
import functools
import math
import time
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import prometheus_client
import prometheus_client.values
from prometheus_client import CollectorRegistry

from ..._core.forks import ForkSafeLock
from .. import _names as names
from .._cardinality import Cardinality
from .._protection_live import (
    BREAKER_READERS,
    BREAKER_SETTINGS,
    PACER_READERS,
    budget_capacity,
    circuit_info,
    kind_of,
    policy_info,
    reject_probability,
)
from .exemplar import exemplar_due
from .live import FleetCollector, FleetGauges, create, read_live, set_from

__all__ = ["Metrics", "metrics_for", "observe"]


#: The series a (policy, target) pair has from its first record: its successes (`precreate`),
#: counted at their full size, which they have from their first observation.
_ENTRY_SERIES = names.CALL_DURATION.series + names.ATTEMPT_DURATION.series

#: The denial reason each kind of protection gives: exported at 0 with the object (the contract,
#: "every series a configured breaker, budget or throttle can have exists from its creation"),
#: so that increase() counts its first denial.
_DENIAL_OF = {
    "budget": "throttled",
    "breaker": "circuit_open",
    "throttle": "shed",
    "pacer": "paced",
}
#: The outcome of a call a breaker or a throttle refuses before any attempt: its call series
#: exists from the object's creation too, so that the refused share counts the first refusals.
_REFUSAL_OF = {"breaker": "circuit_open", "throttle": "shed", "pacer": "paced"}
#: The response-body metrics' labels for the attribute sets past the series bound: the
#: OpenTelemetry SDK's overflow set (``otel_metric_overflow="true"`` alone), as on that path.
_BODY_OVERFLOW = tuple(
    "true" if key == names.ATTR_METRIC_OVERFLOW else "" for key in names.BODY_ATTRIBUTES
)
#: What one attribute set of the response-body metrics adds to the ledger.
_BODY_SERIES = sum(spec.series for spec in names.BODY_METRICS)


class Metrics:
    """The collectors of one registry, their cached label children, the label caps and the
    series bound: every label set a record needs is placed by `bounds` (`Cardinality.place`)."""

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
        # A pacer's metrics (`names.PACER_METRICS`), made with the first pacer (`pacer_metric`).
        self.registry = registry
        self.pacer_metrics: dict[names.MetricSpec, Any] = {}
        # The breaker's gauges (`BREAKER_READERS`): live readings and constant settings.
        self.breaker_gauges = {spec: create(registry, spec) for spec, _ in BREAKER_READERS}
        self.circuit_info = create(registry, names.CIRCUIT_INFO)
        self.policy_info = create(registry, names.POLICY_INFO)
        # The body of the response an HTTP call returned: made at their first record only.
        self.body_size = create(registry, names.RESPONSE_BODY_SIZE)
        self.first_byte = create(registry, names.TIME_TO_FIRST_BYTE)
        self.bounds = Cardinality()
        self.target = self.bounds.target
        self.error_type = self.bounds.error_type
        # Children by raw label values. `labels()` takes a lock and converts every value (about
        # 3 µs); a dict hit is ~50 ns. Only values placed as they are (neither capped nor
        # moved to an overflow series) are ever keys, so the caches stay as bounded as the
        # series.
        self.call_children: dict[tuple[str, str, str], Any] = {}
        self.attempts_children: dict[tuple[str, str, str], Any] = {}
        self.attempt_children: dict[tuple[str, str, str, str | None], Any] = {}
        self.backoff_children: dict[tuple[str, str], Any] = {}
        # A first-attempt success's two children: the attempt's duration, then the call's.
        self.success_children: dict[tuple[str, str], tuple[Any, ...]] = {}
        self.budget_children: dict[tuple[str, str], Any] = {}
        self.denied_children: dict[tuple[str, str, str], Any] = {}
        # The body-size and first-byte children, by their label values.
        self.body_children: dict[tuple[str, ...], tuple[Any, Any]] = {}
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

    def place(
        self, policy: str, target: str, child: tuple[str, ...] | None, series: int = 0
    ) -> tuple[str, str]:
        """The (policy, target) labels of a record (`Cardinality.place`), with their zeros.

        ``target`` is capped already (`target`); ``child`` names the record's other labels (the
        metric and its values), ``None`` when the pair's zeros have them; ``series`` is what
        they add.
        """
        pair = self.bounds.place(policy, target, _ENTRY_SERIES, child, series)
        self.precreate(*pair)
        return pair

    def precreate(self, policy: str, target: str) -> None:
        """Export a new (policy, target)'s successes from its first record, whatever it was.

        The call histogram's and the attempt histogram's success series (no error type) are
        the denominators of every ratio the dashboards and alerts compute, so the first success
        of a target that started failing is counted by ``increase()``; while empty, each is
        three series (`Exported`). Every other outcome, attempt outcome and error type is
        created by its first event (an error type is unknown before), and the denial reasons of
        the pair's protection with the protection (`wire`).
        """
        if (policy, target) in self.pairs:
            return
        self.pairs.add((policy, target))
        self.call_duration.labels(policy, target, "success")
        self.attempt_duration.labels(policy, target, "success", "")
        if target:
            for ref in self.shared.get(policy, ()):
                subject = ref()
                if subject is not None:
                    self.wire(policy, target, subject)

    # -- announced objects (`Attached`) ----------------------------------------------------------

    def attach(self, policy: str, raw_target: str, subject: object) -> None:
        """Export every series ``subject`` can have, for ``policy`` and ``raw_target``."""
        kind = kind_of(subject)
        if kind == "policy":
            self.policy(subject)
            return
        if kind is None:
            return
        if kind == "breaker":
            self.circuit_of(subject)  # a circuit is its own label: the target plays no part
        if not raw_target:
            with self.lock:
                refs = self.shared.setdefault(policy, [])
                if any(ref() is subject for ref in refs):
                    return
                refs.append(weakref.ref(subject))
                targets = [target for known, target in self.pairs if known == policy]
            for target in targets:
                self.wire(policy, target, subject)
            return
        target = self.target(raw_target)
        if target != names.OVERFLOW:  # a target's own object never stands for every other
            self.wire(policy, target, subject)

    def wire(self, policy: str, target: str, subject: object) -> None:
        """Export what a breaker, budget or throttle gives (policy, target): its denial reason
        at 0, a breaker's `names.CIRCUIT_INFO`, and the live gauges of a budget or throttle read
        from ``subject``."""
        kind = kind_of(subject)
        key = (policy, target, id(subject))
        with self.lock:
            if key in self.wired or kind not in _DENIAL_OF:
                return
            self.wired.add(key)
        reason = _DENIAL_OF[kind]
        denied = names.RETRIES_DENIED
        if self.place(policy, target, (denied.prometheus, reason), denied.series) != (
            policy,
            target,
        ):
            return  # its series would not fit (or the policy is past its cap)
        self.denied.labels(policy, target, reason)
        refusal = _REFUSAL_OF.get(kind)
        calls = names.CALL_DURATION
        if refusal is not None and self.place(
            policy, target, (calls.prometheus, refusal), calls.series
        ) == (policy, target):
            self.call_duration.labels(policy, target, refusal)  # three series while empty
        ref = weakref.ref(subject)
        if kind == "breaker":
            circuit = self.bounds.circuit_label(getattr(subject, "name", ""))
            info = names.CIRCUIT_INFO
            if self.place(policy, target, (info.prometheus, circuit), info.series) == (
                policy,
                target,
            ):
                gauge = self.circuit_info.labels(circuit, policy, target)
                self.live((policy, target), ((gauge, circuit_info),), ref)
            return
        specs = {
            "budget": (names.RETRY_BUDGET_AVAILABLE, names.RETRY_BUDGET_CAPACITY),
            "throttle": (names.THROTTLE_REJECT_PROBABILITY,),
            "pacer": tuple(spec for spec, _ in PACER_READERS),
        }.get(kind, ())
        for spec in specs:
            if self.place(policy, target, (spec.prometheus,), spec.series) != (policy, target):
                return  # its series would not fit: the events still set the budget's tokens
        if kind == "budget":
            self.live(
                (policy, target),
                (
                    (self.budget.labels(policy, target), lambda b: b.available()),
                    (self.budget_capacity.labels(policy, target), budget_capacity),
                ),
                ref,
            )
        elif kind == "throttle":
            self.live(
                (policy, target),
                ((self.reject_probability.labels(policy, target), reject_probability),),
                ref,
            )
        elif kind == "pacer":
            self.live(
                (policy, target),
                [
                    (self.pacer_metric(spec).labels(policy, target), read)
                    for spec, read in PACER_READERS
                ],
                ref,
            )

    def circuit_of(self, breaker: Any) -> None:
        """A healthy circuit reads closed = 1 and 0 transitions from its creation."""
        circuit = self.bounds.circuit_label(breaker.name)
        with self.lock:
            if circuit in self.circuits:
                return
            self.circuits.add(circuit)
        state = breaker.statistics().state
        for name in names.CIRCUIT_STATES:
            self.circuit_state.labels(circuit, name).set(1 if name == state else 0)
        for previous, current in names.CIRCUIT_TRANSITION_PAIRS:
            self.transitions.labels(circuit, previous, current)
        gauges: list[tuple[Any, Callable[[Any], float]]] = []
        for spec, read in BREAKER_READERS:
            reading = read_live(weakref.ref(breaker), read)
            if math.isnan(reading):
                continue  # NaN: its rule is off, so it has no series
            gauge = self.breaker_gauges[spec].labels(circuit)
            if spec in BREAKER_SETTINGS:
                gauge.set(reading)
            else:
                gauges.append((gauge, read))
        self.live(("", circuit), gauges, weakref.ref(breaker))

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
        if self.bounds.policy(policy.name) == names.OVERFLOW or not self.bounds.admit(
            ("policy", policy.name), names.POLICY_INFO.series
        ):
            return  # past the policy cap or the series bound: its settings are not exported
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

    def call(self, policy: str, raw_target: str, outcome: str) -> Any:
        """The call duration's child for ``outcome`` (its ``_count`` counts the calls)."""
        spec = names.CALL_DURATION
        # A success is one of the pair's own series (`precreate`).
        child = None if outcome == "success" else (spec.prometheus, outcome)
        pair = self.place(policy, self.target(raw_target), child, spec.series)
        labelled = self.call_duration.labels(*pair, outcome)
        if pair == (policy, raw_target):
            self.call_children[policy, raw_target, outcome] = labelled
        return labelled

    def attempts_of(self, policy: str, raw_target: str, outcome: str) -> Any:
        """The attempts-per-call child for ``outcome``: made by the first call of other than
        one attempt (the others are the call count less its own)."""
        spec = names.CALL_ATTEMPTS
        pair = self.place(policy, self.target(raw_target), (spec.prometheus, outcome), spec.series)
        labelled = self.call_attempts.labels(*pair, outcome)
        if pair == (policy, raw_target):
            self.attempts_children[policy, raw_target, outcome] = labelled
        return labelled

    def attempt(self, policy: str, raw_target: str, outcome: str, raw_error: str | None) -> Any:
        error_type = "" if raw_error is None else self.error_type(raw_error)
        spec = names.ATTEMPT_DURATION
        child: tuple[str, ...] | None = (spec.prometheus, outcome, error_type)
        if (outcome, error_type) == ("success", ""):
            child = None  # one of the pair's zeros
        pair = self.place(policy, self.target(raw_target), child, spec.series)
        labelled = self.attempt_duration.labels(*pair, outcome, error_type)
        if pair == (policy, raw_target) and error_type == (raw_error or ""):
            self.attempt_children[policy, raw_target, outcome, raw_error] = labelled
        return labelled

    def success(self, policy: str, raw_target: str) -> tuple[Any, Any]:
        children = (
            self.attempt(policy, raw_target, "success", None),
            self.call(policy, raw_target, "success"),
        )
        if (policy, raw_target, "success") in self.call_children and (
            (policy, raw_target, "success", None) in self.attempt_children
        ):
            self.success_children[policy, raw_target] = children
        return children

    def backoff_of(self, policy: str, raw_target: str) -> Any:
        spec = names.BACKOFF_DURATION
        pair = self.place(policy, self.target(raw_target), (spec.prometheus,), spec.series)
        child = self.backoff.labels(*pair)
        if pair == (policy, raw_target):
            self.backoff_children[pair] = child
        return child

    def pacer_wait_of(self, policy: str, raw_target: str) -> Any:
        """The child of `names.PACER_WAIT` for (policy, target), placed in the ledger."""
        spec = names.PACER_WAIT
        pair = self.place(policy, self.target(raw_target), (spec.prometheus,), spec.series)
        return self.pacer_metric(spec).labels(*pair)

    def pacer_metric(self, spec: names.MetricSpec) -> Any:
        """The collector of a pacer's metric, made on first use: a process without a pacer
        exports no empty family of them."""
        with self.lock:
            metric = self.pacer_metrics.get(spec)
            if metric is None:
                metric = self.pacer_metrics[spec] = create(self.registry, spec)
            return metric

    def budget_of(self, policy: str, raw_target: str) -> Any:
        spec = names.RETRY_BUDGET_AVAILABLE
        pair = self.place(policy, self.target(raw_target), (spec.prometheus,), spec.series)
        child = self.budget.labels(*pair)
        if pair == (policy, raw_target):
            self.budget_children[pair] = child
        return child

    def denied_of(self, policy: str, raw_target: str, reason: str) -> Any:
        spec = names.RETRIES_DENIED
        pair = self.place(policy, self.target(raw_target), (spec.prometheus, reason), spec.series)
        child = self.denied.labels(*pair, reason)
        if pair == (policy, raw_target):
            self.denied_children[policy, raw_target, reason] = child
        return child

    def body_of(self, attributes: dict[str, Any]) -> tuple[Any, Any]:
        """The body-size and time-to-first-byte children for a response's attributes
        (`_http_semconv.body_attributes`): series of their own while they fit the bound
        (`Cardinality.admit`), else the overflow set, as on the OpenTelemetry path."""
        values = tuple(str(attributes.get(key, "")) for key in names.BODY_ATTRIBUTES)
        children = self.body_children.get(values)
        if children is not None:
            return children
        if not self.bounds.admit((names.RESPONSE_BODY_SIZE.prometheus, *values), _BODY_SERIES):
            values = _BODY_OVERFLOW
        children = (self.body_size.labels(*values), self.first_byte.labels(*values))
        self.body_children[values] = children  # admitted or the overflow set: bounded
        return children


def observe(histogram: Any, bounds: Sequence[float], value: float, exemplar: Any) -> None:
    """Observe ``value``, with the exemplar if its bucket takes one now (`exemplar_due`)."""
    if exemplar is not None and not exemplar_due(histogram, bounds, value):
        exemplar = None
    histogram.observe(value, exemplar)


_lock = ForkSafeLock()
_by_registry: weakref.WeakKeyDictionary[CollectorRegistry, Metrics] = weakref.WeakKeyDictionary()


def metrics_for(registry: CollectorRegistry) -> Metrics:
    with _lock:
        metrics = _by_registry.get(registry)
        if metrics is None:
            metrics = _by_registry[registry] = Metrics(registry)
        return metrics
