"""`RetryLayerMiddleware`: the ASGI server companion (Starlette, FastAPI, any ASGI app)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import TYPE_CHECKING, Any

from .._engine.layers import serving
from ._inbound import ATTEMPT_HEADER, SHOULD_RETRY_HEADER, InboundRecorder, is_final_status

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

__all__ = ["RetryLayerMiddleware"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

_SHOULD_RETRY = SHOULD_RETRY_HEADER.encode()
_FALSE = b"false"


def _route(scope: Scope) -> str | None:
    # Starlette and FastAPI put the matched route in the scope; its path is the template.
    path = getattr(scope.get("route"), "path", None)
    return path if isinstance(path, str) else None


def _say_no(headers: Any) -> list[tuple[bytes, bytes]]:
    kept = [(name, value) for name, value in headers or () if name.lower() != _SHOULD_RETRY]
    return [*kept, (_SHOULD_RETRY, _FALSE)]


class RetryLayerMiddleware:
    """ASGI middleware that makes a service one layer of retries, not one more.

    For every HTTP request it:

    - reads the caller's attempt header (``x-retrymw-attempt``: what retrymw's transports send
      with ``attempt_header=``) into ``retrymw_inbound_requests_total``, by route template
      (Starlette/FastAPI) and attempt kind (``first``, ``retry``, ``unknown``);
    - serves the request with its context known to every retrymw call made meanwhile
      (`current_request`): that context is also where the transports tell the SDK's own
      retry counts from relayed ones, so every request served starts afresh, and a caller's
      ``x-stainless-retry-count`` that a handler forwards is never taken for the SDK retrying;
    - answers with ``x-should-retry: false`` when the response is a 5xx or a 429 and a retrymw
      call made while serving gave up for good (after retrying, or because the server below
      or a layer below said not to retry): the caller's retrymw transport then does not retry
      (reason ``server_said_no``), nor does any retrymw call above it.

    A handler that raises after such a give-up gets a 500 with the header (the error is then
    re-raised for the server to log). Use it around the whole app (``app =
    RetryLayerMiddleware(app, service="orders")``) or with ``app.add_middleware``.

    Args:
        app: the ASGI application.
        service: the service's name, a bounded Prometheus label.
        attempt_header: the header carrying the caller's attempt number.
        registry: the ``prometheus_client`` registry; its default one when ``None``.
        metrics: ``False`` to record no metric.

    Raises:
        ConfigError: an invalid argument, naming it.

    .. versionadded:: 0.1
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        service: str,
        attempt_header: str = ATTEMPT_HEADER,
        registry: CollectorRegistry | None = None,
        metrics: bool = True,
    ) -> None:
        self.app = app
        self._recorder = InboundRecorder(service, attempt_header, registry, metrics)
        self._header = self._recorder.attempt_header.encode("latin-1")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("type") != "http":
            await self.app(scope, receive, send)
            return
        header = next(
            (value for name, value in scope.get("headers") or () if name.lower() == self._header),
            None,
        )
        inbound = self._recorder.open(header)
        started = False

        async def send_marked(message: Message) -> None:
            nonlocal started
            if message.get("type") == "http.response.start":
                started = True
                if inbound.final and is_final_status(int(message.get("status", 200))):
                    message = {**message, "headers": _say_no(message.get("headers"))}
            await send(message)

        try:
            with serving(inbound):
                await self.app(scope, receive, send_marked)
        except Exception:
            if not started and inbound.final:
                # The framework's own error page would come from outside this middleware,
                # without the header: answer here, and let the server log the error.
                await send_marked(
                    {
                        "type": "http.response.start",
                        "status": 500,
                        "headers": [(b"content-type", b"text/plain; charset=utf-8")],
                    }
                )
                await send_marked({"type": "http.response.body", "body": b"Internal Server Error"})
            raise
        finally:
            self._recorder.record(inbound, _route(scope))
