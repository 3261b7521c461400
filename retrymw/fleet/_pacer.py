"""`SharedPacer`: one send-rate limit per pacer and target for the whole fleet, paced by shares.

The limit lives in the store (`_scripts`, which states the rule): every member reports the
requests limit its pacer learned from the server's headers, and the store keeps the *lowest
recent* one (a higher report replaces it only once nobody repeated the lower one for
`_scripts` ``PACER_RECENT``), so one member's answers slow every member. Each member paces
against that limit at its *share*, which follows demand: each record carries the member's
*need* (the requests/s it asked for, sends and refusals, over the last `MEASURE_OVER` seconds,
with `ROOM_TO_GROW`; "as much as it can get" while it asks for nearly all its share,
`HELD_BACK`; not known before it measured), and the store fills the limit max-min fair over the
members' needs, a need not known counting as an equal part (`_scripts` states the rule).
Nothing happens on the request path: the pacer decides every send locally (`Pacer.reserve`), and
a synchroniser step that has something to say for it (it sent since the last record, learned a
new limit, is due to repeat its limit, its need fell since the last measure, or it rejoins)
sends one *record*; the answer sets the
pacer's limit (`Pacer.adopt_limit`) and share (`Pacer.share`). The first answer after joining
counts the whole namespace's members if it has more: processes that start together join the
target together, and each would otherwise pace at one over the members that joined before it
until its next step. A pacer that stops sending sends one more record, a second later, to give
its share back (it asks for nothing now); then nothing until it sends again.

Degraded (the store is slow, hung, down, answering garbage, or was never reached): the member
keeps the last limit it saw and paces at a *conservative share*: one over the most members it
last saw, of the target or of the whole namespace (a member that joined the target since then
is counted if its process had), or, before it ever reached the store, one over
``assumed_members``. Its full limit would
let every member send the whole limit, N times what the server allows.

Records are fenced: each carries a sequence number, and the store ignores a report older than
the last it took from the same link (a step retried after a timeout, a delayed duplicate).
"""

from __future__ import annotations

import math
import threading
import weakref
from typing import final

from .._core.forks import after_fork_in_child
from .._protect.pacer import Pacer, PacerStatistics
from ._replies import PacerReply

__all__ = ["HELD_BACK", "MEASURE_OVER", "MIN_NEED", "REPORT_EVERY", "ROOM_TO_GROW", "SharedPacer"]

#: Seconds between two reports of an unchanged limit: well within the store's ``PACER_RECENT``
#: (30 s), so a limit still learned by someone is never replaced by a higher one.
REPORT_EVERY = 10.0
#: Seconds a member's demand is measured over: its sends and refusals per second.
MEASURE_OVER = 1.0
#: A member asking for this fraction of the rate it paces at or more is held back by its
#: share: its need is unbounded (it takes an equal part of what the others leave).
HELD_BACK = 0.9
#: A member's need is what it asked for times this: room to grow before it is held back.
ROOM_TO_GROW = 1.25
#: The least need a member reports (requests/s): a quiet member can still send at once, and
#: asks for more at its next record.
MIN_NEED = 1.0


@final
class SharedPacer:
    """The fleet side of one `Pacer`: its reports of the limit, the fleet's limit and share.

    Args:
        pacer: the pacer (held weakly, as `SharedBreaker` holds its breaker).
        suffix: the shared limit's key suffix (``<name>:<target>``, encoded).
        serial: this link's number in its process.
        assumed_members: the fleet size assumed before the store was ever reached.
    """

    __slots__ = (
        "__weakref__",
        "_asked",
        "_asked_at",
        "_lock",
        "_need",
        "_pacer",
        "_reported_at",
        "_sends",
        "_sent",
        "_seq",
        "_settled",
        "assumed_members",
        "limit",
        "members",
        "namespace_members",
        "serial",
        "suffix",
    )

    kind = "p"

    def __init__(self, pacer: Pacer, suffix: str, serial: int, *, assumed_members: int) -> None:
        self._pacer = weakref.ref(pacer)
        self.suffix = suffix
        self.serial = serial
        self.assumed_members = assumed_members
        self.members = 0  # members pacing this target, as last seen
        self.namespace_members = 0  # members of the namespace, as last seen
        self.limit: float | None = None  # the fleet's limit, as last seen
        self._lock = threading.Lock()
        self._seq = 0  # the fence: the store takes a report only if newer than the last
        self._sent: float | None = None  # the limit reported last
        self._sends = 0  # the pacer's sends at the last record
        self._settled = False  # an answer came since joining (or rejoining)
        self._reported_at: float | None = None  # when (the pacer's clock); None: report now
        # Demand: the sends and refusals counted at the last measure, and when; the need
        # reported (requests/s; inf: held back, as much as it can get; None: not measured).
        self._asked = 0
        self._asked_at: float | None = None
        self._need: float | None = None
        pacer.share = self.local_share()
        after_fork_in_child(self)

    def _after_fork_in_child(self) -> None:
        # The child is a new member: it reports again, and paces at the share it last saw.
        self._lock = threading.Lock()
        self._reported_at = None
        self._settled = False

    def local_share(self) -> float:
        """The share of the limit a member paces at on its own (before the store answered,
        or while degraded): one over the most members last seen (of the target or the
        namespace), or over ``assumed_members`` before any."""
        members = max(self.members, self.namespace_members)
        return 1.0 / (members if members >= 1 else self.assumed_members)

    # -- the synchroniser's side -------------------------------------------------------------------

    def due(self) -> bool:
        """Whether this step should carry a record: the pacer sent since the last one (it
        needs the fleet's news), learned another limit, is due to repeat it (`REPORT_EVERY`),
        reported a need above `MIN_NEED` a measure ago or more (if it went quiet, its share
        goes back to the others), or the store is to be told again."""
        pacer = self._pacer()
        if pacer is None:
            return False
        stats = pacer.statistics()
        with self._lock:
            reported = self._reported_at
            if reported is None or stats.sends != self._sends or stats.limit != self._sent:
                return True
            now = pacer.clock.now()
            if self._need_may_fall(now):
                return True
            return stats.limit is not None and now - reported >= REPORT_EVERY

    def _need_may_fall(self, now: float) -> bool:
        """Whether the need reported is more than the least and a new measure is due (the
        caller holds the lock): without a send since, the need falls to `MIN_NEED`."""
        since, need = self._asked_at, self._need
        if since is None or now - since < MEASURE_OVER:
            return False
        return need is None or need > MIN_NEED

    def record(self) -> tuple[str, int]:
        """The step's record (`_scripts`): the limit this member learned, its need, and its
        fence."""
        pacer = self._pacer()
        stats = None if pacer is None else pacer.statistics()
        learned = None if stats is None else stats.limit
        with self._lock:
            self._seq += 1
            self._sent = learned
            if pacer is not None and stats is not None:
                now = pacer.clock.now()
                self._reported_at = now
                self._sends = stats.sends
                self._measure_need(stats, now)
            seq, need = self._seq, self._need
        shown = "-" if learned is None else repr(learned)
        needed = "-" if need is None else "+" if need == math.inf else repr(need)
        return f"p {self.serial} {self.suffix} {shown} {needed} {seq}", 0

    def _measure_need(self, stats: PacerStatistics, now: float) -> None:
        """Every `MEASURE_OVER` seconds, the need from what was asked since (the caller holds
        the lock): as much as it can get (inf) when that nearly fills the rate the member
        paces at."""
        asked = stats.sends + stats.refused
        since = self._asked_at
        if since is not None and now - since < MEASURE_OVER:
            return
        if since is not None:
            wanted = (asked - self._asked) / (now - since)
            held = stats.rate is not None and wanted >= HELD_BACK * stats.rate
            self._need = math.inf if held else max(MIN_NEED, wanted * ROOM_TO_GROW)
        self._asked, self._asked_at = asked, now

    def apply(self, reply: PacerReply, namespace_members: int) -> None:
        """Pace against the fleet's limit, at the share the store gave (one over the members
        pacing the target, or over the namespace's, while joining)."""
        with self._lock:
            self.members = reply.members
            self.namespace_members = namespace_members
            self.limit = reply.limit
            if not self._settled:
                share = self.local_share()
            elif reply.share is not None:
                share = reply.share
            else:
                share = 1.0 / reply.members
            self._settled = True
        pacer = self._pacer()
        if pacer is not None:
            pacer.adopt_limit(reply.limit)
            pacer.share = share

    def fall_back(self) -> None:
        """The step failed: keep the last limit seen, pace at the conservative share."""
        with self._lock:
            self._reported_at = None  # report again once the store answers
            self._settled = False
        pacer = self._pacer()
        if pacer is not None:
            pacer.share = self.local_share()

    def resend(self) -> None:
        """The store forgot this member: report at the next step."""
        with self._lock:
            self._reported_at = None
            self._settled = False

    def detach(self) -> None:
        """Leave the fleet: the pacer paces alone again, against its own limit only."""
        pacer = self._pacer()
        if pacer is not None:
            pacer.adopt_limit(None)
            pacer.share = 1.0
