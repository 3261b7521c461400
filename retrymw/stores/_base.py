"""What every durable store holds and offers: `ResumeRecord`, `Claim`, the `Store` protocol.

A store keeps one record per resume key. The engine reads it when a call starts, claims each
attempt with one atomic step that takes the next attempt number only while one is left (so
that processes sharing a key share one attempt count and never exceed it), adds each scheduled
backoff after a failure, and ends the record when the call ends. An ended record is a small
tombstone kept while the call's other processes may still come back to it: they stop instead
of counting afresh, while a record that vanished without one (a flushed or failed-over store)
is rebuilt from what the claiming process knows. Keys are stored as SHA-256 digests: a resume
key may be an ``Idempotency-Key`` and never lands in a store, a log line or an error as it is.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from .._core.durations import parse_duration
from .._core.errors import ConfigError, RetrymwError
from .._core.redact import safe_repr

__all__ = [
    "DEFAULT_RETENTION",
    "Claim",
    "CorruptRecord",
    "ResumeRecord",
    "Store",
    "StoreError",
    "digest",
    "retention_of",
]

#: How long a record outlives its budget's expiry (or, without a budget, its last update) when
#: its call never ends: long enough for a redeployed worker to find it, bounded so that a store
#: never grows without limit.
DEFAULT_RETENTION = 86_400.0

#: The largest attempt count a record may hold: far above any policy, far below overflow.
MAX_ATTEMPTS = 1_000_000


class StoreError(RetrymwError):
    """A store cannot be used: unreachable, unreadable, corrupt or of another schema.

    Raised when the store is constructed; during a call, store errors are logged and the call
    goes on with its state in memory.
    """


class CorruptRecord(ValueError):
    """A stored record that no retrymw process wrote: a field of the wrong type or range.

    Raised by `ResumeRecord` and by a store's ``load``; the engine drops such a record with one
    log line and runs the call as fresh (a claim replaces it).
    """

    def __init__(self, field: str, value: object, expected: str) -> None:
        super().__init__(f"{field}: {safe_repr(value, 40)} is not {expected}")
        self.field = field


@dataclass(frozen=True, slots=True)
class ResumeRecord:
    """One call's durable progress; every value is checked (`CorruptRecord` otherwise).

    Attributes:
        attempts: attempts claimed so far for the key, in every process (an attempt is claimed
            just before it runs, so one that a crash interrupted counts): 0 or more.
        delay_so_far: backoff scheduled so far, in seconds: finite, 0 or more.
        expires_at: Unix time at which the retry budget expires (set at the first failure:
            then + ``retry_budget``); ``None`` without a ``retry_budget`` or before a failure.
        next_at: Unix time at which the next attempt is due (end of the last scheduled backoff).
    """

    attempts: int
    delay_so_far: float
    expires_at: float | None
    next_at: float | None

    def __post_init__(self) -> None:
        attempts = self.attempts
        if type(attempts) is not int or not 0 <= attempts <= MAX_ATTEMPTS:
            raise CorruptRecord("attempts", attempts, f"a count from 0 to {MAX_ATTEMPTS}")
        object.__setattr__(self, "delay_so_far", _seconds("delay_so_far", self.delay_so_far))
        if self.delay_so_far < 0.0:
            raise CorruptRecord("delay_so_far", self.delay_so_far, "0 or more seconds")
        for field in ("expires_at", "next_at"):
            value = getattr(self, field)
            if value is not None:
                object.__setattr__(self, field, _seconds(field, value))


def _seconds(field: str, value: object) -> float:
    """``value`` as a finite float, or `CorruptRecord` naming ``field``."""
    if type(value) not in (int, float) or not math.isfinite(value):  # type: ignore[arg-type]
        raise CorruptRecord(field, value, "a finite number of seconds")
    return float(value)  # type: ignore[arg-type]


@dataclass(frozen=True, slots=True)
class Claim:
    """What a claim did: the attempt number it took (``None``: none was left) and the record
    as the claim left it."""

    number: int | None
    record: ResumeRecord


@runtime_checkable
class Store(Protocol):
    """Durable per-call state for resume across restarts. Every method is synchronous.

    ``key`` is always a `digest` of the resume key; ``now`` is Unix time. A record the store
    keeps past ``retention`` seconds after its expiry (or its last update) is gone. The engine
    calls the methods from worker threads (one at a time per call, in order) and gives up
    waiting for one when the call's deadline says so: a store must be usable from any thread.
    """

    retention: float

    def load(self, key: str, now: float) -> ResumeRecord | None:
        """The live record of ``key``, or ``None`` (none, expired, or ended).

        Raises:
            ValueError: the stored record is unreadable (`CorruptRecord`).
        """
        ...

    def claim(
        self, key: str, now: float, *, limit: int, known: ResumeRecord | None
    ) -> Claim | None:
        """Atomically take the next attempt of ``key``'s call if it is at most ``limit``.

        ``known`` is the progress the caller has seen, ``None`` for a call that has not seen
        the record yet. The claim counts from the live record; without one (none, expired or
        unreadable) from ``known`` (the store lost the record: it is rebuilt) or from zero.
        ``None`` when the record is a tombstone and ``known`` is given: another process ended
        the call. A tombstone with ``known`` ``None`` is a new call with the same key.
        """
        ...

    def add_failure(
        self, key: str, now: float, *, delay: float, expires_at: float | None, next_at: float
    ) -> ResumeRecord | None:
        """Atomically add ``delay``, set the expiry if unset and ``next_at``; return the record.

        ``None`` without a live record (ended, lost or unreadable): nothing is written; the
        next claim tells ended from lost.
        """
        ...

    def end(self, key: str, now: float, *, linger: float) -> None:
        """The call ended: replace ``key``'s record with a tombstone kept ``linger`` seconds."""
        ...

    def close(self) -> None:
        """Release the store's connections."""
        ...


def digest(key: str) -> str:
    """The form a resume key is stored in: hex SHA-256, fixed length and not reversible."""
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


def retention_of(value: object) -> float:
    """Validate a store's ``retention`` argument (a duration, at least one second)."""
    seconds = DEFAULT_RETENTION if value is None else parse_duration(value, field="retention")
    if seconds < 1.0:
        raise ConfigError("retention", value, "must be at least 1s", '"24h"')
    return seconds


def keep_until(expires_at: float | None, now: float, retention: float) -> float:
    """When a record may be dropped: ``retention`` after its budget's expiry, or after ``now``."""
    anchor = now if expires_at is None else max(now, expires_at)
    return anchor + retention


def claimed(live: ResumeRecord | None, known: ResumeRecord | None, limit: int) -> Claim:
    """The claim a store makes from its ``live`` record (or, lost, the caller's ``known``)."""
    base = (
        live
        if live is not None
        else known
        if known is not None
        else ResumeRecord(0, 0.0, None, None)
    )
    if base.attempts >= limit:
        return Claim(None, base)
    record = ResumeRecord(base.attempts + 1, base.delay_so_far, base.expires_at, base.next_at)
    return Claim(record.attempts, record)
