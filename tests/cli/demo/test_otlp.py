"""``retrymw demo`` with an OTLP endpoint: metrics go there too, pushed by the demo's
`OpenTelemetryInstrument`, flushed at the end, and no credential of the endpoint is printed.

The collector is a small OTLP/HTTP receiver on 127.0.0.1 (stdlib ``http.server``) that keeps
the path and body of every POST, up to a bound; the bodies are decoded with opentelemetry-proto.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)

from retrymw.cli import main
from retrymw.cli.demo._otlp import setup_metrics
from retrymw.instrumentation import _names as names

_MAX_POSTS = 200
_MAX_BODY = 4 * 1024 * 1024


class _Collector(BaseHTTPRequestHandler):
    """Answers every POST with 200 and records its path, Authorization header and body."""

    server: Any

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(min(length, _MAX_BODY))
        with self.server.lock:
            if len(self.server.posts) < _MAX_POSTS:
                self.server.posts.append((self.path, self.headers.get("Authorization"), body))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        """Keep the test output quiet."""


@pytest.fixture
def collector() -> Iterator[Any]:
    """An OTLP/HTTP receiver on 127.0.0.1 (any free port), shut down at teardown."""
    server: Any = ThreadingHTTPServer(("127.0.0.1", 0), _Collector)
    server.daemon_threads = True
    server.posts = []
    server.lock = threading.Lock()
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    yield server
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)


@pytest.fixture
def otel_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """No OTEL_* variable of the machine leaks into the test."""
    for name in list(os.environ):
        if name.startswith("OTEL_"):
            monkeypatch.delenv(name)
    return monkeypatch


def _metric_names(bodies: list[bytes]) -> set[str]:
    found: set[str] = set()
    for body in bodies:
        request = ExportMetricsServiceRequest()
        request.ParseFromString(body)
        for resource in request.resource_metrics:
            for scope in resource.scope_metrics:
                found.update(metric.name for metric in scope.metrics)
    return found


def test_demo_exports_metrics_and_spans_over_otlp(
    collector: Any, otel_env: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """With OTEL_EXPORTER_OTLP_ENDPOINT set, the collector receives the demo's metrics (the
    final push at exit included) beside its spans; the endpoint's password is never printed."""
    port = collector.server_address[1]
    otel_env.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://demo:s3cret@127.0.0.1:{port}")
    code = main(["demo", "--duration", "1s", "--metrics-port", "0", "--rate", "20"])
    out, err = capsys.readouterr()
    assert code == 0, err
    shown = f"http://REDACTED:REDACTED@127.0.0.1:{port}"
    assert f"otlp metrics: exported by OTLP (http/protobuf) to {shown}" in out
    assert "s3cret" not in out + err
    with collector.lock:
        posts = list(collector.posts)
    metrics = [body for path, _, body in posts if path == "/v1/metrics"]
    assert metrics, [path for path, _, _ in posts]
    assert all(metrics)  # non-empty bodies
    assert {names.CALL_DURATION.otel, names.HTTP_CLIENT_REQUEST_DURATION} <= _metric_names(metrics)
    assert any(path == "/v1/traces" and body for path, _, body in posts)
    # The credentials of the endpoint reached the collector as HTTP basic auth, nowhere else.
    assert {auth for _, auth, _ in posts} == {"Basic ZGVtbzpzM2NyZXQ="}


def test_no_endpoint_exports_no_metrics(otel_env: pytest.MonkeyPatch) -> None:
    """Without an OTLP endpoint nothing is set up: the instrument keeps the global provider."""
    otlp = setup_metrics({})
    assert (otlp.provider, otlp.description, otlp.notice, otlp.log_handler) == (
        None,
        None,
        None,
        None,
    )
    otlp.shutdown()


@pytest.mark.parametrize(
    "exporters",
    [pytest.param("none", id="none"), pytest.param("prometheus, console", id="others")],
)
def test_otel_metrics_exporter_without_otlp_exports_none(
    otel_env: pytest.MonkeyPatch, exporters: str
) -> None:
    """OTEL_METRICS_EXPORTER=none (the compose stack: Prometheus scrapes /metrics) or a list
    without ``otlp`` keeps the metrics off OTLP, while the spans still go there."""
    env = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318",
        "OTEL_METRICS_EXPORTER": exporters,
    }
    otlp = setup_metrics(env)
    assert (otlp.provider, otlp.description, otlp.notice) == (None, None, None)
    assert otlp.log_handler is not None  # the span exporter's lines are still redacted
    otlp.shutdown()
    assert otlp.log_handler is None


def test_a_missing_metric_exporter_is_one_notice(otel_env: pytest.MonkeyPatch) -> None:
    """With the endpoint set but no exporter installed for its protocol, one notice says what
    to install and metrics stay on /metrics."""
    otel_env.setattr("retrymw.cli.demo._otlp._otlp_metric_exporter", lambda protocol: None)
    otlp = setup_metrics({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4317"})
    assert otlp.provider is None
    assert otlp.notice is not None
    assert "grpc metric exporter" in otlp.notice
    assert "pip install opentelemetry-exporter-otlp" in otlp.notice
    otlp.shutdown()
    assert otlp.log_handler is None


def test_metrics_protocol_and_endpoint_have_their_own_variables(
    otel_env: pytest.MonkeyPatch,
) -> None:
    """OTEL_EXPORTER_OTLP_METRICS_ENDPOINT and _METRICS_PROTOCOL win over the general ones."""
    chosen: list[str] = []

    def exporter(protocol: str) -> None:
        chosen.append(protocol)

    otel_env.setattr("retrymw.cli.demo._otlp._otlp_metric_exporter", exporter)
    env = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4317",
        "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": "http://127.0.0.1:9/v1/metrics?token=abc",
        "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL": "http/protobuf",
        "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
    }
    otlp = setup_metrics(env)
    otlp.shutdown()
    assert chosen == ["http/protobuf"]


def test_exporter_log_lines_are_redacted(
    otel_env: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """While an OTLP endpoint is configured, an exporter's error quoting the endpoint (query
    token included) is printed redacted; the handler goes away at shutdown."""
    otlp = setup_metrics({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:9"})
    assert otlp.provider is None  # traces only: no metric pipeline, but the logs are covered
    handler = otlp.log_handler
    assert handler is not None
    logger = logging.getLogger("opentelemetry.exporter.otlp.proto.http")
    error = ConnectionError("Max retries exceeded with url: /v1/traces?token=abc")
    logger.error("Failed to export to http://u:pw@127.0.0.1:9/v1/traces?token=abc", exc_info=error)
    otlp.shutdown()
    err = capsys.readouterr().err
    assert "opentelemetry.exporter.otlp.proto.http: Failed to export to http://REDACTED" in err
    assert "url: /v1/traces?token=REDACTED" in err  # the traceback too
    assert "abc" not in err
    assert "pw@" not in err
    assert handler not in logging.getLogger("opentelemetry").handlers
