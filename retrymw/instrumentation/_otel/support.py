"""What `OpenTelemetryInstrument`'s spans are built on: span scopes, redacted exceptions, waits,
the HTTP semantic conventions' method and port tables, and the providers' watch (its metrics
are built on `_otel.meters`).

Imported by `_otel.instrument` only after it has checked that opentelemetry-api is installed.
"""

from __future__ import annotations

import math
import os
import sys
import time
import traceback
from collections.abc import Callable
from contextvars import ContextVar, Token
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry._logs import Logger, SeverityNumber
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
from ..._core.redact import exception_text, redact_text, redact_url
from .. import _names as names

__all__: list[str] = []  # private helpers of `_otel.instrument`

#: HTTP semconv's known methods; any other is reported as ``_OTHER``.
_KNOWN_METHODS = frozenset(
    {"CONNECT", "DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST", "PUT", "QUERY", "TRACE"}
)
_DEFAULT_PORTS = {"http": 80, "https": 443}
# While nobody listens, the providers are looked at again at most this often (seconds).
IDLE_RECHECK = 1.0
_ERROR = Status(StatusCode.ERROR)
# Span kinds read once: looking an enum member up costs 70 ns on Python 3.11.
INTERNAL, CLIENT = SpanKind.INTERNAL, SpanKind.CLIENT

try:
    # The key OpenTelemetry's HTTP client instrumentations (httpx, httpx2, requests, urllib3,
    # aiohttp) check before making their span and recording their metrics. It lives in the API,
    # under a private name, and the instrumentations import it from there too.
    from opentelemetry.context import _SUPPRESS_HTTP_INSTRUMENTATION_KEY

    SUPPRESS_HTTP_KEY: str | None = _SUPPRESS_HTTP_INSTRUMENTATION_KEY
except ImportError:  # pragma: no cover - moved: the instrumentation below records as well
    SUPPRESS_HTTP_KEY = None

#: The innermost retrymw call scope of this task, whichever `OpenTelemetryInstrument` opened
#: it: a call nested in a coroutine's first attempt finds its parent through it
#: (`_Scope.first_attempt_parent`). One variable for every instrument, as OpenTelemetry's own
#: context is (a key in that context cost a copy of it per call, 5 µs a call measured).
CALL_SCOPE: ContextVar[_Scope | None] = ContextVar("retrymw_otel_call_scope", default=None)


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
_PROTOCOL_VERSIONS = {"HTTP/1.1": "1.1", "HTTP/2": "2", "HTTP/1.0": "1.0", "HTTP/3": "3"}


def _http_request(request: object) -> Any:
    """``request`` if it is an ``httpx.Request`` or an ``httpx2.Request`` (neither is imported
    here: a request of a library that was never imported cannot exist)."""
    if request is None:
        return None
    for library in ("httpx", "httpx2"):
        module = sys.modules.get(library)
        if module is not None and isinstance(request, module.Request):
            return request
    return None


class _ProviderWatch:
    """Whether one signal (traces or metrics) has a real SDK provider, asked cheaply per call.

    A real provider, once seen, is kept (it never turns back into the API's proxy); while only
    the API's no-op or proxy provider is there, the answer is reused for `IDLE_RECHECK` seconds,
    since asking the API costs an environment lookup and a clock read a tenth of that. The
    hooks read ``watch.active or watch()``: once active, no call at all.
    """

    __slots__ = ("_given", "_global", "_idle", "_proxy", "active", "idle_until")

    def __init__(
        self,
        given: Any,
        global_provider: Callable[[], Any],
        idle: tuple[type, ...],
        proxy: type | None = None,
    ) -> None:
        self._given = given  # the provider passed to the instrument, or None for the global one
        self._global = global_provider
        self._idle = idle
        self._proxy = proxy  # a given proxy still resolves to the global provider
        self.active = False
        self.idle_until = -math.inf

    def __call__(self) -> bool:
        if self.active:
            return True
        now = time.monotonic()
        if now < self.idle_until:
            return False
        provider = self._given
        if provider is None or (self._proxy is not None and isinstance(provider, self._proxy)):
            provider = self._global()
        if isinstance(provider, self._idle):
            self.idle_until = now + IDLE_RECHECK
            return False
        self.active = True
        return True


def _http_attributes(request: Any) -> dict[str, Any]:
    """The semantic-convention attributes an HTTP attempt's span and duration point share."""
    url = request.url
    method = request.method
    return {
        names.ATTR_HTTP_METHOD: method if method in _KNOWN_METHODS else "_OTHER",
        names.ATTR_SERVER_ADDRESS: url.host,
        names.ATTR_SERVER_PORT: url.port or _DEFAULT_PORTS.get(url.scheme, 0),
    }


def _client_span(
    request: Any, attempt: int, attributes: dict[str, Any]
) -> tuple[str, dict[str, Any]]:
    """The name and attributes of an HTTP attempt's CLIENT span (``url.full`` redacted), the
    latter completing ``attributes``, the request's `_http_attributes`."""
    method = request.method
    attributes[names.ATTR_URL_FULL] = redact_url(str(request.url))
    attributes[names.ATTR_ATTEMPT] = attempt
    if method not in _KNOWN_METHODS:
        attributes[names.ATTR_HTTP_METHOD_ORIGINAL] = method
    if attempt > 1:
        attributes[names.ATTR_HTTP_RESEND_COUNT] = attempt - 1
    return (method if method in _KNOWN_METHODS else names.SPAN_HTTP_OTHER), attributes


def _protocol_version(response: object) -> str | None:
    """The ``network.protocol.version`` of an HTTP attempt's ``response`` ("1.1", "2", "3").

    ``None`` when the attempt raised (no response) or the version is none of the known ones:
    an inner transport may put anything in ``extensions["http_version"]``, and an attribute
    value must stay from a bounded set.
    """
    version = getattr(response, "http_version", None) if response is not None else None
    return _PROTOCOL_VERSIONS.get(version) if isinstance(version, str) else None


class _Scope(Suspendable):
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
        var: ContextVar[_Scope | None] | None = None,
        http: bool = False,
    ) -> None:
        self.span = span
        self.http = http
        # An HTTP attempt: the semconv attributes its span and its duration share.
        self.http_attributes: dict[str, Any] | None = None
        # A call scope: when its first attempt started (ns), while that attempt has no span.
        self.first_attempt_at: int | None = None
        # A call scope: the scope of its attempt under way, if that attempt has a span.
        self.attempt: _Scope | None = None
        # A coroutine call scope: makes the span of a first attempt that runs without one, from
        # its start, when a call nested in it needs its parent (`first_attempt_parent`); and
        # that span's scope once made, ended with the attempt.
        self.make_first_attempt: Callable[[int], Span] | None = None
        self.early_attempt: _Scope | None = None
        # Where the exception that ends the call goes (span event, log, both).
        self.exceptions: _Exceptions | None = None
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
            self._var_token: Token[_Scope | None] = self._var.set(self)
        if self._nested:
            self._nest_token: Token[_Scope | None] = CALL_SCOPE.set(self)

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
            self.early_attempt = _Scope(self.make_first_attempt(self.first_attempt_at))
        return set_span_in_context(self.early_attempt.span)

    def __exit__(self, exc_type: object, exc: BaseException | None, traceback: object) -> None:
        span = self.span
        # Cancellation (any BaseException that is not an Exception) leaves the status unset, as
        # the semantic conventions ask; an Exception reaching here escaped the engine itself.
        if isinstance(exc, Exception) and span.is_recording():
            _record_exception(span, exc, self.exceptions)
            span.set_attribute(names.ATTR_ERROR_TYPE, qualified_name(exc))
            span.set_status(_ERROR)
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


class _HttpCall(_Scope):
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
        var: ContextVar[_Scope | None],
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


def qualified_name(error: BaseException) -> str:
    """The exception's class name, qualified by its module unless it is a builtin
    (``httpx.ConnectError``, ``OSError``): the semantic conventions' ``exception.type`` and,
    on spans, ``error.type`` ("its canonical class name identifying the type")."""
    try:
        kind = type(error)
        module = kind.__module__
        return (
            f"{module}.{kind.__qualname__}"
            if module and module != "builtins"
            else kind.__qualname__
        )
    except Exception:  # a hostile metaclass: the description still goes out
        return "Exception"


def _exception_attributes(error: BaseException) -> dict[str, Any]:
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


class _Exceptions:
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


def _record_exception(
    span: Span,
    error: BaseException,
    exceptions: _Exceptions | None = None,
    http: dict[str, Any] | None = None,
) -> None:
    """``span.record_exception(error)`` for an exception that ends a call, with its message and
    stack trace redacted; as a log record too or instead (`_Exceptions`).

    The SDK's own version writes ``str(error)`` and the formatted traceback as they are: for
    httpx's status errors that is the URL with its credentials and query, and an exception whose
    ``__str__`` raises would make it raise (and disable this instrument).
    """
    attributes = _exception_attributes(error)
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


def _wait_event(span: Span, wait: RetryScheduled, began: int) -> None:
    """A ``retrymw.backoff`` event on the call ``span`` for a ``wait`` that began at ``began``
    (ns) and that no attempt followed, so that no attempt span tells it."""
    attributes: dict[str, Any] = {
        names.ATTR_ATTEMPT: wait.attempt + 1,
        names.ATTR_ERROR_TYPE: wait.error_type,
    }
    span.add_event(names.EVENT_BACKOFF, _wait_attributes(wait, attributes), began)


def _wait_attributes(event: RetryScheduled, attributes: dict[str, Any]) -> dict[str, Any]:
    """``attributes`` completed with what the wait ``event`` announced: its delay, and the
    server's hint and the header that gave it, if any."""
    attributes[names.ATTR_BACKOFF_DELAY] = event.delay
    if event.retry_after is not None:
        attributes[names.ATTR_RETRY_AFTER] = event.retry_after
        if event.retry_after_header is not None:
            attributes[names.ATTR_RETRY_AFTER_HEADER] = event.retry_after_header
    return attributes
