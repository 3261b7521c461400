"""The fleet's health as both metric paths read it: one reading per namespace of the process's
open `RedisFleet`s. Imports neither prometheus_client nor opentelemetry, so that
`PrometheusInstrument`'s collectors and `OpenTelemetryInstrument`'s observable instruments share
it.
"""

from __future__ import annotations

import math
import sys

__all__ = ["FleetReading", "fleet_readings"]

#: (namespace, members, degraded, sync age, sync lag, tokens leased) of each open fleet.
FleetReading = tuple[str, float, float, float, float, float]


def fleet_readings() -> list[FleetReading]:
    """One reading per namespace of the open fleets; none if `retrymw.fleet` was never imported.

    Two fleets of one namespace in a process are one member's view twice: the worst of each
    gauge, the sum of the leased tokens. A fleet that fails to report is left out: a scrape
    never fails for it. The sync lag is NaN before the first successful step.
    """
    module = sys.modules.get("retrymw.fleet._fleet")
    if module is None:  # no fleet can exist: nothing imported the module
        return []
    merged: dict[str, list[float]] = {}
    for fleet in module.live_fleets():
        try:
            stats = fleet.statistics()
            values = [
                float(stats.members),
                float(stats.degraded),
                fleet.view_age(),
                stats.sync_lag if stats.sync_lag is not None else math.nan,
                float(stats.tokens_leased),
            ]
        except Exception:  # pragma: no cover - statistics() reads plain attributes
            continue
        seen = merged.get(fleet.namespace)
        if seen is None:
            merged[fleet.namespace] = values
        else:
            merged[fleet.namespace] = [*map(max, seen[:4], values[:4]), seen[4] + values[4]]
    return [(namespace, *values) for namespace, values in merged.items()]  # type: ignore[misc]
