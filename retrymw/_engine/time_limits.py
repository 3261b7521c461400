"""The time limit of the blocking work running in this thread: `within` and `remaining`.

An async attempt is cancelled when its time is up. A blocking one cannot be, so the sync driver
runs each bounded attempt `within` its limit (a `ContextVar`: one per thread), and blocking I/O
that knows how (the sync transports' sockets, `retrymw._http.limits`) asks what `remaining`
leaves before every operation. Limits nest: an enclosing one that ends sooner still applies.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

__all__ = ["remaining", "within"]

# time.monotonic() by which the current blocking work must be over; None: no limit.
_ENDS_AT: ContextVar[float | None] = ContextVar("retrymw_sync_deadline", default=None)


@contextmanager
def within(limit: float | None) -> Iterator[None]:
    """Bound the blocking work of this thread inside the block to ``limit`` s (``None``: as is)."""
    if limit is None:
        yield
        return
    ends_at = time.monotonic() + limit
    current = _ENDS_AT.get()
    token = _ENDS_AT.set(ends_at if current is None else min(current, ends_at))
    try:
        yield
    finally:
        _ENDS_AT.reset(token)


def remaining() -> float | None:
    """The seconds the current limit leaves (zero or less once it has passed); ``None``: none."""
    ends_at = _ENDS_AT.get()
    return None if ends_at is None else ends_at - time.monotonic()
