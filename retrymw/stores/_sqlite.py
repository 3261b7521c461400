"""`SQLiteStore`: the embedded default store (stdlib sqlite3, WAL) for one machine's processes."""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

from .._core.durations import parse_duration
from .._core.errors import ConfigError
from .._core.forks import after_fork_in_child
from .._core.redact import safe_repr
from ._base import ResumeRecord, StoreError, keep_until, retention_of

__all__ = ["SQLiteStore"]

_TABLE = "retrymw_resume"
_COLUMNS = "attempts, delay_so_far, expires_at, next_at"
_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS {_TABLE} (
    key TEXT PRIMARY KEY,
    attempts INTEGER NOT NULL,
    delay_so_far REAL NOT NULL,
    expires_at REAL,
    next_at REAL,
    keep_until REAL NOT NULL
) WITHOUT ROWID
"""
# Expired rows are purged at construction and then once per this many claims: a bounded,
# amortised cost instead of a sweep on every call.
_PURGE_EVERY = 256


class SQLiteStore:
    """Resume records in a SQLite file, shared by every process of one machine that opens it.

    The file uses write-ahead logging, so readers never wait for a writer; each claim is one
    ``BEGIN IMMEDIATE`` transaction, so processes sharing a key never count one attempt twice.
    Each process (and each forked child, which reopens the file) holds one connection, used
    under a lock by its threads.

    Args:
        path: the database file; created with its table if missing. Its directory must exist.
        retention: how long a record outlives its budget's expiry (or its last update without
            a budget) when its call never ends; a duration, 24 h by default.
        timeout: how long an operation waits for another process's write lock.

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
            connection = self._connect()
            with self._lock:
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
                connection.execute(f"SELECT key, {_COLUMNS}, keep_until FROM {_TABLE} LIMIT 1")
            except BaseException:
                connection.close()
                raise
            self._connection = connection
        return connection

    def load(self, key: str, now: float) -> ResumeRecord | None:
        """See `Store.load`."""
        with self._lock:
            row = (
                self._connect()
                .execute(
                    f"SELECT {_COLUMNS} FROM {_TABLE} WHERE key = ? AND keep_until >= ?",
                    (key, now),
                )
                .fetchone()
            )
        return None if row is None else ResumeRecord(*row)

    def claim(self, key: str, now: float, *, create: bool) -> ResumeRecord | None:
        """See `Store.claim`."""
        with self._lock:
            connection = self._connect()
            self._claims += 1
            if self._claims % _PURGE_EVERY == 0:
                self._purge(connection, now)
            connection.execute("BEGIN IMMEDIATE")
            try:
                # A record past its retention counts as absent: the claim starts it afresh.
                connection.execute(
                    f"DELETE FROM {_TABLE} WHERE key = ? AND keep_until < ?", (key, now)
                )
                if create:
                    row = connection.execute(
                        f"INSERT INTO {_TABLE} (key, attempts, delay_so_far, keep_until) "
                        "VALUES (?, 1, 0.0, ?) ON CONFLICT (key) DO UPDATE SET "
                        "attempts = attempts + 1, "
                        "keep_until = max(keep_until, excluded.keep_until) "
                        f"RETURNING {_COLUMNS}",
                        (key, now + self.retention),
                    ).fetchone()
                else:
                    row = connection.execute(
                        f"UPDATE {_TABLE} SET attempts = attempts + 1, "
                        "keep_until = max(keep_until, ?) "
                        f"WHERE key = ? RETURNING {_COLUMNS}",
                        (now + self.retention, key),
                    ).fetchone()
                connection.execute("COMMIT")
            except BaseException:
                connection.execute("ROLLBACK")
                raise
        return None if row is None else ResumeRecord(*row)

    def add_failure(
        self, key: str, now: float, *, delay: float, expires_at: float | None, next_at: float
    ) -> ResumeRecord | None:
        """See `Store.add_failure`."""
        keep = keep_until(ResumeRecord(0, 0.0, expires_at, next_at), now, self.retention)
        with self._lock:
            connection = self._connect()
            connection.execute("BEGIN IMMEDIATE")
            try:
                row = connection.execute(
                    f"UPDATE {_TABLE} SET "
                    "delay_so_far = delay_so_far + ?, "
                    "expires_at = coalesce(expires_at, ?), "
                    "next_at = ?, "
                    "keep_until = max(keep_until, ?) "
                    f"WHERE key = ? RETURNING {_COLUMNS}",
                    (delay, expires_at, next_at, keep, key),
                ).fetchone()
                connection.execute("COMMIT")
            except BaseException:
                connection.execute("ROLLBACK")
                raise
        return None if row is None else ResumeRecord(*row)

    def delete(self, key: str) -> None:
        """See `Store.delete`."""
        with self._lock:
            self._connect().execute(f"DELETE FROM {_TABLE} WHERE key = ?", (key,))

    def close(self) -> None:
        """Close this process's connection; the next operation reopens it."""
        with self._lock:
            if self._connection is not None:
                self._connection.close()
                self._connection = None

    def __len__(self) -> int:
        """The number of live records (for operators and tests)."""
        with self._lock:
            row = (
                self._connect()
                .execute(f"SELECT count(*) FROM {_TABLE} WHERE keep_until >= ?", (time.time(),))
                .fetchone()
            )
        return int(row[0])

    def __repr__(self) -> str:
        return f"<SQLiteStore path={str(self.path)!r} retention={self.retention:g}s>"

    def _purge(self, connection: sqlite3.Connection, now: float) -> None:
        connection.execute(f"DELETE FROM {_TABLE} WHERE keep_until < ?", (now,))
