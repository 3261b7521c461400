"""The engine's doors: every front door hands its call to `Retrier.run_async` or `run_sync`.

A call's first attempt runs bare (no `CallRun`, no events) only when nothing observes or
bounds it: no instrument hears of calls or attempts, no breaker, throttle or store, no time
limit. An instrument that records metrics hears a first-attempt success as ordinary events,
as any other call; a retry after a bare first attempt goes on from it, numbered as the second.
"""

from __future__ import annotations

from typing import Any

import anyio
import httpx
import pytest

from retrymw import CircuitBreaker, Retrier, RetryBudget, RetryPolicy
from retrymw.httpx import AsyncRetryTransport, RetryTransport
from retrymw.instrumentation import Instrument
from retrymw.testing import FakeClock, RecordingInstrument

pytestmark = pytest.mark.anyio

STEP = 0.25  # virtual seconds each attempt takes


class Metered(Instrument):
    """A metrics-only instrument: records what it is told."""

    def __init__(self) -> None:
        self.seen: list[tuple[Any, ...]] = []

    def attempt_finished(self, event: Any, /) -> None:
        self.seen.append(("attempt_finished", event.attempt, event.attempt_outcome, event.duration))

    def call_finished(self, event: Any, /) -> None:
        self.seen.append(("call_finished", event.outcome, event.attempts, event.duration))


class RetriesOnly(Instrument):
    """Hears of retries only (as the logging instrument): calls keep their bare first attempt."""

    def __init__(self) -> None:
        self.scheduled: list[int] = []

    def retry_scheduled(self, event: Any, /) -> None:
        self.scheduled.append(event.attempt)


class Idle(Metered):
    """An instrument that can be idle (no SDK): skipped while it does not listen."""

    def __init__(self) -> None:
        super().__init__()
        self.on = False

    def listening(self) -> bool:
        return self.on


def flaky(clock: FakeClock, failures: int) -> Any:
    count = 0

    async def fetch() -> str:
        nonlocal count
        count += 1
        clock.advance(STEP)
        if count <= failures:
            raise ConnectionError(f"reset #{count}")
        return "ok"

    return fetch


def flaky_sync(clock: FakeClock, failures: int) -> Any:
    count = 0

    def fetch() -> str:
        nonlocal count
        count += 1
        clock.advance(STEP)
        if count <= failures:
            raise ConnectionError(f"reset #{count}")
        return "ok"

    return fetch


def retrier(clock: FakeClock, *instruments: Any, **kwargs: Any) -> Retrier:
    policy = RetryPolicy(name="p", attempts=3, backoff="fixed", initial_delay=0)
    return Retrier(policy, instruments=instruments, clock=clock, **kwargs)


async def test_a_metrics_instrument_hears_a_first_attempt_success_as_events() -> None:
    clock = FakeClock()
    metered = Metered()
    assert await retrier(clock, metered).call(flaky(clock, 0)) == "ok"
    assert metered.seen == [
        ("attempt_finished", 1, "success", STEP),
        ("call_finished", "success", 1, STEP),
    ]


async def test_a_retried_call_reports_every_attempt() -> None:
    clock = FakeClock()
    metered = Metered()
    assert await retrier(clock, metered).call(flaky(clock, 2)) == "ok"
    assert metered.seen == [
        ("attempt_finished", 1, "retried", STEP),
        ("attempt_finished", 2, "retried", STEP),
        ("attempt_finished", 3, "success", STEP),
        ("call_finished", "success", 3, 3 * STEP),
    ]


@pytest.mark.parametrize("colour", ["async", "sync"])
async def test_a_bare_first_attempt_funds_the_budget_and_retries_go_on_from_it(
    colour: str,
) -> None:
    """Nothing observes calls: the first attempt runs bare; a success funds the budget, a
    failure goes on to the second attempt (the retry hook hears attempt 1 and 2)."""
    clock = FakeClock()
    retries = RetriesOnly()
    budget = RetryBudget(clock=clock)
    runner = retrier(clock, retries, budget=budget)
    if colour == "async":
        assert await runner.call(flaky(clock, 0)) == "ok"
        assert await runner.call(flaky(clock, 2)) == "ok"
    else:
        assert runner.call_sync(flaky_sync(clock, 0)) == "ok"
        assert runner.call_sync(flaky_sync(clock, 2)) == "ok"
    assert budget.statistics().deposits == 2
    assert retries.scheduled == [1, 2]


async def test_an_idle_instrument_keeps_calls_bare_until_it_listens() -> None:
    clock = FakeClock()
    idle = Idle()
    runner = retrier(clock, idle)
    await runner.call(flaky(clock, 0))
    assert idle.seen == []
    idle.on = True
    await runner.call(flaky(clock, 0))
    assert idle.seen == [
        ("attempt_finished", 1, "success", STEP),
        ("call_finished", "success", 1, STEP),
    ]


async def test_a_breaker_takes_every_call_through_the_full_path() -> None:
    """A breaker admits each attempt: a first-attempt success is recorded by it."""
    clock = FakeClock()
    breaker = CircuitBreaker(failure_threshold=5, clock=clock)
    await retrier(clock, breaker=breaker).call(flaky(clock, 0))
    assert breaker.statistics().successes == 1


@pytest.mark.parametrize("observed", [False, True], ids=["bare", "observed"])
async def test_a_cancelled_first_attempt_is_never_retried_nor_swallowed(observed: bool) -> None:
    clock = FakeClock()
    recorder = RecordingInstrument()
    runner = retrier(clock, *([recorder] if observed else []))
    attempts = 0

    async def hangs() -> None:
        nonlocal attempts
        attempts += 1
        await anyio.sleep_forever()

    with anyio.move_on_after(0.05) as scope:
        await runner.call(hangs)
    assert scope.cancelled_caught
    assert attempts == 1
    if observed:
        assert [type(event).__name__ for event in recorder.events][-1] == "CallFinished"
        assert recorder.events[-1].outcome == "cancelled"


def answers(*statuses: int) -> Any:
    seen = [0]

    def handler(request: httpx.Request) -> httpx.Response:
        seen[0] += 1
        return httpx.Response(statuses[min(seen[0], len(statuses)) - 1])

    return handler


@pytest.mark.parametrize("instruments", [(), (Metered(),)], ids=["bare", "metered"])
async def test_the_async_transport_takes_the_same_doors(instruments: tuple[Any, ...]) -> None:
    clock = FakeClock()
    transport = AsyncRetryTransport(
        httpx.MockTransport(answers(503, 200)),
        policy=RetryPolicy(attempts=3, backoff="fixed", initial_delay=0),
        instruments=instruments,
        clock=clock,
    )
    async with httpx.AsyncClient(transport=transport) as client:
        assert (await client.get("http://api.test/")).status_code == 200
        assert (await client.get("http://api.test/")).status_code == 200
    budget = transport.retrier.budget_for("api.test")
    assert budget is not None
    assert budget.statistics().deposits == 2


@pytest.mark.parametrize("instruments", [(), (Metered(),)], ids=["bare", "metered"])
def test_the_sync_transport_takes_the_same_doors(instruments: tuple[Any, ...]) -> None:
    clock = FakeClock()
    transport = RetryTransport(
        httpx.MockTransport(answers(503, 200)),
        policy=RetryPolicy(attempts=3, backoff="fixed", initial_delay=0),
        instruments=instruments,
        clock=clock,
    )
    with httpx.Client(transport=transport) as client:
        assert client.get("http://api.test/").status_code == 200
        assert client.get("http://api.test/").status_code == 200
    budget = transport.retrier.budget_for("api.test")
    assert budget is not None
    assert budget.statistics().deposits == 2
