"""The default clock for a test (`use_clock`) and `LoopClock`, the asyncio loop's virtual time."""

from __future__ import annotations

import asyncio
import selectors
from typing import Any

from .._core.clock import Clock, replace_default_clock
from ._fakes import FakeClock

__all__ = ["LoopClock", "use_clock"]


class use_clock:
    """Make every retrymw object that was built without ``clock=`` read and sleep on ``clock``.

    Process-wide for the duration of the block (test runners run a test in a context copied
    before its fixtures, so a `contextvars.ContextVar` would not reach every task). Objects
    created at import time follow it too. Nests; the previous default comes back on exit.

    Args:
        clock: a `FakeClock`, a `LoopClock` or any `retrymw.Clock`.

    .. versionadded:: 0.2
    """

    __slots__ = ("_clock", "_previous")

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._previous: list[Clock | None] = []

    def __enter__(self) -> Clock:
        self._previous.append(replace_default_clock(self._clock))
        return self._clock

    def __exit__(self, *exc_info: object) -> None:
        replace_default_clock(self._previous.pop())


class LoopClock(FakeClock):
    """A `FakeClock` that is also the asyncio event loop's clock once attached to it.

    While attached, ``loop.time()`` reads this clock's virtual time and the loop jumps that time
    forward whenever every task waits on a timer (trio's ``MockClock(autojump_threshold=0)``,
    for asyncio). So ``asyncio.sleep(5)`` in the code under test and a retrymw backoff wait
    interleave exactly as they would in real time, and both finish at once. Detached (sync
    code, trio), it is a plain `FakeClock`.

    Args:
        start: the initial virtual monotonic time.
        wall_start: the Unix time matching ``start``.
        autojump_threshold: real seconds the loop waits for I/O before jumping; keep 0 unless
            the test talks to a real server (then a few milliseconds lets its answers land).

    .. versionadded:: 0.2
    """

    def __init__(
        self,
        start: float = 0.0,
        *,
        wall_start: float = 1_700_000_000.0,
        autojump_threshold: float = 0.0,
    ) -> None:
        super().__init__(start, wall_start=wall_start)
        self.autojump_threshold = autojump_threshold
        self._loop: asyncio.AbstractEventLoop | None = None
        self._selector: Any = None

    @property
    def attached(self) -> bool:
        """Whether an event loop runs on this clock."""
        return self._loop is not None

    def attach(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        """Run ``loop`` (the running loop by default) on this clock's virtual time.

        Raises:
            TypeError: the loop has no selector to drive (a proactor loop, uvloop).
            RuntimeError: another loop is attached already.
        """
        loop = loop if loop is not None else asyncio.get_running_loop()
        if self._loop is loop:
            return
        if self._loop is not None:
            raise RuntimeError("LoopClock: already attached to another event loop")
        selector = getattr(loop, "_selector", None)
        if not isinstance(selector, selectors.BaseSelector):
            raise TypeError(
                f"LoopClock: {type(loop).__name__} has no selector to drive; use the default "
                "asyncio loop (asyncio.SelectorEventLoop), or a FakeClock"
            )
        # Keep the loop's timeline continuous: timers scheduled before attaching stay in place.
        offset = loop.time() - self._now
        loop.time = lambda: self._now + offset  # type: ignore[method-assign]
        loop._selector = _AutojumpSelector(selector, self)  # type: ignore[attr-defined]
        self._loop, self._selector = loop, selector

    def detach(self) -> None:
        """Give the loop back its real clock and selector."""
        loop, self._loop = self._loop, None
        if loop is not None:
            del loop.time
            loop._selector = self._selector  # type: ignore[attr-defined]
            self._selector = None

    async def sleep(self, seconds: float) -> None:
        """Record the sleep; on the attached loop, wait for virtual time to get there."""
        loop = self._loop
        if loop is None or _running_loop() is not loop:
            await super().sleep(seconds)
            return
        with self._lock:
            self.sleeps.append(seconds)
        await asyncio.sleep(seconds)

    def _jump(self, seconds: float) -> None:
        with self._lock:
            self._now += seconds

    def __repr__(self) -> str:
        state = "attached" if self._loop is not None else "detached"
        return f"<LoopClock now={self._now:.6g} sleeps={len(self.sleeps)} {state}>"


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


class _AutojumpSelector:
    """Wraps the loop's selector: a wait with nothing ready jumps virtual time instead."""

    def __init__(self, inner: selectors.BaseSelector, clock: LoopClock) -> None:
        self._inner = inner
        self._clock = clock

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        """Poll for I/O; if none comes within the threshold, jump to the next timer."""
        if timeout is None or timeout <= 0:
            # No timer pending (only I/O or other threads can wake the loop), or none to wait.
            return self._inner.select(timeout)
        threshold = self._clock.autojump_threshold
        events = self._inner.select(min(timeout, threshold))
        if not events:
            # Virtual time never flows by itself: idle means "skip to the next timer".
            self._clock._jump(timeout)
        return events

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)
