"""The deadline bounds the call: its body included, and never the instruments' own time.

Attacks: a 503 or a 200 whose body trickles one byte at a time or stalls, read by
``client.get`` through a transport with a one-second deadline (asyncio, trio, sync); an
instrument whose hooks block (a slow exporter) on a call that succeeds at once. Before the fix
the first ran for as long as the server trickled (5 s and more) and the second raised
``TimeoutError``. The wall-time bounds below are the deadline plus a margin that a loaded
machine keeps; every server trickles for far longer than the bound.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from retrymw import CallFinished, Retrier, RetryDenied, RetryPolicy
from retrymw.httpx import AsyncRetryTransport, RetryTransport
from retrymw.instrumentation import Instrument
from retrymw.testing import FakeClock, RecordingInstrument
from tests.http_server import FlakyServer, Step

pytestmark = pytest.mark.anyio

DEADLINE = 1.0
# Far below the trickles' length (8 s), far above the deadline on a busy machine.
BOUND = DEADLINE + 3.0
TRICKLED = {
    "trickled-503": Step(503, body=b"x" * 80, pace=0.1),
    "stalled-503": Step(503, body=b"x" * 30, stall=8.0),
    "trickled-200": Step(200, body=b"y" * 80, pace=0.1),
}


@pytest.fixture
def server() -> Iterator[FlakyServer]:
    """A scripted HTTP server on 127.0.0.1, stopped at teardown (which ends its trickles)."""
    flaky = FlakyServer()
    yield flaky
    flaky.stop()


def policy() -> RetryPolicy:
    return RetryPolicy(attempts=3, initial_delay=0.05, backoff="fixed", deadline=DEADLINE)


@pytest.mark.parametrize("step", TRICKLED.values(), ids=TRICKLED.keys())
async def test_the_deadline_bounds_the_body_the_caller_reads(
    server: FlakyServer, step: Step
) -> None:
    """``client.get`` reads the returned response's body: by the deadline it is a ReadTimeout."""
    url = server.script(step)
    transport = AsyncRetryTransport(policy=policy(), instruments=(), budget=None)
    async with httpx.AsyncClient(transport=transport) as client:
        started = time.monotonic()
        with pytest.raises(httpx.ReadTimeout, match="deadline"):
            await client.get(url)
        assert time.monotonic() - started < BOUND


@pytest.mark.parametrize("step", TRICKLED.values(), ids=TRICKLED.keys())
def test_sync_the_deadline_bounds_the_body_the_caller_reads(
    server: FlakyServer, step: Step
) -> None:
    """Sync twin: the body's socket reads end by the deadline."""
    url = server.script(step)
    transport = RetryTransport(policy=policy(), instruments=(), budget=None)
    with httpx.Client(transport=transport) as client:
        started = time.monotonic()
        with pytest.raises(httpx.ReadTimeout):
            client.get(url)
        assert time.monotonic() - started < BOUND


async def test_a_body_read_in_time_is_whole(server: FlakyServer) -> None:
    """The bound changes nothing for a body that arrives before the deadline."""
    url = server.script(Step(200, body=b"abc", pace=0.05))
    transport = AsyncRetryTransport(policy=policy(), instruments=(), budget=None)
    async with httpx.AsyncClient(transport=transport) as client:
        response = await client.get(url)
    assert response.content == b"abc"


async def test_without_a_deadline_the_body_is_the_callers(server: FlakyServer) -> None:
    """No deadline: the body is read under the client's own timeouts, however slow."""
    url = server.script(Step(200, body=b"abcd", pace=0.3))
    transport = AsyncRetryTransport(policy=RetryPolicy(attempts=1), instruments=(), budget=None)
    async with httpx.AsyncClient(transport=transport) as client:
        response = await client.get(url)
    assert response.content == b"abcd"


# -- instruments never change a result ------------------------------------------------------------


class SlowExporter(Instrument):
    """An instrument whose hooks block: each takes ``seconds`` of the call's clock."""

    def __init__(self, clock: FakeClock, seconds: float, hooks: set[str]) -> None:
        self.clock = clock
        self.seconds = seconds
        self.hooks = hooks

    def _block(self, hook: str) -> None:
        if hook in self.hooks:
            self.clock.advance(self.seconds)

    def call_started(self, event: Any) -> None:
        self._block("call_started")

    def attempt_started(self, event: Any) -> None:
        self._block("attempt_started")

    def attempt_finished(self, event: Any) -> None:
        self._block("attempt_finished")

    def retry_scheduled(self, event: Any) -> None:
        self._block("retry_scheduled")

    def call_finished(self, event: Any) -> None:
        self._block("call_finished")


EVERY_HOOK = {"call_started", "attempt_started", "attempt_finished", "retry_scheduled"}
SLOW_HOOKS = {
    "call_started": {"call_started"},
    "attempt_started": {"attempt_started"},
    "every hook": EVERY_HOOK | {"call_finished"},
}
slow_hooks = pytest.mark.parametrize("hooks", SLOW_HOOKS.values(), ids=SLOW_HOOKS.keys())


def flaky_once() -> Any:
    """A function that fails once, then returns ``"ok"``."""
    calls = [0]

    def operation() -> str:
        calls[0] += 1
        if calls[0] == 1:
            raise ConnectionError("refused")
        return "ok"

    return operation


@slow_hooks
async def test_a_slow_instrument_does_not_eat_the_deadline(hooks: set[str]) -> None:
    """Hooks taking 0.4 s each against a 0.3 s deadline: the call still retries and succeeds."""
    clock = FakeClock()
    retrier = Retrier(
        RetryPolicy(attempts=3, initial_delay=0.01, deadline=0.3),
        instruments=(SlowExporter(clock, 0.4, hooks),),
        budget=None,
        clock=clock,
    )
    operation = flaky_once()

    async def call() -> str:
        answer: str = operation()
        return answer

    assert await retrier.call(call) == "ok"


@slow_hooks
def test_sync_a_slow_instrument_does_not_eat_the_deadline(hooks: set[str]) -> None:
    """Sync twin."""
    clock = FakeClock()
    retrier = Retrier(
        RetryPolicy(attempts=3, initial_delay=0.01, deadline=0.3),
        instruments=(SlowExporter(clock, 0.4, hooks),),
        budget=None,
        clock=clock,
    )
    assert retrier.call_sync(flaky_once()) == "ok"


def answers(*statuses: int) -> Any:
    """A MockTransport handler answering ``statuses`` in turn (the last one repeats)."""
    seen = [0]

    def handler(request: httpx.Request) -> httpx.Response:
        seen[0] += 1
        return httpx.Response(statuses[min(seen[0], len(statuses)) - 1], content=b"body")

    return handler


@slow_hooks
async def test_a_slow_instrument_does_not_eat_an_http_deadline(hooks: set[str]) -> None:
    """The transport's call and the body it returns both ignore the instruments' time."""
    clock = FakeClock()
    transport = AsyncRetryTransport(
        httpx.MockTransport(answers(503, 200)),
        policy=RetryPolicy(attempts=3, initial_delay=0.01, deadline=0.3),
        instruments=(SlowExporter(clock, 0.4, hooks),),
        budget=None,
        clock=clock,
    )
    async with httpx.AsyncClient(transport=transport) as client:
        response = await client.get("http://api.test/")
    assert (response.status_code, response.content) == (200, b"body")


@slow_hooks
def test_sync_a_slow_instrument_does_not_eat_an_http_deadline(hooks: set[str]) -> None:
    """Sync twin."""
    clock = FakeClock()
    transport = RetryTransport(
        httpx.MockTransport(answers(503, 200)),
        policy=RetryPolicy(attempts=3, initial_delay=0.01, deadline=0.3),
        instruments=(SlowExporter(clock, 0.4, hooks),),
        budget=None,
        clock=clock,
    )
    with httpx.Client(transport=transport) as client:
        response = client.get("http://api.test/")
    assert (response.status_code, response.content) == (200, b"body")


class BlockingExporter(Instrument):
    """An instrument whose ``call_started`` really blocks (an exporter that waits on I/O)."""

    def call_started(self, event: Any) -> None:
        time.sleep(0.4)


async def test_a_blocking_exporter_does_not_eat_the_deadline(server: FlakyServer) -> None:
    """The issue's attack on the system clock: 400 ms in call_started, a 300 ms deadline, a
    loopback call that succeeds at once."""
    url = server.script(200)
    transport = AsyncRetryTransport(
        policy=RetryPolicy(deadline=0.3), instruments=(BlockingExporter(),), budget=None
    )
    async with httpx.AsyncClient(transport=transport) as client:
        response = await client.get(url)
    assert response.status_code == 200


# -- only a deadline times the instruments ---------------------------------------------------------


class CountingClock(FakeClock):
    """A fake clock that counts how often the call reads it."""

    def __init__(self) -> None:
        super().__init__()
        self.reads = 0

    def now(self) -> float:
        self.reads += 1
        return super().now()


class Scoped(Instrument):
    """An instrument on every hook that opens a scope: the call takes the engine's full path."""

    def call_started(self, event: Any) -> Any:
        return _NullScope()

    def attempt_started(self, event: Any) -> None:
        pass

    def attempt_finished(self, event: Any) -> None:
        pass

    def retry_scheduled(self, event: Any) -> None:
        pass

    def call_finished(self, event: Any) -> None:
        pass


class _NullScope:
    def __enter__(self) -> None:
        pass

    def __exit__(self, *exc_info: object) -> None:
        pass


async def test_without_a_deadline_the_hooks_are_not_timed() -> None:
    """No deadline reads the instruments' time: a call that succeeds at once reads the clock
    for its start, its attempt's start and end, and its end (the events' durations), not
    around every hook (before: 11 reads). With a deadline the hooks are timed again."""
    clock = CountingClock()
    retrier = Retrier(RetryPolicy(attempts=3), instruments=(Scoped(),), budget=None, clock=clock)

    async def ok() -> str:
        return "ok"

    assert await retrier.call(ok) == "ok"
    assert clock.reads == 4

    timed = CountingClock()
    bounded = Retrier(
        RetryPolicy(attempts=3, deadline=5.0), instruments=(Scoped(),), budget=None, clock=timed
    )
    assert await bounded.call(ok) == "ok"
    assert timed.reads > 4


# -- a wait that overran the deadline --------------------------------------------------------------
#
# The policy schedules no retry that would start past the deadline, but the wait before one can
# overrun it: the process stalls (a GC pause, a CPU quota), a disposal or a hook takes long.
# Before the fix the attempt started anyway, late: a coroutine's code up to its first await and
# a function's whole body ran past the deadline, and a transport's caller got an attempt
# timeout whose message read "timeout (Nones)".


class OverranWait(FakeClock):
    """Every wait lasts a second longer than asked: the process stalled while the call waited."""

    async def sleep(self, seconds: float) -> None:
        await super().sleep(seconds + 1.0)

    def sleep_sync(self, seconds: float) -> None:
        super().sleep_sync(seconds + 1.0)


STALLED = RetryPolicy(attempts=3, initial_delay=0.1, backoff="fixed", deadline=0.5)


def assert_gave_up_at_the_deadline(
    error: BaseException, recorder: RecordingInstrument, attempts_ran: list[float]
) -> None:
    assert attempts_ran == [0.0]  # old code: a second attempt at 1.1 s
    assert isinstance(error, ConnectionError)
    assert "the next retry would start past the deadline" in getattr(error, "__notes__", [""])[-1]
    denied = [event.reason for event in recorder.events if isinstance(event, RetryDenied)]
    assert denied == ["deadline_exceeded"]
    (ended,) = [event for event in recorder.events if isinstance(event, CallFinished)]
    assert ended.outcome == "deadline_exceeded"
    assert ended.attempts == 1


async def test_a_retry_whose_wait_overran_the_deadline_never_starts() -> None:
    clock, recorder = OverranWait(), RecordingInstrument()
    retrier = Retrier(STALLED, clock=clock, instruments=[recorder])
    ran: list[float] = []

    async def refused() -> None:
        ran.append(clock.now())
        raise ConnectionError("refused")

    with pytest.raises(ConnectionError) as raised:
        await retrier.call(refused)
    assert_gave_up_at_the_deadline(raised.value, recorder, ran)


def test_sync_a_retry_whose_wait_overran_the_deadline_never_starts() -> None:
    clock, recorder = OverranWait(), RecordingInstrument()
    retrier = Retrier(STALLED, clock=clock, instruments=[recorder])
    ran: list[float] = []

    def refused() -> None:
        ran.append(clock.now())
        raise ConnectionError("refused")

    with pytest.raises(ConnectionError) as raised:
        retrier.call_sync(refused)
    assert_gave_up_at_the_deadline(raised.value, recorder, ran)


async def test_a_request_whose_wait_overran_the_deadline_is_not_sent(server: FlakyServer) -> None:
    url = server.script(503, 503, 200)
    transport = AsyncRetryTransport(policy=STALLED, clock=OverranWait(), instruments=())
    async with httpx.AsyncClient(transport=transport) as client:
        with pytest.raises(httpx.TimeoutException) as raised:
            await client.get(url)
    assert server.served(url) == 1
    # The 503 was closed during the wait: the call ends with the deadline, named alone.
    assert str(raised.value) == "the policy's deadline (0.5s) passed before the next attempt"


def test_sync_a_request_whose_wait_overran_the_deadline_is_not_sent(server: FlakyServer) -> None:
    url = server.script(503, 503, 200)
    transport = RetryTransport(policy=STALLED, clock=OverranWait(), instruments=())
    with (
        httpx.Client(transport=transport) as client,
        pytest.raises(httpx.TimeoutException) as raised,
    ):
        client.get(url)
    assert server.served(url) == 1
    assert str(raised.value) == "the policy's deadline (0.5s) passed before the next attempt"


@pytest.mark.parametrize(
    ("limits", "message"),
    [
        ({"timeout": 0.2}, "attempt cancelled by the policy's timeout (0.2s)"),
        ({"deadline": 0.2}, "attempt cancelled by the policy's deadline (0.2s)"),
        (
            {"timeout": 0.2, "deadline": 30},
            "attempt cancelled by the policy's timeout (0.2s) or deadline (30s)",
        ),
    ],
)
async def test_an_attempt_timeout_names_only_the_limits_set(
    server: FlakyServer, limits: dict[str, float], message: str
) -> None:
    url = server.script(Step(200, delay=5.0))
    policy = RetryPolicy(attempts=1, **limits)  # type: ignore[arg-type]
    transport = AsyncRetryTransport(policy=policy, instruments=())
    async with httpx.AsyncClient(transport=transport) as client:
        with pytest.raises(httpx.TimeoutException) as raised:
            await client.get(url)
    assert str(raised.value) == message  # old code: "... timeout (Nones) or deadline (0.2s)"
