"""The four transports are twins: the same answers tell the same story.

`RetryTransport` and `AsyncRetryTransport`, of `retrymw.httpx` and of `retrymw.httpx2`, drive
one HTTP exchange through the engine. Generated scenarios (answers with and without
``Retry-After`` or connection errors, methods with and without an ``Idempotency-Key``,
attempts, a breaker, one to three requests in a row) must give the same responses or errors,
the same number of sends, and the same events, field for field, on all four.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import anyio
import httpx
import httpx2
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import retrymw.httpx
import retrymw.httpx2
from retrymw import CircuitBreaker, RetryPolicy
from retrymw.testing import FakeClock, RecordingInstrument

URL = "http://127.0.0.1:9/item"


@dataclass(frozen=True)
class Answer:
    status: int | None  # None: the connection is refused
    retry_after: str | None = None


@dataclass(frozen=True)
class Scenario:
    answers: list[Answer]
    method: str
    idempotency_key: bool
    attempts: int
    breaker: bool
    calls: int  # requests sent one after the other through the same client


scenarios = st.builds(
    Scenario,
    answers=st.lists(
        st.builds(
            Answer,
            status=st.sampled_from([None, 200, 404, 429, 500, 502, 503]),
            retry_after=st.sampled_from([None, "0", "2", "soon"]),
        ),
        min_size=1,
        max_size=8,
    ),
    method=st.sampled_from(["GET", "POST", "PUT"]),
    idempotency_key=st.booleans(),
    attempts=st.integers(1, 4),
    breaker=st.booleans(),
    calls=st.integers(1, 3),
)

Told = tuple[list[object], int, list[tuple[str, dict[str, Any]]]]


def _server(module: Any, scenario: Scenario) -> tuple[Callable[[Any], Any], list[int]]:
    """A handler answering ``scenario``'s answers in order (then 200s), and its send count."""
    answers: Iterator[Answer] = iter(scenario.answers)
    sent = [0]

    def answer(request: Any) -> Any:
        sent[0] += 1
        next_answer = next(answers, Answer(200))
        if next_answer.status is None:
            raise module.ConnectError("refused", request=request)
        headers = (
            {} if next_answer.retry_after is None else {"Retry-After": next_answer.retry_after}
        )
        return module.Response(next_answer.status, headers=headers, content=b"body")

    return answer, sent


def _options(scenario: Scenario, recorder: RecordingInstrument) -> dict[str, Any]:
    clock = FakeClock()
    return {
        "policy": RetryPolicy(attempts=scenario.attempts, max_delay=5, jitter=False),
        "breaker": CircuitBreaker(failure_threshold=2, clock=clock) if scenario.breaker else None,
        "instruments": [recorder],
        "clock": clock,
    }


def _headers(scenario: Scenario) -> dict[str, str]:
    return {"Idempotency-Key": "order-1"} if scenario.idempotency_key else {}


def _told(results: list[object], sent: int, recorder: RecordingInstrument) -> Told:
    events = []
    for event in recorder.events:
        fields = event._asdict()
        for library_object in ("request", "result", "exception", "body"):
            value = fields.pop(library_object, None)
            fields[library_object] = None if value is None else type(value).__name__
        events.append((type(event).__name__, fields))
    return results, sent, events


def _sync(module: Any, face: Any, scenario: Scenario) -> Told:
    recorder = RecordingInstrument()
    answer, sent = _server(module, scenario)
    transport = face.RetryTransport(module.MockTransport(answer), **_options(scenario, recorder))
    results: list[object] = []
    with module.Client(transport=transport) as client:
        for _ in range(scenario.calls):
            try:
                response = client.request(scenario.method, URL, headers=_headers(scenario))
                results.append((response.status_code, response.content))
            except module.HTTPError as error:  # noqa: PERF203 - each ending is compared
                results.append(type(error).__name__)
    return _told(results, sent[0], recorder)


async def _async(module: Any, face: Any, scenario: Scenario) -> Told:
    recorder = RecordingInstrument()
    answer, sent = _server(module, scenario)
    transport = face.AsyncRetryTransport(
        module.MockTransport(answer), **_options(scenario, recorder)
    )
    results: list[object] = []
    async with module.AsyncClient(transport=transport) as client:
        for _ in range(scenario.calls):
            try:
                response = await client.request(scenario.method, URL, headers=_headers(scenario))
                results.append((response.status_code, response.content))
            except module.HTTPError as error:  # noqa: PERF203 - each ending is compared
                results.append(type(error).__name__)
    return _told(results, sent[0], recorder)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios)
def test_the_four_transports_tell_the_same_story(scenario: Scenario) -> None:
    told = _sync(httpx, retrymw.httpx, scenario)
    assert anyio.run(_async, httpx, retrymw.httpx, scenario) == told
    assert _sync(httpx2, retrymw.httpx2, scenario) == told
    assert anyio.run(_async, httpx2, retrymw.httpx2, scenario) == told
