"""The demo's metrics over OTLP, beside its Prometheus ``/metrics``, and the exporters' log lines.

With ``OTEL_EXPORTER_OTLP_ENDPOINT`` (or ``OTEL_EXPORTER_OTLP_METRICS_ENDPOINT``) set, and
``OTEL_METRICS_EXPORTER`` unset or naming ``otlp``, the demo's `OpenTelemetryInstrument` records
into a meter provider whose `PeriodicExportingMetricReader` pushes to the collector every few
seconds, and once more when the demo ends. While any OTLP endpoint is configured, the
OpenTelemetry exporters' own log lines (a collector that cannot be reached) are printed
redacted: their errors quote the endpoint.

Importing this module needs the OpenTelemetry SDK (``opentelemetry-sdk``).
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from dataclasses import dataclass
from typing import Any

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource

from ..._core.redact import redact_text, redact_url
from ._trace import otlp_protocol

__all__ = ["OtlpMetrics", "setup_metrics"]

_OTLP_HINT = "pip install opentelemetry-exporter-otlp"
# The SDK's default push interval is a minute, longer than a default demo: push every 5 s
# unless OTEL_METRIC_EXPORT_INTERVAL says otherwise.
_INTERVAL_MS = 5_000
_ENDPOINTS = (
    "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
)


class _RedactingFormatter(logging.Formatter):
    """Formats a record (message and traceback) and redacts URLs and sensitive values in it."""

    def format(self, record: logging.LogRecord) -> str:
        return redact_text(super().format(record))


@dataclass(slots=True)
class OtlpMetrics:
    """Where the demo's OpenTelemetry metrics go, and the exporters' redacted log lines.

    Attributes:
        provider: the SDK meter provider to give `OpenTelemetryInstrument`, or ``None`` when
            metrics are not exported over OTLP.
        description: one line for the banner (where the metrics go), or ``None``.
        notice: a problem to tell the user about (a missing exporter), or ``None``.
        log_handler: the handler printing the OpenTelemetry loggers' lines redacted, while
            an OTLP endpoint is configured.
    """

    provider: MeterProvider | None
    description: str | None
    notice: str | None
    log_handler: logging.Handler | None

    def shutdown(self, timeout: float = 3.0) -> None:
        """Push what was recorded since the last export and stop, within ``timeout`` seconds.

        The redacting log handler is removed only once the exporters are done: an export still
        retrying against an unreachable collector may log until the process exits.
        """
        done = True
        if self.provider is not None:
            worker = threading.Thread(target=self.provider.shutdown, daemon=True)
            worker.start()
            worker.join(timeout)
            done = not worker.is_alive()
        if done and self.log_handler is not None:
            logging.getLogger("opentelemetry").removeHandler(self.log_handler)
            self.log_handler = None


def setup_metrics(environ: dict[str, str] | None = None) -> OtlpMetrics:
    """Build the demo's OTLP metric pipeline when an OTLP endpoint is configured.

    Args:
        environ: the environment (``os.environ`` by default), for the ``OTEL_*`` variables.
            The exporter itself reads its endpoint, headers and timeout from ``os.environ``.

    Returns:
        The meter provider (``None`` when not configured or the exporter is missing) and how
        to describe it.
    """
    env = dict(os.environ if environ is None else environ)
    handler = None
    if any(env.get(name) for name in _ENDPOINTS):
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(_RedactingFormatter("%(name)s: %(message)s"))
        logging.getLogger("opentelemetry").addHandler(handler)
    endpoint = env.get("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT") or env.get(
        "OTEL_EXPORTER_OTLP_ENDPOINT"
    )
    exporters = env.get("OTEL_METRICS_EXPORTER") or "otlp"  # the SDK's variable and default
    if not endpoint or "otlp" not in {name.strip() for name in exporters.lower().split(",")}:
        return OtlpMetrics(None, None, None, handler)
    protocol = otlp_protocol(env, endpoint, "METRICS")
    exporter = _otlp_metric_exporter(protocol)
    if exporter is None:
        notice = (
            f"an OTLP endpoint is set but the {protocol} metric exporter of "
            f"opentelemetry-exporter-otlp is not installed: {_OTLP_HINT}; metrics are only "
            "served on /metrics"
        )
        return OtlpMetrics(None, None, notice, handler)
    interval = None if env.get("OTEL_METRIC_EXPORT_INTERVAL") else _INTERVAL_MS
    service = env.get("OTEL_SERVICE_NAME") or "retrymw-demo"
    provider = MeterProvider(
        metric_readers=[PeriodicExportingMetricReader(exporter, export_interval_millis=interval)],
        resource=Resource.create({"service.name": service}),
    )
    # The endpoint may carry credentials (user:password@, ?token=): never print them.
    shown = redact_url(endpoint)
    return OtlpMetrics(provider, f"exported by OTLP ({protocol}) to {shown}", None, handler)


def _otlp_metric_exporter(protocol: str) -> Any:
    """The OTLP metric exporter for ``protocol`` (configured from the environment), if installed."""
    try:
        if protocol == "grpc":
            from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import (  # type: ignore[import-not-found, unused-ignore]
                OTLPMetricExporter,
            )
        else:
            from opentelemetry.exporter.otlp.proto.http.metric_exporter import (  # type: ignore[import-not-found, unused-ignore]
                OTLPMetricExporter,
            )
    except ImportError:
        return None
    return OTLPMetricExporter()
