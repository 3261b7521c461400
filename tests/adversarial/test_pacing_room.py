"""A pacer's slot must leave the attempt room to run before the deadline (issue #32).

Under saturation a slot granted just before the deadline left its attempt almost no time: the
wait was spent, the slot was used up, and the attempt ended as an `AttemptTimeoutError`. A slot
is now reserved only if it leaves the attempt its per-attempt ``timeout``, or, without one, a
stated share of what the deadline leaves (`retrymw._engine.run.ATTEMPT_ROOM_SHARE`); else the
call fails at once with `PacedError`, and nothing is reserved.
"""

from __future__ import annotations

import pytest

from retrymw import PacedError, Pacer, Retrier, RetryPolicy
from retrymw.testing import FakeClock


async def _ok() -> str:
    return "ok"


@pytest.mark.anyio
async def test_a_slot_that_leaves_the_attempt_no_time_is_refused_at_once() -> None:
    clock = FakeClock()
    pacer = Pacer("1/s", clock=clock)
    retrier = Retrier(RetryPolicy(deadline=1.05), pacer=pacer, clock=clock, instruments=())
    assert await retrier.call(_ok) == "ok"
    # The next slot is 1 s away: it would leave the attempt 0.05 s of the 1.05 s deadline.
    with pytest.raises(PacedError) as paced:
        await retrier.call(_ok)
    assert paced.value.wait == pytest.approx(1.0)
    assert clock.sleeps == []  # never waited for a slot the attempt could not use
    assert pacer.statistics().sends == 1  # nothing was reserved: the slot stays free
    assert pacer.statistics().refused == 1
    assert "needs" in str(paced.value)  # the message says why a slot within it was refused


@pytest.mark.anyio
async def test_a_slot_that_leaves_the_per_attempt_timeout_is_granted() -> None:
    clock = FakeClock()
    pacer = Pacer("1/s", clock=clock)
    policy = RetryPolicy(deadline=10.0, timeout=2.0)
    retrier = Retrier(policy, pacer=pacer, clock=clock, instruments=())
    for _ in range(8):  # other sends booked the next 8 s: the next slot is 8 s away
        pacer.reserve(clock.now())
    assert await retrier.call(_ok) == "ok"  # 8 s + the 2 s timeout fit in 10 s
    assert clock.sleeps == [pytest.approx(8.0)]


@pytest.mark.anyio
async def test_a_slot_that_cuts_into_the_per_attempt_timeout_is_refused() -> None:
    clock = FakeClock()
    pacer = Pacer("1/s", clock=clock)
    policy = RetryPolicy(deadline=10.0, timeout=2.0)
    retrier = Retrier(policy, pacer=pacer, clock=clock, instruments=())
    for _ in range(9):  # the next slot is 9 s away: 1 s left of a 2 s attempt timeout
        pacer.reserve(clock.now())
    with pytest.raises(PacedError):
        await retrier.call(_ok)
    assert clock.sleeps == []


@pytest.mark.anyio
async def test_without_a_timeout_the_attempt_keeps_its_share_of_the_deadline() -> None:
    clock = FakeClock()
    pacer = Pacer("1/s", clock=clock)
    retrier = Retrier(RetryPolicy(deadline=4.0), pacer=pacer, clock=clock, instruments=())
    for _ in range(3):  # 3 s away: 1 s of 4 s left, a quarter of what the deadline leaves
        pacer.reserve(clock.now())
    assert await retrier.call(_ok) == "ok"
    assert clock.sleeps == [pytest.approx(3.0)]
    for _ in range(3):  # the next slot is 4 s away now: past what the share allows
        pacer.reserve(clock.now())
    with pytest.raises(PacedError):
        await retrier.call(_ok)
