"""Fork safety: every lock retrymw owns is replaced by a fresh one in a forked child.

A child forked while another thread holds a lock inherits the lock *held*, but not the thread
that would release it: its first use of the object then deadlocks (8 of 100 forks under load
before this module, for gunicorn/uwsgi ``--preload`` and ``multiprocessing`` fork users).

Every object that owns a lock calls `after_fork_in_child` once, at construction; the module
holds the owners in one `weakref.WeakSet` (an owner's lifetime is its own) and registers a
single ``os.register_at_fork(after_in_child=...)`` hook, which calls each live owner's
``_after_fork_in_child()``. That method replaces the lock and resets whatever belonged to
threads that do not exist in the child (a breaker's probes in flight).

The parent pays nothing at fork time: the locks are not acquired before forking (as
`logging`'s handler locks are not either), so a child may see an update that another thread
had half made. Every field still holds a valid value of its own; the counts of one snapshot may
disagree by the one operation in progress.
"""

from __future__ import annotations

import os
import threading
import weakref
from typing import Protocol

__all__ = ["ForkAware", "ForkSafeLock", "after_fork_in_child"]


class ForkAware(Protocol):
    """An object that can repair itself in a forked child."""

    def _after_fork_in_child(self) -> None:
        """Replace the locks (and drop what other threads held); runs in the child only."""
        ...


_OWNERS: weakref.WeakSet[ForkAware] = weakref.WeakSet()


def after_fork_in_child(owner: ForkAware) -> None:
    """Have ``owner._after_fork_in_child()`` run in every child forked from now on."""
    _OWNERS.add(owner)


def _repair_all() -> None:
    # Only the forking thread exists here, so nothing mutates the set while we iterate.
    for owner in list(_OWNERS):
        owner._after_fork_in_child()


if hasattr(os, "register_at_fork"):  # pragma: no branch - absent only on Windows
    os.register_at_fork(after_in_child=_repair_all)


class ForkSafeLock:
    """A mutual-exclusion lock that every forked child gets back released.

    For the locks off the hot path (registries, label sets, shared per-name objects): a ``with``
    block costs one Python call more than a bare `threading.Lock`.
    """

    __slots__ = ("__weakref__", "_lock")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        after_fork_in_child(self)

    def _after_fork_in_child(self) -> None:
        self._lock = threading.Lock()

    def __enter__(self) -> None:
        self._lock.acquire()

    def __exit__(self, *exc_info: object) -> None:
        self._lock.release()
