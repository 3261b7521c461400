"""Time as an injected effect: the `Clock` protocol, the system clock and ``instant()`` mode."""

from __future__ import annotations

import functools
import inspect
import time
from collections.abc import Callable
from contextvars import ContextVar, Token
from typing import Any, ParamSpec, Protocol, TypeVar, runtime_checkable

import anyio

__all__ = ["SYSTEM_CLOCK", "Clock", "SystemClock", "instant", "waits_disabled"]

P = ParamSpec("P")
T = TypeVar("T")


@runtime_checkable
class Clock(Protocol):
    """Where retrymw reads time and sleeps. `retrymw.testing.FakeClock` implements it."""

    def now(self) -> float:
        """Monotonic seconds, for durations and deadlines."""
        ...

    def wall(self) -> float:
        """Unix time in seconds, for HTTP dates such as ``Retry-After``."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Sleep without blocking the event loop (asyncio or trio)."""
        ...

    def sleep_sync(self, seconds: float) -> None:
        """Block the current thread."""
        ...


class SystemClock:
    """The real clock: `time.monotonic`, `time.time`, `anyio.sleep` and `time.sleep`."""

    __slots__ = ()

    def now(self) -> float:
        """See `Clock.now`."""
        return time.monotonic()

    def wall(self) -> float:
        """See `Clock.wall`."""
        return time.time()

    async def sleep(self, seconds: float) -> None:
        """See `Clock.sleep`."""
        await anyio.sleep(seconds)

    def sleep_sync(self, seconds: float) -> None:
        """See `Clock.sleep_sync`."""
        time.sleep(seconds)

    def __repr__(self) -> str:
        return "<SystemClock>"


SYSTEM_CLOCK = SystemClock()

_WAITS_DISABLED: ContextVar[bool] = ContextVar("retrymw_waits_disabled", default=False)


def waits_disabled() -> bool:
    """Whether ``instant()`` is active in the current context."""
    return _WAITS_DISABLED.get()


class instant:
    """Make every retry wait 0 s inside the block; also a decorator for sync and async functions.

    Decisions, attempts and events are unchanged; only the sleeping is skipped. The switch is a
    `ContextVar`, so it stays inside the current task or thread and the tasks it starts.

    .. versionadded:: 0.1
    """

    __slots__ = ("_tokens",)

    def __init__(self) -> None:
        self._tokens: list[Token[bool]] = []

    def __enter__(self) -> None:
        self._tokens.append(_WAITS_DISABLED.set(True))

    def __exit__(self, *exc_info: object) -> None:
        _WAITS_DISABLED.reset(self._tokens.pop())

    def __call__(self, fn: Callable[P, T]) -> Callable[P, T]:
        """Decorate ``fn`` so that its body runs in instant mode."""
        if inspect.iscoroutinefunction(fn):

            @functools.wraps(fn)
            async def run_async(*args: P.args, **kwargs: P.kwargs) -> Any:
                with instant():
                    return await fn(*args, **kwargs)

            return run_async  # type: ignore[return-value]

        @functools.wraps(fn)
        def run(*args: P.args, **kwargs: P.kwargs) -> T:
            with instant():
                return fn(*args, **kwargs)

        return run
