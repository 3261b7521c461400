"""`RedisFleet`: budgets, throttle counts, breaker states and send-rate limits shared by every
process of a fleet.

Decide locally, share asynchronously: the protection objects decide every call without the
store, and a background thread (the `Synchroniser` of ``_sync``) runs one batched script call
(`_scripts`) per ``sync_interval`` for every attached object (`SharedBudget`,
`SharedThrottle`, `SharedBreaker`, `SharedPacer`). A store that is slow, hung, down or
answering garbage (every reply is checked: `_replies`) never delays or fails a call: the fleet
turns degraded and decides on local shares until a step succeeds again. docs/fleet.md is the
full account.

Fork-safe: a forked child is a new member with its own connections and synchroniser.
"""

from __future__ import annotations

import itertools
import threading
import time
import uuid
import weakref
from dataclasses import dataclass
from types import TracebackType
from typing import Any, final

from .._core.errors import ConfigError
from .._core.forks import after_fork_in_child
from .._protect.breaker import CircuitBreaker
from .._protect.budget import RetryBudget
from .._protect.pacer import Pacer
from .._protect.settings import bounded_duration, shown
from .._protect.targets import PerTarget
from .._protect.throttle import AdaptiveThrottle
from ._breaker import SharedBreaker
from ._budget import SharedBudget
from ._client import Store
from ._keys import encode_part, namespace_prefix
from ._pacer import SharedPacer
from ._replies import parse_lease
from ._sync import KEY_TTL_MS, STEP_SCRIPT, Link, Synchroniser
from ._throttle import SharedThrottle

__all__ = ["FleetStatistics", "RedisFleet", "live_fleets"]

# The open fleets of this process, for telemetry read at scrape time (`live_fleets`).
_LIVE: weakref.WeakSet[RedisFleet] = weakref.WeakSet()


def live_fleets() -> list[RedisFleet]:
    """The fleets of this process that are not closed (the instruments export their health)."""
    return [fleet for fleet in list(_LIVE) if not fleet._closed]


@dataclass(frozen=True, slots=True)
class FleetStatistics:
    """A snapshot of a `RedisFleet`.

    Attributes:
        member: this process's member id.
        members: the namespace's live members (processes) at the last step.
        degraded: the last step failed (or none succeeded yet): decisions are local only.
        last_sync_age: seconds since the last successful step, ``None`` before the first.
        sync_lag: seconds the last step took (its round trip), ``None`` before the first.
        syncs: successful steps since creation.
        sync_failures: failed steps since creation.
        targets: attached budgets, breakers and throttles.
        tokens_leased: budget tokens leased from the fleet since creation.
        open_circuits: attached breakers whose shared circuit is open.
        records: records the last successful step sent (the attached objects that had
            something to say, or were due for their periodic refresh).
    """

    member: str
    members: int
    degraded: bool
    last_sync_age: float | None
    sync_lag: float | None
    syncs: int
    sync_failures: int
    targets: int
    tokens_leased: int
    open_circuits: int
    records: int = 0


@final
class RedisFleet:
    """Share the protection objects' state across processes through Redis or Valkey.

    Args:
        url: ``redis://``, ``rediss://`` or ``unix://`` URL of the store.
        namespace: the fleet's name; processes share state only within one namespace.
        sync_interval: how often the synchroniser runs (a duration, in ``[10ms, 60s]``).
        timeout: the store's connect and socket timeout; half the interval by default.
        probe_timeout: the bound of a half-open probe's lease request.
        probe_lease: how long a probe's lease holds if its holder never reports.
        quorum: share of a target's members whose own trips open the shared circuit (at least
            two processes, whatever the share).
        max_lease: the most budget tokens one process holds at once.
        assumed_members: the fleet size a process assumes before it ever reached the store.
        start: start the synchroniser now (else on `start`).

    Raises:
        ConfigError: a value is out of range; the message names the field.
        ImportError: redis-py is missing (``pip install 'retrymw[fleet]'``).

    .. versionadded:: 0.3
    """

    def __init__(
        self,
        url: str,
        *,
        namespace: str,
        sync_interval: Any = "250ms",
        timeout: Any = None,
        probe_timeout: Any = "50ms",
        probe_lease: Any = "10s",
        quorum: float = 0.5,
        max_lease: int = 32,
        assumed_members: int = 10,
        start: bool = True,
    ) -> None:
        if not isinstance(namespace, str) or not namespace:
            raise ConfigError("namespace", shown(namespace), "must be a non-empty string", '"shop"')
        self._url = url
        self._namespace = namespace
        self._prefix = namespace_prefix(namespace)
        self._interval = bounded_duration(sync_interval, "sync_interval", '"250ms"')
        if not 0.01 <= self._interval <= 60.0:
            raise ConfigError(
                "sync_interval", shown(sync_interval), "must be in [10ms, 60s]", '"250ms"'
            )
        self._timeout = (
            self._interval / 2
            if timeout is None
            else bounded_duration(timeout, "timeout", '"100ms"')
        )
        self._probe_timeout = bounded_duration(probe_timeout, "probe_timeout", '"50ms"')
        self._probe_lease = bounded_duration(probe_lease, "probe_lease", '"10s"')
        if isinstance(quorum, bool) or not isinstance(quorum, (int, float)) or not 0 < quorum <= 1:
            raise ConfigError("quorum", shown(quorum), "must be a number in (0, 1]", "0.5")
        self._quorum = float(quorum)
        self._max_lease = _positive(max_lease, "max_lease", "32")
        self._assumed = _positive(assumed_members, "assumed_members", "10")
        self._member_ttl = max(1.0, 4 * self._interval)
        self._links: weakref.WeakKeyDictionary[Any, Link] = weakref.WeakKeyDictionary()
        self._serials = itertools.count(1)
        self._scoped: weakref.WeakKeyDictionary[PerTarget[Any], _Scoped] = (
            weakref.WeakKeyDictionary()
        )
        self._closed = False
        self._started = False
        self._fresh_process()
        after_fork_in_child(self)
        _LIVE.add(self)
        if start:
            self.start()

    def _fresh_process(self) -> None:
        """What belongs to one process: member id, connections, synchroniser, health."""
        self.member = uuid.uuid4().hex[:16]
        self._lock = threading.Lock()
        self._store = Store(self._url, timeout=self._timeout)
        self._probe_store = Store(self._url, timeout=self._probe_timeout)
        self._synchroniser = Synchroniser(
            self._store,
            member=self.member,
            namespace=self._namespace,
            interval=self._interval,
            member_ttl=self._member_ttl,
            links=self._attached,
        )
        self._born = time.monotonic()

    def _after_fork_in_child(self) -> None:
        # The parent's thread does not exist here and its sockets are the parent's.
        self._fresh_process()
        for link in list(self._links.values()):
            link.fall_back()
        if self._started and not self._closed:
            self._started = False
            self.start()

    # -- attaching ---------------------------------------------------------------------------------

    def attach(
        self, protection: Any, *, target: str | None = None, owner: str | None = None
    ) -> None:
        """Make ``protection`` fleet-wide: a budget, breaker, throttle, pacer or `PerTarget` of one.

        The shared state is named by an owner and a target. ``owner`` names a budget's owner
        (a `Retrier` gives its policy's name; ``"default"`` if not given); a breaker,
        throttle or pacer is owned by its own name (a `PerTarget`'s by its template's).
        ``target`` is ``""`` by default; a `PerTarget` names each of its targets itself,
        attaches each instance as it is created and detaches it when it is evicted. Attaching
        twice changes nothing.

        Raises:
            TypeError: ``protection`` is none of these, or lacks the fleet hooks.
        """
        if isinstance(protection, PerTarget):
            _require(protection, "add_creation_listener", "add_eviction_listener")
            template = protection.template
            with self._lock:
                scoped = self._scoped.get(protection)
                if scoped is None:
                    budgets = isinstance(template, RetryBudget)
                    scoped = _Scoped(self, owner if budgets else _name_of(template))
                    self._scoped[protection] = scoped
            # The same listeners for the same PerTarget: added once however often attached.
            protection.add_creation_listener(scoped.created)
            protection.add_eviction_listener(scoped.evicted)
            for name in protection:
                instance = protection.get(name)
                if instance is not None:
                    scoped.created(name, instance)
            return
        with self._lock:
            if protection in self._links or self._closed:
                return
            link = self._links[protection] = self._link(protection, target or "", owner)
        self._synchroniser.mark_urgent(link)  # a new target joins at the next step
        self._synchroniser.wake()  # which runs now, not an interval later

    def detach(self, protection: Any) -> None:
        """Make ``protection`` local again, and tell the store at the next step (idempotent)."""
        with self._lock:
            link = self._links.pop(protection, None)
        if link is None:
            return
        if isinstance(link, SharedBudget):
            protection.share_with(None)
        else:
            link.detach()
        self._synchroniser.leave(link.kind, link.serial, link.suffix)

    def _urgent(self, link: Link) -> None:
        """A link's record should go first at the next step (no I/O)."""
        self._synchroniser.mark_urgent(link)

    def _attached(self) -> list[Link]:
        with self._lock:
            return list(self._links.values())

    def _link(self, protection: Any, target: str, owner: str | None) -> Link:
        serial = next(self._serials)
        if isinstance(protection, RetryBudget):
            _require(protection, "share_with", "clone")
            stats = protection.statistics()
            share = SharedBudget(
                _suffix(owner or "default", target),
                serial,
                ratio=stats.ratio,
                burst=stats.burst,
                window=stats.window,
                min_capacity=stats.min_capacity,
                floor_credit=stats.credit_per_success,
                max_lease=self._max_lease,
                assumed_members=self._assumed,
                urgent=self._urgent,
            )
            protection.share_with(share)
            return share
        if isinstance(protection, CircuitBreaker):
            _require(protection, "adopt", "gate_probes")
            settings = protection.settings
            return SharedBreaker(
                protection,
                _suffix(protection.name, target),
                serial,
                quorum=self._quorum,
                recovery=settings.recovery_timeout,
                max_probes=settings.half_open_max_calls,
                lease=self._lease_probe,
                urgent=self._urgent,
            )
        if isinstance(protection, AdaptiveThrottle):
            _require(protection, "pool")
            return SharedThrottle(protection, _suffix(protection.name, target), serial)
        if isinstance(protection, Pacer):
            _require(protection, "adopt_limit")
            return SharedPacer(
                protection,
                _suffix(protection.name, target),
                serial,
                assumed_members=self._assumed,
            )
        raise TypeError(
            "RedisFleet.attach takes a RetryBudget, CircuitBreaker, AdaptiveThrottle, Pacer or a "
            f"PerTarget of one, not {type(protection).__name__}"
        )

    # -- the probe lease (request path, half-open only) --------------------------------------------

    def _lease_probe(self, link: SharedBreaker) -> int | None:
        """A fleet-wide probe lease: its version, ``None`` if refused, -1 if not asked.

        Never raises: a store that fails or answers garbage lets the breaker decide alone.
        """
        synchroniser = self._synchroniser
        if synchroniser.degraded:
            return -1
        try:
            raw = self._probe_store.run(
                STEP_SCRIPT,  # the same script as the steps': loaded already
                [self._prefix + "breaker:" + link.suffix, self._prefix + "probes:" + link.suffix],
                [
                    f"{self.member}:{uuid.uuid4().hex[:8]}",
                    link.max_probes,
                    max(1, round(self._probe_lease * 1000)),
                    KEY_TTL_MS,
                ],
            )
            granted, version = parse_lease(raw)
        except Exception as error:  # a store failure never fails the call: decide locally
            synchroniser.set_degraded(True, error)
            return -1
        return version if granted else None

    # -- the synchroniser --------------------------------------------------------------------------

    def start(self) -> None:
        """Start the synchroniser (idempotent)."""
        with self._lock:
            if self._started or self._closed:
                return
            self._started = True
            self._synchroniser.start()

    def sync(self) -> bool:
        """Run one step now (the synchroniser calls it); ``True`` if the store answered."""
        return self._synchroniser.sync()

    # -- health and lifetime -----------------------------------------------------------------------

    @property
    def namespace(self) -> str:
        """The fleet's telemetry label: its namespace, braces shown as parentheses (a label
        that reads like a hash tag confuses whoever greps keys)."""
        return self._namespace.replace("{", "(").replace("}", ")")

    def view_age(self) -> float:
        """Seconds since the last successful step, or since this process's start before one.

        What telemetry exports as the sync age: a member that never reached the store has a
        view as old as itself, which an alert on the age then sees grow.
        """
        last = self._synchroniser.last_sync
        return time.monotonic() - (self._born if last is None else last)

    def statistics(self) -> FleetStatistics:
        """Return a frozen snapshot of the fleet's health."""
        with self._lock:
            links = list(self._links.values())
        synchroniser = self._synchroniser
        last = synchroniser.last_sync
        return FleetStatistics(
            member=self.member,
            members=synchroniser.members,
            degraded=synchroniser.degraded,
            last_sync_age=None if last is None else time.monotonic() - last,
            sync_lag=synchroniser.lag,
            syncs=synchroniser.syncs,
            sync_failures=synchroniser.failures,
            targets=len(links),
            tokens_leased=sum(link.leased for link in links if isinstance(link, SharedBudget)),
            open_circuits=sum(
                1
                for link in links
                if isinstance(link, SharedBreaker) and link.shared_state == "open"
            ),
            records=synchroniser.records,
        )

    def close(self) -> None:
        """Stop the synchroniser and close the connections; the protection objects go local."""
        with self._lock:
            self._closed = True
            links = list(self._links.values())
        self._synchroniser.stop(self._interval + self._timeout + 1.0)
        for link in links:
            link.fall_back()
        self._synchroniser.degraded = True
        _LIVE.discard(self)
        for store in (self._store, self._probe_store):
            store.close()

    def __enter__(self) -> RedisFleet:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    async def __aenter__(self) -> RedisFleet:
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        # Joining the thread takes at most one step's timeout; off the event loop it would need
        # a worker thread for a few milliseconds, which anyio's to_thread gives.
        import anyio.to_thread

        await anyio.to_thread.run_sync(self.close)

    def __repr__(self) -> str:
        synchroniser = self._synchroniser
        state = "degraded" if synchroniser.degraded else "joined"
        return f"<RedisFleet {self._namespace!r} {state} members={synchroniser.members}>"


def _suffix(owner: str, target: str) -> str:
    """A shared object's key suffix: its owner and target, each encoded (`_keys`)."""
    return f"{encode_part(owner)}:{encode_part(target)}"


def _name_of(protection: Any) -> str:
    name = getattr(protection, "name", None)
    return name if isinstance(name, str) else "default"


class _Scoped:
    """A fleet's listeners on one `PerTarget`: attach what it creates, detach what it evicts."""

    __slots__ = ("fleet", "owner")

    def __init__(self, fleet: RedisFleet, owner: str | None) -> None:
        self.fleet = fleet
        self.owner = owner

    def created(self, target: str, instance: Any) -> None:
        self.fleet.attach(instance, target=target, owner=self.owner)

    def evicted(self, target: str, instance: Any) -> None:
        self.fleet.detach(instance)


def _positive(value: Any, field: str, example: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 1_000_000:
        raise ConfigError(field, shown(value), "must be an integer in [1, 1000000]", example)
    return value


def _require(protection: object, *hooks: str) -> None:
    missing = [hook for hook in hooks if not callable(getattr(protection, hook, None))]
    if missing:
        raise TypeError(
            f"{type(protection).__name__} lacks the fleet hook(s) {', '.join(missing)}: "
            "this retrymw predates RedisFleet"
        )
