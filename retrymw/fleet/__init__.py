"""Protection shared across processes on Redis or Valkey: `RedisFleet` (``retrymw[fleet]``).

See ``docs/fleet.md``. Decisions stay local and take no store round trip; a background
synchroniser shares budgets, throttle counts and breaker states per target.
"""

from ._fleet import FleetStatistics as FleetStatistics
from ._fleet import RedisFleet as RedisFleet

__all__ = ["FleetStatistics", "RedisFleet"]

for _name in __all__:
    globals()[_name].__module__ = "retrymw.fleet"
del _name
