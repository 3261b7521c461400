"""The synchroniser of a `RedisFleet`: one batched round trip to the store per interval.

It runs on a background thread (so sync and async users alike are served). Each step asks the
attached links whether they have something to say (`due`: successes to deposit, tokens spent,
a vote, new counts) and sends one record per link that has, plus the departures of detached
links, in *one* ``EVALSHA`` of `_scripts.STEP` (at most three commands with a script reload:
`_client.Store`). A step's size is bounded whatever the number of targets: urgent links first
(`mark_urgent`), then the others in turn, at most `MAX_RECORDS` records (halved while steps
take more than half the interval, grown back while they are quick) and `MAX_SCAN` links asked.
Every link is also sent at least once per `REFRESH` seconds, so the keys of quiet targets stay
alive. The reply is checked (`_replies`); each answer goes to its link, and the namespace's
circuit changes to the breakers they concern.

The thread never dies: a step that fails (the store slow, hung, down, answering garbage, or
anything unforeseen) is counted, marks the fleet degraded (one log line) and lets every link
fall back to local decisions; the next step that succeeds rejoins and sends every record
again. One `Synchroniser` belongs to one process: a forked child gets a new one.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable

from ._breaker import SharedBreaker
from ._budget import SharedBudget
from ._client import Script, Store
from ._keys import namespace_prefix
from ._pacer import SharedPacer
from ._replies import (
    BreakerReply,
    BudgetReply,
    PacerReply,
    ReplyError,
    ThrottleReply,
    parse_step,
)
from ._scripts import STEP
from ._throttle import SharedThrottle

__all__ = [
    "KEY_TTL_MS",
    "MAX_RECORDS",
    "MAX_SCAN",
    "REFRESH",
    "STEP_SCRIPT",
    "Link",
    "Synchroniser",
]

_logger = logging.getLogger("retrymw")

Link = SharedBudget | SharedBreaker | SharedThrottle | SharedPacer
KEY_TTL_MS = 600_000  # a namespace's keys outlive its last process by ten minutes
REFRESH = 60.0  # every link is sent at least this often (seconds), quiet or not
MAX_RECORDS = 1024  # records one step carries at most: ~10-15 ms of the store's time
MIN_RECORDS = 64  # ... and at least, however slow the steps are
MAX_SCAN = 4096  # links one step asks whether they have something to say
STEP_SCRIPT = Script(STEP)


class Synchroniser:
    """One process's steps against the store, and the fleet's health.

    Args:
        store: the store connection the steps use.
        member: this process's member id.
        namespace: the fleet's namespace.
        interval: seconds between steps.
        member_ttl: seconds a member counts without a step.
        links: returns the attached links at the time of the call.

    Attributes:
        degraded: the last step failed (or none succeeded yet).
        members: the namespace's live members at the last step.
        last_sync: the monotonic time of the last successful step, ``None`` before one.
        lag: seconds the last successful step took, ``None`` before one.
        syncs: successful steps.
        failures: failed steps.
        records: records sent by the last successful step.
    """

    def __init__(
        self,
        store: Store,
        *,
        member: str,
        namespace: str,
        interval: float,
        member_ttl: float,
        links: Callable[[], list[Link]],
    ) -> None:
        self._store = store
        self._member = member
        self._namespace = namespace
        self._members_key = namespace_prefix(namespace) + "members"
        self._interval = interval
        self._member_ttl = member_ttl
        self._links = links
        self._stepping = threading.Lock()  # one step at a time: the thread's, or a caller's
        self._leaving: list[str] = []  # departure records of detached links, for the next step
        self._leaving_lock = threading.Lock()
        self._wake = threading.Event()
        self._stopped = False
        self._thread: threading.Thread | None = None
        self._seen = -1  # the namespace's circuit-change counter at the last step
        self._refresh_at: dict[int, float] = {}  # link serial -> when it is sent anyway
        self._urgent: dict[int, Link] = {}  # serial -> link, to send first (`mark_urgent`)
        self._urgent_lock = threading.Lock()
        self._cursor = 0  # where the next step starts asking the links
        self._cap = MAX_RECORDS  # records per step now (`_fit`)
        self._rng = random.Random()
        self._joined = False
        self.degraded = True
        self.members = 0
        self.last_sync: float | None = None
        self.lag: float | None = None
        self.syncs = self.failures = 0
        self.records = 0

    def start(self) -> None:
        """Start the background thread (the fleet makes sure it is started once)."""
        self._thread = threading.Thread(
            target=self._run, name=f"retrymw-fleet-{self._namespace}", daemon=True
        )
        self._thread.start()

    def wake(self) -> None:
        """Run the next step now rather than an interval later."""
        self._wake.set()

    def stop(self, timeout: float) -> None:
        """Stop the thread, waiting at most ``timeout`` seconds for its step to end."""
        self._stopped = True
        self._wake.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)

    @property
    def alive(self) -> bool:
        """Whether the background thread runs."""
        return self._thread is not None and self._thread.is_alive()

    def _run(self) -> None:
        while not self._stopped:
            self.sync()  # never raises: a failed step is the fleet's health, not the thread's
            self._wake.wait(self._interval)
            self._wake.clear()

    def leave(self, kind: str, serial: int, suffix: str) -> None:
        """Tell the store at the next step that a link left (evicted, detached)."""
        with self._leaving_lock:
            self._leaving.append(f"x {kind} {serial} {suffix}")
        self._refresh_at.pop(serial, None)

    def sync(self) -> bool:
        """Run one step now; ``True`` if the store answered as its script does."""
        with self._stepping:
            try:
                return self._step()
            except Exception as error:  # anything unforeseen: count it, never die
                self._failed(self._links(), [], error)
                return False

    def _step(self) -> bool:
        links = self._links()
        with self._leaving_lock:  # departures are records too: at most a step's worth
            leaving, self._leaving = self._leaving[:MAX_RECORDS], self._leaving[MAX_RECORDS:]
        started = time.monotonic()
        sent, lines, wants = self._records(links, started)
        kinds = ["x"] * len(leaving) + [link.kind for link in sent]
        try:
            raw = self._store.run(
                STEP_SCRIPT,
                [self._members_key],
                [
                    self._member,
                    max(1, round(self._member_ttl * 1000)),
                    KEY_TTL_MS,
                    self._seen,
                    "\n".join(leaving + lines),
                ],
            )
            reply = parse_step(raw, kinds, [0] * len(leaving) + wants)
        except Exception as error:  # the store's failure is the fleet's health, never a call's
            self._failed(links, leaving, error)
            return False
        for link, answer in zip(sent, reply.records[len(leaving) :], strict=True):
            if isinstance(link, SharedBudget) and isinstance(answer, BudgetReply):
                link.apply(answer)
            elif isinstance(link, SharedBreaker) and isinstance(answer, BreakerReply):
                link.apply(answer, reply.now)
            elif isinstance(link, SharedThrottle) and isinstance(answer, ThrottleReply):
                link.apply(answer)
            elif isinstance(link, SharedPacer) and isinstance(answer, PacerReply):
                link.apply(answer, reply.members)
        if reply.changes:
            breakers = {link.suffix: link for link in links if isinstance(link, SharedBreaker)}
            for change in reply.changes:
                found = breakers.get(change.suffix)
                if found is not None:
                    found.adopt(change.state, reply.now)
        if reply.resend:
            for link in links:
                link.resend()
        self._seen = reply.seq
        self.records = len(lines)
        self.lag = time.monotonic() - started
        self._fit(self.lag)
        self.last_sync = time.monotonic()
        self.syncs += 1
        self.members = reply.members
        self.set_degraded(False, None)
        return True

    def _records(self, links: list[Link], now: float) -> tuple[list[Link], list[str], list[int]]:
        """The links this step speaks for, their records and what each may be granted.

        Urgent links first (`mark_urgent`: a budget that spent or was denied, a breaker that
        voted or holds a verdict), then the others in turn from where the last step stopped,
        at most `MAX_RECORDS` records (fewer while steps are slow: `_fit`) and `MAX_SCAN` links
        looked at: a step's cost is bounded whatever the number of targets, and with more busy
        links than a step carries each is sent in its turn (its deposits and counts a few
        intervals later).
        """
        sent: list[Link] = []
        lines: list[str] = []
        wants: list[int] = []
        refresh_at = self._refresh_at
        if len(refresh_at) > 2 * len(links) + 64:  # links collected without a departure
            live = {link.serial for link in links}
            self._refresh_at = refresh_at = {s: t for s, t in refresh_at.items() if s in live}
        with self._urgent_lock:
            urgent, self._urgent = self._urgent, {}
        chosen: set[int] = set()
        for link in list(urgent.values()):
            if len(lines) >= self._cap:
                with self._urgent_lock:  # the rest go first next time
                    self._urgent.setdefault(link.serial, link)
                continue
            self._add(link, now, sent, lines, wants, force=False)
            chosen.add(link.serial)
        count = len(links)
        start = self._cursor % count if count else 0
        looked = 0
        while looked < min(count, MAX_SCAN) and len(lines) < self._cap:
            link = links[(start + looked) % count]
            looked += 1
            if link.serial in chosen:
                continue
            due_at = refresh_at.get(link.serial)
            if due_at is None:  # a new link: its first refresh falls anywhere in the period
                due_at = refresh_at[link.serial] = now + self._rng.uniform(0, REFRESH)
            if link.due() or now >= due_at:
                self._add(link, now, sent, lines, wants, force=True)
        self._cursor = start + looked
        return sent, lines, wants

    def _fit(self, lag: float) -> None:
        """Keep steps within their interval: halve the records a step carries when one took
        more than half the interval (a busy store shared by many members, a loaded machine),
        grow them back slowly when steps are quick."""
        if lag > self._interval / 2:
            self._cap = max(MIN_RECORDS, self._cap // 2)
        elif lag < self._interval / 4:
            self._cap = min(MAX_RECORDS, self._cap + MIN_RECORDS)

    def _add(
        self,
        link: Link,
        now: float,
        sent: list[Link],
        lines: list[str],
        wants: list[int],
        *,
        force: bool,
    ) -> None:
        if not force and not link.due():
            return
        line, want = link.record()
        sent.append(link)
        lines.append(line)
        wants.append(want)
        self._refresh_at[link.serial] = now + REFRESH

    def mark_urgent(self, link: Link) -> None:
        """Send ``link``'s record at the next step, before the others (thread-safe, no I/O)."""
        with self._urgent_lock:
            self._urgent[link.serial] = link

    def _failed(self, links: list[Link], leaving: list[str], error: BaseException) -> None:
        self.failures += 1
        if leaving:  # say it again next time
            with self._leaving_lock:
                self._leaving[:0] = leaving
        try:
            for link in links:
                link.fall_back()
        except Exception:  # pragma: no cover - a fall-back is local bookkeeping
            _logger.exception("retrymw fleet %r: falling back failed", self._namespace)
        self.set_degraded(True, error)

    def set_degraded(self, degraded: bool, error: BaseException | None) -> None:
        """Record the store's health, with one log line when it changes."""
        if degraded == self.degraded and (degraded or self._joined):
            return
        self.degraded = degraded
        if degraded:
            reason = type(error).__name__
            if isinstance(error, ReplyError):
                reason = f"invalid reply: {error}"
            _logger.warning(
                "retrymw fleet %r: store unreachable (%s); deciding locally on a conservative "
                "share until it answers",
                self._namespace,
                reason,
            )
        else:
            _logger.info(
                "retrymw fleet %r: %s the fleet (%d members)",
                self._namespace,
                "rejoined" if self._joined else "joined",
                self.members,
            )
            self._joined = True
