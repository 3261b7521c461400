"""Test without sleeping: `FakeClock`, `RecordingInstrument` and `instant`.

These ship with the package so that users test their own retrying code the way retrymw's suite
does: in virtual time, with every event recorded.
"""

from __future__ import annotations

import threading
from typing import Any

import anyio.lowlevel

from .._core.clock import instant
from .._core.events import (
    AttemptFinished,
    AttemptStarted,
    BreakerStateChanged,
    CallFinished,
    CallStarted,
    FailoverFinished,
    FailoverStarted,
    RetryDenied,
    RetryScheduled,
)
from .._core.instruments import Instrument

__all__ = ["FakeClock", "RecordingInstrument", "instant"]


class FakeClock:
    """A virtual clock: sleeping advances time at once and records the delay.

    Args:
        start: the initial monotonic time.
        wall_start: the Unix time matching ``start`` (for HTTP dates in ``Retry-After``).

    Attributes:
        sleeps: every delay slept, in order, from both `sleep` and `sleep_sync`.

    .. versionadded:: 0.1
    """

    def __init__(self, start: float = 0.0, *, wall_start: float = 1_700_000_000.0) -> None:
        self._now = float(start)
        self._wall_offset = wall_start - self._now
        self._lock = threading.Lock()
        self.sleeps: list[float] = []

    def now(self) -> float:
        """Virtual monotonic time."""
        return self._now

    def wall(self) -> float:
        """Virtual Unix time, moving with `now`."""
        return self._now + self._wall_offset

    def advance(self, seconds: float) -> None:
        """Move virtual time forward by ``seconds`` without recording a sleep."""
        if seconds < 0:
            raise ValueError(f"seconds: cannot go back in time; got {seconds!r}, expected e.g. 1.5")
        with self._lock:
            self._now += seconds

    async def sleep(self, seconds: float) -> None:
        """Record the sleep, advance virtual time, and yield once so cancellation can land."""
        self.sleep_sync(seconds)
        await anyio.lowlevel.checkpoint()

    def sleep_sync(self, seconds: float) -> None:
        """Record the sleep and advance virtual time; never blocks."""
        with self._lock:
            self.sleeps.append(seconds)
            self._now += seconds

    def __repr__(self) -> str:
        return f"<FakeClock now={self._now:.6g} sleeps={len(self.sleeps)}>"


class RecordingInstrument(Instrument):
    """Keeps every event it receives, in order, in `events`.

    .. versionadded:: 0.1
    """

    def __init__(self) -> None:
        self.events: list[Any] = []

    def call_started(self, event: CallStarted, /) -> None:
        """Record the event."""
        self.events.append(event)

    def attempt_started(self, event: AttemptStarted, /) -> None:
        """Record the event."""
        self.events.append(event)

    def attempt_finished(self, event: AttemptFinished, /) -> None:
        """Record the event."""
        self.events.append(event)

    def retry_scheduled(self, event: RetryScheduled, /) -> None:
        """Record the event."""
        self.events.append(event)

    def retry_denied(self, event: RetryDenied, /) -> None:
        """Record the event."""
        self.events.append(event)

    def call_finished(self, event: CallFinished, /) -> None:
        """Record the event."""
        self.events.append(event)

    def breaker_state_changed(self, event: BreakerStateChanged, /) -> None:
        """Record the event."""
        self.events.append(event)

    def failover_started(self, event: FailoverStarted, /) -> None:
        """Record the event."""
        self.events.append(event)

    def failover_finished(self, event: FailoverFinished, /) -> None:
        """Record the event."""
        self.events.append(event)

    def of_type(self, kind: type[Any]) -> list[Any]:
        """Return the recorded events of one type, in order."""
        return [event for event in self.events if isinstance(event, kind)]

    def __repr__(self) -> str:
        return f"<RecordingInstrument events={len(self.events)}>"
