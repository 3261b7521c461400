"""AdaptiveThrottle: the SRE formula, the default window's figures, properties and thread safety."""

from __future__ import annotations

import random
import threading
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from retrymw._core.errors import ConfigError, LoadShedError, RetrymwError
from retrymw._protect.throttle import AdaptiveThrottle, AdaptiveThrottleStatistics
from retrymw.testing import FakeClock


def feed(throttle: AdaptiveThrottle, accepted: int, failed: int) -> None:
    """Record verdicts directly (attempts admitted elsewhere)."""
    for _ in range(accepted):
        throttle.record_success()
    for _ in range(failed):
        throttle.record_failure()


@pytest.mark.parametrize(
    ("accepted", "failed", "expected"),
    [
        pytest.param(10, 0, 0.0, id="healthy"),
        pytest.param(50, 50, 0.0, id="half-failing-left-alone"),
        pytest.param(40, 60, 20 / 101, id="60pc-failing"),
        pytest.param(10, 90, 0.79207920792, id="90pc-failing"),
        pytest.param(0, 5, 5 / 6, id="few-requests"),
        pytest.param(0, 1000, 0.9, id="capped"),
    ],
)
def test_reject_probability_is_the_sre_formula(
    clock: FakeClock, accepted: int, failed: int, expected: float
) -> None:
    """p = min(max_reject, max(0, (R - 2A) / (R + 1))) over the window (min_requests=1:
    the formula from the first verdict, as the SRE book writes it)."""
    throttle = AdaptiveThrottle(clock=clock, min_requests=1)
    feed(throttle, accepted, failed)
    stats = throttle.statistics()
    assert (stats.requests, stats.accepts) == (accepted + failed, accepted)
    assert stats.reject_probability == pytest.approx(expected)
    assert throttle.reject_probability() == stats.reject_probability


def test_k_sets_the_share_of_failures_left_alone(clock: FakeClock) -> None:
    """At k = 1.25 a dependency accepting 70% of requests is throttled; at k = 2 it is not."""
    strict = AdaptiveThrottle(clock=clock, k=1.25)
    lenient = AdaptiveThrottle(clock=clock, k=2.0)
    for throttle in (strict, lenient):
        feed(throttle, 70, 30)
    assert strict.reject_probability() == pytest.approx((100 - 1.25 * 70) / 101)
    assert lenient.reject_probability() == 0.0


def test_shed_attempts_are_not_requests(clock: FakeClock) -> None:
    """A shed attempt counts as shed, never in R, so shedding cannot feed on itself."""
    throttle = AdaptiveThrottle(clock=clock, rng=random.Random(1))
    feed(throttle, 0, 100)
    decisions = [throttle.allow_request() for _ in range(1000)]
    stats = throttle.statistics()
    assert stats.requests == 100  # unchanged: no verdict was recorded for the admitted ones
    assert stats.shed == decisions.count(False)
    assert stats.admitted == decisions.count(True)
    assert 0.85 <= stats.shed / 1000 <= 0.95  # p = 0.9 (capped)


def test_shed_attempts_count_with_the_accept_share_of_the_answered_ones(clock: FakeClock) -> None:
    """p = (R' - 2A') / (R' + 1), R' = R + S, A' = A R' / R: shedding cannot push p past the
    failure share's own 1 - 2A/R, however much of it there is (no drift)."""
    throttle = AdaptiveThrottle(clock=clock, rng=random.Random(3))
    feed(throttle, 30, 70)  # 1 - 2 * 0.3 = 0.4
    assert throttle.reject_probability() == pytest.approx(0.4 * 100 / 101)
    decisions = [throttle.allow_request() for _ in range(10_000)]
    stats = throttle.statistics()
    assert stats.shed_in_window == decisions.count(False) > 3000
    attempts = 100 + stats.shed_in_window
    assert stats.reject_probability == pytest.approx(0.4 * attempts / (attempts + 1))
    assert stats.reject_probability < 0.4


def test_few_verdicts_and_many_shed_attempts_still_reach_max_reject(clock: FakeClock) -> None:
    """A low-rate client: two failures alone give p = 2/3; the attempts shed since count as
    attempts too, so p climbs to max_reject instead of settling at R / (R + 1)."""
    throttle = AdaptiveThrottle(clock=clock, rng=random.Random(0), min_requests=1)
    feed(throttle, 0, 2)
    assert throttle.reject_probability() == pytest.approx(2 / 3)
    while throttle.statistics().shed_in_window < 9:
        throttle.allow_request()
    assert throttle.reject_probability() == pytest.approx(0.9)  # 11/12 > 0.9: capped
    clock.advance(11)  # the verdicts and the shed attempts leave the window together
    stats = throttle.statistics()
    assert (stats.requests, stats.shed_in_window, stats.reject_probability) == (0, 0, 0.0)


def test_release_counts_nowhere(clock: FakeClock) -> None:
    """A cancelled attempt's release changes neither R nor A."""
    throttle = AdaptiveThrottle(clock=clock)
    assert throttle.allow_request()
    throttle.release()
    assert (throttle.statistics().requests, throttle.statistics().accepts) == (0, 0)


def test_the_window_forgets_old_verdicts(clock: FakeClock) -> None:
    """Failures older than the window no longer count: the throttle stops shedding."""
    throttle = AdaptiveThrottle(clock=clock, window="10s")
    feed(throttle, 0, 100)
    clock.advance(5)
    assert throttle.reject_probability() == pytest.approx(0.9)
    clock.advance(6)
    assert throttle.statistics().requests == 0
    assert throttle.reject_probability() == 0.0
    assert all(throttle.allow_request() for _ in range(100))


def test_a_seeded_rng_makes_decisions_repeatable(clock: FakeClock) -> None:
    """Two throttles with the same seed and history shed the same attempts."""
    runs = []
    for _ in range(2):
        throttle = AdaptiveThrottle(clock=clock, rng=random.Random(7))
        feed(throttle, 30, 70)
        runs.append([throttle.allow_request() for _ in range(200)])
    assert runs[0] == runs[1]
    assert 0 < runs[0].count(False) < 200


def test_max_reject_zero_never_sheds(clock: FakeClock) -> None:
    """max_reject=0 measures without ever shedding."""
    throttle = AdaptiveThrottle(clock=clock, max_reject=0.0)
    feed(throttle, 0, 100)
    assert all(throttle.allow_request() for _ in range(100))


def test_clone_copies_settings_not_history(clock: FakeClock) -> None:
    """A clone has the template's settings and clock, its own name, and no verdicts."""
    template = AdaptiveThrottle(
        name="api", clock=clock, k=1.5, overload_k=1.2, window="5s", max_reject=0.5, min_requests=4
    )
    feed(template, 0, 10)
    template.record_failure(overloaded=True)
    clone = template.clone("api:host")
    stats = clone.statistics()
    assert (stats.name, stats.requests, stats.overloaded, stats.k, stats.overload_k) == (
        "api:host",
        0,
        0,
        1.5,
        1.2,
    )
    assert (stats.window, stats.max_reject, stats.min_requests) == (5.0, 0.5, 4)
    feed(clone, 0, 10)
    clock.advance(6)
    assert clone.statistics().requests == 0  # reads the shared clock


def test_statistics_and_repr(clock: FakeClock) -> None:
    """The snapshot is frozen and the repr shows the essentials."""
    throttle = AdaptiveThrottle(name="db", clock=clock, min_requests=1)
    feed(throttle, 1, 3)
    stats = throttle.statistics()
    assert isinstance(stats, AdaptiveThrottleStatistics)
    with pytest.raises(AttributeError):
        stats.requests = 0  # type: ignore[misc]
    assert repr(throttle) == "<AdaptiveThrottle 'db' rejecting 40.0% requests=4 accepts=1 shed=0>"


def test_default_clock_and_rng_work() -> None:
    """Without a clock or rng the throttle uses the system clock and a fresh Random."""
    throttle = AdaptiveThrottle()
    assert throttle.allow_request()
    throttle.record_success()
    assert throttle.statistics().accepts == 1


def test_load_shed_error_is_a_retrymw_error() -> None:
    """LoadShedError names the throttle and the probability it was shedding at."""
    error = LoadShedError("api:db", reject_probability=0.42)
    assert isinstance(error, RetrymwError)
    assert (error.throttle, error.reject_probability) == ("api:db", 0.42)
    assert str(error) == "throttle 'api:db' shed the attempt (rejecting 42% of attempts now)"


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        pytest.param({"name": ""}, "name", id="empty-name"),
        pytest.param({"k": 0.5}, "k", id="k-below-one"),
        pytest.param({"k": float("inf")}, "k", id="infinite-k"),
        pytest.param({"k": True}, "k", id="bool-k"),
        pytest.param({"k": 10**5000}, "k", id="huge-k"),
        pytest.param({"overload_k": 0.9}, "overload_k", id="overload-k-below-one"),
        pytest.param({"overload_k": float("nan")}, "overload_k", id="nan-overload-k"),
        pytest.param({"overload_k": "1.4"}, "overload_k", id="string-overload-k"),
        pytest.param({"max_reject": 1.5}, "max_reject", id="max-reject-above-one"),
        pytest.param({"max_reject": "0.9"}, "max_reject", id="string-max-reject"),
        pytest.param({"window": "100us"}, "window", id="sub-ms-window"),
        pytest.param({"window": 0}, "window", id="zero-window"),
        pytest.param({"min_requests": 0}, "min_requests", id="zero-min-requests"),
        pytest.param({"min_requests": 2.5}, "min_requests", id="float-min-requests"),
        pytest.param({"min_requests": True}, "min_requests", id="bool-min-requests"),
        pytest.param({"min_requests": 10**5000}, "min_requests", id="huge-min-requests"),
    ],
)
def test_invalid_settings_raise_config_error_naming_the_field(
    kwargs: dict[str, Any], field: str
) -> None:
    """Every invalid argument raises ConfigError with the field and an example."""
    with pytest.raises(ConfigError) as caught:
        AdaptiveThrottle(**kwargs)
    assert caught.value.field == field
    assert "expected e.g." in str(caught.value)


# -- the default window's figures (the module docstring's 10 s row, 100 calls/s) -----------------


def run_open_loop(
    throttle: AdaptiveThrottle, clock: FakeClock, rate: float, seconds: float, fails: Any
) -> list[tuple[float, str]]:
    """One attempt per call at ``rate`` calls/s; ``fails(t)`` is the failure probability."""
    rng = random.Random(0)
    outcomes = []
    start = clock.now()
    for index in range(int(seconds * rate)):
        now = start + index / rate
        clock.advance(now - clock.now())
        if not throttle.allow_request():
            outcomes.append((now, "shed"))
        elif rng.random() < fails(now):
            throttle.record_failure()
            outcomes.append((now, "failed"))
        else:
            throttle.record_success()
            outcomes.append((now, "ok"))
    return outcomes


def test_default_window_sheds_an_outage_and_recovers_within_seconds(clock: FakeClock) -> None:
    """Default throttle, 100 calls/s, 60 s outage: >= 85% shed from 10 s in; >= 0.99 in 10 s."""
    throttle = AdaptiveThrottle(clock=clock, rng=random.Random(0))
    outcomes = run_open_loop(throttle, clock, 100, 150, lambda now: 1.0 if 30 <= now < 90 else 0.0)
    late_outage = [outcome for now, outcome in outcomes if 40 <= now < 90]
    assert late_outage.count("shed") / len(late_outage) >= 0.85
    after = [outcome for now, outcome in outcomes if now >= 100]  # 10 s after recovery
    assert after.count("ok") / len(after) >= 0.99
    assert after.count("shed") == 0  # the outage has left the window by then


@pytest.mark.parametrize("rate", [2, 10], ids=lambda rate: f"{rate}/s")
def test_default_window_sheds_a_low_rate_outage_too(clock: FakeClock, rate: int) -> None:
    """At 2 and 10 calls/s (one attempt per call) >= 85% of an outage is shed from 10 s in
    (73% at 2 calls/s when only answered attempts counted), and it recovers within 10 s."""
    throttle = AdaptiveThrottle(clock=clock, rng=random.Random(0))
    outcomes = run_open_loop(throttle, clock, rate, 150, lambda now: 1.0 if 30 <= now < 90 else 0)
    late_outage = [outcome for now, outcome in outcomes if 40 <= now < 90]
    assert late_outage.count("shed") / len(late_outage) >= 0.85
    after = [outcome for now, outcome in outcomes if now >= 100]
    assert after.count("ok") == len(after)


@pytest.mark.parametrize(
    ("failure", "most_shed"),
    [pytest.param(0.2, 0.0, id="brownout-p0.2"), pytest.param(0.5, 0.02, id="partial-p0.5")],
)
def test_default_throttle_leaves_a_partial_failure_mostly_alone(
    clock: FakeClock, failure: float, most_shed: float
) -> None:
    """At p = 0.2 nothing is shed; at p = 0.5 (one dead backend of two) under 2% is."""
    throttle = AdaptiveThrottle(clock=clock, rng=random.Random(0))
    outcomes = run_open_loop(throttle, clock, 100, 600, lambda now: failure)
    shed = sum(outcome == "shed" for _, outcome in outcomes)
    assert shed / len(outcomes) <= most_shed


# -- properties -----------------------------------------------------------------------------------


class ThrottleMachine(RuleBasedStateMachine):
    """Random verdicts, attempts and waits keep the counts and the probability in range."""

    def __init__(self) -> None:
        super().__init__()
        self.clock = FakeClock()
        self.throttle = AdaptiveThrottle(clock=self.clock)
        self.max_reject = 0.9
        self.k, self.overload_k = 2.0, 1.4
        self.admitted = self.shed = 0

    @initialize(
        k=st.floats(1.0, 5.0),
        overload_k=st.floats(1.0, 5.0),
        max_reject=st.floats(0.0, 1.0),
        window=st.sampled_from([1, 10]),
        min_requests=st.sampled_from([1, 10, 30]),
    )
    def configure(
        self, k: float, overload_k: float, max_reject: float, window: int, min_requests: int
    ) -> None:
        self.throttle = AdaptiveThrottle(
            clock=self.clock,
            k=k,
            overload_k=overload_k,
            max_reject=max_reject,
            window=window,
            min_requests=min_requests,
            rng=random.Random(0),
        )
        self.k, self.overload_k, self.max_reject = k, overload_k, max_reject

    @rule(accepted=st.integers(0, 20), failed=st.integers(0, 20))
    def verdicts(self, accepted: int, failed: int) -> None:
        feed(self.throttle, accepted, failed)

    @rule(refused=st.integers(0, 20))
    def overload_refusals(self, refused: int) -> None:
        for _ in range(refused):
            self.throttle.record_failure(overloaded=True)

    @rule(count=st.integers(1, 20))
    def attempts(self, count: int) -> None:
        for _ in range(count):
            if self.throttle.allow_request():
                self.admitted += 1
            else:
                self.shed += 1

    @rule(seconds=st.floats(0.0, 3.0))
    def wait(self, seconds: float) -> None:
        self.clock.advance(seconds)

    @invariant()
    def in_range(self) -> None:
        stats = self.throttle.statistics()
        assert 0 <= stats.accepts <= stats.requests
        assert 0 <= stats.overloaded <= stats.requests - stats.accepts
        assert 0 <= stats.shed_in_window <= stats.shed
        assert 0.0 <= stats.reject_probability <= self.max_reject
        expected = 0.0
        attempts = stats.requests + stats.shed_in_window
        if stats.requests and attempts >= stats.min_requests:
            # the SRE formula over R' = R + S and A' = A R' / R, and the overload term: the
            # same at overload_k, with only O counted as not accepted
            accepts = stats.accepts * attempts / stats.requests
            expected = max(0.0, (attempts - self.k * accepts) / (attempts + 1))
            if stats.overloaded:
                answered = (stats.requests - stats.overloaded) * attempts / stats.requests
                overload = (attempts - self.overload_k * answered) / (attempts + 1)
                expected = max(expected, overload)
        assert stats.reject_probability == pytest.approx(min(self.max_reject, expected))
        assert (stats.admitted, stats.shed) == (self.admitted, self.shed)


TestThrottleMachine = ThrottleMachine.TestCase
TestThrottleMachine.settings = settings(max_examples=60, stateful_step_count=40, deadline=None)


@settings(max_examples=200, deadline=None)
@given(
    accepted=st.integers(0, 10_000),
    failed=st.integers(0, 10_000),
    refused=st.integers(0, 10_000),
    k=st.floats(1.0, 100.0),
    overload_k=st.floats(1.0, 100.0),
    cap=st.floats(0.0, 1.0),
)
def test_probability_never_leaves_its_range(
    accepted: int, failed: int, refused: int, k: float, overload_k: float, cap: float
) -> None:
    """However many verdicts and overload refusals, 0 <= p <= max_reject."""
    throttle = AdaptiveThrottle(clock=FakeClock(), k=k, overload_k=overload_k, max_reject=cap)
    feed(throttle, accepted, failed)
    for _ in range(refused):
        throttle.record_failure(overloaded=True)
    assert 0.0 <= throttle.reject_probability() <= cap
    assert throttle.statistics().overloaded == refused


def test_threads_lose_no_verdict_and_decide_exactly(clock: FakeClock) -> None:
    """Eight threads admitting and recording at once: every decision and verdict is counted,
    overload refusals among the failures too."""
    throttle = AdaptiveThrottle(clock=clock, window="24h", rng=random.Random(0))
    feed(throttle, 0, 200)  # shedding at 0.9 from the start, so both branches race
    barrier = threading.Barrier(8)
    tallies: list[tuple[int, int, int]] = []

    def work() -> None:
        barrier.wait()
        mine = accepted = refused = 0
        for index in range(2_000):
            if throttle.allow_request():
                mine += 1
                if index % 2 == 0:
                    throttle.record_success()
                    accepted += 1
                else:
                    throttle.record_failure(overloaded=index % 4 == 1)
                    refused += index % 4 == 1
        tallies.append((mine, accepted, refused))

    threads = [threading.Thread(target=work) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    stats = throttle.statistics()
    assert stats.admitted + stats.shed == 16_000
    assert stats.admitted == sum(t[0] for t in tallies) == stats.requests - 200
    assert stats.accepts == sum(t[1] for t in tallies)
    assert stats.overloaded == sum(t[2] for t in tallies) > 0
    assert 0 < stats.shed < 16_000
