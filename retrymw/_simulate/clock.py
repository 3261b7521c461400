"""The simulators' virtual clock: `SimClock`, whose async ``sleep`` hands control back to the
discrete-event loop that steps the calls' coroutines, and `slept_for`, what that loop reads.

Both simulators (the retry storm of `engine` and the rate-limited server of `ratelimit`) run
real `Retrier` objects on it: nothing really sleeps, and a call resumes when the loop's virtual
time reaches its wake-up.
"""

from __future__ import annotations

from collections.abc import Generator

from ..testing import FakeClock

__all__ = ["SimClock", "Suspend", "slept_for"]


class Suspend:
    """What the simulated clock's ``sleep`` awaits: the event loop resumes the call later."""

    __slots__ = ("seconds",)

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def __await__(self) -> Generator[Suspend, None, None]:
        yield self


class SimClock(FakeClock):
    """A `FakeClock` whose async ``sleep`` hands control back to the event loop."""

    async def sleep(self, seconds: float) -> None:
        """Suspend the calling coroutine for ``seconds`` of virtual time."""
        await Suspend(seconds)

    def sleep_sync(self, seconds: float) -> None:
        """Blocking sleeps cannot be interleaved: the simulator only drives async calls."""
        raise RuntimeError("the simulator drives Retrier.call, not call_sync")

    def jump(self, to: float) -> None:
        """Move to ``to`` (never backwards); only the single-threaded event loop calls this."""
        self._now = max(self._now, to)


def slept_for(awaited: object) -> float:
    """The virtual seconds a stepped call's coroutine asked to sleep, from what it yielded
    (``coroutine.send(None)``); the clock's `Suspend` is all it may await."""
    if not isinstance(awaited, Suspend):
        raise TypeError(f"simulate: the retrier awaited {awaited!r}, not the clock")
    return awaited.seconds
