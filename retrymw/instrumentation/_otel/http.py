"""The HTTP semantic conventions on `OpenTelemetryInstrument`'s CLIENT spans: a request's
attributes (method, address, port, redacted URL), the span itself, the response's protocol
version, and the key that keeps OpenTelemetry's own HTTP instrumentations quiet below retrymw.
"""

from __future__ import annotations

import sys
from typing import Any

from ..._core.redact import redact_url
from .. import _names as names

__all__ = [
    "SUPPRESS_HTTP_KEY",
    "client_span",
    "http_attributes",
    "http_request",
    "protocol_version",
]

#: HTTP semconv's known methods; any other is reported as ``_OTHER``.
_KNOWN_METHODS = frozenset(
    {"CONNECT", "DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST", "PUT", "QUERY", "TRACE"}
)
_DEFAULT_PORTS = {"http": 80, "https": 443}


try:
    # The key OpenTelemetry's HTTP client instrumentations (httpx, httpx2, requests, urllib3,
    # aiohttp) check before making their span and recording their metrics. It lives in the API,
    # under a private name, and the instrumentations import it from there too.
    from opentelemetry.context import _SUPPRESS_HTTP_INSTRUMENTATION_KEY

    SUPPRESS_HTTP_KEY: str | None = _SUPPRESS_HTTP_INSTRUMENTATION_KEY
except ImportError:  # pragma: no cover - moved: the instrumentation below records as well
    SUPPRESS_HTTP_KEY = None


_PROTOCOL_VERSIONS = {"HTTP/1.1": "1.1", "HTTP/2": "2", "HTTP/1.0": "1.0", "HTTP/3": "3"}


def http_request(request: object) -> Any:
    """``request`` if it is an ``httpx.Request`` or an ``httpx2.Request`` (neither is imported
    here: a request of a library that was never imported cannot exist)."""
    if request is None:
        return None
    for library in ("httpx", "httpx2"):
        module = sys.modules.get(library)
        if module is not None and isinstance(request, module.Request):
            return request
    return None


def http_attributes(request: Any) -> dict[str, Any]:
    """The semantic-convention attributes an HTTP attempt's span and duration point share."""
    url = request.url
    method = request.method
    return {
        names.ATTR_HTTP_METHOD: method if method in _KNOWN_METHODS else "_OTHER",
        names.ATTR_SERVER_ADDRESS: url.host,
        names.ATTR_SERVER_PORT: url.port or _DEFAULT_PORTS.get(url.scheme, 0),
    }


def client_span(
    request: Any, attempt: int, attributes: dict[str, Any]
) -> tuple[str, dict[str, Any]]:
    """The name and attributes of an HTTP attempt's CLIENT span (``url.full`` redacted), the
    latter completing ``attributes``, the request's `http_attributes`."""
    method = request.method
    attributes[names.ATTR_URL_FULL] = redact_url(str(request.url))
    attributes[names.ATTR_ATTEMPT] = attempt
    if method not in _KNOWN_METHODS:
        attributes[names.ATTR_HTTP_METHOD_ORIGINAL] = method
    if attempt > 1:
        attributes[names.ATTR_HTTP_RESEND_COUNT] = attempt - 1
    return (method if method in _KNOWN_METHODS else names.SPAN_HTTP_OTHER), attributes


def protocol_version(response: object) -> str | None:
    """The ``network.protocol.version`` of an HTTP attempt's ``response`` ("1.1", "2", "3").

    ``None`` when the attempt raised (no response) or the version is none of the known ones:
    an inner transport may put anything in ``extensions["http_version"]``, and an attribute
    value must stay from a bounded set.
    """
    version = getattr(response, "http_version", None) if response is not None else None
    return _PROTOCOL_VERSIONS.get(version) if isinstance(version, str) else None
