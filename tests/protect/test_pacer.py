"""Pacer: slots spread evenly, what it learns from answers, and its place in the engine.

Every test runs on a `FakeClock`: time is passed in, nothing waits for real.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import httpx
import pytest

import retrymw
from retrymw import ConfigError, PacedError, Pacer, PerTarget, Retrier, RetryPolicy
from retrymw._protect.pacer import (
    BETA,
    FLOOR,
    HEADROOM,
    MAX_HOLD,
    STALLED_AFTER,
    RateLimits,
)
from retrymw.httpx import AsyncRetryTransport, RetryTransport
from retrymw.testing import FakeClock, RecordingInstrument


def waits(pacer: Pacer, now: float, count: int, cost: float = 0.0) -> list[float]:
    return [round(pacer.reserve(now, cost).wait, 9) for _ in range(count)]


# -- the schedule ---------------------------------------------------------------------------------


def test_a_known_rate_spreads_sends_evenly(clock: FakeClock) -> None:
    pacer = Pacer("50/s", clock=clock)
    assert waits(pacer, 0.0, 4) == [0.0, 0.02, 0.04, 0.06]


@pytest.mark.parametrize(
    ("rate", "per_second"),
    [("50/s", 50.0), ("3000/min", 50.0), ("7200/h", 2.0), (12, 12.0), (0.5, 0.5)],
)
def test_rates_are_read_in_every_form(rate: Any, per_second: float) -> None:
    stats = Pacer(rate).statistics()
    assert stats.rate == pytest.approx(per_second)


@pytest.mark.parametrize("rate", ["fast", "50", "50/d", 0, -1, math.inf, True, "0/s", 10**400])
def test_a_bad_rate_is_refused_naming_the_field_and_an_example(rate: Any) -> None:
    with pytest.raises(ConfigError) as refused:
        Pacer(rate)
    assert refused.value.field == "rate"
    assert refused.value.example == '"50/s"'


@pytest.mark.parametrize(
    ("field", "kwargs"), [("burst", {"burst": 0}), ("tokens", {"tokens": "x"})]
)
def test_other_bad_arguments_are_refused(field: str, kwargs: dict[str, Any]) -> None:
    with pytest.raises(ConfigError) as refused:
        Pacer("1/s", **kwargs)
    assert refused.value.field == field


def test_a_burst_goes_at_once_then_the_rate_holds_with_no_burst_at_a_window_reset(
    clock: FakeClock,
) -> None:
    pacer = Pacer("50/s", burst=10, clock=clock)
    assert waits(pacer, 0.0, 12) == [0.0] * 10 + [0.02, 0.04]
    # Saturated for a second: one slot per 20 ms, whatever window a server counts in.
    slots = [pacer.reserve(0.0).wait for _ in range(50)]
    assert all(b - a == pytest.approx(0.02) for a, b in itertools.pairwise(slots))
    # After a quiet spell, at most `burst` at once again.
    quiet = slots[-1] + 5.0
    assert waits(pacer, quiet, 11)[-2:] == [0.0, 0.02]


def test_a_slot_past_the_limit_is_refused_and_not_reserved(clock: FakeClock) -> None:
    pacer = Pacer("10/s", clock=clock)
    assert pacer.reserve(0.0).wait == 0.0
    refused = pacer.reserve(0.0, within=0.05)
    assert not refused.granted
    assert refused.wait == pytest.approx(0.1)
    again = pacer.reserve(0.0, within=0.1)
    assert again.granted  # the same slot
    assert again.wait == pytest.approx(0.1)
    assert pacer.statistics().refused == 1


def test_an_unknown_rate_paces_nothing_until_the_first_signal(clock: FakeClock) -> None:
    pacer = Pacer(clock=clock)
    assert waits(pacer, 0.0, 1000) == [0.0] * 1000
    assert pacer.statistics().rate is None
    pacer.learn(0.0, status=200)  # a plain success says nothing
    assert pacer.statistics().rate is None


# -- learning -------------------------------------------------------------------------------------


def test_a_limit_learned_from_headers_is_paced_with_headroom(clock: FakeClock) -> None:
    pacer = Pacer(clock=clock)
    pacer.learn(0.0, status=200, limits=RateLimits(requests=50.0))
    assert pacer.statistics().rate == pytest.approx(50.0 * HEADROOM)
    assert pacer.statistics().limit == 50.0
    assert waits(pacer, 0.0, 2)[1] == pytest.approx(1 / (50.0 * HEADROOM))


def test_a_learned_limit_never_raises_a_given_rate(clock: FakeClock) -> None:
    pacer = Pacer("10/s", clock=clock)
    pacer.learn(0.0, limits=RateLimits(requests=100.0))
    assert pacer.statistics().rate == 10.0
    pacer.learn(0.0, limits=RateLimits(requests=4.0))
    assert pacer.statistics().rate == pytest.approx(4.0 * HEADROOM)


def test_a_throttle_cuts_the_measured_rate_then_probes_back_up(clock: FakeClock) -> None:
    pacer = Pacer(clock=clock)
    for _ in range(40):  # 100 sends/s for 4 s
        for _ in range(10):
            pacer.reserve(clock.now())
        clock.advance(0.1)
    measured = pacer.statistics().measured_rate
    assert measured == pytest.approx(100.0, rel=0.05)
    pacer.learn(clock.now(), status=429)
    cut = pacer.statistics().rate
    assert cut == pytest.approx(BETA * measured, rel=0.01)
    # More 429s answering what was sent before the cut do not cut it again.
    clock.advance(0.1)
    pacer.learn(clock.now(), status=429)
    assert cut is not None
    again = pacer.statistics().rate
    assert again is not None
    assert again >= cut
    clock.advance(2.0)
    climbing = pacer.statistics().rate
    assert climbing is not None
    assert climbing > cut
    clock.advance(20.0)  # probing goes on, capped at twice what is measured
    capped = pacer.statistics()
    assert capped.rate == pytest.approx(2.0 * capped.measured_rate)


def test_throttles_never_cut_below_the_floor(clock: FakeClock) -> None:
    pacer = Pacer(clock=clock)
    for step in range(100):
        now = step * 1.0
        pacer.reserve(now)
        pacer.learn(now, status=503)
    rate = pacer.statistics().rate
    assert rate is not None
    assert rate >= FLOOR


def test_retry_after_holds_every_send(clock: FakeClock) -> None:
    pacer = Pacer(clock=clock)
    pacer.learn(0.0, status=429, limits=RateLimits(retry_after=2.0))
    assert pacer.reserve(0.5).wait == pytest.approx(1.5)
    assert pacer.statistics().throttles == 1


def test_an_exhausted_counter_holds_its_lane_until_the_reset(clock: FakeClock) -> None:
    pacer = Pacer(clock=clock)
    pacer.learn(
        0.0,
        status=200,
        limits=RateLimits(requests_remaining=0.0, requests_reset=0.3, retry_after=None),
    )
    assert pacer.reserve(0.1).wait == pytest.approx(0.2)
    # A hold is bounded, whatever the server says.
    pacer.learn(1.0, status=200, limits=RateLimits(tokens_remaining=0.0, tokens_reset=1e12))
    assert pacer.reserve(1.0).wait == pytest.approx(MAX_HOLD)


def test_the_tokens_lane_paces_by_cost_and_a_send_waits_for_both_lanes(clock: FakeClock) -> None:
    pacer = Pacer("100/s", tokens="600/min", cost=lambda request: request["tokens"], clock=clock)
    assert pacer.cost_of({"tokens": 20}) == 20.0
    assert pacer.reserve(0.0, 20.0).wait == 0.0
    assert pacer.reserve(0.0, 5.0).wait == pytest.approx(2.0)  # 20 tokens at 10/s
    assert pacer.reserve(0.0, 0.0).wait == pytest.approx(2.5)


def test_a_tokens_limit_is_learned_from_token_headers(clock: FakeClock) -> None:
    pacer = Pacer(cost=lambda request: 100, clock=clock)
    pacer.learn(0.0, limits=RateLimits(tokens=1000.0))
    assert pacer.statistics().tokens_rate == pytest.approx(1000.0 * HEADROOM)
    pacer.reserve(0.0, 100.0)
    assert pacer.reserve(0.0, 100.0).wait == pytest.approx(100.0 / (1000.0 * HEADROOM))


def test_a_cost_that_is_not_a_number_is_refused(clock: FakeClock) -> None:
    pacer = Pacer(cost=lambda request: "many", clock=clock)  # type: ignore[arg-type,return-value]
    with pytest.raises(ConfigError) as refused:
        pacer.cost_of(None)
    assert refused.value.field == "cost"


def test_the_local_share_scales_every_lane(clock: FakeClock) -> None:
    pacer = Pacer("40/s", tokens="100/s", clock=clock)
    pacer.share = 0.25
    stats = pacer.statistics()
    assert (stats.rate, stats.tokens_rate) == (10.0, 25.0)


def test_per_target_gives_each_target_a_fresh_clone(clock: FakeClock) -> None:
    scoped = PerTarget(Pacer("5/s", name="api", clock=clock))
    a, b = scoped.for_target("a"), scoped.for_target("b")
    a.learn(0.0, status=429, limits=RateLimits(retry_after=10.0))
    assert a.name == "api:a"
    assert a.statistics().held_for > 0.0
    assert b.statistics().held_for == 0.0
    assert b.statistics().rate == 5.0


# -- in the engine --------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_every_attempt_waits_for_its_slot_on_the_clock(clock: FakeClock) -> None:
    pacer = Pacer("2/s", clock=clock)
    retrier = Retrier(pacer=pacer, clock=clock, instruments=())
    assert retrier.pacer is pacer

    async def ok() -> str:
        return "ok"

    for _ in range(3):
        assert await retrier.call(ok) == "ok"
    assert clock.sleeps == [pytest.approx(0.5), pytest.approx(0.5)]


def test_the_sync_door_waits_for_its_slot_too(clock: FakeClock) -> None:
    retrier = Retrier(pacer=Pacer("4/s", clock=clock), clock=clock, instruments=())
    for _ in range(3):
        retrier.call_sync(lambda: None)
    assert clock.sleeps == [pytest.approx(0.25), pytest.approx(0.25)]


@pytest.mark.anyio
async def test_a_slot_past_the_deadline_fails_at_once_as_paced(clock: FakeClock) -> None:
    recorder = RecordingInstrument()
    pacer = Pacer("1/s", clock=clock)
    retrier = Retrier(RetryPolicy(deadline=0.5), pacer=pacer, clock=clock, instruments=[recorder])
    calls = 0

    async def ok() -> str:
        nonlocal calls
        calls += 1
        return "ok"

    assert await retrier.call(ok) == "ok"
    with pytest.raises(PacedError) as paced:
        await retrier.call(ok)
    assert isinstance(paced.value, retrymw.RetrymwError)
    assert paced.value.pacer == "default"
    assert paced.value.wait == pytest.approx(1.0)
    assert calls == 1
    assert clock.sleeps == []  # never waited for a slot it could not use
    outcomes = [
        event.outcome for event in recorder.events if type(event).__name__ == "CallFinished"
    ]
    assert outcomes == ["success", "paced"]


@pytest.mark.anyio
async def test_a_pacer_learns_from_failures_the_engine_sees(clock: FakeClock) -> None:
    pacer = Pacer(clock=clock)
    retrier = Retrier(RetryPolicy(attempts=2), pacer=pacer, clock=clock, instruments=())

    class Throttled(Exception):
        status_code = 429

    async def throttled() -> None:
        raise Throttled

    with pytest.raises(Throttled):
        await retrier.call(throttled)
    assert pacer.statistics().throttles >= 1
    assert pacer.statistics().rate is not None


def test_a_wrong_pacer_is_refused_naming_the_argument() -> None:
    with pytest.raises(ConfigError) as refused:
        Retrier(pacer="50/s")  # type: ignore[arg-type]
    assert refused.value.field == "pacer"


def _rate_limited(request: httpx.Request) -> httpx.Response:
    return httpx.Response(
        429,
        headers={
            "x-ratelimit-limit-requests": "600",
            "x-ratelimit-remaining-requests": "0",
            "x-ratelimit-reset-requests": "300ms",
            "retry-after": "1",
        },
    )


def test_a_transport_keeps_one_pacer_per_host_learned_from_its_answers(clock: FakeClock) -> None:
    template = Pacer(name="api", clock=clock)
    transport = RetryTransport(
        httpx.MockTransport(_rate_limited),
        policy=RetryPolicy(attempts=1),
        pacer=template,
        clock=clock,
        instruments=(),
    )
    with httpx.Client(transport=transport) as client:
        assert client.get("http://a.example/x").status_code == 429
    scoped = transport.retrier.pacer
    assert isinstance(scoped, PerTarget)
    learned = scoped.get("a.example")
    assert learned is not None
    assert learned.name == "api:a.example"
    stats = learned.statistics()
    assert stats.limit == pytest.approx(10.0)
    assert stats.throttles == 1
    # Exhausted: held until one request is back (1/10 s), not until the counter is full (0.3 s).
    assert stats.held_for == pytest.approx(0.1)
    assert template.statistics().sends == 0  # the template itself is never used
    assert scoped.get("b.example") is None


@pytest.mark.anyio
async def test_the_async_transport_waits_for_the_hosts_slot(clock: FakeClock) -> None:
    transport = AsyncRetryTransport(
        httpx.MockTransport(lambda request: httpx.Response(200)),
        pacer=Pacer("5/s", clock=clock),
        clock=clock,
        instruments=(),
    )
    async with httpx.AsyncClient(transport=transport) as client:
        for _ in range(3):
            assert (await client.get("http://a.example/")).status_code == 200
        await client.get("http://b.example/")  # another host: its own slots
    assert clock.sleeps == [pytest.approx(0.2), pytest.approx(0.2)]


# -- an idle pacer: the first attempt goes bare, the pacer counts it and hears the answer ------


def _limit_said(request: httpx.Request) -> httpx.Response:
    return httpx.Response(200, headers={"x-ratelimit-limit-requests": "120"})  # 2/s


def _paces_after_learning(
    transport: RetryTransport | AsyncRetryTransport, clock: FakeClock
) -> None:
    """Three calls went through ``transport`` to a host that says its limit is 2/s: the
    first one taught the limit, the second went at once, the third waited its slot."""
    scoped = transport.retrier.pacer
    assert isinstance(scoped, PerTarget)
    learned = scoped.get("a.example")
    assert learned is not None
    assert learned.statistics().limit == pytest.approx(2.0)
    assert learned.statistics().sends == 3  # the bare first attempts were counted too
    assert clock.sleeps == [pytest.approx(1 / (2.0 * HEADROOM))]


def test_an_idle_pacer_learns_the_limit_from_a_success_and_paces_the_next_calls(
    clock: FakeClock,
) -> None:
    """Nothing paced yet, so each call's first attempt takes the bare path; the 200's headers
    must still reach the pacer, or it would never pace anything."""
    mock = httpx.MockTransport(_limit_said)
    transport = RetryTransport(mock, pacer=Pacer(clock=clock), clock=clock, instruments=())
    with httpx.Client(transport=transport) as client:
        for _ in range(3):
            assert client.get("http://a.example/").status_code == 200
    _paces_after_learning(transport, clock)


@pytest.mark.anyio
async def test_an_idle_pacer_learns_from_a_success_on_the_async_door_too(clock: FakeClock) -> None:
    mock = httpx.MockTransport(_limit_said)
    transport = AsyncRetryTransport(mock, pacer=Pacer(clock=clock), clock=clock, instruments=())
    async with httpx.AsyncClient(transport=transport) as client:
        for _ in range(3):
            assert (await client.get("http://a.example/")).status_code == 200
    _paces_after_learning(transport, clock)


@pytest.mark.anyio
async def test_a_call_an_idle_pacer_sent_at_once_shows_a_zero_wait(clock: FakeClock) -> None:
    from prometheus_client import CollectorRegistry

    from retrymw.instrumentation import PrometheusInstrument

    registry = CollectorRegistry()
    retrier = Retrier(
        RetryPolicy(attempts=2),
        pacer=Pacer(name="api", clock=clock),
        clock=clock,
        instruments=[PrometheusInstrument(registry=registry)],
    )
    failures = iter([True, False])

    async def flaky() -> str:
        if next(failures, False):
            raise ConnectionError("blip")
        return "ok"

    async def ok() -> str:
        return "ok"

    assert await retrier.call(ok) == "ok"  # settled at its bare first attempt
    assert await retrier.call(flaky) == "ok"  # bare first attempt, then a paced retry
    counted = {
        sample.labels.get("retrymw_target"): sample.value
        for metric in registry.collect()
        for sample in metric.samples
        if sample.name == "retrymw_pacer_wait_seconds_count"
    }
    assert sum(counted.values()) == 3.0, counted  # every attempt, the bare ones too


# -- telemetry -----------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_prometheus_shows_the_wait_the_learned_limit_the_rate_and_paced_calls(
    clock: FakeClock,
) -> None:
    from prometheus_client import CollectorRegistry

    from retrymw.instrumentation import PrometheusInstrument

    registry = CollectorRegistry()
    transport = AsyncRetryTransport(
        httpx.MockTransport(
            lambda request: httpx.Response(200, headers={"x-ratelimit-limit-requests": "120"})
        ),
        policy=RetryPolicy(deadline=1.0),
        pacer=Pacer(clock=clock),
        clock=clock,
        instruments=[PrometheusInstrument(registry=registry)],
    )
    labels = {"retrymw_policy": "default", "retrymw_target": "a.example"}
    async with httpx.AsyncClient(transport=transport) as client:
        for _ in range(3):
            await client.get("http://a.example/")
        assert registry.get_sample_value("retrymw_pacer_limit", labels) == 2.0
        paced_rate = 2.0 * HEADROOM
        assert registry.get_sample_value("retrymw_pacer_rate", labels) == pytest.approx(paced_rate)
        assert registry.get_sample_value("retrymw_pacer_wait_seconds_count", labels) == 3.0
        waited = registry.get_sample_value("retrymw_pacer_wait_seconds_sum", labels)
        assert waited == pytest.approx(
            1 / paced_rate
        )  # the first two went before the limit was known
        # Other calls booked the next 1.5 s: the next slot lies past the 1 s deadline.
        scoped = transport.retrier.pacer
        assert isinstance(scoped, PerTarget)
        live = scoped.get("a.example")
        assert live is not None
        for _ in range(3):
            live.reserve(clock.now())
        with pytest.raises(PacedError) as paced_error:
            await client.get("http://a.example/")
        assert isinstance(paced_error.value, httpx.TransportError)  # TransportPacedError
    paced = registry.get_sample_value(
        "retrymw_call_duration_seconds_count", {**labels, "retrymw_outcome": "paced"}
    )
    assert paced == 1.0


@pytest.mark.anyio
async def test_opentelemetry_shows_the_wait_and_the_pacers_gauges(clock: FakeClock) -> None:
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    from retrymw.instrumentation import OpenTelemetryInstrument

    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    pacer = Pacer("4/s", name="api", clock=clock)
    retrier = Retrier(
        pacer=pacer, clock=clock, instruments=[OpenTelemetryInstrument(meter_provider=provider)]
    )

    async def ok() -> str:
        return "ok"

    for _ in range(3):
        await retrier.call(ok)
    data = reader.get_metrics_data()
    assert data is not None
    metrics: dict[str, list[Any]] = {
        metric.name: list(metric.data.data_points)
        for resource in data.resource_metrics
        for scope in resource.scope_metrics
        for metric in scope.metrics
    }
    (wait,) = metrics["retrymw.pacer.wait"]
    assert wait.count == 3
    assert wait.sum == pytest.approx(0.5)
    (rate,) = metrics["retrymw.pacer.rate"]
    assert rate.value == 4.0
    (limit,) = metrics["retrymw.pacer.limit"]
    assert limit.value == 0.0  # nothing learned


# -- a slot that came due -------------------------------------------------------------------------


def test_a_slot_is_confirmed_against_the_sends_made_when_it_comes_due(clock: FakeClock) -> None:
    pacer = Pacer("50/s", clock=clock)
    assert waits(pacer, 0.0, 4) == [0.0, 0.02, 0.04, 0.06]
    # The process stalled until 1 s: the three slots that came due meanwhile are spread again.
    assert [round(pacer.confirm(1.0).wait, 9) for _ in range(3)] == [0.0, 0.02, 0.04]
    # A send reserved now queues behind them.
    assert pacer.reserve(1.0).wait == pytest.approx(0.06)


def test_a_confirmation_past_the_limit_is_refused_and_books_nothing(clock: FakeClock) -> None:
    pacer = Pacer("50/s", clock=clock)
    waits(pacer, 0.0, 2)
    pacer.learn(0.01, limits=RateLimits(requests_remaining=0, requests_reset=1.0))
    assert pacer.holds(0.5)
    assert not pacer.holds(1.01)
    refused = pacer.confirm(0.02, within=0.5)
    assert not refused.granted
    assert refused.wait == pytest.approx(0.99)
    assert pacer.statistics().refused == 1
    assert pacer.confirm(0.02).wait == pytest.approx(0.99)  # nothing was booked by the refusal


@pytest.mark.parametrize(
    ("rate", "late", "stalled"),
    [
        ("50/s", 0.019, False),  # within an interval
        ("50/s", 0.02, True),
        ("500/s", 0.009, False),  # an interval is 2 ms, but a busy loop wakes 10 ms late
        ("500/s", STALLED_AFTER, True),
        (None, 5.0, False),  # not paced: nothing to keep to
    ],
)
def test_a_stall_is_an_interval_late_and_more_than_a_busy_loop(
    clock: FakeClock, rate: str | None, late: float, stalled: bool
) -> None:
    assert Pacer(rate, clock=clock).stalled(1.0, 1.0 + late) is stalled
