"""What the Retrier's front doors accept: misuse refused with the right call, and attempt wrappers.

``await retrier.call(fn)`` needs ``fn`` to return an awaitable, ``retrier.call_sync(fn)`` needs
it not to, and neither can retry a generator, whose body runs after the retrying is over. What
can be told before any execution is refused then; what only shows in ``fn``'s return value is
refused at the first return, and never retried.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable
from types import CoroutineType
from typing import Any, TypeVar

from .redact import safe_repr

__all__ = [
    "Refused",
    "async_attempt",
    "check_callable",
    "coroutine_result_error",
    "is_async",
    "operation_name",
    "sync_attempt",
    "sync_result_error",
]

T = TypeVar("T")


def operation_name(fn: object) -> str:
    """The telemetry label of ``fn``: its qualified name, without ``<locals>`` prefixes."""
    target = fn.func if isinstance(fn, functools.partial) else fn
    name = getattr(target, "__qualname__", None) or type(target).__qualname__
    # "<locals>" qualnames are per-definition-site noise; keep the readable tail for labels.
    return str(name).rsplit("<locals>.", 1)[-1]


class Refused(BaseException):
    """Carries a misuse `TypeError` past the attempt handling: it is raised, never retried.

    A `BaseException` so that no ``retry_on`` (not even ``[TypeError]``) can match it; the
    drivers unwrap it and raise the `TypeError` itself.
    """

    def __init__(self, error: TypeError) -> None:
        super().__init__(error)
        self.error = error


def is_async(fn: object) -> bool:
    """Whether calling ``fn`` gives a coroutine: a coroutine function, or an object whose
    ``__call__`` is one (``inspect`` unwraps partials and bound methods itself)."""
    if inspect.iscoroutinefunction(fn):
        return True
    # An instance of a class with ``async def __call__``: the call itself is the coroutine.
    return not inspect.isroutine(fn) and inspect.iscoroutinefunction(type(fn).__call__)


def check_callable(fn: object, door: str) -> None:
    """Refuse, before the first execution, what no attempt could run or retry."""
    if callable(fn):
        if inspect.isasyncgenfunction(fn) or inspect.isgeneratorfunction(fn):
            kind = "an async generator" if inspect.isasyncgenfunction(fn) else "a generator"
            name = operation_name(fn)
            raise TypeError(
                f"{door} cannot retry {name}: it is {kind} function, whose body runs while the "
                "caller iterates, after the retrying is over; retry a function that returns the "
                f"items instead (e.g. one that collects them into a list), or retry inside {name}"
            )
        return
    if isinstance(fn, CoroutineType):
        name = fn.__qualname__
        fn.close()  # it will never run: close it rather than warn "never awaited"
        raise TypeError(
            f"{door} got the coroutine object {name}(...), which can only run once; pass the "
            f"coroutine function and its arguments so that each attempt gets a fresh one: "
            f"await retrier.call({name}, *args)"
        )
    raise TypeError(
        f"{door} needs a function to call, got {safe_repr(fn, 80)}; pass the function and "
        "its arguments: await retrier.call(fetch, url) or retrier.call_sync(fetch, url)"
    )


def sync_result_error(fn: object, result: object) -> TypeError:
    name = operation_name(fn)
    return TypeError(
        f"retrier.call() awaits what {name} returns, but it returned "
        f"{type(result).__qualname__}, not an awaitable; call a synchronous function with "
        f"retrier.call_sync({name}, ...), or decorate it with @retry"
    )


def coroutine_result_error(fn: object, result: CoroutineType[Any, Any, Any]) -> TypeError:
    result.close()  # never awaited, on purpose: no "coroutine was never awaited" warning
    name = operation_name(fn)
    return TypeError(
        f"retrier.call_sync() got a coroutine from {name}, which it cannot await; use "
        f"await retrier.call({name}, ...) in async code, or decorate it with @retry"
    )


def async_attempt(
    fn: Callable[..., Awaitable[T]], args: Any, kwargs: Any
) -> Callable[[], Awaitable[T]]:
    """One attempt of ``call()``: ``fn(*args, **kwargs)``, awaited once it is known awaitable."""

    async def attempt() -> T:
        result = fn(*args, **kwargs)
        if not isinstance(result, CoroutineType) and not inspect.isawaitable(result):
            raise Refused(sync_result_error(fn, result))
        return await result

    return attempt


def sync_attempt(fn: Callable[..., T], args: Any, kwargs: Any) -> Callable[[], T]:
    """One attempt of ``call_sync()``: ``fn(*args, **kwargs)``, refused if it is a coroutine."""

    def attempt() -> T:
        result = fn(*args, **kwargs)
        if isinstance(result, CoroutineType):
            raise Refused(coroutine_result_error(fn, result))
        return result

    return attempt
