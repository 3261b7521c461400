"""PerTarget under 1 000 coroutines and 8 threads: exact probes, exact tokens, one instance each.

Each target's instance must behave as if it were alone: however many tasks or threads resolve
it at once, a half-open breaker admits exactly ``half_open_max_calls`` probes, a fresh budget
lends exactly its ``min_capacity`` retries, and counts never go negative, while eviction churns
other targets in and out.
"""

from __future__ import annotations

import threading
from collections import Counter
from random import Random
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from retrymw import (
    AdaptiveThrottle,
    CircuitBreaker,
    PerTarget,
    RetryBudget,
    RetryBudgetStatistics,
)
from retrymw.testing import FakeClock

SETTINGS = settings(max_examples=10, deadline=None)


def half_open(per_target: PerTarget[CircuitBreaker], targets: list[str], clock: FakeClock) -> None:
    """Trip every target's breaker and wait out its recovery timeout."""
    for target in targets:
        breaker = per_target.for_target(target)
        assert breaker.allow_request()
        breaker.record_failure()
        assert breaker.state == "open"
    clock.advance(1.0)


def run_threads(work: Any, count: int = 8) -> None:
    """Run ``work(index)`` in ``count`` threads released at once by a barrier."""
    barrier = threading.Barrier(count)

    def start(index: int) -> None:
        barrier.wait()
        work(index)

    threads = [threading.Thread(target=start, args=(index,)) for index in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


@pytest.mark.anyio
@SETTINGS
@given(probes=st.integers(1, 5), targets=st.integers(1, 20))
async def test_1000_coroutines_get_exact_probes_per_target(probes: int, targets: int) -> None:
    """1 000 tasks resolve their target's half-open breaker at once: exactly `probes` each."""
    clock = FakeClock()
    template = CircuitBreaker(
        failure_threshold=1, recovery_timeout="1s", half_open_max_calls=probes, clock=clock
    )
    per_target = PerTarget(template)
    names = [f"t{index}" for index in range(targets)]
    half_open(per_target, names, clock)
    admitted: Counter[str] = Counter()
    refused: Counter[str] = Counter()

    async def arrive(index: int) -> None:
        await anyio.lowlevel.checkpoint()  # every task is started before any asks
        name = names[index % targets]
        if per_target.for_target(name).allow_request():
            admitted[name] += 1
        else:
            refused[name] += 1

    async with anyio.create_task_group() as group:
        for index in range(1000):
            group.start_soon(arrive, index)
    assert admitted == dict.fromkeys(names, probes)
    assert sum(refused.values()) == 1000 - probes * targets
    for name in names:
        assert per_target.for_target(name).state == "half_open"


@SETTINGS
@given(probes=st.integers(1, 3), targets=st.integers(1, 8))
def test_8_threads_get_exact_probes_per_target(probes: int, targets: int) -> None:
    """Eight threads racing on each half-open target: exactly `probes` admitted per target."""
    clock = FakeClock()
    template = CircuitBreaker(
        failure_threshold=1, recovery_timeout="1s", half_open_max_calls=probes, clock=clock
    )
    per_target = PerTarget(template)
    names = [f"t{index}" for index in range(targets)]
    half_open(per_target, names, clock)
    admitted: Counter[str] = Counter()
    lock = threading.Lock()

    def work(_: int) -> None:
        for _ in range(50):
            for name in names:
                if per_target.for_target(name).allow_request():
                    with lock:
                        admitted[name] += 1

    run_threads(work)
    assert admitted == dict.fromkeys(names, probes)


@SETTINGS
@given(targets=st.integers(1, 10), min_capacity=st.integers(1, 20))
def test_8_threads_spend_exactly_each_fresh_budget(targets: int, min_capacity: int) -> None:
    """A fresh budget per target lends exactly min_capacity retries, whoever asks."""
    per_target = PerTarget(RetryBudget(min_capacity=min_capacity, clock=FakeClock()))
    names = [f"t{index}" for index in range(targets)]
    granted: Counter[str] = Counter()
    lock = threading.Lock()

    def work(_: int) -> None:
        for _ in range(3 * min_capacity):
            for name in names:
                if per_target.for_target(name).try_acquire():
                    with lock:
                        granted[name] += 1

    run_threads(work)
    assert granted == dict.fromkeys(names, min_capacity)
    for name, stats in per_target.statistics().items():
        assert isinstance(stats, RetryBudgetStatistics)
        assert stats.available >= 0
        assert stats.acquired == min_capacity, name


@SETTINGS
@given(max_targets=st.integers(1, 16), seed=st.integers(0, 2**16))
def test_8_threads_churning_targets_keep_one_live_instance_each(
    max_targets: int, seed: int
) -> None:
    """Under eviction churn: never more than max_targets, each live target one instance
    (announced once to a creation listener), throttle counts never negative."""
    clock = FakeClock()
    per_target = PerTarget(AdaptiveThrottle(clock=clock, rng=Random(seed)), max_targets=max_targets)
    created: list[tuple[str, object]] = []
    per_target.add_creation_listener(lambda target, instance: created.append((target, instance)))
    sizes: list[int] = []

    def work(index: int) -> None:
        rng = Random(f"{seed}:{index}")
        for _ in range(300):
            throttle = per_target.for_target(f"t{rng.randrange(32)}")
            if throttle.allow_request():
                if rng.random() < 0.5:
                    throttle.record_failure()
                else:
                    throttle.record_success()
            sizes.append(len(per_target))

    run_threads(work)
    assert max(sizes) <= max_targets
    latest = dict(created)  # the last instance created for each target
    for target in per_target:
        instance = per_target.get(target)
        assert instance is not None
        assert instance is latest[target]  # created once, announced, and the one kept
        stats = instance.statistics()
        assert 0 <= stats.accepts <= stats.requests
        assert 0.0 <= stats.reject_probability <= 0.9
        assert stats.shed >= 0
    assert len({id(instance) for _, instance in created}) == len(created)
