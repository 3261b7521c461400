"""CircuitBreaker: rules, exact probes, events and thread safety."""

from __future__ import annotations

import contextvars
import logging
import random
import threading
from typing import Any, Literal

import anyio
import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from retrymw import (
    CircuitBreaker,
    CircuitBreakerStatistics,
    CircuitOpenError,
    Retrier,
    RetryPolicy,
)
from retrymw._core.errors import ConfigError
from retrymw._core.events import BreakerStateChanged
from retrymw.testing import FakeClock

pytestmark = pytest.mark.anyio

LEGAL = {("closed", "open"), ("open", "half_open"), ("half_open", "closed"), ("half_open", "open")}


def state(breaker: CircuitBreaker) -> str:
    """The breaker's state, read through the property (un-narrowed for the type checker)."""
    return breaker.state


def fail(breaker: CircuitBreaker, times: int) -> None:
    """Report ``times`` admitted, failed attempts."""
    for _ in range(times):
        assert breaker.allow_request()
        breaker.record_failure()


Verdict = Literal["success", "failure", "release"]


class Attempt:
    """One admitted attempt in its own context, as the retrier runs each in a task or thread."""

    def __init__(self, breaker: CircuitBreaker) -> None:
        self.breaker = breaker
        self.context = contextvars.Context()

    def admit(self) -> bool:
        return self.context.run(self.breaker.allow_request)

    def end(self, verdict: Verdict) -> None:
        breaker = self.breaker
        method = {
            "success": breaker.record_success,
            "failure": breaker.record_failure,
            "release": breaker.release,
        }[verdict]
        self.context.run(method)


def opened(clock: FakeClock, **kwargs: Any) -> CircuitBreaker:
    """A breaker tripped by consecutive failures at the clock's current time."""
    breaker = CircuitBreaker(clock=clock, failure_threshold=3, **kwargs)
    fail(breaker, 3)
    assert state(breaker) == "open"
    return breaker


@pytest.mark.parametrize(
    ("failures", "expected"),
    [pytest.param(19, "closed", id="19-stays-closed"), pytest.param(20, "open", id="20-opens")],
)
def test_default_consecutive_threshold(clock: FakeClock, failures: int, expected: str) -> None:
    """By default 20 consecutive failed attempts open the circuit, 19 do not."""
    breaker = CircuitBreaker(clock=clock)
    fail(breaker, failures)
    assert state(breaker) == expected


def test_a_success_resets_the_consecutive_count(clock: FakeClock) -> None:
    """Failures separated by a success never add up to the consecutive threshold."""
    breaker = CircuitBreaker(clock=clock, failure_rate_threshold=None)
    for _ in range(10):
        fail(breaker, 19)
        breaker.record_success()
    assert state(breaker) == "closed"
    assert breaker.statistics().consecutive_failures == 0


def test_rate_rule_waits_for_minimum_calls(clock: FakeClock) -> None:
    """Alternating outcomes open a 50% rate rule exactly when the window holds minimum_calls."""
    breaker = CircuitBreaker(
        clock=clock,
        failure_threshold=None,
        failure_rate_threshold=0.5,
        window=10,
        minimum_calls=6,
    )
    for _ in range(2):
        breaker.record_success()
        breaker.record_failure()
    breaker.record_success()
    assert state(breaker) == "closed"
    assert breaker.statistics().failure_rate is None
    breaker.record_failure()
    assert state(breaker) == "open"


def test_count_window_forgets_old_failures(clock: FakeClock) -> None:
    """Only the last `window` attempts count: old failures slide out of a count window."""
    breaker = CircuitBreaker(
        clock=clock, failure_threshold=None, failure_rate_threshold=0.5, window=10, minimum_calls=10
    )
    for _ in range(4):
        breaker.record_failure()
    for _ in range(10):
        breaker.record_success()
    for _ in range(4):
        breaker.record_failure()
    stats = breaker.statistics()
    assert (stats.state, stats.window_calls, stats.window_failures) == ("closed", 10, 4)
    breaker.record_failure()
    assert state(breaker) == "open"


def test_many_lazy_successes_fill_the_window(clock: FakeClock) -> None:
    """More successes than the window holds leave a clean, full count window."""
    breaker = CircuitBreaker(clock=clock, failure_threshold=None, window=10, minimum_calls=10)
    for _ in range(9):
        breaker.record_failure()
    for _ in range(25):
        breaker.record_success()
    stats = breaker.statistics()
    assert (stats.window_calls, stats.window_failures, stats.successes) == (10, 0, 25)


def test_time_window_ages_out_failures(clock: FakeClock) -> None:
    """A time-based window forgets failures older than its duration."""
    breaker = CircuitBreaker(
        clock=clock, failure_threshold=None, window="10s", minimum_calls=4, failure_rate_threshold=1
    )
    fail(breaker, 3)
    clock.advance(11)
    fail(breaker, 1)  # with the old three still counted, 4 of 4 would open it
    assert state(breaker) == "closed"
    assert breaker.statistics().window_calls == 1
    fail(breaker, 3)
    assert state(breaker) == "open"


def test_time_window_opens_at_the_rate(clock: FakeClock) -> None:
    """A time-based window opens once its failure rate reaches the threshold."""
    breaker = CircuitBreaker(
        clock=clock,
        failure_threshold=None,
        failure_rate_threshold=0.5,
        window="1s",
        minimum_calls=10,
    )
    for _ in range(5):
        clock.advance(0.05)
        breaker.record_success()
    for _ in range(4):
        clock.advance(0.05)
        breaker.record_failure()
    assert state(breaker) == "closed"
    clock.advance(0.05)
    breaker.record_failure()
    assert breaker.statistics().state == "open"


def test_open_rejects_until_recovery_then_probes(clock: FakeClock) -> None:
    """An open circuit rejects at once, counts down retry_in, then admits one probe."""
    breaker = opened(clock, recovery_timeout="5s")
    assert not breaker.allow_request()
    assert breaker.retry_in() == 5.0
    clock.advance(3)
    assert breaker.retry_in() == 2.0
    assert not breaker.allow_request()
    clock.advance(2)
    assert breaker.allow_request()
    assert state(breaker) == "half_open"
    assert breaker.retry_in() is None
    assert not breaker.allow_request()
    breaker.record_success()
    assert state(breaker) == "closed"
    assert breaker.statistics().rejected == 3


def test_a_failed_probe_reopens(clock: FakeClock) -> None:
    """One failed probe sends a half-open circuit back to open for a new period."""
    breaker = opened(clock, recovery_timeout="5s", half_open_max_calls=2, success_threshold=2)
    clock.advance(5)
    assert breaker.allow_request()
    breaker.record_success()
    assert state(breaker) == "half_open"
    assert breaker.allow_request()
    breaker.record_failure()
    assert state(breaker) == "open"
    assert breaker.retry_in() == 5.0


def test_success_threshold_needs_that_many_successful_probes(clock: FakeClock) -> None:
    """With success_threshold=3 and one slot, three probes in turn close the circuit."""
    breaker = opened(clock, success_threshold=3)
    clock.advance(5)
    for expected in ("half_open", "half_open", "closed"):
        assert breaker.allow_request()
        assert not breaker.allow_request()
        breaker.record_success()
        assert state(breaker) == expected


def test_release_frees_the_probe_slot_without_a_verdict(clock: FakeClock) -> None:
    """A cancelled probe frees its slot and neither closes nor reopens the circuit."""
    breaker = opened(clock)
    clock.advance(5)
    assert breaker.allow_request()
    assert not breaker.allow_request()
    breaker.release()
    assert state(breaker) == "half_open"
    assert breaker.allow_request()
    breaker.release()
    breaker.release()  # an extra release never drives the count negative
    assert breaker.statistics().probes_in_flight == 0


def test_stale_verdicts_while_open_are_ignored(clock: FakeClock) -> None:
    """Verdicts arriving while open (attempts admitted before the trip) change nothing."""
    breaker = opened(clock)
    breaker.record_failure()
    breaker.record_success()
    breaker.release()
    stats = breaker.statistics()
    assert (stats.state, stats.trips, stats.retry_in) == ("open", 1, 5.0)


@pytest.mark.parametrize("verdict", ["success", "failure", "release"])
@pytest.mark.parametrize("success_threshold", [1, 2])
def test_a_closed_era_verdict_in_half_open_moves_nothing(
    clock: FakeClock, verdict: Verdict, success_threshold: int
) -> None:
    """A straggler admitted before the trip frees no probe slot and neither closes nor reopens."""
    breaker = CircuitBreaker(clock=clock, failure_threshold=1, success_threshold=success_threshold)
    straggler, tripper, probe, other = (Attempt(breaker) for _ in range(4))
    assert straggler.admit()
    assert tripper.admit()
    tripper.end("failure")
    clock.advance(5)
    assert probe.admit()
    assert not other.admit()
    straggler.end(verdict)  # the late verdict of an attempt admitted while closed
    stats = breaker.statistics()
    assert (stats.state, stats.trips, stats.probes_in_flight) == ("half_open", 1, 1)
    assert not other.admit()  # still only one probe in flight
    probe.end("success")
    assert state(breaker) == ("closed" if success_threshold == 1 else "half_open")
    assert breaker.statistics().probes_in_flight == 0


def test_a_verdict_from_an_earlier_half_open_period_is_stale(clock: FakeClock) -> None:
    """A probe that outlives its half-open period cannot stand in for the next period's probe."""
    breaker = CircuitBreaker(clock=clock, failure_threshold=1, half_open_max_calls=2)
    assert breaker.allow_request()
    breaker.record_failure()
    clock.advance(5)
    slow, failing, probe, other = (Attempt(breaker) for _ in range(4))
    assert slow.admit()
    assert failing.admit()
    failing.end("failure")  # reopens; `slow` is still running
    clock.advance(5)
    assert probe.admit()
    slow.end("success")
    assert state(breaker) == "half_open"
    assert breaker.statistics().probes_in_flight == 1
    assert other.admit()  # the second slot was free all along, and is taken now
    assert not Attempt(breaker).admit()
    slow.end("failure")  # a second stray verdict changes nothing either
    assert (state(breaker), breaker.statistics().trips) == ("half_open", 2)


def test_a_straggler_that_outlives_a_whole_open_period_counts_once_closed(
    clock: FakeClock,
) -> None:
    """Once the circuit closed again, a straggler's verdict counts in the closed-state rules."""
    breaker = CircuitBreaker(clock=clock, failure_threshold=2, failure_rate_threshold=None)
    straggler = Attempt(breaker)
    assert straggler.admit()
    fail(breaker, 2)
    clock.advance(5)
    assert breaker.allow_request()
    breaker.record_success()
    straggler.end("failure")
    stats = breaker.statistics()
    assert (stats.state, stats.consecutive_failures, stats.window_calls) == ("closed", 1, 1)


def test_nested_probes_in_one_context_each_get_their_verdict(clock: FakeClock) -> None:
    """An attempt that calls through the same breaker again: verdicts pair last-in first-out."""
    breaker = opened(clock, half_open_max_calls=2, success_threshold=2)
    clock.advance(5)
    assert breaker.allow_request()  # the outer probe
    assert breaker.allow_request()  # a probe nested inside it
    assert not Attempt(breaker).admit()
    breaker.record_success()
    assert (state(breaker), breaker.statistics().probes_in_flight) == ("half_open", 1)
    breaker.record_success()
    assert state(breaker) == "closed"


async def test_retrier_stragglers_cannot_stand_in_for_probes(clock: FakeClock) -> None:
    """Through the real Retrier, a call admitted while closed that ends in half-open is stale."""
    breaker = CircuitBreaker(name="db", clock=clock, failure_threshold=1)
    seen: list[BreakerStateChanged] = []
    breaker.add_listener(seen.append)
    retrier = Retrier(RetryPolicy(attempts=1), breaker=breaker, clock=clock, budget=None)
    straggling, probing = anyio.Event(), anyio.Event()
    finish_straggler, finish_probe = anyio.Event(), anyio.Event()
    results: list[str] = []

    async def dependency(value: str, started: anyio.Event, finish: anyio.Event) -> str:
        if not value:
            raise ConnectionError("down")
        started.set()
        await finish.wait()
        return value

    async def call(value: str = "", started: Any = None, finish: Any = None) -> None:
        try:
            results.append(await retrier.call(dependency, value, started, finish))
        except (CircuitOpenError, ConnectionError) as error:
            results.append(type(error).__name__)

    async with anyio.create_task_group() as group:
        group.start_soon(call, "straggler", straggling, finish_straggler)
        await straggling.wait()
        await call()  # fails: opens the circuit
        clock.advance(5)
        group.start_soon(call, "probe", probing, finish_probe)
        await probing.wait()
        finish_straggler.set()
        await anyio.wait_all_tasks_blocked()
        await call()  # the probe is still in flight: rejected, not a second probe
        stats = breaker.statistics()  # the breaker given is the one in use
        assert (stats.state, stats.probes_in_flight) == ("half_open", 1)
        finish_probe.set()
    assert results == ["ConnectionError", "straggler", "CircuitOpenError", "probe"]
    assert [event.state for event in seen] == ["open", "half_open", "closed"]


def test_retrier_stragglers_in_threads_cannot_stand_in_for_probes(clock: FakeClock) -> None:
    """The sync driver keeps each attempt's admission and verdict in its thread as well."""
    breaker = CircuitBreaker(name="db", clock=clock, failure_threshold=1)
    seen: list[BreakerStateChanged] = []
    breaker.add_listener(seen.append)
    retrier = Retrier(RetryPolicy(attempts=1), breaker=breaker, clock=clock, budget=None)
    started = [threading.Event(), threading.Event()]
    finish = [threading.Event(), threading.Event()]
    results: list[str] = []

    def dependency(index: int | None) -> str:
        if index is None:
            raise ConnectionError("down")
        started[index].set()
        assert finish[index].wait(timeout=10)
        return f"slow{index}"

    def call(index: int | None = None) -> None:
        try:
            results.append(retrier.call_sync(dependency, index))
        except (CircuitOpenError, ConnectionError) as error:
            results.append(type(error).__name__)

    def run_in_thread(index: int) -> threading.Thread:
        thread = threading.Thread(target=call, args=(index,))
        thread.start()
        assert started[index].wait(timeout=10)
        return thread

    straggler = run_in_thread(0)
    call()  # fails: opens the circuit
    clock.advance(5)
    probe = run_in_thread(1)
    finish[0].set()
    straggler.join()
    call()  # the probe is still in flight: rejected, not a second probe
    finish[1].set()
    probe.join()
    assert results == ["ConnectionError", "slow0", "CircuitOpenError", "slow1"]
    assert [event.state for event in seen] == ["open", "half_open", "closed"]


def test_closing_starts_from_a_clean_window(clock: FakeClock) -> None:
    """After closing, old failures no longer count towards either rule."""
    breaker = opened(clock)
    clock.advance(5)
    assert breaker.allow_request()
    breaker.record_success()
    fail(breaker, 2)
    assert state(breaker) == "closed"
    stats = breaker.statistics()
    assert (stats.consecutive_failures, stats.window_calls) == (2, 2)


def test_open_periods_grow_up_to_the_cap(clock: FakeClock) -> None:
    """With max_recovery_timeout, each consecutive trip doubles the period, capped."""
    breaker = opened(clock, recovery_timeout="5s", max_recovery_timeout="30s")
    periods = []
    for _ in range(6):
        periods.append(breaker.retry_in())
        clock.advance(breaker.retry_in() or 0.0)
        assert breaker.allow_request()
        breaker.record_failure()
    assert periods == [5.0, 10.0, 20.0, 30.0, 30.0, 30.0]
    clock.advance(30)
    assert breaker.allow_request()
    breaker.record_success()
    fail(breaker, 3)
    assert breaker.retry_in() == 5.0


def test_huge_streaks_do_not_overflow(clock: FakeClock) -> None:
    """Thousands of consecutive trips keep the period at the cap without overflow."""
    breaker = opened(clock, recovery_timeout="1ms", max_recovery_timeout="1s")
    for _ in range(3000):
        clock.advance(1)
        assert breaker.allow_request()
        breaker.record_failure()
    assert breaker.retry_in() == 1.0


def test_jittered_periods_stay_below_the_cap_and_vary(clock: FakeClock) -> None:
    """recovery_jitter draws each period from [d(1-j), d], still varied at the cap."""
    breaker = opened(
        clock,
        recovery_timeout="4s",
        max_recovery_timeout="8s",
        recovery_jitter=0.5,
        rng=random.Random(7),
    )
    periods = []
    for _ in range(50):
        period = breaker.retry_in() or 0.0
        periods.append(period)
        clock.advance(period)
        assert breaker.allow_request()
        breaker.record_failure()
    capped = periods[2:]
    assert all(4.0 <= period <= 8.0 for period in capped)
    assert max(capped) - min(capped) > 2.0
    assert 2.0 <= periods[0] <= 4.0


def test_listeners_see_every_transition_in_order(clock: FakeClock) -> None:
    """Each transition reaches every listener with its circuit, states and time."""
    seen: list[BreakerStateChanged] = []
    breaker = CircuitBreaker(name="db", clock=clock, failure_threshold=2)
    breaker.add_listener(seen.append)
    fail(breaker, 2)
    clock.advance(5)
    assert breaker.allow_request()
    breaker.record_failure()
    clock.advance(5)
    assert state(breaker) == "half_open"
    assert breaker.allow_request()
    breaker.record_success()
    assert seen == [
        BreakerStateChanged("db", "closed", "open", 0.0),
        BreakerStateChanged("db", "open", "half_open", 5.0),
        BreakerStateChanged("db", "half_open", "open", 5.0),
        BreakerStateChanged("db", "open", "half_open", 10.0),
        BreakerStateChanged("db", "half_open", "closed", 10.0),
    ]


def test_a_raising_listener_is_logged_and_breaks_nothing(
    clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    """A listener that raises is logged; later listeners and the transition still happen."""
    seen: list[BreakerStateChanged] = []

    def explode(event: BreakerStateChanged) -> None:
        raise RuntimeError("boom")

    breaker = CircuitBreaker(clock=clock, failure_threshold=1)
    breaker.add_listener(explode)
    breaker.add_listener(seen.append)
    with caplog.at_level(logging.ERROR, logger="retrymw"):
        breaker.record_failure()
    assert state(breaker) == "open"
    assert [event.state for event in seen] == ["open"]
    assert "listener" in caplog.text
    assert "boom" in caplog.text


def test_statistics_and_repr(clock: FakeClock) -> None:
    """statistics() is a frozen snapshot and repr() summarises the breaker on one line."""
    breaker = CircuitBreaker(
        name="api", clock=clock, window=10, minimum_calls=2, failure_rate_threshold=0.6
    )
    breaker.record_success()
    breaker.record_failure()
    stats = breaker.statistics()
    assert stats == CircuitBreakerStatistics(
        name="api",
        state="closed",
        consecutive_failures=1,
        window_calls=2,
        window_failures=1,
        failure_rate=0.5,
        successes=1,
        failures=1,
        rejected=0,
        trips=0,
        probes_in_flight=0,
        retry_in=None,
    )
    with pytest.raises(AttributeError):
        stats.state = "open"  # type: ignore[misc]
    assert repr(breaker) == ("<CircuitBreaker 'api' closed failures=1 in a row, 50% of 2 trips=0>")
    breaker.record_failure()
    assert repr(breaker) == (
        "<CircuitBreaker 'api' open retry_in=5s failures=2 in a row, 67% of 3 trips=1>"
    )


def test_default_clock_is_the_system_clock() -> None:
    """Without a clock the breaker reads the system clock."""
    breaker = CircuitBreaker(failure_threshold=1, recovery_timeout="1h")
    breaker.record_failure()
    assert 3599.0 < (breaker.retry_in() or 0.0) <= 3600.0


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        pytest.param({"name": ""}, "name", id="empty-name"),
        pytest.param({"failure_threshold": 0}, "failure_threshold", id="zero-threshold"),
        pytest.param({"failure_threshold": True}, "failure_threshold", id="bool-threshold"),
        pytest.param({"failure_rate_threshold": 0}, "failure_rate_threshold", id="zero-rate"),
        pytest.param({"failure_rate_threshold": 1.5}, "failure_rate_threshold", id="big-rate"),
        pytest.param(
            {"failure_threshold": None, "failure_rate_threshold": None},
            "failure_threshold",
            id="no-rule",
        ),
        pytest.param({"window": 10.0}, "window", id="float-window"),
        pytest.param({"window": 0}, "window", id="zero-window"),
        pytest.param({"window": "0s"}, "window", id="empty-time-window"),
        pytest.param({"window": "ten"}, "window", id="bad-window"),
        pytest.param({"minimum_calls": 101}, "minimum_calls", id="min-above-window"),
        pytest.param({"recovery_timeout": "-1s"}, "recovery_timeout", id="negative-recovery"),
        pytest.param({"max_recovery_timeout": "1s"}, "max_recovery_timeout", id="cap-too-low"),
        pytest.param({"recovery_jitter": 2}, "recovery_jitter", id="jitter-above-one"),
        pytest.param({"half_open_max_calls": 0}, "half_open_max_calls", id="no-probes"),
        pytest.param({"success_threshold": 1.0}, "success_threshold", id="float-successes"),
    ],
)
def test_invalid_settings_raise_config_error_naming_the_field(
    kwargs: dict[str, Any], field: str
) -> None:
    """Every invalid argument raises ConfigError with the offending field's name."""
    with pytest.raises(ConfigError) as caught:
        CircuitBreaker(**kwargs)
    assert caught.value.field == field


@pytest.mark.parametrize("probes", [pytest.param(1, id="one"), pytest.param(3, id="three")])
async def test_exactly_n_probes_among_1000_waiting_coroutines(
    clock: FakeClock, probes: int
) -> None:
    """1000 coroutines released at once into half-open get exactly half_open_max_calls probes."""
    breaker = opened(clock, half_open_max_calls=probes)
    clock.advance(5)
    go, finish = anyio.Event(), anyio.Event()
    admitted: list[int] = []
    rejected: list[int] = []

    async def caller(index: int) -> None:
        await go.wait()
        if not breaker.allow_request():
            rejected.append(index)
            return
        admitted.append(index)
        await finish.wait()  # the probe stays in flight while everyone else arrives
        breaker.record_success()

    async with anyio.create_task_group() as group:
        for index in range(1000):
            group.start_soon(caller, index)
        await anyio.wait_all_tasks_blocked()
        go.set()
        await anyio.wait_all_tasks_blocked()
        assert (len(admitted), len(rejected)) == (probes, 1000 - probes)
        assert breaker.statistics().probes_in_flight == probes
        finish.set()
    assert state(breaker) == "closed"


@pytest.mark.parametrize("probes", [pytest.param(1, id="one"), pytest.param(4, id="four")])
def test_exactly_n_probes_among_racing_threads(clock: FakeClock, probes: int) -> None:
    """200 threads racing into half-open get exactly half_open_max_calls probes."""
    breaker = opened(clock, half_open_max_calls=probes)
    clock.advance(5)
    barrier = threading.Barrier(200)
    results: list[bool] = []

    def caller() -> None:
        barrier.wait()
        results.append(breaker.allow_request())

    threads = [threading.Thread(target=caller) for _ in range(200)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results.count(True) == probes
    assert breaker.statistics().rejected == 200 - probes


def test_concurrent_threads_keep_exact_counts(clock: FakeClock) -> None:
    """Eight threads recording at once lose no success or failure."""
    breaker = CircuitBreaker(clock=clock, failure_threshold=None, failure_rate_threshold=1.0)
    barrier = threading.Barrier(8)

    def work() -> None:
        barrier.wait()
        for index in range(5_000):
            if breaker.allow_request():
                if index % 3:
                    breaker.record_success()
                else:
                    breaker.record_failure()

    threads = [threading.Thread(target=work) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    stats = breaker.statistics()
    assert stats.successes + stats.failures == 40_000
    assert stats.failures == 8 * len(range(0, 5_000, 3))


def test_clones_copy_settings_and_listeners_but_not_state(clock: FakeClock) -> None:
    """A clone has the template's rules and listeners, and starts closed with no history."""
    seen: list[BreakerStateChanged] = []
    template = CircuitBreaker(clock=clock, failure_threshold=2, recovery_timeout="7s")
    template.add_listener(seen.append)
    fail(template, 2)
    clone = template.clone("copy")
    assert clone.statistics().trips == 0
    fail(clone, 2)
    assert clone.retry_in() == 7.0
    assert [event.circuit for event in seen] == ["default", "copy"]


class BreakerMachine(RuleBasedStateMachine):
    """Random attempts, each in its own context, keep the state machine legal and probes exact.

    The model tracks which attempts were admitted in the current half-open period itself,
    from the transition events, rather than trusting the breaker's own probe counter.
    """

    def __init__(self) -> None:
        super().__init__()
        self.clock = FakeClock()
        self.events: list[BreakerStateChanged] = []
        # Each admitted attempt without a verdict yet, with the half-open period it was admitted
        # in (the index of that period's half_open event), or None if admitted while closed.
        self.in_flight: list[tuple[Attempt, int | None]] = []
        self.probes = 1
        self.breaker = CircuitBreaker(clock=self.clock)

    @initialize(
        failure_threshold=st.one_of(st.none(), st.integers(1, 5)),
        window=st.one_of(st.integers(1, 8), st.sampled_from(["1s", "5s"])),
        probes=st.integers(1, 3),
        successes=st.integers(1, 3),
        growing=st.booleans(),
    )
    def configure(
        self, failure_threshold: int | None, window: Any, probes: int, successes: int, growing: bool
    ) -> None:
        self.breaker = CircuitBreaker(
            clock=self.clock,
            failure_threshold=failure_threshold,
            window=window,
            minimum_calls=1,
            recovery_timeout="2s",
            max_recovery_timeout="10s" if growing else None,
            recovery_jitter=0.5 if growing else 0.0,
            half_open_max_calls=probes,
            success_threshold=successes,
            rng=random.Random(0),
        )
        self.breaker.add_listener(self.events.append)
        self.probes = probes

    def period(self) -> int | None:
        """The current half-open period (its event's index), or None when not half-open."""
        if self.events and self.events[-1].state == "half_open":
            return len(self.events) - 1
        return None

    def probes_now(self) -> int:
        """Attempts admitted in the current half-open period and still without a verdict."""
        period = self.period()
        return sum(period is not None and admitted == period for _, admitted in self.in_flight)

    @rule(arrivals=st.integers(1, 3))
    def request(self, arrivals: int) -> None:
        for _ in range(arrivals):
            attempt = Attempt(self.breaker)
            if attempt.admit():
                self.in_flight.append((attempt, self.period()))
            assert self.probes_now() <= self.probes

    @precondition(lambda self: self.in_flight)
    @rule(pick=st.integers(0, 10**6), verdict=st.sampled_from(["success", "failure", "release"]))
    def finish(self, pick: int, verdict: Verdict) -> None:
        attempt, admitted = self.in_flight.pop(pick % len(self.in_flight))
        state(self.breaker)  # apply a due open→half_open transition before the verdict
        period, seen = self.period(), len(self.events)
        attempt.end(verdict)
        if period is None:
            return
        if admitted != period or verdict == "release":
            # Only this period's probes' verdicts may move a half-open circuit.
            assert len(self.events) == seen
        elif verdict == "failure":
            assert [event.state for event in self.events[seen:]] == ["open"]

    @rule(seconds=st.floats(0.0, 12.0))
    def wait(self, seconds: float) -> None:
        self.clock.advance(seconds)

    @invariant()
    def legal(self) -> None:
        stats = self.breaker.statistics()
        previous = "closed"
        for event in self.events:
            assert (event.previous_state, event.state) in LEGAL
            assert event.previous_state == previous
            previous = event.state
        assert stats.state == previous
        for count in (
            stats.consecutive_failures,
            stats.window_calls,
            stats.window_failures,
            stats.successes,
            stats.failures,
            stats.rejected,
            stats.trips,
            stats.probes_in_flight,
        ):
            assert count >= 0
        assert stats.window_failures <= stats.window_calls
        assert self.probes_now() <= self.probes
        assert stats.probes_in_flight == self.probes_now()
        assert stats.trips == sum(event.state == "open" for event in self.events)
        assert stats.retry_in is None or 0.0 <= stats.retry_in <= 10.0


TestBreakerMachine = BreakerMachine.TestCase
TestBreakerMachine.settings = settings(max_examples=100, stateful_step_count=50, deadline=None)
