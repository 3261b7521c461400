"""The spans a call and its attempts are: `Scope` (made current while its block runs, ended
when the engine leaves it), `HttpCallScope` (a call that may make one attempt), and the
backoff waits written onto a call span.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextvars import ContextVar, Token
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry.context import Context
from opentelemetry.trace import (
    INVALID_SPAN,
    Link,
    Span,
    SpanContext,
    SpanKind,
    Status,
    StatusCode,
    set_span_in_context,
)

from ..._core.events import RetryScheduled
from ..._core.instruments import Suspendable
from .. import _names as names
from .exceptions import ExceptionSignal, qualified_name, record_exception

__all__ = [
    "ATTEMPT_SPAN_PREFIX",
    "CALL_SCOPE",
    "CALL_SPAN_PREFIX",
    "CLIENT",
    "ERROR_STATUS",
    "HttpCallScope",
    "INTERNAL",
    "Scope",
    "wait_attributes",
    "wait_event",
]

ERROR_STATUS = Status(StatusCode.ERROR)


# Span kinds read once: looking an enum member up costs 70 ns on Python 3.11.
INTERNAL, CLIENT = SpanKind.INTERNAL, SpanKind.CLIENT


#: The innermost retrymw call scope of this task, whichever `OpenTelemetryInstrument` opened
#: it: a call nested in a coroutine's first attempt finds its parent through it
#: (`Scope.first_attempt_parent`). One variable for every instrument, as OpenTelemetry's own
#: context is (a key in that context cost a copy of it per call, 5 µs a call measured).
CALL_SCOPE: ContextVar[Scope | None] = ContextVar("retrymw_otel_call_scope", default=None)


def _name_prefix(template: str) -> str:
    """What comes before ``{operation}``, which ends each span name template: a span's name is
    this plus its operation (a concatenation costs a fifth of ``str.format``)."""
    prefix = template.removesuffix("{operation}")
    if "{" in prefix:  # pragma: no cover - a template that does not end with the operation
        raise AssertionError(f"span name template {template!r} must end with {{operation}}")
    return prefix


CALL_SPAN_PREFIX = _name_prefix(names.SPAN_CALL)
ATTEMPT_SPAN_PREFIX = _name_prefix(names.SPAN_ATTEMPT)
#: httpx's and httpx2's ``Response.http_version`` → semconv ``network.protocol.version``.


class Scope(Suspendable):
    """Ends a span when the engine leaves its block (a call or an attempt).

    With a ``context`` the span is also made current for the block, and with a ``var`` the scope
    is this instrument's current call (or attempt) while the block runs; a call scope holds its
    attempt's. The engine may suspend it while the body of the response a call returns is read
    (`Suspendable`): the span stays open, nothing stays current.
    """

    __slots__ = (
        "_context",
        "_nest_token",
        "_nested",
        "_token",
        "_var",
        "_var_token",
        "attempt",
        "early_attempt",
        "exceptions",
        "first_attempt_at",
        "http",
        "http_attributes",
        "make_first_attempt",
        "pending_wait",
        "span",
    )

    def __init__(
        self,
        span: Span,
        context: Context | None = None,
        var: ContextVar[Scope | None] | None = None,
        http: bool = False,
    ) -> None:
        self.span = span
        self.http = http
        # An HTTP attempt: the semconv attributes its span and its duration share.
        self.http_attributes: dict[str, Any] | None = None
        # A call scope: when its first attempt started (ns), while that attempt has no span.
        self.first_attempt_at: int | None = None
        # A call scope: the scope of its attempt under way, if that attempt has a span.
        self.attempt: Scope | None = None
        # A coroutine call scope: makes the span of a first attempt that runs without one, from
        # its start, when a call nested in it needs its parent (`first_attempt_parent`); and
        # that span's scope once made, ended with the attempt.
        self.make_first_attempt: Callable[[int], Span] | None = None
        self.early_attempt: Scope | None = None
        # Where the exception that ends the call goes (span event, log, both).
        self.exceptions: ExceptionSignal | None = None
        # A call scope: the wait announced last and when it began (ns), until the next
        # attempt's span tells it.
        self.pending_wait: tuple[RetryScheduled, int] | None = None
        self._context = context
        self._var = var
        self._nested = False

    def nest(self) -> None:
        """Make this (call) scope the one calls started inside it find (`CALL_SCOPE`)."""
        self._nested = True

    def __enter__(self) -> None:
        if self._context is not None:
            self._token = otel_context.attach(self._context)
        if self._var is not None:
            self._var_token: Token[Scope | None] = self._var.set(self)
        if self._nested:
            self._nest_token: Token[Scope | None] = CALL_SCOPE.set(self)

    def suspend(self) -> None:
        """Stop being current (the caller's code runs next); the span stays open."""
        if self._nested:
            CALL_SCOPE.reset(self._nest_token)
        if self._var is not None:
            self._var.reset(self._var_token)
        if self._context is not None:
            otel_context.detach(self._token)

    resume = __enter__  # current again, in whatever task reports the end, until `__exit__`

    def first_attempt_parent(self) -> Context | None:
        """The parent context for a call that starts during this call's first attempt, while
        that attempt runs without a span of its own: the attempt's span, made now from the
        attempt's start. ``None`` when the attempt has its own span (it is current already)."""
        if self.first_attempt_at is None or self.make_first_attempt is None:
            return None
        if self.early_attempt is None:
            self.early_attempt = Scope(self.make_first_attempt(self.first_attempt_at))
        return set_span_in_context(self.early_attempt.span)

    def __exit__(self, exc_type: object, exc: BaseException | None, traceback: object) -> None:
        span = self.span
        # Cancellation (any BaseException that is not an Exception) leaves the status unset, as
        # the semantic conventions ask; an Exception reaching here escaped the engine itself.
        if isinstance(exc, Exception) and span.is_recording():
            record_exception(span, exc, self.exceptions)
            span.set_attribute(names.ATTR_ERROR_TYPE, qualified_name(exc))
            span.set_status(ERROR_STATUS)
        early, self.early_attempt = self.early_attempt, None
        if early is not None:  # the first attempt ended the call without a report
            early.span.end()
        span.end()
        if self._nested:
            CALL_SCOPE.reset(self._nest_token)
        if self._var is not None:
            self._var.reset(self._var_token)
        if self._context is not None:
            otel_context.detach(self._token)


class HttpCallScope(Scope):
    """The scope of an HTTP call that can make only one attempt (an SDK above it is retrying,
    or the policy allows one), whose INTERNAL call span is made only when needed.

    Such a call is its CLIENT span, which says everything a call span would. The call span is
    made (`span_now`) when the call has more to say: a denied retry, a breaker transition, or
    no attempt at all. It starts at the call's start, under the context the call started in,
    with a link to the attempt's CLIENT span (already ended, so not its child). Until then
    `span` is the invalid span, which records nothing. (A call that may retry opens its call
    span before its first attempt instead: a span's parent is fixed when it starts.)
    """

    __slots__ = ("_make", "first_attempt", "parent", "started_ns")

    def __init__(
        self,
        make: Callable[[Context, int, list[Link]], Span],
        var: ContextVar[Scope | None],
        parent: Context | None = None,
    ) -> None:
        super().__init__(INVALID_SPAN, None, var)
        self._make = make
        self.parent = otel_context.get_current() if parent is None else parent
        self.started_ns = time.time_ns()
        self.first_attempt: SpanContext | None = None

    def span_now(self) -> Span:
        """The call span, made now if it was not yet."""
        if self.span is INVALID_SPAN:
            links = [] if self.first_attempt is None else [Link(self.first_attempt)]
            self.span = self._make(self.parent, self.started_ns, links)
        return self.span

    def attempt_parent(self) -> Context | None:
        """The context an attempt's CLIENT span starts in: the call span's, once it exists."""
        if self.span is INVALID_SPAN:
            return None  # the current one: the context the call runs in
        return set_span_in_context(self.span, self.parent)


def wait_event(span: Span, wait: RetryScheduled, began: int) -> None:
    """A ``retrymw.backoff`` event on the call ``span`` for a ``wait`` that began at ``began``
    (ns) and that no attempt followed, so that no attempt span tells it."""
    attributes: dict[str, Any] = {
        names.ATTR_ATTEMPT: wait.attempt + 1,
        names.ATTR_ERROR_TYPE: wait.error_type,
    }
    span.add_event(names.EVENT_BACKOFF, wait_attributes(wait, attributes), began)


def wait_attributes(event: RetryScheduled, attributes: dict[str, Any]) -> dict[str, Any]:
    """``attributes`` completed with what the wait ``event`` announced: its delay, and the
    server's hint and the header that gave it, if any."""
    attributes[names.ATTR_BACKOFF_DELAY] = event.delay
    if event.retry_after is not None:
        attributes[names.ATTR_RETRY_AFTER] = event.retry_after
        if event.retry_after_header is not None:
            attributes[names.ATTR_RETRY_AFTER_HEADER] = event.retry_after_header
    return attributes
