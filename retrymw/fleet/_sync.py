"""The synchroniser of a `RedisFleet`: one pipelined round trip to the store per interval.

It runs on a background thread (so sync and async users alike are served): each step sends one
atomic script per attached object (`_scripts`) in one pipeline, hands each reply to its link and
keeps the fleet's health (degraded or joined, members, lag). A step that fails marks the fleet
degraded and lets every link fall back to local decisions; it never reaches a call. One
`Synchroniser` belongs to one process: a forked child gets a new one.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from . import _scripts
from ._breaker import SharedBreaker
from ._budget import SharedBudget
from ._throttle import SharedThrottle

__all__ = ["KEY_TTL_MS", "Link", "Synchroniser"]

_logger = logging.getLogger("retrymw")

Link = SharedBudget | SharedBreaker | SharedThrottle
KEY_TTL_MS = 600_000  # a namespace's keys outlive its last process by ten minutes


class Synchroniser:
    """One process's steps against the store, its script cache and the fleet's health.

    Args:
        client: the store connection the steps use.
        member: this process's member id.
        namespace: the fleet's namespace, braces already replaced.
        interval: seconds between steps.
        member_ttl: seconds a member counts without a step.
        links: returns the attached links at the time of the call.

    Attributes:
        degraded: the last step failed (or none succeeded yet).
        members: the most members any link counted at the last step.
        last_sync: the monotonic time of the last successful step, ``None`` before one.
        lag: seconds the last successful step took, ``None`` before one.
        syncs: successful steps.
        failures: failed steps.
    """

    def __init__(
        self,
        client: Any,
        *,
        member: str,
        namespace: str,
        interval: float,
        member_ttl: float,
        links: Callable[[], list[Link]],
    ) -> None:
        self._client = client
        self._member = member
        self._namespace = namespace
        self._interval = interval
        self._member_ttl = member_ttl
        self._links = links
        self._stepping = threading.Lock()  # one step at a time: the thread's, or a caller's
        self._wake = threading.Event()
        self._stopped = False
        self._thread: threading.Thread | None = None
        self._shas: dict[str, str] = {}
        self._joined = False
        self.degraded = True
        self.members = 0
        self.last_sync: float | None = None
        self.lag: float | None = None
        self.syncs = self.failures = 0

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

    def _run(self) -> None:
        while not self._stopped:
            self.sync()
            self._wake.wait(self._interval)
            self._wake.clear()

    def sync(self) -> bool:
        """Run one step now; ``True`` if the store answered."""
        with self._stepping:
            return self._step()

    def _step(self) -> bool:
        links = self._links()
        if not links:
            return not self.degraded
        started = time.monotonic()
        try:
            replies = self._round_trip(links)
        except Exception as error:  # the store's failure is the fleet's health, never a call's
            self.failures += 1
            for link in links:
                link.fall_back()
            self.set_degraded(True, error)
            return False
        for link, reply in zip(links, replies, strict=True):
            link.apply(reply)
        self.lag = time.monotonic() - started
        self.last_sync = time.monotonic()
        self.syncs += 1
        self.members = max(
            (
                int(reply[3] if isinstance(link, SharedBreaker) else reply[2])
                for link, reply in zip(links, replies, strict=True)
            ),
            default=0,
        )
        self.set_degraded(False, None)
        return True

    def _round_trip(self, links: list[Link]) -> list[Any]:
        member_ttl = max(1, round(self._member_ttl * 1000))
        for attempt in (1, 2):
            pipe = self._client.pipeline(transaction=False)
            for link in links:
                target = link.target
                if isinstance(link, SharedBudget):
                    keys = [self.key(target, "budget"), self.key(target, "members")]
                    args = link.prepare()
                elif isinstance(link, SharedBreaker):
                    keys = [
                        self.key(target, name) for name in ("breaker", "votes", "members", "probes")
                    ]
                    args = link.prepare(self._member_ttl)
                else:
                    keys = [self.key(target, "throttle"), self.key(target, "members")]
                    args = link.prepare()
                pipe.evalsha(
                    self.sha(link.kind, self._client),
                    len(keys),
                    *keys,
                    self._member,
                    *args,
                    member_ttl,
                    KEY_TTL_MS,
                )
            try:
                return list(pipe.execute())
            except Exception as error:
                if attempt == 2 or type(error).__name__ != "NoScriptError":
                    raise
                self._shas.clear()  # the store lost its scripts (restart, failover): load again
        raise AssertionError("unreachable")  # pragma: no cover

    def sha(self, kind: str, client: Any) -> str:
        """The SHA of the ``kind`` script, loaded into the store through ``client`` if new."""
        sha = self._shas.get(kind)
        if sha is None:
            source = {
                "budget": _scripts.BUDGET,
                "breaker": _scripts.BREAKER,
                "throttle": _scripts.THROTTLE,
                "probe": _scripts.PROBE,
            }[kind]
            sha = self._shas[kind] = str(client.script_load(source))
        return sha

    def key(self, target: str, kind: str) -> str:
        """The store key of ``target``'s ``kind`` state (one hash slot per target)."""
        return f"retrymw:{{{self._namespace}:{target}}}:{kind}"

    def set_degraded(self, degraded: bool, error: BaseException | None) -> None:
        """Record the store's health, with one log line when it changes."""
        if degraded == self.degraded and (degraded or self._joined):
            return
        self.degraded = degraded
        if degraded:
            _logger.warning(
                "retrymw fleet %r: store unreachable (%s); deciding locally on a conservative "
                "share until it answers",
                self._namespace,
                type(error).__name__,
            )
        else:
            _logger.info(
                "retrymw fleet %r: %s the fleet (%d members)",
                self._namespace,
                "rejoined" if self._joined else "joined",
                self.members,
            )
            self._joined = True
