"""One budget and pooled throttle counts across members; attaching; a forked child (real redis)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from retrymw import AdaptiveThrottle, CircuitBreaker, ConfigError, PerTarget, RetryBudget
from retrymw.fleet import RedisFleet

from .conftest import RedisServer, stepped_fleets


@pytest.fixture
def fleets(redis_server: RedisServer) -> Iterator[list[RedisFleet]]:
    """Four members stepped by hand (namespace ``share``)."""
    yield from stepped_fleets(redis_server, "share", 4)


def test_members_spend_one_bucket_in_an_outage(fleets: list[RedisFleet]) -> None:
    budgets = [RetryBudget() for _ in fleets]
    for fleet, budget in zip(fleets, budgets, strict=True):
        fleet.attach(budget, target="db")
    for _ in range(3):
        for fleet in fleets:
            assert fleet.sync()
    # The outage: nothing succeeds, every member retries all it can, step after step.
    granted = 0
    for _ in range(20):
        for fleet, budget in zip(fleets, budgets, strict=True):
            granted += sum(budget.try_acquire() for _ in range(50))
            assert fleet.sync()
    stats = fleets[0].statistics()
    # One fleet floor (min_capacity 10) plus the members' first local shares, not 4 budgets.
    assert granted <= 10 + 4
    assert granted >= 10
    assert stats.members == 4
    assert sum(f.statistics().tokens_leased for f in fleets) == granted - 4


def test_successes_fund_retries_anywhere_in_the_fleet(fleets: list[RedisFleet]) -> None:
    # burst 0.1 (the 0.3 default) keeps the figures below; no blip: the spender's own
    # calls never succeed, so its local rule would deny once 3 s of real time have passed.
    earner, spender = RetryBudget(burst=0.1, blip=None), RetryBudget(burst=0.1, blip=None)
    fleets[0].attach(earner, target="db")
    fleets[1].attach(spender, target="db")
    for _ in range(2):
        fleets[0].sync()
        fleets[1].sync()
    while spender.try_acquire():
        fleets[1].sync()  # drain the bucket
    for _ in range(1000):
        # One member's claim counts up to twice the median member's (at least twice what
        # funds the floor, 100): 200 successes, capacity burst * 200 = 20.
        earner.record_success()
    fleets[0].sync()
    spent = 0
    for _ in range(10):
        fleets[1].sync()
        spent += sum(spender.try_acquire() for _ in range(40))
    assert spent >= 18
    assert spent <= 20


def test_throttle_counts_are_pooled(fleets: list[RedisFleet]) -> None:
    failing, quiet = AdaptiveThrottle(name="api"), AdaptiveThrottle(name="api")
    fleets[0].attach(failing)
    fleets[1].attach(quiet)
    for _ in range(200):
        assert failing.allow_request() or True
        failing.record_failure()
    assert quiet.reject_probability() == 0.0
    fleets[0].sync()
    fleets[1].sync()
    assert quiet.statistics().requests == 0  # its own counts stay its own
    assert quiet.reject_probability() > 0.8
    fleets[1].close()  # closed: local counts alone again
    assert quiet.reject_probability() == 0.0


def test_overload_refusals_are_pooled(fleets: list[RedisFleet]) -> None:
    """Another member's 503s reach a quiet member's overload term: half its attempts refused
    over 200 is shed at overload_k (the general term alone would leave 50% failing alone)."""
    refused, quiet = AdaptiveThrottle(name="api"), AdaptiveThrottle(name="api")
    fleets[0].attach(refused)
    fleets[1].attach(quiet)
    for _ in range(100):
        refused.record_success()
        refused.record_failure(overloaded=True)
    fleets[0].sync()
    fleets[1].sync()
    assert quiet.statistics().overloaded == 0  # its own counts stay its own
    assert quiet.reject_probability() == pytest.approx((1 - 1.4 * 0.5) * 200 / 201)
    fleets[1].close()
    assert quiet.reject_probability() == 0.0


def test_per_target_instances_join_as_they_are_created(fleets: list[RedisFleet]) -> None:
    per_target = [PerTarget(CircuitBreaker(name="http", failure_threshold=2)) for _ in fleets]
    early = per_target[0].for_target("a.example")
    for fleet, scoped in zip(fleets, per_target, strict=True):
        fleet.attach(scoped)
        fleet.attach(scoped)  # twice: nothing more
    assert fleets[0].statistics().targets == 1
    circuits = [scoped.for_target("a.example") for scoped in per_target]
    assert circuits[0] is early
    assert per_target[2].for_target("b.example").state == "closed"
    for breaker in circuits[:2]:
        for _ in range(2):
            breaker.allow_request()
            breaker.record_failure()
    for _ in range(2):
        for fleet in fleets:
            fleet.sync()
    assert [b.state for b in circuits] == ["open"] * 4
    assert per_target[2].for_target("b.example").state == "closed"  # another target's circuit


def test_attach_refuses_what_it_cannot_share(redis_server: RedisServer) -> None:
    with (
        RedisFleet(redis_server.url, namespace="x", start=False) as fleet,
        pytest.raises(TypeError, match="RetryBudget, CircuitBreaker, AdaptiveThrottle"),
    ):
        fleet.attach(object())


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("namespace", ""),
        ("sync_interval", "1ms"),
        ("quorum", 0),
        ("max_lease", 0),
        ("url", "http://x"),
    ],
)
def test_settings_are_checked(field: str, value: object) -> None:
    settings: dict[str, object] = {"namespace": "shop", field: value}
    url = settings.pop("url", "redis://127.0.0.1:1/0")
    with pytest.raises(ConfigError, match=field):
        RedisFleet(url, start=False, **settings)  # type: ignore[arg-type]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork only")
def test_a_forked_child_is_a_new_member(redis_server: RedisServer) -> None:
    with RedisFleet(redis_server.url, namespace="fork", start=False) as fleet:
        budget = RetryBudget()  # the fleet holds what it shares weakly: its user keeps it
        fleet.attach(budget, target="db")
        assert fleet.sync()
        parent = fleet.member
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child reports through the pipe
            ok = fleet.member != parent and fleet.sync()
            os.write(write, f"{int(ok)} {fleet.statistics().members}".encode())
            os._exit(0)
        os.close(write)
        report = os.read(read, 64).decode().split()
        os.waitpid(pid, 0)
        os.close(read)
        assert report[0] == "1"
        assert int(report[1]) == 2  # the parent and the child


def test_scripts_lost_by_the_store_are_loaded_again(redis_server: RedisServer) -> None:
    with RedisFleet(redis_server.url, namespace="flush", start=False) as fleet:
        budget = RetryBudget()
        fleet.attach(budget)
        assert fleet.sync()
        redis_server.client().script_flush()
        assert fleet.sync()
        assert fleet.statistics().syncs == 2


@pytest.mark.anyio
async def test_async_with_stops_the_synchroniser(redis_server: RedisServer) -> None:
    async with RedisFleet(redis_server.url, namespace="aio", sync_interval="50ms") as fleet:
        throttle = AdaptiveThrottle(name="api")
        fleet.attach(throttle)
    assert fleet.statistics().degraded
    assert "degraded" in repr(fleet)
