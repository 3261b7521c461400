"""`Hedge`: when to send an extra copy of a slow attempt, and the latency it learns from.

A hedge waits ``after`` for an attempt's answer, then sends up to ``max_extra`` more copies;
the first usable answer wins (the driver is `_engine.hedging`). ``after`` is a fixed duration
(``"50ms"``) or a quantile of the target's own attempt latency (``"p95"``), estimated per target
by a `LatencyWindow`. Everything here is pure and synchronous: latencies are passed in, as
durations the driver measured on its clock.
"""

from __future__ import annotations

import math
import re
import threading
from collections import OrderedDict, deque
from dataclasses import dataclass
from typing import Any, final

from .._core.errors import ConfigError
from .._core.forks import after_fork_in_child
from .settings import bounded_duration, shown

__all__ = ["Hedge", "HedgeStatistics", "LatencyWindow", "TargetHedgeStatistics"]

_QUANTILE = re.compile(r"p(\d{1,2}(?:\.\d{1,3})?)")
_AFTER_EXAMPLE = '"p95" or "50ms"'
#: The quantile is recomputed once this many latencies arrived since the last estimate.
_REFRESH_EVERY = 8


@final
class LatencyWindow:
    """A streaming quantile estimate of one target's attempt latency.

    A ring of the ``size`` most recent latencies, sorted when the estimate is read (and only
    once `_REFRESH_EVERY` new ones arrived). Chosen over P² (five markers, constant memory) for
    being exact over its window, readable, bounded (``size`` floats, a sort of ``size`` items
    every few calls) and quick to follow a change of regime: P² weighs the whole history and
    drifts slowly after a dependency gets faster or slower; a window forgets what is older than
    its last ``size`` attempts.

    Not thread-safe on its own: `Hedge` holds it under its lock.
    """

    __slots__ = ("_estimate", "_fresh", "_latencies", "quantile")

    def __init__(self, quantile: float, size: int) -> None:
        self.quantile = quantile
        self._latencies: deque[float] = deque(maxlen=size)
        self._estimate: float | None = None
        self._fresh = 0  # latencies recorded since `_estimate` was computed

    def record(self, latency: float) -> None:
        """Add one attempt's latency in seconds (a negative or non-finite one is ignored)."""
        if latency >= 0.0 and math.isfinite(latency):
            self._latencies.append(latency)
            self._fresh += 1

    @property
    def samples(self) -> int:
        """How many latencies the window holds."""
        return len(self._latencies)

    def estimate(self) -> float | None:
        """The quantile of the window's latencies (nearest rank), ``None`` while empty."""
        if self._estimate is None or self._fresh >= _REFRESH_EVERY:
            ordered = sorted(self._latencies)
            if not ordered:
                return None
            rank = math.ceil(self.quantile / 100.0 * len(ordered))
            self._estimate = ordered[max(0, rank - 1)]
            self._fresh = 0
        return self._estimate


@dataclass(frozen=True, slots=True)
class TargetHedgeStatistics:
    """One target's hedging, as `Hedge.statistics` reports it.

    Attributes:
        samples: attempt latencies the estimate is made of (0 with a fixed ``after``).
        delay: the wait before a hedge now, in seconds; ``None`` while the estimate has fewer
            than ``min_samples`` latencies (no hedge is sent yet).
        hedges: extra attempts sent since creation.
        wins: calls whose answer came from an extra attempt.
        denied: extra attempts not sent because the retry budget, the circuit or the
            throttle refused them.
    """

    samples: int
    delay: float | None
    hedges: int
    wins: int
    denied: int


@dataclass(frozen=True, slots=True)
class HedgeStatistics:
    """A snapshot of a `Hedge`.

    Attributes:
        after: the setting, as given in seconds (fixed) or as ``"pNN"``.
        max_extra: extra attempts at most per attempt.
        targets: per target (HTTP host, or the operation name): its `TargetHedgeStatistics`.
    """

    after: float | str
    max_extra: int
    targets: dict[str, TargetHedgeStatistics]


class _Target:
    """What a `Hedge` keeps per target: its latency window and counts."""

    __slots__ = ("denied", "hedges", "window", "wins")

    def __init__(self, window: LatencyWindow | None) -> None:
        self.window = window
        self.hedges = 0
        self.wins = 0
        self.denied = 0


@final
class Hedge:
    """Hedged attempts: after ``after`` without an answer, send another copy of the attempt.

    The first usable answer (one the policy would not retry) wins; the other copies are
    cancelled and their responses closed. A failed answer while another copy is in flight
    waits for that copy; when every copy failed, the retry policy decides as usual. Only
    idempotent HTTP requests are hedged (GET, HEAD, OPTIONS, PUT, DELETE, TRACE, or any with an
    ``Idempotency-Key``); a coroutine is hedged because passing ``hedge=`` promises that it is
    idempotent. Every extra attempt is paid from the retry budget, like a retry, and none is
    sent while the circuit is not closed or the throttle sheds. docs/hedging.md.

    Args:
        after: a duration (``"50ms"``, ``0.05``), or ``"pNN"`` (``"p95"``, ``"p99.9"``): the
            target's observed attempt-latency quantile, estimated over its last ``window``
            attempts (`LatencyWindow`). No hedge is sent until ``min_samples`` latencies were
            observed.
        max_extra: extra attempts at most per attempt; the n-th is sent ``n * after`` after
            the attempt started.
        window: how many recent latencies a quantile is estimated from, per target.
        min_samples: latencies needed before a quantile ``after`` hedges.
        max_targets: targets whose estimate is kept; past it, the least recently used is
            forgotten.

    Raises:
        ConfigError: a value is out of range; the message names the field, the value and an
            accepted example.

    .. versionadded:: 0.5
    """

    __slots__ = (
        "__weakref__",
        "_lock",
        "_targets",
        "after",
        "max_extra",
        "max_targets",
        "min_samples",
        "quantile",
        "window",
    )

    after: float | None  # the fixed delay in seconds, or None for a quantile
    quantile: float | None  # the quantile in percent (95.0), or None for a fixed delay

    def __init__(
        self,
        after: Any = "p95",
        max_extra: int = 1,
        *,
        window: int = 256,
        min_samples: int = 20,
        max_targets: int = 1024,
    ) -> None:
        self.after, self.quantile = _parse_after(after)
        self.max_extra = _positive_int(max_extra, "max_extra", "1")
        self.window = _positive_int(window, "window", "256")
        self.min_samples = _positive_int(min_samples, "min_samples", "20")
        if self.min_samples > self.window:
            raise ConfigError(
                "min_samples", min_samples, f"must not exceed window ({self.window})", "20"
            )
        self.max_targets = _positive_int(max_targets, "max_targets", "1024")
        self._lock = threading.Lock()
        self._targets: OrderedDict[str, _Target] = OrderedDict()  # oldest use first
        after_fork_in_child(self)

    def _after_fork_in_child(self) -> None:
        self._lock = threading.Lock()

    def _target(self, target: str) -> _Target:
        """``target``'s state, created on first use; called under the lock."""
        state = self._targets.get(target)
        if state is None:
            quantile = self.quantile
            window = None if quantile is None else LatencyWindow(quantile, self.window)
            state = self._targets[target] = _Target(window)
            if len(self._targets) > self.max_targets:
                self._targets.popitem(last=False)
        else:
            self._targets.move_to_end(target)
        return state

    def delay(self, target: str) -> float | None:
        """The wait before hedging an attempt to ``target``; ``None``: do not hedge (yet)."""
        if self.after is not None:
            return self.after
        with self._lock:
            window = self._target(target).window
            assert window is not None  # a quantile hedge has a window per target
            if window.samples < self.min_samples:
                return None
            return window.estimate()

    def record(self, target: str, latency: float) -> None:
        """One attempt to ``target`` took ``latency`` seconds (or had run that long when it was
        cancelled: a lower bound of its latency). A fixed ``after`` keeps nothing."""
        if self.quantile is None:
            return
        with self._lock:
            window = self._target(target).window
            assert window is not None
            window.record(latency)

    def sent(self, target: str) -> None:
        """An extra attempt to ``target`` was sent."""
        with self._lock:
            self._target(target).hedges += 1

    def won(self, target: str) -> None:
        """An extra attempt's answer to ``target`` won its race."""
        with self._lock:
            self._target(target).wins += 1

    def denied(self, target: str) -> None:
        """An extra attempt to ``target`` was due but protection refused it."""
        with self._lock:
            self._target(target).denied += 1

    def statistics(self) -> HedgeStatistics:
        """A frozen snapshot: the settings and each target's estimate and counts."""
        with self._lock:
            targets = {
                name: TargetHedgeStatistics(
                    samples=0 if state.window is None else state.window.samples,
                    delay=self._delay_of(state),
                    hedges=state.hedges,
                    wins=state.wins,
                    denied=state.denied,
                )
                for name, state in self._targets.items()
            }
        after: float | str = self.after if self.after is not None else f"p{self.quantile:g}"
        return HedgeStatistics(after=after, max_extra=self.max_extra, targets=targets)

    def _delay_of(self, state: _Target) -> float | None:
        window = state.window
        if window is None:
            return self.after
        return window.estimate() if window.samples >= self.min_samples else None

    def __repr__(self) -> str:
        after = f"{self.after:g}s" if self.after is not None else f"p{self.quantile:g}"
        return f"<Hedge after={after} max_extra={self.max_extra}>"


def _parse_after(value: Any) -> tuple[float | None, float | None]:
    """``after`` as (fixed seconds, None) or (None, quantile in percent)."""
    if isinstance(value, str):
        match = _QUANTILE.fullmatch(value.strip())
        if match is not None:
            quantile = float(match.group(1))
            if not 0.0 < quantile < 100.0:
                raise ConfigError(
                    "after", value, "a quantile must lie between p0 and p100", _AFTER_EXAMPLE
                )
            return None, quantile
        if value.strip().lower().startswith("p"):
            raise ConfigError("after", value, "is not a quantile like p95", _AFTER_EXAMPLE)
    try:
        return bounded_duration(value, "after", _AFTER_EXAMPLE), None
    except ConfigError as error:
        raise ConfigError(
            "after", value, f"must be a duration or a quantile ({error.problem})", _AFTER_EXAMPLE
        ) from None


def _positive_int(value: Any, field: str, example: str) -> int:
    """``value`` if it is an integer >= 1; else a `ConfigError` naming ``field``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(field, shown(value), "must be an integer >= 1", example)
    return value
