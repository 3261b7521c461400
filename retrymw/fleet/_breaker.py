"""`SharedBreaker`: one circuit per name and target for the whole fleet, adopted by each process.

Each process's `CircuitBreaker` keeps deciding locally (no store on the request path while
closed). Its own trips are *votes*; the store opens the shared circuit only when a quorum of
the circuit's members voted (`_scripts`), and a process adopts the shared state: a shared open
circuit opens the local breaker until the shared reopening time (store time, converted to this
process's clock), a shared circuit closed by a probe closes it. A process learns of a change
either from its own record's answer or from the namespace's change log, which every step reads,
so a circuit it is not calling costs it nothing until something happens there.

A process whose own dependency path alone is broken trips and votes alone: it refuses its own
calls, and the fleet's circuit stays closed.

Half-open fleet-wide: the local breaker admits a probe only with a lease from the store
(`_scripts.PROBE`, the one store command on the request path, bounded by the probe timeout and
run outside the breaker's lock); leases expire, so a probe whose process died frees its slot.
The holder's verdict is fenced by the version its lease was granted in. While the shared
circuit is closed, or the fleet is degraded, probes are the local breaker's own business.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from typing import final

from .._core.events import BreakerStateChanged
from ._hooks import BreakerHost
from ._replies import BreakerReply

__all__ = ["SharedBreaker"]

# Set while the synchroniser adopts a shared state: the transitions it causes are not votes.
_ADOPTING = threading.local()


@final
class SharedBreaker:
    """The fleet side of one `CircuitBreaker`.

    Args:
        breaker: the breaker (with the fleet hooks).
        suffix: the shared circuit's key suffix (``<name>:<target>``, encoded).
        serial: this link's number in its process.
        quorum: share of the members whose votes open the shared circuit (at least 2 votes).
        recovery: seconds the shared circuit stays open before probes.
        max_probes: probes fleet-wide in half-open (the breaker's ``half_open_max_calls``).
        lease: takes a lease for a probe: ``lease(self)`` returns the version it was granted
            in, ``None`` if refused, -1 if the store could not be asked; never raises.
        urgent: told when this process votes or holds a probe's verdict, so that the next
            step sends it first; no I/O.
    """

    __slots__ = (
        "__weakref__",
        "_breaker",
        "_lease",
        "_lease_version",
        "_lock",
        "_sent_vote",
        "_urgent",
        "_verdict",
        "_vote",
        "max_probes",
        "quorum",
        "recovery",
        "serial",
        "shared_state",
        "suffix",
        "version",
        "votes",
    )

    kind = "k"

    def __init__(
        self,
        breaker: BreakerHost,
        suffix: str,
        serial: int,
        *,
        quorum: float,
        recovery: float,
        max_probes: int,
        lease: Callable[[SharedBreaker], int | None],
        urgent: Callable[[SharedBreaker], None] | None = None,
    ) -> None:
        # Weakly: the fleet holds its links by their protection object, weakly too, and a strong
        # reference back would keep every breaker ever attached alive.
        self._breaker = weakref.ref(breaker)
        self.suffix = suffix
        self.serial = serial
        self.quorum = quorum
        self.recovery = recovery
        self.max_probes = max_probes
        self._lease = lease
        self._urgent = urgent
        self._lock = threading.Lock()
        self.shared_state = "closed"
        self.version = -1  # nothing adopted yet
        self.votes = 0
        self._vote: int | None = None  # the shared version seen when this process tripped
        self._sent_vote: int | None = -2  # what the store holds for this link (-2: nothing yet)
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
                verdict = "s" if event.state == "closed" else "f"
                self._verdict = (verdict, self._lease_version)
                self._lease_version = None
        if self._urgent is not None:
            self._urgent(self)

    # -- the synchroniser's side -------------------------------------------------------------------

    def due(self) -> bool:
        """Whether this step should carry a record: a vote to cast or keep, a verdict."""
        with self._lock:
            return (
                self._verdict is not None
                or self._vote is not None
                or (-1 if self._vote is None else self._vote) != self._sent_vote
            )

    def record(self) -> tuple[str, int]:
        """The step's record (`_scripts`)."""
        with self._lock:
            vote = -1 if self._vote is None else self._vote
            self._sent_vote = vote
            verdict, verdict_version = self._verdict or ("-", -1)
            self._verdict = None
        line = (
            f"k {self.serial} {self.suffix} {vote} {self.quorum!r} "
            f"{max(1, round(self.recovery * 1000))} {verdict} {verdict_version}"
        )
        return line, 0

    def apply(self, reply: BreakerReply, now: int) -> None:
        """Adopt the shared state when it differs from the local one."""
        self.votes = reply.votes
        self.adopt(reply, now)

    @property
    def breaker(self) -> BreakerHost | None:
        """The breaker, or ``None`` once nobody uses it any more."""
        return self._breaker()

    def adopt(self, reply: BreakerReply, now: int) -> None:
        """Adopt a shared state (a record's answer, or a change from the namespace's log)."""
        breaker = self._breaker()
        if breaker is None:
            return
        changed = reply.version != self.version
        self.shared_state, self.version = reply.state, reply.version
        local = breaker.state
        _ADOPTING.active = True
        try:
            if reply.state == "open" and (local == "closed" or (changed and reply.reopen > now)):
                # A shared open period (the quorum, or a failed probe elsewhere) and its
                # reopening time. It absorbs this process's own vote: the circuit speaks for it.
                with self._lock:
                    self._vote = None
                breaker.adopt("open", retry_in=max(0.0, (reply.reopen - now) / 1000))
            elif reply.state == "closed" and changed and local != "closed" and self._vote is None:
                breaker.adopt("closed")  # a probe somewhere closed the shared circuit
        finally:
            _ADOPTING.active = False
        if changed:
            with self._lock:
                self._lease_version = None

    def fall_back(self) -> None:
        """Degraded: the local breaker decides alone (no gate on probes)."""
        self.shared_state = "unknown"
        self.resend()

    def resend(self) -> None:
        """The store forgot this member: record again at the next step."""
        with self._lock:
            self._sent_vote = -2

    def detach(self) -> None:
        """Leave the fleet: no gate on the breaker's probes any more."""
        breaker = self._breaker()
        if breaker is not None:
            breaker.gate_probes(None)
        self.shared_state = "unknown"
