"""Nothing secret leaves the process: credentials and tokens in a failing URL never reach telemetry.

``httpx``'s ``raise_for_status()`` puts the whole URL, userinfo and query included, in the
exception's message; the retry log line, the attempt span's exception event, the notes retrymw
adds and the messages it writes all carry that message. These tests run such a call against a
real server on 127.0.0.1 and search everything retrymw wrote for the password and the token.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from retrymw import AttemptStarted, Retrier, RetryBudgetExhausted, RetryPolicy
from retrymw.instrumentation import Instrument, LoggingInstrument, OpenTelemetryInstrument
from retrymw.testing import FakeClock
from tests.http_server import FlakyServer

pytestmark = pytest.mark.anyio

PASSWORD = "hunter2-pa55"
TOKEN = "tok3n-s3cr3t"


@dataclass
class Seen:
    """Everything retrymw wrote during one test."""

    logs: list[logging.LogRecord]
    exporter: InMemorySpanExporter

    def text(self) -> str:
        """Log lines (with any traceback and extra fields), span attributes and span events."""
        formatter = logging.Formatter()
        parts: list[str] = []
        for record in self.logs:
            parts.append(formatter.format(record))
            parts.extend(str(value) for value in vars(record).values())
        for span in self.exporter.get_finished_spans():
            parts.extend(_span_text(span))
        return "\n".join(parts)


def _span_text(span: ReadableSpan) -> Iterator[str]:
    yield span.name
    yield str(span.status.description)
    yield from (f"{key}={value!s}" for key, value in (span.attributes or {}).items())
    for event in span.events:
        yield event.name
        yield from (f"{key}={value!s}" for key, value in (event.attributes or {}).items())


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def server() -> Iterator[FlakyServer]:
    """A real HTTP server on 127.0.0.1."""
    running = FlakyServer()
    yield running
    running.stop()


@pytest.fixture
def seen() -> Iterator[Seen]:
    """Captures the ``retrymw`` logger and an in-memory span exporter."""
    handler = _Records()
    logger = logging.getLogger("retrymw")
    logger.addHandler(handler)
    old_level = logger.level
    logger.setLevel(logging.DEBUG)
    exporter = InMemorySpanExporter()
    yield Seen(handler.records, exporter)
    logger.removeHandler(handler)
    logger.setLevel(old_level)


def _secret_url(server: FlakyServer) -> tuple[str, str]:
    """A script answering 503, and its URL with a password and a token added."""
    script = server.script(503)
    return script, script.replace("http://", f"http://alice:{PASSWORD}@") + f"?token={TOKEN}&page=2"


def _retrier(seen: Seen, clock: FakeClock, **fields: object) -> tuple[Retrier, TracerProvider]:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(seen.exporter))
    retrier = Retrier(
        RetryPolicy(name="secrets", **fields),  # type: ignore[arg-type]
        instruments=(LoggingInstrument(), OpenTelemetryInstrument(tracer_provider=provider)),
        clock=clock,
        budget=None,
    )
    return retrier, provider


def _assert_nothing_secret(text: str) -> None:
    assert PASSWORD not in text
    assert TOKEN not in text


async def test_raise_for_status_secrets_stay_out_of_logs_spans_and_notes(
    server: FlakyServer, seen: Seen, clock: FakeClock
) -> None:
    """The password and the token appear in no log record, span attribute, span event or note."""
    script, url = _secret_url(server)
    retrier, provider = _retrier(seen, clock)

    async def fetch() -> httpx.Response:
        async with httpx.AsyncClient() as client:
            return (await client.get(url)).raise_for_status()

    with pytest.raises(httpx.HTTPStatusError) as raised:
        await retrier.call(fetch)
    provider.shutdown()
    assert server.served(script) == 3
    text = seen.text()
    _assert_nothing_secret(text)
    _assert_nothing_secret("\n".join(getattr(raised.value, "__notes__", [])))
    # What is not secret stays readable: the log line names the URL, its host and other params.
    retries = [r.getMessage() for r in seen.logs if "retrying in" in r.getMessage()]
    assert len(retries) == 2
    assert all("REDACTED:REDACTED@127.0.0.1" in line for line in retries)
    assert all("token=REDACTED&page=2" in line for line in retries)
    # Retried exceptions are type and message on their attempt spans; the one that ends the
    # call is an event that keeps its stack trace.
    attempts = [
        span
        for span in seen.exporter.get_finished_spans()
        if span.name.startswith("retrymw.attempt")
    ]
    described = [dict(span.attributes or {}) for span in attempts[:2]]
    (event,) = [event for span in attempts for event in span.events if event.name == "exception"]
    described.append(dict(event.attributes or {}))
    for attributes in described:
        assert attributes["exception.type"] == "httpx.HTTPStatusError"
        assert "token=REDACTED&page=2" in str(attributes["exception.message"])
    assert [attributes.get("exception.stacktrace") for attributes in described[:2]] == [None, None]
    assert "fetch" in str(described[2]["exception.stacktrace"])


def test_sync_call_keeps_secrets_out_too(server: FlakyServer, seen: Seen, clock: FakeClock) -> None:
    """The sync driver writes through the same redaction."""
    script, url = _secret_url(server)
    retrier, provider = _retrier(seen, clock)

    def fetch() -> httpx.Response:
        with httpx.Client() as client:
            return client.get(url).raise_for_status()

    with pytest.raises(httpx.HTTPStatusError) as raised:
        retrier.call_sync(fetch)
    provider.shutdown()
    assert server.served(script) == 3
    _assert_nothing_secret(seen.text())
    _assert_nothing_secret("\n".join(getattr(raised.value, "__notes__", [])))
    assert len(seen.exporter.get_finished_spans()) == 4  # call, 3 attempts (they tell the waits)


def test_budget_exhausted_message_is_redacted(
    server: FlakyServer, seen: Seen, clock: FakeClock
) -> None:
    """RetryBudgetExhausted quotes the last error, redacted; its cause stays the user's error."""
    _script, url = _secret_url(server)
    retrier, provider = _retrier(seen, clock, attempts=5, retry_budget=1.5)

    def fetch() -> httpx.Response:
        with httpx.Client() as client:
            return client.get(url).raise_for_status()

    with pytest.raises(RetryBudgetExhausted) as raised:
        retrier.call_sync(fetch)
    provider.shutdown()
    message = str(raised.value)
    assert "Retry budget exhausted" in message
    assert "HTTPStatusError" in message
    _assert_nothing_secret(message)
    _assert_nothing_secret(seen.text())
    assert isinstance(raised.value.__cause__, httpx.HTTPStatusError)


class _Exploding(Instrument):
    """Fails while the engine handles the user's exception (its traceback chains to it)."""

    def attempt_started(self, event: AttemptStarted, /) -> None:
        if event.attempt == 2:
            raise RuntimeError("instrument bug")


def test_a_failing_instrument_logs_a_redacted_traceback(
    server: FlakyServer, seen: Seen, clock: FakeClock
) -> None:
    """The 'instrument disabled' record, traceback included, carries no secret."""
    _script, url = _secret_url(server)
    retrier = Retrier(RetryPolicy(), instruments=(_Exploding(),), clock=clock, budget=None)

    def fetch() -> httpx.Response:
        with httpx.Client() as client:
            return client.get(url).raise_for_status()

    with pytest.raises(httpx.HTTPStatusError):
        retrier.call_sync(fetch)
    (record,) = [r for r in seen.logs if "has been disabled" in r.getMessage()]
    assert "RuntimeError: instrument bug" in record.getMessage()
    _assert_nothing_secret(seen.text())
