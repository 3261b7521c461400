"""`Pacer`: a client-side send-rate limiter that learns the server's limit from its answers.

Two lanes, requests and tokens (the server's cost units), each a GCRA (virtual scheduling):
a send reserves the earliest slot both lanes allow, and a lane's slots are spread evenly at
its rate, with at most ``burst`` sends at once after a quiet spell, so that nothing bursts at
a window's reset. A send's slot is ``max(now, tat - tolerance, hold)`` and it moves the lane's
theoretical arrival time ``tat`` on by ``cost / rate``. A slot that had to be waited for is
confirmed when it comes due, against the sends made and what was heard meanwhile (`confirm`):
a process that stalled does not send every slot that came due at once.

A lane's rate is the one given (``Pacer(rate="50/s")``), or the one learned: from rate-limit
headers (`retrymw._http.ratelimits`; a learned limit is paced at `HEADROOM` of it, since the
server's window and ours never line up to the millisecond), and from throttling answers
(429, 503, 529), which cut the requests rate to `BETA` of what was sent (`BETA_KNOWN` while
a limit is known; never below `FLOOR`); the rate then grows back along a cubic (`CUBIC_C`),
as in the AWS SDKs' adaptive mode, capped at twice the measured send rate while no limit is
known, and at the limit when one is. An exhausted counter (``remaining`` 0) holds its lane
until one unit is back (or its reset), and a throttle's ``Retry-After`` holds the requests
lane. ``Pacer()`` paces nothing until the first signal.

The share of the limit this process may use is one attribute, `Pacer.share` (1.0 alone; a
fleet leases a part of the limit to each member by setting it), and a fleet hands every member
the lowest limit any member learned (`adopt_limit`): one member's answers pace them all.

Decisions are pure and synchronous: time is passed in (`reserve`, `learn`); the waiting is the
caller's (`Retrier` awaits the clock's sleep). Thread- and task-safe: a short lock, never held
while waiting. Fork-safe (`_core.forks`).

.. versionadded:: 0.4
"""

from __future__ import annotations

import math
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final, Literal, NamedTuple, final

from .._core.clock import SYSTEM_CLOCK, Clock
from .._core.errors import ConfigError
from .._core.events import OVERLOAD_STATUSES
from .._core.forks import after_fork_in_child
from .settings import shown

__all__ = [
    "BETA",
    "BETA_KNOWN",
    "CUBIC_C",
    "FLOOR",
    "HEADROOM",
    "STALLED_AFTER",
    "Booking",
    "Pacer",
    "PacerStatistics",
    "RateLimits",
    "Slot",
    "lower_limit",
    "parse_rate",
]

#: The least requests rate a throttled pacer keeps, per second (AWS: 0.5).
FLOOR: Final = 0.5
#: A throttling answer cuts the requests rate to this fraction of what was sent (AWS: 0.7).
BETA: Final = 0.7
#: The same while a limit is known (given, or read from headers): a throttle then means an
#: overshoot of a few sends (jitter, a burst of retries), not a limit far below, and repeated
#: throttles still compound the cut (0.9 every `REACT` seconds halves it in 3.5 s).
BETA_KNOWN: Final = 0.9
#: The cubic's scale, in requests/s per s³ (AWS: 0.4): how fast a cut rate grows back.
CUBIC_C: Final = 0.4
#: A limit learned from headers is paced at this fraction of it: evenly spaced sends leave the
#: server's burst for the jitter of the network and the event loop, and 2% more lost to
#: headroom is 2% of the limit never used (at 0.95 a loaded machine served 45.0 of 50/s).
HEADROOM: Final = 0.98
#: How long one throttle counts for: the answers to what was sent before a cut arrive after
#: it, and one overshoot must cut the rate once, not once per answer.
REACT: Final = 0.5
#: A send that wakes this long after its confirmed time, and an interval, was stalled (a GC
#: pause, a CPU quota), not woken late by a busy event loop, whose timers fire a few ms late:
#: it is confirmed again (`Booking`). Confirming those again too would cost each its place,
#: and nothing would be sent while every wake-up is late.
STALLED_AFTER: Final = 0.01
#: The longest a hold (a reset, a ``Retry-After``) lasts, in seconds.
MAX_HOLD: Final = 600.0
_MEASURE_BUCKET = 0.5  # seconds: the send rate is measured over buckets this long (AWS)
_SMOOTHING = 0.8  # the weight of the newest bucket in the measured rate (AWS)
_RATE = re.compile(
    r"\s*([0-9]+(?:\.[0-9]+)?)\s*/\s*(s|sec|second|m|min|minute|h|hour)\s*", re.IGNORECASE
)
_PER = {"s": 1.0, "sec": 1.0, "second": 1.0, "m": 60.0, "min": 60.0, "minute": 60.0}
_PER |= {"h": 3600.0, "hour": 3600.0}
_MAX_RATE = 1e9


@dataclass(frozen=True, slots=True)
class RateLimits:
    """What one answer says about the send rate its server allows (rates per second;
    ``None``: not said). Read from headers by `retrymw._http.ratelimits.read_rate_limits`.

    Attributes:
        requests: the requests limit, per second.
        requests_remaining: requests left in the server's current window.
        requests_reset: seconds until that window's counter is full again.
        tokens: the tokens limit, per second.
        tokens_remaining: tokens left in the server's current window.
        tokens_reset: seconds until that counter is full again.
        retry_after: seconds the server asks to wait (``Retry-After``).
    """

    requests: float | None = None
    requests_remaining: float | None = None
    requests_reset: float | None = None
    tokens: float | None = None
    tokens_remaining: float | None = None
    tokens_reset: float | None = None
    retry_after: float | None = None


#: What an answer without any rate-limit header says.
NO_RATE_LIMITS: Final = RateLimits()


class Slot(NamedTuple):
    """A send's slot (`Pacer.reserve`), or what is left of its wait when it came due
    (`Pacer.confirm`).

    Attributes:
        wait: seconds from now until the send may go.
        granted: whether it was reserved (confirmed); ``False`` when it lies past the caller's
            limit (nothing was reserved then).
    """

    wait: float
    granted: bool


_NOW: Final = Slot(0.0, True)


@dataclass(frozen=True, slots=True)
class PacerStatistics:
    """A snapshot of a `Pacer`.

    Attributes:
        name: the pacer's name (a bounded telemetry label).
        rate: the requests rate sends are paced at now, per second; ``None``: not paced.
        limit: the requests limit learned from headers (per second, the whole limit, before
            `Pacer.share`), or ``None``.
        tokens_rate: the tokens rate sends are paced at now, per second, or ``None``.
        tokens_limit: the tokens limit learned from headers, per second, or ``None``.
        measured_rate: the smoothed rate of sends, per second.
        share: the share of the limits this pacer may use (`Pacer.share`).
        sends: sends reserved since creation.
        delayed: those of them that had to wait for their slot.
        refused: sends refused because their slot lay past the caller's limit.
        throttles: throttling answers (429, 503, 529) learned from.
        held_for: seconds until a hold (a reset, a ``Retry-After``) ends; 0 without one.
        fleet_limit: the requests limit a fleet handed over (`Pacer.adopt_limit`: the
            lowest any member learned, per second, the whole limit), or ``None``.
    """

    name: str
    rate: float | None
    limit: float | None
    tokens_rate: float | None
    tokens_limit: float | None
    measured_rate: float
    share: float
    sends: int
    delayed: int
    refused: int
    throttles: int
    held_for: float
    fleet_limit: float | None = None

    @property
    def paced_limit(self) -> float | None:
        """The requests limit sends are paced against (per second, the whole limit): the lower
        of `limit` and `fleet_limit`, ``None`` while neither is known."""
        return lower_limit(self.limit, self.fleet_limit)


def lower_limit(learned: float | None, fleet: float | None) -> float | None:
    """The limit that governs: the lower of the one learned and the fleet's (either may be
    ``None``: unknown)."""
    if fleet is not None and (learned is None or fleet < learned):
        return fleet
    return learned


def parse_rate(value: Any, field: str, example: str) -> float | None:
    """A rate per second from ``"50/s"``, ``"3000/min"``, ``"1/h"`` or a number per second.

    Raises:
        ConfigError: anything else, or a rate not in ``(0, 1e9]``; the message names ``field``.
    """
    if value is None:
        return None
    rate: float | None = None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if not isinstance(value, int) or value.bit_length() <= 64:
            rate = float(value)
    elif isinstance(value, str) and len(value) <= 64:
        match = _RATE.fullmatch(value)
        if match is not None:
            rate = float(match[1]) / _PER[match[2].lower()]
    if rate is None or not math.isfinite(rate) or not 0.0 < rate <= _MAX_RATE:
        raise ConfigError(
            field, shown(value), "must be a positive rate such as 50/s or 3000/min", example
        )
    return rate


class _Lane:
    """One lane's schedule (GCRA): ``tat`` for the slots reserved, ``sent_tat`` for the sends
    made, the tolerance of its burst, and its hold."""

    __slots__ = ("burst", "hold_until", "sent_tat", "tat")

    def __init__(self, burst: float) -> None:
        self.burst = burst  # in the lane's units: sends that may go at once
        self.tat = -math.inf
        self.sent_tat = -math.inf
        self.hold_until = -math.inf

    def earliest(self, now: float, rate: float | None) -> float:
        """The earliest time a send may be reserved."""
        return self._allowed(self.tat, now, rate)

    def due(self, now: float, rate: float | None) -> float:
        """The earliest time a send whose slot came due may go: spaced from the sends made."""
        return self._allowed(self.sent_tat, now, rate)

    def take(self, at: float, rate: float | None, cost: float) -> None:
        """Reserve ``cost`` at ``at`` (from `earliest`)."""
        if rate is not None:
            self.tat = (max(at, self.tat)) + cost / rate

    def send(self, at: float, rate: float | None) -> None:
        """One send goes at ``at`` (from `due`, or a slot reserved for now); the slots
        reserved from now on queue behind the sends made."""
        if rate is not None:
            self.sent_tat = max(at, self.sent_tat) + 1.0 / rate
            self.tat = max(self.tat, self.sent_tat)

    def _allowed(self, tat: float, now: float, rate: float | None) -> float:
        start = max(self.hold_until, now)
        if rate is None:
            return start
        allowed = tat - (self.burst - 1.0) / rate if self.burst >= 1.0 else tat
        return max(allowed, start)


@final
class Pacer:
    """Send at the rate the server allows: a rate given, or learned from its answers.

    docs/pacing.md has the rules and the recipes. `Retrier` and the transports reserve each
    attempt's slot (`reserve`), wait for it and have it confirmed (`confirm`), and tell the
    pacer every answer (`learn`).

    Args:
        rate: the requests limit, ``"50/s"``, ``"3000/min"`` or a number per second; ``None``
            (the default) learns it from the server's answers.
        burst: how many requests may go at once after a quiet spell (an integer >= 1; 1 by
            default: evenly spread).
        tokens: the tokens limit (the server's cost units), ``"10000/min"`` or a number per
            second; ``None`` learns it from the token headers.
        cost: a callable of the request (an ``httpx.Request`` on the transports; ``None`` for
            coroutines) returning its cost in tokens: estimated tokens for an LLM API. Without
            it the tokens lane only honours the server's holds.
        name: a bounded telemetry label; a transport's per-host pacers are
            ``"<name>:<host>"``.
        clock: where time is read; the system clock by default.

    Raises:
        ConfigError: a value is out of range; the message names the field.

    .. versionadded:: 0.4
    """

    __slots__ = (
        "__weakref__",
        "_clock",
        "_cut_at",
        "_delayed",
        "_fleet_limit",
        "_k",
        "_lock",
        "_measure_start",
        "_measured",
        "_measured_sends",
        "_rate",
        "_refused",
        "_requests",
        "_requests_limit",
        "_sends",
        "_throttles",
        "_token_rate",
        "_tokens",
        "_tokens_limit",
        "_w_max",
        "cost",
        "name",
        "share",
    )

    def __init__(
        self,
        rate: Any = None,
        burst: int | None = None,
        *,
        tokens: Any = None,
        cost: Callable[[Any], float] | None = None,
        name: str = "default",
        clock: Clock | None = None,
    ) -> None:
        if not isinstance(name, str) or not name:
            raise ConfigError("name", shown(name), "must be a non-empty string", '"openai"')
        self.name = name
        self._rate = parse_rate(rate, "rate", '"50/s"')
        self._token_rate = parse_rate(tokens, "tokens", '"10000/min"')
        if burst is None:
            burst = 1
        if isinstance(burst, bool) or not isinstance(burst, int) or not 1 <= burst <= 1_000_000:
            raise ConfigError("burst", shown(burst), "must be an integer in [1, 1000000]", "10")
        if cost is not None and not callable(cost):
            raise ConfigError(
                "cost", shown(cost), "must be a callable of the request, or None", "estimate"
            )
        self.cost = cost
        self._clock: Clock = clock if clock is not None else SYSTEM_CLOCK
        #: The share of the server's limits this pacer may use, in (0, 1]: 1.0 on its own.
        self.share = 1.0
        self._requests = _Lane(float(burst))
        self._tokens = _Lane(0.0)
        self._requests_limit: float | None = None  # learned, per second, the whole limit
        self._tokens_limit: float | None = None
        self._fleet_limit: float | None = None  # handed over by a fleet (`adopt_limit`)
        # The cubic after the last throttle: when it was, the rate it was cut from, and the
        # time the cubic takes to climb back to that rate.
        self._cut_at: float | None = None
        self._w_max = 0.0
        self._k = 0.0
        self._measured = 0.0
        self._measured_sends = 0
        self._measure_start = -math.inf
        self._sends = 0
        self._delayed = 0
        self._refused = 0
        self._throttles = 0
        self._lock = threading.Lock()
        after_fork_in_child(self)

    def _after_fork_in_child(self) -> None:
        self._lock = threading.Lock()

    @property
    def clock(self) -> Clock:
        """Where this pacer reads time."""
        return self._clock

    def clone(self, name: str) -> Pacer:
        """Return a fresh pacer with these settings, cost and clock, and nothing learned."""
        return Pacer(
            self._rate,
            int(self._requests.burst),
            tokens=self._token_rate,
            cost=self.cost,
            name=name,
            clock=self._clock,
        )

    # -- the retrier's interface ------------------------------------------------------------------

    def cost_of(self, request: object) -> float:
        """The tokens ``request`` costs by the ``cost`` callable (0 without one)."""
        cost = self.cost
        if cost is None:
            return 0.0
        value = cost(request)
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not math.isfinite(value)
            or value < 0
        ):
            raise ConfigError(
                "cost", shown(value), "must return a finite number >= 0 (tokens)", "120"
            )
        return float(value)

    def reserve(self, now: float, cost: float = 0.0, *, within: float | None = None) -> Slot:
        """Reserve the earliest slot for a send of ``cost`` tokens (and one request).

        Args:
            now: the current time (the clock's ``now()``).
            cost: the send's cost in tokens (`cost_of`).
            within: the longest the caller may wait (what its deadline leaves); a slot past it
                is not reserved, and `Slot.granted` is ``False``.

        Returns:
            The `Slot`: how long to wait before sending.
        """
        with self._lock:
            self._measure(now)
            if self._idle(now):
                self._count_send()
                return _NOW
            requests, tokens = self._requests_rate(now), self._tokens_rate()
            at = max(self._requests.earliest(now, requests), self._tokens.earliest(now, tokens))
            wait = at - now
            if within is not None and wait > within:
                self._refused += 1
                return Slot(wait, False)
            self._requests.take(at, requests, 1.0)
            self._tokens.take(at, tokens, cost)
            self._count_send()
            if wait > 0.0:
                self._delayed += 1
                return Slot(wait, True)
            self._requests.send(at, requests)
            return _NOW

    def confirm(self, now: float, *, within: float | None = None) -> Slot:
        """Confirm a slot that came due (one `reserve` gave a wait): the send goes now, or
        after the further wait returned.

        What the pacer heard while the send waited still holds it: a hold (a ``Retry-After``,
        an exhausted counter) and a cut rate. And sends are spaced as they are made, not only
        as they were reserved: a process that stalled (a GC pause, a CPU quota) wakes with
        every slot that came due meanwhile, and those would all go at once. At most ``burst``
        go at once; the rest follow at the rate, and the slots reserved later queue behind
        them. (The tokens lane keeps its reserved spacing: only its hold is checked again.)

        Args:
            now: the current time (the clock's ``now()``).
            within: the longest the caller may still wait (what its deadline leaves); past it
                nothing is confirmed, `Slot.granted` is ``False``, and the slot stays spent.

        Returns:
            The `Slot`: how much longer to wait before sending.
        """
        with self._lock:
            requests = self._requests_rate(now)
            at = max(self._requests.due(now, requests), self._tokens.hold_until)
            wait = at - now
            if within is not None and wait > within:
                self._refused += 1
                return Slot(wait, False)
            self._requests.send(at, requests)
            return Slot(wait, True) if wait > 0.0 else _NOW

    def send_at_once(self, now: float) -> bool:
        """Count a send that goes now if this pacer paces and holds nothing (no rate given or
        learned, no hold): ``True``. Otherwise reserve nothing and return ``False``: the
        caller reserves its slot (`reserve`).

        The engine's bare first attempt asks this: an idle pacer only needs to count the send
        and hear the answer, not the call's full path.
        """
        with self._lock:
            self._measure(now)
            if not self._idle(now):
                return False
            self._count_send()
            return True

    def holds(self, at: float) -> bool:
        """Whether a hold (a ``Retry-After``, an exhausted counter) holds sends at ``at``."""
        with self._lock:
            return self._held_until() > at

    def stalled(self, due: float, now: float) -> bool:
        """Whether a send booked to go at ``due`` that wakes at ``now`` was stalled: later
        than an interval at the requests rate, and than `STALLED_AFTER`."""
        with self._lock:
            rate = self._requests_rate(now)
        return rate is not None and now - due >= max(1.0 / rate, STALLED_AFTER)

    def learn(
        self, now: float, *, status: int | None = None, limits: RateLimits | None = None
    ) -> None:
        """Learn from one answer: its status and what its headers say (`RateLimits`).

        A throttling status (429, 503, 529) cuts the requests rate (once per `REACT` seconds)
        and holds the exhausted lane until its reset, else for ``Retry-After``. A limit in the
        headers becomes the lane's limit; a counter at 0 holds its lane until the reset.
        """
        throttled = status in OVERLOAD_STATUSES
        if not throttled and (limits is None or limits is NO_RATE_LIMITS):
            return
        with self._lock:
            held = False
            if limits is not None:
                if limits.requests is not None and limits.requests > 0.0:
                    self._requests_limit = limits.requests
                if limits.tokens is not None and limits.tokens > 0.0:
                    self._tokens_limit = limits.tokens
                held = _hold(
                    self._requests,
                    now,
                    limits.requests_remaining,
                    limits.requests_reset,
                    self._requests_limit,
                )
                held |= _hold(
                    self._tokens,
                    now,
                    limits.tokens_remaining,
                    limits.tokens_reset,
                    self._tokens_limit,
                )
            if not throttled:
                return
            self._throttles += 1
            if not held and limits is not None and limits.retry_after is not None:
                lane = self._requests
                lane.hold_until = max(lane.hold_until, now + min(limits.retry_after, MAX_HOLD))
            self._cut(now)

    def adopt_limit(self, limit: float | None) -> None:
        """Pace against ``limit`` (requests per second, the whole limit) too: the fleet's.

        The lowest of it and the limit this pacer learned itself governs (at `HEADROOM`, times
        `share`); ``None`` forgets it. The fleet's hook (`retrymw.fleet`): no I/O.
        """
        with self._lock:
            self._fleet_limit = limit if limit is not None and limit > 0.0 else None

    def statistics(self) -> PacerStatistics:
        """Return a frozen snapshot of the pacer."""
        with self._lock:
            now = self._clock.now()
            return PacerStatistics(
                name=self.name,
                rate=self._requests_rate(now),
                limit=self._requests_limit,
                tokens_rate=self._tokens_rate(),
                tokens_limit=self._tokens_limit,
                measured_rate=self._measured,
                share=self.share,
                sends=self._sends,
                delayed=self._delayed,
                refused=self._refused,
                throttles=self._throttles,
                held_for=max(0.0, self._held_until() - now),
                fleet_limit=self._fleet_limit,
            )

    def pacing(self) -> bool:
        """Whether sends are paced now (a rate known, or a hold): for eviction and gauges."""
        stats = self.statistics()
        return stats.rate is not None or stats.tokens_rate is not None or stats.held_for > 0.0

    def __repr__(self) -> str:
        stats = self.statistics()
        rate = "unpaced" if stats.rate is None else f"{stats.rate:.3g}/s"
        return f"<Pacer {self.name!r} {rate} sends={stats.sends} throttles={stats.throttles}>"

    # -- internals (the caller holds the lock) -----------------------------------------------------

    def _idle(self, now: float) -> bool:
        """Whether nothing paces sends now: no rate on either lane, no hold."""
        return (
            self._requests_rate(now) is None
            and self._tokens_rate() is None
            and self._held_until() <= now
        )

    def _held_until(self) -> float:
        """When the later of the two lanes' holds ends (``-inf``: never held)."""
        return max(self._requests.hold_until, self._tokens.hold_until)

    def _count_send(self) -> None:
        self._sends += 1
        self._measured_sends += 1

    def _ceiling(self) -> float | None:
        """The requests rate allowed by what is known: the rate given, the limit learned."""
        rate = self._rate
        limit = lower_limit(self._requests_limit, self._fleet_limit)
        if limit is not None:
            paced = limit * HEADROOM
            rate = paced if rate is None or paced < rate else rate
        return None if rate is None else rate * self.share

    def _requests_rate(self, now: float) -> float | None:
        """The requests rate now: the ceiling, or the cubic climbing back since a throttle."""
        ceiling = self._ceiling()
        cut_at = self._cut_at
        if cut_at is None:
            return ceiling
        since = now - cut_at if now > cut_at else 0.0
        climbed = CUBIC_C * (since - self._k) ** 3 + self._w_max
        if ceiling is None:
            measured = self._measured
            if measured > 0.0:
                climbed = min(climbed, 2.0 * measured)
            return max(FLOOR, climbed)
        if climbed >= ceiling:
            self._cut_at = None  # climbed back: the ceiling governs again
            return ceiling
        return max(FLOOR, climbed)

    def _tokens_rate(self) -> float | None:
        rate = self._token_rate
        limit = self._tokens_limit
        if limit is not None:
            paced = limit * HEADROOM
            rate = paced if rate is None or paced < rate else rate
        return None if rate is None else rate * self.share

    def _cut(self, now: float) -> None:
        """A throttle: cut the requests rate to `BETA` of what was sent, once per `REACT`."""
        if self._cut_at is not None and now - self._cut_at < REACT:
            return
        current = self._requests_rate(now)
        beta = BETA if self._ceiling() is None else BETA_KNOWN
        measured = self._measured
        if measured <= 0.0 and now > self._measure_start:
            # No bucket finished yet: what was sent since the first one began.
            measured = self._measured_sends / (now - self._measure_start)
        if current is None:
            sent = measured
        elif measured > 0.0 and self._requests.tat <= now:
            # Sends went as they came, below the rate: what was sent is what was measured.
            sent = min(current, measured) if current > measured * 2.0 else current
        else:
            # Sends were held back (the schedule runs past now): they went at the rate, even if
            # a stall of the process left a measuring bucket nearly empty.
            sent = current
        self._w_max = max(FLOOR / beta, sent)
        self._k = (self._w_max * (1.0 - beta) / CUBIC_C) ** (1.0 / 3.0)
        self._cut_at = now

    def _measure(self, now: float) -> None:
        """Fold the sends of each finished `_MEASURE_BUCKET` into the smoothed send rate."""
        start = self._measure_start
        if now - start < _MEASURE_BUCKET:
            return
        if start > -math.inf:
            sampled = self._measured_sends / (now - start)
            self._measured = sampled * _SMOOTHING + self._measured * (1.0 - _SMOOTHING)
        self._measured_sends = 0
        self._measure_start = now


class Booking:
    """One send's way to its slot, from its reservation until it goes: the caller sleeps each
    wait `next_wait` returns and asks again, until no wait is left.

    1. The slot is reserved in the pacer's schedule (`Pacer.reserve`).
    2. When that wait is over, the pacer confirms it among the sends made (`Pacer.confirm`):
       sends bunched by a stall of the process, or a hold heard meanwhile, wait more.
    3. A send that waited for that goes, unless a hold heard since lasts past its time, or it
       was stalled again (`Pacer.stalled`): it is then confirmed again, behind the sends
       booked meanwhile.
    """

    __slots__ = ("_cost", "_due", "_pacer", "_stage", "waited")

    def __init__(self, pacer: Pacer, cost: float = 0.0) -> None:
        self._pacer = pacer
        self._cost = cost
        self._stage: Literal["new", "reserved", "confirmed"] = "new"
        self._due = -math.inf  # when the send is booked to go
        #: The waits granted so far: the send's whole wait for its slot.
        self.waited = 0.0

    def next_wait(self, now: float, within: float | None = None) -> Slot:
        """The next wait (`Slot.wait` 0.0: send now, the booking is done), or a refusal when
        it would end past ``within`` (what the caller's deadline leaves)."""
        pacer, stage = self._pacer, self._stage
        if stage == "new":
            slot = pacer.reserve(now, self._cost, within=within)
        elif (
            stage == "confirmed"
            and not pacer.holds(max(now, self._due))
            and not pacer.stalled(self._due, now)
        ):
            return _NOW
        else:
            slot = pacer.confirm(now, within=within)
        if slot.granted:
            self.waited += slot.wait
            # A slot reserved for now was counted among the sends made (`Pacer.reserve`).
            self._stage = "reserved" if stage == "new" and slot.wait > 0.0 else "confirmed"
            self._due = now + slot.wait
        return slot


def _hold(
    lane: _Lane, now: float, remaining: float | None, reset: float | None, limit: float | None
) -> bool:
    """Hold ``lane`` if its counter is exhausted; whether it did.

    Until ``reset``, or, with the lane's limit known, until one unit is back (``1 / limit``):
    OpenAI's and Anthropic's resets say when the counter is full again, and it refills
    continuously, so waiting for the whole reset would leave most of the limit unused.
    """
    if remaining is None or remaining >= 1.0 or reset is None or reset <= 0.0:
        return False
    if limit is not None:
        reset = min(reset, 1.0 / limit)
    lane.hold_until = max(lane.hold_until, now + min(reset, MAX_HOLD))
    return True
