"""`LoggingInstrument`: one WARNING line per scheduled retry, one per give-up and transition.

Also the rule every log line of retrymw follows: a message never names retrymw itself, the
logger's name does (``%(name)s: %(message)s`` reads ``retrymw: ...`` once); `NamedLastResort`
keeps that true when logging is not configured at all.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

from .._core.events import BreakerStateChanged, RetryDenied, RetryScheduled
from .._core.instruments import Instrument
from .._core.redact import redact_text, safe_str

__all__ = ["LoggingInstrument", "NamedLastResort"]

_MAX_MESSAGE = 200


class NamedLastResort(logging.Handler):
    """Python's last resort for the ``retrymw`` logger's records, with the logger's name.

    When no handler is configured anywhere, Python writes a WARNING record's bare message to
    stderr (`logging.lastResort`). retrymw's messages leave their origin to the logger's name,
    so on that path they would not say where they came from; this handler, on the ``retrymw``
    logger, writes what the last resort would, as ``retrymw: <message>``. It writes nothing
    once any other handler would see the record (``basicConfig``, ``dictConfig``, pytest's log
    capture), nor when the last resort is turned off (``logging.lastResort = None``).
    """

    def __init__(self) -> None:
        super().__init__()
        self.setFormatter(logging.Formatter("%(name)s: %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        """Write ``record`` to stderr if the last resort would have, else nothing."""
        last_resort = logging.lastResort
        if last_resort is None or record.levelno < last_resort.level:
            return
        if self._others_handle(logging.getLogger(record.name)):
            return
        try:
            sys.stderr.write(self.format(record) + "\n")
            sys.stderr.flush()
        except Exception:  # as the last resort does: logging never raises into the caller
            self.handleError(record)

    def _others_handle(self, logger: logging.Logger) -> bool:
        """Whether a handler other than this one is on ``logger`` or the loggers it
        propagates to (as `logging.Logger.callHandlers` walks them)."""
        current: logging.Logger | None = logger
        while current is not None:
            if any(handler is not self for handler in current.handlers):
                return True
            if not current.propagate:
                return False
            current = current.parent
        return False


def _install_last_resort() -> None:
    """Put one `NamedLastResort` on the ``retrymw`` logger (once, even if reimported)."""
    logger = logging.getLogger("retrymw")
    if not any(handler.get_name() == "retrymw.last_resort" for handler in logger.handlers):
        handler = NamedLastResort()
        handler.set_name("retrymw.last_resort")
        logger.addHandler(handler)


_install_last_resort()


class LoggingInstrument(Instrument):
    """Logs retries, give-ups and breaker transitions through the standard `logging` module.

    Messages do not name retrymw: the logger's name does, so ``%(name)s: %(message)s`` reads
    ``retrymw: GET api.example.com attempt 1/3 failed with status 503; retrying in 1s``, and so
    does stderr when logging is not configured at all (`NamedLastResort`).

    Args:
        logger: where to log; ``logging.getLogger("retrymw")`` by default.

    Every record carries ``extra`` keys prefixed ``retrymw_`` (policy, target, attempt, delay or
    reason) for structured log handlers and, when an OpenTelemetry span is current, ``trace_id``
    and ``span_id`` (hex, as in the OTel log data model), so a log line leads to its trace.

    .. versionadded:: 0.1
    """

    __slots__ = ("logger",)

    def __init__(self, logger: logging.Logger | None = None) -> None:
        self.logger = logger if logger is not None else logging.getLogger("retrymw")

    def retry_scheduled(self, event: RetryScheduled, /) -> None:
        """Log ``<operation> attempt k/n failed with <error>; retrying in <delay>``."""
        if not self.logger.isEnabledFor(logging.WARNING):
            return
        hint = (
            ""
            if event.retry_after is None
            else f" (server asked for {_seconds(event.retry_after)})"
        )
        self.logger.warning(
            "%s attempt %d/%d failed with %s; retrying in %s%s",
            _subject(event.operation, event.target),
            event.attempt,
            event.max_attempts,
            _describe(event.error_type, event.exception),
            _seconds(event.delay),
            hint,
            extra={
                "retrymw_policy": event.policy,
                "retrymw_target": event.target,
                "retrymw_attempt": event.attempt,
                "retrymw_delay": event.delay,
                **_trace_ids(),
            },
        )

    def retry_denied(self, event: RetryDenied, /) -> None:
        """Log ``<operation> giving up after attempt k/n (<reason>)``."""
        self.logger.warning(
            "%s giving up after attempt %d/%d with %s: %s",
            _subject(event.operation, event.target),
            event.attempt,
            event.max_attempts,
            event.error_type,
            event.reason,
            extra={
                "retrymw_policy": event.policy,
                "retrymw_target": event.target,
                "retrymw_attempt": event.attempt,
                "retrymw_reason": event.reason,
                **_trace_ids(),
            },
        )

    def breaker_state_changed(self, event: BreakerStateChanged, /) -> None:
        """Log a circuit transition."""
        self.logger.warning(
            "circuit %s changed from %s to %s",
            event.circuit,
            event.previous_state,
            event.state,
            extra={
                "retrymw_circuit": event.circuit,
                "retrymw_circuit_state": event.state,
                **_trace_ids(),
            },
        )

    def __repr__(self) -> str:
        return f"<LoggingInstrument logger={self.logger.name!r}>"


def _describe(error_type: str, exception: BaseException | None) -> str:
    if exception is None:
        return f"status {error_type}" if error_type.isdigit() else error_type
    # One line per retry: multi-line messages (httpx's status errors) keep their first line.
    # The message is redacted (httpx's carries the URL, credentials and query included) and
    # computed safely: an exception whose __str__ raises must not disable this instrument.
    # splitlines() also ends the line at "\r" and the other line breaks: one exception cannot
    # forge a second log line.
    lines = safe_str(exception).strip().splitlines()
    text = redact_text(lines[0]) if lines else ""
    if len(text) > _MAX_MESSAGE:
        text = text[: _MAX_MESSAGE - 1] + "…"
    return f"{error_type}: {text}" if text else error_type


def _seconds(value: float) -> str:
    return f"{value * 1000:.3g}ms" if 0 < value < 1 else f"{value:.3g}s"


def _subject(operation: str, target: str) -> str:
    # Coroutines use their name as both; HTTP calls read "GET api.example.com".
    return operation if operation == target else f"{operation} {target}"


def _trace_ids() -> dict[str, Any]:
    """``trace_id``/``span_id`` of the current OpenTelemetry span, if there is one.

    Only a process that imported opentelemetry's trace API can have a current span, so the API
    is looked up where it already is: importing it here would make ``import retrymw`` load an
    optional extra.
    """
    api = sys.modules.get("opentelemetry.trace")
    if api is None:
        return {}
    context = api.get_current_span().get_span_context()
    if not context.is_valid:
        return {}
    return {
        "trace_id": format(context.trace_id, "032x"),
        "span_id": format(context.span_id, "016x"),
    }
