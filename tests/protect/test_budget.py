"""RetryBudget: deposits on success, a capacity that follows recent traffic, and no blocking."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from retrymw._core.errors import ConfigError
from retrymw._protect.budget import RetryBudget, RetryBudgetStatistics
from retrymw._protect.counting import LazyCount
from retrymw.testing import FakeClock


def drain(budget: RetryBudget, limit: int = 100_000) -> int:
    """Acquire until denied; return how many retries were admitted."""
    admitted = 0
    while admitted < limit and budget.try_acquire():
        admitted += 1
    return admitted


def traffic(budget: RetryBudget, clock: FakeClock, *, rate: int, seconds: float) -> None:
    """Record ``rate`` successful calls per second for ``seconds``, folding as a retrier would."""
    for _ in range(int(rate * seconds)):
        clock.advance(1.0 / rate)
        budget.record_success()
        budget.available()


@pytest.mark.parametrize(
    "min_capacity", [pytest.param(10.0, id="default"), pytest.param(3.0, id="three")]
)
def test_fresh_budget_admits_min_capacity_retries(clock: FakeClock, min_capacity: float) -> None:
    """A fresh budget lets the first calls' retries through, then denies the rest."""
    budget = RetryBudget(min_capacity=min_capacity, clock=clock)
    assert drain(budget) == int(min_capacity)
    assert not budget.try_acquire()
    stats = budget.statistics()
    assert (stats.acquired, stats.denied) == (int(min_capacity), 2)


def test_ten_successes_buy_one_retry_despite_float_rounding(clock: FakeClock) -> None:
    """With ratio 0.1, ten successes folded one by one earn a retry (their float sum is < 1)."""
    budget = RetryBudget(ratio=0.1, min_capacity=0, burst=1.0, clock=clock)
    assert not budget.try_acquire()
    for _ in range(9):
        budget.record_success()
        budget.available()
    assert not budget.try_acquire()
    budget.record_success()
    assert budget.available() < 1.0
    assert budget.try_acquire()
    assert not budget.try_acquire()
    assert budget.available() == 0.0


@pytest.mark.parametrize("blip", [None, "3s"], ids=["no-blip", "blip-3s"])
def test_outage_spends_only_what_the_bucket_held(clock: FakeClock, blip: str | None) -> None:
    """Failures deposit nothing, so an outage admits at most the balance it started with;
    with ``blip`` (the default) only what its first 3 s asked for."""
    budget = RetryBudget(clock=clock, blip=blip)
    traffic(budget, clock, rate=100, seconds=20)  # 0.3 a success: 20 s fill the 600 tokens
    held = budget.available()
    assert held == pytest.approx(600.0, rel=0.05)
    admitted = 0
    for _ in range(120 * 100):  # 120 s of failing calls at 100/s, each asking for a retry
        clock.advance(0.01)
        admitted += budget.try_acquire()
    if blip is None:
        # The cap shrinks as the healthy traffic ages out, so the last fraction may go unspent.
        assert held - 2 <= admitted <= held
    else:
        assert 299 <= admitted <= 303  # 3 s of asks at 100/s, then the floor's 2


@pytest.mark.parametrize(
    ("rate", "expected"),
    [
        pytest.param(1, 10.0, id="1/s-floor"),
        pytest.param(2, 12.0, id="2/s"),
        pytest.param(100, 600.0, id="100/s"),
        pytest.param(1000, 6000.0, id="1000/s"),
    ],
)
def test_capacity_is_six_tenths_of_trailing_successes(
    clock: FakeClock, rate: int, expected: float
) -> None:
    """The cap follows the client's own trailing-10 s traffic, floored at min_capacity."""
    budget = RetryBudget(clock=clock)
    traffic(budget, clock, rate=rate, seconds=30)
    stats = budget.statistics()
    assert stats.capacity == pytest.approx(expected, rel=0.1)
    assert stats.available == pytest.approx(stats.capacity)


def test_capacity_shrinks_back_to_the_floor_and_clips_the_balance(clock: FakeClock) -> None:
    """When traffic stops, the window empties and the balance is cut to min_capacity."""
    budget = RetryBudget(clock=clock)
    traffic(budget, clock, rate=100, seconds=10)
    assert budget.available() > 50
    clock.advance(11)
    stats = budget.statistics()
    assert (stats.capacity, stats.available, stats.window_successes) == (10.0, 10.0, 0.0)


def test_successes_folded_late_are_spread_over_the_quiet_period(clock: FakeClock) -> None:
    """An hour of successes folded at once counts only its last 10 s towards the window."""
    budget = RetryBudget(clock=clock)
    for _ in range(36_000):
        budget.record_success()
    clock.advance(3600)
    stats = budget.statistics()
    assert stats.deposits == 36_000
    assert stats.window_successes == pytest.approx(100.0, rel=0.01)
    assert stats.capacity == pytest.approx(60.0, rel=0.01)


def test_successes_in_the_current_slot_count_in_full(clock: FakeClock) -> None:
    """Successes folded within one slot of the previous fold all land in the window."""
    budget = RetryBudget(clock=clock)
    for _ in range(500):
        budget.record_success()
    clock.advance(0.5)
    assert budget.statistics().window_successes == pytest.approx(500.0)


def test_record_success_never_takes_the_lock(clock: FakeClock) -> None:
    """Recording a success does not wait for a thread that holds the budget's lock."""
    budget = RetryBudget(clock=clock)
    done = threading.Event()

    def record() -> None:
        budget.record_success()
        done.set()

    with budget._lock:
        thread = threading.Thread(target=record)
        thread.start()
        assert done.wait(timeout=5.0)
    thread.join()
    assert budget.statistics().deposits == 1


def test_lazy_count_gives_each_event_to_exactly_one_take() -> None:
    """Threads adding while one reader takes: the takes add up to every add, none twice."""
    count = LazyCount()
    assert count.take() == 0
    for _ in range(3):
        next(count)
    assert (count.take(), count.take(), count.taken) == (3, 0, 3)
    barrier = threading.Barrier(5)

    def work() -> None:
        barrier.wait()
        for _ in range(10_000):
            next(count)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    barrier.wait()
    taken = []
    while any(thread.is_alive() for thread in threads):
        taken.append(count.take())
    for thread in threads:
        thread.join()
    taken.append(count.take())
    assert sum(taken) == 40_000
    assert all(value >= 0 for value in taken)
    assert count.taken == 40_003


def test_concurrent_threads_lose_no_deposit_and_overdraw_nothing(clock: FakeClock) -> None:
    """Eight threads recording and acquiring at once keep every count exact."""
    budget = RetryBudget(ratio=0.2, min_capacity=0, burst=10.0, clock=clock)
    barrier = threading.Barrier(8)

    def work() -> None:
        barrier.wait()
        for _ in range(5_000):
            budget.record_success()
            budget.try_acquire()

    threads = [threading.Thread(target=work) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    stats = budget.statistics()
    assert stats.deposits == 40_000
    assert stats.acquired + stats.denied == 40_000
    assert stats.acquired <= 40_000 * 0.2 + 1e-6
    assert stats.acquired + stats.available == pytest.approx(40_000 * 0.2)


def test_statistics_snapshot_and_repr(clock: FakeClock) -> None:
    """statistics() is a frozen snapshot and repr() shows the balance on one line."""
    budget = RetryBudget(ratio=0.25, burst=0.2, window="30s", min_capacity=4, clock=clock)
    budget.try_acquire()
    stats = budget.statistics()
    assert stats == RetryBudgetStatistics(
        available=3.0,
        capacity=4.0,
        acquired=1,
        denied=0,
        deposits=0,
        window_successes=0.0,
        ratio=0.25,
        burst=0.2,
        min_capacity=4.0,
        window=30.0,
    )
    with pytest.raises(AttributeError):
        stats.available = 1.0  # type: ignore[misc]
    assert repr(budget) == "<RetryBudget available=3/4 ratio=0.25 acquired=1 denied=0>"


def test_default_clock_is_the_system_clock() -> None:
    """Without a clock the budget reads the system clock and still works."""
    budget = RetryBudget()
    assert budget.try_acquire()
    assert budget.statistics().acquired == 1


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        pytest.param({"ratio": -0.1}, "ratio", id="negative-ratio"),
        pytest.param({"ratio": True}, "ratio", id="bool-ratio"),
        pytest.param({"burst": float("nan")}, "burst", id="nan-burst"),
        pytest.param({"burst": "0.1"}, "burst", id="string-burst"),
        pytest.param({"min_capacity": float("inf")}, "min_capacity", id="inf-min-capacity"),
        pytest.param({"window": 0}, "window", id="zero-window"),
        pytest.param({"window": "ten seconds"}, "window", id="bad-window"),
    ],
)
def test_invalid_settings_raise_config_error_naming_the_field(
    kwargs: dict[str, Any], field: str
) -> None:
    """Every invalid argument raises ConfigError with the offending field's name."""
    with pytest.raises(ConfigError) as caught:
        RetryBudget(**kwargs)
    assert caught.value.field == field


class BudgetMachine(RuleBasedStateMachine):
    """Random successes, retries and clock moves never break the bucket's bounds."""

    def __init__(self) -> None:
        super().__init__()
        self.clock = FakeClock()
        self.budget = RetryBudget(clock=self.clock)
        self.successes = 0
        self.asked = 0
        self.start = 10.0

    @initialize(
        ratio=st.floats(0.0, 2.0),
        burst=st.floats(0.0, 1.0),
        min_capacity=st.floats(0.0, 20.0),
        window=st.floats(0.1, 60.0),
    )
    def configure(self, ratio: float, burst: float, min_capacity: float, window: float) -> None:
        self.budget = RetryBudget(
            ratio=ratio, burst=burst, min_capacity=min_capacity, window=window, clock=self.clock
        )
        self.start = min_capacity

    @rule(count=st.integers(1, 200))
    def succeed(self, count: int) -> None:
        for _ in range(count):
            self.budget.record_success()
        self.successes += count

    @rule()
    def acquire(self) -> None:
        self.asked += 1
        self.budget.try_acquire()

    @rule(seconds=st.floats(0.0, 100.0))
    def wait(self, seconds: float) -> None:
        self.clock.advance(seconds)

    @invariant()
    def bounded(self) -> None:
        stats = self.budget.statistics()
        assert 0.0 <= stats.available <= stats.capacity + 1e-9
        assert stats.capacity >= stats.min_capacity
        assert stats.window_successes >= -1e-6
        assert stats.deposits == self.successes
        assert stats.acquired + stats.denied == self.asked
        # Never more retries than the fresh tokens plus everything deposited.
        assert stats.acquired <= self.start + stats.ratio * stats.deposits + 1e-6


TestBudgetMachine = BudgetMachine.TestCase
TestBudgetMachine.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)
