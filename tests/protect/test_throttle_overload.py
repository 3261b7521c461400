"""AdaptiveThrottle's overload term: explicit overload refusals (429, 503, 529) are evidence of
load and are shed at ``overload_k``; other failures (loss) only at ``k``. Also the Retrier's
wiring: which outcomes reach the throttle as overload refusals."""

from __future__ import annotations

import random
from dataclasses import dataclass

import pytest

from retrymw import AdaptiveThrottle, CircuitBreaker, PerTarget, Retrier, RetryPolicy
from retrymw._engine.call import Call
from retrymw._protect.throttle import OVERLOAD_STATUSES
from retrymw.testing import FakeClock


def feed(throttle: AdaptiveThrottle, accepted: int, failed: int, refused: int = 0) -> None:
    """Record verdicts directly: successes, plain failures and overload refusals."""
    for _ in range(accepted):
        throttle.record_success()
    for _ in range(failed):
        throttle.record_failure()
    for _ in range(refused):
        throttle.record_failure(overloaded=True)


def test_the_overload_statuses_are_429_503_and_529() -> None:
    """Too Many Requests, Service Unavailable, and Anthropic's "overloaded"."""
    assert frozenset({429, 503, 529}) == OVERLOAD_STATUSES


def test_a_50pc_loss_is_left_alone_and_a_50pc_overload_refusal_share_is_shed(
    clock: FakeClock,
) -> None:
    """Half the attempts failing is a dead backend of two when the failures are plain, and an
    overload when they are refusals: p = 0 against (1 - 1.4 x 0.5) R / (R + 1)."""
    loss, load = AdaptiveThrottle(clock=clock), AdaptiveThrottle(clock=clock)
    feed(loss, 50, 50)
    feed(load, 50, 0, 50)
    assert loss.reject_probability() == 0.0
    assert load.reject_probability() == pytest.approx((1 - 1.4 * 0.5) * 100 / 101)
    stats = load.statistics()
    assert (stats.requests, stats.accepts, stats.overloaded, stats.overload_k) == (100, 50, 50, 1.4)
    assert loss.statistics().overloaded == 0


@pytest.mark.parametrize(
    ("accepted", "failed", "refused", "expected"),
    [
        pytest.param(80, 0, 20, 0.0, id="20pc-refused-left-alone"),
        pytest.param(60, 0, 40, (100 - 1.4 * 60) / 101, id="40pc-refused"),
        pytest.param(40, 50, 10, (100 - 2 * 40) / 101, id="few-refusals-among-loss"),
        pytest.param(20, 40, 40, (100 - 2 * 20) / 101, id="the-general-term-is-larger"),
        pytest.param(0, 0, 1000, 0.9, id="capped"),
    ],
)
def test_p_is_the_larger_of_the_two_terms(
    clock: FakeClock, accepted: int, failed: int, refused: int, expected: float
) -> None:
    """p = min(max_reject, max((R - 2A) / (R + 1), (R - 1.4 (R - O)) / (R + 1)), 0)."""
    throttle = AdaptiveThrottle(clock=clock)
    feed(throttle, accepted, failed, refused)
    assert throttle.reject_probability() == pytest.approx(max(0.0, expected))


def test_shed_attempts_are_credited_in_the_overload_term_too(clock: FakeClock) -> None:
    """R' = R + S counts the shed attempts, with the non-refused share of the answered ones:
    p tends to 1 - 1.4 (R - O) / R and never past it (no drift)."""
    throttle = AdaptiveThrottle(clock=clock, rng=random.Random(2))
    feed(throttle, 50, 0, 50)
    for _ in range(5000):
        throttle.allow_request()
    stats = throttle.statistics()
    attempts = 100 + stats.shed_in_window
    assert stats.shed_in_window > 1000
    assert stats.reject_probability == pytest.approx(0.3 * attempts / (attempts + 1))


def test_overload_refusals_leave_the_window_with_their_requests(clock: FakeClock) -> None:
    """O is counted over the same trailing window as R and A."""
    throttle = AdaptiveThrottle(clock=clock, window="10s")
    feed(throttle, 10, 0, 90)
    assert throttle.reject_probability() > 0.8
    clock.advance(11)
    stats = throttle.statistics()
    assert (stats.requests, stats.overloaded, stats.reject_probability) == (0, 0, 0.0)


def test_overload_k_one_sheds_only_the_refused_share(clock: FakeClock) -> None:
    """overload_k = 1: p = O / (R + 1), the share of refusals itself."""
    throttle = AdaptiveThrottle(clock=clock, overload_k=1.0)
    feed(throttle, 90, 0, 10)
    assert throttle.reject_probability() == pytest.approx(10 / 101)


def test_pooled_counts_count_in_both_terms(clock: FakeClock) -> None:
    """The fleet pools requests, accepts and overload refusals: a low-rate process sheds an
    overload the fleet sees, and a fleet that is healthy weighs against one process's refusals,
    as the general term weighs failures. The fleet's attempts count towards min_requests."""
    throttle = AdaptiveThrottle(clock=clock)
    feed(throttle, 1, 0, 1)  # 50% refused, on two attempts: too few alone to shed
    alone = throttle.reject_probability()
    assert alone == 0.0
    throttle.pool(998, 499, 499)  # the fleet: 50% refused over a thousand attempts
    assert throttle.reject_probability() == pytest.approx((1 - 1.4 * 0.5) * 1000 / 1001)
    throttle.pool(998, 998, 0)  # a healthy fleet: 1 refusal in 1000 is left alone
    assert throttle.reject_probability() == 0.0
    throttle.pool(998, 0, 0)  # a dead fleet (plain failures) raises the general term
    assert throttle.reject_probability() == pytest.approx(0.9)
    throttle.pool(0, 0, 0)
    assert throttle.reject_probability() == pytest.approx(alone)


# -- the Retrier tells the throttle which failures were overload refusals -------------------------


class StatusError(Exception):
    """An error carrying an HTTP status (``status_of`` reads ``status_code``)."""

    def __init__(self, status: int) -> None:
        super().__init__(f"HTTP {status}")
        self.status_code = status


@dataclass
class Reply:
    """A returned value with a status, as a response is."""

    status_code: int


def throttled(clock: FakeClock, **policy: object) -> tuple[Retrier, AdaptiveThrottle]:
    throttle = AdaptiveThrottle(clock=clock, max_reject=0.0)  # measures, never sheds
    policy = {"attempts": 2, "backoff": "fixed", "initial_delay": "1ms", **policy}
    retrier = Retrier(
        RetryPolicy(**policy),  # type: ignore[arg-type]
        budget=None,
        throttle=throttle,
        clock=clock,
        instruments=(),
    )
    return retrier, throttle


@pytest.mark.parametrize(
    ("error", "overloaded"),
    [
        pytest.param(StatusError(503), 2, id="503"),
        pytest.param(StatusError(429), 2, id="429"),
        pytest.param(StatusError(529), 2, id="529-anthropic-overloaded"),
        pytest.param(StatusError(502), 0, id="502-bad-gateway-is-loss"),
        pytest.param(StatusError(500), 0, id="500-is-loss"),
        pytest.param(ConnectionError("refused"), 0, id="connection-refused-is-loss"),
    ],
)
def test_a_failed_attempt_is_an_overload_refusal_by_its_status(
    clock: FakeClock, error: Exception, overloaded: int
) -> None:
    """With the implicit "any exception" rule (no matcher, no listener: the status is not read
    for the policy) the throttle still learns the status of each failed attempt."""
    retrier, throttle = throttled(clock)

    def call() -> None:
        raise error

    with pytest.raises(type(error)):
        retrier.call_sync(call)
    stats = throttle.statistics()
    assert (stats.requests, stats.accepts, stats.overloaded) == (2, 0, overloaded)


def test_a_retried_result_with_an_overload_status_is_an_overload_refusal(clock: FakeClock) -> None:
    """A returned response-like value matched by status counts like a raised one."""
    retrier, throttle = throttled(clock, retry_on=[429, 500], attempts=3)
    replies = iter([Reply(429), Reply(500), Reply(200)])
    assert retrier.call_sync(lambda: next(replies)).status_code == 200
    stats = throttle.statistics()
    assert (stats.requests, stats.accepts, stats.overloaded) == (3, 1, 1)


def test_the_breaker_still_sees_a_plain_failure_and_per_target_throttles_get_the_signal(
    clock: FakeClock,
) -> None:
    """The breaker's verdicts are unchanged; a PerTarget throttle's instance gets the flag."""
    breaker = CircuitBreaker(clock=clock)
    throttles = PerTarget(AdaptiveThrottle(clock=clock, max_reject=0.0))
    retrier = Retrier(
        RetryPolicy(attempts=3, backoff="fixed", initial_delay="1ms"),
        breaker=breaker,
        throttle=throttles,
        clock=clock,
        instruments=(),
    )

    def overloaded() -> None:
        raise StatusError(503)

    with pytest.raises(StatusError):
        retrier.run_sync(overloaded, (), {}, Call.of(overloaded, retrier.policy, "api"))
    instance = throttles.get("api")
    assert instance is not None
    assert instance.statistics().overloaded == 3
    assert breaker.statistics().consecutive_failures == 3
