"""`RetryLayerWSGIMiddleware`: the WSGI server companion (Flask, Django, any WSGI app)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from .._core.errors import ConfigError
from .._engine.layers import serving
from ._inbound import ATTEMPT_HEADER, SHOULD_RETRY_HEADER, InboundRecorder, is_final_status

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

__all__ = ["RetryLayerWSGIMiddleware"]

logger = logging.getLogger("retrymw")

Environ = dict[str, Any]
StartResponse = Callable[..., Any]
WSGIApp = Callable[[Environ, StartResponse], Iterable[bytes]]
RouteReader = Callable[[Environ], "str | None"]


def werkzeug_route(environ: Environ) -> str | None:
    """The route template of a Flask (werkzeug) request: ``request.url_rule.rule``."""
    rule = getattr(environ.get("werkzeug.request"), "url_rule", None)
    template = getattr(rule, "rule", None)
    return template if isinstance(template, str) else None


class RetryLayerWSGIMiddleware:
    """WSGI twin of `RetryLayerMiddleware`: same metric, context and ``x-should-retry``.

    Each request starts afresh for the transports' SDK retry-count checks, even on a worker
    thread that served another one before: a count a handler relays is never taken for the
    SDK retrying a call an earlier request made.

    A handler that raises after a downstream retrymw call gave up for good is answered here
    with a 500 and ``x-should-retry: false`` (the error is logged on the ``retrymw`` logger);
    any other error goes on to the server. Frameworks that turn errors into 500 responses
    themselves (Flask, Django) get the header on that response.

    Args:
        app: the WSGI application (for Flask, ``app.wsgi_app``).
        service: the service's name, a bounded Prometheus label.
        attempt_header: the header carrying the caller's attempt number.
        registry: the ``prometheus_client`` registry; its default one when ``None``.
        metrics: ``False`` to record no metric.
        route: reads a request's route template from its environ once it has been served;
            Flask's (werkzeug's ``url_rule``) by default. For Django, for instance, a
            middleware can put ``request.resolver_match.route`` into the environ.

    Raises:
        ConfigError: an invalid argument, naming it.

    .. versionadded:: 0.1
    """

    def __init__(
        self,
        app: WSGIApp,
        *,
        service: str,
        attempt_header: str = ATTEMPT_HEADER,
        registry: CollectorRegistry | None = None,
        metrics: bool = True,
        route: RouteReader = werkzeug_route,
    ) -> None:
        if not callable(route):
            raise ConfigError("route", route, "must be a callable or omitted", "werkzeug_route")
        self.app = app
        self._recorder = InboundRecorder(service, attempt_header, registry, metrics)
        self._key = "HTTP_" + self._recorder.attempt_header.upper().replace("-", "_")
        self._route = route

    def __call__(self, environ: Environ, start_response: StartResponse) -> Iterable[bytes]:
        inbound = self._recorder.open(environ.get(self._key))
        started = False
        route: str | None = None

        def start_marked(status: str, headers: list[tuple[str, str]], *rest: Any) -> Any:
            nonlocal started, route
            started = True
            # Read now: Flask drops its request from the environ once the app returns.
            route = self._read_route(environ)
            code = status[:3]
            if inbound.final and code.isdigit() and is_final_status(int(code)):
                kept = [(k, v) for k, v in headers if k.lower() != SHOULD_RETRY_HEADER]
                headers = [*kept, (SHOULD_RETRY_HEADER, "false")]
            return start_response(status, headers, *rest)

        try:
            with serving(inbound):
                return self.app(environ, start_marked)
        except Exception:
            if started or not inbound.final:
                raise
            logger.exception("the handler failed after a downstream call gave up")
            body = b"Internal Server Error"
            start_marked(
                "500 Internal Server Error",
                [("Content-Type", "text/plain; charset=utf-8"), ("Content-Length", str(len(body)))],
            )
            return [body]
        finally:
            self._recorder.record(inbound, route or self._read_route(environ))

    def _read_route(self, environ: Environ) -> str | None:
        try:
            return self._route(environ)
        except Exception:  # a route reader that fails never changes the response
            return None
