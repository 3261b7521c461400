"""Durable per-call state for resume across restarts: `SQLiteStore`, `RedisStore`, `Store`.

Give a store to a `retrymw.Retrier` or a transport (``store=``) and a resume key to a call
(``with retrymw.resume("job-42"):``, or the request's ``Idempotency-Key`` on the HTTP path): the
call's attempt count, backoff spent and retry-budget expiry then survive a process restart.
See docs/resume.md.
"""

from __future__ import annotations

from .._core.exports import publish
from ._base import Claim as Claim
from ._base import CorruptRecord as CorruptRecord
from ._base import ResumeRecord as ResumeRecord
from ._base import Store as Store
from ._base import StoreError as StoreError
from ._redis import RedisStore as RedisStore
from ._sqlite import SQLiteStore as SQLiteStore

__all__ = [
    "Claim",
    "CorruptRecord",
    "RedisStore",
    "ResumeRecord",
    "SQLiteStore",
    "Store",
    "StoreError",
]

publish(globals(), __all__, __name__)
