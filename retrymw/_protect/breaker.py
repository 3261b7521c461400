"""`CircuitBreaker`: one circuit's states, rules and statistics.

A closed circuit opens on consecutive failed attempts or on a failure rate over a sliding
window; after the recovery timeout exactly ``half_open_max_calls`` probes decide whether it
closes, and only a probe's own verdict moves a half-open circuit. The rules, the defaults and
the measurements behind them are in docs/protection.md. The arguments are checked in
`settings`, the windows are `windows`'s, the probes' permits `probes`'s.

Closed, `allow_request` is lock-free, and so is `record_success` with a count-based window;
everything else takes a short lock, and listeners run after it is released.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable
from dataclasses import dataclass
from random import Random
from typing import Any, final

from .._core.clock import SYSTEM_CLOCK, Clock
from .._core.events import BreakerStateChanged, CircuitState
from .._core.forks import after_fork_in_child
from .counting import LazyCount
from .probes import ProbeSlots
from .settings import BreakerSettings, breaker_settings
from .windows import CountWindow, TimeWindow

__all__ = ["CircuitBreaker", "CircuitBreakerStatistics"]

Listener = Callable[[BreakerStateChanged], None]

_logger = logging.getLogger("retrymw")


@dataclass(frozen=True, slots=True)
class CircuitBreakerStatistics:
    """A snapshot of a `CircuitBreaker`.

    Attributes:
        name: the circuit's name (the ``retrymw_circuit`` label).
        state: ``"closed"``, ``"open"`` or ``"half_open"``.
        consecutive_failures: failures since the last success while closed.
        window_calls: attempts in the sliding window.
        window_failures: failed attempts in the sliding window.
        failure_rate: ``window_failures / window_calls``, or ``None`` below ``minimum_calls``.
        successes: successes recorded since creation.
        failures: failures recorded since creation.
        rejected: requests rejected since creation (open, or half-open with no free slot).
        trips: how many times the circuit opened.
        probes_in_flight: admitted half-open probes without a verdict yet.
        retry_in: seconds until the next probe is allowed, when open.
    """

    name: str
    state: CircuitState
    consecutive_failures: int
    window_calls: int
    window_failures: int
    failure_rate: float | None
    successes: int
    failures: int
    rejected: int
    trips: int
    probes_in_flight: int
    retry_in: float | None


@final
class CircuitBreaker:
    """A circuit breaker with a consecutive-failure rule, a failure-rate window and exact probes.

    docs/protection.md has the rules and why the defaults hold. Durations accept
    seconds, `timedelta` or strings such as ``"5s"``. Report each admitted attempt's verdict
    from the task or thread that was admitted, as the retrier does: a probe is recognised by
    its context, and one reported from elsewhere keeps its half-open slot.

    Args:
        name: the circuit's name, a bounded telemetry label.
        failure_threshold: consecutive failed attempts that open the circuit; ``None`` turns the
            rule off.
        recovery_timeout: how long the circuit stays open before a probe is allowed.
        half_open_max_calls: probes allowed at the same time in half-open.
        success_threshold: successful probes that close the circuit; one failure reopens it.
        failure_rate_threshold: failure rate in ``(0, 1]`` over the window that opens the circuit;
            ``None`` turns the rule off.
        window: an ``int`` counts the last N attempts; a duration string, `timedelta` or
            ``{secs, nanos}`` makes the window time-based.
        minimum_calls: attempts the window must hold before its rate counts.
        max_recovery_timeout: cap of open periods that double with each consecutive trip;
            ``None`` keeps every open period at ``recovery_timeout``.
        recovery_jitter: in ``[0, 1]``; each open period ``d`` is drawn from
            ``[d * (1 - recovery_jitter), d]``.
        clock: where time is read; the system clock by default.
        rng: the random source for ``recovery_jitter``.

    Raises:
        ConfigError: a value is out of range; the message names the field.

    .. versionadded:: 0.1
    """

    def __init__(
        self,
        *,
        name: str = "default",
        failure_threshold: int | None = 20,
        recovery_timeout: Any = "5s",
        half_open_max_calls: int = 1,
        success_threshold: int = 1,
        failure_rate_threshold: float | None = 0.8,
        window: Any = 100,
        minimum_calls: int = 50,
        max_recovery_timeout: Any = None,
        recovery_jitter: float = 0.0,
        clock: Clock | None = None,
        rng: Random | None = None,
    ) -> None:
        settings = breaker_settings(
            name=name,
            failure_threshold=failure_threshold,
            recovery_timeout=recovery_timeout,
            half_open_max_calls=half_open_max_calls,
            success_threshold=success_threshold,
            failure_rate_threshold=failure_rate_threshold,
            window=window,
            minimum_calls=minimum_calls,
            max_recovery_timeout=max_recovery_timeout,
            recovery_jitter=recovery_jitter,
        )
        self._setup(name, settings, clock if clock is not None else SYSTEM_CLOCK, rng, ())

    def _setup(
        self,
        name: str,
        settings: BreakerSettings,
        clock: Clock,
        rng: Random | None,
        listeners: tuple[Listener, ...],
    ) -> None:
        self.name = name
        self._settings = settings
        self._clock = clock
        self._rng = rng if rng is not None else Random()
        self._listeners = listeners
        self._lock = threading.Lock()
        self._state: CircuitState = "closed"
        self._window = self._new_window()
        self._consecutive = 0
        self._probes = ProbeSlots()
        self._half_open_successes = 0
        self._reopen_at = 0.0
        self._streak = 0
        self._successes = self._failures = self._rejected = self._trips = 0
        # With a count-based window, successes while closed are only counted (lock-free) and
        # folded into the window under the lock by the next locked operation: see _fold().
        self._lazy = settings.window_size is not None
        self._pending = LazyCount()
        self._gate: Callable[[], bool] | None = None
        after_fork_in_child(self)

    def _after_fork_in_child(self) -> None:
        """A fresh lock, and a fresh half-open period: the parent's probes' threads are gone."""
        self._lock = threading.Lock()
        if self._state == "half_open":
            self._probes.clear()
            self._half_open_successes = 0

    def _new_window(self) -> CountWindow | TimeWindow:
        settings = self._settings
        if settings.window_size is not None:
            return CountWindow(settings.window_size)
        assert settings.window_duration is not None
        return TimeWindow(settings.window_duration)

    def clone(self, name: str) -> CircuitBreaker:
        """Return a fresh, closed breaker with these settings, clock, rng and listeners."""
        breaker = CircuitBreaker.__new__(CircuitBreaker)
        breaker._setup(name, self._settings, self._clock, self._rng, self._listeners)
        return breaker

    # -- the retrier's interface ------------------------------------------------------------------

    @property
    def state(self) -> CircuitState:
        """The current state; an open circuit whose timeout has passed turns half-open here."""
        state = self._state
        if state == "open" and self._clock.now() >= self._reopen_at:
            with self._lock:
                events = self._check_recovery(self._clock.now())
                state = self._state
            self._emit(events)
        return state

    def allow_request(self) -> bool:
        """Admit an attempt or not, without waiting; in half-open, take a probe slot."""
        # The hot path: no lock, no clock, and no permit in the context. So a closed circuit
        # counts every verdict, a straggler from before a trip included: telling them apart
        # would cost every admission a context write, about doubling this path.
        if self._state == "closed":
            return True
        return self._admit()

    def _admit(self) -> bool:
        with self._lock:
            events = self._check_recovery(self._clock.now())
            state = self._state
            admitted = state == "closed" or (
                state == "half_open" and len(self._probes) < self._settings.half_open_max_calls
            )
            gate = self._gate if state == "half_open" and admitted else None
            if state == "half_open" and admitted:
                self._probes.admit()  # the slot is taken now; the gate may give it back
            if not admitted:
                self._rejected += 1
        self._emit(events)
        if gate is not None and not _passes(gate):
            # A fleet's gate (retrymw.fleet) refused its fleet-wide probe lease. It was asked
            # outside the lock: a store round trip must never hold up the breaker's callers.
            with self._lock:
                self._probes.finish()  # this context's permit: the slot it took
                self._rejected += 1
            return False
        return admitted

    def record_success(self) -> None:
        """Record that an admitted attempt succeeded (a probe's success frees its slot)."""
        if self._lazy and self._state == "closed":  # the hot path: one atomic counter step
            next(self._pending)
            return
        with self._lock:
            self._fold()
            self._successes += 1
            state = self._state
            if state == "closed":
                self._consecutive = 0
                self._window.add(False, self._clock)
                return
            if state != "half_open" or not self._probes.finish():
                return  # while open, or a verdict that is not this period's probe's
            self._half_open_successes += 1
            if self._half_open_successes < self._settings.success_threshold:
                return
            self._streak = 0
            event = self._move("closed", self._clock.now())
        self._emit([event])

    def record_failure(self) -> None:
        """Record that an admitted attempt failed; this may open the circuit."""
        events: list[BreakerStateChanged] = []
        with self._lock:
            self._fold()
            self._failures += 1
            state = self._state
            if state == "closed":
                now = self._clock.now()
                self._consecutive += 1
                window = self._window
                window.add(True, self._clock)
                settings = self._settings
                rate = settings.failure_rate_threshold
                if (
                    settings.failure_threshold is not None
                    and self._consecutive >= settings.failure_threshold
                ) or (
                    rate is not None
                    and window.calls >= settings.minimum_calls
                    and window.failures >= rate * window.calls
                ):
                    events.append(self._trip(now))
            elif state == "half_open" and self._probes.finish():
                events.append(self._trip(self._clock.now()))
        self._emit(events)

    def release(self) -> None:
        """An admitted attempt ended without a verdict (cancelled): a probe frees its slot."""
        with self._lock:
            if self._state == "half_open":
                self._probes.finish()

    def gate_probes(self, gate: Callable[[], bool] | None, /) -> None:
        """Admit a half-open probe only when ``gate()`` is true too (`retrymw.fleet`'s lease)."""
        self._gate = gate

    def adopt(self, state: CircuitState, /, *, retry_in: float = 0.0) -> None:
        """Take a shared state (`retrymw.fleet`): ``"open"`` for ``retry_in`` s, or ``"closed"``."""
        events: list[BreakerStateChanged] = []
        with self._lock:
            now = self._clock.now()
            if state == "open":
                self._reopen_at = now + retry_in
                if self._state != "open":
                    self._trips += 1
                    events.append(self._move("open", now))
            elif self._state != "closed":
                self._streak = 0
                events.append(self._move("closed", now))
        self._emit(events)

    def retry_in(self) -> float | None:
        """Seconds until the next probe is allowed when open, else ``None``."""
        if self._state != "open":
            return None
        return max(0.0, self._reopen_at - self._clock.now())

    def add_listener(self, listener: Listener) -> None:
        """Call ``listener`` with a `BreakerStateChanged` on every transition.

        Listeners run outside the breaker's lock; one that raises is logged and skipped. A
        listener equal to one already added is not added again (retriers sharing a breaker and
        their instruments register equal listeners: each transition is reported once).
        """
        with self._lock:
            if listener not in self._listeners:
                self._listeners = (*self._listeners, listener)

    @property
    def settings(self) -> BreakerSettings:
        """The breaker's validated settings (frozen; its clones share them): what its trip
        rules are, for the telemetry that shows them and the fleet that shares them."""
        return self._settings

    def statistics(self) -> CircuitBreakerStatistics:
        """Return a frozen snapshot of the breaker."""
        self.state  # noqa: B018 - applies a due open→half_open transition first
        with self._lock:
            self._fold()
            window = self._window
            if isinstance(window, TimeWindow):
                window.expire(self._clock.now())
            calls, failures = window.calls, window.failures
            return CircuitBreakerStatistics(
                name=self.name,
                state=self._state,
                consecutive_failures=self._consecutive,
                window_calls=calls,
                window_failures=failures,
                failure_rate=(
                    failures / calls if calls and calls >= self._settings.minimum_calls else None
                ),
                successes=self._successes,
                failures=self._failures,
                rejected=self._rejected,
                trips=self._trips,
                probes_in_flight=len(self._probes),
                retry_in=self.retry_in(),
            )

    def __repr__(self) -> str:
        stats = self.statistics()
        rate = "-" if stats.failure_rate is None else f"{stats.failure_rate:.0%}"
        opened = "" if stats.retry_in is None else f" retry_in={stats.retry_in:.3g}s"
        return (
            f"<CircuitBreaker {self.name!r} {stats.state}{opened} "
            f"failures={stats.consecutive_failures} in a row, {rate} of "
            f"{stats.window_calls} trips={stats.trips}>"
        )

    # -- transitions (the caller holds the lock) ---------------------------------------------------

    def _fold(self) -> None:
        """Move the successes counted lock-free into the totals and, if closed, the window."""
        if not self._lazy:
            return
        new = self._pending.take()
        if new:
            self._successes += new
            if self._state == "closed":
                self._consecutive = 0
                assert isinstance(self._window, CountWindow)
                self._window.add_successes(new)

    def _move(self, state: CircuitState, now: float) -> BreakerStateChanged:
        self._fold()
        event = BreakerStateChanged(self.name, self._state, state, now)
        self._state = state
        self._probes.clear()
        self._half_open_successes = 0
        if state == "closed":
            self._consecutive = 0
            self._window = self._new_window()
        return event

    def _trip(self, now: float) -> BreakerStateChanged:
        settings = self._settings
        self._streak += 1
        self._trips += 1
        # Doubling from recovery_timeout, capped; log2 keeps 2**streak from overflowing.
        period = settings.recovery_timeout
        longest = settings.max_recovery_timeout
        if longest > period > 0.0:
            doublings = self._streak - 1
            period = longest if doublings >= math.log2(longest / period) else period * 2**doublings
        if settings.recovery_jitter:
            period *= 1.0 - settings.recovery_jitter * self._rng.random()
        self._reopen_at = now + period
        return self._move("open", now)

    def _check_recovery(self, now: float) -> list[BreakerStateChanged]:
        if self._state == "open" and now >= self._reopen_at:
            return [self._move("half_open", now)]
        return []

    def _emit(self, events: list[BreakerStateChanged]) -> None:
        for event in events:
            for listener in self._listeners:
                _notify(listener, event)


def _passes(gate: Callable[[], bool]) -> bool:
    """Ask a probe gate; one that raises admits (the breaker then decides alone)."""
    try:
        return bool(gate())
    except Exception:
        _logger.exception("breaker probe gate %r failed; deciding locally", gate)
        return True


def _notify(listener: Listener, event: BreakerStateChanged) -> None:
    try:
        listener(event)
    except Exception:
        # A listener is telemetry: it must never break the breaker or the call.
        _logger.exception("breaker listener %r failed on %r", listener, event)
