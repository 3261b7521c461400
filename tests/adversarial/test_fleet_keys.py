"""Fleet keys say whose state they hold, and never collide (issue 28, fleet).

* One target's retries are paid by that target: two Retriers for unrelated dependencies on one
  fleet must not share one bucket, or a dead dependency's retries are funded by a healthy one's
  successes.
* Keys are injective: ``shop`` + ``eu:payments`` and ``shop:eu`` + ``payments`` are two
  fleets' two targets, and breakers ``api{v1}`` and ``api(v1)`` two circuits.
"""

from __future__ import annotations

import pytest

from retrymw import CircuitBreaker, Retrier, RetryBudget, RetryPolicy
from retrymw.fleet import RedisFleet
from retrymw.testing import FakeClock
from tests.fleet.conftest import RedisServer, redis_server

__all__ = ["redis_server"]

ROUNDS = 200


def _healthy() -> str:
    return "ok"


def _dead() -> None:
    raise ConnectionError("down")


def test_two_retriers_for_unrelated_dependencies_keep_their_own_budgets(
    redis_server: RedisServer,
) -> None:
    """A dead dependency's retries are not funded by a healthy one's successes (was 2.95x)."""
    with RedisFleet(redis_server.url, namespace="owners", start=False) as fleet:
        policy = RetryPolicy(retry_on=ConnectionError, attempts=3)
        healthy = Retrier(policy, clock=FakeClock(), instruments=(), fleet=fleet)
        dead = Retrier(policy, clock=FakeClock(), instruments=(), fleet=fleet)
        attempts = 0

        def counted() -> None:
            nonlocal attempts
            attempts += 1
            _dead()

        assert fleet.sync()
        for _ in range(ROUNDS):
            for _ in range(5):
                assert healthy.call_sync(_healthy) == "ok"
            with pytest.raises(ConnectionError):
                dead.call_sync(counted)
            assert fleet.sync()
        amplification = attempts / ROUNDS
        # Its own bucket: the floor once (a fresh budget's 10 tokens), then nothing.
        assert amplification <= 1.1, amplification


def test_named_policies_with_their_own_budgets_share_nothing(redis_server: RedisServer) -> None:
    """Two retriers' budgets (policies ``payments`` and ``search``) are two fleet buckets."""
    with RedisFleet(redis_server.url, namespace="owners", start=False) as fleet:
        budgets = [RetryBudget(), RetryBudget()]
        for name, budget in zip(("payments", "search"), budgets, strict=True):
            Retrier(RetryPolicy(name=name), budget=budget, instruments=(), fleet=fleet)
        assert fleet.sync()
        for _ in range(1000):
            budgets[0].record_success()
        assert fleet.sync()
        spent = 0
        for _ in range(10):
            spent += sum(budgets[1].try_acquire() for _ in range(100))
            assert fleet.sync()
        assert spent <= 10 + 1, spent  # the search budget's own floor, not payments' 100


def _circuit_shared(server: RedisServer, first: tuple[str, str], second: tuple[str, str]) -> bool:
    """Whether a quorum tripping ``first`` (namespace, breaker) opens ``second``'s circuit."""
    fleets = [
        RedisFleet(server.url, namespace=namespace, start=False)
        for namespace, _ in (first, first, second, second)
    ]
    try:
        breakers = []
        for fleet, (_, name) in zip(fleets, (first, first, second, second), strict=True):
            breaker = CircuitBreaker(name=name, failure_threshold=2)
            fleet.attach(breaker)
            breakers.append(breaker)
        for fleet in fleets:
            assert fleet.sync()
        for breaker in breakers[:2]:
            for _ in range(2):
                assert breaker.allow_request()
                breaker.record_failure()
        for _ in range(2):
            for fleet in fleets:
                assert fleet.sync()
        assert fleets[0].statistics().open_circuits == 1  # the first circuit did open
        return breakers[2].state != "closed" or breakers[3].state != "closed"
    finally:
        for fleet in fleets:
            fleet.close()


def test_namespace_and_target_never_run_into_each_other(redis_server: RedisServer) -> None:
    """``shop`` + ``eu:payments`` and ``shop:eu`` + ``payments`` are two circuits."""
    assert not _circuit_shared(redis_server, ("shop", "eu:payments"), ("shop:eu", "payments"))


def test_braces_in_a_name_are_not_parentheses(redis_server: RedisServer) -> None:
    """Breakers ``api{v1}`` and ``api(v1)`` are two circuits."""
    assert not _circuit_shared(redis_server, ("shop", "api{v1}"), ("shop", "api(v1)"))


def test_budgets_with_colliding_names_stay_apart(redis_server: RedisServer) -> None:
    """One budget's successes never fund the other's retries across the ``:`` seam."""
    with (
        RedisFleet(redis_server.url, namespace="shop", start=False) as first,
        RedisFleet(redis_server.url, namespace="shop:eu", start=False) as second,
    ):
        earner, spender = RetryBudget(), RetryBudget()
        first.attach(earner, target="eu:payments")
        second.attach(spender, target="payments")
        assert first.sync()
        assert second.sync()
        for _ in range(1000):
            earner.record_success()
        assert first.sync()
        spent = 0
        for _ in range(10):
            spent += sum(spender.try_acquire() for _ in range(100))
            assert second.sync()
        assert spent <= 10 + 1, spent
