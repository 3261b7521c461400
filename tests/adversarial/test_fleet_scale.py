"""A sync step fits its interval: one batched round trip whatever the number of targets.

1 024 targets x 3 kinds (PerTarget's default cap) used to cost one script call each, 3 072
commands a step (0.60-0.73 s against a 0.25 s interval). The suite checks the counts (store
commands per step, steps completed, no failure), not the wall clock: the timings are
``make bench``'s (benchmarks/cases_fleet.py).
"""

from __future__ import annotations

from typing import Any

from retrymw import AdaptiveThrottle, CircuitBreaker, PerTarget, RetryBudget
from retrymw.fleet import RedisFleet
from tests.fleet.conftest import RedisServer, redis_server
from tests.fleet.faults import proxy
from tests.resp_server import DEFAULT, Command

__all__ = ["redis_server"]

TARGETS, STEPS = 1024, 5


def test_a_step_is_at_most_three_store_commands_at_1024_targets(
    redis_server: RedisServer,
) -> None:
    """Every target busy between steps: each step is still one round trip of <= 3 commands."""
    with proxy(redis_server, lambda command: DEFAULT) as front:
        fleet = RedisFleet(front.url, namespace="scale", timeout="5s", start=False)
        try:
            scoped: list[PerTarget[Any]] = [
                PerTarget(RetryBudget()),
                PerTarget(CircuitBreaker(name="api")),
                PerTarget(AdaptiveThrottle(name="api")),
            ]
            for per_target in scoped:
                fleet.attach(per_target)
            hosts = [f"host-{index}.example" for index in range(TARGETS)]
            assert fleet.statistics().targets == 0
            per_step = []
            for step in range(STEPS):
                for host in hosts:  # one call to every host since the last step
                    budget, breaker, throttle = (p.for_target(host) for p in scoped)
                    assert breaker.allow_request()
                    assert throttle.allow_request()
                    breaker.record_success()
                    throttle.record_success()
                    budget.record_success()
                    if step % 2:
                        budget.try_acquire()
                before = _commands(front.commands)
                assert fleet.sync()
                per_step.append(_commands(front.commands) - before)
            assert fleet.statistics().targets == 3 * TARGETS
            assert fleet.statistics().syncs == STEPS
            assert fleet.statistics().sync_failures == 0
            assert max(per_step) <= 3, per_step
        finally:
            fleet.close()


def _commands(commands: list[Command]) -> int:
    """Store commands the fleet sent (the connection handshake aside)."""
    return sum(1 for command in commands if command.name not in ("HELLO", "CLIENT"))
