"""The store slow, hung, down or down at start never delays or fails a call (real redis)."""

from __future__ import annotations

import logging
import time
from typing import Any

import pytest

from retrymw import AdaptiveThrottle, CircuitBreaker, RetryBudget
from retrymw.fleet import RedisFleet

from .conftest import RedisServer

INTERVAL = 0.2


def protections(fleet: RedisFleet) -> tuple[RetryBudget, CircuitBreaker, AdaptiveThrottle]:
    budget, breaker, throttle = (
        RetryBudget(),
        CircuitBreaker(name="api"),
        AdaptiveThrottle(name="api"),
    )
    for protection in (budget, breaker, throttle):
        fleet.attach(protection, target="api")
    return budget, breaker, throttle


def call(budget: RetryBudget, breaker: CircuitBreaker, throttle: AdaptiveThrottle, n: int) -> None:
    """The request path of one call, as the retrier walks it: every tenth needs one retry."""
    assert breaker.allow_request()
    assert throttle.allow_request()
    if n % 10 == 0:
        breaker.record_failure()
        throttle.record_failure()
        budget.try_acquire()
        breaker.allow_request()
        throttle.allow_request()
    breaker.record_success()
    throttle.record_success()
    budget.record_success()


def wait_for(predicate: Any, limit: float) -> float:
    """Seconds until ``predicate()`` holds (bounded by ``limit``)."""
    start = time.monotonic()
    while not predicate() and time.monotonic() - start < limit:
        time.sleep(0.005)
    return time.monotonic() - start


def commands(server: RedisServer) -> int:
    stats: dict[str, Any] = server.client().info("commandstats")
    return sum(int(entry["calls"]) for entry in stats.values())


def test_store_commands_per_call_with_closed_circuits(redis_server: RedisServer) -> None:
    with RedisFleet(redis_server.url, namespace="cmds", sync_interval="250ms") as fleet:
        budget, breaker, throttle = protections(fleet)
        assert wait_for(lambda: not fleet.statistics().degraded, 2.0) < 2.0
        before = commands(redis_server)
        for n in range(100_000):
            call(budget, breaker, throttle, n)
        after = commands(redis_server) - 1  # the INFO that read "before"
    per_call = (after - before) / 100_000
    print(f"store commands per call: {per_call:.5f} ({after - before} over 100 000 calls)")
    assert per_call <= 0.01
    assert breaker.state == "closed"


def test_a_hung_store_delays_no_call(redis_server: RedisServer) -> None:
    with RedisFleet(redis_server.url, namespace="hung", sync_interval=INTERVAL) as fleet:
        budget, breaker, throttle = protections(fleet)
        assert wait_for(lambda: not fleet.statistics().degraded, 2.0) < 2.0
        redis_server.pause()  # SIGSTOP: connections stay open, nothing answers
        stopped = time.monotonic()
        latencies = []
        degraded_after = None
        n = 0
        while time.monotonic() - stopped < 4 * INTERVAL:
            started = time.perf_counter()
            call(budget, breaker, throttle, n)
            latencies.append(time.perf_counter() - started)
            n += 1
            if degraded_after is None and fleet.statistics().degraded:
                degraded_after = time.monotonic() - stopped
            time.sleep(0.0005)
        redis_server.resume()
        latencies.sort()
        p99 = latencies[int(len(latencies) * 0.99)]
        print(
            f"hung store: {len(latencies)} calls, p99 {p99 * 1e3:.3f} ms, max "
            f"{latencies[-1] * 1e3:.3f} ms, degraded after {degraded_after:.3f} s"
        )
        assert p99 <= 0.001
        assert degraded_after is not None
        assert degraded_after <= 2 * INTERVAL
        # It rejoins once the store answers again.
        rejoined = wait_for(lambda: not fleet.statistics().degraded, 3.0)
        print(f"rejoined {rejoined:.3f} s after SIGCONT")
        assert not fleet.statistics().degraded


def test_down_at_start_then_started(stopped_redis: RedisServer) -> None:
    with RedisFleet(stopped_redis.url, namespace="late", sync_interval=INTERVAL) as fleet:
        budget, breaker, throttle = protections(fleet)
        for n in range(1000):
            call(budget, breaker, throttle, n)  # no store: every call still works
        wait_for(lambda: fleet.statistics().sync_failures >= 2, 5.0)
        for n in range(1000):
            call(budget, breaker, throttle, n)
        stats = fleet.statistics()
        assert stats.degraded
        assert stats.last_sync_age is None
        assert stats.sync_failures >= 2
        stopped_redis.start()
        joined = wait_for(lambda: not fleet.statistics().degraded, 5.0)
        for n in range(1000):
            call(budget, breaker, throttle, n)
        print(f"joined {joined:.3f} s after the store started")
        assert joined <= 2 * INTERVAL
        assert fleet.statistics().members == 1


def test_one_log_line_per_state_change(
    redis_server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="retrymw")
    fleet = RedisFleet(redis_server.url, namespace="logs", sync_interval="50ms", start=False)
    protections(fleet)
    assert fleet.sync()
    redis_server.pause()
    assert not fleet.sync()
    assert not fleet.sync()
    redis_server.resume()
    assert fleet.sync()
    assert fleet.sync()
    fleet.close()
    lines = [r.getMessage() for r in caplog.records if "fleet" in r.getMessage()]
    assert len(lines) == 3
    assert "joined" in lines[0]
    assert "unreachable (TimeoutError)" in lines[1]
    assert "rejoined" in lines[2]
