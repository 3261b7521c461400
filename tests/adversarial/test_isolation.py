"""Tests do not depend on order: the plugin gives each test fresh default protection.

A `Retrier` (and so ``@retry``) made without ``budget=`` gets a process-wide default
`RetryBudget` when the decorator runs, at import. Eight identical tests of one module-level
``@retry(attempts=3)`` function that fails twice then succeeds spend that one budget: without
the plugin's help the later tests see their retries denied (attempts 3, 3, 3, 3, 3, then 2 and
1). With ``retrymw_fresh_protection`` (per test, or for a whole suite through the ini option)
each test starts from default protection as if new.
"""

from __future__ import annotations

import gc
import re
import weakref

import pytest

from retrymw import Retrier, RetryBudget, RetryPolicy
from retrymw._engine.retrier_args import default_budget, reset_default_protection
from retrymw.testing import FakeClock

pytest_plugins = ["pytester"]

#: A user's test module: eight identical tests of one module-level decorated function.
USER_TESTS = """
import pytest

from retrymw import retry

state = {{"failures_left": 0, "attempts": 0}}


@retry(attempts=3, initial_delay=0, retry_on=[ConnectionError], instruments=())
def fetch():
    state["attempts"] += 1
    if state["failures_left"]:
        state["failures_left"] -= 1
        raise ConnectionError("reset")
    return "ok"


@pytest.mark.parametrize("run", range(8))
def test_fails_twice_then_succeeds({fixture}run):
    state.update(failures_left=2, attempts=0)
    try:
        fetch()
    finally:
        print(f"made {{state['attempts']}} attempts")
    assert state["attempts"] == 3
"""


def _user_suite(pytester: pytest.Pytester, fixture: str, ini: str = "") -> None:
    """The user's tests, and an ini file as strict as a real suite's (warnings are errors)."""
    pytester.makeini(
        f"""
        [pytest]
        asyncio_default_fixture_loop_scope = function
        filterwarnings = error
        {ini}
        """
    )
    pytester.makepyfile(test_user=USER_TESTS.format(fixture=fixture))


def _attempts(result: pytest.RunResult) -> list[int]:
    """The attempts each test made, in order (printed by the tests, after pytest's dots)."""
    return [int(count) for count in re.findall(r"made (\d+) attempts", result.stdout.str())]


def test_without_fresh_protection_later_tests_lose_their_retries(
    pytester: pytest.Pytester,
) -> None:
    """The old behaviour, still what a suite gets without opting in: the first tests drain the
    decorator's default budget and the later ones are denied retries."""
    _user_suite(pytester, fixture="")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-s")
    attempts = _attempts(result)
    assert len(attempts) == 8
    assert attempts[0] == 3
    assert attempts[-1] < 3  # (3, 3, 3, 3, 3, 2, 1, 1 with today's budget defaults)
    assert result.parseoutcomes().get("failed", 0) >= 1


def test_the_fixture_gives_every_test_fresh_protection(pytester: pytest.Pytester) -> None:
    """Asking for ``retrymw_fresh_protection``: all eight tests make their three attempts."""
    _user_suite(pytester, fixture="retrymw_fresh_protection, ")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-s")
    assert _attempts(result) == [3] * 8
    result.assert_outcomes(passed=8)


def test_the_ini_option_gives_a_whole_suite_fresh_protection(pytester: pytest.Pytester) -> None:
    """``retrymw_fresh_protection = true`` in the ini file: every test, without naming the
    fixture, makes its three attempts (also under ``--strict-config`` and warnings as errors)."""
    _user_suite(pytester, fixture="", ini="retrymw_fresh_protection = true")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-s", "--strict-config")
    assert _attempts(result) == [3] * 8
    result.assert_outcomes(passed=8)


def test_reset_makes_default_budgets_fresh_and_leaves_given_ones() -> None:
    """`reset_default_protection` refills the budgets made by default (a `Retrier`'s, and each
    host's of a transport's default `PerTarget`) in place; a budget given by the user keeps its
    state."""
    clock = FakeClock()
    made = Retrier(RetryPolicy(), clock=clock, instruments=())
    per_host = default_budget(clock, per_target=True)
    given = RetryBudget(clock=clock)
    Retrier(RetryPolicy(), clock=clock, instruments=(), budget=given)
    assert isinstance(made.budget, RetryBudget)
    drained = [made.budget, per_host.for_target("api.example.com"), given]
    for budget in drained:
        while budget.try_acquire():
            pass
    reset_default_protection()
    stats = [budget.statistics() for budget in drained]
    assert [s.available for s in stats] == [10.0, 10.0, 0.0]
    assert [s.acquired for s in stats] == [0, 0, 10]
    assert made.budget is drained[0]  # the same object: whoever holds it sees it fresh


def test_default_budgets_are_held_weakly() -> None:
    """The registry of default-made protection keeps nothing alive: a retrier that goes away
    takes its default budget with it."""
    retrier = Retrier(RetryPolicy(), instruments=())
    assert isinstance(retrier.budget, RetryBudget)
    budget = weakref.ref(retrier.budget)
    del retrier
    gc.collect()
    assert budget() is None
    reset_default_protection()  # and resetting after it went is harmless
