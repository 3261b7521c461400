"""Issue 18: the core failure path's cost trims keep behaviour.

- the retries of a call whose first attempt ran on the plain path do not chain to it;
- the system clock sleeps with the event loop's own sleep on asyncio (anyio's elsewhere), and
  a cancel scope still cancels a backoff wait;
- each async wait asks, in one step, whether to sleep and with what (`async_waiter`);
- a retried call leaves no reference cycle for the garbage collector (every front door).
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator

import anyio
import pytest

from retrymw import Retrier, RetryPolicy
from retrymw._core.clock import SYSTEM_CLOCK, async_waiter
from retrymw.testing import FakeClock, instant

pytestmark = pytest.mark.anyio


def _policy(delay: float = 0.0) -> RetryPolicy:
    return RetryPolicy(attempts=3, backoff="fixed", initial_delay=delay, jitter=False)


async def test_async_retries_do_not_chain_to_the_first_attempt() -> None:
    """No instruments, no budget: the first attempt is plain; the last error has no context."""
    raised: list[ValueError] = []

    async def fetch() -> None:
        raised.append(ValueError(f"attempt {len(raised) + 1}"))
        raise raised[-1]

    retrier = Retrier(_policy(), budget=None, instruments=())
    with pytest.raises(ValueError, match="attempt 3") as caught:
        await retrier.call(fetch)
    assert caught.value is raised[2]
    assert [error.__context__ for error in raised] == [None, None, None]


def test_sync_retries_do_not_chain_to_the_first_attempt() -> None:
    """The sync driver's plain first attempt leaves no __context__ either."""
    raised: list[KeyError] = []

    def fetch() -> None:
        raised.append(KeyError(len(raised) + 1))
        raise raised[-1]

    with pytest.raises(KeyError) as caught:
        Retrier(_policy(), budget=None, instruments=()).call_sync(fetch)
    assert caught.value is raised[2]
    assert [error.__context__ for error in raised] == [None, None, None]


async def test_system_clock_waits_then_retries() -> None:
    """On either backend, zero-delay waits of the system clock go on to the next attempt."""
    calls = [0]

    async def fetch() -> str:
        calls[0] += 1
        if calls[0] < 3:
            raise ConnectionError("flaky")
        return "ok"

    assert await Retrier(_policy(), budget=None, instruments=()).call(fetch) == "ok"
    assert calls[0] == 3


async def test_a_cancel_scope_cancels_a_backoff_wait() -> None:
    """The loop's own sleep is still cancelled by anyio's cancel scopes (asyncio and trio)."""
    calls = [0]

    async def fetch() -> None:
        calls[0] += 1
        raise ConnectionError("down")

    retrier = Retrier(_policy(delay=20.0), budget=None, instruments=())
    with anyio.move_on_after(0.05) as scope:
        await retrier.call(fetch)
    assert scope.cancelled_caught
    assert calls[0] == 1  # cancelled during the first 20 s wait


def test_each_wait_takes_the_sleep_of_its_clock_and_mode() -> None:
    """The async driver asks before every wait: nothing under instant(), the clock's own sleep
    otherwise (the system clock's sleeps through anyio, or the test clock standing in)."""
    fake = FakeClock()
    assert async_waiter(fake) == fake.sleep
    assert async_waiter(SYSTEM_CLOCK) == SYSTEM_CLOCK.sleep
    with instant():
        assert async_waiter(SYSTEM_CLOCK) is None
        assert async_waiter(fake) is None


@pytest.fixture
def collector_off() -> Iterator[None]:
    """The cyclic garbage collector paused, so that what a call leaves in cycles stays there."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _unreachable_after(run: Callable[[], object]) -> int:
    gc.collect()
    run()
    return gc.collect()


async def test_a_retried_coroutine_call_leaves_no_reference_cycle(collector_off: None) -> None:
    """The first error's traceback holds the front door's frame, which no longer holds the
    error: a call that succeeds on a retry is freed by reference counting, with or without
    instruments (the OpenTelemetry instrument's scopes included). (An error raised out of a
    call is in a cycle with the frames it passed, as any raised exception is.)"""
    from opentelemetry.sdk.trace import TracerProvider

    from retrymw.instrumentation import OpenTelemetryInstrument

    instrument = OpenTelemetryInstrument(tracer_provider=TracerProvider())
    for instruments in ((), (instrument,)):
        calls = [0]

        async def fetch(calls: list[int] = calls) -> str:
            calls[0] += 1
            if calls[0] <= 2:
                raise ConnectionError(f"attempt {calls[0]}")
            return "ok"

        retrier = Retrier(_policy(), budget=None, instruments=instruments)
        gc.collect()
        assert await retrier.call(fetch) == "ok"
        assert gc.collect() == 0, instruments


def test_a_retried_function_call_leaves_no_reference_cycle(collector_off: None) -> None:
    """The same through call_sync."""
    calls = [0]

    def fetch() -> str:
        calls[0] += 1
        if calls[0] <= 2:
            raise ConnectionError(f"attempt {calls[0]}")
        return "ok"

    retrier = Retrier(_policy(), budget=None, instruments=())
    assert _unreachable_after(lambda: retrier.call_sync(fetch)) == 0


async def test_a_retried_request_leaves_no_reference_cycle(collector_off: None) -> None:
    """The transports (async and sync): a request whose first attempt raised is retried and
    freed by reference counting."""
    import httpx

    from retrymw.httpx import AsyncRetryTransport, RetryTransport

    def handler_failing_once() -> Callable[[httpx.Request], httpx.Response]:
        sent = [0]

        def handler(request: httpx.Request) -> httpx.Response:
            sent[0] += 1
            if sent[0] == 1:
                raise httpx.ConnectError("refused", request=request)
            return httpx.Response(200)

        return handler

    policy = _policy()
    async_transport = AsyncRetryTransport(
        httpx.MockTransport(handler_failing_once()), policy=policy, budget=None, instruments=()
    )
    request = httpx.Request("GET", "http://api.test/")
    gc.collect()
    response = await async_transport.handle_async_request(request)
    await response.aclose()
    del response
    assert gc.collect() == 0
    sync_transport = RetryTransport(
        httpx.MockTransport(handler_failing_once()), policy=policy, budget=None, instruments=()
    )

    def send() -> None:
        sync_transport.handle_request(httpx.Request("GET", "http://api.test/")).close()

    assert _unreachable_after(send) == 0
