"""Groups 1 and 2: the success and failure paths of a trivial function, async and sync.

Every library is configured alike: 3 attempts, retry on any `Exception`, zero delay, no jitter,
and no telemetry (retrymw ``instruments=()``, stamina's on-retry hooks off, backoff
``logger=None``). The hand-written loop is the floor: the least a retry wrapper can cost. With
zero delay every library still yields between attempts (``asyncio.sleep(0)`` /
``time.sleep(0)``), and so does the floor.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

from ._harness import Case, Group, Mode, Prepared

__all__ = [
    "ATTEMPTS",
    "KEPT_PROMISES",
    "RESULT",
    "flaky_async",
    "flaky_sync",
    "groups",
    "retrymw_retrier",
]

ATTEMPTS = 3
RESULT = 42


async def ok_async() -> int:
    return RESULT


def ok_sync() -> int:
    return RESULT


def flaky_async(failures: int = 2) -> tuple[Callable[[], Awaitable[int]], list[int]]:
    """A coroutine function failing ``failures`` times, then succeeding, cyclically."""
    calls = [0]
    cycle = failures + 1

    async def flaky() -> int:
        calls[0] += 1
        if calls[0] % cycle:
            raise ValueError("transient")
        return RESULT

    return flaky, calls


def flaky_sync(failures: int = 2) -> tuple[Callable[[], int], list[int]]:
    """Sync twin of `flaky_async`."""
    calls = [0]
    cycle = failures + 1

    def flaky() -> int:
        calls[0] += 1
        if calls[0] % cycle:
            raise ValueError("transient")
        return RESULT

    return flaky, calls


async def floor_async(fn: Callable[[], Awaitable[Any]]) -> Any:
    """The hand-written retry loop: the floor any retry wrapper is measured against."""
    for attempt in range(1, ATTEMPTS + 1):
        try:
            return await fn()
        except Exception:
            if attempt == ATTEMPTS:
                raise
        await asyncio.sleep(0)
    return None  # pragma: no cover - unreachable


def floor_sync(fn: Callable[[], Any]) -> Any:
    """Sync twin of `floor_async`."""
    for attempt in range(1, ATTEMPTS + 1):
        try:
            return fn()
        except Exception:
            if attempt == ATTEMPTS:
                raise
        time.sleep(0)
    return None  # pragma: no cover - unreachable


# Two promises every retrymw success keeps, whatever it is configured with: the time stamped
# before the first attempt (a failure a call nested in this one already gave up on is final:
# retry at one layer) and the retry budget funded. `floor_kept_async` / `floor_kept_sync` keep
# them by hand: the least a retry wrapper with those promises can cost.
GAVE_UP_BELOW = "_gave_up_at"
KEPT_PROMISES = "hand-written loop, stamp and budget"


def _gave_up_below(error: Exception, since: int) -> bool:
    """Whether a call nested in this one stamped ``error`` as final after ``since``."""
    stamp = getattr(error, GAVE_UP_BELOW, None)
    return type(stamp) is int and stamp > since


async def floor_kept_async(fn: Callable[[], Awaitable[Any]], budget: Any) -> Any:
    """`floor_async` keeping the two promises (above): its stamp, and ``budget`` funded."""
    since = time.monotonic_ns()
    for attempt in range(1, ATTEMPTS + 1):
        try:
            result = await fn()
        except Exception as error:
            if attempt == ATTEMPTS or _gave_up_below(error, since):
                raise
        else:
            budget.record_success()
            return result
        await asyncio.sleep(0)
    return None  # pragma: no cover - unreachable


def floor_kept_sync(fn: Callable[[], Any], budget: Any) -> Any:
    """Sync twin of `floor_kept_async`."""
    since = time.monotonic_ns()
    for attempt in range(1, ATTEMPTS + 1):
        try:
            result = fn()
        except Exception as error:
            if attempt == ATTEMPTS or _gave_up_below(error, since):
                raise
        else:
            budget.record_success()
            return result
        time.sleep(0)
    return None  # pragma: no cover - unreachable


def retrymw_retrier(*, budget: str = "default", instruments: Any = ()) -> Any:
    """A `Retrier` with the common configuration; ``budget`` is default, off or generous."""
    from retrymw import Retrier, RetryBudget, RetryPolicy

    policy = RetryPolicy(attempts=ATTEMPTS, backoff="fixed", initial_delay=0)
    if budget == "default":
        return Retrier(policy, instruments=instruments)
    if budget == "off":
        return Retrier(policy, budget=None, instruments=instruments)
    # Generous: 3 tokens per success pays for the 2 retries of every failing-twice call.
    return Retrier(policy, budget=RetryBudget(ratio=3.0), instruments=instruments)


def _stamina_quiet() -> Any:
    import stamina
    import stamina.instrumentation

    stamina.instrumentation.set_on_retry_hooks([])
    return stamina


_STAMINA_WAITS = {"wait_initial": 0.0, "wait_max": 0.0, "wait_jitter": 0.0}


def _tenacity_kwargs() -> dict[str, Any]:
    import tenacity

    return {
        "stop": tenacity.stop_after_attempt(ATTEMPTS),
        "wait": tenacity.wait_none(),
        "reraise": True,
    }


def _checker(calls: list[int] | None, per_call: int) -> Callable[[Any], None]:
    def check(result: Any) -> None:
        if result != RESULT:
            raise AssertionError(f"expected {RESULT}, got {result!r}")
        if calls is not None and calls[0] != per_call:
            raise AssertionError(f"expected {per_call} attempts, saw {calls[0]}")

    return check


def _cases(mode: Mode, failing: bool) -> list[Case]:
    is_async = mode == "async"

    def target() -> tuple[Callable[[], Any], Callable[[Any], None]]:
        if not failing:
            return (ok_async if is_async else ok_sync), _checker(None, 1)
        fn, calls = flaky_async() if is_async else flaky_sync()
        return fn, _checker(calls, ATTEMPTS)

    def bare() -> Prepared:
        fn, check = target()
        return Prepared(op=fn, check=check)

    def floor() -> Prepared:
        fn, check = target()
        return Prepared(op=floor_async if is_async else floor_sync, args=(fn,), check=check)

    def floor_kept() -> Prepared:
        from retrymw import RetryBudget

        fn, check = target()
        op = floor_kept_async if is_async else floor_kept_sync
        return Prepared(op=op, args=(fn, RetryBudget()), check=check)

    def retrier_call(budget: str) -> Callable[[], Prepared]:
        def make() -> Prepared:
            fn, check = target()
            retrier = retrymw_retrier(budget=budget)
            return Prepared(
                op=retrier.call if is_async else retrier.call_sync, args=(fn,), check=check
            )

        return make

    def retrier_decorator(budget: str) -> Callable[[], Prepared]:
        def make() -> Prepared:
            fn, check = target()
            return Prepared(op=retrymw_retrier(budget=budget)(fn), check=check)

        return make

    def tenacity_object() -> Prepared:
        import tenacity

        fn, check = target()
        kind = tenacity.AsyncRetrying if is_async else tenacity.Retrying
        return Prepared(op=kind(**_tenacity_kwargs()), args=(fn,), check=check)

    def tenacity_decorator() -> Prepared:
        import tenacity

        fn, check = target()
        return Prepared(op=tenacity.retry(**_tenacity_kwargs())(fn), check=check)

    def stamina_decorator() -> Prepared:
        stamina = _stamina_quiet()
        fn, check = target()
        wrapped = stamina.retry(on=Exception, attempts=ATTEMPTS, **_STAMINA_WAITS)(fn)
        return Prepared(op=wrapped, check=check)

    def stamina_caller() -> Prepared:
        stamina = _stamina_quiet()
        fn, check = target()
        kind = stamina.AsyncRetryingCaller if is_async else stamina.RetryingCaller
        caller = kind(attempts=ATTEMPTS, **_STAMINA_WAITS).on(Exception)
        return Prepared(op=caller, args=(fn,), check=check)

    def backoff_decorator() -> Prepared:
        import backoff

        fn, check = target()
        wrapped = backoff.on_exception(
            backoff.constant,
            Exception,
            max_tries=ATTEMPTS,
            jitter=None,
            logger=None,
            interval=0,
        )(fn)
        return Prepared(op=wrapped, check=check)

    call = "Retrier.call" if is_async else "Retrier.call_sync"
    tenacity_name = "tenacity AsyncRetrying" if is_async else "tenacity Retrying"
    caller_name = "stamina AsyncRetryingCaller" if is_async else "stamina RetryingCaller"
    floor_case = Case("hand-written loop", "hand-written", floor, mode, baseline=failing)
    if failing:
        # A bare call cannot recover from a failure: the hand-written loop is the baseline.
        cases = [
            floor_case,
            Case(f"{call} budget=None", "retrymw", retrier_call("off"), mode),
            Case(f"{call} budget(ratio=3)", "retrymw", retrier_call("generous"), mode),
            Case("@Retrier budget=None", "retrymw", retrier_decorator("off"), mode),
        ]
    else:
        bare_name = "bare await f()" if is_async else "bare f()"
        cases = [
            Case(bare_name, "bare", bare, mode, baseline=True),
            floor_case,
            Case(KEPT_PROMISES, "hand-written", floor_kept, mode),
            Case(call, "retrymw", retrier_call("default"), mode),
            Case(f"{call} budget=None", "retrymw", retrier_call("off"), mode),
            Case("@Retrier", "retrymw", retrier_decorator("default"), mode),
            Case("@Retrier budget=None", "retrymw", retrier_decorator("off"), mode),
        ]
    cases += [
        Case(tenacity_name, "tenacity", tenacity_object, mode),
        Case("@tenacity.retry", "tenacity", tenacity_decorator, mode),
        Case("@stamina.retry", "stamina", stamina_decorator, mode),
        Case(caller_name, "stamina", stamina_caller, mode),
        Case("@backoff.on_exception", "backoff", backoff_decorator, mode),
    ]
    return cases


def groups(quick: bool) -> list[Group]:
    """The success and failure groups (their size does not depend on ``quick``)."""
    return [
        Group(
            "success-async",
            "Success path, coroutine",
            "`await` a trivial coroutine that returns at once, through each library.",
            _cases("async", failing=False),
        ),
        Group(
            "success-sync",
            "Success path, function",
            "Call a trivial function that returns at once, through each library.",
            _cases("sync", failing=False),
        ),
        Group(
            "failure-async",
            "Failure path, coroutine",
            "A coroutine fails twice (`ValueError`), then succeeds; zero delay. retrymw's default "
            "cross-call budget would throttle a workload where every call retries twice, so it is "
            "off or generous (ratio=3).",
            _cases("async", failing=True),
        ),
        Group(
            "failure-sync",
            "Failure path, function",
            "A function fails twice, then succeeds; zero delay (`time.sleep(0)` between attempts).",
            _cases("sync", failing=True),
        ),
    ]
