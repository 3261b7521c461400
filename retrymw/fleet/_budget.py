"""`SharedBudget`: one retry budget per target for the whole fleet, spent from local leases.

The bucket lives in the store (`_scripts.BUDGET`, whose comment states the rule); a process
never asks the store on the request path. It spends tokens it leased earlier (`try_acquire`: a
short lock, no I/O) and counts its successes lock-free (`record_success`). Each synchroniser step
reports the whole tokens the process holds, deposits the successes counted since the previous
step and tops the lease up to a target that follows demand: twice what was spent in the last
interval, plus one, at most ``max_lease``. The store counts what every member holds against the
bucket's capacity (bucket + outstanding leases <= capacity), so a quiet process's one token is
not on top of the bucket: in an outage the fleet spends at most the capacity, not the capacity
plus ``members`` tokens. A lease whose holder stops stepping returns to the bucket's room after
``member_ttl``.

Degraded (the store is slow, hung or down, or was never reached): the process keeps what it
leased and funds retries from its own successes, capped at a *conservative share* of the fleet:
the last bucket capacity it saw divided by the members it saw, or, before it ever reached the
store, ``min_capacity / assumed_members``, at least one token. Its full local allowance would
hand every process a whole budget, N times the fleet's.
"""

from __future__ import annotations

import math
import threading
from typing import Any, final

from .._core.forks import after_fork_in_child
from .._protect.counting import LazyCount

__all__ = ["SharedBudget"]


@final
class SharedBudget:
    """The fleet side of one `RetryBudget`: leased tokens, counted successes, one step per sync.

    Args:
        target: the target the bucket belongs to (the key's hash tag).
        ratio: the budget's tokens per success.
        burst: the budget's capacity share of the trailing successes.
        window: the budget's trailing window in seconds.
        min_capacity: the budget's floor, here the fleet's.
        max_lease: the most tokens one process holds at once.
        assumed_members: the fleet size assumed before the store was ever reached.
    """

    __slots__ = (
        "__weakref__",
        "_leased_total",
        "_lock",
        "_sent",
        "_spent",
        "_successes",
        "_tokens",
        "_want",
        "assumed_members",
        "burst",
        "capacity",
        "max_lease",
        "members",
        "min_capacity",
        "ratio",
        "target",
        "window",
    )

    kind = "budget"

    def __init__(
        self,
        target: str,
        *,
        ratio: float,
        burst: float,
        window: float,
        min_capacity: float,
        max_lease: int,
        assumed_members: int,
    ) -> None:
        self.target = target
        self.ratio = ratio
        self.burst = burst
        self.window = window
        self.min_capacity = min_capacity
        self.max_lease = max_lease
        self.assumed_members = assumed_members
        self.capacity: float | None = None  # the fleet bucket's, as last seen
        self.members = 0
        self._lock = threading.Lock()
        self._successes = LazyCount()
        self._tokens = self.local_share()
        self._spent = 0
        self._sent = 0  # successes sent by the step in progress
        self._want = 1
        self._leased_total = 0
        after_fork_in_child(self)

    def _after_fork_in_child(self) -> None:
        # The child is a new member: it starts from a conservative share, not the parent's lease.
        self._lock = threading.Lock()
        self._tokens = min(self._tokens, self.local_share())

    # -- the budget's side (request path: no I/O) --------------------------------------------------

    def try_acquire(self) -> bool:
        """Spend one leased token; ``False`` denies the retry."""
        with self._lock:
            if self._tokens >= 1.0:
                self._tokens -= 1.0
                self._spent += 1
                return True
            return False

    def record_success(self) -> None:
        """Count one success (lock-free); the next step deposits it."""
        next(self._successes)

    # -- the synchroniser's side -------------------------------------------------------------------

    def local_share(self) -> float:
        """The tokens a process may hold on its own while degraded."""
        if self.capacity is None or self.members < 1:
            return max(1.0, self.min_capacity / self.assumed_members)
        return max(1.0, self.capacity / self.members)

    def prepare(self) -> list[Any]:
        """The script's arguments after ``member``: deposits, want, the settings and ``held``."""
        with self._lock:
            deposits = self._sent = self._successes.take()
            # Demand follows spending: twice the last interval's, plus one, within max_lease.
            self._want = min(self.max_lease, 2 * self._spent + 1)
            self._spent = 0
            held = math.floor(self._tokens)
            want = max(0, self._want - held)
        return [
            deposits,
            want,
            repr(self.ratio),
            repr(self.burst),
            max(1, round(self.window * 1000)),
            repr(self.min_capacity),
            held,  # counted against the fleet's bucket: leases and bucket share one capacity
        ]

    def apply(self, reply: list[Any]) -> None:
        """Take the granted tokens and the bucket's capacity and members."""
        granted, capacity, members = int(reply[0]), float(reply[1]), int(reply[2])
        with self._lock:
            self._tokens += granted
            self._leased_total += granted
            self.capacity = capacity
            self.members = members
            self._sent = 0

    def fall_back(self) -> None:
        """The step failed: fund from the unsent and new successes, within the local share."""
        with self._lock:
            deposits = self._sent + self._successes.take()
            self._sent = 0
            self._spent = 0
            cap = self.local_share()
            if self._tokens < cap:
                self._tokens = min(cap, self._tokens + deposits * self.ratio)

    @property
    def tokens(self) -> float:
        """Tokens held now."""
        return self._tokens

    @property
    def leased(self) -> int:
        """Tokens leased from the fleet's bucket since creation."""
        return self._leased_total
