"""The protection gauges through OpenTelemetry: the same series and values as Prometheus.

A `Retrier` announces its policy, breaker, budget and throttle (`Attached`); both instruments
then read `names.LIVE_GAUGES` from the live objects. Read with the real SDK's in-memory metric
reader, beside a `PrometheusInstrument` whose registry must say the same.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator
from random import Random
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader, NumberDataPoint
from prometheus_client import CollectorRegistry

from retrymw import (
    AdaptiveThrottle,
    CircuitBreaker,
    LoadShedError,
    PerTarget,
    Retrier,
    RetryBudget,
    RetryPolicy,
)
from retrymw._core.events import Attached
from retrymw.instrumentation import OpenTelemetryInstrument, PrometheusInstrument
from retrymw.instrumentation import _names as names
from retrymw.testing import FakeClock

Series = dict[tuple[str, tuple[str, ...]], float]
LIVE = {spec.otel: spec for spec in names.LIVE_GAUGES}


@pytest.fixture
def provider() -> Iterator[tuple[MeterProvider, InMemoryMetricReader]]:
    """An SDK meter provider read in memory."""
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    yield provider, reader
    provider.shutdown()


def otel_series(reader: InMemoryMetricReader) -> Series:
    """(OTel name, attribute values in label order) → value, for the live gauges only."""
    data = reader.get_metrics_data()
    found: Series = {}
    if data is None:
        return found
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                spec = LIVE.get(metric.name)
                if spec is None:
                    continue
                for point in metric.data.data_points:
                    assert isinstance(point, NumberDataPoint)  # a gauge's
                    attributes = point.attributes or {}
                    key = tuple(str(attributes[a]) for a in spec.attributes)
                    found[metric.name, key] = float(point.value)
    return found


def prometheus_series(registry: CollectorRegistry) -> Series:
    """The same keys (OTel names) from the Prometheus registry's live gauges."""
    by_name = {spec.prometheus: spec for spec in names.LIVE_GAUGES}
    found: Series = {}
    for family in registry.collect():
        for sample in family.samples:
            spec = by_name.get(sample.name)
            if spec is not None:
                key = tuple(sample.labels[label] for label in spec.labels)
                found[spec.otel, key] = sample.value
    return found


def flaky() -> Any:
    """A function whose attempts fail two in three, by attempt number (the same run each time)."""
    count = 0

    def fetch() -> str:
        nonlocal count
        count += 1
        if count % 3 != 2:
            raise ConnectionError("down")
        return "ok"

    return fetch


def test_a_retriers_protection_reads_the_same_through_both(
    provider: tuple[MeterProvider, InMemoryMetricReader],
) -> None:
    """Breaker, budget, throttle and policy: every live series Prometheus has, OTel has too,
    with the same value, and the values moved with the calls."""
    meter_provider, reader = provider
    clock = FakeClock()
    registry = CollectorRegistry()
    policy = RetryPolicy(name="checkout", attempts=3, initial_delay="100ms", max_delay="1s")
    breaker = CircuitBreaker(
        name="db",
        failure_threshold=None,
        failure_rate_threshold=0.9,
        window=20,
        minimum_calls=20,
        clock=clock,
    )
    budget = RetryBudget(min_capacity=5, clock=clock)
    throttle = AdaptiveThrottle(clock=clock, rng=Random(3))
    retrier = Retrier(
        policy,
        breaker=breaker,
        budget=budget,
        throttle=throttle,
        instruments=[
            PrometheusInstrument(registry),
            OpenTelemetryInstrument(meter_provider=meter_provider),
        ],
        clock=clock,
    )
    fetch = flaky()
    for _ in range(12):
        # Exhausted or shed: the outcome is not what is checked here, the gauges are.
        with contextlib.suppress(ConnectionError, LoadShedError):
            retrier.call_sync(fetch)

    prometheus = prometheus_series(registry)
    otel = otel_series(reader)
    assert set(otel) == set(prometheus)
    for key, value in prometheus.items():
        assert otel[key] == pytest.approx(value), key
    # Every live gauge is there, and holds what the objects say now.
    target = "fetch"
    assert otel["retrymw.retry_budget.capacity", ("checkout", target)] == pytest.approx(
        budget.statistics().capacity
    )
    probability = otel["retrymw.throttle.reject_probability", ("checkout", target)]
    assert probability == pytest.approx(throttle.reject_probability())
    assert probability > 0
    stats = breaker.statistics()
    rate = otel["retrymw.circuit.failure_rate", ("db",)]
    assert rate == pytest.approx(stats.window_failures / stats.window_calls)
    assert 0 < rate < 1
    assert otel["retrymw.circuit.failure_rate_threshold", ("db",)] == 0.9
    info = ("checkout", "3", "0.1", "1", "", "")
    assert otel["retrymw.policy.info", info] == 1


def test_a_per_target_object_is_reported_while_it_lives(
    provider: tuple[MeterProvider, InMemoryMetricReader],
) -> None:
    """An object announced for a target is read live; once gone it is no longer reported."""
    meter_provider, reader = provider
    instrument = OpenTelemetryInstrument(meter_provider=meter_provider)
    throttle = AdaptiveThrottle(name="t", rng=Random(1))
    instrument.attached(Attached("p", "b.test", throttle))
    key = ("retrymw.throttle.reject_probability", ("p", "b.test"))
    assert otel_series(reader)[key] == 0
    for _ in range(20):
        throttle.record_failure()
    assert otel_series(reader)[key] == pytest.approx(throttle.reject_probability())
    assert throttle.reject_probability() > 0.5
    del throttle
    gc.collect()
    assert key not in otel_series(reader)


def test_per_target_budgets_and_a_breaker_without_a_rate_rule(
    provider: tuple[MeterProvider, InMemoryMetricReader],
) -> None:
    """Each target's budget is its own series; a breaker whose rate rule is off has no
    threshold series, as in Prometheus."""
    meter_provider, reader = provider
    clock = FakeClock()
    registry = CollectorRegistry()
    budgets = PerTarget(RetryBudget(min_capacity=3, clock=clock))
    breaker = CircuitBreaker(name="cache", failure_threshold=5, failure_rate_threshold=None)
    Retrier(
        RetryPolicy(name="p"),
        breaker=breaker,
        budget=budgets,
        instruments=[
            PrometheusInstrument(registry),
            OpenTelemetryInstrument(meter_provider=meter_provider),
        ],
        clock=clock,
    )
    first = budgets.for_target("a.test")
    second = budgets.for_target("b.test")
    while second.try_acquire():
        pass
    otel = otel_series(reader)
    assert otel == prometheus_series(registry)
    capacity = "retrymw.retry_budget.capacity"
    assert otel[capacity, ("p", "a.test")] == first.statistics().capacity
    assert otel[capacity, ("p", "b.test")] == second.statistics().capacity
    assert ("retrymw.circuit.failure_rate", ("cache",)) in otel
    assert not any(name == "retrymw.circuit.failure_rate_threshold" for name, _ in otel)


def test_instruments_on_one_provider_share_their_announcements(
    provider: tuple[MeterProvider, InMemoryMetricReader],
) -> None:
    """The SDK keeps the first instrument's callback for a name: an object announced to a
    second instrument on the same provider is reported all the same."""
    meter_provider, reader = provider
    first = OpenTelemetryInstrument(meter_provider=meter_provider)
    second = OpenTelemetryInstrument(meter_provider=meter_provider)
    first.attached(Attached("one", "", RetryPolicy(name="one")))
    breaker = CircuitBreaker(name="two")
    second.attached(Attached("two", "", breaker))
    second.attached(Attached("two", "", RetryPolicy(name="two", attempts=2)))
    otel = otel_series(reader)
    assert ("retrymw.circuit.failure_rate", ("two",)) in otel
    policies = {key[0] for name, key in otel if name == "retrymw.policy.info"}
    assert policies == {"one", "two"}


def test_a_provider_that_cannot_be_weakly_referenced_still_gets_the_gauges() -> None:
    """A meter provider that is not weakly referenceable gets a registry of its own."""

    class Unhashable(MeterProvider):
        __hash__ = None  # type: ignore[assignment]

    reader = InMemoryMetricReader()
    meter_provider = Unhashable(metric_readers=[reader])
    try:
        instrument = OpenTelemetryInstrument(meter_provider=meter_provider)
        instrument.attached(Attached("p", "", RetryPolicy(name="p")))
        policies = [key for name, key in otel_series(reader) if name == "retrymw.policy.info"]
        assert [key[0] for key in policies] == ["p"]
    finally:
        meter_provider.shutdown()


def test_an_unreadable_object_is_left_out_and_others_still_reported(
    provider: tuple[MeterProvider, InMemoryMetricReader], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A throttle whose reading raises gives no point (the collection goes on); an announced
    object of no known kind is ignored."""
    meter_provider, reader = provider
    reading = AdaptiveThrottle.reject_probability

    def reject_probability(self: AdaptiveThrottle) -> float:
        if self.name == "broken":
            raise RuntimeError("boom")
        return reading(self)

    monkeypatch.setattr(AdaptiveThrottle, "reject_probability", reject_probability)
    instrument = OpenTelemetryInstrument(meter_provider=meter_provider)
    broken, healthy = AdaptiveThrottle(name="broken"), AdaptiveThrottle(name="healthy")
    instrument.attached(Attached("p", "broken.test", broken))
    instrument.attached(Attached("p", "healthy.test", healthy))
    instrument.attached(Attached("p", "", object()))
    probabilities = {
        key for name, key in otel_series(reader) if name == "retrymw.throttle.reject_probability"
    }
    assert probabilities == {("p", "healthy.test")}
