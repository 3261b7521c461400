"""Refused before any attempt is one thing; attempted, then a retry refused, is another.

DESIGN §15: a call that the breaker or the throttle refuses before its first attempt ends with
outcome ``circuit_open`` or ``shed``; a call that made attempts and whose retry was then refused
(the circuit opened meanwhile, a half-open probe failed, the throttle shed the retry) ends with
what its attempts got (``failure``), the refusal being its denial reason
(``retrymw_retries_denied_total{retrymw_reason="circuit_open"|"shed"}``). Otherwise the
dashboards count attempted calls as refused: in a total outage the per-target amplification
reads +Inf and the admitted calls 0, and with one dead host of five the refused share reads
20.0% against 17.1% really refused (issue 31).

The truth is counted outside retrymw: by the attempt functions themselves.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Callable
from random import Random

import pytest
from prometheus_client import CollectorRegistry

from retrymw import (
    AdaptiveThrottle,
    CallFinished,
    CircuitBreaker,
    CircuitOpenError,
    LoadShedError,
    PerTarget,
    Retrier,
    RetryBudget,
    RetryDenied,
    RetryPolicy,
)
from retrymw.instrumentation import PrometheusInstrument
from retrymw.instrumentation import _names as names
from retrymw.testing import FakeClock, RecordingInstrument
from tests.calls import call_as

REFUSED = ("circuit_open", "shed")


def _dead() -> str:
    raise ConnectionError("down")


def _breaker(clock: FakeClock, **settings: object) -> CircuitBreaker:
    options: dict[str, object] = {
        "name": "db",
        "failure_threshold": 2,
        "failure_rate_threshold": None,
        "recovery_timeout": "10s",
        "clock": clock,
    }
    options.update(settings)
    return CircuitBreaker(**options)  # type: ignore[arg-type]


def _retrier(clock: FakeClock, recorder: RecordingInstrument, **protection: object) -> Retrier:
    return Retrier(
        RetryPolicy(attempts=3, backoff="fixed", initial_delay="1s", retry_on=[ConnectionError]),
        clock=clock,
        instruments=(recorder,),
        **{"budget": None, **protection},  # type: ignore[arg-type]
    )


def _finished(recorder: RecordingInstrument) -> CallFinished:
    finished: CallFinished = recorder.of_type(CallFinished)[-1]
    return finished


def test_a_retry_refused_by_an_open_circuit_ends_with_what_the_attempts_got() -> None:
    """Two failed attempts trip the breaker; the call's retry is refused: outcome failure,
    reason circuit_open, the last error raised with its note."""
    clock, recorder = FakeClock(), RecordingInstrument()
    retrier = _retrier(clock, recorder, breaker=_breaker(clock))
    with pytest.raises(ConnectionError) as caught:
        retrier.call_sync(_dead)
    finished = _finished(recorder)
    assert (finished.outcome, finished.attempts) == ("failure", 2)
    assert [denied.reason for denied in recorder.of_type(RetryDenied)] == ["circuit_open"]
    assert "[circuit_open]" in getattr(caught.value, "__notes__", [""])[-1]


def test_a_call_refused_outright_is_still_circuit_open() -> None:
    """The next call, refused before its first attempt, is the one with outcome circuit_open."""
    clock, recorder = FakeClock(), RecordingInstrument()
    retrier = _retrier(clock, recorder, breaker=_breaker(clock))
    with pytest.raises(ConnectionError):
        retrier.call_sync(_dead)
    with pytest.raises(CircuitOpenError):
        retrier.call_sync(_dead)
    finished = _finished(recorder)
    assert (finished.outcome, finished.attempts) == ("circuit_open", 0)


def test_a_failed_half_open_probe_is_a_failure_not_a_refusal() -> None:
    """After the recovery timeout one probe runs and fails: the circuit reopens and refuses its
    retry, but the probe was an attempt: outcome failure."""
    clock, recorder = FakeClock(), RecordingInstrument()
    breaker = _breaker(clock)
    retrier = _retrier(clock, recorder, breaker=breaker)
    with pytest.raises(ConnectionError):
        retrier.call_sync(_dead)
    clock.advance(10.0)
    recorder.events.clear()
    with pytest.raises(ConnectionError):
        retrier.call_sync(_dead)
    finished = _finished(recorder)
    assert (finished.outcome, finished.attempts) == ("failure", 1)
    assert [denied.reason for denied in recorder.of_type(RetryDenied)] == ["circuit_open"]
    assert breaker.state == "open"


def test_a_shed_retry_is_a_failure_and_a_shed_call_is_shed() -> None:
    """A throttle that admits the first attempt and sheds the retry: outcome failure, reason
    shed; one that sheds the first attempt: outcome shed, no attempt."""
    clock, recorder = FakeClock(), RecordingInstrument()
    throttle = AdaptiveThrottle(name="db", max_reject=1.0, clock=clock, rng=Random(0))
    for _ in range(40):
        throttle.record_failure()
    retrier = _retrier(clock, recorder, throttle=throttle)
    seen: Counter[tuple[str, int]] = Counter()
    for _ in range(200):
        with pytest.raises((ConnectionError, LoadShedError)):
            retrier.call_sync(_dead)
        finished = _finished(recorder)
        seen[finished.outcome, finished.attempts] += 1
    assert seen[("shed", 0)] > 0
    assert seen[("failure", 1)] + seen[("failure", 2)] > 0
    refused = {key for key in seen if key[0] in REFUSED}
    assert refused == {("shed", 0)}  # only calls that made no attempt are refused
    denied = Counter(event.reason for event in recorder.of_type(RetryDenied))
    assert denied["shed"] == seen[("failure", 1)] + seen[("failure", 2)]


# -- the dashboards' arithmetic against the truth -------------------------------------------------


class Truth:
    """Attempts and calls counted by the attempt functions themselves, outside retrymw."""

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()
        self.admitted: Counter[str] = Counter()
        self.attempts: Counter[str] = Counter()

    def call(self, retrier: Retrier, target: str, failing: Callable[[], bool]) -> None:
        made = 0

        def attempt() -> str:
            nonlocal made
            made += 1
            if failing():
                raise ConnectionError("down")
            return "ok"

        with contextlib.suppress(ConnectionError, CircuitOpenError, LoadShedError):
            call_as(retrier, attempt, operation="GET", target=target)
        self.calls[target] += 1
        self.attempts[target] += made
        self.admitted[target] += made > 0


def _samples(registry: CollectorRegistry, name: str) -> list[tuple[dict[str, str], float]]:
    return [
        (sample.labels, sample.value)
        for family in registry.collect()
        for sample in family.samples
        if sample.name == name
    ]


def _metric_view(registry: CollectorRegistry, target: str) -> tuple[float, float, float]:
    """(calls, admitted calls, attempts) of ``target`` as the dashboards count them."""
    calls = admitted = attempts = 0.0
    for labels, value in _samples(registry, names.count_of(names.CALL_DURATION)):
        if labels[names.LABEL_TARGET] == target:
            calls += value
            if labels[names.LABEL_OUTCOME] not in REFUSED:
                admitted += value
    for labels, value in _samples(registry, names.count_of(names.ATTEMPT_DURATION)):
        if labels[names.LABEL_TARGET] == target:
            attempts += value
    return calls, admitted, attempts


def _protected(clock: FakeClock, registry: CollectorRegistry, seed: int) -> Retrier:
    """A transport-like retrier: a breaker, a budget and a throttle per target."""
    return Retrier(
        RetryPolicy(
            name="api",
            attempts=3,
            initial_delay="200ms",
            max_delay="2s",
            jitter="full",
            retry_on=[ConnectionError],
        ),
        breaker=PerTarget(
            CircuitBreaker(
                name="api",
                failure_threshold=5,
                failure_rate_threshold=None,
                recovery_timeout="5s",
                clock=clock,
            )
        ),
        budget=PerTarget(RetryBudget(clock=clock)),
        throttle=PerTarget(AdaptiveThrottle(name="api", clock=clock, rng=Random(seed))),
        instruments=(PrometheusInstrument(registry),),
        clock=clock,
        rng=Random(seed + 1),
    )


def test_a_total_outage_reads_finite_amplification_and_the_true_admitted_calls() -> None:
    """Three minutes of a dead dependency at 4 calls/s: the calls that made an attempt (the
    breaker's probes, mostly) are the admitted calls, and attempts per admitted call is their
    true, finite figure (issue 31: +Inf, admitted 0)."""
    clock, registry, truth = FakeClock(), CollectorRegistry(), Truth()
    retrier = _protected(clock, registry, seed=3)
    target = "dead.internal"
    for second in range(180):
        for _ in range(4):
            truth.call(retrier, target, lambda: True)
        clock.advance(max(0.0, second + 1 - clock.now()))
    calls, admitted, attempts = _metric_view(registry, target)
    assert calls == truth.calls[target] == 720
    assert admitted == truth.admitted[target]
    assert 0 < admitted < calls  # the breaker refused most calls, its probes were admitted
    assert attempts == truth.attempts[target]
    assert attempts / admitted == pytest.approx(truth.attempts[target] / truth.admitted[target])


def test_one_dead_host_of_five_reads_the_true_refused_share() -> None:
    """Five hosts, one dead, 10 calls/s spread over them for two minutes: the refused share
    (outcomes circuit_open and shed) is the share of calls that made no attempt."""
    clock, registry, truth = FakeClock(), CollectorRegistry(), Truth()
    retrier = _protected(clock, registry, seed=5)
    hosts = [f"h{index}.internal" for index in range(5)]
    rng = Random(11)
    for second in range(120):
        for call in range(10):
            host = hosts[call % 5]
            truth.call(
                retrier, host, (lambda: True) if host == hosts[0] else lambda: rng.random() < 0.01
            )
        clock.advance(max(0.0, second + 1 - clock.now()))
    total = refused = 0.0
    for host in hosts:
        calls, admitted, _ = _metric_view(registry, host)
        total += calls
        refused += calls - admitted
    true_refused = sum(truth.calls.values()) - sum(truth.admitted.values())
    assert total == sum(truth.calls.values())
    assert refused == true_refused
    assert 0 < refused / total < 0.2
