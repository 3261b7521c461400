"""What `OpenTelemetryInstrument` writes when an attempt ends: its span, and its HTTP metric."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from opentelemetry.trace import Tracer

from ..._core.events import AttemptFinished
from .. import _names as names
from .support import (
    _ERROR,
    ATTEMPT_SPAN_PREFIX,
    INTERNAL,
    _exception_attributes,
    _protocol_version,
    _record_exception,
    _Scope,
)

__all__ = ["end_attempt_span", "first_attempt_finished", "semconv_attributes"]


def semconv_attributes(
    http: dict[str, Any],
    event: AttemptFinished,
    version: str | None,
    error_type: Callable[[str], str],
) -> dict[str, Any]:
    """``http`` (the request's attributes) completed for ``http.client.request.duration``.

    ``version`` is the response's `_protocol_version`; ``error_type`` caps an exception's class
    name (a bounded label).
    """
    if event.status is not None:
        http[names.ATTR_HTTP_STATUS_CODE] = event.status
    if version is not None:
        http[names.ATTR_NETWORK_PROTOCOL_VERSION] = version
    if event.exception is not None and event.error_type is not None:
        http[names.ATTR_ERROR_TYPE] = error_type(event.error_type)
    elif event.status is not None and event.status >= 400:
        http[names.ATTR_ERROR_TYPE] = str(event.status)
    return http


def end_attempt_span(scope: _Scope, event: AttemptFinished) -> None:
    """Write the attempt's outcome on its (recording) span, which the scope then ends."""
    span = scope.span
    # Collected and set at once: each set_attribute takes the span's lock and cleans.
    attributes: dict[str, Any] = {names.ATTR_ATTEMPT_OUTCOME: event.attempt_outcome}
    error_type: str | None
    if scope.http:
        # HTTP semconv: the status decides (4xx and 5xx are errors for a client), not
        # whether retrymw retries.
        if event.status is not None:
            attributes[names.ATTR_HTTP_STATUS_CODE] = event.status
        if (version := _protocol_version(event.result)) is not None:
            attributes[names.ATTR_NETWORK_PROTOCOL_VERSION] = version
        if event.exception is not None:
            error_type = event.error_type
        elif event.status is not None and event.status >= 400:
            error_type = str(event.status)
        else:
            error_type = None
    else:
        error_type = None if event.attempt_outcome == "success" else event.error_type
    if isinstance(event.exception, Exception):
        if event.attempt_outcome == "retried":
            attributes.update(_exception_attributes(event.exception))
        else:  # the exception that ends the call: an event, with its stack trace
            _record_exception(span, event.exception)
    if error_type is not None:
        attributes[names.ATTR_ERROR_TYPE] = error_type
        span.set_status(_ERROR)
    span.set_attributes(attributes)


def first_attempt_finished(tracer: Tracer, call: _Scope, event: AttemptFinished) -> None:
    """A coroutine's first attempt ended without a span of its own.

    Retried: its attempt span is written now, from the attempt's start, so that every attempt
    of a retried call has one. Not retried: the call made one attempt, and the call span says
    everything (an exception that ends the call is recorded on it in full).
    """
    started, call.first_attempt_at = call.first_attempt_at, None
    if not call.span.is_recording():
        return
    error = event.exception
    if event.attempt_outcome != "retried":
        if isinstance(error, Exception):
            _record_exception(call.span, error)
        return
    attributes: dict[str, Any] = {
        names.ATTR_ATTEMPT: event.attempt,
        names.ATTR_ATTEMPT_OUTCOME: event.attempt_outcome,
    }
    if event.error_type is not None:
        attributes[names.ATTR_ERROR_TYPE] = event.error_type
    if isinstance(error, Exception):
        attributes.update(_exception_attributes(error))
    span = tracer.start_span(
        ATTEMPT_SPAN_PREFIX + event.operation,
        kind=INTERNAL,
        attributes=attributes,
        start_time=started,
    )
    span.set_status(_ERROR)
    span.end()
