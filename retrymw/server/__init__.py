"""Server companions: each service one layer of retries, not one more (docs/layers.md).

::

    app = RetryLayerMiddleware(app, service="orders")               # ASGI: Starlette, FastAPI
    app.wsgi_app = RetryLayerWSGIMiddleware(app.wsgi_app, service="orders")  # WSGI: Flask

Callers send their attempt number with ``AsyncRetryTransport(attempt_header=ATTEMPT_HEADER)``;
the middleware counts inbound first attempts and retries per route, makes the request known to
the retrymw calls made while serving it (`current_request`), and answers a request that failed
after a downstream retrymw call gave up for good with ``x-should-retry: false``, so that the
caller's retrymw transport does not retry it.

An inbound SDK retry count (``x-stainless-retry-count``) is never trusted: the middleware does
not read it, and every request it serves starts afresh for the transports' SDK checks, so a
count relayed by a handler is never taken for the SDK in this process retrying
(docs/layers.md).
"""

from __future__ import annotations

from .._core.exports import publish
from .._engine.layers import Inbound as Inbound
from .._engine.layers import current as current_request
from ._asgi import RetryLayerMiddleware as RetryLayerMiddleware
from ._inbound import ATTEMPT_HEADER as ATTEMPT_HEADER
from ._inbound import INBOUND_METRIC as INBOUND_METRIC
from ._inbound import SHOULD_RETRY_HEADER as SHOULD_RETRY_HEADER
from ._inbound import attempt_number as attempt_number
from ._wsgi import RetryLayerWSGIMiddleware as RetryLayerWSGIMiddleware
from ._wsgi import werkzeug_route as werkzeug_route

__all__ = [
    "ATTEMPT_HEADER",
    "INBOUND_METRIC",
    "Inbound",
    "RetryLayerMiddleware",
    "RetryLayerWSGIMiddleware",
    "SHOULD_RETRY_HEADER",
    "attempt_number",
    "current_request",
    "werkzeug_route",
]

publish(globals(), __all__, __name__)
