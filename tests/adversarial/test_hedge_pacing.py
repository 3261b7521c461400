"""A hedge's copy is a send: the pacer must have a slot for it now, and hears its answer.

Regressions: copies went out past the pacer's limit, a copy's 429 replaced by another copy's
answer never reached the pacer, and a copy a shedding throttle refused had booked a slot first.
"""

from __future__ import annotations

import random

import anyio
import pytest

from retrymw import AdaptiveThrottle, Hedge, Pacer, Retrier, RetryPolicy
from retrymw.testing import FakeClock


def paced_retrier(hedge: Hedge, pacer: Pacer) -> Retrier:
    return Retrier(
        RetryPolicy(attempts=3, retry_on=[ConnectionError]),
        hedge=hedge,
        pacer=pacer,
        clock=pacer.clock,
        instruments=(),
    )


@pytest.mark.anyio
async def test_a_pacer_without_a_slot_now_sends_no_hedge() -> None:
    """A copy is a send like any other: a pacer at its limit keeps it from going (it would
    have to wait for a slot, and a copy exists to save time)."""
    calls = 0

    async def fn() -> str:
        nonlocal calls
        calls += 1
        await anyio.sleep(0.05)
        return "only copy"

    clock = FakeClock()
    pacer = Pacer(rate="1/s", clock=clock)  # the attempt takes the only slot of this second
    hedge = Hedge("1ms")
    assert await paced_retrier(hedge, pacer).call(fn) == "only copy"
    assert calls == 1
    (stats,) = hedge.statistics().targets.values()
    assert (stats.hedges, stats.denied) == (0, 1)
    assert pacer.statistics().sends == 1


class AdmitsFirst(random.Random):
    """Draws that admit whatever the throttle's shedding probability (the attempt goes)."""

    def random(self) -> float:
        return 0.999


@pytest.mark.anyio
async def test_a_copy_a_shedding_throttle_refuses_books_no_pacer_slot() -> None:
    """The throttle sheds (its overload refusals outnumber its accepts): it refuses every copy,
    and the pacer, asked after it, books no slot for a copy that is never sent."""

    async def fn() -> str:
        await anyio.sleep(0.05)
        return "only copy"

    clock = FakeClock()
    throttle = AdaptiveThrottle(min_requests=1, clock=clock, rng=AdmitsFirst())
    for _ in range(20):
        assert throttle.allow_request()
        throttle.record_failure(overloaded=True)
    assert throttle.reject_probability() > 0.0
    pacer = Pacer(rate="100/s", burst=10, clock=clock)  # room for the copy
    hedge = Hedge("1ms")
    retrier = Retrier(
        RetryPolicy(attempts=3, retry_on=[ConnectionError]),
        hedge=hedge,
        pacer=pacer,
        throttle=throttle,
        clock=clock,
        instruments=(),
    )
    assert await retrier.call(fn) == "only copy"
    (stats,) = hedge.statistics().targets.values()
    assert (stats.hedges, stats.denied) == (0, 1)
    assert pacer.statistics().sends == 1  # the attempt's slot only


@pytest.mark.anyio
async def test_a_hedge_takes_a_pacer_slot_and_its_429_teaches_the_pacer() -> None:
    class Throttled(ConnectionError):  # retryable under this policy
        status_code = 429

    hedge_started, first_failing = anyio.Event(), anyio.Event()
    calls = 0

    async def fn() -> str:
        nonlocal calls
        calls += 1
        if calls == 1:
            await hedge_started.wait()
            # The race holds this 429 before the hedge's task runs again: it is the failure
            # the hedge's answer replaces, whatever the load on the machine.
            first_failing.set()
            raise Throttled
        hedge_started.set()
        await first_failing.wait()
        return "hedge"

    clock = FakeClock()
    pacer = Pacer(rate="100/s", burst=2, clock=clock)  # room for the attempt and one copy
    hedge = Hedge("1ms")
    assert await paced_retrier(hedge, pacer).call(fn) == "hedge"
    assert calls == 2
    stats = pacer.statistics()
    assert stats.sends == 2  # the copy was paced as a send
    assert stats.throttles == 1  # the replaced copy's 429 was heard
