"""`Hedge`: its latency estimate (pure, latencies passed in) and hedged coroutine calls (issue 33).

The coroutine tests order their copies with events, never by how long anything takes: the
first copy waits for what only a hedge can do, so the test passes however loaded the machine.
"""

from __future__ import annotations

import random

import anyio
import pytest

from retrymw import (
    AdaptiveThrottle,
    CircuitBreaker,
    ConfigError,
    Hedge,
    Outcome,
    Retrier,
    RetryBudget,
    RetryPolicy,
    on_predicate,
)
from retrymw.testing import FakeClock, Recorder

# -- the estimate ------------------------------------------------------------------------------


def test_no_quantile_hedge_before_min_samples() -> None:
    hedge = Hedge("p95", min_samples=20)
    for _ in range(19):
        hedge.record("api", 0.010)
    assert hedge.delay("api") is None
    hedge.record("api", 0.010)
    assert hedge.delay("api") == pytest.approx(0.010)


def test_quantile_is_the_nearest_rank_of_the_window() -> None:
    hedge = Hedge("p95", window=100, min_samples=10)
    for ms in range(100, 0, -1):  # order does not matter
        hedge.record("api", ms / 1000)
    assert hedge.delay("api") == pytest.approx(0.095)
    hedge = Hedge("p99.5", window=1000, min_samples=10)
    for ms in range(1, 1001):
        hedge.record("api", ms / 1000)
    assert hedge.delay("api") == pytest.approx(0.995)


def test_window_forgets_older_latencies() -> None:
    hedge = Hedge("p50", window=50, min_samples=10)
    for _ in range(50):
        hedge.record("api", 1.0)
    assert hedge.delay("api") == pytest.approx(1.0)
    for _ in range(50):  # the dependency got faster: the window follows within `window` calls
        hedge.record("api", 0.01)
    assert hedge.delay("api") == pytest.approx(0.01)


def test_estimate_is_per_target() -> None:
    hedge = Hedge("p90", min_samples=5)
    for _ in range(30):
        hedge.record("slow.example", 2.0)
        hedge.record("fast.example", 0.002)
    assert hedge.delay("slow.example") == pytest.approx(2.0)
    assert hedge.delay("fast.example") == pytest.approx(0.002)
    assert hedge.delay("new.example") is None


def test_targets_are_bounded() -> None:
    hedge = Hedge("p95", max_targets=3, min_samples=1)
    for index in range(10):
        hedge.record(f"host{index}", 0.1)
    assert sorted(hedge.statistics().targets) == ["host7", "host8", "host9"]


def test_fixed_after_keeps_no_samples() -> None:
    hedge = Hedge("50ms", max_extra=2)
    hedge.record("api", 5.0)
    assert hedge.delay("api") == pytest.approx(0.05)
    stats = hedge.statistics()
    assert stats.after == pytest.approx(0.05)
    assert stats.max_extra == 2
    assert "api" not in stats.targets  # nothing kept for it: no hedge was sent yet


def test_garbage_latencies_are_ignored() -> None:
    hedge = Hedge("p50", min_samples=1)
    for latency in (float("nan"), float("inf"), -1.0):
        hedge.record("api", latency)
    assert hedge.delay("api") is None


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"after": "p0"}, "after"),
        ({"after": "p100"}, "after"),
        ({"after": "fast"}, "after"),
        ({"after": -1}, "after"),
        ({"after": True}, "after"),
        ({"max_extra": 0}, "max_extra"),
        ({"window": 0}, "window"),
        ({"min_samples": 0}, "min_samples"),
        ({"window": 10, "min_samples": 11}, "min_samples"),
        ({"max_targets": 0}, "max_targets"),
    ],
)
def test_bad_settings_name_the_field(kwargs: dict[str, object], field: str) -> None:
    with pytest.raises(ConfigError) as caught:
        Hedge(**kwargs)  # type: ignore[arg-type]
    assert caught.value.field == field
    assert "expected e.g." in str(caught.value)


def test_retrier_refuses_what_is_not_a_hedge() -> None:
    with pytest.raises(ConfigError, match="hedge"):
        Retrier(hedge="p95")  # type: ignore[arg-type]


# -- hedged coroutines ---------------------------------------------------------------------------


class Copies:
    """A coroutine whose first copy hangs until told, and whose later copies answer."""

    def __init__(self) -> None:
        self.calls = 0
        self.cancelled: list[int] = []
        self.release_first = anyio.Event()

    async def __call__(self) -> str:
        self.calls += 1
        copy = self.calls
        try:
            if copy == 1:
                await self.release_first.wait()
                raise ConnectionError("first copy failed")
            return f"copy {copy}"
        except anyio.get_cancelled_exc_class():
            self.cancelled.append(copy)
            raise


def retrier(hedge: Hedge, **kwargs: object) -> Retrier:
    kwargs.setdefault("clock", FakeClock())
    return Retrier(
        RetryPolicy(attempts=3, retry_on=[ConnectionError]),
        hedge=hedge,
        instruments=kwargs.pop("instruments", ()),
        **kwargs,  # type: ignore[arg-type]
    )


@pytest.mark.anyio
async def test_a_hung_attempt_is_hedged_and_cancelled() -> None:
    hedge = Hedge("1ms")
    copies = Copies()
    assert await retrier(hedge).call(copies) == "copy 2"
    assert copies.calls == 2
    assert copies.cancelled == [1]  # the loser was cancelled, not left running
    stats = hedge.statistics().targets
    (target,) = stats
    assert (stats[target].hedges, stats[target].wins) == (1, 1)


@pytest.mark.anyio
async def test_a_failed_copy_waits_for_the_one_in_flight() -> None:
    second_may_answer = anyio.Event()
    calls = 0

    async def fn() -> str:
        nonlocal calls
        calls += 1
        if calls == 1:
            await second_may_answer.wait()  # set once the hedge is in flight
            raise ConnectionError("first copy failed")
        second_may_answer.set()
        await anyio.sleep(0.01)  # still in flight when the first copy fails
        return "hedge"

    recorder = Recorder()
    result = await retrier(Hedge("1ms"), instruments=[recorder]).call(fn)
    assert result == "hedge"
    assert calls == 2
    (record,) = recorder.calls
    assert (record.attempts, record.outcome) == (1, "success")  # two copies, no retry


@pytest.mark.anyio
async def test_every_copy_failed_then_the_policy_retries() -> None:
    calls = 0

    async def fn() -> str:
        nonlocal calls
        calls += 1
        if calls <= 2:  # both copies of the first attempt
            await anyio.sleep(0.005)
            raise ConnectionError("down")
        return "retried"

    hedge = Hedge("1ms", max_extra=1)
    assert await retrier(hedge, budget=None).call(fn) == "retried"
    assert calls >= 3


@pytest.mark.anyio
async def test_an_empty_budget_sends_no_hedge() -> None:
    calls = 0

    async def fn() -> str:
        nonlocal calls
        calls += 1
        await anyio.sleep(0.05)
        return "only copy"

    clock = FakeClock()
    budget = RetryBudget(min_capacity=0, floor_credit=0, clock=clock)
    hedge = Hedge("1ms")
    assert await retrier(hedge, budget=budget, clock=clock).call(fn) == "only copy"
    assert calls == 1
    (stats,) = hedge.statistics().targets.values()
    assert (stats.hedges, stats.denied) == (0, 1)


@pytest.mark.anyio
async def test_a_half_open_circuit_sends_no_hedge() -> None:
    clock = FakeClock()
    breaker = CircuitBreaker(
        failure_threshold=1, failure_rate_threshold=None, recovery_timeout=5, clock=clock
    )
    breaker.record_failure()
    clock.advance(6)
    assert breaker.state == "half_open"
    calls = 0

    async def fn() -> str:
        nonlocal calls
        calls += 1
        await anyio.sleep(0.05)
        return "probe"

    hedge = Hedge("1ms")
    assert await retrier(hedge, breaker=breaker, clock=clock).call(fn) == "probe"
    assert calls == 1
    assert breaker.statistics().state == "closed"  # the probe answered


@pytest.mark.anyio
async def test_a_quantile_hedge_learns_before_it_hedges() -> None:
    hedge = Hedge("p50", min_samples=3)
    calls = 0

    async def fn() -> int:
        nonlocal calls
        calls += 1
        return calls

    run = retrier(hedge)
    for _ in range(3):
        await run.call(fn)
    assert calls == 3  # fast answers: nothing hedged
    (stats,) = hedge.statistics().targets.values()
    assert stats.samples == 3
    assert stats.delay is not None


def test_sync_calls_are_not_hedged() -> None:
    calls = 0

    def fn() -> str:
        nonlocal calls
        calls += 1
        return "sync"

    assert retrier(Hedge("1ms")).call_sync(fn) == "sync"
    assert calls == 1


@pytest.mark.anyio
async def test_a_raising_retry_on_predicate_raises_as_without_hedging() -> None:
    def judge(outcome: Outcome) -> bool:
        if outcome.exception is not None:
            return True  # a judging error taken for the attempt's would be retried
        raise ValueError("the predicate is broken")

    calls = 0

    async def fn() -> str:
        nonlocal calls
        calls += 1
        return "answer"

    run = Retrier(
        RetryPolicy(attempts=3, retry_on=on_predicate(judge)),
        hedge=Hedge("1ms"),
        clock=FakeClock(),
        instruments=(),
    )
    with pytest.raises(ValueError, match="the predicate is broken"):
        await run.call(fn)
    assert calls == 1  # raised at once, never retried


@pytest.mark.anyio
async def test_a_shedding_throttle_sends_no_hedge() -> None:
    class Lucky(random.Random):
        def random(self) -> float:
            return 0.999  # the attempt itself is admitted: only the hedge is in question

    clock = FakeClock()
    throttle = AdaptiveThrottle(clock=clock, rng=Lucky())
    for _ in range(50):
        throttle.record_failure()
    assert throttle.reject_probability() > 0.0
    calls = 0

    async def fn() -> str:
        nonlocal calls
        calls += 1
        await anyio.sleep(0.05)
        return "admitted"

    hedge = Hedge("1ms")
    assert await retrier(hedge, throttle=throttle, clock=clock).call(fn) == "admitted"
    assert calls == 1
    (stats,) = hedge.statistics().targets.values()
    assert (stats.hedges, stats.denied) == (0, 1)
