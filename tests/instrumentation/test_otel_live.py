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
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from retrymw import (
    AdaptiveThrottle,
    CircuitBreaker,
    LoadShedError,
    PerTarget,
    Retrier,
    RetryBudget,
    RetryPolicy,
)
from retrymw._core.events import Attached, CallFinished
from retrymw.instrumentation import OpenTelemetryInstrument, PrometheusInstrument
from retrymw.instrumentation import _names as names
from retrymw.testing import FakeClock
from tests.calls import call_as

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


# -- the same series from creation on both paths (issue 31) ---------------------------------------


#: What `exported` reads: retrymw's own metrics and the response-body ones (semconv-named).
EXPORTED = ("retrymw_", *(spec.prometheus for spec in names.BODY_METRICS))


def exported(registry: CollectorRegistry) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every retrymw sample of a registry's exposition, by name and sorted labels; a label with
    an empty value is no label, as Prometheus stores it (``error_type=""`` on a success), and
    ``le`` is a number (prometheus_client writes ``1.0``, OpenTelemetry's exporter ``1``)."""
    found: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    for family in text_string_to_metric_families(generate_latest(registry).decode()):
        for sample in family.samples:
            if sample.name.startswith(EXPORTED):
                labels = {key: value for key, value in sample.labels.items() if value}
                if "le" in labels:
                    labels["le"] = repr(float(labels["le"]))
                found[sample.name, tuple(sorted(labels.items()))] = sample.value
    return found


def both_paths(clock: FakeClock) -> Iterator[tuple[CollectorRegistry, CollectorRegistry, Any]]:
    """A Prometheus registry fed by `PrometheusInstrument`, and one fed by OpenTelemetry's
    Prometheus exporter (`PrometheusMetricReader`) from `OpenTelemetryInstrument`."""
    from opentelemetry.exporter.prometheus import PrometheusMetricReader

    direct, translated = CollectorRegistry(), CollectorRegistry()
    reader = PrometheusMetricReader(
        disable_target_info=True, scope_info_enabled=False, registry=translated
    )
    meter_provider = MeterProvider(metric_readers=[reader])
    instruments = (
        PrometheusInstrument(direct),
        OpenTelemetryInstrument(meter_provider=meter_provider),
    )
    try:
        yield direct, translated, instruments
    finally:
        meter_provider.shutdown()


def transport_like(clock: FakeClock, instruments: Any) -> Retrier:
    """A breaker, a budget and a throttle per target, as the transports have."""
    return Retrier(
        RetryPolicy(name="api", retry_on=[ConnectionError]),
        breaker=PerTarget(CircuitBreaker(name="api", failure_threshold=3, clock=clock)),
        budget=PerTarget(RetryBudget(clock=clock)),
        throttle=PerTarget(AdaptiveThrottle(name="api", clock=clock, rng=Random(0))),
        instruments=instruments,
        clock=clock,
    )


def test_a_healthy_target_has_the_same_series_on_both_paths() -> None:
    """After one successful call: the same series with the same values through prometheus_client
    and through OpenTelemetry's Prometheus exporter, the healthy circuit's closed = 1 and its
    four transitions at 0, and the protection's denial reasons at 0, included. Only the empty
    call histograms of the refusals a breaker and a throttle give are prometheus_client's
    alone: the OpenTelemetry API cannot export a histogram before its first record."""
    clock = FakeClock()
    for direct, translated, instruments in both_paths(clock):
        retrier = transport_like(clock, instruments)
        call_as(retrier, lambda: "ok", operation="GET", target="h.example")
        prometheus, otel = exported(direct), exported(translated)
        refusals = {
            key
            for key in prometheus
            if key[0].startswith(names.CALL_DURATION.prometheus)
            and dict(key[1])[names.LABEL_OUTCOME] in ("circuit_open", "shed")
        }
        assert {prometheus[key] for key in refusals} == {0}
        assert len(refusals) == 2 * 3  # +Inf, _count and _sum of each
        assert set(otel) == set(prometheus) - refusals
        for key, value in otel.items():
            assert prometheus[key] == pytest.approx(value), key
        circuit = (("retrymw_circuit", "api:h.example"),)
        closed = ("retrymw_circuit_state", (*circuit, ("retrymw_circuit_state", "closed")))
        assert otel[closed] == 1
        transitions = [v for (name, _), v in otel.items() if name.startswith("retrymw_circuit_tr")]
        assert transitions == [0, 0, 0, 0]
        denied = {
            dict(labels)[names.LABEL_REASON]: value
            for (name, labels), value in otel.items()
            if name == names.RETRIES_DENIED.prometheus
        }
        assert denied == {"throttled": 0, "circuit_open": 0, "shed": 0}


def _dead() -> str:
    raise ConnectionError("down")


def test_the_first_trip_reads_the_same_on_both_paths() -> None:
    """A target that fails until its circuit opens, then is refused: every counter and gauge the
    same on both paths (the trip counted from 0)."""
    clock = FakeClock()
    for direct, translated, instruments in both_paths(clock):
        retrier = transport_like(clock, instruments)
        call_as(retrier, lambda: "ok", operation="GET", target="h.example")
        for _ in range(3):
            with contextlib.suppress(ConnectionError, Exception):
                call_as(retrier, _dead, operation="GET", target="h.example")
        prometheus, otel = exported(direct), exported(translated)
        # Histograms: the same series once observed (OpenTelemetry cannot export an empty
        # one, so a compact zero exists on the Prometheus path only).
        assert {key for key in prometheus if prometheus[key] or "_bucket" not in key[0]} >= {
            key for key in otel if otel[key] or "_bucket" not in key[0]
        }
        counters = {k: v for k, v in prometheus.items() if not k[0].startswith(HISTOGRAMS)}
        assert {k: v for k, v in otel.items() if not k[0].startswith(HISTOGRAMS)} == counters
        trip = (
            "retrymw_circuit_transitions_total",
            (
                ("retrymw_circuit", "api:h.example"),
                ("retrymw_circuit_previous_state", "closed"),
                ("retrymw_circuit_state", "open"),
            ),
        )
        assert otel[trip] == prometheus[trip] == 1


HISTOGRAMS = tuple(spec.prometheus for spec in names.METRICS if spec.kind == "histogram")


def test_an_http_call_has_the_same_series_on_both_paths() -> None:
    """An HTTP call through a transport with a breaker (every call on the full path), its body
    read: the same series on both paths, the response-body metrics included
    (``http_client_response_body_size_bytes``, ``retrymw_response_time_to_first_byte_seconds``),
    with the same values but the times; only the empty refusal histograms are Prometheus's."""
    import httpx

    import retrymw.httpx

    clock = FakeClock()
    body = b"x" * 600
    for direct, translated, instruments in both_paths(clock):
        transports = []  # alive while read: a budget that is gone reads NaN
        for instrument in instruments:
            transport = retrymw.httpx.RetryTransport(
                # Streamed (an iterator), as a network response is: bytes would be read at once.
                transport=httpx.MockTransport(
                    lambda request: httpx.Response(200, content=iter([body[:100], body[100:]]))
                ),
                policy=RetryPolicy(name="api"),
                breaker=PerTarget(CircuitBreaker(name="api", clock=clock)),
                instruments=[instrument],
                clock=clock,
            )
            with httpx.Client(transport=transport) as client:
                assert client.get("https://h.example/v1").content == body
            transports.append(transport)
        prometheus, otel = exported(direct), exported(translated)
        refusals = {
            key
            for key in prometheus
            if key[0].startswith(names.CALL_DURATION.prometheus)
            and dict(key[1]).get(names.LABEL_OUTCOME) == "circuit_open"
        }
        assert set(otel) == set(prometheus) - refusals
        size = names.RESPONSE_BODY_SIZE.prometheus
        timed = names.TIME_TO_FIRST_BYTE.prometheus + "_"
        for key, value in otel.items():
            if not key[0].startswith(timed) or key[0].endswith("_count"):
                assert prometheus[key] == pytest.approx(value), key
        labels = {
            "http_request_method": "GET",
            "server_address": "h.example",
            "server_port": "443",
            "url_scheme": "https",
            "http_response_status_code": "200",
            "network_protocol_version": "1.1",
        }
        assert otel[size + "_sum", tuple(sorted(labels.items()))] == len(body)


def test_a_shared_budget_announced_later_serves_the_targets_already_seen(
    provider: tuple[MeterProvider, InMemoryMetricReader],
) -> None:
    """A call's attribute set is built once (`AttributeSets`), and its (policy, target) is
    learnt then: a budget the policy shares, announced after calls to a target (another
    `Retrier` of the same policy), is exported for that target at once, with no further call."""
    meter_provider, reader = provider
    instrument = OpenTelemetryInstrument(meter_provider=meter_provider)
    instrument.call_finished(CallFinished("p", "a.test", "GET", "success", 1, 0.1, None))
    budget = RetryBudget(min_capacity=10, clock=FakeClock())
    instrument.attached(Attached("p", "", budget))
    otel = otel_series(reader)
    capacity = otel.get(("retrymw.retry_budget.capacity", ("p", "a.test")))
    assert capacity == budget.statistics().capacity
