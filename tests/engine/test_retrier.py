"""The Retrier's drivers: outcomes, sleeps, give-up reasons, events and cancellation."""

from __future__ import annotations

import inspect
import logging
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from types import SimpleNamespace
from typing import Any

import anyio
import pytest

from retrymw import (
    AttemptFinished,
    AttemptStarted,
    BreakerStateChanged,
    CallFinished,
    CallStarted,
    CircuitBreaker,
    CircuitOpenError,
    ConfigError,
    Retrier,
    RetryBudget,
    RetryBudgetExhausted,
    RetryDenied,
    RetryPolicy,
    RetryScheduled,
    on_exception,
    retry,
)
from retrymw._core.errors import add_note
from retrymw.instrumentation import Instrument, LoggingInstrument
from retrymw.testing import FakeClock, RecordingInstrument, instant

pytestmark = pytest.mark.anyio


class Flaky:
    """Raises the given exceptions in order, then returns ``value``; counts its calls."""

    def __init__(self, *errors: BaseException, value: Any = "ok") -> None:
        self.errors = list(errors)
        self.value = value
        self.calls = 0

    async def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.sync(*args, **kwargs)

    def sync(self, *args: Any, **kwargs: Any) -> Any:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return self.value


def make(clock: FakeClock, **fields: Any) -> Retrier:
    return Retrier(RetryPolicy(**fields), clock=clock, instruments=(), budget=None)


async def test_success_first_try_returns_value_without_sleeping(clock: FakeClock) -> None:
    """A call that succeeds at once returns its value after one attempt and no sleep."""
    fn = Flaky(value=42)
    assert await make(clock).call(fn) == 42
    assert fn.calls == 1
    assert clock.sleeps == []


async def test_arguments_are_passed_through(clock: FakeClock) -> None:
    """Positional and keyword arguments reach the function on every attempt."""
    seen: list[tuple[Any, ...]] = []

    async def add(a: int, *, b: int) -> int:
        seen.append((a, b))
        if len(seen) < 2:
            raise ConnectionError("reset")
        return a + b

    assert await make(clock).call(add, 2, b=3) == 5
    assert seen == [(2, 3), (2, 3)]


async def test_two_failures_then_success_sleeps_the_exponential_delays(clock: FakeClock) -> None:
    """Failing twice with the default policy sleeps 1 s then 2 s and returns the value."""
    fn = Flaky(ConnectionError("a"), ConnectionError("b"))
    assert await make(clock).call(fn) == "ok"
    assert fn.calls == 3
    assert clock.sleeps == [1.0, 2.0]


def test_sync_driver_sleeps_the_same_delays(clock: FakeClock) -> None:
    """call_sync follows the same decisions as the async driver."""
    fn = Flaky(ConnectionError("a"), ConnectionError("b"))
    assert make(clock).call_sync(fn.sync) == "ok"
    assert clock.sleeps == [1.0, 2.0]


async def test_exhausted_reraises_last_exception_with_a_note(clock: FakeClock) -> None:
    """After the last attempt the last exception itself is raised, with a note saying why."""
    last = ConnectionError("third")
    fn = Flaky(ConnectionError("first"), ConnectionError("second"), last)
    with pytest.raises(ConnectionError) as caught:
        await make(clock).call(fn)
    assert caught.value is last
    notes = getattr(caught.value, "__notes__", [])
    assert len(notes) == 1
    assert "gave up after attempt 3 of 3" in notes[0]
    assert "max_attempts" in notes[0]


async def test_non_matching_exception_is_raised_at_once_unchanged(clock: FakeClock) -> None:
    """An exception that retry_on does not match is not retried and carries no note."""
    fn = Flaky(ValueError("bad input"))
    with pytest.raises(ValueError, match="bad input") as caught:
        await make(clock, retry_on=[KeyError]).call(fn)
    assert fn.calls == 1
    assert clock.sleeps == []
    assert not getattr(caught.value, "__notes__", [])


async def test_retry_budget_example_from_design(clock: FakeClock) -> None:
    """Budget 5 s with exponential 1 s sleeps 1 and 2, then raises RetryBudgetExhausted."""
    last = ConnectionError("still down")
    fn = Flaky(*[ConnectionError("down")] * 2, last)
    with pytest.raises(RetryBudgetExhausted, match="Retry budget exhausted") as caught:
        await make(clock, attempts=10, retry_budget="5s").call(fn)
    assert clock.sleeps == [1.0, 2.0]
    assert caught.value.__cause__ is last
    assert caught.value.attempts == 3


async def test_long_budget_example_from_design(clock: FakeClock) -> None:
    """100 attempts, 2 m budget, max 30 s: sleeps 1, 2, 4, 8, 16, 30, 30, then stops."""
    fn = Flaky(*[TimeoutError()] * 100)
    with pytest.raises(RetryBudgetExhausted):
        await make(clock, attempts=100, retry_budget="2m").call(fn)
    assert clock.sleeps == [1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0]
    assert fn.calls == 8


async def test_deadline_stops_before_a_sleep_that_would_cross_it(clock: FakeClock) -> None:
    """With a 4 s deadline, sleeps 1 and 2 fit; the 4 s one would end past it, so it stops."""
    fn = Flaky(*[ConnectionError("down")] * 10)
    with pytest.raises(ConnectionError) as caught:
        await make(clock, attempts=10, deadline="4s").call(fn)
    assert clock.sleeps == [1.0, 2.0]
    assert "deadline_exceeded" in getattr(caught.value, "__notes__", [""])[0]


@pytest.mark.parametrize(
    ("on_failure", "fallback", "expected"),
    [
        pytest.param("continue", None, None, id="continue-returns-none"),
        pytest.param(
            "fallback", lambda exc: f"cached after {exc}", "cached after down", id="fallback"
        ),
    ],
)
async def test_on_failure_modes(
    clock: FakeClock, on_failure: Any, fallback: Any, expected: Any
) -> None:
    """on_failure="continue" returns None and "fallback" returns fallback(last exception)."""
    fn = Flaky(*[ConnectionError("down")] * 3)
    retrier = make(clock, on_failure=on_failure, fallback=fallback)
    assert await retrier.call(fn) == expected
    assert fn.calls == 3


async def test_on_failure_does_not_swallow_non_retryable_errors(clock: FakeClock) -> None:
    """A non-retryable exception propagates even with on_failure="continue"."""
    with pytest.raises(KeyError):
        await make(clock, retry_on=[ConnectionError], on_failure="continue").call(
            Flaky(KeyError("k"))
        )


@pytest.mark.parametrize(
    "error",
    [
        pytest.param(KeyboardInterrupt(), id="keyboard-interrupt"),
        pytest.param(SystemExit(3), id="system-exit"),
    ],
)
async def test_base_exceptions_are_never_retried(clock: FakeClock, error: BaseException) -> None:
    """KeyboardInterrupt and SystemExit propagate at once, whatever retry_on says."""
    fn = Flaky(error)
    retrier = make(clock, retry_on=lambda outcome: True)
    with pytest.raises(type(error)):
        await retrier.call(fn)
    assert fn.calls == 1


class BlockingClock(FakeClock):
    """A fake clock whose async sleep never returns, and says when it started sleeping."""

    def __init__(self) -> None:
        super().__init__()
        self.sleeping = anyio.Event()

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.sleeping.set()
        await anyio.sleep_forever()


async def test_cancelling_during_backoff_cancels_at_once(recorder: RecordingInstrument) -> None:
    """Cancelling the task during a backoff sleep ends the call; no further attempt runs."""
    clock = BlockingClock()
    fn = Flaky(ConnectionError("down"))
    retrier = Retrier(RetryPolicy(), clock=clock, instruments=(recorder,), budget=None)
    async with anyio.create_task_group() as group:
        group.start_soon(retrier.call, fn)
        await clock.sleeping.wait()
        group.cancel_scope.cancel()
    assert fn.calls == 1
    finished = recorder.of_type(CallFinished)
    assert [event.outcome for event in finished] == ["cancelled"]


async def test_cancellation_raised_by_the_function_is_not_retried(
    clock: FakeClock, recorder: RecordingInstrument
) -> None:
    """A cancelled attempt propagates cancellation instead of being retried."""
    calls = 0

    async def cancelled_inside() -> None:
        nonlocal calls
        calls += 1
        with anyio.CancelScope() as scope:
            scope.cancel()
            await anyio.sleep(1)
        raise AssertionError("unreachable: the scope swallowed its own cancellation")

    retrier = Retrier(
        RetryPolicy(retry_on=lambda o: True), clock=clock, instruments=(recorder,), budget=None
    )
    with anyio.CancelScope() as outer:
        outer.cancel()
        await retrier.call(cancelled_inside)
    assert calls == 1
    assert [event.outcome for event in recorder.of_type(CallFinished)] == ["cancelled"]


async def test_per_attempt_timeout_fails_slow_attempts() -> None:
    """An attempt that outlives `timeout` is cancelled and counts as a timeout failure."""
    calls = 0

    async def hangs() -> None:
        nonlocal calls
        calls += 1
        await anyio.sleep_forever()

    retrier = Retrier(
        RetryPolicy(attempts=2, timeout="20ms", backoff="fixed", initial_delay=0),
        instruments=(),
        budget=None,
    )
    with pytest.raises(TimeoutError):
        await retrier.call(hangs)
    assert calls == 2


def test_sync_call_with_timeout_is_rejected(clock: FakeClock) -> None:
    """A per-attempt timeout cannot interrupt sync code, so call_sync refuses it clearly."""
    retrier = make(clock, timeout="1s")
    with pytest.raises(ConfigError, match="timeout: cannot interrupt a synchronous function"):
        retrier.call_sync(lambda: None)


async def test_decorator_keeps_coroutine_functions_and_metadata(clock: FakeClock) -> None:
    """Decorating an async function gives a coroutine function with the same name and doc."""
    retrier = make(clock)

    @retrier
    async def fetch(x: int) -> int:
        """Fetch x."""
        return x * 2

    @retrier
    def compute(x: int) -> int:
        return x + 1

    assert inspect.iscoroutinefunction(fetch)
    assert not inspect.iscoroutinefunction(compute)
    assert fetch.__name__ == "fetch"
    assert fetch.__doc__ == "Fetch x."
    assert await fetch(4) == 8
    assert compute(4) == 5


async def test_retry_shorthand_builds_policy_and_retrier(clock: FakeClock) -> None:
    """@retry(...) takes policy fields and retrier options together."""
    fn = Flaky(TimeoutError(), TimeoutError(), TimeoutError(), TimeoutError())

    @retry(
        attempts=5, backoff="fixed", initial_delay="250ms", clock=clock, instruments=(), budget=None
    )
    async def call() -> Any:
        return await fn()

    assert await call() == "ok"
    assert clock.sleeps == [0.25] * 4


async def test_instant_skips_sleeps_but_not_decisions(
    clock: FakeClock, recorder: RecordingInstrument
) -> None:
    """Inside instant() no sleep happens, while events still report the planned delays."""
    retrier = Retrier(
        RetryPolicy(initial_delay="30s", max_delay="1m"),
        clock=clock,
        instruments=(recorder,),
        budget=None,
    )
    with instant():
        assert await retrier.call(Flaky(ConnectionError("x"))) == "ok"
    assert clock.sleeps == []
    assert [event.delay for event in recorder.of_type(RetryScheduled)] == [30.0]
    await retrier.call(Flaky(ConnectionError("x")))
    assert clock.sleeps == [30.0]


async def test_instant_as_a_decorator_on_async_and_sync_functions(clock: FakeClock) -> None:
    """@instant() also works on coroutine functions, scoped to their run."""
    retrier = make(clock)

    @instant()
    async def scenario() -> Any:
        return await retrier.call(Flaky(ConnectionError("x")))

    @instant()
    def sync_scenario() -> Any:
        return retrier.call_sync(Flaky(ConnectionError("x")).sync)

    assert await scenario() == "ok"
    assert sync_scenario() == "ok"
    assert clock.sleeps == []


async def test_event_sequence_for_one_retry(
    clock: FakeClock, recorder: RecordingInstrument
) -> None:
    """A call that succeeds on its second attempt emits the events of DESIGN §6, in order."""
    retrier = Retrier(RetryPolicy(name="orders"), clock=clock, instruments=(recorder,), budget=None)

    async def charge() -> Any:
        return await fn()

    fn = Flaky(ConnectionError("reset"))
    assert await retrier.call(charge) == "ok"
    kinds = [type(event) for event in recorder.events]
    assert kinds == [
        CallStarted,
        AttemptStarted,
        AttemptFinished,
        RetryScheduled,
        AttemptStarted,
        AttemptFinished,
        CallFinished,
    ]
    first, second = recorder.of_type(AttemptFinished)
    assert (first.attempt, first.attempt_outcome, first.error_type) == (
        1,
        "retried",
        "ConnectionError",
    )
    assert (second.attempt, second.attempt_outcome, second.error_type) == (2, "success", None)
    (scheduled,) = recorder.of_type(RetryScheduled)
    assert (scheduled.delay, scheduled.attempt, scheduled.policy) == (1.0, 1, "orders")
    assert scheduled.target == scheduled.operation == "charge"
    (finished,) = recorder.of_type(CallFinished)
    assert (finished.outcome, finished.attempts, finished.duration) == ("success", 2, 1.0)


@pytest.mark.parametrize(
    ("fields", "errors", "outcome", "reason"),
    [
        pytest.param({}, [ConnectionError()] * 3, "exhausted", "max_attempts", id="exhausted"),
        pytest.param(
            {"retry_budget": "2s"},
            [ConnectionError()] * 3,
            "budget_exhausted",
            "budget_exhausted",
            id="budget",
        ),
        pytest.param(
            {"deadline": "2s"},
            [ConnectionError()] * 3,
            "deadline_exceeded",
            "deadline_exceeded",
            id="deadline",
        ),
        pytest.param({"retry_on": [KeyError]}, [ValueError()], "failure", None, id="not-retryable"),
    ],
)
async def test_give_up_outcomes_and_reasons(
    clock: FakeClock,
    recorder: RecordingInstrument,
    fields: Any,
    errors: Any,
    outcome: str,
    reason: str | None,
) -> None:
    """Each way of giving up reports its call outcome and, for retryable failures, its reason."""
    retrier = Retrier(RetryPolicy(**fields), clock=clock, instruments=(recorder,), budget=None)
    with pytest.raises(Exception):  # noqa: B017 - the type varies per case; outcome is asserted
        await retrier.call(Flaky(*errors))
    (finished,) = recorder.of_type(CallFinished)
    assert finished.outcome == outcome
    denied = [event.reason for event in recorder.of_type(RetryDenied)]
    assert denied == ([] if reason is None else [reason])


async def test_results_matching_a_status_are_retried_and_the_last_returned(
    clock: FakeClock,
) -> None:
    """With status matchers, values carrying that status are retried and the last is returned."""
    responses = [
        SimpleNamespace(status_code=503),
        SimpleNamespace(status_code=503),
        SimpleNamespace(status_code=200),
    ]

    async def fetch() -> Any:
        return responses.pop(0)

    assert (await make(clock, retry_on=[503]).call(fetch)).status_code == 200
    assert clock.sleeps == [1.0, 2.0]
    always = SimpleNamespace(status_code=503)

    async def down() -> Any:
        return always

    assert await make(clock, retry_on=["5xx"]).call(down) is always


async def test_plain_path_resumes_after_a_first_failure(clock: FakeClock) -> None:
    """With no instruments the first attempt runs bare; a failure still gets the full policy."""
    retrier = make(clock, attempts=4)
    fn = Flaky(ConnectionError(), ConnectionError(), ConnectionError())
    assert await retrier.call(fn) == "ok"
    assert clock.sleeps == [1.0, 2.0, 4.0]


class Exploding(Instrument):
    def __init__(self) -> None:
        self.calls = 0

    def attempt_started(self, event: AttemptStarted, /) -> None:
        self.calls += 1
        raise RuntimeError("instrument bug")


async def test_failing_instrument_is_disabled_and_logged_once(
    clock: FakeClock, recorder: RecordingInstrument, caplog: pytest.LogCaptureFixture
) -> None:
    """An instrument that raises never changes results; it is logged once and then skipped."""
    exploding = Exploding()
    retrier = Retrier(RetryPolicy(), clock=clock, instruments=(exploding, recorder), budget=None)
    with caplog.at_level(logging.ERROR, logger="retrymw"):
        assert await retrier.call(Flaky(ConnectionError())) == "ok"
        assert await retrier.call(Flaky()) == "ok"
    assert exploding.calls == 1
    assert len([r for r in caplog.records if "has been disabled" in r.getMessage()]) == 1
    assert len(recorder.of_type(CallFinished)) == 2


class Swallowing(Instrument):
    """Returns a scope whose __exit__ tries to swallow errors."""

    @contextmanager
    def _scope(self) -> Iterator[None]:
        with suppress(BaseException):  # this instrument misbehaves on purpose
            yield

    def call_started(self, event: CallStarted, /) -> Any:
        return self._scope()


async def test_instrument_scopes_cannot_swallow_exceptions(clock: FakeClock) -> None:
    """A scope that would suppress the call's exception cannot change the outcome."""
    retrier = Retrier(
        RetryPolicy(attempts=1), clock=clock, instruments=(Swallowing(),), budget=None
    )
    with pytest.raises(ConnectionError):
        await retrier.call(Flaky(ConnectionError()))


async def test_logging_instrument_lines(clock: FakeClock, caplog: pytest.LogCaptureFixture) -> None:
    """One WARNING per retry says what failed, attempt k of n and the delay; one per give-up."""
    retrier = Retrier(
        RetryPolicy(attempts=2), clock=clock, instruments=(LoggingInstrument(),), budget=None
    )

    async def pay() -> None:
        raise ConnectionError("connection reset")

    with caplog.at_level(logging.WARNING, logger="retrymw"), pytest.raises(ConnectionError):
        await retrier.call(pay)
    messages = [record.getMessage() for record in caplog.records]
    assert messages == [
        "pay attempt 1/2 failed with ConnectionError: connection reset; retrying in 1s",
        "pay giving up after attempt 2/2 with ConnectionError: max_attempts",
    ]
    assert caplog.records[0].retrymw_delay == 1.0  # type: ignore[attr-defined]


async def test_exception_matcher_composition_in_policy(clock: FakeClock) -> None:
    """A composed matcher retries what it matches and stops on what it excludes."""
    retrier = make(clock, retry_on=on_exception(OSError) & ~on_exception(FileNotFoundError))
    assert await retrier.call(Flaky(OSError("io"))) == "ok"
    fn = Flaky(FileNotFoundError("missing"))
    with pytest.raises(FileNotFoundError):
        await retrier.call(fn)
    assert fn.calls == 1


async def test_concurrent_calls_share_no_state(clock: FakeClock) -> None:
    """Many concurrent calls through one Retrier each get their own attempt count."""
    retrier = make(clock, attempts=3)
    results: list[Any] = []

    async def one(index: int) -> None:
        fn = Flaky(ConnectionError(), value=index)
        results.append(await retrier.call(fn))

    async with anyio.create_task_group() as group:
        for index in range(50):
            group.start_soon(one, index)
    assert sorted(results) == list(range(50))
    assert clock.sleeps == [1.0] * 50


# -- breaker and cross-call budget integration ------------------------------------------------


def breaker_retrier(clock: FakeClock, recorder: RecordingInstrument, **policy: Any) -> Retrier:
    breaker = CircuitBreaker(
        name="db",
        failure_threshold=2,
        failure_rate_threshold=None,
        recovery_timeout="10s",
        clock=clock,
    )
    return Retrier(
        RetryPolicy(**policy), breaker=breaker, clock=clock, instruments=(recorder,), budget=None
    )


async def test_open_circuit_rejects_before_the_first_attempt(
    clock: FakeClock, recorder: RecordingInstrument
) -> None:
    """Once the breaker is open, a new call raises CircuitOpenError without running."""
    retrier = breaker_retrier(clock, recorder, attempts=2, backoff="fixed", initial_delay=0)
    with pytest.raises(ConnectionError):
        await retrier.call(Flaky(ConnectionError(), ConnectionError()))
    fn = Flaky()
    with pytest.raises(CircuitOpenError, match="circuit 'db' is open") as caught:
        await retrier.call(fn)
    assert fn.calls == 0
    assert caught.value.retry_in == 10.0
    assert recorder.of_type(CallFinished)[-1].outcome == "circuit_open"
    assert [e.state for e in recorder.of_type(BreakerStateChanged)] == ["open"]


async def test_circuit_opening_mid_call_stops_retrying_with_the_last_error(
    clock: FakeClock, recorder: RecordingInstrument
) -> None:
    """A breaker that opens during a call ends it with reason circuit_open, not more attempts."""
    retrier = breaker_retrier(clock, recorder, attempts=5)
    last = ConnectionError("second")
    fn = Flaky(ConnectionError("first"), last)
    with pytest.raises(ConnectionError) as caught:
        await retrier.call(fn)
    assert caught.value is last
    assert fn.calls == 2
    assert "circuit_open" in getattr(caught.value, "__notes__", [""])[0]
    assert [e.reason for e in recorder.of_type(RetryDenied)] == ["circuit_open"]


async def test_circuit_open_error_is_never_retried_and_fallback_applies(
    clock: FakeClock, recorder: RecordingInstrument
) -> None:
    """The breaker's own rejection goes to the fallback instead of being retried."""
    retrier = breaker_retrier(
        clock,
        recorder,
        attempts=2,
        backoff="fixed",
        initial_delay=0,
        on_failure="fallback",
        fallback=lambda exc: type(exc).__name__,
    )
    assert await retrier.call(Flaky(ConnectionError(), ConnectionError())) == "ConnectionError"
    assert await retrier.call(Flaky()) == "CircuitOpenError"


async def test_half_open_probe_success_closes_the_circuit(
    clock: FakeClock, recorder: RecordingInstrument
) -> None:
    """After the recovery timeout one probe runs, and its success closes the circuit."""
    retrier = breaker_retrier(clock, recorder, attempts=2, backoff="fixed", initial_delay=0)
    with pytest.raises(ConnectionError):
        await retrier.call(Flaky(ConnectionError(), ConnectionError()))
    clock.advance(10.0)
    assert await retrier.call(Flaky(value="probe")) == "probe"
    states = [e.state for e in recorder.of_type(BreakerStateChanged)]
    assert states == ["open", "half_open", "closed"]


async def test_cross_call_budget_throttles_retries(
    clock: FakeClock, recorder: RecordingInstrument
) -> None:
    """When the shared budget has no token, the retry is denied with reason throttled."""
    budget = RetryBudget(min_capacity=1, clock=clock)
    retrier = Retrier(RetryPolicy(attempts=3), clock=clock, instruments=(recorder,), budget=budget)
    with pytest.raises(ConnectionError) as caught:
        await retrier.call(Flaky(ConnectionError(), ConnectionError(), ConnectionError()))
    assert clock.sleeps == [1.0]
    assert "throttled" in getattr(caught.value, "__notes__", [""])[0]
    assert recorder.of_type(CallFinished)[-1].outcome == "throttled"
    assert budget.statistics().denied == 1


async def test_successful_calls_fund_the_budget(clock: FakeClock) -> None:
    """Each successful call deposits into the shared budget, on the plain path too."""
    budget = RetryBudget(min_capacity=1, clock=clock)
    retrier = Retrier(RetryPolicy(), clock=clock, instruments=(), budget=budget)
    before = budget.available()
    for _ in range(10):
        await retrier.call(Flaky())
    assert budget.statistics().deposits == 10
    assert budget.available() >= before


class Switchable(RecordingInstrument):
    """Records events only while `on` is set; says so through listening()."""

    def __init__(self) -> None:
        super().__init__()
        self.on = False

    def listening(self) -> bool:
        return self.on


async def test_idle_instruments_are_skipped_until_they_listen(clock: FakeClock) -> None:
    """An instrument that is not listening gets no events; once it listens, it gets them all."""
    idle, always = Switchable(), RecordingInstrument()
    retrier = Retrier(RetryPolicy(), clock=clock, instruments=(idle, always), budget=None)
    await retrier.call(Flaky(ConnectionError()))
    assert idle.events == []
    assert len(always.of_type(CallFinished)) == 1
    idle.on = True
    await retrier.call(Flaky(ConnectionError()))
    assert [type(e) for e in idle.events] == [type(e) for e in always.events[-7:]]
    assert len(idle.of_type(RetryScheduled)) == 1


async def test_resumed_plain_call_keeps_skipping_an_idle_instrument(clock: FakeClock) -> None:
    """A call that took the plain path stays without the idle instrument after a failure."""
    idle = Switchable()
    retrier = Retrier(RetryPolicy(), clock=clock, instruments=(idle,), budget=None)
    calls = 0

    async def flips() -> str:
        nonlocal calls
        calls += 1
        if calls == 1:
            idle.on = True  # starts listening while the first attempt runs
            raise ConnectionError("reset")
        return "ok"

    assert await retrier.call(flips) == "ok"
    assert idle.events == []
    assert clock.sleeps == [1.0]


async def test_logging_keeps_one_line_per_retry(
    clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    """A multi-line error message is cut to its first line; sub-second delays read in ms."""
    retrier = Retrier(
        RetryPolicy(attempts=2, initial_delay="135ms"),
        clock=clock,
        instruments=(LoggingInstrument(),),
        budget=None,
    )

    async def noisy() -> str:
        if not clock.sleeps:
            raise ConnectionError("first line\nsecond line with details")
        return "ok"

    with caplog.at_level(logging.WARNING, logger="retrymw"):
        assert await retrier.call(noisy) == "ok"
    (message,) = [record.getMessage() for record in caplog.records]
    assert message == "noisy attempt 1/2 failed with ConnectionError: first line; retrying in 135ms"


# -- review fixes: argument checks, outcomes and notes ------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        pytest.param({"policy": "fast"}, "policy", id="policy"),
        pytest.param({"breaker": object()}, "breaker", id="breaker"),
        pytest.param({"budget": "lots"}, "budget", id="budget"),
        pytest.param({"clock": "monotonic"}, "clock", id="clock"),
        pytest.param({"rng": 42}, "rng", id="rng"),
        pytest.param({"instruments": LoggingInstrument()}, "instruments", id="single-instrument"),
        pytest.param({"instruments": 3}, "instruments", id="not-iterable"),
    ],
)
def test_wrong_argument_types_fail_at_construction(kwargs: dict[str, Any], field: str) -> None:
    """A wrong argument is a ConfigError naming it when the Retrier is built, not mid-call."""
    policy = kwargs.pop("policy", None)
    with pytest.raises(ConfigError) as caught:
        Retrier(policy, **kwargs)
    assert caught.value.field == field
    assert "expected e.g." in str(caught.value)


def test_sync_function_with_timeout_is_refused_when_decorated(clock: FakeClock) -> None:
    """Decorating a sync function under a timeout policy fails at once, not on every call."""
    retrier = make(clock, timeout="1s")
    with pytest.raises(ConfigError, match="cannot interrupt a synchronous function"):
        retrier(lambda: None)


async def test_fallback_receives_the_last_error_when_the_budget_runs_out(clock: FakeClock) -> None:
    """With retry_budget exhausted, the fallback gets the last exception, not the wrapper."""
    seen: list[BaseException] = []
    last = ConnectionError("last")
    retrier = make(
        clock, attempts=5, retry_budget="2s", on_failure="fallback", fallback=seen.append
    )
    await retrier.call(Flaky(ConnectionError("first"), last))
    assert seen == [last]


async def test_a_raising_predicate_is_a_failure_not_a_cancellation(
    clock: FakeClock, recorder: RecordingInstrument
) -> None:
    """An error raised by retry_on itself propagates and the call is counted as a failure."""

    def broken(outcome: Any) -> bool:
        raise RuntimeError("predicate bug")

    retrier = Retrier(
        RetryPolicy(retry_on=broken), clock=clock, instruments=(recorder,), budget=None
    )
    with pytest.raises(RuntimeError, match="predicate bug"):
        await retrier.call(Flaky(ConnectionError()))
    assert [event.outcome for event in recorder.of_type(CallFinished)] == ["failure"]


async def test_an_outer_retrier_does_not_retry_an_inner_circuit_open_error(
    clock: FakeClock,
) -> None:
    """CircuitOpenError from an inner layer is final, even for a retry-anything policy."""
    inner = Retrier(
        RetryPolicy(attempts=1),
        breaker=CircuitBreaker(failure_threshold=1, failure_rate_threshold=None, clock=clock),
        clock=clock,
        instruments=(),
        budget=None,
    )

    async def dead() -> None:
        raise ConnectionError("down")

    with pytest.raises(ConnectionError):
        await inner.call(dead)
    calls = 0

    async def through_inner() -> None:
        nonlocal calls
        calls += 1
        await inner.call(dead)

    for retry_on in (None, on_exception(Exception)):
        calls = 0
        with pytest.raises(CircuitOpenError):
            await make(clock, attempts=5, retry_on=retry_on).call(through_inner)
        assert calls == 1


async def test_implicit_retry_anything_leaves_out_retrymw_errors(clock: FakeClock) -> None:
    """Without retry_on, retrymw's own errors (e.g. RetryBudgetExhausted) are not retried."""
    fn = Flaky(RetryBudgetExhausted("inner gave up", attempts=2, delay_so_far=1.0))
    with pytest.raises(RetryBudgetExhausted):
        await make(clock, attempts=4).call(fn)
    assert fn.calls == 1


async def test_a_reused_exception_object_keeps_one_retrymw_note(clock: FakeClock) -> None:
    """An exception instance raised by many calls carries the latest retrymw note only."""
    shared = ConnectionError("always the same object")

    async def fails() -> None:
        raise shared

    add_note(shared, "the caller's own note")
    retrier = make(clock, attempts=2)
    for _ in range(3):
        with pytest.raises(ConnectionError):
            await retrier.call(fails)
    notes = getattr(shared, "__notes__", [])
    assert notes[0] == "the caller's own note"
    assert len(notes) == 2
    assert notes[1].startswith("retrymw: gave up after attempt 2 of 2")


class RaisingListener(Switchable):
    def listening(self) -> bool:
        raise RuntimeError("listening bug")


async def test_an_instrument_whose_listening_raises_is_disabled_once(
    clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    """listening() failures are isolated like any hook: logged once, instrument disabled."""
    broken = RaisingListener()
    retrier = Retrier(RetryPolicy(), clock=clock, instruments=(broken,), budget=None)
    with caplog.at_level(logging.ERROR, logger="retrymw"):
        for _ in range(3):
            assert await retrier.call(Flaky()) == "ok"
    assert len([r for r in caplog.records if "has been disabled" in r.getMessage()]) == 1
    assert broken.events == []


class TrippingAsyncClock(FakeClock):
    """Its sleep lets other traffic open the circuit meanwhile."""

    def __init__(self) -> None:
        super().__init__()
        self.during_sleep: list[Any] = []

    async def sleep(self, seconds: float) -> None:
        await super().sleep(seconds)
        for action in self.during_sleep:
            action()


async def test_circuit_opening_during_the_backoff_is_a_reported_denial(
    recorder: RecordingInstrument,
) -> None:
    """A breaker that opens during the sleep ends the call with a circuit_open denial."""
    clock = TrippingAsyncClock()
    breaker = CircuitBreaker(
        name="db", failure_threshold=5, failure_rate_threshold=None, clock=clock
    )
    retrier = Retrier(
        RetryPolicy(attempts=3), breaker=breaker, clock=clock, instruments=(recorder,), budget=None
    )

    def others_fail() -> None:
        while breaker.state == "closed":  # the very breaker given: other calls trip it
            assert breaker.allow_request()
            breaker.record_failure()

    clock.during_sleep.append(others_fail)

    async def dead() -> None:
        raise ConnectionError("down")

    with pytest.raises(ConnectionError) as caught:
        await retrier.call(dead)
    assert "circuit_open" in getattr(caught.value, "__notes__", [""])[-1]
    assert [event.reason for event in recorder.of_type(RetryDenied)] == ["circuit_open"]
    # Attempted, then a retry refused: what the attempts got (DESIGN §15), not a refusal.
    assert recorder.of_type(CallFinished)[-1].outcome == "failure"


class MeteredSwitchable(Instrument):
    """An idle-capable metrics-only instrument: it keeps calls on the plain path."""

    def __init__(self) -> None:
        self.on = True
        self.seen: list[str] = []

    def listening(self) -> bool:
        return self.on

    def attempt_finished(self, event: AttemptFinished, /) -> None:
        self.seen.append(f"attempt {event.attempt} {event.attempt_outcome}")

    def call_finished(self, event: CallFinished, /) -> None:
        self.seen.append(f"call {event.outcome}")

    def first_attempt_succeeded(self, *args: object) -> None:
        self.seen.append("first attempt succeeded")


@pytest.mark.parametrize("door", ["call", "transport"])
async def test_a_listening_idle_instrument_hears_the_whole_resumed_call(
    clock: FakeClock, door: str
) -> None:
    """A plain first attempt under the dispatch with a listening idle-capable instrument goes on
    under that dispatch when it fails: the instrument hears every attempt and the call's end
    (it used to be dropped for the rest of the call)."""
    metered = MeteredSwitchable()
    policy = RetryPolicy(attempts=2, initial_delay=0, jitter=False)
    if door == "call":
        retrier = Retrier(policy, clock=clock, instruments=(metered,), budget=None)
        assert await retrier.call(Flaky(ConnectionError())) == "ok"
    else:
        import httpx

        from retrymw.httpx import AsyncRetryTransport

        statuses = iter([503, 200])
        transport = AsyncRetryTransport(
            httpx.MockTransport(lambda request: httpx.Response(next(statuses))),
            policy=policy,
            instruments=[metered],
            clock=clock,
        )
        async with httpx.AsyncClient(transport=transport) as client:
            assert (await client.get("http://api.test/a")).status_code == 200
    assert metered.seen == ["attempt 1 retried", "attempt 2 success", "call success"]
