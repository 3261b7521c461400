"""A pacer's promises while sends wait for their slots: a stall of the process, and a hold heard
meanwhile.

A send's slot is booked when its attempt is due and sent when the slot comes. Before that was
confirmed (`Pacer.confirm`), two promises broke for sends already waiting:

- "at most ``burst`` at once": a process that stalls (a GC pause, a container's CPU quota)
  wakes with every slot that came due meanwhile, and sent them all at once, over the server's
  burst;
- "a throttle's ``Retry-After`` holds every send": a send waiting for its slot went at its slot,
  inside the hold.

Real `Retrier`s and pacers on a virtual clock, stepped by a small discrete-event loop as the
simulator steps them (`retrymw._simulate`): a stall is the loop resuming every call whose wake-up
came due meanwhile at once, late. The sync door's tests hear the hold inside the clock's sleep.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from retrymw import PacedError, Pacer, Retrier, RetryPolicy
from retrymw._engine.run import SHORTEST_PACED_WAIT
from retrymw._protect.pacer import BETA_KNOWN, RateLimits
from retrymw._simulate.clock import SimClock, slept_for
from retrymw.testing import FakeClock

RATE = 50.0  # sends per second: one slot every 20 ms
EPSILON = 1e-9


@dataclass
class Stepper:
    """Steps coroutines on a `SimClock` in virtual time; a stall resumes late wake-ups at once."""

    clock: SimClock
    stalls: list[tuple[float, float]] = field(default_factory=list)  # (from, to)
    queue: list[tuple[float, int, Coroutine[Any, Any, Any]]] = field(default_factory=list)
    order: Iterator[int] = field(default_factory=itertools.count)
    errors: list[BaseException] = field(default_factory=list)

    def start(self, at: float, coroutine: Coroutine[Any, Any, Any]) -> None:
        heapq.heappush(self.queue, (at, next(self.order), coroutine))

    def run(self, until: float, every: Callable[[float], None] | None = None) -> None:
        """Resume every coroutine in wake-up order until ``until``; ``every`` sees the time of
        each step first."""
        while self.queue and self.queue[0][0] <= until:
            at, _, coroutine = heapq.heappop(self.queue)
            for stalled_from, stalled_to in self.stalls:
                if stalled_from <= at < stalled_to:
                    at = stalled_to  # the process was stopped: it wakes late
            self.clock.jump(at)
            if every is not None:
                every(self.clock.now())
            try:
                awaited = coroutine.send(None)
            except StopIteration:
                continue
            except Exception as error:  # the call failed: kept for the test to read
                self.errors.append(error)
                continue
            heapq.heappush(self.queue, (at + slept_for(awaited), next(self.order), coroutine))


def sends_of(retrier: Retrier, stepper: Stepper, calls: int, at: float = 0.0) -> list[float]:
    """Start ``calls`` calls at ``at``; return the list their attempts append their times to."""
    sent: list[float] = []

    async def attempt() -> None:
        sent.append(stepper.clock.now())

    for _ in range(calls):
        stepper.start(at, retrier.call(attempt))
    return sent


def over_burst(sent: list[float], rate: float, burst: int) -> list[float]:
    """The sends a GCRA of ``rate`` and ``burst`` would refuse: none, if they keep to both."""
    tat, tolerance, refused = -1e18, (burst - 1) / rate, []
    for at in sorted(sent):
        if at < tat - tolerance - EPSILON:
            refused.append(at)
        tat = max(at, tat) + 1.0 / rate
    return refused


@pytest.mark.parametrize("burst", [1, 5])
def test_a_stalled_process_spreads_the_slots_that_came_due(burst: int) -> None:
    clock = SimClock()
    retrier = Retrier(pacer=Pacer(RATE, burst, clock=clock), clock=clock, instruments=())
    stepper = Stepper(clock, stalls=[(0.1, 0.5)])
    sent = sends_of(retrier, stepper, 40)
    stepper.run(until=10.0)
    assert not stepper.errors
    assert len(sent) == 40
    # Old code: the 20 slots due in the stall (0.1 to 0.48 s) all went at 0.5 s.
    assert over_burst(sent, RATE, burst) == []
    assert sum(1 for at in sent if at == pytest.approx(0.5)) <= burst
    # Spread from the stall's end at the rate: nothing is lost but the stall itself.
    assert max(sent) <= (40 - burst) / RATE + 0.4 + EPSILON


def test_calls_that_start_after_a_stall_queue_behind_the_sends_it_bunched() -> None:
    clock = SimClock()
    pacer = Pacer(RATE, clock=clock)
    retrier = Retrier(pacer=pacer, clock=clock, instruments=())
    stepper = Stepper(clock, stalls=[(0.1, 0.5)])
    sent = sends_of(retrier, stepper, 20)
    late = sends_of(retrier, stepper, 10, at=0.5)
    stepper.run(until=10.0)
    assert not stepper.errors
    assert over_burst(sent + late, RATE, 1) == []


def test_a_retry_after_heard_while_sends_wait_holds_them() -> None:
    clock = SimClock()
    pacer = Pacer(RATE, clock=clock)
    retrier = Retrier(pacer=pacer, clock=clock, instruments=())
    stepper = Stepper(clock)
    sent = sends_of(retrier, stepper, 10)
    # Another call's answer, at 50 ms: a 429 asking for one second.
    stepper.run(until=0.05)
    clock.jump(0.05)
    pacer.learn(clock.now(), status=429, limits=RateLimits(retry_after=1.0))
    stepper.run(until=10.0)
    assert not stepper.errors
    assert len(sent) == 10
    # Old code: the sends booked for 60, 80, ... 180 ms went inside the hold.
    inside = [at for at in sent if 0.05 < at < 1.05 - EPSILON]
    assert inside == []
    assert over_burst(sent, RATE, 1) == []


class HoldHeardInSleep(FakeClock):
    """A clock on which another thread's answer (a 429 asking for a second) arrives while the
    first sleep for a slot lasts."""

    pacer: Pacer | None = None

    def sleep_sync(self, seconds: float) -> None:
        super().sleep_sync(seconds)
        if self.pacer is not None and len(self.sleeps) == 1:
            self.pacer.learn(self.now(), status=429, limits=RateLimits(retry_after=1.0))


def test_the_sync_door_has_its_slot_confirmed_too() -> None:
    clock = HoldHeardInSleep()
    pacer = Pacer(RATE, clock=clock)
    clock.pacer = pacer
    retrier = Retrier(pacer=pacer, clock=clock, instruments=())
    sent: list[float] = []
    for _ in range(2):
        retrier.call_sync(lambda: sent.append(clock.now()))
    # The second call's slot came at 20 ms, inside the hold heard meanwhile: it waits it out.
    assert clock.sleeps == [pytest.approx(1 / RATE), pytest.approx(1.0)]
    assert sent == [0.0, pytest.approx(1 / RATE + 1.0)]


def test_a_hold_past_the_deadline_fails_the_waiting_call_as_paced() -> None:
    clock = HoldHeardInSleep()
    pacer = Pacer(RATE, clock=clock)
    clock.pacer = pacer
    retrier = Retrier(RetryPolicy(deadline=0.5), pacer=pacer, clock=clock, instruments=())
    sent: list[float] = []
    retrier.call_sync(lambda: sent.append(clock.now()))
    # Its slot came at 20 ms, inside a one-second hold heard meanwhile: refused when due,
    # never sent inside the hold nor late past the deadline.
    with pytest.raises(PacedError):
        retrier.call_sync(lambda: sent.append(clock.now()))
    assert sent == [0.0]
    assert clock.sleeps == [pytest.approx(1 / RATE)]


# -- generated stalls and holds ------------------------------------------------------------------


@st.composite
def schedules(draw: st.DrawFn) -> tuple[int, list[tuple[float, int]], list[tuple[float, float]]]:
    burst = draw(st.integers(1, 6))
    arrivals = draw(
        st.lists(st.tuples(st.floats(0.0, 2.0), st.integers(1, 12)), min_size=1, max_size=12)
    )
    stalls = draw(
        st.lists(st.tuples(st.floats(0.0, 2.0), st.floats(0.001, 1.0)), max_size=4).map(
            lambda spans: [(start, start + length) for start, length in spans]
        )
    )
    return burst, arrivals, stalls


@settings(max_examples=1000, deadline=None)
@given(schedules(), st.lists(st.tuples(st.floats(0.0, 3.0), st.floats(0.01, 2.0)), max_size=3))
def test_sends_keep_to_the_rate_the_burst_and_every_hold(
    schedule: tuple[int, list[tuple[float, int]], list[tuple[float, float]]],
    holds: list[tuple[float, float]],
) -> None:
    """Whatever stalls the process and whatever holds it hears, the sends it makes keep to a
    GCRA of the rate and the burst, and none goes inside a hold heard before it went."""
    burst, arrivals, stalls = schedule
    clock = SimClock()
    pacer = Pacer(RATE, burst, clock=clock)
    retrier = Retrier(pacer=pacer, clock=clock, instruments=())
    stepper = Stepper(clock, stalls=sorted(stalls))
    calls = [sends_of(retrier, stepper, count, at) for at, count in arrivals]
    heard: list[tuple[float, float]] = []  # (when heard, held until)
    pending = sorted(holds)

    def hear(now: float) -> None:
        while pending and pending[0][0] <= now:
            _, length = pending.pop(0)
            # An exhausted counter: a hold that leaves the rate as it is (a 429 also cuts it).
            pacer.learn(now, limits=RateLimits(requests_remaining=0, requests_reset=length))
            heard.append((now, now + length))

    stepper.run(until=1e6, every=hear)
    sent = [at for times in calls for at in times]
    assert not stepper.errors
    assert len(sent) == sum(count for _, count in arrivals)
    # A send re-spaced after a stall that wakes less than an interval late again goes
    # (`Booking`): it may go closer to the next than the rate, one send over the burst at most.
    assert over_burst(sent, RATE, burst + 1) == []
    # A wait shorter than a sleep is not slept: a send may go that much early, into a hold too.
    for heard_at, held_until in heard:
        assert not [at for at in sent if heard_at < at < held_until - SHORTEST_PACED_WAIT]


# -- a throttle after a stall ----------------------------------------------------------------------


@pytest.mark.parametrize("stall", [0.3, 1.0, 2.0])
def test_a_throttle_after_a_stall_cuts_from_the_rate_not_the_stalled_count(stall: float) -> None:
    """A loaded run drew it: the client stalled for about a second, a 429 came soon after, and
    the pacer cut its rate to 0.9 of what it had measured in the stall (23/s of a known 50/s),
    then took seconds to climb back. A pacer that holds sends back sends at its rate: the
    count in a bucket a stall emptied says nothing about what the server saw."""
    clock = FakeClock()
    pacer = Pacer(RATE, burst=10, clock=clock)
    at = 0.0
    while at < 5.0:  # sending at the rate
        pacer.reserve(at)
        at += 1 / RATE
    at += stall  # nothing sent: the process was stopped
    for _ in range(20):  # the calls that came meanwhile: the pacer holds them back
        pacer.reserve(at)
    pacer.learn(at + 0.05, status=429)
    assert pacer.statistics().measured_rate < RATE  # the stall shows in the measured rate
    # Old code, after a 1 s or a 2 s stall: 21.0 and 16.2 requests/s.
    assert pacer.statistics().rate == pytest.approx(RATE * BETA_KNOWN)


def test_a_throttle_at_a_low_demand_still_cuts_from_what_was_sent() -> None:
    clock = FakeClock()
    pacer = Pacer(RATE, clock=clock)
    at = 0.0
    while at < 5.0:  # 5 sends a second, far below the rate: none waits
        pacer.reserve(at)
        at += 0.2
    pacer.learn(at - 0.1, status=429)
    assert pacer.statistics().rate == pytest.approx(5.0 * BETA_KNOWN, rel=0.05)
