"""Retry at one layer: a retry that a lower layer's protection refused is not retried above.

Attack: a lower retrymw call whose cross-call budget is spent (or whose breaker or throttle
refuses) gives up after one attempt; the call above it used to retry that give-up, sending the
very load the protection refused: 3 attempts where protection allowed 1. Now such a give-up
is final for every enclosing retrymw call, like one after real retries (reason
``retried_below``), while a lower call that ran once by its own policy (``attempts=1``) stays
retryable above.
"""

from __future__ import annotations

import httpx
import pytest

from retrymw import CircuitBreaker, Retrier, RetryBudget, RetryPolicy
from retrymw.httpx import AsyncRetryTransport
from retrymw.testing import FakeClock, RecordingInstrument

pytestmark = pytest.mark.anyio


class Down(Exception):
    """The dependency is down."""


def spent_budget(clock: FakeClock) -> RetryBudget:
    """A cross-call budget with no retry left."""
    budget = RetryBudget(clock=clock)
    while budget.try_acquire():
        pass
    return budget


def denied_reasons(recorder: RecordingInstrument) -> list[str]:
    return [event.reason for event in recorder.events if type(event).__name__ == "RetryDenied"]


async def test_a_budget_refusal_below_is_final_above() -> None:
    """The inner call's budget refuses its retry: the outer call does not retry either."""
    clock = FakeClock()
    sent: list[int] = []
    inner = Retrier(
        RetryPolicy(attempts=3), budget=spent_budget(clock), instruments=(), clock=clock
    )
    recorder = RecordingInstrument()
    outer = Retrier(RetryPolicy(attempts=3), budget=None, instruments=(recorder,), clock=clock)

    async def dependency() -> None:
        sent.append(1)
        raise Down("503")

    async def service() -> None:
        await inner.call(dependency)

    with pytest.raises(Down):
        await outer.call(service)
    assert len(sent) == 1
    assert denied_reasons(recorder) == ["retried_below"]


def test_sync_a_budget_refusal_below_is_final_above() -> None:
    """Sync twin."""
    clock = FakeClock()
    sent: list[int] = []
    inner = Retrier(
        RetryPolicy(attempts=3), budget=spent_budget(clock), instruments=(), clock=clock
    )
    outer = Retrier(RetryPolicy(attempts=3), budget=None, instruments=(), clock=clock)

    def dependency() -> None:
        sent.append(1)
        raise Down("503")

    with pytest.raises(Down):
        outer.call_sync(lambda: inner.call_sync(dependency))
    assert len(sent) == 1


async def test_a_breaker_refusal_below_is_final_above() -> None:
    """A breaker that opens on the first failure refuses the inner retry: final above too."""
    clock = FakeClock()
    sent: list[int] = []
    breaker = CircuitBreaker(failure_threshold=1, recovery_timeout=60, clock=clock)
    inner = Retrier(
        RetryPolicy(attempts=3), breaker=breaker, budget=None, instruments=(), clock=clock
    )
    recorder = RecordingInstrument()
    outer = Retrier(RetryPolicy(attempts=3), budget=None, instruments=(recorder,), clock=clock)

    async def dependency() -> None:
        sent.append(1)
        raise Down("503")

    async def service() -> None:
        await inner.call(dependency)

    with pytest.raises(Down):
        await outer.call(service)
    assert len(sent) == 1
    assert denied_reasons(recorder) == ["retried_below"]


async def test_a_single_attempt_by_policy_stays_retryable_above() -> None:
    """attempts=1 below is a choice, not a refusal: the layer above may still retry."""
    clock = FakeClock()
    sent: list[int] = []
    inner = Retrier(RetryPolicy(attempts=1), budget=None, instruments=(), clock=clock)
    outer = Retrier(RetryPolicy(attempts=3), budget=None, instruments=(), clock=clock)

    async def dependency() -> None:
        sent.append(1)
        raise Down("503")

    async def service() -> None:
        await inner.call(dependency)

    with pytest.raises(Down):
        await outer.call(service)
    assert len(sent) == 3


async def test_an_http_budget_refusal_below_is_final_above() -> None:
    """A transport whose budget is spent returns its 503 after one request; the coroutine
    retrying around the client does not send it again."""
    clock = FakeClock()
    sent: list[int] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(1)
        return httpx.Response(503)

    transport = AsyncRetryTransport(
        httpx.MockTransport(handler), budget=spent_budget(clock), instruments=(), clock=clock
    )
    outer = Retrier(RetryPolicy(attempts=3), budget=None, instruments=(), clock=clock)
    async with httpx.AsyncClient(transport=transport) as client:

        async def fetch() -> None:
            response = await client.get("http://api.test/")
            response.raise_for_status()

        with pytest.raises(httpx.HTTPStatusError):
            await outer.call(fetch)
    assert len(sent) == 1
