"""What both middlewares share: reading the attempt header, the inbound metric, the final answer.

The metric is ``retrymw_inbound_requests_total`` (counter; labels ``retrymw_service``,
``retrymw_route``, ``retrymw_attempt``): every request a service receives, by route template
and by whether the caller says it is a first attempt (``first``), a retry (``retry``) or says
nothing (``unknown``). A service's inbound retry share is ``retry / (first + retry)``: next to
the outbound amplification of its own calls, it shows at which layer retries happen.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, Final

from .._core.errors import ConfigError
from .._engine.layers import Inbound
from ..instrumentation._cardinality import BoundedValues
from ..instrumentation._names import (
    INBOUND_ATTEMPTS,
    INBOUND_REQUESTS,
    MAX_ROUTES,
    OVERFLOW,
    UNKNOWN_ROUTE,
    InboundAttempt,
)

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry, Counter

__all__ = [
    "ATTEMPT_HEADER",
    "INBOUND_METRIC",
    "MAX_ROUTES",
    "SHOULD_RETRY_HEADER",
    "UNKNOWN_ROUTE",
    "InboundRecorder",
    "attempt_number",
    "is_final_status",
]

#: The attempt header a transport sends with ``attempt_header=ATTEMPT_HEADER``.
ATTEMPT_HEADER: Final = "x-retrymw-attempt"
#: The response header retrymw's transports (and the OpenAI/Anthropic SDKs) honour.
SHOULD_RETRY_HEADER: Final = "x-should-retry"
#: The Prometheus name of the inbound counter (its ``_total`` included, as registered); its
#: name, labels and label values live in `retrymw.instrumentation._names` with the others.
INBOUND_METRIC: Final = INBOUND_REQUESTS.prometheus


def attempt_number(value: str | bytes | None) -> int | None:
    """The attempt number an attempt header carries (1 for a first attempt), or ``None``.

    Anything but 1 to 6 ASCII digits naming a number >= 1 is ``None``: garbage never raises.
    """
    if value is None:
        return None
    if isinstance(value, bytes):
        value = value.decode("latin-1")
    value = value.strip()
    if not (0 < len(value) <= 6 and value.isascii() and value.isdigit()):
        return None
    number = int(value)
    return number if number >= 1 else None


def is_final_status(status: int) -> bool:
    """Whether a response with ``status`` is one a caller would retry (5xx, 429)."""
    return status >= 500 or status == 429


def _kind(attempt: int | None) -> InboundAttempt:
    if attempt is None:
        return "unknown"
    return "first" if attempt == 1 else "retry"


_counters: dict[int, tuple[Any, Counter]] = {}
_counters_lock = threading.Lock()


def _counter(registry: CollectorRegistry | None) -> Counter | None:
    """The inbound counter registered in ``registry`` (prometheus_client's default one when
    ``None``), created once per registry; ``None`` without prometheus_client."""
    try:
        import prometheus_client
    except ImportError:  # pragma: no cover - the server extra brings it
        return None
    target = prometheus_client.REGISTRY if registry is None else registry
    with _counters_lock:
        found = _counters.get(id(target))
        if found is not None and found[0] is target:
            return found[1]
        counter = prometheus_client.Counter(
            INBOUND_METRIC.removesuffix("_total"),
            INBOUND_REQUESTS.description,
            INBOUND_REQUESTS.labels,
            registry=target,
        )
        _counters[id(target)] = (target, counter)
        return counter


class InboundRecorder:
    """The part of a middleware that is not about its protocol: checks, metric, context.

    Args:
        service: the service's name, a bounded label.
        attempt_header: the header to read the attempt number from.
        registry: the Prometheus registry; prometheus_client's default one when ``None``.
        metrics: ``False`` to record no metric.
    """

    __slots__ = ("_counter", "_routes", "_seen", "attempt_header", "service")

    def __init__(
        self,
        service: str,
        attempt_header: str,
        registry: CollectorRegistry | None,
        metrics: bool,
    ) -> None:
        if not isinstance(service, str) or not service:
            raise ConfigError("service", service, "must be a non-empty string", '"orders"')
        if not isinstance(attempt_header, str) or not attempt_header.strip():
            raise ConfigError(
                "attempt_header", attempt_header, "must be a header name", f'"{ATTEMPT_HEADER}"'
            )
        if not isinstance(metrics, bool):
            raise ConfigError("metrics", metrics, "must be True or False", "metrics=False")
        self.service = service
        self.attempt_header = attempt_header.lower()
        self._counter = _counter(registry) if metrics else None
        self._routes = BoundedValues(MAX_ROUTES, OVERFLOW)
        self._seen: set[str] = set()  # routes whose series exist (bounded by the routes cap)

    def open(self, header: str | bytes | None) -> Inbound:
        """The `Inbound` of a request whose attempt header is ``header``."""
        return Inbound(self.service, attempt_number(header))

    def record(self, inbound: Inbound, route: str | None) -> None:
        """Count the request under its route template (bounded) and attempt kind.

        A metric that fails never changes the request's response.
        """
        counter = self._counter
        if counter is None:
            return
        label = UNKNOWN_ROUTE if not route else self._routes(route)
        try:
            if label not in self._seen:
                # Every kind from a route's first request, at 0: rate() extrapolates each
                # series from its own first sample, so a retry series born mid-window would
                # skew the retry share (and increase() would miss its first retry).
                for kind in INBOUND_ATTEMPTS:
                    counter.labels(self.service, label, kind)
                self._seen.add(label)
            counter.labels(self.service, label, _kind(inbound.attempt)).inc()
        except Exception:  # pragma: no cover - prometheus_client does not raise here
            return
