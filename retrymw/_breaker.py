"""`CircuitBreaker` and its keyed `CircuitBreakerRegistry`.

States: ``closed`` (everything passes), ``open`` (everything is rejected until the recovery
timeout ends) and ``half_open`` (exactly ``half_open_max_calls`` probes at a time; the rest are
rejected at once). The only transitions are closed→open, open→half_open, half_open→closed and
half_open→open.

A closed circuit opens on either of two signals, both counted per *attempt*:

* ``failure_threshold`` consecutive failures (default 20), the classic rule; and
* a failure rate of at least ``failure_rate_threshold`` (default 50%) over a sliding ``window``
  (default the last 100 attempts; ``"10s"`` makes it time-based) once it holds
  ``minimum_calls`` attempts (default 50).

Why these defaults: at 20% independent failures and 100 calls/s (about 450 000 attempts an hour
with retries), 20 failures in a row has probability 0.2**20 ≈ 1e-14 per attempt and a 50% rate
over 50-100 attempts at most 2e-6 per window, so the circuit never opens in an hour (10
consecutive failures would trip about once in 27 hours; ``minimum_calls=20`` about once in 400
fresh windows). A dead dependency trips the consecutive rule after 20 attempts, 0.2 s at
100 calls/s; a partial outage (50-85% failures) trips the rate rule within one window. The
recovery timeout is 5 s (Polly's; resilience4j waits 60 s): with a single probe, probing is cheap.
Open periods can grow (``max_recovery_timeout``: doubled per consecutive trip) and be jittered
(``recovery_jitter``: drawn from ``[d * (1 - j), d]``, so they stay jittered at the cap).

The open→half_open transition happens lazily, at the first request or `state` read after the
timeout, and its event carries that time. Verdicts are attributed to the state the breaker is
in when they arrive: one for an attempt admitted while closed but reported after the circuit
opened is ignored, and in half-open any verdict frees a probe slot (the interface carries no
permit, so a straggler from the closed era can stand in for a probe). While closed,
`allow_request` is lock-free and so is `record_success` with a count-based window (an atomic
counter step, folded into the window by the next failure); everything else takes a short lock,
and listeners run after it is released.
"""

from __future__ import annotations

import itertools
import logging
import math
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from random import Random
from typing import Any, final

from ._clock import SYSTEM_CLOCK, Clock
from ._durations import parse_duration
from ._errors import ConfigError
from ._events import BreakerStateChanged, CircuitState

__all__ = ["CircuitBreaker", "CircuitBreakerRegistry", "CircuitBreakerStatistics"]

Listener = Callable[[BreakerStateChanged], None]

_logger = logging.getLogger("retrymw")
_TIME_SLOTS = 10  # buckets of a time-based window; its edge is accurate to window / 10


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


@dataclass(frozen=True, slots=True)
class _Settings:
    failure_threshold: int | None
    failure_rate_threshold: float | None
    window_size: int | None  # count-based window
    window_duration: float | None  # time-based window
    minimum_calls: int
    recovery_timeout: float
    max_recovery_timeout: float
    recovery_jitter: float
    half_open_max_calls: int
    success_threshold: int


class _CountWindow:
    """The last ``size`` verdicts in a ring."""

    __slots__ = ("_index", "_ring", "calls", "failures")

    def __init__(self, size: int) -> None:
        self._ring = bytearray(size)
        self._index = 0
        self.calls = 0
        self.failures = 0

    def add(self, failed: bool, clock: Clock) -> None:
        ring, index = self._ring, self._index
        if self.calls == len(ring):
            self.failures -= ring[index]
        else:
            self.calls += 1
        ring[index] = failed
        self.failures += failed
        self._index = (index + 1) % len(ring)

    def add_successes(self, count: int) -> None:
        """Push ``count`` successes at once (folded from the lock-free success counter)."""
        ring = self._ring
        if count >= len(ring):
            ring[:] = bytes(len(ring))
            self.calls, self.failures, self._index = len(ring), 0, 0
            return
        # count < size: overwrite the next `count` slots (wrapping), dropping their failures.
        index, size = self._index, len(ring)
        for _ in range(count):
            if self.calls == size:
                self.failures -= ring[index]
            else:
                self.calls += 1
            ring[index] = 0
            index = (index + 1) % size
        self._index = index


class _TimeWindow:
    """Verdicts of the last ``duration`` seconds, in ``_TIME_SLOTS`` buckets."""

    __slots__ = ("_calls", "_epoch", "_failures", "_width", "calls", "failures")

    def __init__(self, duration: float) -> None:
        self._width = duration / _TIME_SLOTS
        self._calls = [0] * _TIME_SLOTS
        self._failures = [0] * _TIME_SLOTS
        self._epoch: int | None = None
        self.calls = 0
        self.failures = 0

    def add(self, failed: bool, clock: Clock) -> None:
        slot = self.expire(clock.now())
        self._calls[slot] += 1
        self._failures[slot] += failed
        self.calls += 1
        self.failures += failed

    def expire(self, now: float) -> int:
        """Drop the buckets older than the window; return the current bucket's index."""
        epoch = math.floor(now / self._width)
        if self._epoch is not None and epoch > self._epoch:
            for step in range(1, min(epoch - self._epoch, _TIME_SLOTS) + 1):
                slot = (self._epoch + step) % _TIME_SLOTS
                self.calls -= self._calls[slot]
                self.failures -= self._failures[slot]
                self._calls[slot] = self._failures[slot] = 0
        if self._epoch is None or epoch > self._epoch:
            self._epoch = epoch
        return self._epoch % _TIME_SLOTS


@final
class CircuitBreaker:
    """A circuit breaker with a consecutive-failure rule, a failure-rate window and exact probes.

    See the module documentation for the rules and why the defaults hold. Durations accept
    seconds, `timedelta` or strings such as ``"5s"``.

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
        failure_rate_threshold: float | None = 0.5,
        window: Any = 100,
        minimum_calls: int = 50,
        max_recovery_timeout: Any = None,
        recovery_jitter: float = 0.0,
        clock: Clock | None = None,
        rng: Random | None = None,
    ) -> None:
        _require(bool(name) and isinstance(name, str), "name", name, "must be a non-empty string")
        if failure_threshold is not None:
            _positive_int(failure_threshold, "failure_threshold")
        rate = failure_rate_threshold
        if rate is not None:
            _require(_number(rate) and 0.0 < rate <= 1.0, "failure_rate_threshold", rate, "(0, 1]")
        either = failure_threshold is not None or rate is not None
        _require(either, "failure_threshold", None, "and failure_rate_threshold are both None")
        window_size, window_duration = _parse_window(window)
        _positive_int(minimum_calls, "minimum_calls")
        fits = window_size is None or minimum_calls <= window_size
        _require(fits, "minimum_calls", minimum_calls, f"exceeds the window ({window_size})")
        recovery = parse_duration(recovery_timeout, field="recovery_timeout")
        longest = recovery
        if max_recovery_timeout is not None:
            longest = parse_duration(max_recovery_timeout, field="max_recovery_timeout")
            problem = f"is below recovery_timeout ({recovery:g}s)"
            _require(longest >= recovery, "max_recovery_timeout", max_recovery_timeout, problem)
        jitter = recovery_jitter
        _require(_number(jitter) and 0.0 <= jitter <= 1.0, "recovery_jitter", jitter, "[0, 1]")
        settings = _Settings(
            failure_threshold=failure_threshold,
            failure_rate_threshold=None if rate is None else float(rate),
            window_size=window_size,
            window_duration=window_duration,
            minimum_calls=minimum_calls,
            recovery_timeout=recovery,
            max_recovery_timeout=longest,
            recovery_jitter=float(jitter),
            half_open_max_calls=_positive_int(half_open_max_calls, "half_open_max_calls"),
            success_threshold=_positive_int(success_threshold, "success_threshold"),
        )
        self._setup(name, settings, clock if clock is not None else SYSTEM_CLOCK, rng, ())

    def _setup(
        self,
        name: str,
        settings: _Settings,
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
        self._probes = 0
        self._half_open_successes = 0
        self._reopen_at = 0.0
        self._streak = 0
        self._successes = self._failures = self._rejected = self._trips = 0
        # With a count-based window, successes while closed are only counted (lock-free) and
        # folded into the window under the lock by the next locked operation: see _fold().
        self._lazy = settings.window_size is not None
        self._pending = itertools.count()
        self._reads = self._folded = 0

    def _new_window(self) -> _CountWindow | _TimeWindow:
        settings = self._settings
        if settings.window_size is not None:
            return _CountWindow(settings.window_size)
        assert settings.window_duration is not None
        return _TimeWindow(settings.window_duration)

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
        if self._state == "closed":  # the hot path: no lock, no clock
            return True
        return self._admit()

    def _admit(self) -> bool:
        with self._lock:
            events = self._check_recovery(self._clock.now())
            state = self._state
            admitted = state == "closed" or (
                state == "half_open" and self._probes < self._settings.half_open_max_calls
            )
            if state == "half_open" and admitted:
                self._probes += 1
            elif not admitted:
                self._rejected += 1
        self._emit(events)
        return admitted

    def record_success(self) -> None:
        """Record that an admitted attempt succeeded (and free its probe slot)."""
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
            if state != "half_open":
                return
            self._probes = max(0, self._probes - 1)
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
            elif state == "half_open":
                events.append(self._trip(self._clock.now()))
        self._emit(events)

    def release(self) -> None:
        """An admitted attempt ended without a verdict (cancelled): free its probe slot."""
        with self._lock:
            if self._state == "half_open" and self._probes > 0:
                self._probes -= 1

    def retry_in(self) -> float | None:
        """Seconds until the next probe is allowed when open, else ``None``."""
        if self._state != "open":
            return None
        return max(0.0, self._reopen_at - self._clock.now())

    def add_listener(self, listener: Listener) -> None:
        """Call ``listener`` with a `BreakerStateChanged` on every transition.

        Listeners run outside the breaker's lock; one that raises is logged and skipped.
        """
        with self._lock:
            self._listeners = (*self._listeners, listener)

    def statistics(self) -> CircuitBreakerStatistics:
        """Return a frozen snapshot of the breaker."""
        self.state  # noqa: B018 - applies a due open→half_open transition first
        with self._lock:
            self._fold()
            window = self._window
            if isinstance(window, _TimeWindow):
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
                probes_in_flight=self._probes,
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
        # Each read also consumes one value of the counter, so subtract the reads so far.
        total = next(self._pending) - self._reads
        self._reads += 1
        new = total - self._folded
        if new:
            self._folded = total
            self._successes += new
            if self._state == "closed":
                self._consecutive = 0
                assert isinstance(self._window, _CountWindow)
                self._window.add_successes(new)

    def _move(self, state: CircuitState, now: float) -> BreakerStateChanged:
        self._fold()
        event = BreakerStateChanged(self.name, self._state, state, now)
        self._state = state
        self._probes = 0
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


def _notify(listener: Listener, event: BreakerStateChanged) -> None:
    try:
        listener(event)
    except Exception:
        # A listener is telemetry: it must never break the breaker or the call.
        _logger.exception("retrymw: breaker listener %r failed on %r", listener, event)


@final
class CircuitBreakerRegistry:
    """One `CircuitBreaker` per key (host, operation), created from a template on first use.

    Each breaker is a `CircuitBreaker.clone` of ``template`` named ``f"{template.name}:{key}"``,
    with the template's listeners and ``listeners``. The template's own state is never used:
    it only carries settings, so one template can serve several registries.

    Overflow policy: the first ``max_keys`` keys get their own breaker for the registry's
    lifetime; any later key shares one breaker named ``f"{template.name}:_other"``. Keys are
    never evicted, because evicting an open breaker would forget that its dependency is down
    and let a retry storm through, and because circuit names are telemetry labels: the label
    set stays at most ``max_keys + 1`` values.

    Args:
        template: the breaker whose settings every keyed breaker copies.
        max_keys: how many keys get their own breaker.
        listeners: called on every transition of every keyed breaker.

    .. versionadded:: 0.1
    """

    __slots__ = ("_breakers", "_listeners", "_lock", "_max_keys", "_other", "template")

    def __init__(
        self,
        template: CircuitBreaker,
        *,
        max_keys: int = 1024,
        listeners: Iterable[Listener] = (),
    ) -> None:
        if not isinstance(template, CircuitBreaker):
            raise ConfigError("template", template, "must be a CircuitBreaker", "CircuitBreaker()")
        self.template = template
        self._max_keys = _positive_int(max_keys, "max_keys")
        self._listeners = tuple(listeners)
        self._breakers: dict[str, CircuitBreaker] = {}
        self._other: CircuitBreaker | None = None
        self._lock = threading.Lock()

    def get(self, key: str) -> CircuitBreaker:
        """Return the breaker for ``key``, creating it on first use."""
        breaker = self._breakers.get(key)  # a dict read is atomic: no lock on the hot path
        if breaker is not None:
            return breaker
        with self._lock:
            breaker = self._breakers.get(key)
            if breaker is not None:
                return breaker
            if len(self._breakers) < self._max_keys:
                breaker = self._breakers[key] = self._create(key)
                return breaker
            if self._other is None:
                self._other = self._create("_other")
            return self._other

    def _create(self, key: str) -> CircuitBreaker:
        breaker = self.template.clone(f"{self.template.name}:{key}")
        for listener in self._listeners:
            breaker.add_listener(listener)
        return breaker

    def statistics(self) -> dict[str, CircuitBreakerStatistics]:
        """Return each breaker's snapshot by circuit name (``_other`` included once used)."""
        with self._lock:
            breakers = [*self._breakers.values(), *([self._other] if self._other else [])]
        return {breaker.name: breaker.statistics() for breaker in breakers}

    def __len__(self) -> int:
        return len(self._breakers) + (self._other is not None)

    def __repr__(self) -> str:
        states = [breaker.state for breaker in list(self._breakers.values())]
        return (
            f"<CircuitBreakerRegistry {self.template.name!r} keys={len(self)}/{self._max_keys} "
            f"open={states.count('open')} half_open={states.count('half_open')}>"
        )


_EXAMPLES = {
    "name": '"payments"',
    "failure_threshold": "20",
    "failure_rate_threshold": "0.5",
    "minimum_calls": "50",
    "max_recovery_timeout": '"5m"',
    "recovery_jitter": "0.2",
    "half_open_max_calls": "1",
    "success_threshold": "1",
    "window": '100 (calls) or "10s"',
    "max_keys": "1024",
}


def _require(ok: bool, field: str, value: Any, problem: str) -> None:
    if not ok:
        if problem.startswith(("(", "[")):
            problem = f"must be a number in {problem}"
        raise ConfigError(field, value, problem, _EXAMPLES[field])


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _positive_int(value: Any, field: str) -> int:
    ok = isinstance(value, int) and not isinstance(value, bool) and value >= 1
    _require(ok, field, value, "must be an integer >= 1")
    return int(value)


def _parse_window(window: Any) -> tuple[int | None, float | None]:
    """An int is a count-based window; a duration makes it time-based."""
    if isinstance(window, float):
        _require(False, "window", window, "is ambiguous: use an int (calls) or a duration string")
    if isinstance(window, int) and not isinstance(window, bool):
        return _positive_int(window, "window"), None
    duration = parse_duration(window, field="window")
    _require(duration > 0.0, "window", window, "must be greater than zero")
    return None, duration
