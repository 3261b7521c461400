"""The pacer's limit gauge shows the limit it paces against, a fleet's included.

Regression: a fleet member whose fleet handed it a lower limit (another member's) exported only
the limit it learned itself, so the dashboard drew the rate against a limit nobody paced at.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from retrymw import Pacer, Retrier
from retrymw._protect.pacer import RateLimits
from retrymw.instrumentation import PrometheusInstrument
from retrymw.testing import FakeClock


def ok() -> str:
    return "ok"


def limit_gauge(registry: CollectorRegistry) -> float:
    """The one ``retrymw_pacer_limit`` series (the gauges appear with the first call)."""
    (value,) = [
        sample.value
        for metric in registry.collect()
        for sample in metric.samples
        if sample.name == "retrymw_pacer_limit"
    ]
    return value


def exported_pacer() -> tuple[Pacer, CollectorRegistry]:
    """A pacer behind a retrier exporting to Prometheus, its gauges there (after one call)."""
    clock = FakeClock()
    registry = CollectorRegistry()
    pacer = Pacer(clock=clock)
    retrier = Retrier(
        pacer=pacer, clock=clock, instruments=[PrometheusInstrument(registry=registry)]
    )
    retrier.call_sync(ok)
    return pacer, registry


def test_the_limit_gauge_is_the_lower_of_the_learned_and_the_fleets() -> None:
    pacer, registry = exported_pacer()
    assert limit_gauge(registry) == 0.0  # nothing known
    pacer.learn(pacer.clock.now(), limits=RateLimits(requests=10.0))
    assert limit_gauge(registry) == 10.0
    pacer.adopt_limit(4.0)  # another member learned less: every member paces at it
    assert limit_gauge(registry) == 4.0
    pacer.adopt_limit(25.0)  # the fleet's is higher: the learned one governs
    assert limit_gauge(registry) == 10.0
    pacer.adopt_limit(None)
    assert limit_gauge(registry) == 10.0


def test_a_fleet_limit_alone_is_shown() -> None:
    pacer, registry = exported_pacer()
    pacer.adopt_limit(6.0)  # this member learned nothing itself yet
    assert limit_gauge(registry) == 6.0
