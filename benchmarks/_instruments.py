"""Instrument sets shared by the telemetry and transport groups, each with fresh backends.

Nothing here touches the global OpenTelemetry providers: the SDK providers are passed to the
instrument, so "OTel API without SDK" really runs on the API's default (proxy, no-op) providers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from ._harness import Unavailable

__all__ = ["Kind", "Telemetry", "otel_sdk", "telemetry"]

Kind = Literal["none", "prometheus", "otel-api", "otel-sdk", "both"]


@dataclass(slots=True)
class Telemetry:
    """Instruments to hand to retrymw, and how to empty their in-memory sinks between samples."""

    instruments: tuple[Any, ...]
    reset: Callable[[], None] | None = None


@dataclass(slots=True)
class OtelSdk:
    """SDK providers with in-memory span exporter and metric reader."""

    tracer_provider: Any
    meter_provider: Any
    exporter: Any
    reader: Any

    def reset(self) -> None:
        """Drop the finished spans (bounded memory) and collect the metrics once."""
        self.exporter.clear()
        self.reader.get_metrics_data()


def otel_sdk() -> OtelSdk:
    """Fresh OpenTelemetry SDK providers that keep everything in memory."""
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader])
    return OtelSdk(tracer_provider, meter_provider, exporter, reader)


def _instrument_classes() -> tuple[Any, Any]:
    try:
        from retrymw.instrumentation import (  # type: ignore[attr-defined,unused-ignore]
            OpenTelemetryInstrument,
            PrometheusInstrument,
        )
    except ImportError as error:
        raise Unavailable(f"retrymw instrumentation not importable ({error})") from None
    return PrometheusInstrument, OpenTelemetryInstrument


def telemetry(kind: Kind) -> Telemetry:
    """Instruments of ``kind``: Prometheus gets a fresh `CollectorRegistry`."""
    if kind == "none":
        return Telemetry(())
    prometheus_cls, otel_cls = _instrument_classes()
    if kind == "prometheus":
        from prometheus_client import CollectorRegistry

        return Telemetry((prometheus_cls(registry=CollectorRegistry()),))
    if kind == "otel-api":
        return Telemetry((otel_cls(),))
    sdk = otel_sdk()
    otel = otel_cls(tracer_provider=sdk.tracer_provider, meter_provider=sdk.meter_provider)
    if kind == "otel-sdk":
        return Telemetry((otel,), sdk.reset)
    from prometheus_client import CollectorRegistry

    return Telemetry((prometheus_cls(registry=CollectorRegistry()), otel), sdk.reset)
