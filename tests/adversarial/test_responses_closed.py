"""Every response an attempt got is closed, whatever the answers and however the caller reads.

A superseded response (retried, or refused a retry) is drained and closed by the transport; the
one the call returns is closed when the caller closes it, reads it to its end, stops streaming
it, or is cancelled, during an attempt or while reading its body. Generated scenarios mix
answers (statuses with and without ``Retry-After``, bodies cut midway, connection errors),
methods, attempt counts, a breaker and a caller's ``retry_on`` predicate that raises; each
response's stream records whether it was closed.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass

import anyio
import httpx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import retrymw.httpx
from retrymw import CircuitBreaker, Outcome, RetryPolicy
from retrymw.testing import FakeClock

URL = "http://127.0.0.1:9/item"


class TrackedBody(httpx.AsyncByteStream, httpx.SyncByteStream):
    """A response body that says whether it was closed, cut after ``cut_after`` chunks."""

    def __init__(self, cut_after: int | None) -> None:
        self.chunks = [b"a" * 16, b"b" * 16, b"c"]
        self.cut_after = cut_after
        self.closed = False

    def _chunks(self) -> Iterator[bytes]:
        for index, chunk in enumerate(self.chunks):
            if self.cut_after is not None and index >= self.cut_after:
                raise httpx.ReadError("cut midway")
            yield chunk

    def __iter__(self) -> Iterator[bytes]:
        yield from self._chunks()

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in self._chunks():
            yield chunk

    def close(self) -> None:
        self.closed = True

    async def aclose(self) -> None:
        self.closed = True


@dataclass(frozen=True)
class Answer:
    status: int | None  # None: the connection is refused
    retry_after: str | None = None
    cut_after: int | None = None


answers = st.builds(
    Answer,
    status=st.sampled_from([None, 200, 201, 404, 429, 500, 502, 503, 504]),
    retry_after=st.sampled_from([None, "0", "1", "soon", "99999"]),
    cut_after=st.sampled_from([None, 0, 1]),
)


@dataclass(frozen=True)
class Scenario:
    answers: list[Answer]
    method: str
    attempts: int
    breaker: bool
    judge: bool  # a retry_on predicate of the caller's, which raises on a 502
    reading: str  # "read", "stream", "first chunk"


scenarios = st.builds(
    Scenario,
    answers=st.lists(answers, min_size=1, max_size=5),
    method=st.sampled_from(["GET", "POST", "PUT", "DELETE"]),
    attempts=st.integers(1, 4),
    breaker=st.booleans(),
    judge=st.booleans(),
    reading=st.sampled_from(["read", "stream", "first chunk"]),
)


class Server:
    """Answers in order (then 200s), keeping every body it sent."""

    def __init__(self, scenario: Scenario) -> None:
        self.answers = iter(scenario.answers)
        self.bodies: list[TrackedBody] = []

    def answer(self, request: httpx.Request) -> httpx.Response:
        answer = next(self.answers, Answer(200))
        if answer.status is None:
            raise httpx.ConnectError("refused", request=request)
        body = TrackedBody(answer.cut_after)
        self.bodies.append(body)
        headers = {} if answer.retry_after is None else {"Retry-After": answer.retry_after}
        return httpx.Response(answer.status, headers=headers, stream=body)

    def left_open(self) -> list[int]:
        return [index for index, body in enumerate(self.bodies) if not body.closed]


class JudgeError(Exception):
    """What the caller's predicate raises: the call ends with it, the response unreturned."""


def _judged(outcome: Outcome) -> bool:
    if outcome.status == 502:
        raise JudgeError("cannot judge a 502")
    return outcome.exception is not None or outcome.status in (429, 500, 503, 504)


def _policy(scenario: Scenario) -> RetryPolicy:
    retry_on = _judged if scenario.judge else None
    return RetryPolicy(attempts=scenario.attempts, initial_delay=0, max_delay=0, retry_on=retry_on)


def _breaker(scenario: Scenario, clock: FakeClock) -> CircuitBreaker | None:
    return CircuitBreaker(failure_threshold=2, clock=clock) if scenario.breaker else None


EXAMPLES = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@EXAMPLES
@given(scenarios)
def test_the_sync_transport_closes_every_response(scenario: Scenario) -> None:
    server = Server(scenario)
    clock = FakeClock()
    transport = retrymw.httpx.RetryTransport(
        httpx.MockTransport(server.answer),
        policy=_policy(scenario),
        breaker=_breaker(scenario, clock),
        clock=clock,
        instruments=(),
    )
    with (
        httpx.Client(transport=transport) as client,
        contextlib.suppress(httpx.HTTPError, JudgeError),
    ):
        if scenario.reading == "read":
            client.request(scenario.method, URL)
        else:
            with client.stream(scenario.method, URL) as response:
                for _ in response.iter_raw():
                    if scenario.reading == "first chunk":
                        break
    assert server.left_open() == []


@EXAMPLES
@given(scenarios, st.sampled_from([None, "in an attempt", "in the body"]), st.integers(1, 3))
def test_the_async_transport_closes_every_response(
    scenario: Scenario, cancelled: str | None, at_attempt: int
) -> None:
    """As the sync test, and the caller may be cancelled during the ``at_attempt``-th attempt
    or while it reads the body."""
    server = Server(scenario)
    sent = 0
    callers: list[anyio.CancelScope] = []  # the caller's scope, cancelled where it says

    async def answer(request: httpx.Request) -> httpx.Response:
        nonlocal sent
        sent += 1
        if cancelled == "in an attempt" and sent == at_attempt:
            callers[0].cancel()
            await anyio.lowlevel.checkpoint()
        return server.answer(request)

    async def call() -> None:
        clock = FakeClock()
        transport = retrymw.httpx.AsyncRetryTransport(
            httpx.MockTransport(answer),
            policy=_policy(scenario),
            breaker=_breaker(scenario, clock),
            clock=clock,
            instruments=(),
        )
        async with httpx.AsyncClient(transport=transport) as client:
            with anyio.CancelScope() as caller, contextlib.suppress(httpx.HTTPError, JudgeError):
                callers.append(caller)
                if scenario.reading == "read":
                    await client.request(scenario.method, URL)
                    return
                async with client.stream(scenario.method, URL) as response:
                    async for _ in response.aiter_raw():
                        if cancelled == "in the body":
                            caller.cancel()
                            await anyio.lowlevel.checkpoint()
                        if scenario.reading == "first chunk":
                            break

    anyio.run(call)
    assert server.left_open() == []
