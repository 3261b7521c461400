"""Retry at one layer in one process: what an inner retrymw call retried and gave up on is final.

Goals (issue 16): Retrier(attempts=3) around Retrier(attempts=3), always failing, runs the
function 3 times (9 before); a Retrier around an httpx client whose transport retries (3 x 3)
sends 3 requests (9 before).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client import CollectorRegistry

from retrymw import CallFinished, ConfigError, Retrier, RetryDenied, RetryPolicy
from retrymw.httpx import AsyncRetryTransport, RetryTransport, request
from retrymw.instrumentation import LoggingInstrument, OpenTelemetryInstrument, PrometheusInstrument
from retrymw.testing import FakeClock, RecordingInstrument
from tests.http_server import FlakyServer, Step

pytestmark = pytest.mark.anyio


class AlwaysFails:
    """Raises a fresh ``ConnectionError`` on every call, and counts the calls."""

    def __init__(self) -> None:
        self.calls = 0

    def sync(self) -> None:
        self.calls += 1
        raise ConnectionError(f"down (call {self.calls})")

    async def __call__(self) -> None:
        self.sync()


def retrier(clock: FakeClock, *, instruments: Any = (), **fields: Any) -> Retrier:
    return Retrier(RetryPolicy(**fields), clock=clock, instruments=instruments, budget=None)


@pytest.fixture
def server() -> Iterator[FlakyServer]:
    flaky = FlakyServer()
    try:
        yield flaky
    finally:
        flaky.stop()


# -- coroutines and functions -----------------------------------------------------------------


@pytest.mark.parametrize("observed", [False, True], ids=["plain", "observed"])
async def test_retrier_around_retrier_runs_three_times_not_nine(
    clock: FakeClock, observed: bool
) -> None:
    """Goal: 3 x 3, always failing, runs 3 times; the outer gives up with retried_below."""
    recorder = RecordingInstrument()
    fn = AlwaysFails()
    inner = retrier(clock, name="inner", instruments=(recorder,) if observed else ())
    outer = retrier(clock, name="outer", instruments=(recorder,))

    async def middle() -> None:
        await inner.call(fn)

    with pytest.raises(ConnectionError) as caught:
        await outer.call(middle)
    assert fn.calls == 3
    denied = [
        (event.policy, event.reason, event.attempt) for event in recorder.of_type(RetryDenied)
    ]
    assert ("outer", "retried_below", 1) in denied
    outcomes = {event.policy: event.outcome for event in recorder.of_type(CallFinished)}
    assert outcomes["outer"] == "failure"
    assert "[retried_below]" in getattr(caught.value, "__notes__", [""])[-1]


def test_sync_functions_too(clock: FakeClock) -> None:
    """The sync driver follows the same rule: 3 executions, not 9."""
    fn = AlwaysFails()
    inner = retrier(clock, name="inner")
    outer = retrier(clock, name="outer")
    with pytest.raises(ConnectionError):
        outer.call_sync(lambda: inner.call_sync(fn.sync))
    assert fn.calls == 3


async def test_three_layers_run_three_times_not_twenty_seven(clock: FakeClock) -> None:
    """The mark stays on the error: every enclosing layer gives up, however deep."""
    fn = AlwaysFails()
    first, second, third = (retrier(clock, name=name) for name in ("a", "b", "c"))

    async def two() -> None:
        await first.call(fn)

    async def three() -> None:
        await second.call(two)

    with pytest.raises(ConnectionError):
        await third.call(three)
    assert fn.calls == 3


async def test_the_same_retrier_nested_in_itself(clock: FakeClock) -> None:
    """One Retrier decorating two functions, one calling the other: 3 executions, not 9."""
    fn = AlwaysFails()
    shared = retrier(clock)

    @shared
    async def inner() -> None:
        await fn()

    @shared
    async def outer() -> None:
        await inner()

    with pytest.raises(ConnectionError):
        await outer()
    assert fn.calls == 3


async def test_an_inner_call_that_did_not_retry_leaves_the_outer_free(clock: FakeClock) -> None:
    """attempts=1 below, or an error the inner policy does not match: the outer retries it."""
    for inner_fields in ({"attempts": 1}, {"retry_on": [KeyError]}):
        fn = AlwaysFails()
        inner = retrier(clock, **inner_fields)

        async def middle(inner: Retrier = inner, fn: AlwaysFails = fn) -> None:
            await inner.call(fn)

        with pytest.raises(ConnectionError):
            await retrier(clock).call(middle)
        assert fn.calls == 3, inner_fields


async def test_retry_below_opts_out(clock: FakeClock) -> None:
    """RetryPolicy(retry_below=True) retries what the layer below gave up on: 9, as before."""
    fn = AlwaysFails()
    inner = retrier(clock)

    async def middle() -> None:
        await inner.call(fn)

    with pytest.raises(ConnectionError):
        await retrier(clock, retry_below=True).call(middle)
    assert fn.calls == 9


async def test_a_reused_exception_object_stays_retryable(clock: FakeClock) -> None:
    """One exception object raised by every call (a module-level instance): each later call,
    by this retrier or another one, still retries it; only a mark made inside a call counts."""
    shared = ConnectionError("always the same object")
    calls = 0

    async def fails() -> None:
        nonlocal calls
        calls += 1
        raise shared

    for each in (retrier(clock), retrier(clock), retrier(clock, deadline="1h")):
        calls = 0
        with pytest.raises(ConnectionError):
            await each.call(fails)
        assert calls == 3


def test_retry_below_is_validated() -> None:
    """A non-boolean is refused, naming the field, the value and an example."""
    with pytest.raises(ConfigError) as caught:
        RetryPolicy(retry_below="yes")  # type: ignore[arg-type]
    assert caught.value.field == "retry_below"
    assert "'yes'" in str(caught.value)
    assert "retry_below=True" in str(caught.value)
    assert RetryPolicy().replace(retry_below=True).retry_below is True


async def test_retried_below_in_metrics_spans_and_logs(
    clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    """The reason reaches Prometheus, the call span's denied event and the give-up log line."""
    registry = CollectorRegistry()
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    logger = logging.getLogger("tests.layers")
    instruments = (
        PrometheusInstrument(registry=registry),
        OpenTelemetryInstrument(tracer_provider=provider),
        LoggingInstrument(logger=logger),
    )
    fn = AlwaysFails()
    inner = retrier(clock, name="inner")

    async def middle() -> None:
        await inner.call(fn)

    with caplog.at_level(logging.INFO, logger="tests.layers"), pytest.raises(ConnectionError):
        await retrier(clock, name="outer", instruments=instruments).call(middle)
    labels = {"retrymw_policy": "outer", "retrymw_target": "middle"}
    assert (
        registry.get_sample_value(
            "retrymw_retries_denied_total", {**labels, "retrymw_reason": "retried_below"}
        )
        == 1.0
    )
    reasons = [
        (event.attributes or {}).get("retrymw.reason")
        for span in exporter.get_finished_spans()
        for event in span.events
    ]
    assert "retried_below" in reasons
    assert any("retried_below" in record.getMessage() for record in caplog.records)
    provider.shutdown()


# -- HTTP: transports and helpers ---------------------------------------------------------------


def test_retrier_around_a_retrying_sync_client_sends_only_the_transports_attempts(
    clock: FakeClock, server: FlakyServer
) -> None:
    """Goal: the transport makes its default policy's 4 attempts at a 503 and gives up;
    raise_for_status's error carries its response's mark, so the Retrier around it does not
    repeat: 4 requests, not 12."""
    url = server.script(503)
    outer = retrier(clock, retry_on=[httpx.HTTPStatusError])
    with httpx.Client(transport=RetryTransport(clock=clock, budget=None)) as client:

        def fetch() -> None:
            client.get(url).raise_for_status()

        with pytest.raises(httpx.HTTPStatusError):
            outer.call_sync(fetch)
    assert server.served(url) == 4


async def test_retrier_around_a_retrying_async_client_sends_only_the_transports_attempts(
    clock: FakeClock, server: FlakyServer
) -> None:
    """The same through the async transport, the outer Retrier judging the response itself,
    and with connection errors that the transport raises after its own retries."""
    url = server.script(503)
    outer = retrier(clock, retry_on=[{"status": [503]}])
    async with httpx.AsyncClient(transport=AsyncRetryTransport(clock=clock, budget=None)) as client:

        async def fetch() -> httpx.Response:
            return await client.get(url)

        response = await outer.call(fetch)
    assert response.status_code == 503
    assert server.served(url) == 4

    dead = "http://127.0.0.1:9/"  # never reached: the mock refuses every connection
    calls: list[int] = []

    def refuse_and_count(req: httpx.Request) -> httpx.Response:
        calls.append(1)
        raise httpx.ConnectError("refused", request=req)

    inner = AsyncRetryTransport(httpx.MockTransport(refuse_and_count), clock=clock, budget=None)
    async with httpx.AsyncClient(transport=inner) as client:

        async def connect() -> None:
            await client.get(dead)

        with pytest.raises(httpx.ConnectError):
            await retrier(clock, retry_on=["network"]).call(connect)
    assert len(calls) == 4


async def test_retrier_around_the_request_helper(clock: FakeClock, server: FlakyServer) -> None:
    """The client helper is a retrymw call too: a Retrier around it adds no attempts."""
    url = server.script(503)
    helper = retrier(clock, retry_on=[{"status": [503]}])
    async with httpx.AsyncClient() as client:

        async def fetch() -> Any:
            return await request(client, "GET", url, retrier=helper)

        response = await retrier(clock, retry_on=[{"status": [503]}]).call(fetch)
    assert response.status_code == 503
    assert server.served(url) == 3


async def test_a_server_that_said_no_is_final_above(clock: FakeClock, server: FlakyServer) -> None:
    """x-should-retry: false ends the transport's call at once, and the Retrier above too."""
    url = server.script(Step(503, headers={"x-should-retry": "false"}))
    async with httpx.AsyncClient(transport=AsyncRetryTransport(clock=clock, budget=None)) as client:

        async def fetch() -> None:
            (await client.get(url)).raise_for_status()

        with pytest.raises(httpx.HTTPStatusError):
            await retrier(clock, retry_on=[httpx.HTTPStatusError]).call(fetch)
    assert server.served(url) == 1


async def test_the_transports_own_give_up_error_keeps_the_mark(clock: FakeClock) -> None:
    """TransportRetryBudgetExhausted, raised in place of the last error, is final above too."""
    calls: list[int] = []

    def refuse(req: httpx.Request) -> httpx.Response:
        calls.append(1)
        raise httpx.ConnectError("refused", request=req)

    transport = AsyncRetryTransport(
        httpx.MockTransport(refuse),
        policy=RetryPolicy(retry_budget="1.5s", jitter=False),
        clock=clock,
        budget=None,
    )
    async with httpx.AsyncClient(transport=transport) as client:

        async def fetch() -> None:
            await client.get("http://127.0.0.1:9/")

        with pytest.raises(httpx.TransportError) as caught:
            await retrier(clock, retry_on=[httpx.TransportError]).call(fetch)
    assert type(caught.value).__name__ == "TransportRetryBudgetExhausted"
    assert len(calls) == 2


class Hostile:
    """A result whose attributes cannot be read or set."""

    __slots__ = ()

    def __getattr__(self, name: str) -> Any:
        raise RuntimeError(name)


async def test_values_that_take_no_mark_are_left_alone(clock: FakeClock) -> None:
    """A result that takes no attribute stays unmarked, and one that raises on reading is not
    taken for marked: the layer above retries them, as before."""
    returned: list[object] = []

    async def gives(value: object) -> object:
        returned.append(value)
        return value

    for value in (7, Hostile()):
        returned.clear()
        inner = retrier(clock, retry_on=lambda outcome: outcome.result is not None)

        async def middle(value: object = value, inner: Retrier = inner) -> object:
            return await inner.call(gives, value)

        outer = retrier(clock, retry_on=lambda outcome: outcome.result is not None)
        assert await outer.call(middle) is value
        assert len(returned) == 9
