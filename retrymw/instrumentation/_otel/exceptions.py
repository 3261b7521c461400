"""Exceptions on spans and logs, redacted: ``exception.type`` and ``.message`` on a retried
attempt's span, and the exception that ends a call as a span event, a log record or both.
"""

from __future__ import annotations

import os
import traceback
from collections.abc import Callable
from typing import Any

from opentelemetry._logs import Logger, SeverityNumber
from opentelemetry.trace import (
    Span,
    set_span_in_context,
)

from ..._core.redact import exception_text, redact_text
from .. import _names as names
from .._http_semconv import qualified_name

__all__ = [
    "EXCEPTION_SIGNAL_OPT_IN",
    "ExceptionSignal",
    "exception_attributes",
    "qualified_name",
    "record_exception",
]


def exception_attributes(error: BaseException) -> dict[str, Any]:
    """The semantic conventions' ``exception.type`` and (redacted) ``exception.message``.

    A retried exception is written as these attributes of its attempt's span (the call went
    on: an event, and a formatted traceback above all, cost more than the attempt span).
    """
    return {
        names.ATTR_EXCEPTION_TYPE: qualified_name(error),
        names.ATTR_EXCEPTION_MESSAGE: exception_text(error),
    }


#: ``OTEL_SEMCONV_EXCEPTION_SIGNAL_OPT_IN``, read when an instrument is made: ``logs`` records
#: the exception that ends a call as a log record (event) only, ``logs/dup`` as both a span
#: event and a log record; anything else (unset) as a span event, as before.
EXCEPTION_SIGNAL_OPT_IN = "OTEL_SEMCONV_EXCEPTION_SIGNAL_OPT_IN"


class ExceptionSignal:
    """Where the exception that ends a call goes: the ``exception`` span event, a WARN log
    record (``http.client.request.exception`` for HTTP, ``retrymw.call.exception`` otherwise),
    or both, as ``OTEL_SEMCONV_EXCEPTION_SIGNAL_OPT_IN`` says (`EXCEPTION_SIGNAL_OPT_IN`)."""

    __slots__ = ("events", "logger")

    def __init__(self, logger: Callable[[], Logger], opt_in: str | None = None) -> None:
        if opt_in is None:
            opt_in = os.environ.get(EXCEPTION_SIGNAL_OPT_IN, "")
        chosen = {part.strip().lower() for part in opt_in.split(",")}
        logs = "logs" in chosen or "logs/dup" in chosen
        self.events = not logs or "logs/dup" in chosen
        self.logger = logger() if logs else None

    def record(self, span: Span, attributes: dict[str, Any], http: dict[str, Any] | None) -> None:
        """Record the exception described by ``attributes`` (type, message, stack trace) for
        the call whose last span is ``span``; ``http``: that HTTP attempt's semconv attributes."""
        if self.events:
            span.add_event(names.EVENT_EXCEPTION, attributes)
        if self.logger is not None:
            record = dict(attributes)
            if http is not None:
                record.update(http)
            self.logger.emit(
                event_name=names.EVENT_HTTP_CLIENT_REQUEST_EXCEPTION
                if http is not None
                else names.EVENT_CALL_EXCEPTION,
                severity_number=SeverityNumber.WARN,
                severity_text="WARN",
                attributes=record,
                context=set_span_in_context(span),
            )


def record_exception(
    span: Span,
    error: BaseException,
    exceptions: ExceptionSignal | None = None,
    http: dict[str, Any] | None = None,
) -> None:
    """``span.record_exception(error)`` for an exception that ends a call, with its message and
    stack trace redacted; as a log record too or instead (`ExceptionSignal`).

    The SDK's own version writes ``str(error)`` and the formatted traceback as they are: for
    httpx's status errors that is the URL with its credentials and query, and an exception whose
    ``__str__`` raises would make it raise (and disable this instrument).
    """
    attributes = exception_attributes(error)
    try:
        # The traceback module formats a failing __str__ as "<exception str() failed>".
        text = "".join(traceback.format_exception(error))
    except Exception:  # pragma: no cover - defensive: the message and type still go out
        text = ""
    attributes[names.ATTR_EXCEPTION_STACKTRACE] = redact_text(text)
    if exceptions is None:
        span.add_event(names.EVENT_EXCEPTION, attributes)
    else:
        exceptions.record(span, attributes, http)
