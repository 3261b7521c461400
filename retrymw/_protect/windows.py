"""The sliding windows a `CircuitBreaker` computes its failure rate over.

`CountWindow` holds the last ``size`` verdicts in a ring; `TimeWindow` those of the last
``duration`` seconds, in ten buckets. Both keep running ``calls`` and ``failures`` totals, so
reading the rate costs nothing. They are plain data structures with no lock and no policy of
their own: the breaker in `breaker` holds its lock around them and decides what the rate means.
"""

from __future__ import annotations

import math

from .._core.clock import Clock

__all__ = ["CountWindow", "TimeWindow"]

_TIME_SLOTS = 10  # buckets of a time-based window; its edge is accurate to window / 10


class CountWindow:
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


class TimeWindow:
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
