"""Fleet scenarios: the clients' budgets shared through a simulated store, in virtual time.

Each client's real `RetryBudget` is shared through the real `retrymw.fleet` `SharedBudget`
(`RetryBudget.share_with`), as `RedisFleet.attach` does; only the store is simulated: `Store`
runs the budget rule (the ``budget`` function of `retrymw.fleet._scripts.STEP`) in Python on
the virtual clock. Each client's synchroniser is an event of the simulator's loop, every
``sync_interval`` (phases staggered over one interval, as independent processes are): it
deposits the successes counted since its last step and tops its lease up, so a lease is at
most one interval stale. While the
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
from ..fleet._replies import BudgetReply

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
    """The budget script's buckets and the members' heartbeats, on virtual time (seconds).

    `budget` is the budget rule of `retrymw.fleet._scripts.STEP` step for step (the rule is
    written once, on that script); tests/fleet/test_budget_rule.py runs both on the same steps.
    """

    def __init__(self, settings: FleetSettings) -> None:
        self.member_ttl = max(1.0, 4 * settings.interval)
        self.heartbeats: dict[int, float] = {}
        # member -> (expiry, tokens held, its trailing successes, when they were counted)
        self.leases: dict[int, tuple[float, int, float, float]] = {}
        self.leased = 0
        self.sweep = 0.0
        self.tokens: float | None = None
        self.successes = 0.0
        self.at: float | None = None
        self.credit: float | None = None
        self.median: float | None = None
        self.n = 0

    def budget(self, member: int, record: str, now: float) -> BudgetReply:
        """One budget record of the `STEP` script: report, deposit, lease."""
        words = record.split(" ")
        deposits, want, held = int(words[3]), int(words[4]), int(words[5])
        ratio, burst, window = float(words[6]), float(words[7]), int(words[8]) / 1000
        floor, credit_per = float(words[9]), int(words[10])
        self.heartbeats[member] = now + self.member_ttl
        tokens = floor if self.tokens is None else self.tokens
        at = now if self.at is None else self.at
        lease = self.leases.get(member)
        if lease is None:
            self.n += 1
            before, mine, mine_at = 0, 0.0, now
        else:
            _, before, mine, mine_at = lease
        successes = self.successes * math.exp(-max(0.0, now - at) / window)
        mine *= math.exp(-max(0.0, now - mine_at) / window)
        if self.n > 1:  # one member's claim: at most twice the median member's
            cap = 2 * max(self.median or 0.0, floor / burst if burst > 0 else floor)
            deposits = max(0, min(deposits, math.floor(cap - mine)))
        mine += deposits
        share = max(1, math.ceil(max(floor, burst * successes) / max(1, self.n)))
        held = min(held, before + share)
        leased = self.leased - before + held
        if now >= self.sweep:  # leases of members that stopped stepping return; recount
            live = {
                m: lease
                for m, lease in self.leases.items()
                if m != member and self.heartbeats.get(m, 0.0) > now
            }
            self.leases = live
            leased = held + sum(lease[1] for lease in live.values())
            self.n = 1 + len(live)
            claims = [mine] + [
                lease[2] * math.exp(-max(0.0, now - lease[3]) / window) for lease in live.values()
            ]
            claims.sort()
            self.median = claims[(len(claims) + 1) // 2 - 1]
            self.sweep = now + self.member_ttl
        successes += deposits
        capacity = max(floor, burst * successes)
        funded = self.n * math.floor(burst * successes / self.n)
        tokens = max(0.0, min(capacity - leased, tokens + deposits * ratio))
        if deposits > 0:
            self.credit = max(0.0, credit_per * self.n - max(0.0, leased - funded))
        elif self.credit is not None:
            self.credit = max(0.0, self.credit - max(0, held - before))
        granted = max(0, min(want, math.floor(tokens)))
        if self.credit is not None:
            room = max(0, math.floor(funded - leased))
            if granted - room > self.credit:
                granted = max(0, min(granted, room + math.floor(self.credit)))
            self.credit = max(0.0, self.credit - max(0, granted - room))
        self.tokens, self.at, self.successes = tokens - granted, now, successes
        self.leased = leased + granted
        self.leases[member] = (now + self.member_ttl, held + granted, mine, now)
        return BudgetReply(granted=granted, capacity=capacity, members=self.n)


class Synchroniser:
    """One client's synchroniser: a step of its `SharedBudget` against the `Store`."""

    __slots__ = ("index", "settings", "share", "store")

    def __init__(self, budget: RetryBudget, index: int, settings: FleetSettings) -> None:
        stats = budget.statistics()
        self.share = SharedBudget(
            "default:dependency",
            index,
            ratio=stats.ratio,
            burst=stats.burst,
            window=stats.window,
            min_capacity=stats.min_capacity,
            floor_credit=stats.credit_per_success,
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
        record, _ = self.share.record()
        self.share.apply(self.store.budget(self.index, record, now))
