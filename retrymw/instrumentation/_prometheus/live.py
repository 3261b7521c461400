"""The collectors behind `PrometheusInstrument`: their construction (`create`), the live
readers of protection gauges (shared with OpenTelemetry in `_protection_live`), and the fleet's
health, read at scrape time or written in multiprocess mode. The event handlers live in
`_prometheus.instrument`, which imports this module only after checking that prometheus_client is
installed.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from .. import _names as names
from .._fleet_live import fleet_readings as _fleet_readings
from .._protection_live import failure_rate as failure_rate
from .._protection_live import read_live as read_live

__all__ = [
    "Exported",
    "FleetCollector",
    "FleetGauges",
    "create",
    "failure_rate",
    "read_live",
    "set_from",
]


# -- the fleet's health: read from the process's open `RedisFleet`s (`_fleet_live`) -------------


class FleetCollector:
    """The fleet metrics of a registry, computed at scrape time (outside multiprocess mode)."""

    def describe(self) -> list[Metric]:
        return [_family(spec) for spec in names.FLEET_METRICS]

    def collect(self) -> Iterator[Metric]:
        readings = _fleet_readings()
        if not readings:  # no open fleet: not even the families, as for any unused metric
            return
        families = [_family(spec) for spec in names.FLEET_METRICS]
        for namespace, *values in readings:
            for family, value in zip(families, values, strict=True):
                family.add_metric([namespace], value)
        yield from families


def _family(spec: names.MetricSpec) -> GaugeMetricFamily | CounterMetricFamily:
    name = spec.prometheus.removesuffix("_total")  # the family adds it to the sample
    if spec.kind == "counter":
        return CounterMetricFamily(name, spec.description, labels=spec.labels)
    return GaugeMetricFamily(name, spec.description, labels=spec.labels)


class FleetGauges:
    """Multiprocess mode: the fleet metrics written to the files as calls finish (once a second)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.metrics = [create(registry, spec) for spec in names.FLEET_METRICS]
        self.leased: dict[str, float] = {}
        self.written_at = -math.inf

    def refresh(self) -> None:
        now = time.monotonic()
        if now - self.written_at < 1.0:
            return
        self.written_at = now
        *gauges, counter = self.metrics
        for namespace, *values in _fleet_readings():
            for gauge, value in zip(gauges, values[:4], strict=True):
                gauge.labels(namespace).set(value)
            leased = values[4]
            counter.labels(namespace).inc(max(0.0, leased - self.leased.get(namespace, 0.0)))
            self.leased[namespace] = leased


def set_from(gauge: Any, reader: Callable[[], float]) -> None:
    gauge.set(reader())


class Exported(Collector):
    """One retrymw collector as its registry exposes it: without ``_created`` series, and each
    histogram series that has observed nothing yet as its ``+Inf`` bucket, ``_count`` and
    ``_sum`` alone.

    ``_created`` doubled every counter and histogram series; prometheus_client's own switch
    (``disable_created_metrics``, ``PROMETHEUS_DISABLE_CREATED_SERIES``) is process-wide and
    would change every other library's metrics, so retrymw filters its own collectors at scrape
    time instead. The series pre-created at zero (a pair's successes) need their ``_count`` for
    ``increase()`` to see the first event, not a row of zero buckets: the buckets appear with
    the first observation.

    Args:
        metric: the prometheus_client collector (created with ``registry=None``).
    """

    def __init__(self, metric: Any) -> None:
        self.metric = metric

    def describe(self) -> list[Metric]:
        return list(self.metric.describe())

    def collect(self) -> Iterator[Metric]:
        for family in self.metric.collect():
            family.samples = _exposed(family)
            yield family


def _exposed(family: Metric) -> list[Any]:
    """The samples of ``family`` that `Exported` keeps."""
    samples = [sample for sample in family.samples if not sample.name.endswith("_created")]
    if family.type != "histogram":
        return samples
    empty = {
        _series(sample.labels)
        for sample in samples
        if sample.name.endswith("_count") and sample.value == 0
    }
    if not empty:
        return samples
    return [
        sample
        for sample in samples
        if not (
            sample.name.endswith("_bucket")
            and sample.labels.get("le") != "+Inf"
            and _series(sample.labels) in empty
        )
    ]


def _series(labels: dict[str, str]) -> tuple[tuple[str, str], ...]:
    """A histogram series' labels, ``le`` aside."""
    return tuple(sorted(item for item in labels.items() if item[0] != "le"))


def create(registry: CollectorRegistry, spec: names.MetricSpec) -> Any:
    """Create one collector and register it (`Exported`); reuse an identical one already in
    the registry."""
    kwargs: dict[str, Any] = {"registry": None}
    if spec.kind == "counter":
        metric: Any = Counter(spec.prometheus, spec.description, spec.labels, **kwargs)
    elif spec.kind == "histogram":
        assert spec.buckets is not None
        metric = Histogram(
            spec.prometheus, spec.description, spec.labels, buckets=spec.buckets, **kwargs
        )
    else:
        metric = Gauge(
            spec.prometheus,
            spec.description,
            spec.labels,
            multiprocess_mode=spec.multiprocess_mode or "all",  # type: ignore[arg-type]
            **kwargs,
        )
    try:
        registry.register(Exported(metric))
    except ValueError:
        # The names are taken, e.g. by a retrymw module reloaded in the same process: share that
        # collector if it is the same metric, otherwise the conflict is the user's to see.
        existing = getattr(registry, "_names_to_collectors", {}).get(spec.prometheus)
        existing = getattr(existing, "metric", existing)  # an earlier copy's `Exported`
        if (
            type(existing) is not type(metric)
            or getattr(existing, "_labelnames", None) != spec.labels
        ):
            raise
        return existing
    return metric
