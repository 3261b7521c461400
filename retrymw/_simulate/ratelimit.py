"""The rate-limited server scenario: many clients against a server enforcing a limit.

The server is a token bucket (``limit`` requests/s, ``burst`` at once) answering like OpenAI's
API: every answer carries ``x-ratelimit-limit-requests`` (per minute), ``-remaining-`` and
``-reset-requests``, and a refused attempt gets 429 with ``Retry-After`` (whole seconds). The
clients are open-loop arrival streams of one process, all through one real `Retrier` (the HTTP
transports' default policy and budget) and, when asked, one real `Pacer` (as a transport's
per-host pacer is shared by its callers), on the simulator's virtual clock. The answers reach
the engine through a small front door (`_Door`) that reads them with the transports' own
header readers, so the pacer learns from the headers and the retries honour ``Retry-After``.

The calls carry no deadline: an attempt bounded by one runs under ``anyio.fail_after``, which
needs a real event loop, and the simulator steps the coroutines itself. A saturated pacer's
queue therefore shows as waits that grow, and the report says so.

.. versionadded:: 0.5
"""

from __future__ import annotations

import dataclasses
import heapq
import math
import random
import statistics
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from .._core.errors import ConfigError
from .._core.events import AttemptFinished, Outcome
from .._core.instruments import Instrument
from .._core.policy import RetryPolicy
from .._engine.call import Call
from .._engine.retrier import Retrier
from .._http.hints import read_hints
from .._http.ratelimits import MINUTE, read_rate_limits
from .._http.rules import http_policy
from .._protect.budget import RetryBudget
from .._protect.pacer import Pacer
from .clock import SimClock, slept_for

__all__ = [
    "PACING_SETUPS",
    "RateLimitResult",
    "RateLimitScenario",
    "compare_pacing",
    "simulate_rate_limit",
]

#: The ways to pace the scenario's clients: the `Pacer` arguments, ``None`` for no pacer.
PACING_SETUPS: Mapping[str, Mapping[str, Any] | None] = MappingProxyType(
    {
        "no pacing": None,
        "Pacer() learned": {},
        "Pacer(rate=limit, burst)": {"known": True},
    }
)


@dataclass(frozen=True, slots=True)
class RateLimitScenario:
    """One run against a rate-limited server. Times are virtual seconds from 0.

    Args:
        name: a label for the table.
        limit: requests per second the server allows.
        burst: requests the server allows at once (its bucket's size).
        clients: arrival streams of one process, sharing its retrier and pacer.
        rate: calls per second each client offers (open loop, phases staggered).
        duration: arrivals stop here (late calls still finish).
        settle: the figures count the attempts from here on (a learned limit's first
            seconds are its learning).
        latency: virtual duration of every attempt.
        pacer: `Pacer` arguments (``{}``: ``Pacer()``, learning the limit; ``{"known":
            True}``: ``Pacer(rate=limit, burst=burst)``); ``None``: no pacer.
    """

    name: str = "rate-limited"
    limit: float = 50.0
    burst: int = 10
    clients: int = 4
    rate: float = 30.0
    duration: float = 15.0
    settle: float = 2.0
    latency: float = 0.02
    pacer: Mapping[str, Any] | None = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name, ok, example in (
            ("limit", self.limit > 0, "50"),
            ("burst", self.burst >= 1, "10"),
            ("clients", self.clients >= 1, "4"),
            ("rate", self.rate > 0, "30"),
            ("duration", self.duration > 0, "15"),
            ("settle", 0 <= self.settle < self.duration, "2"),
            ("latency", self.latency >= 0, "0.02"),
        ):
            if not ok:
                raise ConfigError(name, getattr(self, name), "is out of range", example)


@dataclass(frozen=True, slots=True)
class RateLimitResult:
    """What one rate-limited run produced, counted from ``settle`` to ``duration``.

    Attributes:
        scenario: the scenario that ran.
        offered: calls per second offered (all clients).
        attempts: attempts the server judged.
        throttled: those it refused with 429.
        throttled_share: ``throttled / attempts``.
        served: attempts served per second.
        calls: calls that arrived (the whole run).
        succeeded: those that ended with a 200.
        wait_p50: the median time an attempt waited for its pacer's slot (0 without a pacer).
        wait_p99: the 99th percentile of those waits.
        learned: the requests limit the pacer learned from the headers (per second), or
            ``None``.
    """

    scenario: RateLimitScenario
    offered: float
    attempts: int
    throttled: int
    throttled_share: float
    served: float
    calls: int
    succeeded: int
    wait_p50: float
    wait_p99: float
    learned: float | None


class _Answer:
    """A simulated response: its status and headers (lower-case names)."""

    __slots__ = ("headers", "status")

    def __init__(self, status: int, headers: dict[str, str]) -> None:
        self.status = status
        self.headers = headers


class _Server:
    """A token bucket answering like OpenAI's API (see the module's docstring)."""

    def __init__(self, limit: float, burst: int) -> None:
        self.rate, self.capacity = limit, float(burst)
        self.level, self.at = float(burst), 0.0

    def judge(self, now: float) -> _Answer:
        self.level = min(self.capacity, self.level + (now - self.at) * self.rate)
        self.at = now
        served = self.level >= 1.0
        if served:
            self.level -= 1.0
        refilled_in = (self.capacity - self.level) / self.rate
        headers = {
            "x-ratelimit-limit-requests": str(round(self.rate * MINUTE)),
            "x-ratelimit-remaining-requests": str(math.floor(self.level)),
            "x-ratelimit-reset-requests": f"{refilled_in * 1000:.0f}ms",
        }
        if served:
            return _Answer(200, headers)
        headers["retry-after"] = str(math.ceil((1.0 - self.level) / self.rate))
        return _Answer(429, headers)


class _Door:
    """The simulated front door (an `AttemptAdapter` and `PacerTeacher`): what the HTTP
    transports do with an answer, on `_Answer`s, with their own header readers."""

    __slots__ = ("clock",)

    def __init__(self, clock: SimClock) -> None:
        self.clock = clock

    def settles(self, result: object) -> bool:
        return isinstance(result, _Answer) and result.status < 400

    def before_attempt(self, attempt: int) -> None:
        """Nothing to mark on a simulated request."""

    def outcome(
        self, attempt: int, elapsed: float, result: object, error: Exception | None
    ) -> Outcome:
        if error is not None or not isinstance(result, _Answer):
            return Outcome(attempt=attempt, elapsed=elapsed, exception=error, result=result)
        hints = read_hints(result.headers, result.status, self.clock.wall())
        return Outcome(
            attempt=attempt,
            elapsed=elapsed,
            result=result,
            status=result.status,
            retry_after=hints.delay,
            retry_after_header=hints.header,
        )

    async def discard(self, result: object, delay: float, deadline_left: float | None) -> None:
        """A simulated answer has no body to close."""

    def discard_sync(self, result: object, delay: float, deadline_left: float | None) -> None:
        """A simulated answer has no body to close."""

    def returned(self, result: object, deadline_left: float | None) -> object:
        return result

    def teach(self, pacer: Pacer, result: object, now: float) -> None:
        if isinstance(result, _Answer):
            limits = read_rate_limits(result.headers.items(), self.clock.wall())
            pacer.learn(now, status=result.status, limits=limits)


class _Waits(Instrument):
    """Collects each attempt's wait for its slot (``AttemptFinished.paced_for``)."""

    def __init__(self, clock: SimClock, settle: float) -> None:
        self.clock, self.settle = clock, settle
        self.waits: list[float] = []

    def attempt_finished(self, event: AttemptFinished, /) -> None:
        if event.paced_for is not None and self.clock.now() >= self.settle:
            self.waits.append(event.paced_for)


def simulate_rate_limit(scenario: RateLimitScenario) -> RateLimitResult:
    """Run ``scenario`` in virtual time (deterministic: the jitter's generator is seeded).

    .. versionadded:: 0.5
    """
    clock = SimClock()
    server = _Server(scenario.limit, scenario.burst)
    pacer = None
    if scenario.pacer is not None:
        options = dict(scenario.pacer)
        if options.pop("known", False):
            options = {"rate": scenario.limit, "burst": scenario.burst, **options}
        pacer = Pacer(**options, name="simulated", clock=clock)
    waits = _Waits(clock, scenario.settle)
    retrier = Retrier(
        _POLICY,
        budget=RetryBudget(clock=clock),
        pacer=pacer,
        instruments=[waits],
        clock=clock,
        rng=random.Random(0),
    )
    door = _Door(clock)
    call = Call(operation="POST", policy=_POLICY, target="server", adapter=door)
    judged: list[tuple[float, int]] = []

    async def send() -> _Answer:
        answer = server.judge(clock.now())
        judged.append((clock.now(), answer.status))
        if scenario.latency:
            await clock.sleep(scenario.latency)
        return answer

    queue: list[tuple[float, int, Any]] = []
    sequence = 0
    spacing = 1.0 / scenario.rate
    for index in range(scenario.clients):
        for k in range(math.ceil(scenario.duration * scenario.rate)):
            at = spacing * (k + index / scenario.clients)
            if at < scenario.duration:
                sequence += 1
                queue.append((at, sequence, None))
    heapq.heapify(queue)
    calls = succeeded = 0
    while queue:
        at, _, item = heapq.heappop(queue)
        clock.jump(at)
        if item is None:
            calls += 1
            item = retrier.run_async(send, (), {}, call)
        try:
            request = item.send(None)
        except StopIteration as stop:
            succeeded += isinstance(stop.value, _Answer) and stop.value.status < 400
        else:
            sequence += 1
            heapq.heappush(queue, (at + slept_for(request), sequence, item))
    counted = [status for when, status in judged if scenario.settle <= when < scenario.duration]
    throttled = sum(status == 429 for status in counted)
    span = scenario.duration - scenario.settle
    ordered = sorted(waits.waits) or [0.0]
    learned = None if pacer is None else pacer.statistics().limit
    return RateLimitResult(
        scenario=scenario,
        offered=scenario.rate * scenario.clients,
        attempts=len(counted),
        throttled=throttled,
        throttled_share=throttled / len(counted) if counted else 0.0,
        served=(len(counted) - throttled) / span,
        calls=calls,
        succeeded=succeeded,
        wait_p50=statistics.median(ordered),
        wait_p99=ordered[min(len(ordered) - 1, math.ceil(0.99 * len(ordered)) - 1)],
        learned=learned,
    )


def compare_pacing(scenario: RateLimitScenario | None = None) -> list[RateLimitResult]:
    """Run ``scenario`` (the defaults: 4 clients x 30 calls/s against 50/s, burst 10, for
    15 s) with each of the `PACING_SETUPS`, each run named after its setup.

    .. versionadded:: 0.5
    """
    base = RateLimitScenario() if scenario is None else scenario
    return [
        simulate_rate_limit(dataclasses.replace(base, name=name, pacer=options))
        for name, options in PACING_SETUPS.items()
    ]


#: The HTTP transports' default policy (4 attempts, 2 s exponential backoff, full jitter,
#: 429 retried after the server's ``Retry-After``).
_POLICY: RetryPolicy = http_policy()
