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

The dependency fails in three ways, alone or together: independently with ``failure``; as one
backend of ``backends`` behind a round-robin balancer (only the first backend fails, so one dead
backend of two fails every other attempt); and from load, when it has a ``capacity`` and the
calls arrive ``surge`` times faster during the fault (see `Scenario`).

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
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from .._core.errors import CircuitOpenError, LoadShedError
from .._core.events import BreakerStateChanged
from .._engine.retrier import Retrier
from .._protect.breaker import CircuitBreaker
from .._protect.budget import RetryBudget
from .._protect.throttle import AdaptiveThrottle
from .clock import SimClock, slept_for
from .fleet import FleetSettings, Synchroniser
from .scenarios import (
    FRONTIER_SETUPS,
    SETUPS,
    Scenario,
    SimulatedFailure,
    frontier_scenarios,
    situations,
    with_setup,
)

__all__ = [
    "Comparison",
    "FrontierPoint",
    "Scenario",
    "SimulatedFailure",
    "SimulationResult",
    "compare",
    "frontier",
    "simulate",
]


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
        goodput: calls arriving during the fault that succeeded, per second of the fault.
        herd_factor: the busiest 100 ms of attempts from the fault's start on, divided by the
            mean attempts per 100 ms before it (every slot of the warm-up; 0 when nothing ran
            before the fault). Clients in step put a whole round of first attempts into one
            slot: at 1 call/s that alone is 10x, whatever the retry policy.
        retry_herd_factor: the same for the retries alone (attempts after a call's first): the
            busiest 100 ms of retries from the fault's start on over the mean attempts per
            100 ms before it. It is what the retry policy adds to the clients' own pattern.
        recovered_in: seconds from the fault's end until every later second of arrivals
            succeeds at >= 0.99 (the end of the last second below it; 0 when none was);
            ``None`` when no call arrived after the fault.
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
    goodput: float = 0.0
    herd_factor: float = 0.0
    recovered_in: float | None = None
    retry_herd_factor: float = 0.0


_SYNC = object()  # marks a synchroniser's step in the event queue


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
        if budget is not None and run.fleet is not None:  # a fleet: the budget is shared
            run.synchronisers.append(Synchroniser(budget, index, run.fleet))
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
        self.clock = SimClock()
        self.rng = random.Random(f"{seed}:failures")
        self.queue: list[tuple[float, int, Any, Any]] = []
        self.warmup, self.fault_end = scenario.warmup, scenario.fault_end
        self.failure, self.latency = scenario.failure, scenario.latency
        self.sequence = 0
        self.buckets: dict[int, int] = {}
        self.retry_buckets: dict[int, int] = {}  # the retries among them
        self.calls = self.attempts = self.successes = self.rejections = self.shed = 0
        self.late_calls = self.late_shed = 0
        self.arrived_in_fault = self.after_fault = 0
        self.first_trip: tuple[float, int] | None = None
        self.last_failure_after_fault: float | None = None
        self.after: dict[int, list[int]] = {}  # second after the fault -> [calls, successes]
        self.backends, self.turn = scenario.backends, 0
        self.capacity, self.cost = scenario.capacity, scenario.rejection_cost
        self.fleet = None if scenario.fleet is None else FleetSettings(scenario.fleet)
        self.synchronisers: list[Synchroniser] = []
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
        for sync in self.synchronisers:  # independent processes: phases spread over one interval
            interval = sync.settings.interval
            self.schedule(interval * (1 + sync.index / len(self.synchronisers)), sync, _SYNC)
        queue, clock, end, attempt = self.queue, self.clock, scenario.duration, self.attempt
        surge, warmup, fault_end = scenario.surge, self.warmup, self.fault_end
        # The hot loop of the whole simulator: an item is a client whose next call arrives
        # (call is None), or a suspended call's coroutine (call is its arrival and tally).
        while queue:
            at, _, item, call = heapq.heappop(queue)
            clock.jump(at)
            if call is _SYNC:  # a fleet member's synchroniser step, every sync_interval
                item.step(at)
                if at + item.settings.interval < end:
                    self.schedule(at + item.settings.interval, item, _SYNC)
                continue
            if call is None:
                # Arrival k is at phase + k * spacing: no rounding drift over long runs.
                item.arrivals += 1
                following = item.phase + item.arrivals * spacing
                if surge != 1.0:  # a surge changes the spacing: step from this arrival
                    following = at + spacing / (surge if warmup <= at < fault_end else 1.0)
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
                self.schedule(at + slept_for(request), item, call)

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
            second = self.after.setdefault(int(arrival - self.fault_end), [0, 0])
            second[0] += 1
            second[1] += succeeded
            if not succeeded:
                self.last_failure_after_fault = arrival

    async def attempt(self, tally: list[int]) -> None:
        tally[0] += 1
        now = self.clock.now()
        bucket = int(now * 10.0)
        self.buckets[bucket] = self.buckets.get(bucket, 0) + 1
        if tally[0] > 1:
            self.retry_buckets[bucket] = self.retry_buckets.get(bucket, 0) + 1
        backend = self.turn
        if self.backends > 1:
            self.turn = (backend + 1) % self.backends
        failed = (
            self.warmup <= now < self.fault_end
            and backend == 0
            and self.rng.random() < self.failure
        )
        status = self.scenario.failure_status
        if self.capacity is not None and not failed:
            failed = self.rng.random() >= self.served(bucket)
            status = self.scenario.refusal_status
        if self.latency:
            await self.clock.sleep(self.latency)
        if failed:
            raise SimulatedFailure("simulated failure", status)

    def served(self, bucket: int) -> float:
        """The share of attempts a capacity-limited dependency serves (see `Scenario`)."""
        offered = sum(self.buckets.get(slot, 0) for slot in range(bucket - 10, bucket))
        capacity = self.capacity or math.inf
        if offered <= capacity:
            return 1.0
        return max(0.0, (capacity / offered - self.cost) / (1.0 - self.cost))

    def herd_factors(self) -> tuple[float, float]:
        """The herd factors of all attempts and of retries (see `SimulationResult`)."""
        start = int(self.warmup * 10.0)
        before = sum(count for slot, count in self.buckets.items() if slot < start)
        if not before:
            return 0.0, 0.0
        mean = before / start  # every 100 ms slot of the warm-up, busy or not
        after = max((count for slot, count in self.buckets.items() if slot >= start), default=0)
        retries = self.retry_buckets.items()
        after_retries = max((count for slot, count in retries if slot >= start), default=0)
        return after / mean, after_retries / mean

    def recovered_in(self) -> float | None:
        if not self.after:
            return None
        late = [second for second, (calls, ok) in self.after.items() if ok < 0.99 * calls]
        return float(max(late) + 1) if late else 0.0

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
        span = min(self.fault_end, scenario.duration) - scenario.warmup
        herd, retry_herd = self.herd_factors()
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
            goodput=self.successes / span if span > 0 else 0.0,
            herd_factor=herd,
            recovered_in=None if scenario.fault is None else self.recovered_in(),
            retry_herd_factor=retry_herd,
        )


def simulate(scenario: Scenario, *, seed: int = 0) -> SimulationResult:
    """Run ``scenario`` in virtual time; the same seed always gives the same result.

    .. versionadded:: 0.1
    """
    run = _Run(scenario, seed)
    run.run()
    return run.result()


@dataclass(frozen=True, slots=True)
class Comparison:
    """One situation run with one setup (see `compare`)."""

    situation: str
    setup: str
    result: SimulationResult


def compare(
    scenarios: Iterable[Scenario] | None = None,
    setups: Iterable[str] | None = None,
    *,
    seed: int = 0,
) -> list[Comparison]:
    """Run every scenario (the `situations` by default) with every setup (all of `SETUPS`).

    .. versionadded:: 0.2
    """
    chosen = list(SETUPS if setups is None else setups)
    return [
        Comparison(scenario.name, setup, simulate(with_setup(scenario, setup), seed=seed))
        for scenario in (situations() if scenarios is None else scenarios)
        for setup in chosen
    ]


@dataclass(frozen=True, slots=True)
class FrontierPoint:
    """What one setup rescues of a blip and costs in an outage (see `frontier`).

    Attributes:
        setup: the setup's name (`FRONTIER_SETUPS`).
        blip_success: success of the calls arriving during a 3 s blip at 50 calls/s.
        outage_10s: amplification of a 10 s outage at 50 calls/s.
        clients_10s: amplification of a 10 s outage for 1 000 clients x 1 call/s.
        outage_120s: amplification of a 120 s outage at 100 calls/s.
        recovered_in: seconds after the 10 s outage at 50 calls/s until every second of
            calls succeeds at >= 0.99.
    """

    setup: str
    blip_success: float
    outage_10s: float
    clients_10s: float
    outage_120s: float
    recovered_in: float


def frontier(setups: Iterable[str] | None = None, *, seed: int = 0) -> list[FrontierPoint]:
    """Run the `frontier_scenarios` with each setup (all of `FRONTIER_SETUPS` by default).

    .. versionadded:: 0.4
    """
    points = []
    for name in FRONTIER_SETUPS if setups is None else setups:
        blip, outage, clients, long = (
            simulate(with_setup(scenario, FRONTIER_SETUPS[name]), seed=seed)
            for scenario in frontier_scenarios()
        )
        points.append(
            FrontierPoint(
                setup=name,
                blip_success=blip.success_rate,
                outage_10s=outage.amplification,
                clients_10s=clients.amplification,
                outage_120s=long.amplification,
                recovered_in=outage.recovered_in or 0.0,
            )
        )
    return points
