"""Shared scenarios for the telemetry tests: the same scripted calls feed every instrument.

Each scenario runs through a `Retrier` on a `FakeClock`; every attempt takes `ATTEMPT_TIME`
virtual seconds, so durations are exact without reading the wall clock.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from retrymw import (
    CircuitBreaker,
    CircuitOpenError,
    Outcome,
    Retrier,
    RetryBudget,
    RetryBudgetExhausted,
    RetryPolicy,
)
from retrymw._engine.call import Call
from retrymw.instrumentation import Instrument
from retrymw.instrumentation import _names as names
from retrymw.testing import FakeClock

#: Virtual seconds each scripted attempt takes.
ATTEMPT_TIME = 0.25
#: The policy name every scenario uses.
POLICY = "p"
#: The coroutine every scenario calls; its name is the operation and the target.
TARGET = "fetch"

SCENARIOS = [
    pytest.param("success_first_try", id="success_first_try"),
    pytest.param("success_after_2_retries", id="success_after_2_retries"),
    pytest.param("exhausted", id="exhausted"),
    pytest.param("budget_exhausted", id="budget_exhausted"),
    pytest.param("throttled", id="throttled"),
    pytest.param("circuit_open", id="circuit_open"),
    pytest.param("not_idempotent", id="not_idempotent"),
    pytest.param("retry_after_too_long", id="retry_after_too_long"),
]


def script(clock: FakeClock, failures: int) -> Any:
    """An async ``fetch()`` that fails ``failures`` times with ConnectionError, then returns "ok".

    Each call advances the clock by `ATTEMPT_TIME`.
    """
    calls = 0

    async def fetch() -> str:
        nonlocal calls
        calls += 1
        clock.advance(ATTEMPT_TIME)
        if calls <= failures:
            raise ConnectionError(f"reset #{calls}")
        return "ok"

    return fetch


class Hinting:
    """An `AttemptAdapter` that adds a veto or a Retry-After hint, as the httpx transport does."""

    def __init__(self, *, veto: Any = None, retry_after: float | None = None) -> None:
        self.veto = veto
        self.retry_after = retry_after

    def before_attempt(self, attempt: int) -> None:
        return None

    def settles(self, result: object) -> bool:
        return True

    def outcome(
        self, attempt: int, elapsed: float, result: object, error: Exception | None
    ) -> Outcome:
        return Outcome(attempt, elapsed, error, result, None, self.retry_after, self.veto)

    async def discard(self, result: object, delay: float, deadline_left: float | None) -> None:
        return None

    def discard_sync(self, result: object, delay: float, deadline_left: float | None) -> None:
        return None

    def returned(self, result: object, deadline_left: float | None) -> object:
        return result


def retrier(
    clock: FakeClock,
    instruments: Iterable[Instrument],
    *,
    policy: RetryPolicy | None = None,
    **kw: Any,
) -> Retrier:
    """A `Retrier` on ``clock`` with the default (fresh) retry budget unless one is given."""
    kw.setdefault("budget", RetryBudget(clock=clock))
    return Retrier(
        policy or RetryPolicy(name=POLICY, attempts=3),
        clock=clock,
        instruments=tuple(instruments),
        **kw,
    )


async def run_scenario(
    name: str, clock: FakeClock, instruments: Iterable[Instrument]
) -> RetryBudget | None:
    """Run one scripted scenario and return the retry budget it used.

    The call's own result is checked here: telemetry must never change it.
    """
    instruments = tuple(instruments)
    fetch = script(
        clock, failures={"success_first_try": 0, "success_after_2_retries": 2}.get(name, 99)
    )
    if name == "budget_exhausted":
        # 1 s then 2 s would exceed 2 s of backoff: one sleep, then give up.
        runner = retrier(
            clock, instruments, policy=RetryPolicy(name=POLICY, attempts=5, retry_budget=2)
        )
    elif name == "throttled":
        runner = retrier(clock, instruments, budget=RetryBudget(min_capacity=0, clock=clock))
    elif name == "circuit_open":
        breaker = CircuitBreaker(
            name="db", failure_threshold=1, recovery_timeout="30s", clock=clock
        )
        runner = retrier(clock, instruments, breaker=breaker)
    else:
        runner = retrier(clock, instruments)
    if name.startswith("success"):
        assert await runner.call(fetch) == "ok"
    elif name == "exhausted":
        with pytest.raises(ConnectionError, match="reset #3"):
            await runner.call(fetch)
    elif name == "budget_exhausted":
        with pytest.raises(RetryBudgetExhausted):
            await runner.call(fetch)
    elif name == "circuit_open":
        # The first call's failure opens the circuit, so its retry is denied; the second call
        # is rejected before any attempt.
        with pytest.raises(ConnectionError, match="reset #1"):
            await runner.call(fetch)
        with pytest.raises(CircuitOpenError):
            await runner.call(fetch)
    else:
        adapter = {
            "not_idempotent": Hinting(veto="not_idempotent"),
            "retry_after_too_long": Hinting(retry_after=3600.0),
        }.get(name)
        call = Call(operation=TARGET, policy=runner.policy, target=TARGET, adapter=adapter)
        with pytest.raises(ConnectionError, match="reset #1"):
            await runner.run_async(fetch, (), {}, call)
    return runner.budget_for(TARGET)


#: The host every HTTP scenario calls (the transport's target).
HTTP_TARGET = "api.test"
#: Credentials, query and fragment that must never reach telemetry.
HTTP_URL = "http://user:secret@api.test/items?token=abc#top"

_HTTP_SCRIPTS: dict[str, list[int]] = {
    "success_first_try": [200],
    "success_after_2_retries": [503, 503, 200],
    "exhausted": [503, 503, 503],
    "budget_exhausted": [503, 503],
    "throttled": [503],
    "circuit_open": [503],
    "not_idempotent": [503],
    "retry_after_too_long": [503],
}


class Upstream:
    """An `httpx.MockTransport` handler playing a list of statuses; records request headers.

    Each request advances the clock by `ATTEMPT_TIME`.
    """

    def __init__(self, clock: FakeClock, statuses: list[int], retry_after: str | None) -> None:
        self.clock = clock
        self.statuses = statuses
        self.retry_after = retry_after
        self.headers: list[dict[str, str]] = []
        #: The transport's retry budget, set by `run_http_scenario`.
        self.budget: RetryBudget | None = None

    def __call__(self, request: Any) -> Any:
        import httpx

        self.headers.append(dict(request.headers))
        self.clock.advance(ATTEMPT_TIME)
        status = self.statuses[min(len(self.headers), len(self.statuses)) - 1]
        headers = {} if self.retry_after is None else {"Retry-After": self.retry_after}
        return httpx.Response(status, headers=headers, text="body")


async def run_http_scenario(
    name: str, clock: FakeClock, instruments: Iterable[Instrument]
) -> Upstream:
    """Run one scenario through `AsyncRetryTransport` over a mock upstream; return the upstream.

    Every scenario uses GET on `HTTP_URL` except ``not_idempotent`` (POST); the final status or
    error is checked here, since telemetry must never change it.
    """
    import httpx

    from retrymw.httpx import AsyncRetryTransport, TransportCircuitOpenError

    upstream = Upstream(
        clock, _HTTP_SCRIPTS[name], "3600" if name == "retry_after_too_long" else None
    )
    # jitter=False: the series and spans asserted carry the policy's own delays.
    policy = RetryPolicy(name=POLICY, attempts=3, jitter=False)
    kw: dict[str, Any] = {"budget": RetryBudget(clock=clock)}
    if name == "budget_exhausted":
        policy = RetryPolicy(name=POLICY, attempts=5, retry_budget=2, jitter=False)
    elif name == "throttled":
        kw["budget"] = RetryBudget(min_capacity=0, clock=clock)
    elif name == "circuit_open":
        kw["breaker"] = CircuitBreaker(
            name="db", failure_threshold=1, recovery_timeout="30s", clock=clock
        )
    transport = AsyncRetryTransport(
        httpx.MockTransport(upstream),
        policy=policy,
        instruments=tuple(instruments),
        clock=clock,
        **kw,
    )
    upstream.budget = transport.retrier.budget_for(HTTP_TARGET)
    async with httpx.AsyncClient(transport=transport) as client:
        method = "POST" if name == "not_idempotent" else "GET"
        response = await client.request(method, HTTP_URL, content=b"{}")
        assert response.status_code == upstream.statuses[-1]
        if name == "circuit_open":
            with pytest.raises(TransportCircuitOpenError):
                await client.get(HTTP_URL)
    return upstream


def fleet_samples(registry: CollectorRegistry) -> dict[tuple[str, str], float]:
    """The fleet samples of ``registry``'s exposition: (sample name, fleet namespace) → value."""
    text = generate_latest(registry).decode()
    return {
        (sample.name, sample.labels.get(names.LABEL_FLEET, "")): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name.startswith("retrymw_fleet_")
    }
