"""`SharedBudget`: one retry budget per owner and target for the whole fleet, spent from leases.

The bucket lives in the store (`_scripts`, which states the rule above `STEP`); a
process never asks the store on the request path. It spends tokens it leased earlier
(`try_acquire`: a short lock, no I/O) and counts its successes lock-free (`record_success`).
A synchroniser step that has something to say for it (successes to deposit, tokens spent or
retries denied since the last step, a changed holding) sends one *record*: it deposits the
successes, reports the whole tokens the process holds and tops the lease up to a target that
follows demand: twice what was spent in the last interval, plus one, at most ``max_lease``.
The store counts what every member holds against the bucket's capacity, so a quiet process's
one token is not on top of the bucket, and lends the floor on credit as a local budget does.

Degraded (the store is slow, hung, down, answering garbage, or was never reached): the process
keeps what it leased and funds retries from its own successes, capped at a *conservative
share* of the fleet: the last bucket capacity it saw divided by the members it saw, or, before
it ever reached the store, ``min_capacity / assumed_members``, at least one token. Its full
local allowance would hand every process a whole budget, N times the fleet's.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from typing import final

from .._core.forks import after_fork_in_child
from .._protect.counting import LazyCount
from ._replies import BudgetReply

__all__ = ["SharedBudget"]


@final
class SharedBudget:
    """The fleet side of one `RetryBudget`: leased tokens, counted successes, a record per step.

    Args:
        suffix: the shared bucket's key suffix (``<owner>:<target>``, encoded).
        serial: this link's number in its process (its field in the store is member.serial).
        ratio: the budget's tokens per success.
        burst: the budget's capacity share of the trailing successes.
        window: the budget's trailing window in seconds.
        min_capacity: the budget's floor, here the fleet's.
        floor_credit: retries the floor lends between two successes, per member.
        max_lease: the most tokens one process holds at once.
        assumed_members: the fleet size assumed before the store was ever reached.
        urgent: told (once per step) when a retry spent or was denied a token, so that the
            next step tops the lease up first; no I/O.
    """

    __slots__ = (
        "__weakref__",
        "_denied",
        "_deposits",
        "_leased_total",
        "_lock",
        "_reported",
        "_sent",
        "_spent",
        "_successes",
        "_tokens",
        "_urgent",
        "_want",
        "assumed_members",
        "burst",
        "capacity",
        "floor_credit",
        "max_lease",
        "members",
        "min_capacity",
        "ratio",
        "serial",
        "suffix",
        "window",
    )

    kind = "b"

    def __init__(
        self,
        suffix: str,
        serial: int,
        *,
        ratio: float,
        burst: float,
        window: float,
        min_capacity: float,
        floor_credit: int,
        max_lease: int,
        assumed_members: int,
        urgent: Callable[[SharedBudget], None] | None = None,
    ) -> None:
        self.suffix = suffix
        self.serial = serial
        self.ratio = ratio
        self.burst = burst
        self.window = window
        self.min_capacity = min_capacity
        self.floor_credit = floor_credit
        self.max_lease = max_lease
        self.assumed_members = assumed_members
        self.capacity: float | None = None  # the fleet bucket's, as last seen
        self.members = 0
        self._lock = threading.Lock()
        self._successes = LazyCount()
        self._tokens = self.local_share()
        self._deposits = 0  # successes counted, not sent yet
        self._spent = 0
        self._denied = 0
        self._sent = 0  # successes sent by the step in progress
        self._want = 1
        self._reported = -1  # the whole tokens held at the last answered record
        self._leased_total = 0
        self._urgent = urgent
        after_fork_in_child(self)

    def _after_fork_in_child(self) -> None:
        # The child is a new member: it starts from a conservative share, not the parent's lease.
        self._lock = threading.Lock()
        self._tokens = min(self._tokens, self.local_share())
        self._reported = -1

    # -- the budget's side (request path: no I/O) --------------------------------------------------

    def try_acquire(self) -> bool:
        """Spend one leased token; ``False`` denies the retry."""
        with self._lock:
            first = not (self._spent or self._denied)
            granted = self._tokens >= 1.0
            if granted:
                self._tokens -= 1.0
                self._spent += 1
            else:
                self._denied += 1
        if first and self._urgent is not None:
            self._urgent(self)  # demand: the next step tops this lease up first
        return granted

    def record_success(self) -> None:
        """Count one success (lock-free); the next step deposits it."""
        next(self._successes)

    # -- the synchroniser's side -------------------------------------------------------------------

    def local_share(self) -> float:
        """The tokens a process may hold on its own while degraded."""
        if self.capacity is None or self.members < 1:
            return max(1.0, self.min_capacity / self.assumed_members)
        return max(1.0, self.capacity / self.members)

    def due(self) -> bool:
        """Whether this step should carry a record: something changed since the last one."""
        with self._lock:
            self._deposits += self._successes.take()
            return bool(
                self._deposits
                or self._spent
                or self._denied
                or math.floor(self._tokens) != self._reported
            )

    def record(self) -> tuple[str, int]:
        """The step's record (`_scripts`), and the most it may be granted."""
        with self._lock:
            deposits = self._sent = self._deposits + self._successes.take()
            self._deposits = 0
            # Demand follows spending: twice the last interval's, plus one, within max_lease.
            self._want = min(self.max_lease, 2 * self._spent + 1)
            self._spent = self._denied = 0
            held = math.floor(self._tokens)
            want = max(0, self._want - held)
        line = (
            f"b {self.serial} {self.suffix} {deposits} {want} {held} {self.ratio!r} "
            f"{self.burst!r} {max(1, round(self.window * 1000))} {self.min_capacity!r} "
            f"{self.floor_credit}"
        )
        return line, want

    def apply(self, reply: BudgetReply) -> None:
        """Take the granted tokens and the bucket's capacity and members."""
        with self._lock:
            self._tokens += reply.granted
            self._leased_total += reply.granted
            self.capacity = reply.capacity
            self.members = reply.members
            self._sent = 0
            self._reported = math.floor(self._tokens)

    def fall_back(self) -> None:
        """The step failed: fund from the unsent and new successes, within the local share."""
        with self._lock:
            deposits = self._sent + self._deposits + self._successes.take()
            self._sent = self._deposits = 0
            self._spent = 0
            self._reported = -1  # report again once the store answers
            cap = self.local_share()
            if self._tokens < cap:
                self._tokens = min(cap, self._tokens + deposits * self.ratio)

    def resend(self) -> None:
        """The store forgot this member: report at the next step."""
        with self._lock:
            self._reported = -1

    @property
    def tokens(self) -> float:
        """Tokens held now."""
        return self._tokens

    @property
    def leased(self) -> int:
        """Tokens leased from the fleet's bucket since creation."""
        return self._leased_total
