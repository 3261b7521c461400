"""`_names` is the one source of truth: DESIGN §6's names, exactly what the instruments emit."""

from __future__ import annotations

import importlib
import threading
from typing import Any

import anyio
import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import (
    Gauge,
    Histogram,
    InMemoryMetricReader,
    Sum,
)
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from retrymw import AdaptiveThrottle, CircuitBreaker, Retrier, RetryPolicy
from retrymw.instrumentation import OpenTelemetryInstrument, PrometheusInstrument
from retrymw.instrumentation import _names as names
from retrymw.instrumentation._cardinality import BoundedValues
from retrymw.testing import FakeClock
from tests.instrumentation import SCENARIOS, retrier, run_http_scenario, run_scenario

pytestmark = pytest.mark.anyio

#: DESIGN.md §6, copied by hand: a change to either side must be deliberate.
#: Issue 18 trimmed the two counters that duplicated a histogram's ``_count`` (DESIGN §6 allows
#: it): calls and attempts are counted by the duration histograms, the attempts one gaining
#: ``error_type``.
DESIGN_METRICS = {
    "retrymw_call_duration_seconds": ("histogram", ("policy", "target", "outcome")),
    "retrymw_call_attempts": ("histogram", ("policy", "target", "outcome")),
    "retrymw_attempt_duration_seconds": (
        "histogram",
        ("policy", "target", "attempt_outcome", "error_type"),
    ),
    "retrymw_backoff_duration_seconds": ("histogram", ("policy", "target")),
    "retrymw_retries_denied_total": ("counter", ("policy", "target", "reason")),
    "retrymw_retry_budget_available": ("gauge", ("policy", "target")),
    "retrymw_circuit_state": ("gauge", ("circuit", "circuit_state")),
    "retrymw_circuit_transitions_total": (
        "counter",
        ("circuit", "circuit_previous_state", "circuit_state"),
    ),
}
#: §6's outcomes, then ``failover`` (a call whose request went on to the next origin, which
#: §14 asks metrics to tell) and ``paced`` (§15: a pacer's slot past the deadline, before any
#: attempt).
DESIGN_OUTCOMES = (
    "success failure exhausted budget_exhausted throttled circuit_open shed deadline_exceeded "
    "cancelled failover paced"
)
#: DESIGN lists no ``shed`` reason; the code also gives up with reason ``shed`` when the
#: adaptive throttle sheds a retry (CHANGELOG: "outcome and reason `shed`"): a documented
#: deviation, kept here so that any other difference still fails.
DESIGN_REASONS = (
    "max_attempts budget_exhausted throttled deadline_exceeded circuit_open shed not_idempotent "
    "body_not_replayable retry_after_exceeds_limit server_said_no retried_below paced"
)
#: Scenarios that between them touch every metric of DESIGN's table.
ALL_TEN = ("success_after_2_retries", "exhausted", "circuit_open")
#: The retired counters and what replaces them.
RETIRED = {
    "retrymw_calls_total": "retrymw_call_duration_seconds_count",
    "retrymw_attempts_total": "retrymw_attempt_duration_seconds_count",
}


def _label(short: str) -> str:
    return short if short == "error_type" else f"retrymw_{short}"


def test_metrics_are_design_section_6() -> None:
    """The metrics have DESIGN's names, types and labels, in DESIGN's order."""
    assert [spec.prometheus for spec in names.METRICS] == list(DESIGN_METRICS)
    for spec in names.METRICS:
        kind, labels = DESIGN_METRICS[spec.prometheus]
        assert (spec.kind, spec.labels) == (kind, tuple(_label(label) for label in labels))


def test_retired_counters_are_counted_by_a_histogram_with_their_labels() -> None:
    """Each retired counter names the histogram whose ``_count`` replaces it, same labels; none
    is in `METRICS`, so no instrument creates it."""
    assert {old.prometheus: names.count_of(new) for old, new in names.RETIRED} == RETIRED
    for old, new in names.RETIRED:
        assert old not in names.METRICS
        assert (old.kind, new.kind) == ("counter", "histogram")
        assert old.labels == new.labels
    with pytest.raises(ValueError, match=r"'retrymw_calls_total' is a counter.*CALL_DURATION"):
        names.count_of(names.CALLS)


def test_label_values_are_design_section_6() -> None:
    """The bounded label values are DESIGN's lists."""
    assert tuple(DESIGN_OUTCOMES.split()) == names.OUTCOMES
    assert names.ATTEMPT_OUTCOMES == ("success", "retried", "failed", "hedge")
    assert tuple(DESIGN_REASONS.split()) == names.REASONS
    assert names.CIRCUIT_STATES == ("closed", "open", "half_open")
    assert names.CALL_ATTEMPTS_BUCKETS == (1, 2, 3, 4, 5, 6, 8, 10)


def test_buckets_are_increasing_and_only_on_histograms() -> None:
    """Every histogram has strictly increasing buckets; no other metric has any."""
    for spec in names.METRICS:
        if spec.kind == "histogram":
            assert spec.buckets is not None
            assert list(spec.buckets) == sorted(set(spec.buckets))
        else:
            assert spec.buckets is None
    modes = {
        spec.prometheus: spec.multiprocess_mode for spec in names.METRICS if spec.kind == "gauge"
    }
    assert modes == {
        "retrymw_retry_budget_available": "livemin",
        "retrymw_circuit_state": "livemax",
    }


def test_label_names_are_the_translated_attribute_keys() -> None:
    """Each Prometheus label is its OTel attribute key with dots turned into underscores."""
    label_constants = {v for k, v in vars(names).items() if k.startswith("LABEL_")}
    assert set(names.ATTRIBUTE_OF_LABEL) == label_constants
    for label, attribute in names.ATTRIBUTE_OF_LABEL.items():
        assert attribute.replace(".", "_") == label


@pytest.mark.parametrize("spec", [pytest.param(s, id=s.otel) for s in names.METRICS])
def test_otel_names_translate_to_the_prometheus_names(spec: names.MetricSpec) -> None:
    """`retrymw.calls` ({call}) → retrymw_calls_total, `retrymw.call.duration` (s) → ..._seconds."""
    assert names.prometheus_name(spec.otel, spec.unit, spec.kind) == spec.prometheus
    assert spec.unit == "s" or spec.unit.startswith("{"), "unit 1 would become _ratio"
    assert "total" not in spec.otel  # OTel naming: the exporter adds it


@pytest.mark.parametrize(
    ("otel", "unit", "kind", "prometheus"),
    [
        pytest.param("a.b", "ms", "histogram", "a_b_milliseconds", id="milliseconds"),
        pytest.param("a.b_seconds", "s", "histogram", "a_b_seconds", id="suffix-once"),
        pytest.param("a-b", "", "counter", "a_b_total", id="invalid-chars"),
        pytest.param("a.total", "", "counter", "a_total", id="total-once"),
    ],
)
def test_prometheus_name_rules(otel: str, unit: str, kind: Any, prometheus: str) -> None:
    """The translation helper follows the OTel → Prometheus rules beyond our own names."""
    assert names.prometheus_name(otel, unit, kind) == prometheus


def test_bounded_values_admit_the_first_values_only() -> None:
    """The first `limit` distinct values pass, forever; later ones become the overflow value."""
    cap = BoundedValues(2, "_other")
    assert [cap(v) for v in ["a", "b", "c", "a", "c", "b"]] == [
        "a",
        "b",
        "_other",
        "a",
        "_other",
        "b",
    ]
    assert len(cap) == 2


def test_bounded_values_are_thread_safe() -> None:
    """Concurrent first sightings never admit more than the limit."""
    cap = BoundedValues(10, "_other")
    barrier = threading.Barrier(8)

    def hammer(offset: int) -> None:
        barrier.wait()
        for value in range(100):
            cap(str(value * 8 + offset))

    threads = [threading.Thread(target=hammer, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(cap) == 10


# -- what the instruments really emit -------------------------------------------------------------


async def test_prometheus_instrument_emits_exactly_these_names(clock: FakeClock) -> None:
    """Every family, type and label set of the exposition comes from `_names`: DESIGN's table and
    the live gauges of the announced policy, budget, breaker and throttle, all present."""
    registry = CollectorRegistry()
    for scenario in ALL_TEN:
        await run_scenario(scenario, clock, [PrometheusInstrument(registry)])
    # No scenario has a throttle: one more retrier announces one.
    throttle = AdaptiveThrottle(clock=clock)
    retrier(clock, [PrometheusInstrument(registry)], throttle=throttle)
    emitted: dict[str, tuple[str, set[tuple[str, ...]]]] = {}
    for family in text_string_to_metric_families(generate_latest(registry).decode()):
        if family.name.endswith("_created"):
            continue
        name = family.name + "_total" if family.type == "counter" else family.name
        label_sets = {
            tuple(label for label in sample.labels if label != "le")
            for sample in family.samples
            if not sample.name.endswith("_created")
        }
        emitted[name] = (family.type, label_sets)
    expected = {
        spec.prometheus: (spec.kind, {tuple(sorted(spec.labels))})
        for spec in (*names.METRICS, *names.LIVE_GAUGES)
    }
    # No scenario returns an HTTP response: the body metrics are families without series.
    expected.update({spec.prometheus: (spec.kind, set()) for spec in names.BODY_METRICS})
    assert {
        k: (t, {tuple(sorted(s)) for s in sets}) for k, (t, sets) in emitted.items()
    } == expected


async def _ok() -> str:
    return "ok"


async def _every_series(instrument: Any, clock: FakeClock) -> Any:
    """Run the ten scenarios, then one more retrier with a throttle (no scenario has one);
    return it: OTel reports only live objects, so the caller keeps it (and its breaker)."""
    for scenario in ALL_TEN:
        await run_scenario(scenario, clock, [instrument])
    extra = retrier(
        clock,
        [instrument],
        breaker=CircuitBreaker(name="extra", clock=clock),
        throttle=AdaptiveThrottle(clock=clock),
    )
    assert await extra.call(_ok) == "ok"  # a shared budget is read per target
    return extra


async def test_otel_instrument_emits_exactly_these_names(clock: FakeClock) -> None:
    """Instrument names, units, kinds and attribute keys come from `_names`: DESIGN's table and
    the live gauges of the announced policy, budget, breaker and throttle, all present."""
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    instrument = OpenTelemetryInstrument(meter_provider=provider)
    _kept_alive = await _every_series(instrument, clock)
    data = reader.get_metrics_data()
    assert data is not None
    specs = {spec.otel: spec for spec in (*names.METRICS, *names.LIVE_GAUGES)}
    seen = set()
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            assert scope.scope.name == names.SCOPE
            for metric in scope.metrics:
                spec = specs[metric.name]
                seen.add(metric.name)
                kind: Any = {Sum: "counter", Histogram: "histogram", Gauge: "gauge"}[
                    type(metric.data)
                ]
                assert (metric.unit, kind) == (spec.unit, spec.kind)
                if isinstance(metric.data, Sum):
                    assert metric.data.is_monotonic
                for point in metric.data.data_points:
                    keys = set(point.attributes or {})
                    # error.type is absent on success, as the semconv asks ("" in Prometheus).
                    assert keys | {names.ATTR_ERROR_TYPE} >= set(spec.attributes) >= keys
                assert (
                    names.prometheus_name(metric.name, metric.unit or "", kind) == spec.prometheus
                )
    assert seen == set(specs)
    provider.shutdown()


async def test_the_otel_prometheus_exporter_produces_the_same_names(clock: FakeClock) -> None:
    """Through opentelemetry-exporter-prometheus, the OTel path exposes the very same names."""
    exporter = importlib.import_module("opentelemetry.exporter.prometheus")
    registry = CollectorRegistry()
    reader = exporter.PrometheusMetricReader(registry=registry)
    provider = MeterProvider(metric_readers=[reader])
    instrument = OpenTelemetryInstrument(meter_provider=provider)
    _kept_alive = await _every_series(instrument, clock)
    families = {
        family.name + "_total" if family.type == "counter" else family.name: family
        for family in text_string_to_metric_families(generate_latest(registry).decode())
        if family.name.startswith("retrymw")
    }
    specs = (*names.METRICS, *names.LIVE_GAUGES)
    assert set(families) == {spec.prometheus for spec in specs}
    for spec in specs:
        labels = {
            label
            for sample in families[spec.prometheus].samples
            for label in sample.labels
            if not label.startswith("otel_scope") and label != "le"
        }
        assert labels == set(spec.labels)
    provider.shutdown()


async def test_every_span_name_and_attribute_comes_from_names(clock: FakeClock) -> None:
    """Span names, span attribute keys and event names are all declared in `_names`."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    instrument = OpenTelemetryInstrument(tracer_provider=provider)
    for param in SCENARIOS:
        (scenario,) = param.values
        await run_scenario(str(scenario), clock, [instrument])
        await run_http_scenario(str(scenario), clock, [instrument])
    # A wait that no attempt follows (cancelled during it) is the one told by an event.
    with anyio.CancelScope() as cancelled:

        async def fetch() -> None:
            cancelled.cancel()
            raise ConnectionError("refused")

        await Retrier(RetryPolicy(), clock=clock, instruments=[instrument]).call(fetch)
    declared = {v for k, v in vars(names).items() if k.startswith("ATTR_")}
    events = {
        names.EVENT_RETRY_DENIED,
        names.EVENT_CIRCUIT_STATE_CHANGE,
        names.EVENT_BACKOFF,
        "exception",
    }
    span_names = {names.SPAN_CALL.format(operation=op) for op in ("fetch", "GET", "POST")} | {
        names.SPAN_ATTEMPT.format(operation="fetch"),
        "GET",
        "POST",
    }
    spans = exporter.get_finished_spans()
    assert {span.name for span in spans} == span_names
    assert {key for span in spans for key in (span.attributes or {})} <= declared
    assert {event.name for span in spans for event in span.events} == events
    retrymw_event_keys = {
        key
        for span in spans
        for event in span.events
        if event.name != "exception"
        for key in (event.attributes or {})
    }
    assert retrymw_event_keys <= declared
    provider.shutdown()
