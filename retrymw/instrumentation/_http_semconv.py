"""The HTTP semantic conventions' attributes of an attempt, on no telemetry library:
`PrometheusInstrument` labels the response-body metrics (`names.BODY_METRICS`) with them, as
`OpenTelemetryInstrument` attributes its records, so that both export paths give the same series.

The method, port and protocol-version tables are `_otel.support`'s (which needs
opentelemetry-api); tests/adversarial/test_streams.py and tests/instrumentation/test_otel_live.py
check that both paths export the same body series.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .._core.events import AttemptFinished
from . import _names as names

__all__ = ["body_attributes", "qualified_name"]

#: HTTP semconv's known methods; any other is reported as ``_OTHER``.
KNOWN_METHODS = frozenset(
    {"CONNECT", "DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST", "PUT", "QUERY", "TRACE"}
)
DEFAULT_PORTS = {"http": 80, "https": 443}
#: httpx's and httpx2's ``Response.http_version`` → semconv ``network.protocol.version``.
PROTOCOL_VERSIONS = {"HTTP/1.1": "1.1", "HTTP/2": "2", "HTTP/1.0": "1.0", "HTTP/3": "3"}


def qualified_name(error: BaseException) -> str:
    """The exception's class name, qualified by its module unless it is a builtin
    (``httpx.RemoteProtocolError``, ``OSError``): the semconv ``error.type`` of an exception."""
    try:
        kind = type(error)
        module = kind.__module__
        return (
            f"{module}.{kind.__qualname__}"
            if module and module != "builtins"
            else kind.__qualname__
        )
    except Exception:  # a hostile metaclass: the record still goes out
        return "Exception"


def _request_of(response: object) -> Any:
    """The request ``response`` answers, or ``None`` (a response built without one raises
    ``RuntimeError`` in httpx and httpx2)."""
    try:
        return getattr(response, "request", None)
    except RuntimeError:
        return None


def body_attributes(event: AttemptFinished, error_type: Callable[[str], str]) -> dict[str, Any]:
    """The attributes of the response-body metrics for the attempt ``event`` ended: the
    request's method, ``server.address``, ``server.port`` and ``url.scheme``, the status, the
    response's protocol version, and ``error.type`` (the read's exception, qualified and
    capped by ``error_type``, or a 4xx/5xx status), as on ``http.client.request.duration``.

    An attribute the response cannot tell (no request attached) is left out.
    """
    attributes: dict[str, Any] = {}
    response = event.result
    request = _request_of(response)
    url = getattr(request, "url", None)
    if request is not None and url is not None:
        method = request.method
        attributes[names.ATTR_HTTP_METHOD] = method if method in KNOWN_METHODS else "_OTHER"
        attributes[names.ATTR_SERVER_ADDRESS] = url.host
        attributes[names.ATTR_SERVER_PORT] = url.port or DEFAULT_PORTS.get(url.scheme, 0)
        attributes[names.ATTR_URL_SCHEME] = url.scheme
    if event.status is not None:
        attributes[names.ATTR_HTTP_STATUS_CODE] = event.status
    version = getattr(response, "http_version", None) if response is not None else None
    if isinstance(version, str) and version in PROTOCOL_VERSIONS:
        attributes[names.ATTR_NETWORK_PROTOCOL_VERSION] = PROTOCOL_VERSIONS[version]
    if event.exception is not None and event.error_type is not None:
        attributes[names.ATTR_ERROR_TYPE] = error_type(qualified_name(event.exception))
    elif event.status is not None and event.status >= 400:
        attributes[names.ATTR_ERROR_TYPE] = str(event.status)
    return attributes
