"""Telemetry and matching survive hostile exceptions: the user's outcome is never replaced.

A hostile exception's ``__str__`` and ``__repr__`` raise. Before, the first one disabled the
logging and OpenTelemetry instruments of its Retrier for good, and a pattern matcher or a retry
budget replaced the user's exception with the ``__str__`` error.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from retrymw import CallFinished, ConfigError, Retrier, RetryBudgetExhausted, RetryPolicy
from retrymw._core.errors import add_note
from retrymw._core.matchers import status_of
from retrymw.instrumentation import LoggingInstrument, OpenTelemetryInstrument
from retrymw.testing import FakeClock, RecordingInstrument

pytestmark = pytest.mark.anyio


class Hostile(Exception):
    """``str()`` and ``repr()`` of it raise."""

    def __str__(self) -> str:
        raise RuntimeError("__str__ exploded")

    def __repr__(self) -> str:
        raise RuntimeError("__repr__ exploded")


class Script:
    """Raises the given exceptions in order, then returns "ok"; counts executions."""

    def __init__(self, *errors: Exception) -> None:
        self.errors = list(errors)
        self.calls = 0

    def __call__(self) -> str:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return "ok"


def make(clock: FakeClock, *instruments: Any, **fields: Any) -> Retrier:
    return Retrier(RetryPolicy(**fields), clock=clock, instruments=instruments, budget=None)


@pytest.fixture
def exporter() -> Iterator[tuple[InMemorySpanExporter, TracerProvider]]:
    """An SDK tracer provider exporting to memory."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield exporter, provider
    provider.shutdown()


def test_hostile_exception_keeps_logging_and_tracing_alive(
    clock: FakeClock,
    caplog: pytest.LogCaptureFixture,
    exporter: tuple[InMemorySpanExporter, TracerProvider],
) -> None:
    """A hostile exception is logged and traced by its type name; nothing gets disabled."""
    spans, provider = exporter
    retrier = make(clock, LoggingInstrument(), OpenTelemetryInstrument(tracer_provider=provider))
    with caplog.at_level(logging.WARNING, logger="retrymw"):
        assert retrier.call_sync(Script(Hostile())) == "ok"
        assert retrier.call_sync(Script(ConnectionError("later"))) == "ok"
    messages = [record.getMessage() for record in caplog.records]
    assert not [m for m in messages if "has been disabled" in m]
    assert any("failed with Hostile: <Hostile>; retrying in" in m for m in messages)
    assert any("failed with ConnectionError: later; retrying in" in m for m in messages)
    described = [
        dict(span.attributes or {})
        for span in spans.get_finished_spans()
        if "exception.type" in (span.attributes or {})
    ]
    assert [attributes["exception.message"] for attributes in described] == ["<Hostile>", "later"]
    # Retried exceptions are type and message on their attempt span: no stack trace to format,
    # no event (issue 18).
    assert str(described[0]["exception.type"]).endswith("Hostile")
    assert all("exception.stacktrace" not in attributes for attributes in described)
    assert [span.events for span in spans.get_finished_spans()] == [()] * 6
    assert len(spans.get_finished_spans()) == 2 * 3  # per call: call, 2 attempts


async def test_pattern_matcher_does_not_match_what_it_cannot_read(clock: FakeClock) -> None:
    """A pattern matcher sees no message in a hostile exception: no match, the error is kept."""
    retrier = make(clock, retry_on=[{"pattern": "."}])
    script = Script(Hostile())
    with pytest.raises(Hostile):
        retrier.call_sync(script)
    assert script.calls == 1

    async def hostile() -> None:
        raise Hostile()

    with pytest.raises(Hostile):
        await retrier.call(hostile)


def test_retry_budget_message_survives_a_hostile_exception(clock: FakeClock) -> None:
    """RetryBudgetExhausted names the hostile exception by type; its cause is the user's error."""
    retrier = make(clock, attempts=5, retry_budget=1.5)
    with pytest.raises(RetryBudgetExhausted) as raised:
        retrier.call_sync(Script(Hostile(), Hostile(), Hostile()))
    assert "Retry budget exhausted" in str(raised.value)
    assert "last error: <Hostile>" in str(raised.value)
    assert isinstance(raised.value.__cause__, Hostile)


class Sealed(Exception):
    """Refuses new attributes, so no PEP 678 note can be attached."""

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(name)


def test_an_exception_that_refuses_notes_is_still_raised(clock: FakeClock) -> None:
    """A note that cannot be attached is skipped; the user's exception is raised unchanged."""
    retrier = make(clock, retry_on=[Sealed])
    script = Script(Sealed(), Sealed(), Sealed())
    with pytest.raises(Sealed) as raised:
        retrier.call_sync(script)
    assert script.calls == 3
    assert not hasattr(raised.value, "__notes__")
    add_note(raised.value, "ignored")  # never raises either


def test_foreign_notes_that_are_not_strings_are_kept(clock: FakeClock) -> None:
    """Notes retrymw did not write, even non-strings, are left alone; retrymw's note is added."""
    error = ConnectionError("down")
    error.__notes__ = [Hostile()]  # type: ignore[attr-defined]
    retrier = make(clock, attempts=2)
    with pytest.raises(ConnectionError) as raised:
        retrier.call_sync(Script(error, error))
    notes = getattr(raised.value, "__notes__", [])
    assert isinstance(notes[0], Hostile)
    assert notes[1].startswith("retrymw: gave up after attempt 2 of 2")


class StatusExplodes(Exception):
    """Its ``status_code`` property raises (a lazy field, a broken proxy)."""

    @property
    def status_code(self) -> int:
        raise RuntimeError("status exploded")


def test_a_raising_status_property_means_no_status(
    clock: FakeClock, recorder: RecordingInstrument
) -> None:
    """status_of() never raises: the status matcher does not match and the error is kept."""
    assert status_of(StatusExplodes()) is None
    retrier = make(clock, recorder, retry_on=["5xx"])
    with pytest.raises(StatusExplodes):
        retrier.call_sync(Script(StatusExplodes()))
    (finished,) = recorder.of_type(CallFinished)
    assert finished.outcome == "failure"


class HostileValue:
    def __repr__(self) -> str:
        raise RuntimeError("repr exploded")


def test_config_error_shows_values_safely() -> None:
    """ConfigError never reprs an unbounded, secret or hostile value as it is."""
    assert "got <HostileValue>," in str(ConfigError("f", HostileValue(), "bad", "1"))
    huge = ConfigError("f", list(range(10**6)), "too long", "[1]")
    assert len(str(huge)) < 600
    secret = ConfigError("endpoint", "https://u:hunter2@otel.test/v1?token=t0k", "bad", "x")
    assert "hunter2" not in str(secret)
    assert "t0k" not in str(secret)


class Unnamed:
    """A callable whose attribute lookups raise."""

    def __getattr__(self, name: str) -> Any:
        raise RuntimeError(f"no {name}")

    def __call__(self) -> str:
        return "ok"


def test_a_callable_whose_attributes_raise_still_gets_a_label(
    clock: FakeClock, recorder: RecordingInstrument
) -> None:
    """The operation label falls back to the type name; the call's result is unaffected."""
    assert make(clock, recorder).call_sync(Unnamed()) == "ok"
    (finished,) = recorder.of_type(CallFinished)
    assert finished.operation == "Unnamed"


def test_a_message_cannot_forge_a_second_log_line(
    clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    """Only the first line of a message is logged, whatever line break ends it."""
    forged = ConnectionError("reset\rretrymw: everything is fine\x0bnothing to see")
    with caplog.at_level(logging.WARNING, logger="retrymw"):
        make(clock, LoggingInstrument()).call_sync(Script(forged))
    (line,) = [r.getMessage() for r in caplog.records if "retrying in" in r.getMessage()]
    assert "failed with ConnectionError: reset; retrying in" in line
    assert "everything is fine" not in line


class Faceless(type):
    """A metaclass whose classes have no readable name."""

    def __getattribute__(cls, name: str) -> Any:
        if name in ("__qualname__", "__module__"):
            raise RuntimeError("no name")
        return super().__getattribute__(name)


class Nameless(Exception, metaclass=Faceless):
    def __str__(self) -> str:
        raise RuntimeError("no message")


def test_even_a_nameless_exception_is_described(
    exporter: tuple[InMemorySpanExporter, TracerProvider],
) -> None:
    """safe_str and the exception event fall back further when the type name itself raises."""
    spans, provider = exporter
    span = provider.get_tracer("test").start_span("s")
    from retrymw._core.redact import safe_str
    from retrymw.instrumentation._otel.exceptions import record_exception

    assert safe_str(Nameless()) == "<object>"
    record_exception(span, Nameless())
    span.end()
    (event,) = spans.get_finished_spans()[0].events
    assert dict(event.attributes or {})["exception.type"] == "Exception"
    assert dict(event.attributes or {})["exception.message"] == "<object>"


def test_a_long_message_is_cut_after_redaction(
    clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    """The log line keeps 200 characters of the message, and the cut never exposes a secret."""
    error = ConnectionError("x" * 170 + " https://alice:hunter2hunter2@db.test/?token=abcdefghij")
    with caplog.at_level(logging.WARNING, logger="retrymw"):
        make(clock, LoggingInstrument()).call_sync(Script(error))
    (line,) = [r.getMessage() for r in caplog.records if "retrying in" in r.getMessage()]
    assert "…; retrying in" in line
    assert "hunter2" not in line
    assert "abcdefghij" not in line
