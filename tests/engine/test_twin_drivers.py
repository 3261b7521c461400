"""The sync and async drivers are twins: the same calls tell the same story.

`Retrier.call_sync` and `Retrier.call` run one engine through two drivers (`_drive_sync`,
`_drive_async`, each after its bare first attempt when nothing needs a `CallRun` from the
start). Generated scenarios (an instrument that hears of starts or only of endings, policies
with and without a deadline or a matcher, a breaker, a budget, a throttle with a seeded random
source, a sequence of outcomes, and virtual time between calls) must give the same results and
the same events, field for field (times included: the clock is a `FakeClock`).
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import anyio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from retrymw import AdaptiveThrottle, CircuitBreaker, Retrier, RetryBudget, RetryPolicy
from retrymw.testing import FakeClock, RecordingInstrument
from tests.instruments import EndingsRecorder


@dataclass(frozen=True)
class Scenario:
    hears_starts: bool  # the instrument hears of starts: never a bare first attempt
    attempts: int
    initial_delay: float
    deadline: float | None
    connection_errors_only: bool
    breaker_threshold: int | None
    budget: bool
    throttle_seed: int | None
    outcomes: list[str]  # "ok", "connection", "value", in the order the attempts meet them
    gaps: list[float]  # virtual seconds after each call


scenarios = st.builds(
    Scenario,
    hears_starts=st.booleans(),
    attempts=st.integers(1, 5),
    initial_delay=st.sampled_from([0.0, 0.1, 1.0]),
    deadline=st.sampled_from([None, None, 0.5, 3.0]),
    connection_errors_only=st.booleans(),
    breaker_threshold=st.sampled_from([None, None, 1, 3]),
    budget=st.booleans(),
    throttle_seed=st.sampled_from([None, None, 1, 2]),
    outcomes=st.lists(st.sampled_from(["ok", "connection", "value"]), max_size=40),
    gaps=st.lists(st.sampled_from([0.0, 0.2, 2.0]), min_size=1, max_size=12),
)


Recorder = RecordingInstrument | EndingsRecorder


def _recorder(scenario: Scenario) -> Recorder:
    return RecordingInstrument() if scenario.hears_starts else EndingsRecorder()


def _retrier(scenario: Scenario, recorder: Recorder, clock: FakeClock) -> Retrier:
    policy = RetryPolicy(
        attempts=scenario.attempts,
        initial_delay=scenario.initial_delay,
        max_delay=5,
        jitter=False,
        deadline=scenario.deadline,
        retry_on=[ConnectionError] if scenario.connection_errors_only else None,
    )
    breaker = None
    if scenario.breaker_threshold is not None:
        breaker = CircuitBreaker(
            failure_threshold=scenario.breaker_threshold, recovery_timeout=1, clock=clock
        )
    throttle = None
    if scenario.throttle_seed is not None:
        throttle = AdaptiveThrottle(clock=clock, rng=random.Random(scenario.throttle_seed))
    return Retrier(
        policy,
        breaker=breaker,
        # Tight: a retry needs the tokens the successes before it deposited.
        budget=(
            RetryBudget(ratio=0.5, min_capacity=0, floor_credit=0, clock=clock)
            if scenario.budget
            else None
        ),
        throttle=throttle,
        instruments=[recorder],
        clock=clock,
    )


def _next_outcome(outcomes: Iterator[str]) -> int:
    """One attempt's outcome: the next one (a success once they run out)."""
    outcome = next(outcomes, "ok")
    if outcome == "connection":
        raise ConnectionError("refused")
    if outcome == "value":
        raise ValueError("malformed")
    return 1


def _told(recorder: Recorder) -> list[tuple[str, dict[str, Any]]]:
    """The events, each exception by its type (the twins raise distinct instances)."""
    told = []
    for event in recorder.events:
        fields = event._asdict()
        exception = fields.pop("exception", None)
        fields["exception"] = None if exception is None else type(exception).__name__
        fields.pop("subject", None)  # an announced policy or protection: compared by events
        told.append((type(event).__name__, fields))
    return told


def _run_sync(scenario: Scenario) -> tuple[list[object], list[Any]]:
    recorder, clock = _recorder(scenario), FakeClock()
    retrier = _retrier(scenario, recorder, clock)
    outcomes = iter(scenario.outcomes)
    results: list[object] = []

    def attempt() -> int:  # the same name as the coroutine's: the same target
        return _next_outcome(outcomes)

    for gap in scenario.gaps:
        try:
            results.append(retrier.call_sync(attempt))
        except Exception as error:
            results.append(type(error).__name__)
        clock.advance(gap)
    return results, _told(recorder)


async def _run_async(scenario: Scenario) -> tuple[list[object], list[Any]]:
    recorder, clock = _recorder(scenario), FakeClock()
    retrier = _retrier(scenario, recorder, clock)
    outcomes = iter(scenario.outcomes)
    results: list[object] = []

    async def attempt() -> int:
        return _next_outcome(outcomes)

    for gap in scenario.gaps:
        try:
            results.append(await retrier.call(attempt))
        except Exception as error:
            results.append(type(error).__name__)
        clock.advance(gap)
    return results, _told(recorder)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios)
def test_the_sync_and_async_drivers_tell_the_same_story(scenario: Scenario) -> None:
    assert _run_sync(scenario) == anyio.run(_run_async, scenario)
