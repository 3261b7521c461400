"""Every series of an announced policy, breaker, budget or throttle exists from its creation."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from random import Random

import pytest
from prometheus_client import CollectorRegistry

from retrymw import AdaptiveThrottle, CircuitBreaker, RetryBudget, RetryPolicy
from retrymw._core.events import Attached, CallFinished
from retrymw._core.instruments import Dispatch, Instrument
from retrymw.instrumentation import PrometheusInstrument
from retrymw.testing import FakeClock


def value(registry: CollectorRegistry, name: str, **labels: str) -> float | None:
    """One sample's value, or None when the series does not exist."""
    found = registry.get_sample_value(name, labels)
    return None if found is None else float(found)


def test_a_healthy_circuit_reads_closed_and_zero_transitions(registry_: CollectorRegistry) -> None:
    clock = FakeClock()
    breaker = CircuitBreaker(
        name="db", failure_threshold=2, failure_rate_threshold=None, clock=clock
    )
    instrument = PrometheusInstrument(registry_)
    dispatch = Dispatch([instrument])
    breaker.add_listener(dispatch.breaker_listener)
    dispatch.attach("p", "", breaker)

    state = "retrymw_circuit_state"
    assert value(registry_, state, retrymw_circuit="db", retrymw_circuit_state="closed") == 1
    assert value(registry_, state, retrymw_circuit="db", retrymw_circuit_state="open") == 0
    assert value(registry_, state, retrymw_circuit="db", retrymw_circuit_state="half_open") == 0
    trips = {"retrymw_circuit": "db", "retrymw_circuit_previous_state": "closed"}
    total = "retrymw_circuit_transitions_total"
    # The series is born at 0 before the first trip: increase() over it sees the trip.
    assert value(registry_, total, **trips, retrymw_circuit_state="open") == 0
    for previous, current in (
        ("open", "half_open"),
        ("half_open", "closed"),
        ("half_open", "open"),
    ):
        assert (
            value(
                registry_,
                total,
                retrymw_circuit="db",
                retrymw_circuit_previous_state=previous,
                retrymw_circuit_state=current,
            )
            == 0
        )

    assert breaker.allow_request()
    breaker.record_failure()
    assert breaker.allow_request()
    breaker.record_failure()
    assert value(registry_, total, **trips, retrymw_circuit_state="open") == 1
    assert value(registry_, state, retrymw_circuit="db", retrymw_circuit_state="open") == 1
    assert value(registry_, state, retrymw_circuit="db", retrymw_circuit_state="closed") == 0


def test_an_announcement_never_resets_a_circuit_already_seen(registry_: CollectorRegistry) -> None:
    breaker = CircuitBreaker(name="db", failure_threshold=1, failure_rate_threshold=None)
    instrument = PrometheusInstrument(registry_)
    breaker.add_listener(Dispatch([instrument]).breaker_listener)
    breaker.allow_request()
    breaker.record_failure()
    instrument.attached(Attached("p", "", breaker))
    state = "retrymw_circuit_state"
    assert value(registry_, state, retrymw_circuit="db", retrymw_circuit_state="open") == 1
    # A breaker never announced still gets its other transitions at its first one.
    assert (
        value(
            registry_,
            "retrymw_circuit_transitions_total",
            retrymw_circuit="db",
            retrymw_circuit_previous_state="half_open",
            retrymw_circuit_state="open",
        )
        == 0
    )


def test_failure_rate_is_live_next_to_its_threshold(registry_: CollectorRegistry) -> None:
    clock = FakeClock()
    breaker = CircuitBreaker(
        name="api",
        failure_threshold=None,
        failure_rate_threshold=0.5,
        window=10,
        minimum_calls=10,
        clock=clock,
    )
    PrometheusInstrument(registry_).attached(Attached("p", "", breaker))
    rate = "retrymw_circuit_failure_rate"
    assert value(registry_, rate, retrymw_circuit="api") == 0
    assert value(registry_, rate + "_threshold", retrymw_circuit="api") == 0.5
    for failed in (True, False, True, False):
        assert breaker.allow_request()
        if failed:
            breaker.record_failure()
        else:
            breaker.record_success()
    # Read at scrape time, not at the last event.
    assert value(registry_, rate, retrymw_circuit="api") == pytest.approx(0.5)


def test_a_shared_budget_is_exported_for_every_target_from_its_first_call(
    registry_: CollectorRegistry,
) -> None:
    clock = FakeClock()
    budget = RetryBudget(min_capacity=10, clock=clock)
    instrument = PrometheusInstrument(registry_)
    instrument.attached(Attached("p", "", budget))
    labels = {"retrymw_policy": "p", "retrymw_target": "a.test"}
    assert value(registry_, "retrymw_retry_budget_available", **labels) is None
    instrument.call_finished(CallFinished("p", "a.test", "GET", "success", 1, 0.1, None))
    assert (
        value(registry_, "retrymw_retry_budget_capacity", **labels) == budget.statistics().capacity
    )
    denied = {**labels, "retrymw_reason": "throttled"}
    assert value(registry_, "retrymw_retries_denied_total", **denied) == 0
    while budget.try_acquire():
        pass
    # Live: the gauge follows the budget without any event.
    assert value(registry_, "retrymw_retry_budget_available", **labels) == budget.available()
    assert budget.available() < 1


def test_a_throttle_exports_its_rejection_probability(registry_: CollectorRegistry) -> None:
    clock = FakeClock()
    throttle = AdaptiveThrottle(name="t", clock=clock, rng=Random(1))
    PrometheusInstrument(registry_).attached(Attached("p", "b.test", throttle))
    labels = {"retrymw_policy": "p", "retrymw_target": "b.test"}
    probability = "retrymw_throttle_reject_probability"
    assert value(registry_, probability, **labels) == 0
    for _ in range(20):
        throttle.record_failure()
    assert value(registry_, probability, **labels) == pytest.approx(throttle.reject_probability())
    assert throttle.reject_probability() > 0.5


def test_a_gone_object_reads_nan_rather_than_failing_the_scrape(
    registry_: CollectorRegistry,
) -> None:
    throttle = AdaptiveThrottle(name="gone")
    PrometheusInstrument(registry_).attached(Attached("p", "c.test", throttle))
    del throttle
    labels = {"retrymw_policy": "p", "retrymw_target": "c.test"}
    found = value(registry_, "retrymw_throttle_reject_probability", **labels)
    assert found is not None
    assert math.isnan(found)


def test_policy_info_carries_the_settings(registry_: CollectorRegistry) -> None:
    instrument = PrometheusInstrument(registry_)
    policy = RetryPolicy(name="checkout", attempts=4, initial_delay="100ms", max_delay="2s")
    instrument.attached(Attached("checkout", "", policy))
    labels = {
        "retrymw_policy": "checkout",
        "retrymw_policy_attempts": "4",
        "retrymw_policy_initial_delay": "0.1",
        "retrymw_policy_max_delay": "2",
        "retrymw_policy_timeout": "",
        "retrymw_policy_deadline": "",
    }
    assert value(registry_, "retrymw_policy_info", **labels) == 1
    instrument.attached(Attached("checkout", "", policy.replace(attempts=2)))
    # One series per policy name: the old settings are gone.
    assert value(registry_, "retrymw_policy_info", **labels) is None
    assert (
        value(registry_, "retrymw_policy_info", **{**labels, "retrymw_policy_attempts": "2"}) == 1
    )


def test_attach_reaches_only_the_instruments_that_listen() -> None:
    seen: list[Attached] = []

    class Recorder(Instrument):
        def attached(self, event: Attached, /) -> None:
            seen.append(event)

    class Broken(Instrument):
        def attached(self, event: Attached, /) -> None:
            raise RuntimeError("boom")

    dispatch = Dispatch([Instrument(), Broken(), Recorder()])
    budget = RetryBudget()
    dispatch.attach("p", "t", budget)
    dispatch.attach("p", "t", budget)
    assert seen == [Attached("p", "t", budget)] * 2
    assert not dispatch.guards[1].enabled
    Dispatch([Instrument()]).attach("p", "t", budget)  # nobody listens: nothing happens


_MULTIPROCESS_SCRIPT = """
import json
from prometheus_client import CollectorRegistry, multiprocess, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from retrymw import CircuitBreaker, RetryBudget
from retrymw._core.events import Attached, CallFinished
from retrymw.instrumentation import PrometheusInstrument

instrument = PrometheusInstrument(CollectorRegistry())
breaker = CircuitBreaker(name="db")
budget = RetryBudget(min_capacity=7)
instrument.attached(Attached("p", "", breaker))
instrument.attached(Attached("p", "t", budget))
budget.try_acquire()
instrument.call_finished(CallFinished("p", "t", "f", "success", 1, 0.1, None))
collected = CollectorRegistry()
multiprocess.MultiProcessCollector(collected)
text = generate_latest(collected).decode()
print(json.dumps([budget.available()] + [
    [sample.name, sample.labels, sample.value]
    for family in text_string_to_metric_families(text)
    for sample in family.samples
]))
"""


def test_multiprocess_mode_exports_the_series_from_creation(tmp_path: Path) -> None:
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path)}
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_MULTIPROCESS_SCRIPT)],
        env=env,
        capture_output=True,
        check=True,
        cwd=Path(__file__).parents[2],
    )
    tokens, *rows = json.loads(result.stdout)
    found = {(name, tuple(sorted(labels.items()))): value for name, labels, value in rows}

    def read(name: str, **labels: str) -> float | None:
        return found.get((name, tuple(sorted(labels.items()))))

    assert read("retrymw_circuit_state", retrymw_circuit="db", retrymw_circuit_state="closed") == 1
    assert read("retrymw_circuit_state", retrymw_circuit="db", retrymw_circuit_state="open") == 0
    closed_open = {"retrymw_circuit_previous_state": "closed", "retrymw_circuit_state": "open"}
    assert read("retrymw_circuit_transitions_total", retrymw_circuit="db", **closed_open) == 0
    pt = {"retrymw_policy": "p", "retrymw_target": "t"}
    # Written at the announcement, then refreshed as the first call finished.
    assert read("retrymw_retry_budget_available", **pt) == pytest.approx(tokens)
    assert read("retrymw_retry_budget_capacity", **pt) == 7


@pytest.fixture
def registry_() -> CollectorRegistry:
    return CollectorRegistry()
