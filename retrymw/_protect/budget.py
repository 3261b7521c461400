"""`RetryBudget`: cross-call admission control for retries.

A token bucket: every successful call deposits ``ratio`` tokens, every retry costs one, and
the bucket holds at most ``max(min_capacity, burst * S)`` (``S``: the successes of the trailing
``window``), its floor lending at most ``floor_credit`` retries between two successes. A failure
that outlasts ``blip`` (retries asked, no success in between) is an outage: until a call
succeeds only the floor lends. So a short blip is retried through, an outage spends what its
first ``blip`` seconds asked for (and a low-rate client its floor's credit), and a flaky but
healthy dependency is never throttled; docs/protection.md has the measurements behind each
default.

`record_success` takes no lock (one ``next()`` on a `LazyCount`); the successes are folded into
the bucket under a short lock by the next `try_acquire`, `available` or `statistics`, spread
evenly over the time since the previous fold, so that a long quiet period cannot inflate the
trailing window at the start of an outage.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass
from typing import Any, final

from .._core.clock import SYSTEM_CLOCK, Clock
from .._core.errors import ConfigError
from .._core.forks import after_fork_in_child
from .counting import LazyCount
from .settings import bounded_duration, shown

__all__ = ["RetryBudget", "RetryBudgetStatistics"]

# Sub-buckets of the trailing window; the window's edge is accurate to window / _SLOTS.
_SLOTS = 10
# One extra slot holds the part of the window that straddles its oldest edge (interpolated).
_RING = _SLOTS + 1
# Deposits are multiples of a float ratio; 5 * 0.2 must buy a retry despite rounding.
_EPSILON = 1e-9


@dataclass(frozen=True, slots=True)
class RetryBudgetStatistics:
    """A snapshot of a `RetryBudget`.

    Attributes:
        available: tokens in the bucket now; one retry costs one token.
        capacity: the current cap, ``max(min_capacity, burst * window_successes)``.
        acquired: retries admitted since creation.
        denied: retries denied (reason ``throttled``) since creation.
        deposits: successful calls recorded since creation.
        window_successes: successful calls in the trailing window (estimated).
        ratio: tokens deposited per successful call.
        burst: capacity as a share of ``window_successes``.
        min_capacity: the floor of the capacity, and the tokens of a fresh budget.
        floor_credit: retries the floor may still fund before the next success.
        window: the trailing window in seconds.
        credit_per_success: retries the floor lends between two successes (the
            ``floor_credit`` setting).
        blip: how long a failure may last and still be retried through, in seconds (the
            ``blip`` setting); ``None``: no limit.
        failing_for: seconds since the failure going on began (the first retry asked after
            the last success); 0 when none is going on.
    """

    available: float
    capacity: float
    acquired: int
    denied: int
    deposits: int
    window_successes: float
    ratio: float
    burst: float
    min_capacity: float
    window: float
    floor_credit: float = math.inf
    credit_per_success: int = 2
    blip: float | None = 3.0
    failing_for: float = 0.0


@final
class RetryBudget:
    """Cross-call admission control for retries: a token bucket funded by successful calls.

    docs/protection.md has the algorithm and why the defaults hold at every client rate. One
    budget is shared by every call through a `Retrier` or transport.

    Args:
        ratio: tokens deposited by each call that ends in success; one retry costs one token, so
            in the long run retries are at most ``ratio`` times the successful calls.
        burst: the bucket's capacity as a share of the successful calls in the trailing
            ``window``; it bounds the retries an outage can start.
        window: the trailing window that ``burst`` refers to (a duration).
        min_capacity: the floor of the capacity, and the tokens a fresh budget starts with.
        floor_credit: retries the floor (the tokens above ``burst`` times the trailing
            successes) may fund between two successes; it bounds what an outage costs a
            low-rate client.
        blip: how long a failure may last and still be retried through (a duration, or
            ``None`` for no limit). A failure begins with the first retry asked after a
            success; once it is older than ``blip``, until a call succeeds, only the floor
            lends (``floor_credit``), so an outage costs what its first ``blip`` seconds asked
            for and the tokens recent traffic funded are kept for the calls in flight when the
            dependency answers again.
        clock: where time is read; the system clock by default.

    Raises:
        ConfigError: a value is out of range; the message names the field.

    .. versionadded:: 0.1
    .. versionchanged:: 0.4
       ``blip`` (3 s), and ``burst`` 0.6 (was 0.1): a 3 s blip is retried through.
    """

    __slots__ = (
        "__weakref__",
        "_acquired",
        "_balance",
        "_blip",
        "_burst",
        "_clock",
        "_credit",
        "_denied",
        "_epoch",
        "_epoch_end",
        "_failing_since",
        "_floor_credit",
        "_in_window",
        "_last_ask",
        "_last_fold",
        "_lock",
        "_min_capacity",
        "_ratio",
        "_share",
        "_slot_width",
        "_slots",
        "_successes",
        "_window",
    )

    def __init__(
        self,
        *,
        ratio: float = 0.3,
        burst: float = 0.6,
        window: Any = "10s",
        min_capacity: float = 10.0,
        floor_credit: int = 2,
        blip: Any = "3s",
        clock: Clock | None = None,
    ) -> None:
        self._ratio = _non_negative(ratio, "ratio", "0.3")
        self._burst = _non_negative(burst, "burst", "0.6")
        self._min_capacity = _non_negative(min_capacity, "min_capacity", "10")
        if (
            isinstance(floor_credit, bool)
            or not isinstance(floor_credit, int)
            or not 0 <= floor_credit <= 1_000_000
        ):
            raise ConfigError("floor_credit", shown(floor_credit), "must be an integer >= 0", "2")
        self._floor_credit = floor_credit
        self._window = bounded_duration(window, "window", '"10s"')
        self._blip = None if blip is None else bounded_duration(blip, "blip", '"3s"')
        self._clock: Clock = clock if clock is not None else SYSTEM_CLOCK
        self._lock = threading.Lock()
        self._share: Any = None  # a fleet's share (retrymw.fleet), deciding instead of the bucket
        self._slot_width = self._window / _SLOTS
        self._start_fresh()
        after_fork_in_child(self)

    def _start_fresh(self) -> None:
        """The state of a new budget: ``min_capacity`` tokens, nothing counted, an empty window."""
        # Until the first success nothing is known: a fresh budget lends its whole floor.
        self._credit = math.inf
        # record_success() only counts; _fold() takes the count under the lock.
        self._successes = LazyCount()
        self._balance = self._min_capacity
        # The failure going on: since when retries are asked with no success between them.
        self._failing_since: float | None = None
        self._last_ask = -math.inf
        self._acquired = 0
        self._denied = 0
        self._slots = [0.0] * _RING
        self._in_window = 0.0
        now = self._clock.now()
        self._epoch = math.floor(now / self._slot_width)
        self._epoch_end = (self._epoch + 1) * self._slot_width
        self._last_fold = now

    def reset(self) -> None:
        """Return to the state of a new budget with these settings, in place.

        Whoever holds the budget (a `Retrier`, a transport, a gauge) sees it fresh; a fleet's
        share, if any, is kept. The testing kit's ``retrymw_fresh_protection`` uses it on the
        budgets retrymw made by default, so that no test inherits what another spent.

        .. versionadded:: 0.3
        """
        with self._lock:
            self._start_fresh()

    def _after_fork_in_child(self) -> None:
        self._lock = threading.Lock()

    def clone(self) -> RetryBudget:
        """Return a fresh budget with these settings and clock (``min_capacity`` tokens)."""
        return RetryBudget(
            ratio=self._ratio,
            burst=self._burst,
            window=self._window,
            min_capacity=self._min_capacity,
            floor_credit=self._floor_credit,
            blip=self._blip,
            clock=self._clock,
        )

    def record_success(self) -> None:
        """Deposit for one call that ended in success. Lock-free: one atomic counter step (and
        the fleet's share's, when shared)."""
        next(self._successes)
        share = self._share
        if share is not None:
            share.record_success()

    def share_with(self, share: Any, /) -> None:
        """Spend a fleet's leased tokens from now on (`retrymw.fleet`); ``None``: locally again.

        ``share`` has ``try_acquire() -> bool`` and ``record_success()``, both local and
        non-blocking.
        """
        self._share = share

    def try_acquire(self) -> bool:
        """Take one token for a retry; ``False`` means the retry is denied (``throttled``).

        A failure older than ``blip`` is an outage: the tokens recent traffic funded are kept,
        and only the floor lends (its ``floor_credit`` retries between successes). A fleet's
        share cannot tell the two apart, so a shared budget denies such a retry without
        asking the share.
        """
        share = self._share
        if share is not None:
            with self._lock:
                self._fold()
                outage = self._outage(self._last_fold)
                self._denied += outage
            if outage:
                return False
            granted: bool = share.try_acquire()
            with self._lock:
                self._acquired += granted
                self._denied += not granted
            return granted
        with self._lock:
            self._fold()
            outage = self._outage(self._last_fold)
            if self._balance >= 1.0 - _EPSILON:
                # Tokens above what recent traffic funds are the floor's: lent on credit only.
                # Past blip only they are: the traffic's are kept for the recovery.
                from_floor = self._balance - 1.0 > self._burst * self._trailing(self._last_fold)
                allowed = self._credit >= 1.0 if from_floor else not outage
                if allowed:
                    self._credit -= from_floor
                    self._balance = max(0.0, self._balance - 1.0)
                    self._acquired += 1
                    return True
            self._denied += 1
            return False

    def available(self) -> float:
        """Return the tokens available now (for a gauge)."""
        with self._lock:
            self._fold()
            return self._balance

    def statistics(self) -> RetryBudgetStatistics:
        """Return a frozen snapshot of the budget."""
        with self._lock:
            self._fold()
            window_successes = self._trailing(self._last_fold)
            return RetryBudgetStatistics(
                available=self._balance,
                capacity=self._capacity(window_successes),
                acquired=self._acquired,
                denied=self._denied,
                deposits=self._successes.taken,
                window_successes=window_successes,
                ratio=self._ratio,
                burst=self._burst,
                min_capacity=self._min_capacity,
                window=self._window,
                floor_credit=self._credit,
                credit_per_success=self._floor_credit,
                blip=self._blip,
                failing_for=self._failing_for(self._last_fold),
            )

    def __repr__(self) -> str:
        stats = self.statistics()
        return (
            f"<RetryBudget available={stats.available:.3g}/{stats.capacity:.3g} "
            f"ratio={stats.ratio:g} acquired={stats.acquired} denied={stats.denied}>"
        )

    # -- internals (the caller holds the lock) ---------------------------------------------------

    def _outage(self, now: float) -> bool:
        """Note a retry asked at ``now``; whether the failure going on has outlasted ``blip``.

        A failure begins with the first retry asked after a success, or after a whole
        ``window`` without any retry asked (what happened in between is not known).
        """
        if self._failing_since is None or now - self._last_ask > self._window:
            self._failing_since = now
        self._last_ask = now
        return self._blip is not None and now - self._failing_since > self._blip

    def _failing_for(self, now: float) -> float:
        since = self._failing_since
        if since is None or now - self._last_ask > self._window:
            return 0.0
        return now - since

    def _capacity(self, window_successes: float) -> float:
        return max(self._min_capacity, self._burst * window_successes)

    def _fold(self) -> None:
        """Move recorded successes into the window and the bucket, then apply the cap."""
        now = max(self._clock.now(), self._last_fold)
        new = self._successes.take()
        if now >= self._epoch_end:
            self._advance(now)
        if new:
            self._spread(new, self._last_fold, now)
            self._balance += new * self._ratio
            self._credit = self._floor_credit  # any success renews the floor's credit
            self._failing_since = None  # and ends the failure going on
        self._last_fold = now
        self._balance = min(self._balance, self._capacity(self._trailing(now)))

    def _trailing(self, now: float) -> float:
        """Successes in ``[now - window, now]``: the newest slots plus a share of the oldest."""
        outside = (now - self._epoch * self._slot_width) / self._slot_width
        return self._in_window + self._slots[(self._epoch - _SLOTS) % _RING] * (1.0 - outside)

    def _advance(self, now: float) -> None:
        """Empty the slots that fell out of the window since the last fold."""
        epoch = math.floor(now / self._slot_width)
        slots = self._slots
        for step in range(1, min(epoch - self._epoch, _RING) + 1):
            slots[(self._epoch + step) % _RING] = 0.0
        self._epoch = epoch
        self._epoch_end = (epoch + 1) * self._slot_width
        # Re-summed rather than decremented, so rounding never drifts.
        self._in_window = math.fsum(slots[(epoch - back) % _RING] for back in range(_SLOTS))

    def _spread(self, count: int, since: float, now: float) -> None:
        """Add ``count`` successes, assumed evenly spread over ``[since, now]``, to the slots."""
        span = now - since
        width = self._slot_width
        slots = self._slots
        if span <= 0.0 or since >= self._epoch * width:
            slots[self._epoch % _RING] += count
            self._in_window += count
            return
        for back in range(_RING):
            start = (self._epoch - back) * width
            share = count * (min(now, start + width) - max(since, start)) / span
            if share > 0.0:
                slots[(self._epoch - back) % _RING] += share
                if back < _SLOTS:
                    self._in_window += share
            if start <= since:
                break


def _non_negative(value: Any, field: str, example: str) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or (isinstance(value, int) and value.bit_length() > 1023)  # float() would overflow
        or not math.isfinite(value)
        or value < 0
    ):
        raise ConfigError(field, shown(value), "must be a finite number >= 0", example)
    return float(value)
