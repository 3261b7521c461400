"""The protection series of `OpenTelemetryInstrument`: observable gauges read at collection, and
the series every announced object has from its creation.

The same series as `PrometheusInstrument` exports for every policy, breaker, budget and
throttle a `Retrier` announces (`names.LIVE_GAUGES`, read through `_protection_live`): the
budget's capacity, the throttle's rejection probability, the breaker's failure rate, its
consecutive failures and both thresholds, and the policy's settings as ``retrymw.policy.info``
= 1. The objects are held weakly: one that goes away (an evicted target) is no longer reported.

Every series exists from its creation on this path too: a circuit's state reads ``closed`` = 1
(or its state) and its four transitions 0 from its announcement, and the denial reason a
budget, breaker or throttle gives (``throttled``, ``circuit_open``, ``shed``) is recorded at 0
for each (policy, target) it serves, so that ``increase()`` counts the first trip and the first
denial.

Imported by `_otel.instrument` only after it has checked that opentelemetry-api is installed.
"""

from __future__ import annotations

import functools
import math
import weakref
from typing import Any

from opentelemetry import metrics

from ..._core.forks import ForkSafeLock
from .. import _names as names
from .._cardinality import Cardinality
from .._protection_live import (
    BREAKER_READERS,
    BUDGET_READERS,
    PACER_READERS,
    THROTTLE_READERS,
    Reader,
    circuit_info,
    kind_of,
    policy_info,
    read_live,
)

__all__ = ["LiveGauges", "live_gauges"]

#: What a live series is read from: the object (weakly) and how.
_Source = tuple[weakref.ref[Any], Reader]

#: The denial reason each kind of protection gives, recorded at 0 with the object.
_DENIAL_OF = {
    "budget": "throttled",
    "breaker": "circuit_open",
    "throttle": "shed",
    "pacer": "paced",
}


class LiveGauges:
    """The announced objects of the instruments that share one meter, their gauges, and the
    label caps and series bound of every record those instruments make (`bounds`).

    Built by `live_gauges`, which creates the observable gauges once per meter provider: the
    SDK hands a second instrument of the same name the first one's instrument (and keeps
    only the first one's callback), so every `OpenTelemetryInstrument` on a provider shares
    this registry, as `PrometheusInstrument`s on one registry share their collectors.
    """

    def __init__(self) -> None:
        self._lock = ForkSafeLock()
        self.bounds = Cardinality()
        self._target = self.bounds.target
        # spec -> label values (in spec.labels order) -> source. A later object for the same
        # series replaces the earlier one, as a Prometheus gauge's later set_function does.
        self._series: dict[names.MetricSpec, dict[tuple[str, ...], _Source]] = {
            spec: {}
            for spec in (*names.LIVE_GAUGES, *names.PACER_GAUGES)
            if spec is not names.POLICY_INFO
        }
        self._policies: dict[str, tuple[str, ...]] = {}
        #: Budgets and throttles shared by every target of a policy (announced with target
        #: ""): exported for each (policy, target) the calls show (`saw`).
        self.shared: dict[str, list[weakref.ref[Any]]] = {}
        self._pairs: set[tuple[str, str]] = set()
        self._wired: set[tuple[str, str, int]] = set()
        self._circuits: set[str] = set()
        # The instruments whose series exist from an object's creation (`create`).
        self._circuit_state: metrics._Gauge | None = None  # the API exports no public name
        self._transitions: metrics.Counter | None = None
        self._denied: metrics.Counter | None = None

    def create(self, meter: metrics.Meter) -> None:
        """Create the observable gauges on ``meter`` (`names.LIVE_GAUGES`), and take the
        circuit state, transitions and denial instruments, which the SDK hands every
        `OpenTelemetryInstrument` on the meter too (same name, unit and description)."""
        for spec in (*names.LIVE_GAUGES, *names.PACER_GAUGES):
            meter.create_observable_gauge(
                spec.otel,
                callbacks=[functools.partial(self._observe, spec)],
                unit=spec.unit,
                description=spec.description,
            )
        state, transitions, denied = (
            names.CIRCUIT_STATE,
            names.CIRCUIT_TRANSITIONS,
            names.RETRIES_DENIED,
        )
        self._circuit_state = meter.create_gauge(state.otel, state.unit, state.description)
        self._transitions = meter.create_counter(
            transitions.otel, transitions.unit, transitions.description
        )
        self._denied = meter.create_counter(denied.otel, denied.unit, denied.description)

    # -- announcements --------------------------------------------------------------------------

    def attach(self, policy: str, raw_target: str, subject: object) -> None:
        """Export the series of an announced policy, breaker, budget or throttle."""
        kind = kind_of(subject)
        if kind == "policy":
            values = policy_info(subject)
            if self.bounds.policy(values[0]) == names.OVERFLOW or not self.bounds.admit(
                ("policy", values[0]), names.POLICY_INFO.series
            ):
                return  # past the policy cap or the series bound: its settings are not exported
            with self._lock:
                self._policies[values[0]] = values[1:]  # one series per policy name
            return
        if kind is None:
            return
        if kind == "breaker":
            self._breaker(subject)  # a circuit is its own label: the target plays no part
        if raw_target:
            target = self._target(raw_target)
            # A target's own object never stands for every target past the cap.
            if target != names.OVERFLOW:
                self._wire(policy, target, subject, kind)
                self.saw(policy, raw_target)  # and the policy's shared objects serve it too
            return
        with self._lock:
            refs = self.shared.setdefault(policy, [])
            if any(ref() is subject for ref in refs):
                return
            refs.append(weakref.ref(subject))
            targets = [target for known, target in self._pairs if known == policy]
        for target in targets:
            self._wire(policy, target, subject, kind)

    def saw(self, policy: str, raw_target: str) -> None:
        """A call of ``policy`` to ``raw_target``: the policy's shared objects serve it too."""
        # Once per new attribute set (`AttributeSets`): an admitted target is its own capped
        # value, so one set lookup settles it (only targets past the cap are capped again).
        if (policy, raw_target) in self._pairs:
            return
        target = self._target(raw_target)
        if (policy, target) in self._pairs:
            return
        with self._lock:
            self._pairs.add((policy, target))
            refs = list(self.shared.get(policy, ()))
        for ref in refs:
            subject = ref()
            if subject is not None:
                self._wire(policy, target, subject, kind_of(subject))

    def circuit_seen(self, circuit: str) -> None:
        """A transition of ``circuit`` (its capped label): a circuit never announced (a breaker
        built outside a `Retrier`) has its other transitions at 0 from now on, so that at least
        its next trip is seen by ``increase()``, as on the Prometheus path."""
        with self._lock:
            if circuit in self._circuits:
                return
            self._circuits.add(circuit)
        self._transitions_at_zero(circuit)

    def _wire(self, policy: str, target: str, subject: object, kind: str | None) -> None:
        """(policy, target) is served by ``subject``: its denial reason at 0, and the live gauges
        of a budget or throttle."""
        reason = _DENIAL_OF.get(kind or "")
        key = (policy, target, id(subject))
        with self._lock:
            if reason is None or key in self._wired:
                return
            self._wired.add(key)
        bounds = self.bounds
        denied = names.RETRIES_DENIED
        # The same child as the instrument's records of that reason (`AttributeSets`).
        child = (names.ATTR_REASON, reason, None)
        if bounds.place(policy, target, 0, child, denied.series) != (policy, target):
            return  # its series would not fit (or the policy is past its cap)
        if self._denied is not None:
            self._denied.add(
                0,
                {names.ATTR_POLICY: policy, names.ATTR_TARGET: target, names.ATTR_REASON: reason},
            )
        if kind == "breaker":  # its gauges are the circuit's (`_breaker`), but for its info
            circuit = bounds.circuit_label(getattr(subject, "name", ""))
            info = names.CIRCUIT_INFO
            if bounds.place(policy, target, 0, (info.otel, circuit), info.series) == (
                policy,
                target,
            ):
                with self._lock:
                    self._series[info][circuit, policy, target] = (
                        weakref.ref(subject),
                        circuit_info,
                    )
            return
        readers = {"budget": BUDGET_READERS, "pacer": PACER_READERS}.get(
            kind or "", THROTTLE_READERS
        )
        for spec, _ in readers:
            if bounds.place(policy, target, 0, (spec.otel,), spec.series) != (policy, target):
                return  # its series would not fit
        ref = weakref.ref(subject)
        with self._lock:
            for spec, read in readers:
                self._series[spec][policy, target] = (ref, read)

    def _breaker(self, breaker: Any) -> None:
        # Its thresholds read NaN while their rule is off, so those series are never reported
        # then. Its state and transitions exist from now on.
        label = self.bounds.circuit_label(breaker.name)
        circuit = (label,)
        ref = weakref.ref(breaker)
        with self._lock:
            for spec, read in BREAKER_READERS:
                self._series[spec][circuit] = (ref, read)
            new = label not in self._circuits
            self._circuits.add(label)
        if not new or self._circuit_state is None:
            return
        state = breaker.statistics().state
        for name in names.CIRCUIT_STATES:
            self._circuit_state.set(
                1 if name == state else 0,
                {names.ATTR_CIRCUIT: label, names.ATTR_CIRCUIT_STATE: name},
            )
        self._transitions_at_zero(label)

    def _transitions_at_zero(self, circuit: str) -> None:
        if self._transitions is None:
            return
        for previous, current in names.CIRCUIT_TRANSITION_PAIRS:
            self._transitions.add(
                0,
                {
                    names.ATTR_CIRCUIT: circuit,
                    names.ATTR_CIRCUIT_PREVIOUS_STATE: previous,
                    names.ATTR_CIRCUIT_STATE: current,
                },
            )

    # -- collection -----------------------------------------------------------------------------

    def _observe(
        self, spec: names.MetricSpec, options: metrics.CallbackOptions
    ) -> list[metrics.Observation]:
        keys = spec.attributes
        if spec is names.POLICY_INFO:
            with self._lock:
                policies = list(self._policies.items())
            return [
                metrics.Observation(1, dict(zip(keys, (name, *values), strict=True)))
                for name, values in policies
            ]
        with self._lock:
            series = self._series[spec]
            # Objects that went away are no longer reported, and forgotten.
            for gone in [labels for labels, (ref, _) in series.items() if ref() is None]:
                del series[gone]
            sources = list(series.items())
        observations = []
        for labels, (ref, read) in sources:
            value = read_live(ref, read)
            if not math.isnan(value):  # gone meanwhile, or unreadable: no point at all
                observations.append(
                    metrics.Observation(value, dict(zip(keys, labels, strict=True)))
                )
        return observations


_lock = ForkSafeLock()
_by_provider: weakref.WeakKeyDictionary[Any, LiveGauges] = weakref.WeakKeyDictionary()
_global: LiveGauges | None = None


def live_gauges(meter: metrics.Meter, meter_provider: Any) -> LiveGauges:
    """The registry of ``meter_provider`` (``None``: the global one), its gauges on ``meter``.

    Created with its gauges on the first call for a provider, shared afterwards. Every
    instrument on the global provider shares one: the meters handed out before a provider is
    set are proxies that all end up on the same real meter.
    """
    global _global
    with _lock:
        if meter_provider is None:
            live = _global
        else:
            try:
                live = _by_provider.get(meter_provider)
            except TypeError:  # not weakly referenceable: this instrument alone
                live = LiveGauges()
                live.create(meter)
                return live
        if live is None:
            live = LiveGauges()
            live.create(meter)
            if meter_provider is None:
                _global = live
            else:
                _by_provider[meter_provider] = live
        return live
