"""`SQLiteStore`: the embedded default store (stdlib sqlite3, WAL) for one machine's processes."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final, Literal

from .._core.durations import parse_duration
from .._core.errors import ConfigError
from .._core.forks import after_fork_in_child
from .._core.redact import safe_repr
from ._base import (
    Claim,
    CorruptRecord,
    ResumeRecord,
    StoreError,
    claimed,
    keep_until,
    retention_of,
)

__all__ = ["SQLiteStore"]

_TABLE = "retrymw_resume"
_COLUMNS = "attempts, delay_so_far, expires_at, next_at, ended, keep_until"
_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS {_TABLE} (
    key TEXT PRIMARY KEY,
    attempts INTEGER NOT NULL,
    delay_so_far REAL NOT NULL,
    expires_at REAL,
    next_at REAL,
    ended INTEGER NOT NULL DEFAULT 0,
    keep_until REAL NOT NULL
) WITHOUT ROWID
"""
# A row is live while its keep_until is a number not yet past (SQLite sorts text above every
# number: a corrupt keep_until must not keep a row forever).
_LIVE = "typeof(keep_until) IN ('integer', 'real') AND keep_until >= ?"
# Expired rows are purged at construction and then once per this many claims: a bounded,
# amortised cost instead of a sweep on every call.
_PURGE_EVERY = 256
_ENDED: Final = "ended"  # what `_read` returns for a tombstone


class SQLiteStore:
    """Resume records in a SQLite file, shared by every process of one machine that opens it.

    The file uses write-ahead logging, so readers never wait for a writer; each claim is one
    ``BEGIN IMMEDIATE`` transaction that reads the record, checks it and writes the next
    attempt, so processes sharing a key never count one attempt twice nor go past the limit.
    Each process (and each forked child, which reopens the file) holds one connection, used
    under a lock by its threads.

    Args:
        path: the database file; created with its table if missing. Its directory must exist.
        retention: how long a record outlives its budget's expiry (or its last update without
            a budget) when its call never ends; a duration, 24 h by default.
        timeout: how long an operation waits for another process's write lock (and for
            another thread of this process using the connection).

    Raises:
        StoreError: the file cannot be opened or created, is not a SQLite database, or holds a
            ``retrymw_resume`` table of another shape.
        ConfigError: ``retention`` or ``timeout`` is not a valid duration.

    .. versionadded:: 0.2
    """

    __slots__ = ("__weakref__", "_claims", "_connection", "_lock", "_timeout", "path", "retention")

    def __init__(
        self, path: str | os.PathLike[str], *, retention: Any = None, timeout: Any = "1s"
    ) -> None:
        if not isinstance(path, (str, os.PathLike)) or not str(path):
            raise ConfigError("path", path, "must be a file path", '"/var/lib/app/retries.db"')
        self.path = Path(path)
        self.retention = retention_of(retention)
        self._timeout = parse_duration(timeout, field="timeout")
        self._lock = threading.Lock()
        self._claims = 0
        self._connection: sqlite3.Connection | None = None
        try:
            with self._connected() as connection:
                self._purge(connection, time.time())
        except sqlite3.Error as error:
            raise StoreError(
                f"SQLiteStore cannot use {safe_repr(str(self.path))}: {error}; "
                "expected a writable path such as '/var/lib/app/retries.db' in an existing "
                "directory, holding a retrymw store or nothing yet"
            ) from None
        after_fork_in_child(self)

    def _after_fork_in_child(self) -> None:
        # The parent's connection is abandoned, never closed: closing it here could checkpoint
        # or remove the WAL files the parent is still using.
        self._lock = threading.Lock()
        self._connection = None

    def _connect(self) -> sqlite3.Connection:
        connection = self._connection
        if connection is None:
            connection = sqlite3.connect(
                self.path,
                timeout=self._timeout,
                isolation_level=None,  # transactions are explicit
                check_same_thread=False,  # shared by threads, under self._lock
            )
            try:
                connection.execute("PRAGMA journal_mode=WAL")
                # NORMAL in WAL mode is durable across a process crash (what resume is for);
                # only a power loss may lose the last transactions.
                connection.execute("PRAGMA synchronous=NORMAL")
                connection.execute(_SCHEMA)
                connection.execute(f"SELECT key, {_COLUMNS} FROM {_TABLE} LIMIT 1")
            except BaseException:
                connection.close()
                raise
            self._connection = connection
        return connection

    @contextlib.contextmanager
    def _connected(self) -> Iterator[sqlite3.Connection]:
        """This process's connection, held by this thread; the wait for it is bounded.

        An operation the engine stopped waiting for (its call's deadline) may still hold it:
        the next one waits at most ``timeout``, so no thread queues behind it for ever.
        """
        if not self._lock.acquire(timeout=self._timeout):
            raise TimeoutError(
                f"another thread of this process held the store for {self._timeout:g}s"
            )
        try:
            yield self._connect()
        finally:
            self._lock.release()

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """A write transaction; rolled back on any error, and the error kept as it is.

        SQLite rolls some failed transactions back by itself (a full disk, an I/O error): a
        ROLLBACK then fails with "cannot rollback", which must not hide what failed.
        """
        with self._connected() as connection:
            connection.execute("BEGIN IMMEDIATE")
            try:
                yield connection
                connection.execute("COMMIT")
            except BaseException:
                if connection.in_transaction:
                    with contextlib.suppress(sqlite3.Error):
                        connection.execute("ROLLBACK")
                raise

    def load(self, key: str, now: float) -> ResumeRecord | None:
        """See `Store.load`."""
        with self._connected() as connection:
            row = connection.execute(
                f"SELECT {_COLUMNS} FROM {_TABLE} WHERE key = ?", (key,)
            ).fetchone()
        found = _read(row, now)
        return found if isinstance(found, ResumeRecord) else None

    def claim(
        self, key: str, now: float, *, limit: int, known: ResumeRecord | None
    ) -> Claim | None:
        """See `Store.claim`."""
        with self._transaction() as connection:
            self._claims += 1
            if self._claims % _PURGE_EVERY == 0:
                self._purge(connection, now)
            row = connection.execute(
                f"SELECT {_COLUMNS} FROM {_TABLE} WHERE key = ?", (key,)
            ).fetchone()
            try:
                found = _read(row, now)
            except ValueError:
                found = None  # unreadable: replaced, as if lost
            if found == _ENDED and known is not None:
                return None  # another process ended the call
            live = found if isinstance(found, ResumeRecord) else None
            claim = claimed(live, known, limit)
            if claim.number is not None:
                record = claim.record
                keep = max(
                    keep_until(record.expires_at, now, self.retention),
                    row[5] if live is not None else 0.0,
                )
                connection.execute(
                    f"INSERT OR REPLACE INTO {_TABLE} (key, {_COLUMNS}) "
                    "VALUES (?, ?, ?, ?, ?, 0, ?)",
                    (key, record.attempts, record.delay_so_far, record.expires_at,
                     record.next_at, keep),
                )  # fmt: skip
        return claim

    def add_failure(
        self, key: str, now: float, *, delay: float, expires_at: float | None, next_at: float
    ) -> ResumeRecord | None:
        """See `Store.add_failure`."""
        with self._transaction() as connection:
            row = connection.execute(
                f"SELECT {_COLUMNS} FROM {_TABLE} WHERE key = ?", (key,)
            ).fetchone()
            try:
                found = _read(row, now)
            except ValueError:
                return None
            if not isinstance(found, ResumeRecord):
                return None  # ended, or lost: never brought back here
            record = ResumeRecord(
                found.attempts,
                found.delay_so_far + delay,
                found.expires_at if found.expires_at is not None else expires_at,
                next_at,
            )
            keep = max(keep_until(record.expires_at, now, self.retention), row[5])
            connection.execute(
                f"UPDATE {_TABLE} SET delay_so_far = ?, expires_at = ?, next_at = ?, "
                "keep_until = ? WHERE key = ?",
                (record.delay_so_far, record.expires_at, record.next_at, keep, key),
            )
        return record

    def end(self, key: str, now: float, *, linger: float) -> None:
        """See `Store.end`."""
        with self._transaction() as connection:
            connection.execute(
                f"INSERT OR REPLACE INTO {_TABLE} (key, {_COLUMNS}) "
                "VALUES (?, 0, 0.0, NULL, NULL, 1, ?)",
                (key, now + max(linger, 1.0)),
            )

    def close(self) -> None:
        """Close this process's connection; the next operation reopens it."""
        with self._lock:
            if self._connection is not None:
                self._connection.close()
                self._connection = None

    def __len__(self) -> int:
        """The number of live records, tombstones aside (for operators and tests)."""
        with self._connected() as connection:
            row = connection.execute(
                f"SELECT count(*) FROM {_TABLE} WHERE ended = 0 AND {_LIVE}", (time.time(),)
            ).fetchone()
        return int(row[0])

    def __repr__(self) -> str:
        return f"<SQLiteStore path={str(self.path)!r} retention={self.retention:g}s>"

    def _purge(self, connection: sqlite3.Connection, now: float) -> None:
        connection.execute(f"DELETE FROM {_TABLE} WHERE NOT ({_LIVE})", (now,))


def _read(row: tuple[Any, ...] | None, now: float) -> ResumeRecord | Literal["ended"] | None:
    """A row as a live record, `_ENDED` for a tombstone, ``None`` when absent or expired.

    Raises:
        CorruptRecord: a field holds what no retrymw process writes.
    """
    if row is None:
        return None
    attempts, delay, expires_at, next_at, ended, keep = row
    if type(keep) not in (int, float):
        raise CorruptRecord("keep_until", keep, "a Unix time")
    if keep < now:
        return None
    if ended not in (0, 1) or type(ended) is not int:
        raise CorruptRecord("ended", ended, "0 or 1")
    if ended:
        return _ENDED
    return ResumeRecord(attempts, delay, expires_at, next_at)
