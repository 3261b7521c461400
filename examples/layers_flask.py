"""A Flask service that retries at one layer: the WSGI server companion.

RetryLayerWSGIMiddleware counts the requests the service receives (first attempt or retry, per
route rule) and answers with x-should-retry: false when an upstream retrymw call gave up after
retrying. Django takes the same middleware around its WSGI application.

Run: python examples/layers_flask.py
"""

from __future__ import annotations

import flask
import httpx
from _upstream import upstream_url
from prometheus_client import CollectorRegistry

from retrymw import RetryPolicy
from retrymw.httpx import RetryTransport
from retrymw.server import ATTEMPT_HEADER, INBOUND_METRIC, RetryLayerWSGIMiddleware


def build(upstream: str, registry: CollectorRegistry) -> flask.Flask:
    """The "invoices" service, behind the companion."""
    transport = RetryTransport(
        policy=RetryPolicy(attempts=3, initial_delay="50ms", deadline="5s"),
        attempt_header=ATTEMPT_HEADER,
    )
    client = httpx.Client(transport=transport, timeout=5.0)
    app = flask.Flask("invoices")

    @app.get("/invoices/<number>")
    def invoice(number: str) -> flask.Response:
        answer = client.get(upstream)
        return flask.Response(answer.content, status=answer.status_code)

    app.wsgi_app = RetryLayerWSGIMiddleware(  # type: ignore[method-assign]
        app.wsgi_app, service="invoices", registry=registry
    )
    return app


def main() -> None:
    registry = CollectorRegistry()
    app = build(upstream_url(), registry)
    with app.test_client() as caller:
        for number, attempt in ((1, "1"), (1, "2"), (2, "1")):
            response = caller.get(f"/invoices/{number}", headers={ATTEMPT_HEADER: attempt})
            print(f"invoices: {response.status_code}")
    for kind in ("first", "retry"):
        labels = {
            "retrymw_service": "invoices",
            "retrymw_route": "/invoices/<number>",
            "retrymw_attempt": kind,
        }
        print(f"inbound {kind}: {registry.get_sample_value(INBOUND_METRIC, labels)}")


if __name__ == "__main__":
    main()
