"""A deterministic, virtual-time retry-storm simulator that runs retrymw's real objects.

Every simulated client is a real `Retrier` with a real `RetryBudget` and, when asked, a real
`CircuitBreaker`, all reading one virtual clock. Calls arrive open-loop at a fixed rate; each
attempt fails with the scenario's probability at that moment. Nothing is re-implemented and
nothing really sleeps: the clock's ``sleep`` suspends the call's coroutine, and a discrete-event
loop resumes it when virtual time reaches its wake-up. (``Retrier.call_sync`` would run each
call's whole retry sequence on the shared clock before the next call could start, so calls
could not overlap; stepping the async driver's coroutines interleaves them exactly.)

Amplification and success rate count the calls that *arrive during the fault* (with all their
attempts), so a healthy warm-up or recovery period does not dilute them.

    >>> from retrymw.simulate import Scenario, simulate
    >>> simulate(Scenario("outage", rate=10, duration=20, warmup=10)).amplification <= 1.1
    True

.. versionadded:: 0.1
"""

from __future__ import annotations

import heapq
import math
import random
import statistics
from collections.abc import Generator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from .._core.errors import CircuitOpenError, ConfigError, LoadShedError
from .._core.events import BreakerStateChanged
from .._core.policy import RetryPolicy
from .._core.retrier import Retrier
from .._protect.breaker import CircuitBreaker
from .._protect.budget import RetryBudget
from .._protect.throttle import AdaptiveThrottle
from ..testing import FakeClock

__all__ = ["Scenario", "SimulatedFailure", "SimulationResult", "simulate", "suite"]

_DEFAULTS: Mapping[str, Any] = MappingProxyType({})
_EXAMPLE = {
    **dict.fromkeys(("rate", "duration", "warmup", "fault"), "10"),
    "failure": "0.1",
    "clients": "1",
    "latency": "0.02",
}


class SimulatedFailure(Exception):
    """The failure a simulated dependency raises."""


@dataclass(frozen=True, slots=True)
class Scenario:
    """One simulated run. Times are virtual seconds from 0.

    Args:
        name: a label for the table.
        rate: calls per second per client, arriving open-loop at a fixed spacing.
        duration: arrivals stop here (retries of late calls still finish).
        failure: probability that an attempt fails during the fault (1.0 is a total outage).
        warmup: the fault starts here; before it the dependency is healthy.
        fault: how long the fault lasts; ``None`` until the end of the run.
        clients: independent clients, each with its own retrier, budget and breaker.
        synchronized: all clients call at the same instants (else their phases are staggered).
        latency: virtual duration of every attempt.
        policy: the retry policy; by default ``RetryPolicy()`` retrying `SimulatedFailure`.
        budget: `RetryBudget` arguments (defaults when empty); ``None`` turns the budget off.
        breaker: `CircuitBreaker` arguments (defaults when empty); ``None`` for no breaker.
        throttle: `AdaptiveThrottle` arguments (defaults when empty); ``None`` for none.
    """

    name: str
    rate: float
    duration: float
    failure: float = 1.0
    warmup: float = 0.0
    fault: float | None = None
    clients: int = 1
    synchronized: bool = False
    latency: float = 0.0
    policy: RetryPolicy = field(default_factory=lambda: RetryPolicy(retry_on=SimulatedFailure))
    budget: Mapping[str, Any] | None = field(default_factory=lambda: _DEFAULTS)
    breaker: Mapping[str, Any] | None = None
    throttle: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        for name, ok in (
            ("rate", self.rate > 0),
            ("duration", self.duration > 0),
            ("failure", 0.0 <= self.failure <= 1.0),
            ("warmup", self.warmup >= 0),
            ("fault", self.fault is None or self.fault >= 0),
            ("clients", self.clients >= 1),
            ("latency", self.latency >= 0),
        ):
            if not ok:
                raise ConfigError(name, getattr(self, name), "is out of range", _EXAMPLE[name])

    @property
    def fault_end(self) -> float:
        """When the fault ends (``inf`` if it lasts to the end)."""
        return math.inf if self.fault is None else self.warmup + self.fault


@dataclass(frozen=True, slots=True)
class SimulationResult:
    """What one scenario produced (all clients together).

    Attributes:
        scenario: the scenario that ran.
        calls: calls that arrived during the fault.
        attempts: executions of those calls, first attempts included.
        amplification: ``attempts / calls``.
        success_rate: share of those calls that succeeded.
        peak_attempts_per_100ms: the busiest 100 ms of the whole run, all calls, all clients.
        retries_admitted: retries the budgets admitted (whole run).
        retries_denied: retries the budgets denied as ``throttled`` (whole run).
        breaker_rejections: calls refused with `CircuitOpenError` before any attempt.
        breaker_trips: closed→open and half_open→open transitions, all clients.
        breaker_open_fraction: mean share of ``[0, duration]`` the breakers were not closed.
        time_to_open: seconds from the fault's start to the first trip, or ``None``.
        calls_to_open: calls that arrived from the fault's start up to that trip.
        time_to_recover: seconds from the fault's end to the last failed call after it (0 when
            every later call succeeded); ``None`` when no call arrived after the fault.
        shed: calls the throttles refused with `LoadShedError` before any attempt.
        shed_from_10s: share of the calls arriving from 10 s into the fault that the throttles
            refused before any attempt.
    """

    scenario: Scenario
    calls: int
    attempts: int
    amplification: float
    success_rate: float
    peak_attempts_per_100ms: int
    retries_admitted: int
    retries_denied: int
    breaker_rejections: int
    breaker_trips: int
    breaker_open_fraction: float
    time_to_open: float | None
    calls_to_open: int | None
    time_to_recover: float | None
    shed: int = 0
    shed_from_10s: float = 0.0


class _Suspend:
    """What the simulated clock's ``sleep`` awaits: the event loop resumes the call later."""

    __slots__ = ("seconds",)

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def __await__(self) -> Generator[_Suspend, None, None]:
        yield self


class _SimClock(FakeClock):
    """A `FakeClock` whose async ``sleep`` hands control back to the event loop."""

    async def sleep(self, seconds: float) -> None:
        """Suspend the calling coroutine for ``seconds`` of virtual time."""
        await _Suspend(seconds)

    def sleep_sync(self, seconds: float) -> None:
        """Blocking sleeps cannot be interleaved: the simulator only drives async calls."""
        raise RuntimeError("the simulator drives Retrier.call, not call_sync")

    def jump(self, to: float) -> None:
        """Move to ``to`` (never backwards); only the single-threaded event loop calls this."""
        self._now = max(self._now, to)


class _Client:
    """One simulated client: a real Retrier and the record of its breaker's transitions."""

    def __init__(self, run: _Run, index: int) -> None:
        scenario = run.scenario
        self.transitions: list[BreakerStateChanged] = []
        self.phase = 0.0
        self.arrivals = 0
        breaker = None
        if scenario.breaker is not None:
            breaker = CircuitBreaker(
                clock=run.clock,
                rng=random.Random(f"{run.seed}:breaker:{index}"),
                **scenario.breaker,
            )
            breaker.add_listener(self.transitions.append)
            breaker.add_listener(run.on_transition)
        budget = (
            None if scenario.budget is None else RetryBudget(clock=run.clock, **scenario.budget)
        )
        self.budget = budget
        throttle = None
        if scenario.throttle is not None:
            throttle = AdaptiveThrottle(
                clock=run.clock,
                rng=random.Random(f"{run.seed}:throttle:{index}"),
                **scenario.throttle,
            )
        self.retrier = Retrier(
            scenario.policy,
            breaker=breaker,
            budget=budget,
            throttle=throttle,
            instruments=(),
            clock=run.clock,
            rng=random.Random(f"{run.seed}:jitter:{index}"),
        )

    def open_seconds(self, end: float) -> float:
        """Time in ``[0, end]`` that this client's breaker was not closed."""
        total, since = 0.0, None
        for event in self.transitions:
            if event.previous_state == "closed":
                since = event.time
            elif event.state == "closed" and since is not None:
                total += min(event.time, end) - min(since, end)
                since = None
        return total + (max(0.0, end - since) if since is not None else 0.0)


class _Run:
    """The discrete-event loop and the tallies of one scenario."""

    def __init__(self, scenario: Scenario, seed: int) -> None:
        self.scenario = scenario
        self.seed = seed
        self.clock = _SimClock()
        self.rng = random.Random(f"{seed}:failures")
        self.queue: list[tuple[float, int, Any, Any]] = []
        self.warmup, self.fault_end = scenario.warmup, scenario.fault_end
        self.failure, self.latency = scenario.failure, scenario.latency
        self.sequence = 0
        self.buckets: dict[int, int] = {}
        self.calls = self.attempts = self.successes = self.rejections = self.shed = 0
        self.late_calls = self.late_shed = 0
        self.arrived_in_fault = self.after_fault = 0
        self.first_trip: tuple[float, int] | None = None
        self.last_failure_after_fault: float | None = None
        self.clients = [_Client(self, index) for index in range(scenario.clients)]

    def on_transition(self, event: BreakerStateChanged) -> None:
        if event.state == "open" and self.first_trip is None and event.time >= self.scenario.warmup:
            self.first_trip = (event.time, self.arrived_in_fault)

    def schedule(self, at: float, item: Any, call: Any = None) -> None:
        self.sequence += 1
        heapq.heappush(self.queue, (at, self.sequence, item, call))

    def run(self) -> None:
        scenario = self.scenario
        spacing = 1.0 / scenario.rate
        for index, client in enumerate(self.clients):
            client.phase = 0.0 if scenario.synchronized else spacing * index / scenario.clients
            self.schedule(client.phase, client)
        queue, clock, end, attempt = self.queue, self.clock, scenario.duration, self.attempt
        # The hot loop of the whole simulator: an item is a client whose next call arrives
        # (call is None), or a suspended call's coroutine (call is its arrival and tally).
        while queue:
            at, _, item, call = heapq.heappop(queue)
            clock.jump(at)
            if call is None:
                # Arrival k is at phase + k * spacing: no rounding drift over long runs.
                item.arrivals += 1
                following = item.phase + item.arrivals * spacing
                if following < end:
                    self.schedule(following, item)
                tally = [0]
                call = (at, tally)
                self.arrived_in_fault += self.warmup <= at < self.fault_end
                item = item.retrier.call(attempt, tally)
            try:
                request = item.send(None)
            except StopIteration:
                self.finish(call, succeeded=True)
            except CircuitOpenError:
                self.rejections += 1
                self.finish(call, succeeded=False)
            except LoadShedError:
                self.shed += 1
                self.finish(call, succeeded=False, shed=call[1][0] == 0)
            except SimulatedFailure:
                self.finish(call, succeeded=False)
            else:
                if not isinstance(request, _Suspend):
                    raise TypeError(f"simulate: the retrier awaited {request!r}, not the clock")
                self.schedule(at + request.seconds, item, call)

    def finish(self, call: tuple[float, list[int]], *, succeeded: bool, shed: bool = False) -> None:
        arrival, tally = call
        if self.warmup <= arrival < self.fault_end:
            if arrival >= self.warmup + 10.0:
                self.late_calls += 1
                self.late_shed += shed
            self.calls += 1
            self.attempts += tally[0]
            self.successes += succeeded
        elif arrival >= self.fault_end:
            self.after_fault += 1
            if not succeeded:
                self.last_failure_after_fault = arrival

    async def attempt(self, tally: list[int]) -> None:
        tally[0] += 1
        now = self.clock.now()
        bucket = int(now * 10.0)
        self.buckets[bucket] = self.buckets.get(bucket, 0) + 1
        failed = self.warmup <= now < self.fault_end and self.rng.random() < self.failure
        if self.latency:
            await self.clock.sleep(self.latency)
        if failed:
            raise SimulatedFailure("simulated failure")

    def result(self) -> SimulationResult:
        scenario = self.scenario
        budgets = [c.budget.statistics() for c in self.clients if c.budget is not None]
        trips = sum(event.state == "open" for c in self.clients for event in c.transitions)
        open_seconds = statistics.fmean(c.open_seconds(scenario.duration) for c in self.clients)
        recover = None
        if scenario.fault is not None and self.after_fault:
            last = self.last_failure_after_fault
            recover = 0.0 if last is None else last - scenario.fault_end
        first = self.first_trip
        return SimulationResult(
            scenario=scenario,
            calls=self.calls,
            attempts=self.attempts,
            amplification=self.attempts / self.calls if self.calls else 0.0,
            success_rate=self.successes / self.calls if self.calls else 0.0,
            peak_attempts_per_100ms=max(self.buckets.values(), default=0),
            retries_admitted=sum(stats.acquired for stats in budgets),
            retries_denied=sum(stats.denied for stats in budgets),
            breaker_rejections=self.rejections,
            breaker_trips=trips,
            breaker_open_fraction=open_seconds / scenario.duration,
            time_to_open=None if first is None else first[0] - scenario.warmup,
            calls_to_open=None if first is None else first[1],
            time_to_recover=recover,
            shed=self.shed,
            shed_from_10s=self.late_shed / self.late_calls if self.late_calls else 0.0,
        )


def simulate(scenario: Scenario, *, seed: int = 0) -> SimulationResult:
    """Run ``scenario`` in virtual time; the same seed always gives the same result.

    .. versionadded:: 0.1
    """
    run = _Run(scenario, seed)
    run.run()
    return run.result()


def suite(name: str | None = None) -> list[Scenario]:
    """Return the standard scenarios (all defaults), or one group of them.

    Groups: ``outage`` (a total outage after a 30 s warm-up, with calls arriving for 120 s at
    2, 10 and 100 calls/s and 60 s at 1000 calls/s; it outlasts their retries), ``brownout``
    (i.i.d. failures p = 0.05 to 0.5 at 100 calls/s for 10 minutes, with a default breaker),
    ``breaker`` (a 30 s outage at 100 calls/s with a default breaker and 20 ms attempts) and
    ``synchronized`` (50 clients calling in step through a 30 s outage, without and with full
    jitter).
    """
    breaker: Mapping[str, Any] = {}
    groups = {
        "outage": [
            Scenario(name=f"outage {rate}/s", rate=rate, duration=30 + span, warmup=30)
            for rate, span in ((2, 120), (10, 120), (100, 120), (1000, 60))
        ],
        "brownout": [
            Scenario(name=f"brownout p={p}", rate=100, duration=600, failure=p, breaker=breaker)
            for p in (0.05, 0.1, 0.2, 0.3, 0.5)
        ],
        "breaker": [
            Scenario(
                name="outage+breaker 100/s",
                rate=100,
                duration=70,
                warmup=10,
                fault=30,
                latency=0.02,
                breaker=breaker,
            )
        ],
        "synchronized": [
            Scenario(
                name=f"50 clients in step{label}",
                rate=2,
                duration=70,
                warmup=10,
                fault=30,
                clients=50,
                synchronized=True,
                breaker=breaker,
                policy=RetryPolicy(retry_on=SimulatedFailure, jitter=jitter),
            )
            for label, jitter in (("", False), (", full jitter", "full"))
        ],
    }
    if name is None:
        return [scenario for group in groups.values() for scenario in group]
    if name not in groups:
        raise ValueError(f"unknown scenario group {name!r}; known: {', '.join(groups)}")
    return groups[name]
