"""`AdaptiveThrottle`: client-side adaptive throttling (Google SRE book, "Handling Overload").

Over a trailing ``window`` the throttle counts *requests* R (attempts that reached the
dependency and came back with a verdict) and *accepts* A (those answered without a retryable
failure), and rejects each new attempt locally with probability

.. math:: p = \\min(max\\_reject, \\max(0, (R' - k A') / (R' + 1)))

where R' = R + S counts the S attempts it shed itself in the window too, and A' = A R' / R
credits them with the accept share of the answered ones (``p = 0`` while R = 0). That is the
SRE formula over every attempt the client made, with the shed ones assumed to fare like the
answered ones, since they got no verdict:

* the share shed depends only on the accept share A / R (``1 - k A / R`` for many attempts):
  at ``k = 2`` a dependency failing half the time is left alone. Counting shed attempts as
  requests that were *not* accepted, as the book does, would make A look smaller the more it
  sheds, and a 50% failure would drift into shedding;
* the ``R' / (R' + 1)`` factor counts every attempt, not only those answered. Counting only R
  there fed on itself at low rates: shedding leaves few verdicts, and at 2 calls/s a 10 s window
  then held so few that ``p <= R / (R + 1)`` settled near 0.8, short of ``max_reject``.

It sheds in proportion to the failure: ``p`` rises with the share of failures above ``1 - 1/k``
and never switches a dependency off entirely (``max_reject`` < 1 keeps a trickle of attempts to
notice recovery).

**Load and loss.** The share of failed attempts cannot tell an overload from a loss: at demand
1.5x capacity an overloaded dependency fails 44% of the attempts, one dead backend of two 50%,
so one ``k`` that sheds the first sheds more of the second (every k <= 1.55 that met the
simulator's overload goal took a 50% partial failure below 0.50 success; every k >= 1.74 that
kept it served less than no retries). What the SRE book counts as not accepted is a request the
backend *rejected because it was overloaded*, so the throttle also counts O, the failures that
were explicit overload refusals (``record_failure(overloaded=True)``; a `Retrier` passes it for
an attempt whose status is in `OVERLOAD_STATUSES`: 429, 503, 529), and sheds with

.. math:: p = \\min(max\\_reject, \\max(0, p_k(R', A'), p_{overload\\_k}(R', (R - O)')))

the second term being the same formula at ``overload_k`` with only the refusals counted as not
accepted, ``(R - O)' = (R - O) R' / R`` (a fleet's pooled counts, `pool`, count in both
terms, as in the first). A loss (a refused connection, a 500, a 502: a dead backend
behind a balancer) moves the first term alone, so a 50% partial failure is still left alone; an
overload moves both, and the second binds once more than ``1 - 1/overload_k`` of the attempts
are refused (29% at 1.4). A dependency that answers a loss with 503 is taken for overloaded.

Why ``overload_k = 1.4`` (the simulator's overload: demand 1.5x capacity for 60 s, refusals 503
costing the dependency ``c`` of a served attempt; budget + throttle against no retries' 83.5/s
at c = 0.25, seed 0, and 94.4/s at c = 0.1; "normal" is the time after the overload from which
every second succeeds at >= 0.99; the 503 columns are failures that are not load but carry 503,
which the signal cannot tell from load; failures without a status are unaffected by
``overload_k``):

==========  =========  ============  =======  ======  =======  =============  ===============
overload_k  goodput/s  seeds 0-9 >=  offered  normal  c = 0.1  503 brownout   503 partial
            c = 0.25   no retries,                             0.2 / 0.3,     failure, budget
                       worst margin                            shed           / no budget
==========  =========  ============  =======  ======  =======  =============  ===============
2           79.3       0/10, -5.3    1.106x   1 s     92.7     0 / 0          0.588 / 0.887
1.75        81.7       0/10, -2.5    1.058x   2 s     93.4     0 / 0          0.503 / 0.713
1.6         82.9       0/10, -1.6    1.024x   3 s     94.0     0 / 0          0.455 / 0.626
1.5         84.1       10/10, +0.2   1.000x   5 s     94.3     0 / 0          0.424 / 0.570
**1.4**     85.5       10/10, +1.0   0.977x   5 s     94.6     0 / 2.0%       0.392 / 0.516
1.3         86.6       10/10, +2.8   0.948x   6 s     95.2     0 / 8.6%       0.360 / 0.464
1.2         87.7       10/10, +3.9   0.920x   8 s     95.9     3.7% / 15.7%   0.330 / 0.418
1.1         89.8       10/10, +5.5   0.893x   9 s     96.4     11.8% / 22.6%  0.300 / 0.372
==========  =========  ============  =======  ======  =======  =============  ===============

1.4 is the largest that meets the goal at both costs, with a margin on every seed (1.5 falls
short at c = 0.1 and has 0.2/s to spare on its worst seed); smaller values serve more but shed a
503-answered brownout (at 1.2 a 20% one) and take longer to let go after the overload.

**A cold throttle sheds nothing.** While the window holds fewer than ``min_requests``
attempts (R', the fleet's pooled ones included; 10 by default) ``p = 0``: the formula alone
gives a fresh throttle whose first attempt failed ``p = 1/2`` on one verdict. The floor only
matters while the window is nearly empty (at 2 calls/s a 10 s window holds 20 attempts, so the
outage figures below hold as they were); a client too quiet to fill its window is no longer
shed on noise (the simulator's 1 000 clients at 1 call/s, budget + throttle: recovered in 2 s
instead of 9 s; 5 and 20 were tried: 20 stopped shedding a 2 calls/s outage with a budget).

Requests are counted when their verdict arrives (`record_success` / `record_failure`), not at
admission: an attempt still in flight, or one cancelled (`release`), says nothing about the
dependency, so counts never need taking back and can never go negative.

Why a 10 s window (a seeded simulation of this class on a `FakeClock`: open-loop arrivals, one
attempt per call, a 60 s total outage after 30 s of health, then recovery; "recovered" is the
time after which every second's success rate is >= 0.99; the 10 s row's outage at 2, 10
and 100 calls/s and its p = 0.5 and 0.2 columns are tests in ``tests/protect/test_throttle.py``):

======  ===================  ====================  ===================  =================
window  recovered after, at  calls shed from 10 s  shed at p = 0.5      shed at p = 0.2
        2/10/100/1000 /s     into the outage,      (partial failure),   (brownout),
                             2/10/100/1000 /s      100 calls/s, 10 min  100 calls/s
======  ===================  ====================  ===================  =================
2 s     1 / 2 / 1 / 1 s      56 / 88 / 90 / 90%    3.2%                 0
5 s     2 / 1 / 2 / 1 s      83 / 88 / 90 / 90%    2.1%                 0
10 s    3 / 2 / 3 / 2 s      85 / 88 / 90 / 90%    1.5%                 0
20 s    9 / 4 / 4 / 4 s      77 / 81 / 83 / 83%    1.1%                 0
30 s    2 / 3 / 6 / 6 s      65 / 68 / 70 / 70%    1.0%                 0
60 s    29 / 32 / 33 / 33 s  29 / 32 / 32 / 32%    0.7%                 0
======  ===================  ====================  ===================  =================

After recovery the failures still in the window keep ``p`` up until the new accepts outweigh
them (``k A >= R``), about half a window at k = 2, so a window much past 20 s cannot recover
within 10 s; a long window also keeps the healthy past in view well into an outage and sheds
late. A short window judges a 50% partial failure on fewer attempts (the noise of ``R - 2A``
is about ``sqrt(R)``), so it sheds more of a dependency it should leave alone, and at low rates
it holds too few attempts to shed much (``p <= R' / (R' + 1)``; when only answered attempts
counted in R', the 10 s window shed 73% at 2 calls/s, 2 s 46% and 5 s 67%). 10 s recovers
within 3 s at every rate, sheds the most of an outage from 10 s in (85% even at 2 calls/s),
and keeps a partial failure's shedding below 2%.

Thread- and task-safe: every method takes a short lock; none waits. Fork-safe (`forks`).

.. versionadded:: 0.2
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass
from random import Random
from typing import Any, final

from .._core.clock import SYSTEM_CLOCK, Clock
from .._core.errors import ConfigError
from .._core.events import OVERLOAD_STATUSES
from .._core.forks import after_fork_in_child
from .settings import bounded_duration, shown
from .windows import TimeWindow

__all__ = ["MIN_REQUESTS", "OVERLOAD_STATUSES", "AdaptiveThrottle", "AdaptiveThrottleStatistics"]

#: The default ``min_requests``: nothing is shed before the window holds this many attempts.
MIN_REQUESTS = 10


@dataclass(frozen=True, slots=True)
class AdaptiveThrottleStatistics:
    """A snapshot of an `AdaptiveThrottle`.

    Attributes:
        name: the throttle's name (a bounded telemetry label).
        requests: R, attempts with a verdict in the trailing window.
        accepts: A, those of them answered without a retryable failure.
        reject_probability: the probability the next attempt is shed, in ``[0, max_reject]``.
        admitted: attempts admitted since creation.
        shed: attempts shed (outcome ``shed``) since creation.
        k: the accepts multiplier.
        max_reject: the cap of ``reject_probability``.
        window: the trailing window in seconds.
        shed_in_window: S, attempts shed in the trailing window.
        overloaded: O, the failures among ``requests`` that were explicit overload refusals.
        overload_k: the accepts multiplier of the overload term.
        min_requests: nothing is shed while the window holds fewer attempts (R + S).
    """

    name: str
    requests: int
    accepts: int
    reject_probability: float
    admitted: int
    shed: int
    k: float
    max_reject: float
    window: float
    shed_in_window: int = 0
    overloaded: int = 0
    overload_k: float = 1.4
    min_requests: int = 1


@final
class AdaptiveThrottle:
    """Shed attempts locally in proportion to how often the dependency fails.

    See the module documentation for the formula and why the defaults hold. Report each
    admitted attempt's verdict with `record_success` (answered, no retryable failure),
    `record_failure` (a retryable failure: an error, a timeout, a 503; ``overloaded=True`` for
    an explicit overload refusal) or `release` (cancelled: no verdict).

    Args:
        name: the throttle's name, a bounded telemetry label.
        k: accepts multiplier, >= 1; the throttle leaves alone a dependency that accepts at
            least ``1/k`` of the requests (2.0: half).
        overload_k: the accepts multiplier of the overload term, >= 1, in which only explicit
            overload refusals count as not accepted: the throttle sheds once more than
            ``1 - 1/overload_k`` of the requests are refused (1.4: 29%).
        window: the trailing window R, A and O are counted over (a duration in ``[1ms, 24h]``).
        max_reject: the cap of the rejection probability, in ``[0, 1]``; below 1 a trickle of
            attempts always goes through to notice recovery.
        min_requests: the least number of attempts (R + S, the fleet's pooled ones included)
            the window must hold before anything is shed, an integer >= 1 (10: one failure of
            a cold throttle is no evidence; 1 applies the formula from the first verdict).
        clock: where time is read; the system clock by default.
        rng: the random source of the rejections (inject a seeded one for determinism).

    Raises:
        ConfigError: a value is out of range; the message names the field.

    .. versionadded:: 0.2
    """

    def __init__(
        self,
        *,
        name: str = "default",
        k: float = 2.0,
        overload_k: float = 1.4,
        window: Any = "10s",
        max_reject: float = 0.9,
        min_requests: int = MIN_REQUESTS,
        clock: Clock | None = None,
        rng: Random | None = None,
    ) -> None:
        if not isinstance(name, str) or not name:
            raise ConfigError("name", shown(name), "must be a non-empty string", '"payments"')
        self.name = name
        self._k = _number_in(k, "k", 1.0, math.inf, "2.0")
        self._overload_k = _number_in(overload_k, "overload_k", 1.0, math.inf, "1.4")
        self._max_reject = _number_in(max_reject, "max_reject", 0.0, 1.0, "0.9")
        self._window_seconds = bounded_duration(window, "window", '"10s"')
        if (
            isinstance(min_requests, bool)
            or not isinstance(min_requests, int)
            or not 1 <= min_requests <= 1_000_000
        ):
            raise ConfigError(
                "min_requests", shown(min_requests), "must be an integer in [1, 1000000]", "10"
            )
        self._min_requests = min_requests
        self._clock: Clock = clock if clock is not None else SYSTEM_CLOCK
        self._rng = rng if rng is not None else Random()
        self._lock = threading.Lock()
        self._window = TimeWindow(self._window_seconds)
        self._shed_window = TimeWindow(self._window_seconds)  # S: its calls are the shed ones
        self._overload_window = TimeWindow(self._window_seconds)  # O: the overload refusals
        self._admitted = 0
        self._shed = 0
        # Other processes' requests, accepts and overload refusals (retrymw.fleet).
        self._pooled = (0, 0, 0)
        after_fork_in_child(self)

    def _after_fork_in_child(self) -> None:
        self._lock = threading.Lock()

    def clone(self, name: str) -> AdaptiveThrottle:
        """Return a fresh throttle with these settings, clock and rng, and no history."""
        return AdaptiveThrottle(
            name=name,
            k=self._k,
            overload_k=self._overload_k,
            window=self._window_seconds,
            max_reject=self._max_reject,
            min_requests=self._min_requests,
            clock=self._clock,
            rng=self._rng,
        )

    # -- the retrier's interface ------------------------------------------------------------------

    def allow_request(self) -> bool:
        """Admit an attempt, or shed it (``False``) with the current probability; never waits."""
        with self._lock:
            probability = self._probability()
            if probability and self._rng.random() < probability:
                self._shed += 1
                self._shed_window.add(False, self._clock)
                return False
            self._admitted += 1
            return True

    def record_success(self) -> None:
        """Record that an admitted attempt was answered without a retryable failure."""
        with self._lock:
            self._window.add(False, self._clock)

    def record_failure(self, *, overloaded: bool = False) -> None:
        """Record that an admitted attempt failed in a way worth retrying.

        Args:
            overloaded: the dependency refused the attempt explicitly because it is overloaded
                (a status in `OVERLOAD_STATUSES`); the overload term counts it, so load is shed
                earlier than loss (a dead backend, a refused connection, a 500 or 502).
        """
        with self._lock:
            self._window.add(True, self._clock)
            if overloaded:
                self._overload_window.add(False, self._clock)

    def release(self) -> None:
        """An admitted attempt ended without a verdict (cancelled): it counts nowhere."""

    def pool(self, requests: int, accepts: int, overloaded: int = 0, /) -> None:
        """Count other processes' trailing-window requests, accepts and overload refusals too
        (`retrymw.fleet`)."""
        with self._lock:
            self._pooled = (requests, accepts, overloaded)

    def reject_probability(self) -> float:
        """Return the probability that the next attempt is shed (for a gauge)."""
        with self._lock:
            return self._probability()

    def statistics(self) -> AdaptiveThrottleStatistics:
        """Return a frozen snapshot of the throttle."""
        with self._lock:
            probability = self._probability()
            window = self._window
            return AdaptiveThrottleStatistics(
                name=self.name,
                requests=window.calls,
                accepts=window.calls - window.failures,
                reject_probability=probability,
                admitted=self._admitted,
                shed=self._shed,
                k=self._k,
                max_reject=self._max_reject,
                window=self._window_seconds,
                shed_in_window=self._shed_window.calls,
                overloaded=min(self._overload_window.calls, window.calls),
                overload_k=self._overload_k,
                min_requests=self._min_requests,
            )

    def __repr__(self) -> str:
        stats = self.statistics()
        return (
            f"<AdaptiveThrottle {self.name!r} rejecting {stats.reject_probability:.1%} "
            f"requests={stats.requests} accepts={stats.accepts} shed={stats.shed}>"
        )

    def _probability(self) -> float:
        """The SRE formula over the trailing window, and the overload term (the caller holds
        the lock).

        ``(R' - k A') / (R' + 1)`` with R' = R + S and A' = A R' / R (the module documentation
        says why), computed as ``(1 - k A / R) R' / (R' + 1)``; the overload term is the same at
        ``overload_k`` with ``R - O`` in place of A. Both count the fleet's pooled numbers too.
        """
        window, now = self._window, self._clock.now()
        window.expire(now)
        shed = self._shed_window
        shed.expire(now)
        overloaded = self._overload_window
        overloaded.expire(now)
        pooled_requests, pooled_accepts, pooled_overloaded = self._pooled
        own = window.calls
        requests = own + pooled_requests
        attempts = requests + shed.calls
        if not requests or attempts < self._min_requests:
            return 0.0  # too few attempts in the window to judge the dependency by
        excess = 1.0 - self._k * (own - window.failures + pooled_accepts) / requests
        probability = excess * attempts / (attempts + 1)
        if overloaded.calls or pooled_overloaded:
            # Only explicit refusals count against the dependency here. min(): a refusal's two
            # entries may straddle a slot edge, so O can outlive R by a slot.
            refused = min(overloaded.calls, own) + pooled_overloaded
            excess = 1.0 - self._overload_k * (requests - min(refused, requests)) / requests
            probability = max(probability, excess * attempts / (attempts + 1))
        return min(self._max_reject, max(0.0, probability))


def _number_in(value: Any, field: str, low: float, high: float, example: str) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or (isinstance(value, int) and value.bit_length() > 1023)  # float() would overflow
        or not math.isfinite(value)
        or not low <= value <= high
    ):
        bounds = f">= {low:g}" if high == math.inf else f"in [{low:g}, {high:g}]"
        raise ConfigError(field, shown(value), f"must be a finite number {bounds}", example)
    return float(value)
