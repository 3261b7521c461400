"""Fleet pacing shares follow demand, on a real redis-server, when demand changes: a busy
member that falls silent gives its share back, and a member that has not measured its demand
yet gets one over the members (it used to count as unbounded and take the busy member's room).

Three members stepped by hand on a `FakeClock` (`tests.fleet.conftest.fleets`); the rule is
`retrymw.fleet._scripts`'s pacer rule, and the arithmetic of shares is in
`tests/fleet/test_pacer.py`.
"""

from __future__ import annotations

import pytest

from retrymw import Pacer
from retrymw._protect.pacer import RateLimits
from retrymw.fleet import RedisFleet
from retrymw.fleet._pacer import ROOM_TO_GROW
from retrymw.testing import FakeClock
from tests.fleet.conftest import fleets, redis_server

__all__ = ["fleets", "redis_server"]


def learned(pacer: Pacer, clock: FakeClock, limit: float) -> None:
    """``pacer`` learns a requests limit of ``limit`` per second from a 200's headers."""
    pacer.learn(clock.now(), status=200, limits=RateLimits(requests=limit))


def asked(pacers: list[Pacer], counts: list[int], clock: FakeClock) -> None:
    """Each member asks for ``counts[i]`` sends now (and nothing else)."""
    for pacer, count in zip(pacers, counts, strict=True):
        for _ in range(count):
            pacer.reserve(clock.now())


def synced(fleets: list[RedisFleet], rounds: int = 2) -> None:
    """Steps only: a member that sends nothing sends nothing here either."""
    for _ in range(rounds):
        for fleet in fleets:
            assert fleet.sync()


def test_a_busy_member_that_falls_silent_gives_its_share_back(fleets: list[RedisFleet]) -> None:
    """The busy member stops sending altogether (no send, so no record for its sends): within
    a second's measure and a step it reports that it asks for nothing, and the two others,
    still asking 2/s, get their equal part back and more."""
    clock = FakeClock()
    pacers = [Pacer(name="api", clock=clock) for _ in fleets]
    for fleet, pacer in zip(fleets, pacers, strict=True):
        fleet.attach(pacer, target="llm")
        learned(pacer, clock, 60.0)
    asked(pacers, [1, 1, 1], clock)
    synced(fleets)
    for counts in ([38, 2, 2], [38, 2, 2]):  # two seconds busy: measured, held back
        clock.advance(1.0)
        asked(pacers, counts, clock)
        synced(fleets)
    assert pacers[0].share > 0.8
    assert pacers[1].share == pytest.approx(2 * ROOM_TO_GROW / 60)
    for _ in range(2):  # then silent, the others still asking 2/s
        clock.advance(1.0)
        asked(pacers, [0, 2, 2], clock)
        synced(fleets)
    shares = [p.share for p in pacers]
    assert shares[1] >= 1 / 3
    assert shares[2] >= 1 / 3
    assert shares[0] < 1 / 3
    assert sum(shares) <= 1.0 + 1e-9


def test_a_member_that_has_not_measured_its_demand_gets_an_equal_share(
    fleets: list[RedisFleet],
) -> None:
    """Two members measured (one held back, one asking 2/s), a third joins: until it reports
    what it asks for it gets one over the members, not an equal part of what the quiet one
    leaves (that would take from the busy member for a demand nobody measured)."""
    clock = FakeClock()
    pacers = [Pacer(name="api", clock=clock) for _ in fleets]
    for fleet, pacer in zip(fleets[:2], pacers[:2], strict=True):
        fleet.attach(pacer, target="llm")
        learned(pacer, clock, 60.0)
    asked(pacers[:2], [1, 1], clock)
    synced(fleets[:2])
    clock.advance(1.0)
    asked(pacers[:2], [70, 2], clock)  # more than the whole limit: held back
    synced(fleets[:2], rounds=1)
    asked(pacers[:2], [1, 1], clock)  # each hears the other's need
    synced(fleets[:2], rounds=1)
    assert pacers[0].share == pytest.approx(1 - 2 * ROOM_TO_GROW / 60)
    fleets[2].attach(pacers[2], target="llm")
    learned(pacers[2], clock, 60.0)
    for _ in range(2):  # joining, then joined; no second has passed: nothing measured
        asked(pacers, [1, 1, 1], clock)
        synced(fleets, rounds=1)
    shares = [p.share for p in pacers]
    assert shares[2] == pytest.approx(1 / 3)
    assert shares[1] == pytest.approx(2 * ROOM_TO_GROW / 60)
    assert shares[0] == pytest.approx(1 - 1 / 3 - 2 * ROOM_TO_GROW / 60)
    assert sum(shares) <= 1.0 + 1e-9
