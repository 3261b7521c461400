"""The fast path: a first-attempt success reaches instruments without events.

`Instrument.first_attempt_succeeded` replaces `attempt_finished` + `call_finished` for calls
that succeed at once, only while every instrument observing attempts or calls implements it and
none opens scopes but the call scopes of `Instrument.fast_path_call_scope` instruments (entered
around the bare attempt); anything else (a retry, another scope, a breaker) takes the full path
with events.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import anyio
import pytest

from retrymw import CircuitBreaker, Retrier, RetryPolicy
from retrymw.instrumentation import Instrument
from retrymw.testing import FakeClock, RecordingInstrument

pytestmark = pytest.mark.anyio

STEP = 0.25  # virtual seconds each attempt takes


class Metered(Instrument):
    """A metrics-only instrument: records what it is told, by hook name."""

    def __init__(self) -> None:
        self.seen: list[tuple[Any, ...]] = []

    def attempt_finished(self, event: Any, /) -> None:
        self.seen.append(("attempt_finished", event.attempt, event.attempt_outcome, event.duration))

    def call_finished(self, event: Any, /) -> None:
        self.seen.append(("call_finished", event.outcome, event.attempts, event.duration))

    def first_attempt_succeeded(
        self, policy: str, target: str, duration: float, budget: float | None, /
    ) -> None:
        self.seen.append(("first_attempt_succeeded", policy, target, duration, budget))


class EventsOnly(Instrument):
    """Observes calls without the fast-path hook: it needs the events."""

    def __init__(self) -> None:
        self.calls = 0

    def call_finished(self, event: Any, /) -> None:
        self.calls += 1


def flaky(clock: FakeClock, failures: int) -> Any:
    count = 0

    async def fetch() -> str:
        nonlocal count
        count += 1
        clock.advance(STEP)
        if count <= failures:
            raise ConnectionError(f"reset #{count}")
        return "ok"

    return fetch


def retrier(clock: FakeClock, *instruments: Any, **kwargs: Any) -> Retrier:
    policy = RetryPolicy(name="p", attempts=3, backoff="fixed", initial_delay=0)
    return Retrier(policy, instruments=instruments, clock=clock, **kwargs)


async def test_a_first_attempt_success_is_one_hook_call_and_no_events() -> None:
    clock = FakeClock()
    metered = Metered()
    assert await retrier(clock, metered).call(flaky(clock, 0)) == "ok"
    # The budget's tokens come with the first report (then at most once a second).
    assert metered.seen == [("first_attempt_succeeded", "p", "fetch", STEP, 10.0)]


async def test_a_retried_call_reports_its_first_attempt_from_when_it_started() -> None:
    clock = FakeClock()
    metered = Metered()
    assert await retrier(clock, metered).call(flaky(clock, 2)) == "ok"
    assert metered.seen == [
        ("attempt_finished", 1, "retried", STEP),
        ("attempt_finished", 2, "retried", STEP),
        ("attempt_finished", 3, "success", STEP),
        ("call_finished", "success", 3, 3 * STEP),
    ]


def test_the_sync_front_door_takes_the_same_fast_path() -> None:
    clock = FakeClock()
    metered = Metered()
    count = 0

    def fetch() -> str:
        nonlocal count
        count += 1
        clock.advance(STEP)
        if count == 1:
            raise ConnectionError("reset")
        return "ok"

    run = retrier(clock, metered, budget=None)
    assert run.call_sync(fetch) == "ok"
    assert run.call_sync(fetch) == "ok"
    assert metered.seen == [
        ("attempt_finished", 1, "retried", STEP),
        ("attempt_finished", 2, "success", STEP),
        ("call_finished", "success", 2, 2 * STEP),
        ("first_attempt_succeeded", "p", "fetch", STEP, None),
    ]


@pytest.mark.parametrize(
    "companion", [EventsOnly(), RecordingInstrument()], ids=["no fast hook", "opens scopes"]
)
async def test_an_instrument_that_needs_events_keeps_every_call_on_the_full_path(
    companion: Any,
) -> None:
    clock = FakeClock()
    metered = Metered()
    assert await retrier(clock, metered, companion).call(flaky(clock, 0)) == "ok"
    assert metered.seen == [
        ("attempt_finished", 1, "success", STEP),
        ("call_finished", "success", 1, STEP),
    ]


async def test_a_breaker_keeps_calls_on_the_full_path() -> None:
    clock = FakeClock()
    metered = Metered()
    run = retrier(clock, metered, breaker=CircuitBreaker(name="b", clock=clock))
    assert await run.call(flaky(clock, 0)) == "ok"
    assert [entry[0] for entry in metered.seen] == ["attempt_finished", "call_finished"]


async def test_a_failing_fast_hook_is_disabled_and_the_result_stands(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class Broken(Metered):
        def first_attempt_succeeded(self, *args: Any) -> None:
            raise RuntimeError("boom")

    clock = FakeClock()
    broken, healthy = Broken(), Metered()
    run = retrier(clock, broken, healthy)
    with caplog.at_level(logging.ERROR, logger="retrymw"):
        assert await run.call(flaky(clock, 0)) == "ok"
        assert await run.call(flaky(clock, 0)) == "ok"
    assert [entry[0] for entry in healthy.seen] == ["first_attempt_succeeded"] * 2
    assert broken.seen == []
    assert len([r for r in caplog.records if "first_attempt_succeeded" in r.message]) == 1


@pytest.mark.parametrize("door", ["async", "sync"])
async def test_the_transports_report_a_first_attempt_success_through_the_hook(door: str) -> None:
    """The httpx transports take the same path: a 200 at once is one hook call for the host; a
    503 then a 200 is reported attempt by attempt, the first from when it was sent."""
    import httpx

    from retrymw.httpx import AsyncRetryTransport, RetryTransport

    clock = FakeClock()
    statuses = iter([200, 503, 200])

    def answer(request: httpx.Request) -> httpx.Response:
        clock.advance(STEP)
        return httpx.Response(next(statuses))

    metered = Metered()
    policy = RetryPolicy(name="p", attempts=2, initial_delay=0, jitter=False)
    options: dict[str, Any] = {"policy": policy, "instruments": [metered], "clock": clock}
    if door == "async":
        transport: Any = AsyncRetryTransport(httpx.MockTransport(answer), **options)
        async with httpx.AsyncClient(transport=transport) as client:
            assert (await client.get("http://api.test/a")).status_code == 200
            assert (await client.get("http://api.test/b")).status_code == 200
    else:
        _get_twice(RetryTransport(httpx.MockTransport(answer), **options))
    assert metered.seen == [
        ("first_attempt_succeeded", "p", "api.test", STEP, 10.0),
        ("attempt_finished", 1, "retried", STEP),
        ("attempt_finished", 2, "success", STEP),
        ("call_finished", "success", 2, 2 * STEP),
    ]


def _get_twice(transport: Any) -> None:
    """Two GETs through a sync client (blocking: outside the async test's body)."""
    import httpx

    with httpx.Client(transport=transport) as client:
        assert client.get("http://api.test/a").status_code == 200
        assert client.get("http://api.test/b").status_code == 200


CURRENT: ContextVar[str | None] = ContextVar("current_scope", default=None)


class Scoped(Metered):
    """Opens a call scope and keeps the fast path (`Instrument.fast_path_call_scope`)."""

    fast_path_call_scope = True

    def call_started(self, event: Any, /) -> Any:
        self.seen.append(("call_started", event.operation))
        return self._scope(event.operation)

    @contextmanager
    def _scope(self, name: str) -> Iterator[None]:
        token = CURRENT.set(name)
        try:
            yield
        except BaseException as error:
            self.seen.append(("exit", type(error).__name__))
            raise
        else:
            self.seen.append(("exit", None))
        finally:
            CURRENT.reset(token)

    def attempt_started(self, event: Any, /) -> None:
        self.seen.append(("attempt_started", event.attempt))

    def first_attempt_succeeded(self, *args: Any) -> None:
        super().first_attempt_succeeded(*args)
        self.seen.append(("in scope", CURRENT.get()))

    def call_finished(self, event: Any, /) -> None:
        self.seen.append(("call_finished", event.outcome, event.attempts, CURRENT.get()))


def scoped_fetch(clock: FakeClock, failures: int, seen: list[Any]) -> Any:
    inner = flaky(clock, failures)

    async def fetch() -> str:
        seen.append(("attempt runs in", CURRENT.get()))
        return await inner()  # type: ignore[no-any-return]

    return fetch


async def test_a_call_scope_wraps_the_bare_first_attempt_and_its_report() -> None:
    clock = FakeClock()
    scoped = Scoped()
    assert await retrier(clock, scoped).call(scoped_fetch(clock, 0, scoped.seen)) == "ok"
    assert scoped.seen == [
        ("call_started", "fetch"),
        ("attempt runs in", "fetch"),
        ("first_attempt_succeeded", "p", "fetch", STEP, 10.0),
        ("in scope", "fetch"),
        ("exit", None),
    ]


async def test_a_scoped_call_that_fails_first_keeps_its_scope_on_the_full_path() -> None:
    """The scope entered for the bare attempt is the call's: no second call_started, and no
    attempt_started for the attempt that already ran."""
    clock = FakeClock()
    scoped = Scoped()
    assert await retrier(clock, scoped).call(scoped_fetch(clock, 1, scoped.seen)) == "ok"
    assert scoped.seen == [
        ("call_started", "fetch"),
        ("attempt runs in", "fetch"),
        ("attempt_finished", 1, "retried", STEP),
        ("attempt_started", 2),
        ("attempt runs in", "fetch"),
        ("attempt_finished", 2, "success", STEP),
        ("call_finished", "success", 2, "fetch"),
        ("exit", None),
    ]


@pytest.mark.parametrize("kind", [Metered, Scoped])
async def test_a_bare_first_attempt_cancelled_is_reported_as_a_cancelled_call(
    kind: type[Metered],
) -> None:
    """Cancellation is never swallowed, and the call it ends is still told (and its scope
    exited with it), as on the full path."""
    clock = FakeClock()
    instrument = kind()

    async def hang() -> str:
        clock.advance(STEP)
        await anyio.sleep_forever()
        return "never"

    with anyio.move_on_after(0.01) as cancel:
        await retrier(clock, instrument).call(hang)
    assert cancel.cancelled_caught
    ends = [entry[:3] for entry in instrument.seen if entry[0] in ("call_finished", "exit")]
    expected: list[Any] = [("call_finished", "cancelled", 1)]
    if kind is Scoped:
        expected.append(("exit", anyio.get_cancelled_exc_class().__name__))
    assert ends == expected


def test_a_misused_front_door_on_the_scoped_fast_path_ends_the_call_it_opened() -> None:
    """A coroutine function given to call_sync is refused (never retried), and the scope the
    fast path opened is closed with a failed call."""
    clock = FakeClock()
    scoped = Scoped()

    async def not_sync() -> str:
        return "never"

    with pytest.raises(TypeError, match="call"):
        retrier(clock, scoped).call_sync(not_sync)  # type: ignore[unused-coroutine]
    assert scoped.seen[0] == ("call_started", "not_sync")
    assert scoped.seen[-2:] == [("call_finished", "failure", 1, "not_sync"), ("exit", "TypeError")]


async def test_the_transports_never_take_the_scoped_fast_path() -> None:
    """An HTTP attempt has a scope of its own (the CLIENT span): with an instrument that opens
    call scopes, a transport's first attempt is announced like every other."""
    import httpx

    from retrymw.httpx import AsyncRetryTransport

    clock = FakeClock()
    scoped = Scoped()
    policy = RetryPolicy(name="p", attempts=2, initial_delay=0, jitter=False)
    transport = AsyncRetryTransport(
        httpx.MockTransport(lambda request: httpx.Response(200)),
        policy=policy,
        instruments=[scoped],
        clock=clock,
    )
    async with httpx.AsyncClient(transport=transport) as client:
        assert (await client.get("http://api.test/a")).status_code == 200
    assert [entry[0] for entry in scoped.seen] == [
        "call_started",
        "attempt_started",
        "attempt_finished",
        "call_finished",
        "exit",
    ]


async def test_a_scoped_instrument_without_the_fast_hook_keeps_calls_on_the_full_path() -> None:
    """`fast_path_call_scope` counts only with `first_attempt_succeeded`: a call-scope-only
    instrument that sets it still gets its scope, through the full path."""

    class ScopeOnly(Instrument):
        fast_path_call_scope = True

        def __init__(self) -> None:
            self.seen: list[str | None] = []

        def call_started(self, event: Any, /) -> Any:
            return self._scope()

        @contextmanager
        def _scope(self) -> Iterator[None]:
            token = CURRENT.set("call")
            try:
                yield
            finally:
                CURRENT.reset(token)

    clock = FakeClock()
    scope_only = ScopeOnly()
    seen: list[Any] = []
    assert await retrier(clock, scope_only).call(scoped_fetch(clock, 0, seen)) == "ok"
    assert await retrier(clock, scope_only).call(scoped_fetch(clock, 1, seen)) == "ok"
    assert seen == [("attempt runs in", "call")] * 3


async def test_a_bare_http_attempt_cancelled_is_reported_as_a_cancelled_call() -> None:
    """The transports' bare first attempt too: a cancelled send ends a call the instruments
    hear of (outcome cancelled, the host as target), and the cancellation goes on."""
    import httpx

    from retrymw.httpx import AsyncRetryTransport

    class Calls(Metered):
        def call_finished(self, event: Any, /) -> None:
            self.seen.append(("call_finished", event.outcome, event.attempts, event.target))

    async def hang(request: httpx.Request) -> httpx.Response:
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    clock = FakeClock()
    calls = Calls()
    policy = RetryPolicy(name="p", attempts=2, initial_delay=0, jitter=False)
    transport = AsyncRetryTransport(
        httpx.MockTransport(hang), policy=policy, instruments=[calls], clock=clock
    )
    async with httpx.AsyncClient(transport=transport) as client:
        with anyio.move_on_after(0.01) as cancel:
            await client.get("http://api.test/a")
    assert cancel.cancelled_caught
    assert calls.seen == [("call_finished", "cancelled", 1, "api.test")]


@pytest.mark.parametrize("door", ["call_sync", "sync transport"])
def test_a_bare_sync_attempt_interrupted_is_reported_and_the_interrupt_goes_on(door: str) -> None:
    """KeyboardInterrupt in a sync bare first attempt: never retried nor swallowed, and the call
    it ends is reported as cancelled, from call_sync and from the sync transport."""
    import httpx

    from retrymw.httpx import RetryTransport

    class Calls(Metered):
        def call_finished(self, event: Any, /) -> None:
            self.seen.append(("call_finished", event.outcome, event.attempts))

    def interrupted(*args: Any) -> Any:
        raise KeyboardInterrupt

    clock = FakeClock()
    calls = Calls()
    if door == "call_sync":
        run: Any = functools.partial(retrier(clock, calls).call_sync, interrupted)
    else:
        policy = RetryPolicy(name="p", attempts=2, initial_delay=0, jitter=False)
        transport = RetryTransport(
            httpx.MockTransport(interrupted), policy=policy, instruments=[calls], clock=clock
        )
        run = functools.partial(httpx.Client(transport=transport).get, "http://api.test/a")
    with pytest.raises(KeyboardInterrupt):
        run()
    assert calls.seen == [("call_finished", "cancelled", 1)]
