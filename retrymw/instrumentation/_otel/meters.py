"""What `OpenTelemetryInstrument`'s metrics are built on: the instrument constructors, the
records' attribute sets, and the fleet's observable instruments.

Imported by `_otel.instrument` only after it has checked that opentelemetry-api is installed.
"""

from __future__ import annotations

import functools
import math
from typing import Any

from opentelemetry import metrics
from opentelemetry.context import Context
from opentelemetry.trace import INVALID_SPAN, set_span_in_context

from .. import _names as names
from .._fleet_live import fleet_readings
from .live import LiveGauges

__all__ = [
    "AttributeSets",
    "create_histogram",
    "HTTP_OVERFLOW",
    "metric_args",
    "NO_EXEMPLAR",
    "observe_fleet",
]

#: Metric attribute sets an `AttributeSets` keeps: far more than the capped labels give in
#: practice (a policy's targets times outcomes and error types); past it, each record builds its
#: own.
_ATTRIBUTE_SETS_KEPT = 4096


#: The series each kind of attribute set is recorded in, by the key it adds to policy and
#: target: none (the backoff histogram and the budget gauge), the attempt outcome (the attempt
#: histogram), the call outcome (the call and attempts histograms), the reason (the counter).
_SERIES_OF_KEY: dict[str | None, int] = {
    None: names.BACKOFF_DURATION.series + names.RETRY_BUDGET_AVAILABLE.series,
    names.ATTR_ATTEMPT_OUTCOME: names.ATTEMPT_DURATION.series,
    names.ATTR_OUTCOME: names.CALL_DURATION.series + names.CALL_ATTEMPTS.series,
    names.ATTR_REASON: names.RETRIES_DENIED.series,
}

#: ``http.client.request.duration``'s attributes once new ones no longer fit the series bound:
#: the OpenTelemetry SDK's own overflow attribute set.
HTTP_OVERFLOW: dict[str, Any] = {names.ATTR_METRIC_OVERFLOW: True}


class AttributeSets:
    """The attributes of `OpenTelemetryInstrument`'s metric records, each combination built once.

    One dict is shared by every record that has it (up to `_ATTRIBUTE_SETS_KEPT` combinations):
    never changed once built, since an SDK may keep what it was given (OpenTelemetry's copies
    it). ``live`` learns of every (policy, target) a record names, and its ``bounds`` caps the
    labels and place each combination within the series bound (`Cardinality.place`).
    """

    __slots__ = ("_bounds", "_live", "_sets")

    def __init__(self, live: LiveGauges) -> None:
        self._live = live
        self._bounds = live.bounds
        self._sets: dict[tuple[str, str, str | None, str | None, str | None], dict[str, str]] = {}

    def __call__(
        self,
        policy: str,
        target: str,
        key: str | None = None,
        value: str | None = None,
        error_type: str | None = None,
    ) -> dict[str, str]:
        """The policy and the target (capped, or moved to an overflow series past the series
        bound), ``key`` set to ``value`` if given, and ``error.type`` (capped) if given."""
        combination = (policy, target, key, value, error_type)
        attributes = self._sets.get(combination)
        if attributes is None:
            # A new (policy, target): the budgets or throttles the policy shares serve it too,
            # now and once announced (`LiveGauges.attach` wires the pairs it saw).
            self._live.saw(policy, target)
            bounds = self._bounds
            error = None if error_type is None else bounds.error_type(error_type)
            placed_policy, placed_target = bounds.place(
                policy, bounds.target(target), 0, (key, value, error), _SERIES_OF_KEY[key]
            )
            attributes = {names.ATTR_POLICY: placed_policy, names.ATTR_TARGET: placed_target}
            if key is not None and value is not None:
                attributes[key] = value
            if error is not None:
                attributes[names.ATTR_ERROR_TYPE] = error
            if len(self._sets) < _ATTRIBUTE_SETS_KEPT:
                self._sets[combination] = attributes
        return attributes

    def __len__(self) -> int:
        return len(self._sets)


def metric_args(spec: names.MetricSpec) -> tuple[str, str, str]:
    return spec.otel, spec.unit, spec.description


def create_histogram(meter: metrics.Meter, spec: names.MetricSpec) -> metrics.Histogram:
    return meter.create_histogram(
        *metric_args(spec), explicit_bucket_boundaries_advisory=list(spec.buckets or ())
    )


#: The context of a record that offers the SDK no exemplar: its span is the invalid one, so the
#: (default) trace-based exemplar filter finds nothing sampled. Not an empty context: the SDK
#: reads ``context or get_current()``. Passed as ``context=`` (a ``**`` of it cost 0.14 µs).
NO_EXEMPLAR = set_span_in_context(INVALID_SPAN, Context())


def observe_fleet(meter: metrics.Meter) -> None:
    """Observable instruments for the fleet's health (`names.FLEET_METRICS`).

    Read at each collection from the process's open `RedisFleet`s, as `PrometheusInstrument`
    reads them at scrape time: one series per namespace while a fleet of it is open, none
    otherwise. The readings are the process's, not the instrument's, so a second instrument
    on the same meter adds nothing (the SDK hands it the first one's instruments).
    """
    for column, spec in enumerate(names.FLEET_METRICS):
        callback = functools.partial(_observe_fleet_column, column)
        create = (
            meter.create_observable_counter
            if spec.kind == "counter"
            else meter.create_observable_gauge
        )
        create(spec.otel, callbacks=[callback], unit=spec.unit, description=spec.description)


def _observe_fleet_column(
    column: int, options: metrics.CallbackOptions
) -> list[metrics.Observation]:
    observations = []
    for namespace, *values in fleet_readings():
        value = values[column]
        # A NaN (no sync lag before the first step) is no observation rather than a NaN point.
        if not math.isnan(value):
            observations.append(metrics.Observation(value, {names.ATTR_FLEET: namespace}))
    return observations
