"""What `OpenTelemetryInstrument` writes when an attempt ends: its span, and its HTTP metric."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from opentelemetry.trace import Tracer

from ..._core.events import AttemptFinished
from .. import _names as names
from .exceptions import exception_attributes, qualified_name, record_exception
from .http import protocol_version
from .scopes import ATTEMPT_SPAN_PREFIX, ERROR_STATUS, INTERNAL, Scope

__all__ = ["end_attempt_span", "first_attempt_finished", "semconv_attributes"]


def semconv_attributes(
    http: dict[str, Any],
    event: AttemptFinished,
    version: str | None,
    error_type: Callable[[str], str],
) -> dict[str, Any]:
    """``http`` (the request's attributes) completed for ``http.client.request.duration``.

    ``version`` is the response's `protocol_version`; ``error_type`` caps an exception's
    (qualified) class name: a bounded label.
    """
    if event.status is not None:
        http[names.ATTR_HTTP_STATUS_CODE] = event.status
    if version is not None:
        http[names.ATTR_NETWORK_PROTOCOL_VERSION] = version
    if event.exception is not None and event.error_type is not None:
        http[names.ATTR_ERROR_TYPE] = error_type(qualified_name(event.exception))
    elif event.status is not None and event.status >= 400:
        http[names.ATTR_ERROR_TYPE] = str(event.status)
    return http


def end_attempt_span(scope: Scope, event: AttemptFinished) -> None:
    """Write the attempt's outcome on its (recording) span, which the scope then ends."""
    span = scope.span
    # Collected and set at once: each set_attribute takes the span's lock and cleans.
    attributes: dict[str, Any] = {names.ATTR_ATTEMPT_OUTCOME: event.attempt_outcome}
    error_type: str | None
    if scope.http:
        # HTTP semconv: the status decides (4xx and 5xx are errors for a client), not
        # whether retrymw retries; a body cut or stalled after a 200 is an error too.
        if event.status is not None:
            attributes[names.ATTR_HTTP_STATUS_CODE] = event.status
        if (version := protocol_version(event.result)) is not None:
            attributes[names.ATTR_NETWORK_PROTOCOL_VERSION] = version
        if event.exception is not None:
            error_type = qualified_name(event.exception)
        elif event.status is not None and event.status >= 400:
            error_type = str(event.status)
        else:
            error_type = None
        body = event.body
        if body is not None:
            attributes[names.ATTR_RESPONSE_BODY_STATE] = body.state
            attributes[names.ATTR_HTTP_RESPONSE_BODY_SIZE] = body.size
            if body.time_to_first_byte is not None:
                attributes[names.ATTR_RESPONSE_TIME_TO_FIRST_BYTE] = body.time_to_first_byte
    elif event.attempt_outcome == "success" or event.error_type is None:
        error_type = None
    else:
        error_type = (
            event.error_type if event.exception is None else qualified_name(event.exception)
        )
    if isinstance(event.exception, Exception):
        if event.attempt_outcome == "retried":
            attributes.update(exception_attributes(event.exception))
        else:  # the exception that ends the call: an event (or log), with its stack trace
            http = scope.http_attributes if scope.http else None
            if http is not None and error_type is not None:
                http = {**http, names.ATTR_ERROR_TYPE: error_type}
            record_exception(span, event.exception, scope.exceptions, http)
    if error_type is not None:
        attributes[names.ATTR_ERROR_TYPE] = error_type
        span.set_status(ERROR_STATUS)
    span.set_attributes(attributes)


def first_attempt_finished(tracer: Tracer, call: Scope, event: AttemptFinished) -> None:
    """A coroutine's first attempt ended without a span of its own (or with one made when a
    call nested in it started, `Scope.first_attempt_parent`).

    Retried: its attempt span is written now, from the attempt's start, so that every attempt
    of a retried call has one. Not retried: the call made one attempt, and the call span says
    everything (an exception that ends the call is recorded on it in full).
    """
    started, call.first_attempt_at = call.first_attempt_at, None
    early, call.early_attempt = call.early_attempt, None
    if not call.span.is_recording():
        if early is not None:
            early.span.end()
        return
    error = event.exception
    if event.attempt_outcome != "retried":
        if isinstance(error, Exception):
            record_exception(call.span, error, call.exceptions)
        if early is not None:
            end_first_attempt(early, event.attempt_outcome, event.error_type, error)
        return
    attributes: dict[str, Any] = {names.ATTR_ATTEMPT_OUTCOME: event.attempt_outcome}
    if isinstance(error, Exception):
        attributes.update(exception_attributes(error))
    if early is not None:
        end_first_attempt(early, event.attempt_outcome, event.error_type, error, attributes)
        return
    attributes[names.ATTR_ATTEMPT] = event.attempt
    if event.error_type is not None:
        attributes[names.ATTR_ERROR_TYPE] = (
            event.error_type if error is None else qualified_name(error)
        )
    span = tracer.start_span(
        ATTEMPT_SPAN_PREFIX + event.operation,
        kind=INTERNAL,
        attributes=attributes,
        start_time=started,
    )
    span.set_status(ERROR_STATUS)
    span.end()


def end_first_attempt(
    early: Scope,
    outcome: str,
    error_type: str | None,
    error: BaseException | None,
    attributes: dict[str, Any] | None = None,
) -> None:
    """End the span made for a coroutine's first attempt while it ran (a call nested in it
    needed its parent) with the attempt's ``outcome``."""
    span = early.span
    if span.is_recording():
        written = {names.ATTR_ATTEMPT_OUTCOME: outcome, **(attributes or {})}
        if outcome != "success" and error_type is not None:
            written[names.ATTR_ERROR_TYPE] = error_type if error is None else qualified_name(error)
            span.set_status(ERROR_STATUS)
        span.set_attributes(written)
    span.end()
