"""Bounds on protection settings: huge windows and near-zero durations fail at construction.

Each rejected value used to be accepted and fail later, inside a user's call (ZeroDivisionError,
OverflowError), or cost memory for every keyed breaker (``window=10**8`` was 100 MiB each).
"""

from __future__ import annotations

import tracemalloc
from typing import Any

import pytest

from retrymw import CircuitBreaker, RetryBudget
from retrymw._core.errors import ConfigError
from retrymw._protect.settings import MAX_WINDOW_CALLS
from retrymw.testing import FakeClock


@pytest.mark.parametrize(
    ("kwargs", "field", "shown"),
    [
        pytest.param({"window": 10**8}, "window", "100000000", id="window-1e8"),
        pytest.param(
            {"window": MAX_WINDOW_CALLS + 1}, "window", str(MAX_WINDOW_CALLS + 1), id="just-above"
        ),
        pytest.param({"window": 10**5000}, "window", "5001 digits", id="window-5000-digits"),
        pytest.param({"window": "500us"}, "window", "'500us'", id="sub-ms-time-window"),
        pytest.param({"window": {"secs": 0, "nanos": 1}}, "window", "'nanos': 1", id="one-ns"),
        pytest.param({"window": "25h"}, "window", "'25h'", id="day-long-window"),
        pytest.param(
            {"recovery_timeout": 1e-300}, "recovery_timeout", "1e-300", id="tiny-recovery"
        ),
        pytest.param(
            {"recovery_timeout": 10**5000}, "recovery_timeout", "5001 digits", id="huge-recovery"
        ),
        pytest.param({"recovery_timeout": "3000000h"}, "recovery_timeout", "3000000h", id="3e6h"),
        pytest.param(
            {"max_recovery_timeout": 1e300}, "max_recovery_timeout", "1e+300", id="huge-cap"
        ),
    ],
)
def test_breaker_rejects_out_of_range_values_naming_field_value_and_example(
    kwargs: dict[str, Any], field: str, shown: str
) -> None:
    """The ConfigError names the field, shows the value (briefly) and gives an accepted example."""
    with pytest.raises(ConfigError) as caught:
        CircuitBreaker(**kwargs)
    error = caught.value
    assert error.field == field
    message = str(error)
    assert message.startswith(f"{field}: ")
    assert shown in message
    assert "expected e.g." in message
    assert len(message) < 300  # a huge value is described, never printed


def test_the_largest_count_window_is_accepted_and_used() -> None:
    """A window of exactly MAX_WINDOW_CALLS attempts works, and its rate spans all of them."""
    breaker = CircuitBreaker(
        clock=FakeClock(), failure_threshold=None, window=MAX_WINDOW_CALLS, minimum_calls=100
    )
    for index in range(MAX_WINDOW_CALLS):
        assert breaker.allow_request()
        if index % 4:
            breaker.record_success()
        else:
            breaker.record_failure()
    stats = breaker.statistics()
    assert (stats.window_calls, stats.failure_rate, stats.state) == (
        MAX_WINDOW_CALLS,
        0.25,
        "closed",
    )


def test_a_thousand_keyed_breakers_with_the_largest_window_stay_small() -> None:
    """1 000 clones of a breaker with the largest window allocate about 10 KB each, not 100 MB."""
    template = CircuitBreaker(window=MAX_WINDOW_CALLS)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        clones = [template.clone(f"host-{index}") for index in range(1000)]
        used = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert len(clones) == 1000
    assert used < 1000 * (MAX_WINDOW_CALLS + 4096)


def test_zero_recovery_timeout_still_means_probe_at_once() -> None:
    """recovery_timeout=0 stays accepted: the circuit turns half-open at the next request."""
    clock = FakeClock()
    breaker = CircuitBreaker(clock=clock, failure_threshold=1, recovery_timeout=0)
    assert breaker.allow_request()
    breaker.record_failure()
    assert breaker.allow_request()  # the probe
    assert breaker.statistics().state == "half_open"


@pytest.mark.parametrize(
    "recovery",
    [pytest.param("1ms", id="1ms"), pytest.param(0.0011, id="1.1ms")],
)
def test_the_smallest_recovery_timeout_doubles_to_its_cap_without_overflow(recovery: Any) -> None:
    """From the smallest period, thousands of consecutive trips double up to the cap and stay."""
    clock = FakeClock()
    breaker = CircuitBreaker(
        clock=clock, failure_threshold=1, recovery_timeout=recovery, max_recovery_timeout="24h"
    )
    for _ in range(3000):
        assert breaker.allow_request()
        breaker.record_failure()  # trips (or re-trips from half-open)
        retry_in = breaker.retry_in()
        assert retry_in is not None
        clock.advance(retry_in)
    assert breaker.retry_in() == 0.0
    assert breaker.statistics().trips == 3000
    breaker.allow_request()
    breaker.record_failure()
    assert breaker.retry_in() == 86_400.0


@pytest.mark.parametrize(
    ("kwargs", "field", "shown"),
    [
        pytest.param({"window": "1us"}, "window", "'1us'", id="sub-ms-window"),
        pytest.param({"window": 1e-300}, "window", "1e-300", id="tiny-window"),
        pytest.param({"window": "48h"}, "window", "'48h'", id="two-day-window"),
        pytest.param({"ratio": 10**5000}, "ratio", "5001 digits", id="huge-ratio"),
        pytest.param({"min_capacity": 2**1024}, "min_capacity", "309 digits", id="float-overflow"),
    ],
)
def test_budget_rejects_out_of_range_values_naming_field_value_and_example(
    kwargs: dict[str, Any], field: str, shown: str
) -> None:
    """A budget's near-zero window or un-floatable number is a ConfigError, not a later crash."""
    with pytest.raises(ConfigError) as caught:
        RetryBudget(**kwargs)
    assert caught.value.field == field
    assert shown in str(caught.value)
    assert "expected e.g." in str(caught.value)


def test_the_smallest_budget_window_works_at_large_clock_values() -> None:
    """A 1 ms window at a monotonic clock of ten years still folds and admits retries."""
    budget = RetryBudget(clock=FakeClock(start=3.2e8), window="1ms")
    for _ in range(40):
        budget.record_success()
    assert budget.try_acquire()
    assert budget.statistics().deposits == 40
