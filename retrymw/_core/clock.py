"""Time as an injected effect: the `Clock` protocol, the system clock and ``instant()`` mode."""

from __future__ import annotations

import asyncio
import functools
import inspect
import sys
import time
from collections.abc import Awaitable, Callable
from contextvars import ContextVar, Token
from typing import Any, ParamSpec, Protocol, TypeVar, runtime_checkable

import anyio
import sniffio

__all__ = [
    "SYSTEM_CLOCK",
    "Clock",
    "SystemClock",
    "async_waiter",
    "instant",
    "replace_default_clock",
    "set_instant_everywhere",
    "waits_disabled",
]

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

    def sleep(self, seconds: float) -> Awaitable[None]:
        """Sleep without blocking the event loop (asyncio or trio): an ``async def`` will do."""
        ...

    def sleep_sync(self, seconds: float) -> None:
        """Block the current thread."""
        ...


class SystemClock:
    """The real clock: `time.monotonic`, `time.time`, `anyio.sleep` and `time.sleep`.

    Every object built without ``clock=`` holds this one. While a test has replaced the default
    clock (`retrymw.testing.use_clock`, the pytest plugin's ``retrymw_clock``), it asks that
    clock instead, so objects created at import time follow the test's virtual time too.
    """

    __slots__ = ()

    def now(self) -> float:
        """See `Clock.now`."""
        clock = _default_clock
        return time.monotonic() if clock is None else clock.now()

    def wall(self) -> float:
        """See `Clock.wall`."""
        clock = _default_clock
        return time.time() if clock is None else clock.wall()

    def sleep(self, seconds: float) -> Awaitable[None]:
        """See `Clock.sleep` (the awaitable of the clock that does the sleeping)."""
        clock = _default_clock
        if clock is not None:
            return clock.sleep(seconds)
        # asyncio's own sleep where asyncio runs: anyio's looks its backend up on every call,
        # about a microsecond per wait (`make bench`, failure path). Of the libraries anyio
        # runs on, only trio is not asyncio: while trio is not even imported, asyncio runs this
        # wait, and the sniffing (a third of a microsecond) is left for when trio is.
        if "trio" not in sys.modules or sniffio.current_async_library() == "asyncio":
            return asyncio.sleep(seconds)
        return anyio.sleep(seconds)

    def sleep_sync(self, seconds: float) -> None:
        """See `Clock.sleep_sync`."""
        clock = _default_clock
        if clock is None:
            time.sleep(seconds)
        else:
            clock.sleep_sync(seconds)

    def __repr__(self) -> str:
        return "<SystemClock>"


SYSTEM_CLOCK = SystemClock()

_WAITS_DISABLED: ContextVar[bool] = ContextVar("retrymw_waits_disabled", default=False)

# The testing kit's process-wide switches. Not ContextVars: test runners (pytest-asyncio,
# anyio's plugin) run a test in a context copied before its fixtures ran, or in a long-lived
# runner's own context, so only a process-wide switch reaches every task of the test.
_default_clock: Clock | None = None
_instant_everywhere = False


def replace_default_clock(clock: Clock | None) -> Clock | None:
    """Make `SystemClock` delegate to ``clock`` (``None``: real time again); return the old one."""
    global _default_clock
    previous = _default_clock
    _default_clock = None if isinstance(clock, SystemClock) else clock
    return previous


def set_instant_everywhere(on: bool) -> bool:
    """Turn ``instant()`` on for every task and thread of the process; return the old setting."""
    global _instant_everywhere
    previous = _instant_everywhere
    _instant_everywhere = on
    return previous


def waits_disabled() -> bool:
    """Whether ``instant()`` is active in the current context (or everywhere, for a test)."""
    return _instant_everywhere or _WAITS_DISABLED.get()


def async_waiter(clock: Clock) -> Callable[[float], Awaitable[None]] | None:
    """What a retry's wait awaits on ``clock`` now: ``None`` under ``instant()``."""
    if _instant_everywhere or _WAITS_DISABLED.get():
        return None
    return clock.sleep


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
