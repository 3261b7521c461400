"""Fleet scenarios: the clients' budgets shared through a simulated store, in virtual time.

Each client's real `RetryBudget` is shared through the real `retrymw.fleet` `SharedBudget`
(`RetryBudget.share_with`), as `RedisFleet.attach` does; only the store is simulated: `Store`
runs the budget script (`retrymw.fleet._scripts.BUDGET`) in Python on the virtual clock. Each
client's synchroniser is an event of the simulator's loop, every ``sync_interval`` (phases
staggered over one interval, as independent processes are): it deposits the successes counted
since its last step and tops its lease up, so a lease is at most one interval stale. While the
store is down (``store_outage``), each step fails and the share falls back to its conservative
local share, as a degraded process does.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from .._core.errors import ConfigError
from .._protect.budget import RetryBudget
from ..fleet._budget import SharedBudget

__all__ = ["FleetSettings", "Store", "Synchroniser"]

_KNOWN = {"sync_interval", "store_outage", "max_lease", "assumed_members"}


class FleetSettings:
    """The fleet arguments of a `Scenario` (``fleet={...}``), checked once.

    Keys: ``sync_interval`` (seconds, default 0.25), ``store_outage`` (``(start, duration)`` in
    virtual seconds, default none), ``max_lease`` (default 32), ``assumed_members`` (10): the
    `RedisFleet` arguments of the same names.
    """

    __slots__ = ("assumed_members", "interval", "max_lease", "outage", "store")

    def __init__(self, fleet: Mapping[str, Any]) -> None:
        unknown = set(fleet) - _KNOWN
        if unknown:
            raise ConfigError("fleet", min(unknown), "is not a fleet setting", "sync_interval")
        self.interval = float(fleet.get("sync_interval", 0.25))
        if not 0.01 <= self.interval <= 60.0:
            raise ConfigError("sync_interval", self.interval, "must be in [0.01, 60]", "0.25")
        outage = fleet.get("store_outage")
        self.outage = None if outage is None else (float(outage[0]), float(outage[1]))
        self.max_lease = int(fleet.get("max_lease", 32))
        self.assumed_members = int(fleet.get("assumed_members", 10))
        self.store = Store(self)  # one store per run: the settings are built once per run

    def store_down(self, now: float) -> bool:
        """Whether the store is unreachable at ``now``."""
        outage = self.outage
        return outage is not None and outage[0] <= now < outage[0] + outage[1]


class Store:
    """The budget script's bucket and the members' heartbeats, on virtual time (seconds).

    `budget` is `retrymw.fleet._scripts.BUDGET` step for step (the rule is written once, on
    that script); tests/fleet/test_budget_rule.py runs both on the same steps.
    """

    def __init__(self, settings: FleetSettings) -> None:
        self.member_ttl = max(1.0, 4 * settings.interval)
        self.heartbeats: dict[int, float] = {}
        self.leases: dict[int, tuple[float, int]] = {}  # member -> (expiry, tokens held)
        self.leased = 0
        self.sweep = 0.0
        self.tokens: float | None = None
        self.successes = 0.0
        self.at: float | None = None

    def budget(self, member: int, arguments: list[Any], now: float) -> list[Any]:
        """One `BUDGET` script run: report, deposit, lease, and the capacity and members."""
        deposits, want, ratio, burst, window_ms, floor, held = arguments
        ratio, burst, floor, window = float(ratio), float(burst), float(floor), window_ms / 1000
        self.heartbeats[member] = now + self.member_ttl
        members = sum(expiry > now for expiry in self.heartbeats.values())
        tokens = floor if self.tokens is None else self.tokens
        at = now if self.at is None else self.at
        leased = self.leased - self.leases.get(member, (0.0, 0))[1] + held
        if now >= self.sweep:  # leases of members that stopped stepping return; recount
            self.leases = {m: lease for m, lease in self.leases.items() if lease[0] > now}
            leased = held + sum(count for m, (_, count) in self.leases.items() if m != member)
            self.sweep = now + self.member_ttl
        self.successes = self.successes * math.exp(-max(0.0, now - at) / window) + deposits
        capacity = max(floor, burst * self.successes)
        tokens = max(0.0, min(capacity - leased, tokens + deposits * ratio))
        granted = max(0, min(want, math.floor(tokens)))
        self.tokens, self.at, self.leased = tokens - granted, now, leased + granted
        self.leases[member] = (now + self.member_ttl, held + granted)
        return [granted, repr(capacity), members, now]


class Synchroniser:
    """One client's synchroniser: a step of its `SharedBudget` against the `Store`."""

    __slots__ = ("index", "settings", "share", "store")

    def __init__(self, budget: RetryBudget, index: int, settings: FleetSettings) -> None:
        stats = budget.statistics()
        self.share = SharedBudget(
            "dependency",
            ratio=stats.ratio,
            burst=stats.burst,
            window=stats.window,
            min_capacity=stats.min_capacity,
            max_lease=settings.max_lease,
            assumed_members=settings.assumed_members,
        )
        budget.share_with(self.share)
        self.index, self.store, self.settings = index, settings.store, settings

    def step(self, now: float) -> None:
        """Deposit and lease, or fall back to the local share while the store is down."""
        if self.settings.store_down(now):
            self.share.fall_back()
            return
        self.share.apply(self.store.budget(self.index, self.share.prepare(), now))
