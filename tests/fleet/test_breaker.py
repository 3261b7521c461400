"""The shared circuit: quorum, adoption, one broken process, fleet-wide probes (real redis)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from retrymw import CircuitBreaker
from retrymw.fleet import RedisFleet

from .conftest import RedisServer

MEMBERS = 8


@pytest.fixture
def fleets(redis_server: RedisServer) -> Iterator[list[RedisFleet]]:
    """Eight members of one fleet, stepped by hand (no synchroniser threads)."""
    members = [
        RedisFleet(redis_server.url, namespace="shop", sync_interval="100ms", start=False)
        for _ in range(MEMBERS)
    ]
    yield members
    for fleet in members:
        fleet.close()


def breakers(fleets: list[RedisFleet], **settings: Any) -> list[CircuitBreaker]:
    made = []
    for fleet in fleets:
        breaker = CircuitBreaker(name="payments", failure_threshold=3, **settings)
        fleet.attach(breaker)
        made.append(breaker)
    return made


def step(fleets: list[RedisFleet]) -> None:
    """One synchroniser interval: every member steps once."""
    for fleet in fleets:
        assert fleet.sync()


def trip(breaker: CircuitBreaker) -> None:
    for _ in range(3):
        assert breaker.allow_request()
        breaker.record_failure()
    assert breaker.state == "open"


def test_one_broken_process_leaves_the_fleet_closed(fleets: list[RedisFleet]) -> None:
    circuits = breakers(fleets)
    step(fleets)
    trip(circuits[0])
    for _ in range(5):
        step(fleets)
    assert [b.state for b in circuits[1:]] == ["closed"] * (MEMBERS - 1)
    assert circuits[0].state == "open"  # it still refuses its own calls
    assert fleets[1].statistics().open_circuits == 0


def test_a_quorum_opens_every_process_within_two_intervals(fleets: list[RedisFleet]) -> None:
    circuits = breakers(fleets)
    step(fleets)
    for breaker in circuits[:4]:  # half of the members: quorum 0.5
        trip(breaker)
    step(fleets)  # interval 1: the votes reach the store, which opens the shared circuit
    step(fleets)  # interval 2: everyone has adopted it
    assert [b.state for b in circuits] == ["open"] * MEMBERS
    assert all(not b.allow_request() for b in circuits[4:])
    assert fleets[7].statistics().open_circuits == 1


def test_three_votes_of_eight_are_not_a_quorum(fleets: list[RedisFleet]) -> None:
    circuits = breakers(fleets)
    step(fleets)
    for breaker in circuits[:3]:
        trip(breaker)
    for _ in range(3):
        step(fleets)
    assert [b.state for b in circuits[3:]] == ["closed"] * 5


def test_exactly_half_open_max_calls_probes_run_fleet_wide(fleets: list[RedisFleet]) -> None:
    circuits = breakers(fleets, recovery_timeout="300ms", half_open_max_calls=2)
    step(fleets)
    for breaker in circuits[:4]:
        trip(breaker)
    step(fleets)
    step(fleets)
    time.sleep(0.35)  # the shared open period ends (store time)
    admitted: list[int] = []
    start, asked = threading.Barrier(MEMBERS * 4), threading.Barrier(MEMBERS * 4)

    def probe(index: int) -> None:
        start.wait()
        probing = circuits[index].allow_request()
        asked.wait()  # every request was decided before any verdict
        if probing:
            admitted.append(index)
            circuits[index].record_success()  # from the admitted thread, as the retrier does

    threads = [threading.Thread(target=probe, args=(i % MEMBERS,)) for i in range(MEMBERS * 4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert len(admitted) == 2
    # The probes succeeded: the holders' verdicts close the shared circuit, everyone adopts it.
    step(fleets)
    step(fleets)
    assert [b.state for b in circuits] == ["closed"] * MEMBERS


def test_a_hung_store_during_half_open_leaves_probes_to_each_process(
    fleets: list[RedisFleet], redis_server: RedisServer
) -> None:
    circuits = breakers(fleets, recovery_timeout="100ms")
    step(fleets)
    for breaker in circuits[:4]:
        trip(breaker)
    step(fleets)
    step(fleets)
    time.sleep(0.15)
    redis_server.pause()
    try:
        # The lease request times out once (probe_timeout), the fleet turns degraded, and the
        # local breaker admits its own probe; the next member asks nothing of the store.
        assert circuits[5].allow_request()
        assert fleets[5].statistics().degraded
    finally:
        redis_server.resume()
