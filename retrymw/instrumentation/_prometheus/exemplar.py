"""The trace-id exemplars `PrometheusInstrument` attaches to its histograms' observations.

Needs no prometheus_client: only opentelemetry-api, when importable.
"""

from __future__ import annotations

import time
from bisect import bisect_left
from collections.abc import Callable, Sequence

__all__ = ["Exemplar", "exemplar_due", "exemplar_reader", "no_exemplar"]

Exemplar = dict[str, str]

# Prometheus keeps only the latest exemplar of each bucket and scrapes every 15 s or more, and
# prometheus_client validates and stores an exemplar in about 1.4 µs per observation: one per
# bucket per second shows the same traces for a fraction of the cost.
EXEMPLAR_INTERVAL = 1.0
_now = time.monotonic  # replaced by tests
# Each histogram child carries its buckets' last exemplar times under this attribute: a third
# of a weak dictionary's lookup time, and they go when the child goes.
_TIMES = "_retrymw_exemplar_times"


def exemplar_due(histogram: object, bounds: Sequence[float], value: float) -> bool:
    """Whether ``value``'s bucket of ``histogram`` (a child) takes an exemplar now."""
    times: list[float] | None = getattr(histogram, _TIMES, None)
    if times is None:
        times = [float("-inf")] * (len(bounds) + 1)
        setattr(histogram, _TIMES, times)
    bucket = bisect_left(bounds, value)  # Prometheus buckets are "less than or equal"
    now = _now()
    if now - times[bucket] < EXEMPLAR_INTERVAL:
        return False
    times[bucket] = now
    return True


def no_exemplar() -> Exemplar | None:
    return None


def exemplar_reader() -> Callable[[], Exemplar | None]:
    """The trace-id exemplar of the current span, if opentelemetry-api is importable."""
    try:
        from opentelemetry.trace import get_current_span
    except ImportError:
        return no_exemplar

    # The last span context seen and its exemplar: the events of one call (and of the calls
    # made under one request span) read the same current span, so the ids are formatted once
    # per span rather than once per update. One tuple, swapped whole: safe across threads.
    last: list[tuple[object, Exemplar | None]] = [(None, None)]

    def exemplar() -> Exemplar | None:
        context = get_current_span().get_span_context()
        seen, value = last[0]
        if context is seen:
            return value
        if not context.trace_flags.sampled:  # also false for the invalid (no-span) context
            value = None
        else:
            value = {
                "trace_id": format(context.trace_id, "032x"),
                "span_id": format(context.span_id, "016x"),
            }
        last[0] = (context, value)
        return value

    return exemplar
