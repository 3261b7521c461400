"""What every durable store holds and offers: `ResumeRecord`, the `Store` protocol, `StoreError`.

A store keeps one record per resume key. The engine reads it when a call starts, claims each
attempt with one atomic increment-and-read (so that processes sharing a key share one attempt
count), adds each scheduled backoff after a failure, and deletes the record when the call ends.
Keys are stored as SHA-256 digests: a resume key may be an ``Idempotency-Key`` and never lands in
a store, a log line or an error as it is.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from .._core.durations import parse_duration
from .._core.errors import ConfigError, RetrymwError

__all__ = ["DEFAULT_RETENTION", "ResumeRecord", "Store", "StoreError", "digest", "retention_of"]

#: How long a record outlives its budget's expiry (or, without a budget, its last update) when
#: its call never ends: long enough for a redeployed worker to find it, bounded so that a store
#: never grows without limit.
DEFAULT_RETENTION = 86_400.0


class StoreError(RetrymwError):
    """A store cannot be used: unreachable, unreadable, corrupt or of another schema.

    Raised when the store is constructed; during a call, store errors are logged and the call
    goes on with its state in memory.
    """


@dataclass(frozen=True, slots=True)
class ResumeRecord:
    """One call's durable progress.

    Attributes:
        attempts: attempts claimed so far for the key, in every process (an attempt is claimed
            just before it runs, so one that a crash interrupted counts).
        delay_so_far: backoff scheduled so far, in seconds.
        expires_at: Unix time at which the retry budget expires (set at the first failure:
            then + ``retry_budget``); ``None`` without a ``retry_budget`` or before a failure.
        next_at: Unix time at which the next attempt is due (end of the last scheduled backoff).
    """

    attempts: int
    delay_so_far: float
    expires_at: float | None
    next_at: float | None


@runtime_checkable
class Store(Protocol):
    """Durable per-call state for resume across restarts. Every method is synchronous.

    ``key`` is always a `digest` of the resume key; ``now`` is Unix time. A record the store
    keeps past ``retention`` seconds after its expiry (or its last update) is gone.
    """

    retention: float

    def load(self, key: str, now: float) -> ResumeRecord | None:
        """The live record of ``key``, or ``None``."""
        ...

    def claim(self, key: str, now: float, *, create: bool) -> ResumeRecord | None:
        """Atomically add one attempt to ``key``'s record and return the record.

        Without the record, ``create`` makes one (the call's first attempt); otherwise the
        answer is ``None``: another process ended the call and deleted it.
        """
        ...

    def add_failure(
        self, key: str, now: float, *, delay: float, expires_at: float | None, next_at: float
    ) -> ResumeRecord | None:
        """Atomically add ``delay``, set the expiry if unset and ``next_at``; return the record.

        ``None`` without the record: another process ended the call and deleted it, and a
        failure must not bring it back (its next claim would count from 1 again, and an attempt
        number that already ran would run twice).
        """
        ...

    def delete(self, key: str) -> None:
        """Forget ``key``'s record (the call ended)."""
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


def keep_until(record: ResumeRecord, now: float, retention: float) -> float:
    """When a record may be dropped: ``retention`` after its expiry, or after ``now``."""
    anchor = now if record.expires_at is None else max(now, record.expires_at)
    return anchor + retention
