"""Prometheus metrics and OpenTelemetry spans for every call, attempt and backoff.

Run: python examples/telemetry_wiring.py   (needs prometheus-client and opentelemetry-sdk)
"""

from __future__ import annotations

import asyncio

import httpx
from _upstream import upstream_url
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client import CollectorRegistry, generate_latest

from retrymw import RetryPolicy
from retrymw.httpx import AsyncRetryTransport
from retrymw.instrumentation import OpenTelemetryInstrument, PrometheusInstrument

registry = CollectorRegistry()  # in an app: the default registry, served on /metrics
spans = InMemorySpanExporter()  # in an app: an OTLP exporter
tracer_provider = TracerProvider()
tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
instruments = (PrometheusInstrument(registry=registry), OpenTelemetryInstrument(tracer_provider))


async def main() -> None:
    transport = AsyncRetryTransport(
        policy=RetryPolicy(initial_delay="50ms"), instruments=instruments
    )
    async with httpx.AsyncClient(transport=transport, timeout=5.0) as client:
        await client.get(upstream_url())
    for line in generate_latest(registry).decode().splitlines():
        counted = "_count{" in line or "_total{" in line  # histograms' _count count calls
        if line.startswith("retrymw_") and counted and not line.endswith(" 0.0"):
            print(line)
    for span in spans.get_finished_spans():  # children end first, the call span last
        print(f"span {span.name!r} {dict(span.attributes or {})}")


if __name__ == "__main__":
    asyncio.run(main())
