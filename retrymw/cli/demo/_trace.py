"""The demo's spans: a one-line summary per call on the console, or OTLP export.

Importing this module needs the OpenTelemetry SDK (``opentelemetry-sdk``); the demo runs
without traces when it is missing.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider

from ..._core.redact import redact_url
from ...instrumentation import _names as names
from .._common import human_duration

__all__ = ["CallTrace", "SummaryProcessor", "Tracing", "otlp_protocol", "setup_tracing"]

_OTLP_HINT = "pip install opentelemetry-exporter-otlp"
#: How many recent spans a `SummaryProcessor` keeps for the call spans that link them.
_RECENT = 256


@dataclass(frozen=True, slots=True)
class CallTrace:
    """One finished call span with its attempt children, ready to print.

    Attributes:
        trace_id: the trace id, 32 hex digits.
        operation: the call's operation (the HTTP method for the transport).
        outcome: the call's ``retrymw.outcome``.
        attempts: the call's ``retrymw.attempt.count``.
        duration: the call span's duration in seconds.
        steps: attempts, waits and denials in time order, as short text.
    """

    trace_id: str
    operation: str
    outcome: str
    attempts: int
    duration: float
    steps: tuple[str, ...]

    def render(self) -> str:
        """One line: id, verdict, attempts, duration, then the steps."""
        mark = "✓" if self.outcome == "success" else "✗"
        verdict = "" if self.outcome == "success" else f" {self.outcome}"
        count = f"{self.attempts} attempt{'s' * (self.attempts != 1)}"
        head = f"trace {self.trace_id[:8]}  {self.operation} {mark}{verdict} · {count} · "
        return head + f"{human_duration(self.duration)}  " + " → ".join(self.steps)


class SummaryProcessor(SpanProcessor):
    """Collects each call span's attempts and hands a `CallTrace` to ``sink`` when it ends.

    Children end before their parent, so they wait in a buffer keyed by the parent's span id.
    A retried HTTP call's first attempt is not its call span's child but linked from it (the
    call span is made once that attempt is retried): the latest `_RECENT` spans that are not
    call spans are kept by their own id for that.
    """

    def __init__(self, sink: Callable[[CallTrace], None]) -> None:
        self._sink = sink
        self._children: dict[int, list[ReadableSpan]] = {}
        self._recent: OrderedDict[int, ReadableSpan] = OrderedDict()
        self._lock = threading.Lock()

    def on_end(self, span: ReadableSpan) -> None:
        """Buffer a child span, or summarise a finished call span."""
        context = span.context
        if context is None:
            return
        attributes = span.attributes or {}
        if names.ATTR_POLICY in attributes:  # only call spans carry the policy
            with self._lock:
                children = self._children.pop(context.span_id, [])
                linked = [self._recent.pop(link.context.span_id, None) for link in span.links]
            attempts = [attempt for attempt in linked if attempt is not None]
            self._sink(_summarise(span, attempts + children))
            return
        with self._lock:
            if span.parent is not None:
                self._children.setdefault(span.parent.span_id, []).append(span)
            self._recent[context.span_id] = span
            if len(self._recent) > _RECENT:
                self._recent.popitem(last=False)

    def shutdown(self) -> None:
        """Forget buffered spans."""
        with self._lock:
            self._children.clear()
            self._recent.clear()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Nothing is buffered for export: always flushed."""
        return True


def _seconds(span: ReadableSpan) -> float:
    if span.start_time is None or span.end_time is None:
        return 0.0
    return (span.end_time - span.start_time) / 1e9


def _wait(values: Mapping[str, object]) -> str:
    """A wait's step, from the attributes that tell it: the next attempt span's, or those of a
    ``retrymw.backoff`` event when no attempt followed."""
    delay = float(str(values.get(names.ATTR_BACKOFF_DELAY, 0.0)))
    hint = " (Retry-After)" if names.ATTR_RETRY_AFTER in values else ""
    return f"wait {human_duration(delay)}{hint}"


def _summarise(call: ReadableSpan, children: list[ReadableSpan]) -> CallTrace:
    attributes = call.attributes or {}
    timed: list[tuple[int, str]] = []
    for child in children:
        values = child.attributes or {}
        start = child.start_time or 0
        if names.ATTR_BACKOFF_DELAY in values:  # the wait before this attempt, which ends there
            timed.append((start, _wait(values)))
        result = values.get(names.ATTR_HTTP_STATUS_CODE) or values.get(names.ATTR_ERROR_TYPE)
        label = "ok" if result is None else str(result)
        timed.append((start, f"{label} {human_duration(_seconds(child))}"))
    if not children and attributes.get(names.ATTR_ATTEMPT_COUNT) == 1:
        # A coroutine call that was not retried has no attempt span: the call was the attempt.
        result = None if attributes.get(names.ATTR_OUTCOME) == "success" else "error"
        label = "ok" if result is None else str(attributes.get(names.ATTR_ERROR_TYPE, result))
        timed.append((call.start_time or 0, f"{label} {human_duration(_seconds(call))}"))
    for event in call.events:
        if event.name == names.EVENT_BACKOFF:  # a wait that no attempt followed
            timed.append((event.timestamp, _wait(event.attributes or {})))
        elif event.name == names.EVENT_RETRY_DENIED:
            reason = (event.attributes or {}).get(names.ATTR_REASON, "?")
            timed.append((event.timestamp, f"retry denied: {reason}"))
    timed.sort(key=lambda item: item[0])  # stable: a wait stays before its attempt
    if not timed and attributes.get(names.ATTR_OUTCOME) == "circuit_open":
        timed.append((0, "rejected by the open circuit"))
    operation = call.name.removeprefix(names.SPAN_CALL.format(operation=""))
    context = call.context
    return CallTrace(
        trace_id=format(context.trace_id if context is not None else 0, "032x"),
        operation=operation,
        outcome=str(attributes.get(names.ATTR_OUTCOME, "unknown")),
        attempts=int(str(attributes.get(names.ATTR_ATTEMPT_COUNT, 0))),
        duration=_seconds(call),
        steps=tuple(step for _, step in timed),
    )


@dataclass(slots=True)
class Tracing:
    """The demo's tracer provider and how its spans leave the process.

    Attributes:
        provider: the SDK tracer provider to give `OpenTelemetryInstrument`.
        description: one line for the banner (where the spans go).
        notice: a problem to tell the user about (a missing exporter), or ``None``.
        console: whether spans are summarised on the console.
    """

    provider: TracerProvider
    description: str
    notice: str | None
    console: bool

    def shutdown(self, timeout: float = 3.0) -> None:
        """Flush and stop, waiting at most ``timeout`` seconds for an unreachable collector."""
        worker = threading.Thread(target=self.provider.shutdown, daemon=True)
        worker.start()
        worker.join(timeout)


def setup_tracing(
    sink: Callable[[CallTrace], None], environ: dict[str, str] | None = None
) -> Tracing:
    """Build the demo's tracer provider: OTLP when configured and installed, else the console.

    Args:
        sink: receives each call's `CallTrace` in console mode.
        environ: the environment (``os.environ`` by default), for the ``OTEL_*`` variables.

    Returns:
        The provider and how to describe it.
    """
    env = dict(os.environ if environ is None else environ)
    service = env.get("OTEL_SERVICE_NAME") or "retrymw-demo"
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    endpoint = env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or env.get(
        "OTEL_EXPORTER_OTLP_ENDPOINT"
    )
    notice = None
    if endpoint:
        protocol = otlp_protocol(env, endpoint)
        exporter = _otlp_exporter(protocol)
        if exporter is not None:
            from opentelemetry.sdk.trace.export import BatchSpanProcessor

            provider.add_span_processor(BatchSpanProcessor(exporter))
            # The endpoint may carry credentials (user:password@, ?token=): never print them.
            shown = redact_url(endpoint)
            return Tracing(provider, f"exported by OTLP ({protocol}) to {shown}", None, False)
        notice = (
            f"OTEL_EXPORTER_OTLP_ENDPOINT is set but opentelemetry-exporter-otlp is not "
            f"installed: {_OTLP_HINT}; printing traces here instead"
        )
    provider.add_span_processor(SummaryProcessor(sink))
    return Tracing(provider, "summarised below", notice, True)


def otlp_protocol(env: dict[str, str], endpoint: str, signal: str = "TRACES") -> str:
    """The OTLP protocol of ``signal`` (TRACES, METRICS): from the environment, else guessed
    from the port (4317 is gRPC)."""
    chosen = env.get(f"OTEL_EXPORTER_OTLP_{signal}_PROTOCOL") or env.get(
        "OTEL_EXPORTER_OTLP_PROTOCOL"
    )
    if chosen:
        return chosen.strip().lower()
    try:
        port = urlsplit(endpoint).port
    except ValueError:
        port = None
    return "grpc" if port == 4317 else "http/protobuf"


def _otlp_exporter(protocol: str) -> Any:
    """The OTLP span exporter for ``protocol`` (configured from the environment), if installed."""
    try:
        if protocol == "grpc":
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (  # type: ignore[import-not-found, unused-ignore]
                OTLPSpanExporter,
            )
        else:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import (  # type: ignore[import-not-found, unused-ignore]
                OTLPSpanExporter,
            )
    except ImportError:
        return None
    return OTLPSpanExporter()
