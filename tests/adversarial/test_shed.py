"""A shed retry returns what the call got, and a cold throttle does not shed on one failure.

`AdaptiveThrottle` refusing a retry after an HTTP 503 must end the call with that 503, returned
open like any other give-up with a response (docs/protection.md), not with
`TransportLoadShedError`: only a call refused before any attempt raises that. A throttle that
has seen one failure and nothing else knows nothing yet, and must not shed half the traffic.
"""

from __future__ import annotations

from collections.abc import Iterator
from random import Random
from typing import Any

import httpx
import pytest

from retrymw import (
    AdaptiveThrottle,
    CallFinished,
    CircuitBreaker,
    RetryDenied,
    RetryPolicy,
    RetryScheduled,
)
from retrymw.httpx import AsyncRetryTransport, RetryTransport, TransportLoadShedError
from retrymw.testing import FakeClock, RecordingInstrument
from tests.http_server import FlakyServer, Step

POLICY = RetryPolicy(attempts=3, initial_delay=1.0)
BUSY = Step(status=503, body=b"busy")


class Draws(Random):
    """A random source that returns ``values`` in turn, then ``rest`` for ever."""

    def __init__(self, *values: float, rest: float = 0.0) -> None:
        super().__init__(0)
        self.values = list(values)
        self.rest = rest

    def random(self) -> float:
        return self.values.pop(0) if self.values else self.rest


def shedding(clock: FakeClock, *draws: float) -> AdaptiveThrottle:
    """A throttle whose window is all failures (p = max_reject = 0.9), drawing ``draws``:
    a draw of 0.95 admits an attempt, 0.0 (every later one) sheds it."""
    throttle = AdaptiveThrottle(clock=clock, rng=Draws(*draws))
    for _ in range(50):
        throttle.record_failure()
    assert throttle.reject_probability() == pytest.approx(0.9)
    return throttle


@pytest.fixture
def upstream() -> Iterator[FlakyServer]:
    """The scripted server on 127.0.0.1, stopped at teardown."""
    server = FlakyServer()
    yield server
    server.stop()


def _check_returned(response: Any, upstream: FlakyServer, url: str) -> None:
    assert response.status_code == 503
    assert not response.is_closed  # returned open, like any give-up with a response
    assert upstream.served(url) == 1


def _check_events(recorder: RecordingInstrument, reason: str, clock: FakeClock) -> None:
    assert [event.reason for event in recorder.of_type(RetryDenied)] == [reason]
    (finished,) = recorder.of_type(CallFinished)
    assert (finished.attempts, finished.status) == (1, 503)
    assert recorder.of_type(RetryScheduled) == []
    assert clock.sleeps == []  # a refused retry is not waited for


@pytest.mark.anyio
async def test_a_shed_retry_returns_the_response_async(
    upstream: FlakyServer, clock: FakeClock, recorder: RecordingInstrument
) -> None:
    """Async transport: the retry of a 503 is shed; the 503 is returned open (its body
    readable), reason shed, with no backoff waited. A request shed before its first attempt
    still raises TransportLoadShedError, and a 503 that opens the circuit is returned too."""
    url = upstream.script(BUSY, 200)
    transport = AsyncRetryTransport(
        policy=POLICY,
        budget=None,
        throttle=shedding(clock, 0.95),
        clock=clock,
        instruments=[recorder],
    )
    async with httpx.AsyncClient(transport=transport) as client:
        response = await client.send(client.build_request("GET", url), stream=True)
        _check_returned(response, upstream, url)
        assert await response.aread() == b"busy"
        await response.aclose()
        _check_events(recorder, "shed", clock)
        with pytest.raises(TransportLoadShedError):  # refused before any attempt
            await client.get(url)
        assert upstream.served(url) == 1

    url = upstream.script(BUSY, 200)
    recorder.events.clear()
    breaker = CircuitBreaker(failure_threshold=1, clock=clock)
    transport = AsyncRetryTransport(
        policy=POLICY, budget=None, breaker=breaker, clock=clock, instruments=[recorder]
    )
    async with httpx.AsyncClient(transport=transport) as client:
        response = await client.send(client.build_request("GET", url), stream=True)
        _check_returned(response, upstream, url)
        assert await response.aread() == b"busy"
        await response.aclose()
    _check_events(recorder, "circuit_open", clock)


def test_a_shed_retry_returns_the_response_sync(
    upstream: FlakyServer, clock: FakeClock, recorder: RecordingInstrument
) -> None:
    """The same through the sync transport."""
    url = upstream.script(BUSY, 200)
    transport = RetryTransport(
        policy=POLICY,
        budget=None,
        throttle=shedding(clock, 0.95),
        clock=clock,
        instruments=[recorder],
    )
    with httpx.Client(transport=transport) as client:
        response = client.send(client.build_request("GET", url), stream=True)
        _check_returned(response, upstream, url)
        assert response.read() == b"busy"
        response.close()
        _check_events(recorder, "shed", clock)
        with pytest.raises(TransportLoadShedError):
            client.get(url)
        assert upstream.served(url) == 1


def test_a_fresh_throttle_does_not_shed_after_its_first_failure(clock: FakeClock) -> None:
    """One failure (or a few) in an empty window is no evidence: p stays 0 until the window
    holds `min_requests` attempts, and then the SRE formula applies as before."""
    throttle = AdaptiveThrottle(clock=clock, rng=Draws())  # every draw would shed
    floor = throttle.statistics().min_requests
    assert floor >= 2
    throttle.record_failure()
    assert throttle.reject_probability() == 0.0
    assert throttle.allow_request()
    for _ in range(floor - 2):
        throttle.record_failure()
    assert throttle.reject_probability() == 0.0  # floor - 1 attempts: still too few
    throttle.record_failure()
    assert throttle.reject_probability() == pytest.approx(min(0.9, floor / (floor + 1)))
    assert not throttle.allow_request()
    clock.advance(11)  # the window empties: cold again
    throttle.record_failure()
    assert throttle.reject_probability() == 0.0
