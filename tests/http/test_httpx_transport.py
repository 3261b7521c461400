"""`AsyncRetryTransport`, `RetryTransport` and the client helpers, on MockTransport and a server.

Where a case is a sequence of answers with hints or hangs, `FaultTransport` scripts it; the
`Script` handler stays for what faults do not express (request bodies, tracked streams).

The suite runs for httpx here and for httpx2 in test_httpx2_transport (`tests.http.flavours`).
Async tests run on asyncio and trio. Time is virtual (`FakeClock`): sleeps are recorded, never
slept. The real server (``tests/http_server.py``) listens on 127.0.0.1 only.
"""

from __future__ import annotations

import email.utils
import socket
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import anyio
import httpx
import pytest

from retrymw import (
    AttemptStarted,
    CallStarted,
    CircuitBreaker,
    CircuitBreakerStatistics,
    CircuitOpenError,
    ConfigError,
    PerTarget,
    Retrier,
    RetryBudget,
    RetryBudgetExhausted,
    RetryDenied,
    RetryPolicy,
    RetryScheduled,
)
from retrymw.httpx import (
    ATTEMPTS_EXTENSION,
    AsyncRetryTransport,
    AttemptTimeoutError,
    RetryTransport,
    TransportCircuitOpenError,
    TransportRetryBudgetExhausted,
    request,
    request_sync,
)
from retrymw.testing import FakeClock, RecordingInstrument
from retrymw.testing.httpx import Fault, FaultTransport
from tests.http.flavours import bind
from tests.http_server import FlakyServer, Step

FLAVOUR = bind(globals())
pytestmark = pytest.mark.anyio

URL = "http://api.example.test/items"


class Script:
    """A MockTransport handler answering from a list of steps; the last step repeats.

    A step is a status, an ``httpx.Response``, or an exception class raised with the request.
    """

    def __init__(self, *steps: int | httpx.Response | type[Exception]) -> None:
        self.steps = steps
        self.requests: list[httpx.Request] = []
        self.bodies: list[bytes] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.bodies.append(request.read())
        self.requests.append(request)
        step = self.steps[min(len(self.requests), len(self.steps)) - 1]
        if isinstance(step, type):
            raise step("scripted failure", request=request)  # type: ignore[call-arg]
        if isinstance(step, int):
            return httpx.Response(step, content=f"status {step}".encode())
        return step


class TrackedStream(httpx.SyncByteStream, httpx.AsyncByteStream):
    """A response body that records whether it was read and when it was closed."""

    def __init__(self, name: str, log: list[str], body: bytes = b"body") -> None:
        self.name, self.log, self.body = name, log, body
        self.read = False
        self.closed = False

    def __iter__(self) -> Iterator[bytes]:
        self.read = True
        yield self.body

    async def __aiter__(self) -> AsyncIterator[bytes]:
        self.read = True
        yield self.body

    def close(self) -> None:
        self.closed = True
        self.log.append(f"close {self.name}")

    async def aclose(self) -> None:
        self.close()


class LoggingClock(FakeClock):
    """A FakeClock that also writes its sleeps into a shared log."""

    def __init__(self, log: list[str]) -> None:
        super().__init__()
        self.log = log

    def sleep_sync(self, seconds: float) -> None:
        self.log.append(f"sleep {seconds:g}")
        super().sleep_sync(seconds)


def async_client(
    handler: Callable[[httpx.Request], Any] | httpx.AsyncBaseTransport,
    clock: FakeClock,
    recorder: RecordingInstrument | None = None,
    **fields: Any,
) -> httpx.AsyncClient:
    """An AsyncClient over a retrying MockTransport (or the given transport), in virtual time."""
    inner = (
        handler if isinstance(handler, httpx.AsyncBaseTransport) else httpx.MockTransport(handler)
    )
    transport = AsyncRetryTransport(
        inner,
        # Unjittered unless a test asks: the delays asserted are the policy's own.
        policy=RetryPolicy(**{"jitter": False, **fields}) if fields else None,
        clock=clock,
        instruments=(recorder,) if recorder else (),
        budget=None,
    )
    return httpx.AsyncClient(transport=transport)


def sync_client(
    handler: Callable[[httpx.Request], Any] | httpx.BaseTransport,
    clock: FakeClock,
    recorder: RecordingInstrument | None = None,
    **fields: Any,
) -> httpx.Client:
    """Sync twin of `async_client`."""
    inner = handler if isinstance(handler, httpx.BaseTransport) else httpx.MockTransport(handler)
    transport = RetryTransport(
        inner,
        # Unjittered unless a test asks: the delays asserted are the policy's own.
        policy=RetryPolicy(**{"jitter": False, **fields}) if fields else None,
        clock=clock,
        instruments=(recorder,) if recorder else (),
        budget=None,
    )
    return httpx.Client(transport=transport)


def notes(error: BaseException) -> list[str]:
    """The PEP 678 notes of ``error``."""
    return list(getattr(error, "__notes__", []))


def denied(recorder: RecordingInstrument) -> list[str]:
    """The reasons of every RetryDenied event."""
    return [event.reason for event in recorder.of_type(RetryDenied)]


@pytest.fixture
def server() -> Iterator[FlakyServer]:
    """A scripted HTTP server on 127.0.0.1, stopped at teardown."""
    flaky = FlakyServer()
    yield flaky
    flaky.stop()


# -- statuses, methods, idempotency (MockTransport) --------------------------------------------


async def test_success_takes_one_attempt_and_no_sleep(clock: FakeClock) -> None:
    """A 200 is returned after one attempt, with the count in response.extensions."""
    async with async_client(Script(200), clock) as client:
        response = await client.get(URL)
    assert response.status_code == 200
    assert response.extensions[ATTEMPTS_EXTENSION] == 1
    assert clock.sleeps == []


@pytest.mark.parametrize(
    "instruments",
    [pytest.param((), id="unobserved"), pytest.param((RecordingInstrument(),), id="observed")],
)
def test_sync_successes_feed_the_retry_budget(instruments: tuple[RecordingInstrument, ...]) -> None:
    """Each first-attempt success deposits into the budget, observed by instruments or not."""
    transport = RetryTransport(
        httpx.MockTransport(Script(200)), clock=FakeClock(), instruments=instruments
    )
    with httpx.Client(transport=transport) as client:
        for _ in range(3):
            assert client.get(URL).extensions[ATTEMPTS_EXTENSION] == 1
    budgets = transport.retrier.budget
    assert isinstance(budgets, PerTarget)  # the default: one budget per host
    budget = budgets.get("api.example.test")
    assert budget is not None
    assert budget.statistics().deposits == 3


@pytest.mark.parametrize(
    "instruments",
    [pytest.param((), id="unobserved"), pytest.param((RecordingInstrument(),), id="observed")],
)
async def test_helper_successes_take_one_attempt_and_feed_the_budget(
    clock: FakeClock, instruments: tuple[RecordingInstrument, ...]
) -> None:
    """request() and request_sync() settle a first success like the transports do."""
    retrier = Retrier(clock=clock, instruments=instruments)
    script = Script(200)
    async with httpx.AsyncClient(transport=httpx.MockTransport(script)) as client:
        response = await request(client, "GET", URL, retrier=retrier)
    with httpx.Client(transport=httpx.MockTransport(script)) as sync:
        response = request_sync(sync, "GET", URL, retrier=retrier)
    assert response.extensions[ATTEMPTS_EXTENSION] == 1
    assert len(script.requests) == 2
    assert isinstance(retrier.budget, RetryBudget)
    assert retrier.budget.statistics().deposits == 2
    assert clock.sleeps == []


@pytest.mark.parametrize(
    "status",
    [
        pytest.param(429, id="429"),
        pytest.param(502, id="502"),
        pytest.param(503, id="503"),
        pytest.param(504, id="504"),
    ],
)
async def test_retryable_statuses_are_retried(clock: FakeClock, status: int) -> None:
    """429, 502, 503 and 504 are retried with the exponential backoff (unjittered here)."""
    script = Script(status, status, 200)
    async with async_client(script, clock, jitter=False) as client:
        response = await client.get(URL)
    assert (response.status_code, response.extensions[ATTEMPTS_EXTENSION]) == (200, 3)
    assert clock.sleeps == [1.0, 2.0]


@pytest.mark.parametrize(
    "status",
    [pytest.param(500, id="500"), pytest.param(404, id="404"), pytest.param(501, id="501")],
)
async def test_other_statuses_are_returned_at_once(clock: FakeClock, status: int) -> None:
    """Statuses outside the default set are final."""
    async with async_client(Script(status, 200), clock) as client:
        response = await client.get(URL)
    assert (response.status_code, response.extensions[ATTEMPTS_EXTENSION]) == (status, 1)


@pytest.mark.parametrize(
    "method",
    [pytest.param(m, id=m) for m in ("GET", "HEAD", "PUT", "DELETE", "OPTIONS", "TRACE")],
)
async def test_idempotent_methods_are_retried(clock: FakeClock, method: str) -> None:
    """Every idempotent method is resent after a 503."""
    script = Script(503, 200)
    async with async_client(script, clock) as client:
        response = await client.request(method, URL)
    assert response.status_code == 200
    assert [r.method for r in script.requests] == [method, method]


@pytest.mark.parametrize(
    "method", [pytest.param("POST", id="POST"), pytest.param("PATCH", id="PATCH")]
)
async def test_non_idempotent_request_is_sent_once_on_503(
    clock: FakeClock, recorder: RecordingInstrument, method: str
) -> None:
    """A POST or PATCH with a body that gets a 503 is not resent; the 503 is returned."""
    script = Script(503, 200)
    async with async_client(script, clock, recorder) as client:
        response = await client.request(method, URL, content=b"pay 10 EUR")
    assert response.status_code == 503
    assert script.bodies == [b"pay 10 EUR"]
    assert denied(recorder) == ["not_idempotent"]


async def test_idempotency_key_allows_resending_the_same_body(clock: FakeClock) -> None:
    """A POST carrying an Idempotency-Key is resent, with identical body bytes."""
    script = Script(503, 200)
    async with async_client(script, clock) as client:
        response = await client.post(URL, content=b"pay 10 EUR", headers={"Idempotency-Key": "k-1"})
    assert response.status_code == 200
    assert script.bodies == [b"pay 10 EUR", b"pay 10 EUR"]


@pytest.mark.parametrize(
    "error",
    [
        pytest.param(httpx.ConnectError, id="ConnectError"),
        pytest.param(httpx.ConnectTimeout, id="ConnectTimeout"),
        pytest.param(httpx.PoolTimeout, id="PoolTimeout"),
    ],
)
async def test_errors_before_sending_are_retried_for_post(
    clock: FakeClock, error: type[Exception]
) -> None:
    """Errors proving the request never left are retried even for a POST."""
    script = Script(error, 200)
    async with async_client(script, clock) as client:
        response = await client.post(URL, content=b"x")
    assert (response.status_code, response.extensions[ATTEMPTS_EXTENSION]) == (200, 2)


@pytest.mark.parametrize(
    "error",
    [
        pytest.param(httpx.ReadError, id="ReadError"),
        pytest.param(httpx.RemoteProtocolError, id="RemoteProtocolError"),
        pytest.param(httpx.ReadTimeout, id="ReadTimeout"),
        pytest.param(httpx.WriteError, id="WriteError"),
    ],
)
async def test_errors_after_sending_are_retried_for_get_only(
    clock: FakeClock, recorder: RecordingInstrument, error: type[Exception]
) -> None:
    """Network errors and timeouts are retried for a GET but raised at once for a POST."""
    async with async_client(Script(error, 200), clock) as client:
        assert (await client.get(URL)).status_code == 200
    script = Script(error, 200)
    async with async_client(script, clock, recorder) as client:
        with pytest.raises(error) as caught:
            await client.post(URL, content=b"x")
    assert len(script.requests) == 1
    assert denied(recorder) == ["not_idempotent"]
    assert "not_idempotent" in notes(caught.value)[-1]


async def test_last_exception_is_raised_with_a_note(clock: FakeClock) -> None:
    """When attempts run out, the last exception propagates with a note saying why."""
    script = Script(httpx.ConnectError)
    async with async_client(script, clock) as client:
        with pytest.raises(httpx.ConnectError) as caught:
            await client.get(URL)
    assert len(script.requests) == 4  # the default policy's 4 attempts
    assert "gave up after attempt 4 of 4" in notes(caught.value)[-1]


# -- response disposal ---------------------------------------------------------------------------


def tracked_script(log: list[str], streams: list[TrackedStream], final: int = 200) -> Script:
    """Two 503s then ``final``, each with a TrackedStream body of known length."""
    responses = []
    for index, status in enumerate((503, 503, final)):
        stream = TrackedStream(f"#{index + 1}", log)
        streams.append(stream)
        responses.append(httpx.Response(status, headers={"Content-Length": "4"}, stream=stream))
    return Script(*responses)


async def test_superseded_responses_are_closed_before_sleeping_and_final_is_open() -> None:
    """Each superseded response is drained and closed before the backoff; the final stays open."""
    log: list[str] = []
    streams: list[TrackedStream] = []
    clock = LoggingClock(log)
    client = async_client(tracked_script(log, streams), clock, jitter=False)
    async with client, client.stream("GET", URL) as response:
        assert log == ["close #1", "sleep 1", "close #2", "sleep 2"]
        assert [s.read for s in streams] == [True, True, False]
        assert not streams[2].closed
        assert await response.aread() == b"body"
    assert streams[2].closed


def test_sync_superseded_responses_are_closed_before_sleeping_and_final_is_open() -> None:
    """The sync transport disposes of superseded responses the same way."""
    log: list[str] = []
    streams: list[TrackedStream] = []
    clock = LoggingClock(log)
    client = sync_client(tracked_script(log, streams), clock, jitter=False)
    with client, client.stream("GET", URL) as response:
        assert log == ["close #1", "sleep 1", "close #2", "sleep 2"]
        assert not streams[2].closed
        assert response.read() == b"body"
    assert streams[2].closed


@pytest.mark.parametrize(
    ("headers", "drained"),
    [
        pytest.param({"Content-Length": "4"}, True, id="small-length"),
        pytest.param({"Content-Length": str(64 * 1024)}, True, id="at-the-limit"),
        pytest.param({"Content-Length": str(64 * 1024 + 1)}, False, id="over-the-limit"),
        pytest.param({"Transfer-Encoding": "chunked"}, False, id="unknown-length"),
    ],
)
async def test_only_small_superseded_bodies_are_drained(
    clock: FakeClock, headers: dict[str, str], drained: bool
) -> None:
    """A superseded body of known length up to 64 KiB is read before closing; others are not."""
    log: list[str] = []
    first = TrackedStream("#1", log)
    script = Script(httpx.Response(503, headers=headers, stream=first), 200)
    async with async_client(script, clock) as client:
        assert (await client.get(URL)).status_code == 200
    assert (first.read, first.closed) == (drained, True)


async def test_final_response_of_exhausted_call_is_returned_open(clock: FakeClock) -> None:
    """When every attempt gets a 503, the last 503 is returned open and readable."""
    log: list[str] = []
    streams = [TrackedStream(f"#{i}", log, b"busy") for i in range(4)]
    script = Script(*(httpx.Response(503, stream=s) for s in streams))
    client = async_client(script, clock)
    async with client, client.stream("GET", URL) as response:
        assert response.extensions[ATTEMPTS_EXTENSION] == 4  # the default policy's 4 attempts
        assert [s.closed for s in streams] == [True, True, True, False]
        assert await response.aread() == b"busy"


# -- request bodies --------------------------------------------------------------------------


async def test_streaming_body_is_buffered_and_replayed(clock: FakeClock) -> None:
    """A streaming PUT body is read once and sent identically on every attempt."""

    async def body() -> AsyncIterator[bytes]:
        for part in (b"chunk-1 ", b"chunk-2"):
            yield part

    script = Script(503, 200)
    async with async_client(script, clock) as client:
        response = await client.put(URL, content=body())
    assert response.status_code == 200
    assert script.bodies == [b"chunk-1 chunk-2"] * 2


async def test_streaming_body_over_the_limit_is_sent_once(
    clock: FakeClock, recorder: RecordingInstrument
) -> None:
    """A body longer than max_replay_body is streamed once, whole, and never resent."""

    async def body() -> AsyncIterator[bytes]:
        for index in range(4):
            yield f"part-{index};".encode()

    script = Script(503, 200)
    async with async_client(script, clock, recorder) as client:
        client._transport.max_replay_body = 10  # type: ignore[attr-defined]
        response = await client.put(URL, content=body())
    assert response.status_code == 503
    assert script.bodies == [b"part-0;part-1;part-2;part-3;"]
    assert denied(recorder) == ["body_not_replayable"]


def test_sync_body_with_large_content_length_is_not_buffered(recorder: RecordingInstrument) -> None:
    """A declared Content-Length over the limit is not buffered: the stream is sent once."""

    def body() -> Iterator[bytes]:
        yield b"0123456789abcdef"

    script = Script(503, 200)
    with sync_client(script, FakeClock(), recorder) as client:
        client._transport.max_replay_body = 8  # type: ignore[attr-defined]
        response = client.put(URL, content=body(), headers={"Content-Length": "16"})
    assert response.status_code == 503
    assert script.bodies == [b"0123456789abcdef"]
    assert denied(recorder) == ["body_not_replayable"]


async def test_body_that_fails_to_read_is_attempted_once(
    clock: FakeClock, recorder: RecordingInstrument
) -> None:
    """A body whose reading fails is not retried: the attempt raises the reading error."""

    async def body() -> AsyncIterator[bytes]:
        yield b"start"
        raise ConnectionResetError("upload source went away")

    script = Script(200)
    async with async_client(script, clock, recorder) as client:
        with pytest.raises(ConnectionResetError, match="upload source"):
            await client.put(URL, content=body())
    assert len(recorder.of_type(AttemptStarted)) == 1
    assert denied(recorder) == ["body_not_replayable"]


@pytest.mark.parametrize(
    ("limit", "fail", "bodies", "reasons"),
    [
        pytest.param(1024, False, [b"chunk-1 chunk-2"] * 2, [], id="replayed"),
        pytest.param(10, False, [b"chunk-1 chunk-2"], ["body_not_replayable"], id="over-limit"),
        pytest.param(1024, True, [], ["body_not_replayable"], id="read-fails"),
    ],
)
def test_sync_streaming_bodies(
    recorder: RecordingInstrument, limit: int, fail: bool, bodies: list[bytes], reasons: list[str]
) -> None:
    """The sync transport buffers, refuses to replay or reports a failing body like the async."""

    def body() -> Iterator[bytes]:
        yield b"chunk-1 "
        if fail:
            raise ConnectionResetError("upload source went away")
        yield b"chunk-2"

    script = Script(503, 200)
    with sync_client(script, FakeClock(), recorder) as client:
        client._transport.max_replay_body = limit  # type: ignore[attr-defined]
        if fail:
            with pytest.raises(ConnectionResetError):
                client.put(URL, content=body())
        else:
            client.put(URL, content=body())
    assert script.bodies == bodies
    assert denied(recorder) == reasons


class FailingStream(TrackedStream):
    """A superseded body whose reading fails (the drain must still close it)."""

    def __iter__(self) -> Iterator[bytes]:
        raise httpx.ReadError("reset while draining")

    async def __aiter__(self) -> AsyncIterator[bytes]:
        raise httpx.ReadError("reset while draining")
        yield b""  # pragma: no cover - makes this an async generator


async def test_superseded_response_failing_to_drain_is_closed(clock: FakeClock) -> None:
    """A drain that fails is ignored: the response is closed and the retry goes ahead."""
    log: list[str] = []
    first = FailingStream("#1", log)
    script = Script(httpx.Response(503, headers={"Content-Length": "4"}, stream=first), 200)
    async with async_client(script, clock) as client:
        assert (await client.get(URL)).status_code == 200
    assert log == ["close #1"]
    second = FailingStream("#2", log)
    script = Script(httpx.Response(503, headers={"Content-Length": "4"}, stream=second), 200)
    with sync_client(script, clock) as sync:
        assert sync.get(URL).status_code == 200
    assert log == ["close #1", "close #2"]


# -- Retry-After --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "value", "sleeps"),
    [
        pytest.param(429, "7", [7.0], id="429-seconds"),
        pytest.param(503, "20", [20.0], id="503-seconds"),
        pytest.param(503, "date+25", [25.0], id="503-http-date"),
        pytest.param(429, "0", [1.0], id="zero-uses-backoff"),
        pytest.param(429, "-1", [1.0], id="garbage-uses-backoff"),
        pytest.param(502, "20", [20.0], id="502-seconds"),
        pytest.param(200, "20", [], id="ignored-on-success"),
    ],
)
async def test_retry_after_sets_the_least_delay(
    clock: FakeClock, recorder: RecordingInstrument, status: int, value: str, sleeps: list[float]
) -> None:
    """Retry-After on a retried response (seconds or HTTP-date) is honoured; garbage is not."""
    if value.startswith("date+"):
        value = email.utils.formatdate(clock.wall() + int(value[5:]), usegmt=True)
    faults = FaultTransport(script=[Fault(status=status, retry_after=value)])
    async with async_client(faults, clock, recorder, jitter=False) as client:
        assert (await client.get(URL)).status_code == 200
    assert clock.sleeps == sleeps


@pytest.mark.parametrize(
    ("method", "status", "verdict", "sends", "reasons"),
    [
        pytest.param("GET", 503, "false", 1, ["server_said_no"], id="false-forbids"),
        pytest.param("GET", 500, "true", 2, [], id="true-allows-a-status-not-listed"),
        pytest.param("POST", 500, "true", 1, ["not_idempotent"], id="true-keeps-idempotency"),
        pytest.param("GET", 500, "maybe", 1, [], id="garbage-is-no-verdict"),
        pytest.param("GET", 200, "true", 1, [], id="true-on-success-is-nothing"),
    ],
)
async def test_x_should_retry(
    clock: FakeClock,
    recorder: RecordingInstrument,
    method: str,
    status: int,
    verdict: str,
    sends: int,
    reasons: list[str],
) -> None:
    """x-should-retry: false forbids a retry, true allows one; idempotency still applies."""
    script = Script(httpx.Response(status, headers={"x-should-retry": verdict}), 200)
    async with async_client(script, clock, recorder) as client:
        await client.request(method, URL)
    assert len(script.requests) == sends
    assert denied(recorder) == reasons


async def test_the_header_that_set_the_delay_is_reported(
    clock: FakeClock, recorder: RecordingInstrument
) -> None:
    """The longest hint wins, and RetryScheduled names its header."""
    faults = FaultTransport(script=[Fault(status=429, retry_after_ms=2500, retry_after=2)])
    async with async_client(faults, clock, recorder, initial_delay=0.1) as client:
        assert (await client.get(URL)).status_code == 200
    (scheduled,) = recorder.of_type(RetryScheduled)
    assert (scheduled.retry_after, scheduled.retry_after_header) == (2.5, "retry-after-ms")
    assert clock.sleeps == [2.5]


def test_sdk_retry_count_is_kept_true_and_sdk_retries_run_once(
    clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    """x-stainless-retry-count counts the real attempts; an SDK retry on top is sent once."""
    counts: list[str] = []

    def answer(request: httpx.Request) -> httpx.Response:
        counts.append(request.headers["x-stainless-retry-count"])  # as it was sent
        return httpx.Response(503)

    with sync_client(answer, clock) as client:
        client.get(URL, headers={"x-stainless-retry-count": "0"})
        with caplog.at_level("WARNING", logger="retrymw"):
            client.get(URL, headers={"x-stainless-retry-count": "1"})
            client.get(URL, headers={"x-stainless-retry-count": "2"})
        client.get(URL, headers={"x-stainless-retry-count": "soon"})
    assert counts == ["0", "1", "2", "3", "1", "2", "soon", "soon", "soon", "soon"]
    assert [record.levelname for record in caplog.records] == ["WARNING"]
    assert "max_retries=0" in caplog.records[0].getMessage()


@pytest.mark.parametrize(
    "fields",
    [
        pytest.param({"max_delay": 30}, id="over-max-delay"),
        pytest.param({"retry_budget": 60}, id="over-retry-budget"),
        pytest.param({"deadline": 90}, id="past-deadline"),
    ],
)
async def test_retry_after_beyond_limits_returns_the_response(
    clock: FakeClock, recorder: RecordingInstrument, fields: dict[str, float]
) -> None:
    """A hint longer than max_delay, the budget or the deadline returns that response at once."""
    faults = FaultTransport(script=[Fault(status=429, retry_after=120)])
    async with async_client(faults, clock, recorder, **fields) as client:
        response = await client.get(URL)
    assert (response.status_code, response.extensions[ATTEMPTS_EXTENSION]) == (429, 1)
    assert clock.sleeps == []
    assert denied(recorder) == ["retry_after_exceeds_limit"]


# -- policies and overrides --------------------------------------------------------------------


@pytest.mark.parametrize(
    "override",
    [
        pytest.param({"attempts": 1}, id="fields"),
        pytest.param("once", id="name"),
        pytest.param(RetryPolicy(attempts=1, retry_on=[503]), id="policy"),
    ],
)
async def test_per_request_override(clock: FakeClock, override: object) -> None:
    """extensions["retrymw"] selects a policy for one request; here: no retries."""
    script = Script(503, 200)
    transport = AsyncRetryTransport(
        httpx.MockTransport(script),
        clock=clock,
        instruments=(),
        policies={"once": RetryPolicy(attempts=1)},
    )
    async with httpx.AsyncClient(transport=transport) as client:
        response = await client.get(URL, extensions={"retrymw": override})
        assert (response.status_code, response.extensions[ATTEMPTS_EXTENSION]) == (503, 1)
        response = await client.get(URL)  # the default policy again
        assert response.status_code == 200


async def test_unknown_policy_name_is_a_config_error(clock: FakeClock) -> None:
    """An unknown policy name fails before anything is sent."""
    script = Script(200)
    async with async_client(script, clock) as client:
        with pytest.raises(ConfigError, match="unknown policy"):
            await client.get(URL, extensions={"retrymw": "nope"})
    assert script.requests == []


async def test_policy_without_retry_on_gets_the_http_default(clock: FakeClock) -> None:
    """RetryPolicy(attempts=2) retries 503s like the default HTTP policy does."""
    async with async_client(Script(503, 200), clock, attempts=2) as client:
        assert (await client.get(URL)).status_code == 200


def test_on_failure_continue_is_refused() -> None:
    """A transport cannot return None, so on_failure="continue" is refused up front."""
    with pytest.raises(ConfigError, match="on_failure"):
        RetryTransport(httpx.MockTransport(Script(200)), policy=RetryPolicy(on_failure="continue"))


@pytest.mark.parametrize(
    ("arguments", "field", "problem"),
    [
        pytest.param({"policy": "x"}, "policy", "must be a RetryPolicy", id="policy"),
        pytest.param(
            {"policies": [RetryPolicy()]}, "policies", "must be a mapping", id="policies-list"
        ),
        pytest.param(
            {"policies": {1: RetryPolicy()}}, "policies", "names must be strings", id="policy-name"
        ),
        pytest.param(
            {"policies": {"fast": {"attempts": 2}}},
            "policies.fast",
            "must be a RetryPolicy",
            id="named-policy",
        ),
        pytest.param({"transport": "x"}, "transport", f"must be an {FLAVOUR}.", id="transport"),
        pytest.param({"breaker": "x"}, "breaker", "must be a CircuitBreaker", id="breaker"),
        pytest.param({"budget": 3}, "budget", "must be a RetryBudget", id="budget"),
    ],
)
@pytest.mark.parametrize(
    "kind",
    [pytest.param(AsyncRetryTransport, id="async"), pytest.param(RetryTransport, id="sync")],
)
def test_transport_arguments_are_checked(
    kind: type[AsyncRetryTransport | RetryTransport],
    arguments: dict[str, Any],
    field: str,
    problem: str,
) -> None:
    """A wrong argument is a ConfigError naming the field, the value and an example."""
    with pytest.raises(ConfigError) as caught:
        kind(**arguments)
    error = caught.value
    assert (error.field, problem in error.problem) == (field, True)
    assert repr(error.value) in str(error)
    assert "expected e.g. " in str(error)


@pytest.mark.parametrize(
    ("kind", "inner", "hint"),
    [
        pytest.param(
            AsyncRetryTransport, httpx.BaseTransport(), "needs RetryTransport", id="sync-in-async"
        ),
        pytest.param(
            RetryTransport,
            httpx.AsyncBaseTransport(),
            "needs AsyncRetryTransport",
            id="async-in-sync",
        ),
    ],
)
def test_a_transport_of_the_other_flavour_is_refused(
    kind: type[AsyncRetryTransport | RetryTransport], inner: object, hint: str
) -> None:
    """A sync transport in the async wrapper (or the reverse) names the wrapper to use instead."""
    with pytest.raises(ConfigError, match=hint):
        kind(inner)  # type: ignore[arg-type]


async def test_helpers_check_their_policy_and_retrier(clock: FakeClock) -> None:
    """request() and request_sync() refuse a wrong policy or retrier before sending anything."""
    script = Script(200)
    async with httpx.AsyncClient(transport=httpx.MockTransport(script)) as client:
        with pytest.raises(ConfigError, match=r"^policy: must be a RetryPolicy"):
            await request(client, "GET", URL, policy="x")  # type: ignore[arg-type]
        with pytest.raises(ConfigError, match=r"^retrier: must be a Retrier"):
            await request(client, "GET", URL, retrier=RetryPolicy())  # type: ignore[arg-type]
    sync = httpx.Client(transport=httpx.MockTransport(script))
    with sync, pytest.raises(ConfigError, match=r"^policy: must be a RetryPolicy"):
        request_sync(sync, "GET", URL, policy={"attempts": 2})  # type: ignore[arg-type]
    assert script.requests == []


async def test_fallback_may_supply_a_response(clock: FakeClock) -> None:
    """A fallback returning a response replaces the final error."""
    policy = RetryPolicy(
        attempts=2, on_failure="fallback", fallback=lambda exc: httpx.Response(299)
    )
    transport = AsyncRetryTransport(
        httpx.MockTransport(Script(httpx.ConnectError)), policy=policy, clock=clock, instruments=()
    )
    async with httpx.AsyncClient(transport=transport) as client:
        assert (await client.get(URL)).status_code == 299


def test_fallback_must_return_a_response() -> None:
    """A fallback returning anything but a response is a TypeError naming the policy."""
    policy = RetryPolicy(name="odd", attempts=1, on_failure="fallback", fallback=lambda exc: 42)
    transport = RetryTransport(
        httpx.MockTransport(Script(httpx.ConnectError)), policy=policy, instruments=()
    )
    with httpx.Client(transport=transport) as client, pytest.raises(TypeError, match="'odd'"):
        client.get(URL)


# -- give-up errors are httpx errors ------------------------------------------------------------


async def test_budget_exhausted_is_an_httpx_transport_error(clock: FakeClock) -> None:
    """RetryBudgetExhausted raised by the transport is also an httpx.TransportError."""
    async with async_client(Script(httpx.ConnectError), clock, retry_budget=1.5) as client:
        with pytest.raises(httpx.TransportError) as caught:
            await client.get(URL)
    error = caught.value
    assert isinstance(error, TransportRetryBudgetExhausted)
    assert isinstance(error, RetryBudgetExhausted)
    assert "Retry budget exhausted" in str(error)
    assert isinstance(error.__cause__, httpx.ConnectError)
    assert error.request.url == URL
    assert clock.sleeps == [1.0]


def test_sync_budget_exhausted_is_an_httpx_transport_error() -> None:
    """The sync transport raises the same httpx-compatible budget error."""
    client = sync_client(Script(httpx.ConnectError), FakeClock(), retry_budget=1.5)
    with client, pytest.raises(TransportRetryBudgetExhausted) as caught:
        client.get(URL)
    assert isinstance(caught.value.__cause__, httpx.ConnectError)


async def test_helpers_raise_httpx_compatible_give_up_errors(clock: FakeClock) -> None:
    """request() and request_sync() translate the engine's errors like the transports."""
    retrier = Retrier(
        RetryPolicy(retry_budget=1.5, jitter=False), clock=clock, instruments=(), budget=None
    )
    transport = httpx.MockTransport(Script(httpx.ConnectError))
    async with httpx.AsyncClient(transport=transport) as client:
        with pytest.raises(TransportRetryBudgetExhausted):
            await request(client, "GET", URL, retrier=retrier)
    sync = httpx.Client(transport=transport)
    with sync, pytest.raises(TransportRetryBudgetExhausted):
        request_sync(sync, "GET", URL, retrier=retrier)


async def test_budget_exhausted_with_a_response_returns_it(clock: FakeClock) -> None:
    """When the budget runs out after a response, that response is returned."""
    async with async_client(Script(503), clock, retry_budget=1.5) as client:
        response = await client.get(URL)
    assert (response.status_code, response.extensions[ATTEMPTS_EXTENSION]) == (503, 2)


async def test_breaker_is_keyed_per_host_and_open_is_an_httpx_error(
    clock: FakeClock, recorder: RecordingInstrument
) -> None:
    """An open circuit for one host rejects with an httpx error; other hosts are unaffected."""
    breaker = PerTarget(
        CircuitBreaker(
            failure_threshold=2, failure_rate_threshold=None, recovery_timeout=60, clock=clock
        )
    )

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(503 if request.url.host == "down.test" else 200)

    transport = AsyncRetryTransport(
        httpx.MockTransport(handler),
        policy=RetryPolicy(attempts=2),
        breaker=breaker,
        clock=clock,
        instruments=(recorder,),
        budget=None,
    )
    async with httpx.AsyncClient(transport=transport) as client:
        assert (await client.get("http://down.test/")).status_code == 503
        with pytest.raises(httpx.TransportError) as caught:
            await client.get("http://down.test/")
        assert (await client.get("http://up.test:8080/")).status_code == 200
    error = caught.value
    assert isinstance(error, TransportCircuitOpenError)
    assert isinstance(error, CircuitOpenError)
    assert error.request.url.host == "down.test"
    assert transport.retrier.breaker is breaker
    states = {
        target: s.state
        for target, s in breaker.statistics().items()
        if isinstance(s, CircuitBreakerStatistics)
    }
    assert states == {"down.test": "open", "up.test:8080": "closed"}


async def test_attempt_timeout_is_retried_then_raised_as_httpx_timeout(clock: FakeClock) -> None:
    """An async attempt over the policy timeout is cancelled and retried; the last one raises."""
    slow_once = FaultTransport(script=[Fault(kind="pass", latency=10)])  # slept in real time
    async with async_client(slow_once, clock, timeout=0.05) as client:
        assert (await client.get(URL)).extensions[ATTEMPTS_EXTENSION] == 2
    hang = FaultTransport(rates={"timeout": 1.0})  # hangs 30 s, longer than any attempt
    async with async_client(hang, clock, timeout=0.05, attempts=2) as client:
        with pytest.raises(httpx.TimeoutException) as caught:
            await client.get(URL)
    assert isinstance(caught.value, AttemptTimeoutError)
    assert isinstance(caught.value, TimeoutError)
    assert "gave up after attempt 2 of 2" in notes(caught.value)[-1]


def test_sync_timeout_travels_as_the_httpx_timeout_extension() -> None:
    """The sync transport caps httpx's per-request timeouts with the policy timeout."""
    seen: list[Any] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(dict(request.extensions["timeout"]))  # as the attempt saw it
        return httpx.Response(503 if len(seen) == 1 else 200)

    with sync_client(handler, FakeClock(), timeout=2.5, deadline=60) as client:
        response = client.get(URL, timeout=httpx.Timeout(5.0, read=1.0))
    # The cap is what the attempt's limit leaves when the attempt sends (a few µs less).
    capped = {"connect": 2.5, "read": 1.0, "write": 2.5, "pool": 2.5}
    assert seen == [pytest.approx(capped, abs=0.1)] * 2
    assert response.request.extensions["timeout"]["connect"] == 5.0  # restored


# -- events, lifecycle ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "target"),
    [
        pytest.param("https://api.example.test/a?b=1", "api.example.test", id="default-port"),
        pytest.param("http://api.example.test:8080/a", "api.example.test:8080", id="other-port"),
    ],
)
async def test_events_name_the_method_and_host(
    clock: FakeClock, recorder: RecordingInstrument, url: str, target: str
) -> None:
    """Events carry operation = method, target = host[:port], and the httpx request."""
    async with async_client(Script(200), clock, recorder) as client:
        await client.request("delete", url)
    started = recorder.of_type(CallStarted)[0]
    assert (started.operation, started.target) == ("DELETE", target)
    assert isinstance(started.request, httpx.Request)
    assert started.request.url == url


async def test_concurrent_requests_share_nothing(clock: FakeClock) -> None:
    """Concurrent requests through one transport keep their own attempts and outcomes."""
    failures = {f"/{n}": n for n in range(10)}
    seen: dict[str, int] = {}

    def handler(request: httpx.Request) -> httpx.Response:
        path = request.url.path
        seen[path] = seen.get(path, 0) + 1
        return httpx.Response(503 if seen[path] <= failures[path] else 200)

    results: dict[str, tuple[int, int]] = {}
    async with async_client(handler, clock, attempts=5) as client:

        async def fetch(path: str) -> None:
            response = await client.get(f"http://h.test{path}")
            results[path] = (response.status_code, response.extensions[ATTEMPTS_EXTENSION])

        async with anyio.create_task_group() as group:
            for path in failures:
                group.start_soon(fetch, path)
    assert results == {path: (200, n + 1) if n < 5 else (503, 5) for path, n in failures.items()}


async def test_async_transport_closes_and_enters_the_inner_one() -> None:
    """aclose() and async with reach the inner transport."""
    closed: list[str] = []

    class Inner(httpx.AsyncBaseTransport):
        async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
            return httpx.Response(200)

        async def aclose(self) -> None:
            closed.append("closed")

    async with AsyncRetryTransport(Inner(), instruments=()) as transport:
        assert isinstance(transport, AsyncRetryTransport)
    assert closed == ["closed"]
    await AsyncRetryTransport(Inner(), instruments=()).aclose()
    assert closed == ["closed", "closed"]
    assert "policy='default' attempts=4" in repr(transport)


def test_sync_transport_closes_and_enters_the_inner_one() -> None:
    """close() and with reach the inner transport; the default inner is an HTTPTransport."""
    closed: list[str] = []

    class Inner(httpx.BaseTransport):
        def handle_request(self, request: httpx.Request) -> httpx.Response:
            return httpx.Response(200)

        def close(self) -> None:
            closed.append("closed")

    with RetryTransport(Inner(), instruments=()) as transport:
        assert isinstance(transport, RetryTransport)
        assert transport.retrier.policy.attempts == 4
    RetryTransport(Inner(), instruments=()).close()
    assert closed == ["closed", "closed"]
    with RetryTransport(instruments=()) as default:
        assert "HTTPTransport" in repr(default)


# -- client helpers: body-phase errors ---------------------------------------------------------


class BrokenBody(httpx.SyncByteStream, httpx.AsyncByteStream):
    """A body that fails half-way, like a connection dropped after the headers."""

    def __iter__(self) -> Iterator[bytes]:
        yield b"half"
        raise httpx.ReadError("connection dropped mid-body")

    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield b"half"
        raise httpx.ReadError("connection dropped mid-body")


def body_phase_script() -> Script:
    """First a response whose body fails, then a good one."""
    return Script(httpx.Response(200, stream=BrokenBody()), httpx.Response(200, content=b"whole"))


async def test_transport_cannot_retry_body_phase_errors_but_the_helper_can(
    clock: FakeClock,
) -> None:
    """A body read error escapes the transport; request() retries the whole exchange."""
    async with async_client(body_phase_script(), clock) as client:
        with pytest.raises(httpx.ReadError):
            await client.get(URL)
    retrier = Retrier(RetryPolicy(jitter=False), clock=clock, instruments=(), budget=None)
    script = body_phase_script()
    async with httpx.AsyncClient(transport=httpx.MockTransport(script)) as client:
        response = await request(client, "GET", URL, retrier=retrier)
    assert (response.content, response.extensions[ATTEMPTS_EXTENSION]) == (b"whole", 2)
    assert clock.sleeps == [1.0]


def test_sync_helper_retries_body_phase_errors() -> None:
    """request_sync() retries an exchange whose body fails half-way."""
    clock = FakeClock()
    retrier = Retrier(RetryPolicy(jitter=False), clock=clock, instruments=(), budget=None)
    with httpx.Client(transport=httpx.MockTransport(body_phase_script())) as client:
        response = request_sync(client, "GET", URL, retrier=retrier, params={"q": "1"})
    assert (response.content, response.extensions[ATTEMPTS_EXTENSION]) == (b"whole", 2)
    assert response.request.url.params["q"] == "1"


async def test_helper_refuses_a_client_that_already_retries(clock: FakeClock) -> None:
    """request() on a client whose transport retries raises ConfigError and sends nothing."""
    script = Script(200)
    async with async_client(script, clock) as client:
        with pytest.raises(ConfigError, match="already retries"):
            await request(client, "GET", URL)
    assert script.requests == []
    with sync_client(script, clock) as sync, pytest.raises(ConfigError, match="already retries"):
        request_sync(sync, "GET", URL)


async def test_helper_keeps_post_idempotency_rules(clock: FakeClock) -> None:
    """request() sends a POST once on a 503, and twice with an Idempotency-Key."""
    retrier = Retrier(RetryPolicy(jitter=False), clock=clock, instruments=(), budget=None)
    script = Script(503, 503, 200)
    async with httpx.AsyncClient(transport=httpx.MockTransport(script)) as client:
        response = await request(client, "POST", URL, content=b"x", retrier=retrier)
        assert response.status_code == 503
        response = await request(
            client, "POST", URL, content=b"x", headers={"Idempotency-Key": "k"}, retrier=retrier
        )
    assert response.status_code == 200
    assert script.bodies == [b"x", b"x", b"x"]


# -- a real server on 127.0.0.1 ------------------------------------------------------------------


async def test_server_status_sequence_reuses_one_connection(
    server: FlakyServer, clock: FakeClock
) -> None:
    """503, 502 then 200 from a real server: three attempts over one keep-alive connection."""
    url = server.script(503, 502, 200)
    async with async_client(httpx.AsyncHTTPTransport(), clock) as client:
        response = await client.get(url)
    assert (response.status_code, response.extensions[ATTEMPTS_EXTENSION]) == (200, 3)
    assert server.served(url) == 3
    assert server.accepted == 1


@pytest.mark.parametrize(
    ("headers", "sent"),
    [pytest.param({}, 1, id="no-key"), pytest.param({"Idempotency-Key": "k-7"}, 2, id="key")],
)
async def test_server_post_on_503_is_sent_once_or_with_a_key_twice(
    server: FlakyServer, clock: FakeClock, headers: dict[str, str], sent: int
) -> None:
    """A real server sees a POST once on 503, or twice with identical bytes given a key."""
    url = server.script(503, 200)
    async with async_client(httpx.AsyncHTTPTransport(), clock) as client:
        await client.post(url, content=b'{"amount": 10}', headers=headers)
    assert [r.body for r in server.received(url)] == [b'{"amount": 10}'] * sent
    assert all(r.method == "POST" for r in server.received(url))


@pytest.mark.parametrize(
    ("headers", "sent"),
    [pytest.param({}, 1, id="no-key"), pytest.param({"Idempotency-Key": "k-7"}, 2, id="key")],
)
def test_sync_server_post_on_503_is_sent_once_or_with_a_key_twice(
    server: FlakyServer, headers: dict[str, str], sent: int
) -> None:
    """Sync twin: a POST is sent once on 503, or twice with identical bytes given a key."""
    url = server.script(503, 200)
    with sync_client(httpx.HTTPTransport(), FakeClock()) as client:
        client.post(url, content=b'{"amount": 10}', headers=headers)
    assert [r.body for r in server.received(url)] == [b'{"amount": 10}'] * sent


async def test_server_dropped_connection_is_retried_for_get_not_post(
    server: FlakyServer, clock: FakeClock
) -> None:
    """A connection closed without a response is retried for a GET and raised for a POST."""
    url = server.script(Step(drop=True), 200)
    async with async_client(httpx.AsyncHTTPTransport(), clock) as client:
        assert (await client.get(url)).extensions[ATTEMPTS_EXTENSION] == 2
    url = server.script(Step(drop=True), 200)
    async with async_client(httpx.AsyncHTTPTransport(), clock) as client:
        with pytest.raises(httpx.RemoteProtocolError):
            await client.post(url, content=b"once")
    assert server.served(url) == 1


def free_port() -> int:
    """A port on 127.0.0.1 that nothing listens on."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def test_connection_refused_is_retried_for_post(
    clock: FakeClock, recorder: RecordingInstrument
) -> None:
    """Connect errors are retried even for a POST; the last one is raised."""
    url = f"http://127.0.0.1:{free_port()}/"
    async with async_client(httpx.AsyncHTTPTransport(), clock, recorder, jitter=False) as client:
        with pytest.raises(httpx.ConnectError):
            await client.post(url, content=b"x")
    assert len(recorder.of_type(AttemptStarted)) == 3
    assert clock.sleeps == [1.0, 2.0]


async def test_server_slow_response_times_out_and_is_retried(
    server: FlakyServer, clock: FakeClock
) -> None:
    """An attempt slower than the policy timeout is cancelled and the next one succeeds."""
    url = server.script(Step(delay=5), 200)
    async with async_client(httpx.AsyncHTTPTransport(), clock, timeout=0.5) as client:
        response = await client.get(url)
    assert (response.status_code, response.extensions[ATTEMPTS_EXTENSION]) == (200, 2)


def test_sync_server_slow_response_times_out_and_is_retried(server: FlakyServer) -> None:
    """The sync transport's policy timeout reaches httpx, so a slow attempt is retried."""
    url = server.script(Step(delay=5), 200)
    with sync_client(httpx.HTTPTransport(), FakeClock(), timeout=0.5) as client:
        response = client.get(url)
    assert (response.status_code, response.extensions[ATTEMPTS_EXTENSION]) == (200, 2)


async def test_server_retry_after_is_honoured_and_capped(
    server: FlakyServer, clock: FakeClock, recorder: RecordingInstrument
) -> None:
    """A real 429 with Retry-After: 3 sleeps 3 s; a 503 asking for an hour is returned as is."""
    url = server.script(Step(429, {"Retry-After": "3"}), 200)
    async with async_client(httpx.AsyncHTTPTransport(), clock, recorder) as client:
        assert (await client.get(url)).status_code == 200
        assert clock.sleeps == [3.0]
        assert recorder.of_type(RetryScheduled)[0].retry_after == 3.0
        url = server.script(Step(503, {"Retry-After": "3600"}), 200)
        response = await client.get(url)
    assert (response.status_code, response.text) == (503, "ok")
    assert denied(recorder) == ["retry_after_exceeds_limit"]


def test_sync_no_connection_leaks_after_10_000_retries(server: FlakyServer) -> None:
    """10 000 retries (1 000 calls x 11 attempts) reuse one pooled connection; none stays open."""
    # Every superseded 503 is drained, then closed, so the pool hands the same keep-alive
    # connection back each time. The sync client is the cheaper one (about 9 s for the 11 000
    # exchanges on a 2-CPU machine); the async tests below check the same with fewer calls.
    url = server.script(*([503] * 10), 200, cycle=True, record=False)
    clock = FakeClock()
    transport = RetryTransport(
        policy=RetryPolicy(attempts=11, max_delay=1), clock=clock, instruments=(), budget=None
    )
    with httpx.Client(transport=transport) as client:
        for _ in range(1000):
            response = client.get(url)
            assert response.extensions[ATTEMPTS_EXTENSION] == 11
    assert len(clock.sleeps) == 10_000
    assert server.served(url) == 11_000
    assert server.accepted == 1
    wait_until_closed(server)


def wait_until_closed(server: FlakyServer) -> None:
    """Wait (bounded) for the server to see every client connection closed."""
    for _ in range(200):
        if server.open == 0:
            return
        time.sleep(0.01)  # the server's threads notice closed sockets on their own
    assert server.open == 0


async def test_async_pool_reuses_connections_across_retries(
    server: FlakyServer, clock: FakeClock
) -> None:
    """100 calls of 3 attempts each over the async client use one connection, closed at the end."""
    url = server.script(503, 503, 200, cycle=True, record=False)
    async with async_client(httpx.AsyncHTTPTransport(), clock) as client:
        for _ in range(100):
            assert (await client.get(url)).extensions[ATTEMPTS_EXTENSION] == 3
    assert server.accepted == 1
    wait_until_closed(server)


async def test_unknown_length_superseded_bodies_close_their_connections(
    server: FlakyServer, clock: FakeClock
) -> None:
    """Chunked 503s are closed unread: each retry opens a new connection and none stays open."""
    url = server.script(Step(503, chunked=True), Step(503, chunked=True), 200, cycle=True)
    async with async_client(httpx.AsyncHTTPTransport(), clock) as client:
        for _ in range(20):
            assert (await client.get(url)).extensions[ATTEMPTS_EXTENSION] == 3
    assert server.accepted == 41  # one dropped per chunked 503, the 200 keeps its connection
    wait_until_closed(server)


async def test_server_truncated_body_is_retried_by_the_helper(
    server: FlakyServer, clock: FakeClock
) -> None:
    """A body cut short escapes the transport, but request() retries it to a whole body."""
    url = server.script(Step(200, body=b"partial", truncate=True), Step(200, body=b"whole"))
    async with async_client(httpx.AsyncHTTPTransport(), clock) as client:
        with pytest.raises(httpx.RemoteProtocolError):
            await client.get(url)
    retrier = Retrier(RetryPolicy(jitter=False), clock=clock, instruments=(), budget=None)
    url = server.script(Step(200, body=b"partial", truncate=True), Step(200, body=b"whole"))
    async with httpx.AsyncClient() as client:
        response = await request(client, "GET", url, retrier=retrier)
    assert (response.content, response.extensions[ATTEMPTS_EXTENSION]) == (b"whole", 2)


def test_sync_server_truncated_body_is_retried_by_the_helper(server: FlakyServer) -> None:
    """request_sync() retries a body cut short by the server."""
    retrier = Retrier(clock=FakeClock(), instruments=(), budget=None)
    url = server.script(Step(200, body=b"partial", truncate=True), Step(200, body=b"whole"))
    with httpx.Client() as client:
        response = request_sync(client, "GET", url, retrier=retrier)
    assert (response.content, response.extensions[ATTEMPTS_EXTENSION]) == (b"whole", 2)


class TrippingClock(FakeClock):
    """A fake clock whose sleep lets other traffic open the host's circuit meanwhile."""

    def __init__(self) -> None:
        super().__init__()
        self.trip: Callable[[], None] = lambda: None

    def sleep_sync(self, seconds: float) -> None:
        super().sleep_sync(seconds)
        self.trip()


def test_circuit_opening_during_the_backoff_raises_instead_of_returning_a_closed_response() -> None:
    """A superseded response is closed before the sleep, so a rejection after it raises."""
    clock = TrippingClock()
    breaker = CircuitBreaker(
        name="api", failure_threshold=5, failure_rate_threshold=None, clock=clock
    )
    transport = RetryTransport(
        httpx.MockTransport(Script(503, 200)),
        policy=RetryPolicy(jitter=False),
        breaker=breaker,
        clock=clock,
        instruments=(),
    )

    circuits = transport.retrier.breaker
    assert isinstance(circuits, PerTarget)

    def other_callers_fail() -> None:
        circuit = circuits.for_target("example.com")  # the host's circuit, from the template
        while circuit.state == "closed":
            assert circuit.allow_request()
            circuit.record_failure()

    clock.trip = other_callers_fail
    with httpx.Client(transport=transport) as client, pytest.raises(TransportCircuitOpenError):
        client.get("http://example.com/")
    assert clock.sleeps == [1.0]


async def test_the_default_policy_jitters(clock: FakeClock) -> None:
    """The transport's default policy uses full jitter: each delay is drawn in [0, backoff]
    (2 s, then 4 s)."""
    script = Script(*([503] * 2 + [200]) * 20)
    async with async_client(script, clock) as client:
        for _ in range(20):
            assert (await client.get(URL)).status_code == 200
    firsts, seconds = clock.sleeps[0::2], clock.sleeps[1::2]
    assert all(0.0 <= delay <= 2.0 for delay in firsts)
    assert all(0.0 <= delay <= 4.0 for delay in seconds)
    assert len(set(clock.sleeps)) == len(clock.sleeps)  # spread, not the same delays
