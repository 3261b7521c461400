"""`RetryPolicy` (DESIGN §2): defaults, normalisation, validation and the pure decision core."""

from __future__ import annotations

import math
from datetime import timedelta
from random import Random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from retrymw._core.backoff import (
    CustomBackoff,
    ExponentialBackoff,
    FibonacciBackoff,
    FixedBackoff,
    LinearBackoff,
)
from retrymw._core.errors import ConfigError
from retrymw._core.events import Outcome, RetryReason
from retrymw._core.matchers import compile_matcher
from retrymw._core.policy import Accept, CallState, GiveUp, Retry, RetryPolicy


def _fallback(error: BaseException) -> str:
    return f"fallback for {error!r}"


# -- defaults and normalisation --------------------------------------------------------------


def test_defaults_follow_the_design() -> None:
    """Every field of a bare `RetryPolicy()` has DESIGN §2's default."""
    policy = RetryPolicy()
    assert policy.name == "default"
    assert policy.attempts == 3
    assert policy.backoff == ExponentialBackoff(base=2.0)
    assert policy.initial_delay == 1.0
    assert policy.max_delay == 30.0
    assert policy.jitter is None
    assert policy.jitter_factor == 0.3
    assert policy.retry_on is None
    assert policy.retry_budget is None
    assert policy.timeout is None
    assert policy.deadline is None
    assert policy.on_failure == "raise"
    assert policy.fallback is None


def test_fields_are_keyword_only() -> None:
    """Positional arguments are refused: every field is keyword-only."""
    with pytest.raises(TypeError):
        RetryPolicy("default")  # type: ignore[call-arg]


def test_policy_is_frozen() -> None:
    """A policy cannot be changed in place; `replace()` is the way to vary it."""
    policy = RetryPolicy()
    with pytest.raises(AttributeError):
        policy.attempts = 5  # type: ignore[misc]
    assert policy.attempts == 3


DURATION_FORMS = [
    pytest.param(0.5, id="float"),
    pytest.param("500ms", id="string-ms"),
    pytest.param(timedelta(milliseconds=500), id="timedelta"),
    pytest.param({"secs": 0, "nanos": 500_000_000}, id="secs-nanos"),
]


@pytest.mark.parametrize("value", DURATION_FORMS)
@pytest.mark.parametrize(
    "field",
    [
        pytest.param("initial_delay", id="initial_delay"),
        pytest.param("max_delay", id="max_delay"),
        pytest.param("retry_budget", id="retry_budget"),
        pytest.param("timeout", id="timeout"),
        pytest.param("deadline", id="deadline"),
    ],
)
def test_duration_forms_normalise_to_float_seconds(field: str, value: Any) -> None:
    """Numbers, ``"500ms"``, `timedelta` and ``{secs, nanos}`` all become the float 0.5."""
    kwargs: dict[str, Any] = {field: value}
    if field == "max_delay":
        kwargs["initial_delay"] = 0.1
    stored = getattr(RetryPolicy(**kwargs), field)
    assert type(stored) is float
    assert stored == 0.5


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        pytest.param(2, 2.0, id="int"),
        pytest.param("1m30s", 90.0, id="compound-string"),
        pytest.param(timedelta(minutes=2), 120.0, id="timedelta-minutes"),
        pytest.param({"secs": 3}, 3.0, id="secs-only"),
    ],
)
def test_other_duration_forms(value: Any, seconds: float) -> None:
    """Integers, compound strings and partial ``{secs, nanos}`` mappings convert to seconds."""
    stored = RetryPolicy(max_delay="5m", retry_budget=value).retry_budget
    assert type(stored) is float
    assert stored == seconds


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param(True, "proportional", id="true"),
        pytest.param(False, None, id="false"),
        pytest.param(None, None, id="none"),
        pytest.param("proportional", "proportional", id="proportional"),
        pytest.param("full", "full", id="full"),
        pytest.param("equal", "equal", id="equal"),
        pytest.param("decorrelated", "decorrelated", id="decorrelated"),
    ],
)
def test_jitter_normalisation(value: Any, expected: str | None) -> None:
    """``True`` means proportional jitter, ``False`` none; the kinds are kept by name."""
    assert RetryPolicy(jitter=value).jitter == expected


def test_backoff_names_normalise_to_strategy_objects() -> None:
    """Backoff names become the strategy objects with default parameters."""
    assert RetryPolicy(backoff="fixed").backoff == FixedBackoff()
    assert RetryPolicy(backoff="linear").backoff == LinearBackoff()
    assert RetryPolicy(backoff="exponential").backoff == ExponentialBackoff()
    assert RetryPolicy(backoff="fibonacci").backoff == FibonacciBackoff()


def test_retry_on_is_compiled() -> None:
    """``retry_on`` specs are compiled into one matcher; an empty list means "any exception"."""
    policy = RetryPolicy(retry_on=["timeout", 503])
    assert policy.retry_on == compile_matcher(["timeout", 503])
    assert RetryPolicy(retry_on=[]).retry_on is None


def test_custom_backoff_may_start_above_the_cap() -> None:
    """`initial_delay` only bounds the other strategies; a custom list ignores it."""
    policy = RetryPolicy(backoff=CustomBackoff(["2s"]), initial_delay="1m", max_delay="30s")
    assert policy.delay_for(1) == 2.0


# -- replace and equality ---------------------------------------------------------------------


def test_replace_returns_a_changed_copy() -> None:
    """`replace()` changes the named fields, keeps the others and leaves the original alone."""
    original = RetryPolicy(
        name="payments",
        attempts=5,
        backoff="fibonacci",
        initial_delay="200ms",
        max_delay="10s",
        jitter="full",
        retry_on=["timeout", 503],
        retry_budget="20s",
        timeout="2s",
        deadline="1m",
    )
    changed = original.replace(attempts=7, max_delay="20s")
    assert changed.attempts == 7
    assert changed.max_delay == 20.0
    assert original.attempts == 5
    assert original.max_delay == 10.0
    assert changed != original
    assert changed.replace(attempts=5, max_delay=10) == original
    for name in ("name", "backoff", "initial_delay", "jitter", "retry_on", "retry_budget"):
        assert getattr(changed, name) == getattr(original, name), name
    assert (changed.timeout, changed.deadline) == (2.0, 60.0)


def test_replace_keeps_the_fallback() -> None:
    """`replace()` carries over the fallback callable, which equality ignores."""
    policy = RetryPolicy(on_failure="fallback", fallback=_fallback)
    assert policy.replace(attempts=2).fallback is _fallback


def test_replace_normalises_like_the_constructor() -> None:
    """Values passed to `replace()` are normalised like constructor arguments."""
    changed = RetryPolicy().replace(initial_delay="250ms", jitter=True, backoff="linear")
    assert changed.initial_delay == 0.25
    assert changed.jitter == "proportional"
    assert changed.backoff == LinearBackoff()


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        pytest.param({"attempts": 0}, "attempts", id="attempts"),
        pytest.param({"initial_delay": "1m"}, "initial_delay", id="initial-above-cap"),
        pytest.param({"jitter": "sometimes"}, "jitter", id="jitter"),
        pytest.param({"max_attempts": 3}, "max_attempts", id="unknown-field"),
    ],
)
def test_replace_validates(changes: dict[str, Any], field: str) -> None:
    """`replace()` rejects invalid values and unknown field names with a `ConfigError`."""
    with pytest.raises(ConfigError) as excinfo:
        RetryPolicy().replace(**changes)
    assert excinfo.value.field == field
    assert str(excinfo.value).startswith(f"{field}: ")


@pytest.mark.parametrize(
    ("first", "second"),
    [
        pytest.param({}, {}, id="defaults"),
        pytest.param({"initial_delay": "1s"}, {"initial_delay": 1}, id="duration-forms"),
        pytest.param({"backoff": "fixed"}, {"backoff": FixedBackoff()}, id="backoff-forms"),
        pytest.param({"jitter": True}, {"jitter": "proportional"}, id="jitter-forms"),
        pytest.param(
            {"retry_on": ["5xx", {"status": [429, 503]}]},
            {"retry_on": ["server_error", {"status": [503, 429]}]},
            id="retry_on-forms",
        ),
        pytest.param(
            {"on_failure": "fallback", "fallback": _fallback},
            {"on_failure": "fallback", "fallback": lambda error: None},
            id="fallback-ignored",
        ),
    ],
)
def test_equal_policies(first: dict[str, Any], second: dict[str, Any]) -> None:
    """Policies built from equivalent arguments compare equal."""
    assert RetryPolicy(**first) == RetryPolicy(**second)


@pytest.mark.parametrize(
    "changes",
    [
        pytest.param({"name": "other"}, id="name"),
        pytest.param({"attempts": 4}, id="attempts"),
        pytest.param({"backoff": "fixed"}, id="backoff"),
        pytest.param({"backoff": ExponentialBackoff(base=3.0)}, id="backoff-base"),
        pytest.param({"max_delay": 31}, id="max_delay"),
        pytest.param({"jitter": "full"}, id="jitter"),
        pytest.param({"retry_on": ["timeout"]}, id="retry_on"),
        pytest.param({"retry_budget": 10}, id="retry_budget"),
        pytest.param({"on_failure": "continue"}, id="on_failure"),
    ],
)
def test_unequal_policies(changes: dict[str, Any]) -> None:
    """Changing any compared field makes the policy unequal to the default."""
    assert RetryPolicy(**changes) != RetryPolicy()


# -- validation ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        pytest.param({"attempts": 0}, "attempts", id="attempts-0"),
        pytest.param({"attempts": -1}, "attempts", id="attempts-negative"),
        pytest.param({"attempts": True}, "attempts", id="attempts-bool"),
        pytest.param({"attempts": 2.0}, "attempts", id="attempts-float"),
        pytest.param({"attempts": "3"}, "attempts", id="attempts-string"),
        pytest.param({"jitter_factor": 1.5}, "jitter_factor", id="jitter_factor-1.5"),
        pytest.param({"jitter_factor": -0.1}, "jitter_factor", id="jitter_factor-negative"),
        pytest.param({"jitter_factor": math.nan}, "jitter_factor", id="jitter_factor-nan"),
        pytest.param({"jitter_factor": True}, "jitter_factor", id="jitter_factor-bool"),
        pytest.param({"jitter": "sometimes"}, "jitter", id="jitter-unknown"),
        pytest.param({"jitter": 1}, "jitter", id="jitter-int"),
        pytest.param({"on_failure": "explode"}, "on_failure", id="on_failure-unknown"),
        pytest.param({"on_failure": "fallback"}, "fallback", id="fallback-missing"),
        pytest.param({"fallback": _fallback}, "fallback", id="fallback-without-on_failure"),
        pytest.param(
            {"on_failure": "fallback", "fallback": "default"},
            "fallback",
            id="fallback-not-callable",
        ),
        pytest.param({"timeout": 0}, "timeout", id="timeout-0"),
        pytest.param({"timeout": "0s"}, "timeout", id="timeout-0s"),
        pytest.param({"timeout": "5"}, "timeout", id="timeout-bare-number-string"),
        pytest.param({"deadline": "-1s"}, "deadline", id="deadline-negative"),
        pytest.param({"deadline": 0}, "deadline", id="deadline-0"),
        pytest.param({"retry_budget": -1}, "retry_budget", id="retry_budget-negative"),
        pytest.param({"initial_delay": "1 second"}, "initial_delay", id="initial_delay-words"),
        pytest.param({"initial_delay": math.inf}, "initial_delay", id="initial_delay-inf"),
        pytest.param({"max_delay": "soon"}, "max_delay", id="max_delay-garbage"),
        pytest.param({"initial_delay": 40}, "initial_delay", id="initial-above-max"),
        pytest.param(
            {"initial_delay": "2s", "max_delay": "1s"}, "initial_delay", id="initial-above-max-2"
        ),
        pytest.param({"backoff": "quadratic"}, "backoff", id="backoff-unknown-name"),
        pytest.param({"backoff": 42}, "backoff", id="backoff-not-a-strategy"),
        pytest.param({"name": ""}, "name", id="name-empty"),
        pytest.param({"name": 7}, "name", id="name-not-string"),
        pytest.param({"retry_on": ["timeout", "bogus"]}, "retry_on[1]", id="retry_on-entry"),
    ],
)
def test_invalid_field_raises_config_error(kwargs: dict[str, Any], field: str) -> None:
    """An invalid field is a `ConfigError` naming the field, showing the value and an example."""
    with pytest.raises(ConfigError) as excinfo:
        RetryPolicy(**kwargs)
    error = excinfo.value
    message = str(error)
    assert isinstance(error, ValueError)
    assert error.field == field
    assert message.startswith(f"{field}: ")
    assert repr(error.value) in message
    assert error.example
    assert f"expected e.g. {error.example}" in message


def test_fallback_error_mentions_on_failure() -> None:
    """Asking for a fallback without one says how to give it."""
    with pytest.raises(ConfigError, match=r'on_failure="fallback"'):
        RetryPolicy(on_failure="fallback")


def test_zero_retry_budget_is_allowed() -> None:
    """A zero retry budget is valid (it allows only zero-delay retries)."""
    assert RetryPolicy(retry_budget=0).retry_budget == 0.0


def test_valid_on_failure_values() -> None:
    """``"continue"`` and ``"fallback"`` with a callable are accepted."""
    assert RetryPolicy(on_failure="continue").on_failure == "continue"
    policy = RetryPolicy(on_failure="fallback", fallback=_fallback)
    assert policy.on_failure == "fallback"
    assert policy.fallback is _fallback


# -- the decision core -----------------------------------------------------------------------


def _error(attempt: int, **fields: Any) -> Outcome:
    return Outcome(attempt=attempt, exception=ConnectionResetError("reset by peer"), **fields)


def _state(attempt: int, *, started_at: float = 0.0, slept: list[float] | None = None) -> CallState:
    state = CallState(started_at)
    state.attempt = attempt
    for delay in slept or []:
        state.delay_so_far += delay
        state.last_delay = delay
    return state


def _drive(
    policy: RetryPolicy, *, seed: int = 0, run_time: float = 0.0, max_attempts: int = 1000
) -> tuple[list[float], Accept | Retry | GiveUp]:
    """Fail every attempt and loop `decide` as a driver would: return the sleeps and the end."""
    rng = Random(seed)
    state = CallState(100.0)
    now = 100.0
    sleeps: list[float] = []
    for attempt in range(1, max_attempts + 1):
        state.attempt = attempt
        now += run_time
        decision = policy.decide(state, _error(attempt, elapsed=now - 100.0), now=now, rng=rng)
        if not isinstance(decision, Retry):
            return sleeps, decision
        sleeps.append(decision.delay)
        state.delay_so_far += decision.delay
        state.last_delay = decision.delay
        now += decision.delay
    raise AssertionError("the policy never stopped")


def test_call_state_starts_empty() -> None:
    """A new `CallState` has made no attempt and slept for nothing."""
    state = CallState(12.5)
    assert (state.attempt, state.started_at, state.delay_so_far, state.last_delay) == (
        0,
        12.5,
        0.0,
        None,
    )


def test_success_is_accepted() -> None:
    """A returned value is accepted under the default "any exception" condition."""
    decision = RetryPolicy().decide(
        _state(1), Outcome(attempt=1, result="ok"), now=0.0, rng=Random(0)
    )
    assert isinstance(decision, Accept)


def test_non_matching_exception_is_accepted() -> None:
    """An exception that ``retry_on`` does not match is final, not retried."""
    policy = RetryPolicy(retry_on=[KeyError])
    outcome = Outcome(attempt=1, exception=ValueError("bad input"))
    assert isinstance(policy.decide(_state(1), outcome, now=0.0, rng=Random(0)), Accept)


def test_matching_exception_is_retried() -> None:
    """An exception that ``retry_on`` matches is retried after the first table delay."""
    policy = RetryPolicy(retry_on=[KeyError])
    outcome = Outcome(attempt=1, exception=KeyError("k"))
    assert policy.decide(_state(1), outcome, now=0.0, rng=Random(0)) == Retry(1.0)


def test_matching_result_is_retried() -> None:
    """A returned response whose status ``retry_on`` matches is retried."""
    policy = RetryPolicy(retry_on=[503])
    outcome = Outcome(attempt=1, result=object(), status=503)
    assert policy.decide(_state(1), outcome, now=0.0, rng=Random(0)) == Retry(1.0)
    ok = Outcome(attempt=1, result=object(), status=200)
    assert isinstance(policy.decide(_state(1), ok, now=0.0, rng=Random(0)), Accept)


@pytest.mark.parametrize("attempts", [pytest.param(n, id=f"attempts={n}") for n in (1, 3, 5)])
def test_last_attempt_gives_up_with_max_attempts(attempts: int) -> None:
    """A retryable failure of the last allowed attempt gives up with ``max_attempts``."""
    sleeps, decision = _drive(RetryPolicy(attempts=attempts))
    assert len(sleeps) == attempts - 1
    assert decision == GiveUp("max_attempts")


@pytest.mark.parametrize(
    ("backoff", "expected"),
    [
        pytest.param("fixed", [1.0, 1.0, 1.0, 1.0], id="fixed"),
        pytest.param("linear", [1.0, 2.0, 3.0, 4.0], id="linear"),
        pytest.param(LinearBackoff(increment="2s"), [1.0, 3.0, 5.0, 7.0], id="linear-2s"),
        pytest.param("exponential", [1.0, 2.0, 4.0, 8.0, 16.0], id="exponential"),
        pytest.param("fibonacci", [1.0, 1.0, 2.0, 3.0, 5.0, 8.0], id="fibonacci"),
    ],
)
def test_retries_sleep_the_table_delays(backoff: Any, expected: list[float]) -> None:
    """Consecutive failures are retried after DESIGN §2's table delays, then give up."""
    policy = RetryPolicy(backoff=backoff, attempts=len(expected) + 1)
    sleeps, decision = _drive(policy)
    assert sleeps == expected
    assert decision == GiveUp("max_attempts")


def test_custom_backoff_in_decide_then_max_delay() -> None:
    """A custom list is slept through in order, then `max_delay` for every later retry."""
    policy = RetryPolicy(backoff=CustomBackoff([1, 3, 7, 15]), max_delay="60s", attempts=7)
    sleeps, _ = _drive(policy)
    assert sleeps == [1.0, 3.0, 7.0, 15.0, 60.0, 60.0]


def test_budget_example_five_seconds() -> None:
    """DESIGN §2: budget 5 s, exponential 1 s sleeps 1, 2 and then stops (1 + 2 + 4 > 5)."""
    policy = RetryPolicy(attempts=10, retry_budget="5s")
    sleeps, decision = _drive(policy)
    assert sleeps == [1.0, 2.0]
    assert decision == GiveUp("budget_exhausted")


def test_budget_example_two_minutes() -> None:
    """DESIGN §2: 100 attempts, 2 min budget, max 30 s sleeps 1, 2, 4, 8, 16, 30, 30, then stops."""
    policy = RetryPolicy(attempts=100, retry_budget="2m", max_delay="30s")
    sleeps, decision = _drive(policy)
    assert sleeps == [1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0]
    assert decision == GiveUp("budget_exhausted")


def test_budget_counts_only_backoff_delays() -> None:
    """Execution time does not eat into the retry budget: only sleeps count."""
    policy = RetryPolicy(attempts=10, retry_budget="5s")
    sleeps, decision = _drive(policy, run_time=1000.0)
    assert sleeps == [1.0, 2.0]
    assert decision == GiveUp("budget_exhausted")


def test_budget_exactly_spent_still_allows_the_retry() -> None:
    """A retry whose delay brings the total exactly to the budget is still scheduled."""
    policy = RetryPolicy(attempts=10, retry_budget="3s")
    sleeps, decision = _drive(policy)
    assert sleeps == [1.0, 2.0]
    assert decision == GiveUp("budget_exhausted")


def test_budget_uses_delay_so_far_from_the_state() -> None:
    """The budget check reads `state.delay_so_far`, whatever the attempt number."""
    policy = RetryPolicy(attempts=10, retry_budget="10s")
    rng = Random(0)
    assert policy.decide(_state(1, slept=[9.0]), _error(1), now=0.0, rng=rng) == Retry(1.0)
    decision = policy.decide(_state(1, slept=[9.5]), _error(1), now=0.0, rng=rng)
    assert decision == GiveUp("budget_exhausted")


def test_deadline_stops_retries_that_would_reach_it() -> None:
    """With a 10 s deadline and no run time, sleeps 1, 2, 4 fit and the next (8) would not."""
    policy = RetryPolicy(attempts=10, deadline="10s")
    sleeps, decision = _drive(policy)
    assert sleeps == [1.0, 2.0, 4.0]
    assert decision == GiveUp("deadline_exceeded")


@pytest.mark.parametrize(
    ("elapsed", "expected"),
    [
        pytest.param(7.5, Retry(2.0), id="ends-before-deadline"),
        pytest.param(7.999, Retry(2.0), id="ends-just-before-deadline"),
        pytest.param(8.0, GiveUp("deadline_exceeded"), id="ends-at-deadline"),
        pytest.param(9.0, GiveUp("deadline_exceeded"), id="ends-past-deadline"),
    ],
)
def test_deadline_is_measured_from_the_call_start(elapsed: float, expected: Retry | GiveUp) -> None:
    """The deadline compares `now - state.started_at` plus the delay against the deadline."""
    policy = RetryPolicy(attempts=10, deadline="10s")
    state = _state(2, started_at=500.0, slept=[1.0])
    assert policy.decide(state, _error(2), now=500.0 + elapsed, rng=Random(0)) == expected


def test_retry_after_raises_the_delay_to_the_hint() -> None:
    """A Retry-After hint longer than the backoff becomes the delay."""
    policy = RetryPolicy()
    decision = policy.decide(_state(1), _error(1, retry_after=5.0), now=0.0, rng=Random(0))
    assert decision == Retry(5.0)


def test_retry_after_shorter_than_backoff_keeps_the_backoff() -> None:
    """A Retry-After hint shorter than the backoff delay does not shorten it."""
    policy = RetryPolicy(attempts=5)
    decision = policy.decide(_state(3), _error(3, retry_after=0.5), now=0.0, rng=Random(0))
    assert decision == Retry(4.0)


@pytest.mark.parametrize("hint", [pytest.param(0.0, id="zero"), pytest.param(-3.0, id="negative")])
def test_retry_after_zero_uses_the_backoff(hint: float) -> None:
    """A zero (past-date) Retry-After hint means "use the backoff"."""
    policy = RetryPolicy()
    decision = policy.decide(_state(2), _error(2, retry_after=hint), now=0.0, rng=Random(0))
    assert decision == Retry(2.0)


def test_retry_after_at_max_delay_is_honoured() -> None:
    """A hint equal to `max_delay` is within the cap and is slept."""
    policy = RetryPolicy(max_delay="30s")
    decision = policy.decide(_state(1), _error(1, retry_after=30.0), now=0.0, rng=Random(0))
    assert decision == Retry(30.0)


@pytest.mark.parametrize(
    ("policy", "state", "now", "hint"),
    [
        pytest.param(RetryPolicy(max_delay="30s"), _state(1), 0.0, 31.0, id="above-max_delay"),
        pytest.param(
            RetryPolicy(retry_budget="10s"), _state(2, slept=[3.0]), 3.0, 8.0, id="past-budget"
        ),
        pytest.param(
            RetryPolicy(deadline="20s"), _state(2, slept=[1.0]), 15.0, 6.0, id="past-deadline"
        ),
    ],
)
def test_retry_after_beyond_a_limit_gives_up(
    policy: RetryPolicy, state: CallState, now: float, hint: float
) -> None:
    """A hint past `max_delay`, the remaining budget or the deadline gives up, never clamps."""
    decision = policy.decide(state, _error(state.attempt, retry_after=hint), now=now, rng=Random(0))
    assert decision == GiveUp("retry_after_exceeds_limit")


def test_retry_after_with_jitter_is_at_least_the_hint() -> None:
    """Jitter never brings the delay below the server's hint."""
    policy = RetryPolicy(jitter="full", max_delay="30s", attempts=5)
    rng = Random(3)
    for _ in range(200):
        decision = policy.decide(_state(4), _error(4, retry_after=6.0), now=0.0, rng=rng)
        assert isinstance(decision, Retry)
        assert 6.0 <= decision.delay <= 8.0


@pytest.mark.parametrize(
    "veto",
    [
        pytest.param("not_idempotent", id="not_idempotent"),
        pytest.param("body_not_replayable", id="body_not_replayable"),
    ],
)
def test_veto_gives_up_with_its_reason(veto: RetryReason) -> None:
    """A veto on a retryable failure gives up with the veto as the reason."""
    policy = RetryPolicy(attempts=5)
    decision = policy.decide(_state(1), _error(1, veto=veto), now=0.0, rng=Random(0))
    assert decision == GiveUp(veto)


def test_veto_does_not_turn_a_success_into_a_failure() -> None:
    """A veto on an outcome that is not a retryable failure leaves it accepted."""
    outcome = Outcome(attempt=1, result="ok", veto="not_idempotent")
    assert isinstance(RetryPolicy().decide(_state(1), outcome, now=0.0, rng=Random(0)), Accept)


def test_decide_does_not_mutate_the_state() -> None:
    """`decide` is pure: the driver, not the policy, advances the call state."""
    policy = RetryPolicy(retry_budget="1m", jitter="decorrelated")
    state = _state(2, started_at=3.0, slept=[1.5])
    policy.decide(state, _error(2), now=10.0, rng=Random(0))
    assert (state.attempt, state.started_at, state.delay_so_far, state.last_delay) == (
        2,
        3.0,
        1.5,
        1.5,
    )


def test_decide_jitter_is_reproducible() -> None:
    """Equal seeds give equal jittered decisions; the delay stays within the jitter range."""
    policy = RetryPolicy(jitter="equal", attempts=10)
    first, _ = _drive(policy, seed=11)
    assert first == _drive(policy, seed=11)[0]
    assert first != _drive(policy, seed=12)[0]
    for retry, delay in enumerate(first, start=1):
        assert policy.delay_for(retry) / 2 <= delay <= policy.delay_for(retry)


def test_decorrelated_jitter_uses_the_last_delay() -> None:
    """Decorrelated jitter draws from `[initial, 3 * state.last_delay]`."""
    policy = RetryPolicy(jitter="decorrelated", attempts=10, max_delay="1m")
    rng = Random(5)
    delays = []
    for _ in range(300):
        decision = policy.decide(_state(2, slept=[4.0]), _error(2), now=0.0, rng=rng)
        assert isinstance(decision, Retry)
        delays.append(decision.delay)
    assert 1.0 <= min(delays) < 1.5
    assert 11.5 < max(delays) <= 12.0


@settings(max_examples=150, deadline=None)
@given(
    jitter=st.sampled_from([None, "proportional", "full", "equal", "decorrelated"]),
    backoff=st.sampled_from(["fixed", "linear", "exponential", "fibonacci"]),
    attempts=st.integers(1, 40),
    initial=st.floats(0.001, 10.0),
    extra=st.floats(0.0, 100.0),
    budget=st.none() | st.floats(0.0, 500.0),
    seed=st.integers(0, 2**32),
)
def test_driven_calls_respect_every_limit(
    jitter: str | None,
    backoff: str,
    attempts: int,
    initial: float,
    extra: float,
    budget: float | None,
    seed: int,
) -> None:
    """Driving `decide` never sleeps past `max_delay`, the budget or the attempt count."""
    policy = RetryPolicy(
        jitter=jitter,
        backoff=backoff,
        attempts=attempts,
        initial_delay=initial,
        max_delay=initial + extra,
        retry_budget=budget,
    )
    sleeps, decision = _drive(policy, seed=seed)
    assert isinstance(decision, GiveUp)
    assert len(sleeps) <= attempts - 1
    assert all(0.0 <= delay <= policy.max_delay for delay in sleeps)
    if budget is not None:
        assert sum(sleeps) <= budget + 1e-9
    if decision.reason == "max_attempts":
        assert len(sleeps) == attempts - 1
