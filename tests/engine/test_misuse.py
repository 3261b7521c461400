"""Misuse of the Retrier is refused early, with a message that names the right call.

Before: ``await retrier.call(sync_fn)`` ran ``sync_fn`` three times and then raised TypeError;
``call_sync(async_fn)`` "succeeded" with an unawaited coroutine; ``@retry`` on an async
generator silently never retried; bare ``@retry`` raised TypeError.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from retrymw import CallFinished, ConfigError, Retrier, RetryPolicy, retry
from retrymw.testing import FakeClock, RecordingInstrument, instant

pytestmark = pytest.mark.anyio


class Counter:
    def __init__(self) -> None:
        self.calls = 0


@pytest.fixture(
    params=[pytest.param(False, id="plain-path"), pytest.param(True, id="instrumented")]
)
def retrier(request: pytest.FixtureRequest, clock: FakeClock) -> Retrier:
    """A retrier on the plain path (no instruments) or the full one (a recorder listens)."""
    instruments = (RecordingInstrument(),) if request.param else ()
    # retry_on names TypeError: even so, a refusal is never retried.
    policy = RetryPolicy(retry_on=[TypeError, ConnectionError])
    return Retrier(policy, clock=clock, instruments=instruments, budget=None)


def _finished(retrier: Retrier) -> list[CallFinished]:
    return [
        event
        for instrument in retrier._dispatch.instruments
        if isinstance(instrument, RecordingInstrument)
        for event in instrument.of_type(CallFinished)
    ]


async def test_call_refuses_a_sync_function_at_its_first_return(retrier: Retrier) -> None:
    """call(sync_fn) runs it once, then says to use call_sync; no retry, no sleep."""
    count = Counter()

    def load_rows() -> int:
        count.calls += 1
        return 7

    with pytest.raises(TypeError, match=r"retrier\.call_sync\(load_rows, \.\.\.\)"):
        await retrier.call(load_rows)  # type: ignore[arg-type]
    assert count.calls == 1
    assert retrier.clock.sleeps == []  # type: ignore[attr-defined]
    finished = _finished(retrier)
    assert len(finished) == len(retrier._dispatch.instruments)  # one call, if anyone listens
    for event in finished:
        assert (event.outcome, event.error_type, event.attempts) == ("failure", "TypeError", 1)


async def test_call_still_takes_callables_that_return_awaitables(clock: FakeClock) -> None:
    """A lambda or a plain function returning a coroutine is fine, and is retried as usual."""
    count = Counter()

    async def fetch(value: int) -> int:
        count.calls += 1
        if count.calls < 3:
            raise ConnectionError("reset")
        return value

    retrier = Retrier(RetryPolicy(), clock=clock, instruments=(), budget=None)
    assert await retrier.call(lambda: fetch(5)) == 5
    assert count.calls == 3


async def test_call_sync_refuses_a_coroutine_function_before_running_it(retrier: Retrier) -> None:
    """call_sync(async_fn) never runs it and points to await retrier.call()."""
    count = Counter()

    async def fetch() -> int:
        count.calls += 1
        return 1

    class Client:
        async def __call__(self) -> int:
            count.calls += 1
            return 1

    with pytest.raises(TypeError, match=r"await retrier\.call\(fetch, \.\.\.\)"):
        retrier.call_sync(fetch)  # type: ignore[unused-coroutine]
    with pytest.raises(TypeError, match="coroutine function"):
        retrier.call_sync(Client())  # type: ignore[unused-coroutine]
    assert count.calls == 0


async def test_call_sync_refuses_a_returned_coroutine(retrier: Retrier) -> None:
    """A sync callable that returns a coroutine is refused at once; the coroutine is closed."""
    count = Counter()

    async def fetch() -> int:
        count.calls += 1
        return 1

    calls = Counter()

    def wrapper() -> Any:
        calls.calls += 1
        return fetch()

    # filterwarnings=error: a "coroutine was never awaited" warning would fail the test.
    with pytest.raises(TypeError, match=r"got .*wrapper, which returned a coroutine"):
        retrier.call_sync(wrapper)
    assert (calls.calls, count.calls) == (1, 0)


async def test_a_coroutine_object_is_refused(retrier: Retrier) -> None:
    """call(fetch()) instead of call(fetch): refused, closed, and the fix is named, before
    anything runs. Before, with an instrument that hears of starts (OpenTelemetry's), the
    full path called it: ``TypeError: 'coroutine' object is not callable``, retried as the
    policy's TypeError, and the coroutine never closed ("was never awaited")."""

    async def fetch() -> int:
        return 1

    coroutine = fetch()
    with pytest.raises(TypeError, match=r"pass the coroutine function.*retrier\.call\(.*fetch"):
        await retrier.call(coroutine)  # type: ignore[arg-type]
    assert inspect.getcoroutinestate(coroutine) == inspect.CORO_CLOSED
    with pytest.raises(TypeError, match="needs a function to call, got 42"):
        await retrier.call(42)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="needs a function to call"):
        retrier.call_sync("fetch")  # type: ignore[arg-type]
    assert retrier.clock.sleeps == []  # type: ignore[attr-defined]
    assert _finished(retrier) == []  # refused before the call began


async def test_generators_are_refused_before_anything_runs(clock: FakeClock) -> None:
    """A generator's body runs while the caller iterates: @retry, call and call_sync refuse it."""

    async def pages() -> AsyncIterator[int]:
        yield 1

    def rows() -> Iterator[int]:
        yield 1

    retrier = Retrier(RetryPolicy(), clock=clock, instruments=(), budget=None)
    with pytest.raises(TypeError, match="@retry cannot retry pages: it is an async generator"):
        retry(attempts=3)(pages)
    with pytest.raises(TypeError, match="@retry cannot retry rows: it is a generator"):
        retry(rows)
    with pytest.raises(TypeError, match="collects them into a list"):
        await retrier.call(pages)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"retrier\.call_sync\(\) cannot retry rows"):
        retrier.call_sync(rows)


async def test_bare_retry_is_retry_with_the_default_policy() -> None:
    """@retry without parentheses decorates, keeps coroutine functions async, and retries."""
    count = Counter()

    @retry
    async def fetch(value: int) -> int:
        count.calls += 1
        if count.calls < 3:
            raise ConnectionError("reset")
        return value

    @retry
    def load(value: int) -> int:
        count.calls += 1
        if count.calls < 5:
            raise ConnectionError("reset")
        return value

    assert inspect.iscoroutinefunction(fetch)
    assert fetch.__name__ == "fetch"
    with instant():
        assert await fetch(4) == 4
        assert load(6) == 6
    assert count.calls == 5


async def test_decorating_an_async_callable_object_keeps_it_async() -> None:
    """An object with ``async def __call__`` is decorated as a coroutine function."""

    class Fetch:
        def __init__(self) -> None:
            self.calls = 0

        async def __call__(self) -> str:
            self.calls += 1
            if self.calls < 2:
                raise ConnectionError("reset")
            return "ok"

    target = Fetch()
    decorated = retry()(target)
    assert inspect.iscoroutinefunction(decorated)
    with instant():
        assert await decorated() == "ok"
    assert target.calls == 2


def test_retry_with_a_positional_non_function_names_the_fix() -> None:
    """retry(policy) or retry(3) is refused with the right spelling."""
    with pytest.raises(TypeError, match=r"for a RetryPolicy use Retrier\(policy\)"):
        retry(RetryPolicy())  # type: ignore[call-overload]
    with pytest.raises(TypeError, match=r"keywords, as in @retry\(attempts=5\)"):
        retry(3)  # type: ignore[call-overload]


def test_bare_retrier_decorator_names_the_fix() -> None:
    """@Retrier without parentheses is a ConfigError that says how to decorate."""

    def fetch() -> None:
        return None

    with pytest.raises(ConfigError, match=r"use @Retrier\(\) or @retry"):
        Retrier(fetch)  # type: ignore[arg-type]


def test_a_plain_function_may_return_a_generator(retrier: Retrier) -> None:
    """Only generator *functions* are refused: a function returning a generator is fine."""

    def evens(limit: int) -> Iterator[int]:
        return (n for n in range(limit) if n % 2 == 0)

    assert list(retrier.call_sync(evens, 5)) == [0, 2, 4]
