"""`OpenTelemetryInstrument` and what it needs: the instrument, its HTTP helpers and live gauges.

Importing this package needs opentelemetry-api (the ``otel`` extra); the instrumentation
namespace imports it only when `OpenTelemetryInstrument` is first asked for.
"""

from .instrument import OpenTelemetryInstrument as OpenTelemetryInstrument

__all__ = ["OpenTelemetryInstrument"]
