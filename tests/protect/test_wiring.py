"""Protection given to a Retrier, a transport or a config is used as it is (issue 13)."""

from __future__ import annotations

import contextlib
import random

import httpx
import pytest

from retrymw import (
    AdaptiveThrottle,
    BreakerStateChanged,
    CallFinished,
    CircuitBreaker,
    CircuitOpenError,
    ConfigError,
    LoadShedError,
    PerTarget,
    Retrier,
    RetryBudget,
    RetryDenied,
    RetryPolicy,
    load_config,
)
from retrymw.httpx import AsyncRetryTransport, RetryTransport, TransportLoadShedError
from retrymw.testing import FakeClock, RecordingInstrument

pytestmark = pytest.mark.anyio


def tripping_breaker(clock: FakeClock, name: str = "db") -> CircuitBreaker:
    return CircuitBreaker(
        name=name, failure_threshold=2, failure_rate_threshold=None, recovery_timeout=5, clock=clock
    )


async def down() -> None:
    raise ConnectionError("down")


async def test_a_held_breaker_is_the_live_state_through_a_retrier(clock: FakeClock) -> None:
    """The breaker given to a Retrier opens itself, and a listener added afterwards fires."""
    breaker = tripping_breaker(clock)
    retrier = Retrier(RetryPolicy(attempts=2), breaker=breaker, clock=clock, instruments=())
    assert retrier.breaker is breaker
    seen: list[BreakerStateChanged] = []
    breaker.add_listener(seen.append)
    with pytest.raises(ConnectionError):
        await retrier.call(down)
    stats = breaker.statistics()
    assert (stats.state, stats.trips, stats.failures) == ("open", 1, 2)
    with pytest.raises(CircuitOpenError):
        await retrier.call(down)
    clock.advance(5)
    assert breaker.state == "half_open"
    assert [(event.previous_state, event.state) for event in seen] == [
        ("closed", "open"),
        ("open", "half_open"),
    ]


def test_a_held_breaker_is_the_template_of_a_transports_circuits() -> None:
    """A CircuitBreaker given to a transport is the template of one circuit per host
    (DESIGN §15): its listeners hear each host's circuit, named "<name>:<host>"; read the live
    state from ``transport.retrier.breaker`` (the `PerTarget`)."""
    clock = FakeClock()
    breaker = tripping_breaker(clock, "api")
    seen: list[str] = []
    breaker.add_listener(lambda event: seen.append(f"{event.circuit} {event.state}"))
    transport = RetryTransport(
        httpx.MockTransport(lambda request: httpx.Response(503)),
        policy=RetryPolicy(attempts=2, initial_delay=0),
        breaker=breaker,
        clock=clock,
        instruments=(),
    )
    circuits = transport.retrier.breaker
    assert isinstance(circuits, PerTarget)
    assert circuits.template is breaker
    with httpx.Client(transport=transport) as client:
        assert client.get("http://a.test/").status_code == 503
        assert client.get("http://b.test/").status_code == 503  # b's own circuit: sent
        with pytest.raises(httpx.TransportError):
            client.get("http://a.test/")  # a's circuit is open
    assert seen == ["api:a.test open", "api:b.test open"]
    assert [circuits.for_target(target).state for target in circuits] == ["open", "open"]
    assert sorted(circuits) == ["a.test", "b.test"]
    assert breaker.statistics().state == "closed"  # the template itself is never used


def test_a_held_breaker_is_the_live_state_through_a_config() -> None:
    """config.breaker(name) is the circuit config.retrier(name) uses, and the template of
    config.transport(name)'s per-host circuits."""
    config = load_config(
        {
            "policies": {"payments": {"attempts": 2, "delay": "0s", "backoff": "fixed"}},
            "breakers": {"payments": {"failure_threshold": 2, "failure_rate_threshold": None}},
        }
    )
    breaker = config.breaker("payments")
    seen: list[str] = []
    breaker.add_listener(lambda event: seen.append(event.state))
    retrier = config.retrier("payments")
    assert retrier.breaker is breaker
    assert retrier is config.retrier("payments")  # one retrier: two functions, one circuit

    @retrier
    def charge() -> None:
        raise ConnectionError("down")

    @retrier
    def refund() -> None:
        raise AssertionError("never runs: the circuit charge() opened is the same")

    with pytest.raises(ConnectionError):
        charge()
    with pytest.raises(CircuitOpenError):
        refund()
    assert breaker.statistics().state == "open"
    transport = config.transport("payments", httpx.MockTransport(lambda r: httpx.Response(200)))
    circuits = transport.retrier.breaker  # the transport's: one circuit per host (§15)
    assert isinstance(circuits, PerTarget)
    assert circuits.template is breaker
    with httpx.Client(transport=transport) as client:
        assert client.get("http://127.0.0.1/").status_code == 200
    assert seen == ["open"]


async def test_per_target_breakers_keep_targets_apart(clock: FakeClock) -> None:
    """With PerTarget, one operation's open circuit never refuses another's calls."""
    breakers = PerTarget(tripping_breaker(clock))
    retrier = Retrier(RetryPolicy(attempts=2), breaker=breakers, clock=clock, instruments=())

    @retrier
    async def dead() -> None:
        raise ConnectionError("down")

    @retrier
    async def healthy() -> str:
        return "ok"

    with pytest.raises(ConnectionError):
        await dead()
    assert await healthy() == "ok"
    states = {
        target.rsplit(".", 1)[-1]: breaker.state
        for target in breakers
        if (breaker := breakers.get(target)) is not None
    }
    assert states == {"dead": "open", "healthy": "closed"}
    assert breakers.get("nobody") is None
    assert "nobody" not in breakers


def dead_and_flaky_hosts(budget: RetryBudget | None) -> tuple[list[int], RetryTransport]:
    """40 calls to a dead host, then 20 to a host whose every fourth attempt fails."""
    sent: dict[str, int] = {}

    def handler(request: httpx.Request) -> httpx.Response:
        host = request.url.host
        sent[host] = sent.get(host, 0) + 1
        if host == "dead.test" or sent[host] % 4 == 1:
            return httpx.Response(503)
        return httpx.Response(200)

    transport = RetryTransport(
        httpx.MockTransport(handler),
        policy=RetryPolicy(attempts=3, initial_delay=0),
        clock=FakeClock(),
        instruments=(),
        **({} if budget is None else {"budget": budget}),  # type: ignore[arg-type]
    )
    with httpx.Client(transport=transport) as client:
        for _ in range(40):
            client.get("http://dead.test/")
        return [client.get("http://up.test/").status_code for _ in range(20)], transport


def test_one_dead_host_never_spends_a_healthy_hosts_budget() -> None:
    """The transport's default budget is per host: a dead host's retries are its own."""
    results, transport = dead_and_flaky_hosts(None)
    assert results == [200] * 20  # every healthy call got its retry
    budgets = transport.retrier.budget
    assert isinstance(budgets, PerTarget)
    dead, up = budgets.get("dead.test"), budgets.get("up.test")
    assert dead is not None
    assert up is not None
    assert dead.statistics().denied > 0
    assert up.statistics().denied == 0
    shared, _ = dead_and_flaky_hosts(RetryBudget(clock=FakeClock()))
    assert 503 in shared  # one budget for both: the dead host spent the healthy one's retries


async def test_a_shed_first_attempt_raises_load_shed_error(
    clock: FakeClock, recorder: RecordingInstrument
) -> None:
    """A throttle that sheds the first attempt ends the call with LoadShedError, outcome shed."""
    throttle = AdaptiveThrottle(name="db", max_reject=1.0, clock=clock, rng=random.Random(0))
    for _ in range(50):
        throttle.record_failure()
    calls: list[int] = []

    async def fn() -> str:
        calls.append(1)
        return "ok"

    retrier = Retrier(RetryPolicy(), throttle=throttle, clock=clock, instruments=(recorder,))
    assert retrier.throttle is throttle
    with pytest.raises(LoadShedError, match="throttle 'db' shed"):
        await retrier.call(fn)
    assert calls == []
    assert recorder.of_type(CallFinished)[-1].outcome == "shed"
    assert throttle.statistics().shed == 1


async def test_a_shed_retry_is_never_retried_and_is_reported(
    clock: FakeClock, recorder: RecordingInstrument
) -> None:
    """A retry the throttle sheds ends the call with the last error and reason shed."""
    throttle = AdaptiveThrottle(name="db", max_reject=1.0, clock=clock, rng=random.Random(0))
    for _ in range(40):
        throttle.record_failure()
    for _ in range(2):
        throttle.record_success()

    attempts: list[int] = []

    async def failing() -> None:
        attempts.append(1)
        raise ConnectionError("down")

    retrier = Retrier(
        RetryPolicy(attempts=5), throttle=throttle, clock=clock, instruments=(recorder,)
    )
    last: Exception | None = None
    for _ in range(200):  # until a call got its first attempt through, then had a retry shed
        attempts.clear()
        try:
            await retrier.call(failing)
        except (ConnectionError, LoadShedError) as error:
            last = error
        if attempts and recorder.of_type(RetryDenied):
            break
    assert 0 < len(attempts) < 5
    assert isinstance(last, ConnectionError)  # the last real error, with why it stopped
    assert "[shed]" in getattr(last, "__notes__", [""])[-1]
    assert [event.reason for event in recorder.of_type(RetryDenied)][-1] == "shed"
    # Attempted, then a retry refused: what the attempts got (DESIGN §15), not a refusal.
    assert recorder.of_type(CallFinished)[-1].outcome == "failure"


async def test_a_shed_request_is_an_httpx_transport_error(clock: FakeClock) -> None:
    """The transports raise TransportLoadShedError: a LoadShedError and an httpx error."""
    throttle = PerTarget(AdaptiveThrottle(max_reject=1.0, clock=clock, rng=random.Random(1)))
    transport = AsyncRetryTransport(
        httpx.MockTransport(lambda request: httpx.Response(503)),
        policy=RetryPolicy(attempts=1),
        throttle=throttle,
        clock=clock,
        instruments=(),
    )
    shed = 0
    async with httpx.AsyncClient(transport=transport) as client:
        for _ in range(100):
            with contextlib.suppress(httpx.TransportError):
                await client.get("http://down.test/")
                continue
            shed += 1
        assert (await client.get("http://other.test/")).status_code == 503  # its own throttle

        async def until_shed() -> None:
            while True:
                await client.get("http://down.test/")

        with pytest.raises(httpx.TransportError) as caught:
            await until_shed()
    assert isinstance(caught.value, TransportLoadShedError)
    assert isinstance(caught.value, LoadShedError)
    assert caught.value.request.url.host == "down.test"
    assert shed > 50
    down_stats = throttle.get("down.test")
    assert down_stats is not None
    assert down_stats.statistics().shed == shed + 1


async def test_breaker_budget_and_throttle_together(clock: FakeClock) -> None:
    """All three govern one call: the breaker counts the attempts the throttle admitted."""
    breaker = CircuitBreaker(failure_threshold=3, failure_rate_threshold=None, clock=clock)
    budget = RetryBudget(clock=clock)
    throttle = AdaptiveThrottle(clock=clock, rng=random.Random(2))
    retrier = Retrier(
        RetryPolicy(attempts=3),
        breaker=breaker,
        budget=budget,
        throttle=throttle,
        clock=clock,
        instruments=(),
    )
    with pytest.raises(ConnectionError):
        await retrier.call(down)
    assert breaker.statistics().failures == throttle.statistics().requests == 3
    assert budget.statistics().acquired == 2
    with pytest.raises((CircuitOpenError, LoadShedError)):
        await retrier.call(down)


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        pytest.param({"throttle": RetryBudget()}, "throttle", id="throttle-is-a-budget"),
        pytest.param({"breaker": PerTarget(RetryBudget())}, "breaker", id="per-target-budget"),
        pytest.param({"budget": PerTarget(AdaptiveThrottle())}, "budget", id="per-target-throttle"),
    ],
)
def test_wrong_protection_is_refused_naming_the_argument(
    arguments: dict[str, object], field: str
) -> None:
    """A breaker, budget or throttle of the wrong kind is a ConfigError naming the argument."""
    with pytest.raises(ConfigError) as caught:
        Retrier(**arguments)  # type: ignore[arg-type]
    assert caught.value.field == field


def test_shared_breakers_report_each_transition_once_to_the_same_instruments() -> None:
    """Two retriers sharing a breaker and instruments deliver each transition once."""
    clock = FakeClock()
    recorder = RecordingInstrument()
    breaker = tripping_breaker(clock)
    first = Retrier(RetryPolicy(attempts=2), breaker=breaker, clock=clock, instruments=(recorder,))
    Retrier(RetryPolicy(), breaker=breaker, clock=clock, instruments=(recorder,))
    other = RecordingInstrument()
    Retrier(RetryPolicy(), breaker=breaker, clock=clock, instruments=(other,))

    def fail() -> None:
        raise ConnectionError("down")

    with pytest.raises(ConnectionError):
        first.call_sync(fail)
    assert [event.state for event in recorder.of_type(BreakerStateChanged)] == ["open"]
    assert [event.state for event in other.of_type(BreakerStateChanged)] == ["open"]
