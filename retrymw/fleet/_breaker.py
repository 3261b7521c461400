"""`SharedBreaker`: one circuit per target for the whole fleet, adopted by each process's breaker.

Each process's `CircuitBreaker` keeps deciding locally (no store on the request path while
closed). Its own trips are *votes*; the store opens the shared circuit only when a quorum of
the target's members voted (`_scripts.BREAKER`), and every synchroniser step adopts the shared
state: a shared open circuit opens the local breaker until the shared reopening time (store
time, converted to this process's clock), a shared circuit closed by a probe closes it.

A process whose own dependency path alone is broken trips and votes alone: it refuses its own
calls, and the fleet's circuit stays closed.

Half-open fleet-wide: the local breaker admits a probe only with a lease from the store
(`_scripts.PROBE`, the one store command on the request path, bounded by the probe timeout);
leases expire, so a probe whose process died frees its slot. The holder's verdict is fenced by
the version its lease was granted in. While the shared circuit is closed, or the fleet is
degraded, probes are the local breaker's own business.
"""

from __future__ import annotations

import threading
from typing import Any, final

from .._core.events import BreakerStateChanged
from ._hooks import BreakerHost

__all__ = ["SharedBreaker"]

# Set while the synchroniser adopts a shared state: the transitions it causes are not votes.
_ADOPTING = threading.local()


@final
class SharedBreaker:
    """The fleet side of one `CircuitBreaker`.

    Args:
        breaker: the breaker (with the fleet hooks).
        target: the key's hash tag.
        quorum: share of the members whose votes open the shared circuit (at least 2 votes).
        recovery: seconds the shared circuit stays open before probes.
        max_probes: probes fleet-wide in half-open (the breaker's ``half_open_max_calls``).
        lease: a callable taking a lease for a probe: ``lease(self)`` returns the version it was
            granted in, ``None`` if refused, -1 if the store could not be asked; never raises.
    """

    __slots__ = (
        "__weakref__",
        "_lease",
        "_lease_version",
        "_lock",
        "_verdict",
        "_vote",
        "breaker",
        "max_probes",
        "quorum",
        "recovery",
        "shared_state",
        "target",
        "version",
        "votes",
    )

    kind = "breaker"

    def __init__(
        self,
        breaker: BreakerHost,
        target: str,
        *,
        quorum: float,
        recovery: float,
        max_probes: int,
        lease: Any,
    ) -> None:
        self.breaker = breaker
        self.target = target
        self.quorum = quorum
        self.recovery = recovery
        self.max_probes = max_probes
        self._lease = lease
        self._lock = threading.Lock()
        self.shared_state = "closed"
        self.version = -1  # nothing adopted yet
        self.votes = 0
        self._vote: int | None = None  # the shared version seen when this process tripped
        self._lease_version: int | None = None
        self._verdict: tuple[str, int] | None = None
        breaker.add_listener(self._transition)
        breaker.gate_probes(self._gate)

    # -- request path ------------------------------------------------------------------------------

    def _gate(self) -> bool:
        """A half-open admission: a fleet-wide lease while the shared circuit is open."""
        if self.shared_state != "open":
            return True
        version = self._lease(self)
        if version is None:
            return False
        if version < 0:  # the store could not be asked: the local breaker decides alone
            return True
        with self._lock:
            self._lease_version = version
        return True

    def _transition(self, event: BreakerStateChanged) -> None:
        """Own trips vote; a probe holder's verdict is kept for the next step."""
        if getattr(_ADOPTING, "active", False):
            return  # an adoption, not this process's own observation
        with self._lock:
            if event.state == "open":
                self._vote = max(self.version, 0)
            elif event.state == "closed":
                self._vote = None
            if event.previous_state == "half_open" and self._lease_version is not None:
                verdict = "success" if event.state == "closed" else "failure"
                self._verdict = (verdict, self._lease_version)
                self._lease_version = None

    # -- the synchroniser's side -------------------------------------------------------------------

    def prepare(self, vote_ttl: float) -> list[Any]:
        """The script's arguments after ``member``."""
        with self._lock:
            vote = -1 if self._vote is None else self._vote
            verdict, verdict_version = self._verdict or ("", -1)
            self._verdict = None
        return [
            vote,
            max(1, round(vote_ttl * 1000)),
            repr(self.quorum),
            max(1, round(self.recovery * 1000)),
            verdict,
            verdict_version,
        ]

    def apply(self, reply: list[Any]) -> None:
        """Adopt the shared state when it differs from the local one."""
        state = reply[0].decode() if isinstance(reply[0], bytes) else str(reply[0])
        reopen, version, now = int(reply[1]), int(reply[2]), int(reply[5])
        self.votes = int(reply[4])
        changed = version != self.version
        self.shared_state, self.version = state, version
        local = self.breaker.state
        _ADOPTING.active = True
        try:
            self._adopt(state, reopen, now, changed, local)
        finally:
            _ADOPTING.active = False
        if changed:
            with self._lock:
                self._lease_version = None

    def _adopt(self, state: str, reopen: int, now: int, changed: bool, local: str) -> None:
        if state == "open" and (local == "closed" or (changed and reopen > now)):
            # A shared open period (the quorum, or a failed probe elsewhere) and its reopening
            # time. It absorbs this process's own vote: the shared circuit now speaks for it.
            with self._lock:
                self._vote = None
            self.breaker.adopt("open", retry_in=max(0.0, (reopen - now) / 1000))
        elif state == "closed" and changed and local != "closed" and self._vote is None:
            self.breaker.adopt("closed")  # a probe somewhere closed the shared circuit

    def fall_back(self) -> None:
        """Degraded: the local breaker decides alone (no gate on probes)."""
        self.shared_state = "unknown"
