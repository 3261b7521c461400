"""What the Retrier's front doors accept: misuse refused with the right call, and attempt wrappers.

``await retrier.call(fn)`` needs ``fn`` to return an awaitable, ``retrier.call_sync(fn)`` needs
it not to, and neither can retry a generator, whose body runs after the retrying is over. The
hot path pays one cheap test per call: the kind of callable is only looked at closely when what
it returned is suspect. Calling a coroutine or generator function runs none of its body, so
refusing its result is still refusing before any execution; only a synchronous function handed
to ``call()`` has run once when it is refused. A refusal is never retried.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from types import AsyncGeneratorType, CoroutineType, FunctionType, GeneratorType
from typing import Any, TypeVar

from .._core.redact import safe_repr

__all__ = [
    "SUSPECT_RESULTS",
    "Refused",
    "async_result_error",
    "bound_attempt",
    "check_callable",
    "check_decorated",
    "is_async",
    "operation_name",
    "refuse_async_result",
    "refuse_unawaitable",
    "sync_result_error",
]

T = TypeVar("T")


def operation_name(fn: object) -> str:
    """The telemetry label of ``fn``: its qualified name, without ``<locals>`` prefixes."""
    if type(fn) is FunctionType:  # the common case, asked on every call that retries
        name = fn.__qualname__
    else:
        target = fn.func if isinstance(fn, functools.partial) else fn
        try:
            name = str(getattr(target, "__qualname__", None) or type(target).__qualname__)
        except Exception:  # a callable whose attributes raise still gets a label
            name = type(target).__qualname__
    # "<locals>" qualnames are per-definition-site noise; keep the readable tail for labels.
    cut = name.rfind("<locals>.")
    return name if cut < 0 else name[cut + 9 :]


class Refused(BaseException):
    """Carries an error past the attempt handling: it is raised, never retried. A misuse
    `TypeError`, or what a ``retry_on`` predicate raised judging a hedged copy's answer
    (`hedging`), which ends the call as it does when it judges an attempt.

    A `BaseException` so that no ``retry_on`` (not even ``[TypeError]``) can match it; the
    drivers unwrap it and raise the error itself.
    """

    def __init__(self, error: Exception) -> None:
        super().__init__(error)
        self.error = error


def is_async(fn: object) -> bool:
    """Whether calling ``fn`` gives a coroutine: a coroutine function, or an object whose
    ``__call__`` is one (``inspect`` unwraps partials and bound methods itself)."""
    if inspect.iscoroutinefunction(fn):
        return True
    # An instance of a class with ``async def __call__``: the call itself is the coroutine.
    return not inspect.isroutine(fn) and inspect.iscoroutinefunction(type(fn).__call__)


def _generator_error(fn: object, door: str) -> TypeError | None:
    if inspect.isasyncgenfunction(fn):
        kind = "an async generator"
    elif inspect.isgeneratorfunction(fn):
        kind = "a generator"
    else:
        return None
    name = operation_name(fn)
    return TypeError(
        f"{door} cannot retry {name}: it is {kind} function, whose body runs while the "
        "caller iterates, after the retrying is over; retry a function that returns the "
        f"items instead (e.g. one that collects them into a list), or retry inside {name}"
    )


def check_callable(fn: object, door: str) -> None:
    """Refuse what is not a function to call (one cheap test per call on the hot path)."""
    if callable(fn):
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


def check_decorated(fn: object) -> None:
    """Refuse, at decoration time, what ``@retry`` could not retry (generator functions)."""
    check_callable(fn, "@retry")
    error = _generator_error(fn, "@retry")
    if error is not None:
        raise error


def _close(result: object) -> None:
    # A coroutine or generator that will never run: closed, so that Python does not warn that
    # it was never awaited. Its body has not started, so nothing of it ran.
    close = getattr(result, "close", None)
    if isinstance(result, (CoroutineType, GeneratorType)) and close is not None:
        close()


def sync_result_error(fn: object, result: object) -> TypeError:
    """What ``call()`` raises when ``fn`` returned something it cannot await."""
    _close(result)
    error = _generator_error(fn, "retrier.call()")
    if error is not None:
        return error
    name = operation_name(fn)
    return TypeError(
        f"retrier.call() awaits what {name} returns, but it returned "
        f"{type(result).__qualname__}, not an awaitable; call a synchronous function with "
        f"retrier.call_sync({name}, ...), or decorate it with @retry"
    )


#: The results that make ``call_sync()`` look closer: calling a coroutine function or a
#: generator function runs none of its body, so refusing then is still before any execution.
SUSPECT_RESULTS = frozenset({CoroutineType, GeneratorType, AsyncGeneratorType})


def async_result_error(fn: object, result: object) -> TypeError | None:
    """What ``call_sync()`` raises for a result of a `SUSPECT_RESULTS` type, if anything.

    A coroutine is always refused (it cannot be awaited here); a generator only when ``fn`` is
    a generator function (a plain function may well return a generator expression).
    """
    error = _generator_error(fn, "retrier.call_sync()")
    if error is None and not isinstance(result, CoroutineType):
        return None
    _close(result)
    if error is not None:
        return error
    name = operation_name(fn)
    what = (
        f"the coroutine function {name}" if is_async(fn) else f"{name}, which returned a coroutine"
    )
    return TypeError(
        f"retrier.call_sync() got {what}: it cannot be awaited here; use "
        f"await retrier.call({name}, ...) in async code, or decorate it with @retry "
        "(a coroutine function stays one)"
    )


def bound_attempt(fn: Callable[..., T], args: Any, kwargs: Any) -> Callable[[], T]:
    """One attempt of ``call()`` or ``call_sync()``: ``fn`` itself when it takes no arguments,
    else a `functools.partial`; neither adds a Python frame to the attempt. The drivers check
    what it returns (`refuse_unawaitable`, `refuse_async_result`)."""
    return functools.partial(fn, *args, **kwargs) if args or kwargs else fn


def refuse_unawaitable(fn: object, value: object) -> None:
    """Raise `Refused` if ``value``, what ``fn`` returned to an async driver, is not awaitable
    (the driver asks only about what is not a coroutine)."""
    if not inspect.isawaitable(value):
        raise Refused(sync_result_error(fn, value))


def refuse_async_result(fn: object, value: object) -> None:
    """Raise `Refused` if ``value``, what ``fn`` returned to a sync driver, is a coroutine or
    the generator of a generator function (the driver asks only about `SUSPECT_RESULTS`)."""
    error = async_result_error(fn, value)
    if error is not None:
        raise Refused(error)
