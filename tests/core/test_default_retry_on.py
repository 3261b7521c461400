"""Without ``retry_on``, errors retrying cannot fix run once, unless a matcher names them."""

from __future__ import annotations

from random import Random
from typing import Any

import pytest

from retrymw import CallFinished, CallState, Outcome, Retrier, RetryPolicy, on_exception
from retrymw._core.matchers import PROGRAMMING_ERRORS, retryable_by_default
from retrymw._core.policy import Accept, Retry
from retrymw.testing import FakeClock, RecordingInstrument

pytestmark = pytest.mark.anyio


class Count:
    """Raises ``error`` on every execution and counts them."""

    def __init__(self, error: Exception) -> None:
        self.error = error
        self.calls = 0

    def __call__(self) -> None:
        self.calls += 1
        raise self.error


def make(clock: FakeClock, *instruments: Any, **fields: Any) -> Retrier:
    return Retrier(RetryPolicy(**fields), clock=clock, instruments=instruments, budget=None)


@pytest.mark.parametrize(
    "error",
    [
        pytest.param(NameError("name 'x' is not defined"), id="NameError"),
        pytest.param(UnboundLocalError("local 'x'"), id="UnboundLocalError"),
        pytest.param(
            AttributeError("'NoneType' object has no attribute 'json'"), id="AttributeError"
        ),
        pytest.param(TypeError("f() takes 1 positional argument"), id="TypeError"),
        pytest.param(ImportError("cannot import name 'x'"), id="ImportError"),
        pytest.param(ModuleNotFoundError("No module named 'x'"), id="ModuleNotFoundError"),
        pytest.param(SyntaxError("invalid syntax"), id="SyntaxError"),
        pytest.param(IndentationError("unexpected indent"), id="IndentationError"),
        pytest.param(NotImplementedError(), id="NotImplementedError"),
        pytest.param(RecursionError("maximum recursion depth exceeded"), id="RecursionError"),
        pytest.param(AssertionError("invariant"), id="AssertionError"),
    ],
)
def test_programming_errors_run_once(
    error: Exception, clock: FakeClock, recorder: RecordingInstrument
) -> None:
    """The default policy executes a programming error once and raises it unchanged, no sleep."""
    fn = Count(error)
    with pytest.raises(type(error)) as raised:
        make(clock, recorder).call_sync(fn)
    assert raised.value is error
    assert fn.calls == 1
    assert clock.sleeps == []
    (finished,) = recorder.of_type(CallFinished)
    assert finished.outcome == "failure"
    assert not retryable_by_default(error)


@pytest.mark.parametrize(
    "error",
    [
        pytest.param(ConnectionError("reset"), id="ConnectionError"),
        pytest.param(TimeoutError(), id="TimeoutError"),
        pytest.param(OSError("EAGAIN"), id="OSError"),
        pytest.param(RuntimeError("pool closed"), id="RuntimeError"),
        pytest.param(KeyError("not replicated yet"), id="KeyError"),
        pytest.param(ValueError("truncated JSON"), id="ValueError"),
        pytest.param(ZeroDivisionError(), id="ZeroDivisionError"),
    ],
)
def test_other_exceptions_are_still_retried(error: Exception, clock: FakeClock) -> None:
    """Everything else, data-dependent lookups and values included, is retried as before."""
    fn = Count(error)
    with pytest.raises(type(error)):
        make(clock).call_sync(fn)
    assert fn.calls == 3


def test_a_real_name_error_is_not_retried(clock: FakeClock) -> None:
    """The attack from the issue: a typo'd name used to run three times."""
    calls = 0

    def typo() -> object:
        nonlocal calls
        calls += 1
        return undefined_name  # type: ignore[name-defined]  # noqa: F821

    with pytest.raises(NameError):
        make(clock).call_sync(typo)
    assert calls == 1


async def test_the_async_driver_follows_the_same_rule(clock: FakeClock) -> None:
    """Coroutines get the same default."""
    calls = 0

    async def broken() -> None:
        nonlocal calls
        calls += 1
        raise AttributeError("no attribute")

    with pytest.raises(AttributeError):
        await make(clock).call(broken)
    assert calls == 1


@pytest.mark.parametrize(
    "retry_on",
    [
        pytest.param([AssertionError], id="class"),
        pytest.param(on_exception(AssertionError), id="on_exception"),
        pytest.param([Exception], id="Exception-names-everything"),
        pytest.param([{"pattern": "not yet"}], id="pattern"),
    ],
)
def test_a_matcher_that_names_them_retries_them(retry_on: Any, clock: FakeClock) -> None:
    """Polling with asserts works when asked for: an explicit retry_on decides alone."""
    fn = Count(AssertionError("not yet"))
    with pytest.raises(AssertionError):
        make(clock, retry_on=retry_on).call_sync(fn)
    assert fn.calls == 3


def test_the_list_is_exception_classes_only() -> None:
    """Cancellation is never on the list: it propagates before any matching."""
    assert all(issubclass(kind, Exception) for kind in PROGRAMMING_ERRORS)
    assert not retryable_by_default(None)


def test_default_verdicts_are_kept_per_type_within_a_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The implicit rule's verdict is memoised per exception type, up to a bound; past it,
    types made at run time are still judged right, just not kept. The engine's decisions
    read the same table."""
    from retrymw._core import matchers

    kept = dict(matchers.DEFAULT_VERDICTS)
    matchers.DEFAULT_VERDICTS.clear()
    try:
        monkeypatch.setattr(matchers, "_VERDICTS_KEPT", 2)
        transient = type("Transient", (ConnectionError,), {})
        misuse = type("Misuse", (TypeError,), {})
        late = type("Late", (TypeError,), {})
        later = type("Later", (ConnectionError,), {})
        assert retryable_by_default(transient("reset"))
        assert not retryable_by_default(misuse("bad"))
        verdicts = matchers.DEFAULT_VERDICTS
        assert verdicts == {transient: True, misuse: False}
        policy = RetryPolicy(attempts=2, initial_delay=0)
        state = CallState(0.0)
        state.attempt = 1
        # Past the bound: judged each time, never kept.
        assert isinstance(policy.decide(state, _failed(late("x")), now=0.0, rng=Random()), Accept)
        assert isinstance(policy.decide(state, _failed(later("x")), now=0.0, rng=Random()), Retry)
        assert set(verdicts) == {transient, misuse}
        # A kept verdict decides: a type marked as never retried is not retried.
        verdicts[transient] = False
        assert isinstance(
            policy.decide(state, _failed(transient("x")), now=0.0, rng=Random()), Accept
        )
    finally:
        matchers.DEFAULT_VERDICTS.clear()
        matchers.DEFAULT_VERDICTS.update(kept)


def _failed(error: Exception) -> Outcome:
    return Outcome(attempt=1, elapsed=0.0, exception=error)
