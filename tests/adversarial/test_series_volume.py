"""Series volume: an idle policy x target pair costs at most 60 series, and policies are capped.

Issue 31 measured about 300 series per idle pair, 73% of them zeros, plus a ``_created`` series
beside every counter and histogram. What each pair keeps (docs/telemetry.md, "Series from
creation"): the success series of calls and attempts, and every series its breaker, budget and
throttle can have (DESIGN §6), the denial reason each of them gives included; everything else
is created at its first event. ``_created`` is dropped for retrymw's own collectors only, never
through prometheus_client's process-wide switch.
"""

from __future__ import annotations

from collections.abc import Callable
from random import Random

import httpx
import prometheus_client.metrics
import pytest
from prometheus_client import CollectorRegistry, Counter, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from retrymw import (
    AdaptiveThrottle,
    AttemptFinished,
    BodyRead,
    CircuitBreaker,
    PerTarget,
    Retrier,
    RetryBudget,
    RetryPolicy,
)
from retrymw.instrumentation import PrometheusInstrument
from retrymw.instrumentation import _names as names
from retrymw.testing import FakeClock
from tests.calls import call_as

Sample = tuple[str, dict[str, str], float]


def exposition(registry: CollectorRegistry) -> list[Sample]:
    """Every sample of the registry's text exposition: (name, labels, value)."""
    text = generate_latest(registry).decode()
    return [
        (sample.name, sample.labels, sample.value)
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    ]


def protected(
    clock: FakeClock, registry: CollectorRegistry, policy: str = "api", **kw: object
) -> Retrier:
    """A retrier as a transport builds one: a breaker, a budget and a throttle per target."""
    return Retrier(
        RetryPolicy(name=policy, retry_on=[ConnectionError]),
        breaker=PerTarget(CircuitBreaker(name=policy, clock=clock)),
        budget=PerTarget(RetryBudget(clock=clock)),
        throttle=PerTarget(AdaptiveThrottle(name=policy, clock=clock, rng=Random(0))),
        instruments=(PrometheusInstrument(registry),),
        clock=clock,
        **kw,  # type: ignore[arg-type]
    )


def of_pair(samples: list[Sample], policy: str, target: str) -> list[Sample]:
    """The samples of one pair: its policy and target labels, or its circuit."""
    circuit = f"{policy}:{target}"
    return [
        sample
        for sample in samples
        if (
            sample[1].get(names.LABEL_POLICY) == policy
            and sample[1].get(names.LABEL_TARGET) == target
        )
        or sample[1].get(names.LABEL_CIRCUIT) == circuit
    ]


def test_an_idle_pair_costs_at_most_60_series() -> None:
    """A pair with its own breaker, budget and throttle, after healthy calls: 60 series or
    fewer, its circuit's included (issue 31: about 300)."""
    clock, registry = FakeClock(), CollectorRegistry()
    retrier = protected(clock, registry)
    for _ in range(10):
        call_as(retrier, lambda: "ok", operation="GET", target="h.example")
    pair = of_pair(exposition(registry), "api", "h.example")
    assert len(pair) <= 60, sorted({name for name, _, _ in pair})
    # ... and every series its protection can have is among them (DESIGN §6).
    circuit = {
        (name, labels.get(names.LABEL_CIRCUIT_STATE))
        for name, labels, _ in pair
        if names.LABEL_CIRCUIT in labels
    }
    assert {state for name, state in circuit if name == names.CIRCUIT_STATE.prometheus} == set(
        names.CIRCUIT_STATES
    )
    transitions = [s for s in pair if s[0] == names.CIRCUIT_TRANSITIONS.prometheus]
    assert len(transitions) == len(names.CIRCUIT_TRANSITION_PAIRS)
    assert all(value == 0 for _, _, value in transitions)


def test_no_created_series_and_no_global_switch() -> None:
    """retrymw's collectors expose no ``_created`` series; a user's own counter in the same
    registry keeps its own, and prometheus_client's process-wide setting is untouched."""
    before = prometheus_client.metrics._use_created
    clock, registry = FakeClock(), CollectorRegistry()
    mine = Counter("app_jobs", "The application's own counter.", registry=registry)
    mine.inc()
    retrier = protected(clock, registry)
    call_as(retrier, lambda: "ok", operation="GET", target="h.example")
    created = [name for name, _, _ in exposition(registry) if name.endswith("_created")]
    assert created == ["app_jobs_created"]
    assert prometheus_client.metrics._use_created is before


def _dead() -> str:
    raise ConnectionError("down")


def test_a_pair_that_never_succeeded_keeps_compact_zero_success_series() -> None:
    """The success series exist from a pair's first record, whatever it was, so that the first
    success after a failing start is counted by increase(); while empty they are three series
    (the +Inf bucket, _count and _sum), not a row of zero buckets."""
    clock, registry = FakeClock(), CollectorRegistry()
    retrier = Retrier(
        RetryPolicy(name="api", attempts=1, retry_on=[ConnectionError]),
        instruments=(PrometheusInstrument(registry),),
        clock=clock,
        budget=None,
    )
    with pytest.raises(ConnectionError):
        call_as(retrier, _dead, operation="GET", target="h.example")
    samples = of_pair(exposition(registry), "api", "h.example")
    for spec, outcome_label in (
        (names.CALL_DURATION, names.LABEL_OUTCOME),
        (names.ATTEMPT_DURATION, names.LABEL_ATTEMPT_OUTCOME),
    ):
        success = [
            (name, labels.get("le"), value)
            for name, labels, value in samples
            if name.startswith(spec.prometheus) and labels[outcome_label] == "success"
        ]
        assert sorted(success, key=str) == sorted(
            [
                (spec.prometheus + "_bucket", "+Inf", 0.0),
                (spec.prometheus + "_count", None, 0.0),
                (spec.prometheus + "_sum", None, 0.0),
            ],
            key=str,
        ), spec.prometheus
    # A histogram that has observed something has all its buckets.
    failed = [
        name
        for name, labels, _ in samples
        if name == names.CALL_DURATION.prometheus + "_bucket"
        and labels[names.LABEL_OUTCOME] == "exhausted"
    ]
    assert len(failed) == len(names.CALL_DURATION_BUCKETS) + 1


@pytest.mark.parametrize(
    ("protection", "reason"),
    [
        pytest.param(lambda c: {"budget": RetryBudget(clock=c)}, "throttled", id="budget"),
        pytest.param(
            lambda c: {"breaker": CircuitBreaker(name="db", clock=c), "budget": None},
            "circuit_open",
            id="breaker",
        ),
        pytest.param(
            lambda c: {"throttle": AdaptiveThrottle(name="db", clock=c), "budget": None},
            "shed",
            id="throttle",
        ),
    ],
)
def test_a_protections_denial_reason_exists_from_the_first_call(
    protection: Callable[[FakeClock], dict[str, object]], reason: str
) -> None:
    """The denial a configured budget, breaker or throttle gives (throttled, circuit_open,
    shed) is exported at 0 from the target's first call, so increase() counts its first denial;
    reasons no configured object gives are created when they first happen."""
    clock, registry = FakeClock(), CollectorRegistry()
    retrier = Retrier(
        RetryPolicy(name="api", retry_on=[ConnectionError]),
        instruments=(PrometheusInstrument(registry),),
        clock=clock,
        **protection(clock),  # type: ignore[arg-type]
    )
    call_as(retrier, lambda: "ok", operation="GET", target="h.example")
    denied = {
        labels[names.LABEL_REASON]: value
        for name, labels, value in of_pair(exposition(registry), "api", "h.example")
        if name == names.RETRIES_DENIED.prometheus
    }
    assert denied == {reason: 0.0}


def test_policy_names_are_capped_like_targets() -> None:
    """Past `names.MAX_POLICIES` policy names, later ones are reported as ``_other``; every
    call is still counted."""
    clock, registry = FakeClock(), CollectorRegistry()
    instrument = PrometheusInstrument(registry)
    count = names.MAX_POLICIES + 50
    for index in range(count):
        retrier = Retrier(
            RetryPolicy(name=f"p{index}", retry_on=[ConnectionError]),
            instruments=(instrument,),
            clock=clock,
            budget=None,
        )
        call_as(retrier, lambda: "ok", operation="GET", target="h.example")
    calls = [
        (labels[names.LABEL_POLICY], value)
        for name, labels, value in exposition(registry)
        if name == names.count_of(names.CALL_DURATION)
    ]
    policies = {policy for policy, _ in calls}
    assert len(policies) == names.MAX_POLICIES + 1
    assert names.OVERFLOW in policies
    assert sum(value for _, value in calls) == count


def test_body_series_are_bounded_and_every_body_counted() -> None:
    """The response-body metrics (one series set per host, method, status...) go through the
    same ledger: past the bound, new sets record in the OpenTelemetry SDK's overflow set
    (``otel_metric_overflow="true"``), the registry stays within `names.MAX_SERIES`, and every
    body is still counted."""
    registry = CollectorRegistry()
    instrument = PrometheusInstrument(registry)
    hosts = 1_500  # 37 body series each: far past 20 000
    for index in range(hosts):
        request = httpx.Request("GET", f"https://h{index}.example/v1")
        instrument.attempt_finished(
            AttemptFinished(
                policy="api",
                target=f"h{index}.example",
                operation="GET",
                attempt=1,
                attempt_outcome="success",
                duration=0.01,
                error_type=None,
                status=200,
                result=httpx.Response(200, request=request),
                body=BodyRead(state="completed", size=700, time_to_first_byte=0.005),
            )
        )
    samples = exposition(registry)
    assert len(samples) <= names.MAX_SERIES
    size = names.RESPONSE_BODY_SIZE.prometheus + "_count"
    counts = {
        labels.get("server_address") or labels["otel_metric_overflow"]: value
        for name, labels, value in samples
        if name == size
    }
    assert sum(counts.values()) == hosts
    assert counts["true"] > 0  # the overflow set
    assert "h0.example" in counts
