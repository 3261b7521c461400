"""The fleet's health through OpenTelemetry: the observable instruments that mirror the
Prometheus fleet metrics (members, degraded, sync age and lag, tokens leased).

Against a real redis-server (two members of one namespace) and an unreachable store (degraded),
read with the real SDK's in-memory metric reader, beside a `PrometheusInstrument` whose
exposition must say the same.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import Gauge, InMemoryMetricReader, Sum
from prometheus_client import CollectorRegistry

from retrymw import RetryBudget
from retrymw.fleet import RedisFleet
from retrymw.instrumentation import OpenTelemetryInstrument, PrometheusInstrument
from retrymw.instrumentation import _names as names
from tests.instrumentation import fleet_samples
from tests.redis_server import RedisServer, redis_server


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RedisServer]:
    with redis_server(tmp_path) as running:
        yield running


@pytest.fixture
def reader() -> Iterator[InMemoryMetricReader]:
    """An SDK meter provider read in memory, with an instrument on it."""
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    OpenTelemetryInstrument(meter_provider=provider)
    yield reader
    provider.shutdown()


def _fleet_points(reader: InMemoryMetricReader) -> dict[tuple[str, str], Any]:
    """(OTel name, fleet namespace) → the data point, for the fleet instruments only."""
    data = reader.get_metrics_data()
    found: dict[tuple[str, str], Any] = {}
    if data is None:
        return found
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                if metric.name.startswith("retrymw.fleet."):
                    for point in metric.data.data_points:
                        fleet = str((point.attributes or {})[names.ATTR_FLEET])
                        found[metric.name, fleet] = point
    return found


def test_two_members_report_their_fleet(server: RedisServer, reader: InMemoryMetricReader) -> None:
    """Two members of one namespace in a process: the worst view and the summed leases, the
    same figures as the Prometheus exposition, and no series once the fleets are closed."""
    registry = CollectorRegistry()
    PrometheusInstrument(registry)
    assert _fleet_points(reader) == {}  # no fleet open: no series
    assert fleet_samples(registry) == {}
    fleets = [RedisFleet(server.url, namespace="shop", start=False) for _ in range(2)]
    budgets = [RetryBudget() for _ in fleets]
    try:
        for fleet, budget in zip(fleets, budgets, strict=True):
            fleet.attach(budget, target="db")
        for _ in range(2):
            for fleet in fleets:
                assert fleet.sync()
        spent = sum(budgets[0].try_acquire() for _ in range(5))
        assert fleets[0].sync()
        points = _fleet_points(reader)
        exposition = fleet_samples(registry)
        leased = sum(fleet.statistics().tokens_leased for fleet in fleets)
    finally:
        for fleet in fleets:
            fleet.close()
    assert spent >= 1
    assert leased > 0
    assert points[names.FLEET_MEMBERS.otel, "shop"].value == 2
    assert points[names.FLEET_DEGRADED.otel, "shop"].value == 0
    assert 0 <= points[names.FLEET_SYNC_AGE.otel, "shop"].value < 5
    assert 0 < points[names.FLEET_SYNC_LAG.otel, "shop"].value < 1
    assert points[names.FLEET_TOKENS_LEASED.otel, "shop"].value == leased
    for spec in (names.FLEET_MEMBERS, names.FLEET_DEGRADED, names.FLEET_TOKENS_LEASED):
        assert points[spec.otel, "shop"].value == exposition[spec.prometheus, "shop"]
    assert 0 <= exposition[names.FLEET_SYNC_AGE.prometheus, "shop"] < 5
    assert 0 < exposition[names.FLEET_SYNC_LAG.prometheus, "shop"] < 1
    assert _fleet_points(reader) == {}  # closed fleets: nothing observed
    assert fleet_samples(registry) == {}  # and nothing exposed


def test_an_unreachable_store_reads_degraded(reader: InMemoryMetricReader) -> None:
    """A member that never reached its store reads degraded, no members, a growing age, and no
    sync lag at all (there was no round trip to measure)."""
    with RedisFleet("redis://127.0.0.1:1/0", namespace="cart", start=False) as fleet:
        fleet.attach(RetryBudget())
        assert not fleet.sync()
        points = _fleet_points(reader)
    assert points[names.FLEET_DEGRADED.otel, "cart"].value == 1
    assert points[names.FLEET_MEMBERS.otel, "cart"].value == 0
    assert points[names.FLEET_SYNC_AGE.otel, "cart"].value > 0
    assert (names.FLEET_SYNC_LAG.otel, "cart") not in points


def test_units_and_kinds_follow_the_names(reader: InMemoryMetricReader) -> None:
    """Each fleet instrument carries its spec's unit, description and kind (the leased tokens
    a monotonic sum), so OTel's Prometheus translation gives the Prometheus names
    (``_seconds``, ``_total``)."""
    with RedisFleet("redis://127.0.0.1:1/0", namespace="units", start=False) as fleet:
        fleet.attach(RetryBudget())
        fleet.sync()
        data = reader.get_metrics_data()
    assert data is not None
    metrics = {
        metric.name: metric
        for resource in data.resource_metrics
        for scope in resource.scope_metrics
        for metric in scope.metrics
    }
    for spec in names.FLEET_METRICS:
        if spec is names.FLEET_SYNC_LAG:
            continue  # never synced: no observation, so no metric in this collection
        metric = metrics[spec.otel]
        assert (metric.unit, metric.description) == (spec.unit, spec.description)
        if spec.kind == "counter":
            assert isinstance(metric.data, Sum)
            assert metric.data.is_monotonic
        else:
            assert isinstance(metric.data, Gauge)


_NO_FLEET_SCRIPT = """
import sys
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from retrymw.instrumentation import OpenTelemetryInstrument

reader = InMemoryMetricReader()
OpenTelemetryInstrument(meter_provider=MeterProvider(metric_readers=[reader]))
data = reader.get_metrics_data()
found = [
    metric.name
    for resource in (data.resource_metrics if data is not None else [])
    for scope in resource.scope_metrics
    for metric in scope.metrics
    if metric.name.startswith("retrymw.fleet.")
]
print("retrymw.fleet._fleet" in sys.modules, found)
"""


def test_a_process_without_fleets_never_imports_them() -> None:
    """Collecting in a process that never imported `retrymw.fleet` observes nothing and does
    not import it (nor redis) just to look."""
    result = subprocess.run(
        [sys.executable, "-c", _NO_FLEET_SCRIPT],
        capture_output=True,
        check=True,
        cwd=Path(__file__).parents[2],
        text=True,
        timeout=60,
    )
    assert result.stdout.strip() == "False []"
