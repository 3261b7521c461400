"""`LoggingInstrument` links its records to the current trace."""

from __future__ import annotations

import logging
import sys

import pytest
from opentelemetry.sdk.trace import TracerProvider

from retrymw import BreakerStateChanged
from retrymw._core.events import RetryDenied, RetryScheduled
from retrymw.instrumentation import LoggingInstrument


def test_records_carry_the_current_trace_ids(caplog: pytest.LogCaptureFixture) -> None:
    instrument = LoggingInstrument()
    tracer = TracerProvider().get_tracer("tests")
    caplog.set_level(logging.WARNING, logger="retrymw")
    with tracer.start_as_current_span("request") as span:
        instrument.retry_scheduled(RetryScheduled("p", "t", "op", 1, 3, 0.5, "503"))
        instrument.retry_denied(RetryDenied("p", "t", "op", 2, 3, "max_attempts", "503"))
        instrument.breaker_state_changed(BreakerStateChanged("db", "closed", "open", 1.0))
    context = span.get_span_context()
    records = [record for record in caplog.records if record.name == "retrymw"]
    assert len(records) == 3
    for record in records:
        assert record.__dict__["trace_id"] == format(context.trace_id, "032x")
        assert record.__dict__["span_id"] == format(context.span_id, "016x")


def test_without_a_span_records_have_no_trace_ids(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="retrymw")
    LoggingInstrument().retry_scheduled(RetryScheduled("p", "t", "op", 1, 3, 0.5, "503"))
    (record,) = [record for record in caplog.records if record.name == "retrymw"]
    assert "trace_id" not in record.__dict__
    assert record.__dict__["retrymw_attempt"] == 1


def test_trace_ids_are_read_only_where_opentelemetry_is_imported(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without opentelemetry's trace API in the process, records carry no trace ids and logging
    does not import it (``import retrymw`` must not load an optional extra)."""
    monkeypatch.delitem(sys.modules, "opentelemetry.trace")
    caplog.set_level(logging.WARNING, logger="retrymw")
    LoggingInstrument().retry_scheduled(RetryScheduled("p", "t", "op", 1, 3, 0.5, "503"))
    (record,) = [record for record in caplog.records if record.name == "retrymw"]
    assert "trace_id" not in record.__dict__
    assert "opentelemetry.trace" not in sys.modules
